"""plax_numpy: the NumPy reference backend.

Every primitive has an eager kernel over NumPy arrays (the ``impls_*`` modules), and
``compile`` lowers a jaxpr through :mod:`plax.lowering` into a straight-line Python
function over those kernels. It is registered through the ``plax.backends`` entry point
like any third-party backend; nothing in the core imports it.

Its kernel table is public, for other backends and for plugins that add primitives:

* :func:`impls` returns the table (primitive -> ``fn(*arrays, **params)``);
* :func:`register_impl` adds the kernel of a new primitive.
"""
from __future__ import annotations

from typing import Callable


def impls() -> dict:
    """The reference kernels: a dict from primitive to ``fn(*numpy_arrays, **params)``.

    Each kernel takes NumPy arrays (and the primitive's parameters) and returns a NumPy
    array of exactly the shape and dtype the primitive's abstract evaluation gives (a list
    for multi-result primitives). Treat the dict as read-only; add kernels with
    :func:`register_impl`.

    Example:
      >>> import plax_numpy
      >>> from plax.lax import sin_p
      >>> plax_numpy.impls()[sin_p](np.zeros(2, np.float32))
      array([0., 0.], dtype=float32)
    """
    from plax_numpy.backend import load_impls
    return load_impls()


def register_impl(primitive, fn: Callable) -> None:
    """Registers ``fn(*numpy_arrays, **params)`` as the NumPy kernel of ``primitive``.

    A plugin that defines a primitive calls this (or ``Backend.register_kernel`` of the
    NumPy backend object) so eager calls and jit run it on the NumPy backend, and other
    backends' compiled code falls back to it.

    Example:
      >>> import plax_numpy
      >>> from plax.core import Primitive
      >>> my_square_p = Primitive("my_square")
      >>> _ = my_square_p.def_abstract_eval(lambda x: x)
      >>> plax_numpy.register_impl(my_square_p, lambda x: x * x)
      >>> plax.jit(my_square_p.bind, backend="numpy")(jnp.arange(3.0))
      Array([0., 1., 4.], dtype=float32)
    """
    if not callable(fn):
        raise TypeError(f"register_impl expects a callable kernel for {primitive}, got {fn!r}")
    from plax_numpy.backend import load_core_impls
    table = load_core_impls()
    table.load_pending()  # a family's kernels loaded later must not replace fn
    table[primitive] = fn


__all__ = ["impls", "register_impl"]
