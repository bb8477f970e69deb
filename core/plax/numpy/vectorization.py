"""vectorize (with NumPy's ``signature=`` and ``excluded=``), built on ``plax.vmap``: the Python function is traced once, not called per element."""
from __future__ import annotations

import functools
import re
from typing import Callable


from plax.core.trace import get_aval
from plax.numpy.util import asarray_weak, broadcast_shapes, broadcast_to

_DIM = r"\w+"
_CORE = rf"\((?:{_DIM}(?:,{_DIM})*)?\)"
_ARGS = rf"{_CORE}(?:,{_CORE})*"
_SIGNATURE = re.compile(rf"^{_ARGS}->{_ARGS}$")


def _parse_signature(signature: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """``"(m,n),(n)->(m)"`` as ``([("m", "n"), ("n",)], [("m",)])``."""
    sig = signature.replace(" ", "")
    if not _SIGNATURE.match(sig):
        raise ValueError(f"not a valid gufunc signature: {signature}")
    ins, outs = sig.split("->")
    parse = lambda s: [tuple(d for d in grp.split(",") if d)
                       for grp in re.findall(rf"\(({_DIM}(?:,{_DIM})*)?\)", s)]
    return parse(ins), parse(outs)


def vectorize(pyfunc: Callable, *, excluded=frozenset(), signature: str | None = None):
    """A function that maps ``pyfunc`` over the leading (loop) axes of its arguments.

    Unlike ``numpy.vectorize``, ``pyfunc`` is traced with ``vmap`` (it must be written with
    plax operations) and the result is jittable and differentiable.

    Args:
      pyfunc: the function of core-shaped arguments (scalars unless ``signature`` says
        otherwise).
      excluded: positions (ints) and keyword names (strs) of arguments passed through
        unvectorised.
      signature: a generalised ufunc signature such as ``"(n),(n)->()"``, naming the core
        axes of each input and output.

    Returns:
      The vectorised function.

    Example:
      >>> dot = jnp.vectorize(jnp.dot, signature="(n),(n)->()")
      >>> dot(jnp.ones((3, 2)), jnp.ones(2)).shape
      (3,)
    """
    from plax import vmap
    if any(not isinstance(e, (int, str)) for e in excluded):
        raise TypeError(f"excluded must contain only integers and strings, got {excluded!r}")
    in_core, out_core = _parse_signature(signature) if signature is not None else (None, None)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        fixed_kwargs = {k: v for k, v in kwargs.items() if k in excluded}
        mapped_kwargs = {k: v for k, v in kwargs.items() if k not in excluded}
        if mapped_kwargs:
            # keyword arguments are vectorised too: turn them into trailing positions
            names = list(mapped_kwargs)
            nargs = len(args)
            inner = pyfunc

            def pyfunc_pos(*a, **kw):
                return inner(*a[:nargs], **dict(zip(names, a[nargs:])), **kw)
            return vectorize(pyfunc_pos, excluded=excluded, signature=signature)(
                *args, *mapped_kwargs.values(), **fixed_kwargs)
        fixed = {i: a for i, a in enumerate(args) if i in excluded}
        mapped = [asarray_weak(a) if not hasattr(a, "aval") else a
                  for i, a in enumerate(args) if i not in excluded]
        cores = in_core if in_core is not None else [()] * len(mapped)
        if len(cores) != len(mapped):
            raise TypeError(f"wrong number of positional arguments: expected {len(cores)}, got "
                            f"{len(mapped)}")
        sizes: dict[str, int] = {}
        loop_shapes = []
        for x, core in zip(mapped, cores):
            shape = get_aval(x).shape
            if len(shape) < len(core):
                raise ValueError(f"input with shape {shape} does not have enough dimensions "
                                 f"for all core dimensions {core} in signature {signature}")
            core_shape = shape[len(shape) - len(core):] if core else ()
            for name, d in zip(core, core_shape):
                if sizes.setdefault(name, d) != d:
                    raise ValueError(f"inconsistent size for core dimension {name!r}: {d} vs "
                                     f"{sizes[name]}")
            loop_shapes.append(shape[:len(shape) - len(core)])
        loop = broadcast_shapes(*loop_shapes)
        mapped = [broadcast_to(x, loop + get_aval(x).shape[len(ls):])
                  for x, ls in zip(mapped, loop_shapes)]

        def call(*xs):
            it = iter(xs)
            full = [fixed[i] if i in fixed else next(it) for i in range(len(args))]
            out = pyfunc(*full, **fixed_kwargs)
            if out_core is not None:
                _check_outputs(out, out_core, sizes, signature)
            return out

        f = call
        for _ in loop:
            f = vmap(f)
        return f(*mapped)

    return wrapped


def _check_outputs(out, out_core, sizes, signature):
    outs = out if isinstance(out, tuple) else (out,)
    if len(out_core) > 1 and not isinstance(out, tuple):
        raise TypeError(f"output must be a tuple when multiple outputs are expected with "
                        f"signature {signature}")
    if len(outs) != len(out_core):
        raise TypeError(f"wrong number of outputs from the function: expected "
                        f"{len(out_core)}, got {len(outs)}")
    for o, core in zip(outs, out_core):
        shape = get_aval(asarray_weak(o)).shape
        if len(shape) != len(core):
            raise ValueError(f"output shape {shape} does not match core dimensions {core} in "
                             f"signature {signature}")
        for name, d in zip(core, shape):
            if sizes.setdefault(name, d) != d:
                raise ValueError(f"inconsistent size for core dimension {name!r}: {d} vs "
                                 f"{sizes[name]}")

