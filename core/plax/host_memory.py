"""How the process keeps freed host memory for reuse (glibc's ``malloc`` on Linux).

A compiled program allocates its temporaries and outputs with NumPy, i.e. with ``malloc``.
glibc's defaults hand large blocks back to the kernel when they are freed (blocks above a
threshold that adapts to what was freed, up to 32 MiB, are separate ``mmap`` s; free space at
the top of the heap above twice that threshold is trimmed), so a program that frees and
reallocates the same megabytes on every call touches fresh pages on every call: a page fault
and a zeroed page per 4 KiB. Which calls pay depends on the heap's history (a data-parallel
MLP step on one device faulted ~2400 pages per call, the same step on two devices in the same
process none, and the reverse after an unrelated change).

:func:`keep_freed_memory` fixes both thresholds once, when plax compiles its first program:
blocks below :data:`MMAP_THRESHOLD` come from the heap and freed space is kept up to
:data:`TRIM_THRESHOLD`, so later calls reuse pages already mapped. The process's resident size
then stays near its peak instead of shrinking after each call, as with the caching
allocators of other array libraries. Nothing is changed where the user set glibc's own
``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_``, where ``PLAX_KEEP_FREED_MEMORY=0``,
or off glibc.
"""
from __future__ import annotations

import os
import sys

from plax.config import env_flag

#: blocks of fewer bytes come from the heap (glibc's dynamic threshold stops at 32 MiB)
MMAP_THRESHOLD = 32 << 20
#: free space at the top of a heap is returned to the kernel above this many bytes
TRIM_THRESHOLD = 256 << 20

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)
_state: dict = {"decided": False, "applied": False}


def keep_freed_memory() -> bool:
    """Sets glibc's ``malloc`` to keep freed blocks for reuse (once per process; see the
    module docstring). Returns whether the setting is in effect.

    Example:
      >>> from plax import host_memory
      >>> isinstance(host_memory.keep_freed_memory(), bool)
      True
    """
    if _state["decided"]:
        return _state["applied"]
    _state["decided"] = True
    if (not sys.platform.startswith("linux")
            or not env_flag("PLAX_KEEP_FREED_MEMORY", True)
            or "MALLOC_MMAP_THRESHOLD_" in os.environ
            or "MALLOC_TRIM_THRESHOLD_" in os.environ):
        return False
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        glibc = ""
    if not glibc.startswith("glibc"):
        return False  # musl and others: their own policies
    import ctypes
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
          and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1)
    _state["applied"] = ok
    return ok
