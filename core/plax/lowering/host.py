"""Host-side helpers for backends whose kernels are NumPy calls on the host (the NumPy
reference backend, the Numba backend's lone equations)."""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np


@functools.lru_cache(maxsize=None)
def numpy_errors_off() -> tuple[Callable[[], Any], Callable[[Any], None]]:
    """``(enter, leave)``: switch NumPy's floating-point warnings off and back on, so kernels
    give IEEE results (inf, nan) without warnings; ``leave`` takes what ``enter`` returned.

    On NumPy >= 2 the error state is one context variable: setting it to a prebuilt value
    costs a fraction of ``np.errstate`` (about a microsecond), which a jitted tiny function
    would otherwise pay per primitive. Elsewhere it falls back to ``np.seterr``. Suitable as
    an :meth:`plax.lowering.Emitter.guard`.

    Example:
      >>> import numpy as np
      >>> from plax.lowering import numpy_errors_off
      >>> enter, leave = numpy_errors_off()
      >>> token = enter()
      >>> float(np.float32(1) / np.float32(0))
      inf
      >>> leave(token)
    """
    try:
        from numpy._core.umath import _extobj_contextvar, _make_extobj
        ignore_all = _make_extobj(all="ignore")
    except (ImportError, AttributeError, TypeError):
        def enter():
            return np.seterr(all="ignore")

        def leave(old):
            np.seterr(**old)

        return enter, leave
    set_state, reset_state = _extobj_contextvar.set, _extobj_contextvar.reset
    return (lambda: set_state(ignore_all)), reset_state
