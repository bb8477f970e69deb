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


@dataclasses.dataclass(frozen=True)
class CompiledMemoryStats:
    """What ``Compiled.memory_analysis()`` reports, with JAX's field names, in bytes.

    Arguments and outputs are exact; ``temp_size_in_bytes`` is the most bytes of intermediate
    values alive at once, each taken to live from its equation to its last use (an upper
    bound: backends fuse equations and reuse buffers); ``alias_size_in_bytes`` the donated
    inputs that can hold an output of their type; ``peak_memory_in_bytes`` arguments,
    temporaries and outputs alive at once, less the aliased bytes. The ``host_*`` fields are
    0 (plax keeps no separate host memory space for a program).

    Example:
      >>> CompiledMemoryStats(argument_size_in_bytes=16).output_size_in_bytes
      0
    """

    argument_size_in_bytes: int = 0
    output_size_in_bytes: int = 0
    alias_size_in_bytes: int = 0
    temp_size_in_bytes: int = 0
    generated_code_size_in_bytes: int = 0
    peak_memory_in_bytes: int = 0
    host_argument_size_in_bytes: int = 0
    host_output_size_in_bytes: int = 0
    host_alias_size_in_bytes: int = 0
    host_temp_size_in_bytes: int = 0
    host_generated_code_size_in_bytes: int = 0
    serialized_buffer_assignment_proto: bytes = b""


__all__ = ["ArgInfo", "Compiled", "CompiledMemoryStats", "CompilerOptions", "Lowered", "Traced",
           "Wrapped"]
