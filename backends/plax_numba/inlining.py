"""Scalar helpers that LLVM inlines into the kernels calling them, compiled once by numba.

A numba function declared ``inline="always"`` is inlined by numba itself: at every call site
numba deep-copies the helper's IR, types it again and lowers it again, as part of the calling
kernel (``InlineWorker.inline_ir``: ~10% of the CPU time of compiling a sampler's
whole-program kernel, in ``copy.deepcopy`` alone). A plain call costs none of that: numba
compiles the helper once per process for each signature (or loads it from its disk cache)
and links its code into the caller's LLVM module. But LLVM's inliner then weighs each call
against its size threshold, and a call left in a loop keeps the loop from vectorising (sin
and cos loops ran 1.8x slower so).

:func:`inlined` takes the cheap path and keeps the fast code: the helper's compiled function
is marked ``alwaysinline``, so LLVM inlines every call when it optimises the kernel's module,
where the loop vectoriser then sees the helper's body as before. Same operations, no
fast-math either way: the kernels' results are the same bits.
"""
from __future__ import annotations

from typing import Callable

from numba import njit

_ATTRIBUTE = "alwaysinline"


def _mark_always_inline(cres) -> None:
    """Marks the LLVM function of the compiled overload ``cres`` ``alwaysinline`` in the
    module its callers link (``_get_module_for_linking``: made once per library and kept,
    and saved with the overload in numba's disk cache, so a cache-loaded one is marked too)."""
    function = cres.library._get_module_for_linking().get_function(cres.fndesc.llvm_func_name)
    if not is_always_inline(function):
        function.add_function_attribute(_ATTRIBUTE)


def is_always_inline(function) -> bool:
    """Whether an LLVM function is marked ``alwaysinline``.

    Args:
      function: the function, as llvmlite's ``ValueRef`` (``module.get_function(name)``).

    Returns:
      True when its function attributes include ``alwaysinline``.

    Example::

      cres = helper.overloads[(types.float32,)]
      module = cres.library._get_module_for_linking()
      is_always_inline(module.get_function(cres.fndesc.llvm_func_name))   # True
    """
    return _ATTRIBUTE.encode() in b" ".join(function.attributes).split()


def inlined(**options) -> Callable:
    """``numba.njit(**options)`` for a scalar helper that compiled callers inline through
    LLVM rather than through numba's IR (see the module's docstring).

    Args:
      **options: numba's ``njit`` options (``inline`` other than ``"never"`` is refused: that
        is numba's own inlining, which this replaces).

    Returns:
      A decorator making the numba dispatcher; every overload it compiles or loads from
      numba's disk cache is marked ``alwaysinline``.

    Example::

      @inlined(cache=True, nogil=True, error_model="numpy")
      def square_f32(x):
          return np.float32(x * x)
    """
    if options.get("inline", "never") != "never":
        raise ValueError(f"inlined() replaces numba's inline={options['inline']!r}; "
                         "leave the option out")

    def decorate(function):
        dispatcher = njit(**options)(function)
        add_overload = dispatcher.add_overload

        def add_marked_overload(cres, *args, **kwargs):
            _mark_always_inline(cres)
            return add_overload(cres, *args, **kwargs)
        # (numba calls add_overload for each compiled or cache-loaded overload, before it
        # saves a new one to its disk cache, so the saved module carries the mark too)
        dispatcher.add_overload = add_marked_overload
        return dispatcher
    return decorate


#: The decorator of plax's scalar helpers: :func:`inlined` with numba's disk cache, callable
#: without the GIL, and NumPy's error model (``x / 0.0`` is ``inf``, not ZeroDivisionError).
#: Example: ``@scalar_helper`` over ``def square_f32(x): return np.float32(x * x)``.
scalar_helper = inlined(cache=True, nogil=True, error_model="numpy")
