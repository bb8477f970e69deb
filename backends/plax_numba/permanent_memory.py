"""Memory never freed, for what native code reads until the process ends.

Kernels and the builtin functions wrapping them outlive every Python object at interpreter
exit: the module globals are cleared first and the garbage collector then frees what is left
in any order (a ctypes object's buffer included). Data they read by address (a builtin's
method definition, a cell a kernel loads a pointer from) therefore lives here, outside
Python's objects, and is never freed: tens of bytes each, as the engines holding the
kernels' code are never disposed either.
"""
from __future__ import annotations

import ctypes


def permanent_copy(data: bytes) -> int:
    """Copies ``data`` into memory that is never freed (C ``malloc``).

    Args:
      data: the bytes to copy.

    Returns:
      The address of the copy.

    Raises:
      MemoryError: ``malloc`` failed.

    Example::

      address = permanent_copy(ctypes.c_void_p(pointer).value.to_bytes(8, "little"))
    """
    malloc = ctypes.CDLL(None).malloc
    malloc.argtypes, malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
    address = malloc(max(len(data), 1))
    if not address:
        raise MemoryError(f"no memory for {len(data)} bytes that native code reads")
    ctypes.memmove(address, data, len(data))
    return address
