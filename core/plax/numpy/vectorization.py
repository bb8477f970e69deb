"""vectorize (with NumPy's ``signature=`` and ``excluded=``), frompyfunc and the ufunc class,
all built on ``plax.vmap``: the Python function is traced once, not called per element."""
from __future__ import annotations

import functools
import re
from typing import Any, Callable

import numpy as np

from plax.core.trace import get_aval
from plax.numpy.util import asarray_weak, broadcast_shapes, broadcast_to, reject_out

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


class ufunc:
    """A universal function from a scalar Python function (see :func:`frompyfunc`).

    Calling it broadcasts its arguments and maps the function with vmap; ``outer``,
    ``reduce``, ``accumulate`` and ``at`` follow NumPy's ufunc methods (for functions of two
    arguments and one output).

    Example:
      >>> add = jnp.ufunc(lambda x, y: x + y, 2, 1, identity=0)
      >>> add.reduce(jnp.arange(4))
      Array(6, dtype=int32)
    """

    def __init__(self, func: Callable, /, nin: int, nout: int, *, name: str | None = None,
                 nargs: int | None = None, identity: Any = None):
        self._func = func
        self.nin, self.nout = int(nin), int(nout)
        self.nargs = self.nin if nargs is None else int(nargs)
        self.identity = identity
        self.__name__ = name if name is not None else getattr(func, "__name__", "ufunc")
        self._vectorized = vectorize(func)

    def __repr__(self) -> str:
        return f"<jnp.ufunc '{self.__name__}'>"

    def __call__(self, *args, out=None, where=None):
        reject_out(out, repr(self), where=where)
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__}() takes {self.nin} positional argument(s) but "
                            f"{len(args)} were given")
        return self._vectorized(*args)

    def _binary(self, method: str) -> None:
        if self.nin != 2 or self.nout != 1:
            raise ValueError(f"{method} only supported for binary ufuncs with one output; "
                             f"{self.__name__} has nin={self.nin}, nout={self.nout}")

    def outer(self, A, B):
        """``self(a, b)`` for every pair of elements of ``A`` and ``B`` (shape A.shape + B.shape)."""
        self._binary("outer")
        A, B = asarray_weak(A), asarray_weak(B)
        na, nb = get_aval(A).ndim, get_aval(B).ndim
        from plax import lax
        A = lax.reshape(A, get_aval(A).shape + (1,) * nb)
        return self(A, B)

    def reduce(self, a, axis: int | None = 0, dtype=None, out=None, keepdims: bool = False,
               initial=None, where=None):
        """Folds the function over ``axis`` (left to right), starting from ``initial``."""
        from plax import lax
        from plax.numpy.shape_ops import moveaxis, ravel
        from plax.numpy.util import canonicalize_axis
        self._binary("reduce")
        reject_out(out, f"{self.__name__}.reduce()", where=where)
        a = asarray_weak(a)
        if dtype is not None:
            a = lax.convert_element_type(a, np.dtype(dtype))
        nd = get_aval(a).ndim
        if axis is None:
            a, ax = ravel(a), 0
        else:
            ax = canonicalize_axis(axis, nd)
        xs = moveaxis(a, ax, 0)
        n = get_aval(xs).shape[0]
        if initial is None:
            initial = self.identity
        if n == 0 and initial is None:
            raise ValueError(f"zero-size array to reduction operation {self.__name__} which "
                             f"has no identity")
        acc = xs[0] if initial is None else self(lax.full(get_aval(xs).shape[1:], initial,
                                                          get_aval(xs).dtype), xs[0]) if n else \
            lax.full(get_aval(xs).shape[1:], initial, get_aval(xs).dtype)
        for i in range(1, n):
            acc = self(acc, xs[i])
        if keepdims:
            acc = lax.expand_dims(acc, tuple(range(nd)) if axis is None else (ax,))
        return acc

    def accumulate(self, a, axis: int = 0, dtype=None, out=None):
        """The running fold along ``axis`` (``accumulate(add)`` is cumsum)."""
        from plax import lax
        from plax.numpy.shape_ops import moveaxis, stack
        from plax.numpy.util import canonicalize_axis
        self._binary("accumulate")
        reject_out(out, f"{self.__name__}.accumulate()")
        a = asarray_weak(a)
        if dtype is not None:
            a = lax.convert_element_type(a, np.dtype(dtype))
        ax = canonicalize_axis(axis, get_aval(a).ndim)
        xs = moveaxis(a, ax, 0)
        n = get_aval(xs).shape[0]
        if n == 0:
            return a
        acc, outs = xs[0], [xs[0]]
        for i in range(1, n):
            acc = self(acc, xs[i])
            outs.append(acc)
        return moveaxis(stack(outs, 0), 0, ax)

    def at(self, a, indices, b=None, *, inplace: bool = True):
        """``a`` with ``self`` applied at ``indices`` (``inplace=False`` is required)."""
        if inplace:
            raise ValueError("jnp.ufunc.at cannot modify arrays in-place, because JAX arrays "
                             "are immutable. Pass inplace=False to instead return an updated "
                             "array.")
        a = asarray_weak(a)
        cur = a[indices]
        new = self(cur) if b is None else self(cur, b)
        return a.at[indices].set(new)

    def reduceat(self, a, indices, axis: int = 0, dtype=None, out=None):
        """Not supported by plax."""
        raise NotImplementedError("jnp.ufunc.reduceat is not supported by plax")


def frompyfunc(func: Callable, /, nin: int, nout: int, *, identity: Any = None) -> ufunc:
    """A :class:`ufunc` from a scalar function of ``nin`` inputs and ``nout`` outputs.

    Example:
      >>> jnp.frompyfunc(lambda x, y: x * y, 2, 1)(jnp.arange(3), 2)
      Array([0, 2, 4], dtype=int32)
    """
    return ufunc(func, nin, nout, identity=identity)
