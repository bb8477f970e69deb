"""The addresses of NumPy's own ufunc inner loops, as symbols generated kernels call.

Some kernels must give exactly NumPy's bits: ``log1p`` (:func:`plax_numba.codegen.reference_only`)
runs NumPy's SIMD loops on AVX-512 machines, which no scalar form compiled by numba
reproduces, and the samplers of :mod:`plax.random` compute their inverse error function from
it. So a compiled kernel calls NumPy's loop itself: the same C function ``np.log1p`` runs,
through the ufunc's loop table (``PyUFuncObject.functions``, the loop NumPy's type
resolution picks for an exact dtype match), with the same lengths and strides, hence the
same bits. The kernel names the loop by an external symbol (:func:`symbol`); this module
gives LLVM's linker its address (:func:`register`), in the compile worker, in a process
that loads kernels through numba, and in one that links them with
:mod:`plax_numba.native_loader` (which imports no numba: neither does this module).

An inner loop's signature is ``void loop(char **args, npy_intp const *dimensions,
npy_intp const *steps, void *data)``; ``data`` is the ufunc's entry for the loop (NULL for
NumPy's dedicated float loops, the scalar function for its generic ones), which kernels
read from a cell registered under :func:`data_symbol`. Calling it needs no GIL.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from plax_numba.permanent_memory import permanent_copy

#: (ufunc name, dtype char) of each loop kernels may call
LOOPS = (("log1p", "f"), ("log1p", "d"))

_PREFIX = "plax_numpy_loop_"
_lock = threading.Lock()
_addresses: dict = {}   # symbol -> (loop address, data pointer)
_data_cells: dict = {}  # data symbol -> address of the never-freed cell holding the pointer


def symbol(ufunc: str, char: str) -> str:
    """The external symbol naming NumPy's ``ufunc`` loop for dtype char ``char``
    (``symbol("log1p", "f")`` is ``"plax_numpy_loop_log1p_f"``)."""
    return f"{_PREFIX}{ufunc}_{char}"


def data_symbol(ufunc: str, char: str) -> str:
    """The external symbol of a pointer-sized variable holding the loop's ``data`` argument
    (:func:`symbol` with ``_data`` appended): kernels pass what it holds."""
    return symbol(ufunc, char) + "_data"


def is_loop_symbol(name: str) -> bool:
    """Whether ``name`` is a symbol of this module (:func:`symbol`)."""
    return name.startswith(_PREFIX)


class _UFuncHead(ctypes.Structure):
    # the head of NumPy's PyUFuncObject (numpy/ufuncobject.h), unchanged since NumPy 1.0;
    # checked against the ufunc's Python attributes before use (_loop)
    _fields_ = [("ob_refcnt", ctypes.c_ssize_t), ("ob_type", ctypes.c_void_p),
                ("nin", ctypes.c_int), ("nout", ctypes.c_int), ("nargs", ctypes.c_int),
                ("identity", ctypes.c_int), ("functions", ctypes.c_void_p),
                ("data", ctypes.c_void_p), ("ntypes", ctypes.c_int),
                ("reserved1", ctypes.c_int), ("name", ctypes.c_void_p),
                ("types", ctypes.c_void_p)]


def _loop(ufunc_name: str, char: str) -> tuple[int, int]:
    """NumPy's loop for ``ufunc_name`` on dtype ``char`` (all operands): its address and
    data pointer. Raises RuntimeError where the ufunc's struct is not as expected."""
    ufunc = getattr(np, ufunc_name)
    if not isinstance(ufunc, np.ufunc):
        raise RuntimeError(f"np.{ufunc_name} is not a ufunc")
    head = _UFuncHead.from_address(id(ufunc))
    # the integer fields first: no pointer of the struct is followed before they agree
    # (a NumPy whose struct changed must give a RuntimeError, never a crash)
    if (head.nin != ufunc.nin or head.nout != ufunc.nout or head.ntypes != ufunc.ntypes
            or not head.name or ctypes.string_at(head.name, len(ufunc_name) + 1)
            != ufunc_name.encode() + b"\0"):
        raise RuntimeError(f"NumPy's ufunc struct for {ufunc_name} is not the expected one")
    nargs = ufunc.nin + ufunc.nout
    typenums = ctypes.string_at(head.types, head.ntypes * nargs)
    want = bytes([np.dtype(char).num]) * nargs
    # NumPy's type resolution takes the first loop matching the operands' dtypes exactly
    for i in range(head.ntypes):
        if typenums[i * nargs:(i + 1) * nargs] == want:
            if ufunc.types[i] != char * ufunc.nin + "->" + char * ufunc.nout:
                break  # the struct's table and the ufunc's own listing disagree
            functions = (ctypes.c_void_p * head.ntypes).from_address(head.functions)
            data = (ctypes.c_void_p * head.ntypes).from_address(head.data)
            if not functions[i]:
                break
            return functions[i], data[i] or 0
    raise RuntimeError(f"NumPy has no plain {ufunc_name} loop for dtype {char!r}")


def addresses() -> dict:
    """Every loop's symbol -> (loop address, data pointer), computed once per process.

    Raises:
      RuntimeError: NumPy's ufunc struct is not the expected one (kernels calling the loops
        then cannot be linked; the caller falls back to NumPy's kernels).
    """
    with _lock:
        if not _addresses:
            _addresses.update({symbol(u, c): _loop(u, c) for u, c in LOOPS})
        return dict(_addresses)


def register(llvm) -> None:
    """Gives LLVM's linker (``llvm``: ``llvmlite.binding``) every loop's address under its
    symbol, and the address of a cell holding its data pointer under its data symbol
    (:func:`data_symbol`), so code calling them links. Idempotent.

    Raises:
      RuntimeError: NumPy's ufunc struct is not the expected one (:func:`addresses`).

    Example::

      import llvmlite.binding as llvm
      register(llvm)   # then a kernel calling plax_numpy_loop_log1p_f links
    """
    table = addresses()
    for ufunc, char in LOOPS:
        address, data = table[symbol(ufunc, char)]
        with _lock:
            # (NumPy's generic loops, e.g. PyUFunc_f_f, take the scalar function as data.)
            # Kernels read the cell until the process ends, a daemon thread's kernel even
            # after the module's globals are cleared at exit: so not a ctypes object, which
            # the collector may free first (see plax_numba.permanent_memory)
            name = data_symbol(ufunc, char)
            if name not in _data_cells:
                _data_cells[name] = permanent_copy(bytes(ctypes.c_void_p(data or None)))
            cell = _data_cells[name]
        llvm.add_symbol(symbol(ufunc, char), address)
        llvm.add_symbol(name, cell)
