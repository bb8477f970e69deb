"""The stages of ahead-of-time compilation, as ``jax.stages`` names them.

``plax.jit(f)`` is a :class:`Wrapped`; ``.trace(*args)`` and ``.lower(*args)`` give a
:class:`Lowered` (plax has one IR, the jaxpr, so tracing and lowering are one stage and
:class:`Traced` is the same class); ``.compile()`` gives a :class:`Compiled`.

Example:
  >>> import plax
  >>> from plax import numpy as jnp, stages
  >>> lowered = plax.jit(jnp.sin).lower(1.0)
  >>> isinstance(lowered, stages.Lowered), isinstance(lowered.compile(), stages.Compiled)
  (True, True)
"""
from __future__ import annotations

import dataclasses
from typing import Any, Protocol, Union, runtime_checkable

from plax.core import ShapeDtypeStruct
from plax.transforms.jit import Compiled, Lowered

#: plax traces and lowers in one step: ``jit(f).trace(...)`` returns a :class:`Lowered`.
Traced = Lowered

#: the type of compiler options (accepted by JAX's ``Lowered.compile``; plax has none).
CompilerOptions = dict[str, Union[str, bool]]


@runtime_checkable
class Wrapped(Protocol):
    """A function wrapped by ``jit``: callable, and traced or lowered for given arguments.

    Example:
      >>> isinstance(plax.jit(jnp.sin), Wrapped)
      True
    """

    def __call__(self, *args, **kwargs) -> Any: ...

    def trace(self, *args, **kwargs) -> Lowered: ...

    def lower(self, *args, **kwargs) -> Lowered: ...


@dataclasses.dataclass(frozen=True)
class ArgInfo:
    """One argument of a lowered function: its abstract value and whether it is donated.

    Args:
      _aval: the argument's abstract value (a ShapedArray).
      donated: whether its buffer is donated.

    Example:
      >>> from plax.core import ShapedArray
      >>> import numpy as np
      >>> ArgInfo(ShapedArray((2,), np.dtype("float32")), False).shape
      (2,)
    """

    _aval: Any
    donated: bool

    @property
    def shape(self) -> tuple[int, ...]:
        return self._aval.shape

    @property
    def dtype(self):
        return self._aval.dtype

    def as_shape_dtype_struct(self) -> ShapeDtypeStruct:
        """The argument as a ShapeDtypeStruct."""
        return ShapeDtypeStruct(self._aval.shape, self._aval.dtype,
                                weak_type=getattr(self._aval, "weak_type", False))


__all__ = ["ArgInfo", "Compiled", "CompilerOptions", "Lowered", "Traced", "Wrapped"]
