"""The compile worker's side of the numba-free kernel loader: a kernel as native object code.

After numba has compiled a kernel (:func:`plax_numba.cache.compile_for_cache`: in a compile
worker, or in the program for a synchronous compilation; without numba's own Python wrappers
where this entry point replaces them), ``<kernel>.<signature>.native`` is written
(:func:`emit`): a pickle of

* the object code of numba's compiled library for that signature (the kernel, the helpers it
  calls, numba's runtime functions it inlines), and the kernel's symbol in it;
* the object code of a small CPython entry point written here in LLVM IR: a
  ``METH_FASTCALL`` function that checks each argument (an exact ``ndarray`` of the planned
  dtype number and rank, C-contiguous and aligned; a number for a scalar; anything else
  raises ``TypeError``), builds numba's array structures from the array objects, releases
  the GIL, calls the kernel with numba's calling convention (built by numba's own lowering
  helpers) through a pointer the loader sets (so kernels of the same argument and result
  types share one entry object, :func:`_entry`), raises the kernel's exception as numba's
  wrapper would, and boxes its results: arrays through NRT's
  ``NRT_adapt_ndarray_to_python_acqref`` (the array owns the kernel's allocation; an input
  returned as it is comes back as the same object), scalars as Python numbers, a tuple of
  them; None for a kernel writing into outputs its step allocated;
* the object code of each compiled-once function the kernel calls
  (:mod:`plax_numba.compiled_once`: ``lgamma_f32_once``, ``igamma_f32``, ...), which the
  loader links once per process under the symbol the kernel calls it by
  (:func:`compiled_once_objects`);
* the undefined symbols of both objects (read from their ELF symbol tables), which the
  program's loader (:mod:`plax_numba.native_loader`) resolves before linking, so an
  unresolvable one falls back to numba's loading instead of aborting in LLVM's linker;
  and the target and CPU the code was compiled for (:func:`host`).

A kernel whose arguments or results the entry point does not handle (complex numbers,
records, ...), or whose code runs Python objects (numba's object mode), gets an artifact
saying why (:func:`not_emitted`), and the program loads it
through numba, as before, counting the reason.
"""
from __future__ import annotations

import hashlib
import pickle
import struct

import numpy as np

from plax.atomic_file import write_atomically

#: bumped when the artifact's layout or the entry point's IR changes (old files are ignored)
FORMAT = 9

#: what a kernel's code calls to run Python objects: numba's object mode (``with objmode``),
#: whose objects live in numba's Environment, set up only by numba's loader
_OBJECT_MODE_SYMBOLS = frozenset({"PyObject_CallFunctionObjArgs", "PyObject_Call",
                                  "PyObject_CallObject", "PyObject_CallFunction"})

# PyArrayObject / PyArray_Descr field offsets (64-bit CPython, NumPy 1.x and 2.x); the loader
# checks them against the running NumPy before using an entry point
ARRAY_DATA, ARRAY_NDIM, ARRAY_DIMS, ARRAY_STRIDES, ARRAY_DESCR, ARRAY_FLAGS = (
    16, 24, 32, 40, 56, 64)
DESCR_TYPE_NUM = 28
C_CONTIGUOUS_ALIGNED = 0x1 | 0x100


class NotEmitted(Exception):
    """The kernel is not of a kind the numba-free loader handles (the message says why)."""


def artifact_path(marker: str) -> str:
    """The native artifact's path beside a kernel's on-disk marker (``….ok``)."""
    return marker[:-3] + ".native"


def emit(text: str, arg_types: list, path: str, kernel=None) -> None:
    """Writes the native artifact of the kernel of module ``text`` for ``arg_types`` to
    ``path`` (atomically), after numba compiled the kernel (in a compile worker, or in the
    program for a synchronous compilation).

    Args:
      text: the kernel's module text (:func:`plax_numba.cache.module_source`).
      arg_types: the plan's argument types.
      path: where to write it (:func:`artifact_path`).
      kernel: the numba dispatcher compiled for ``arg_types`` (default: the module's own,
        :func:`plax_numba.cache.load_kernel`); :func:`plax_numba.cache.compile_for_cache`
        passes one compiled without numba's Python wrappers, which this entry point
        replaces.

    Raises:
      NotEmitted: the kernel is not of a supported kind (nothing is written).

    Example::

      emit(text, plan.arg_types, artifact_path(marker))
    """
    from plax_numba import cache
    kernel = kernel if kernel is not None else cache.load_kernel(text)
    overload = kernel.overloads.get(cache.numba_signature(arg_types))
    if overload is None:
        raise NotEmitted("not compiled for these argument types")
    kernel_object = overload.library._get_compiled_object()
    name, entry_object, descrs = _entry(kernel.targetctx, overload, arg_types)
    (u1, d1), (u2, d2) = symbols(kernel_object), symbols(entry_object)
    calls_python = sorted(set(u1) & _OBJECT_MODE_SYMBOLS)
    if calls_python:
        # numba's object mode: the code calls Python objects numba unpickles from the
        # kernel's Environment, which only numba's own loader fills in; linked here it would
        # raise "missing Environment" at its first call. (plax's kernels reach NumPy natively
        # instead: plax_numba.numpy_calls calls its ufunc loops by symbol.)
        raise NotEmitted("object mode (calls Python through numba's Environment: "
                         + " ".join(calls_python) + ")")
    undefined = sorted((set(u1) | set(u2)) - set(d1) - set(d2))
    _write(path, {"format": FORMAT, "objects": [kernel_object, entry_object], "entry": name,
                  "kernel": overload.fndesc.mangled_name, "undefined": undefined,
                  "compiled_once": compiled_once_objects(undefined), "descrs": descrs,
                  "host": host()})


#: entry points built in this process: (argument types, numba's argument and result
#: types) -> (symbol, object code, the results' dtype globals)
_entries: dict = {}


def _entry(context, overload, arg_types: list) -> tuple[str, bytes, dict]:
    """The entry point for ``overload``'s kernel: ``(symbol, object code, the results'
    dtype globals)``. It calls the kernel through the pointer ``<symbol>_kernel``, which the
    loader sets, so one object serves every kernel of the same argument and result types
    (kernels of one shape of program differ only in their loop bodies): built once per
    process for each (the build is ~25 ms of IR and code generation; most kernels of a
    program, or of a test session, share one)."""
    fndesc = overload.fndesc
    key = (repr(arg_types), str(fndesc.argtypes), str(fndesc.restype))
    found = _entries.get(key)
    if found is None:
        name = "plax_entry_" + hashlib.sha256(repr(key).encode()).hexdigest()[:16]
        found = _entries[key] = (name, *_entry_object(name, context, overload, arg_types))
    return found


def compiled_once_objects(undefined) -> dict:
    """The object code of every compiled-once function (:mod:`plax_numba.compiled_once`)
    among the symbols ``undefined``, and of those their code calls in turn: symbol ->
    ``{"object": ELF object, "function": the compiled function's name in it, "undefined": the
    object's undefined symbols}``. The loader links each once per process and registers its
    address under the symbol (:func:`plax_numba.native_loader.load`), so a kernel calling
    ``lgamma_f32_once`` loads without numba."""
    from plax_numba import compiled_once
    found: dict = {}
    pending = [s for s in undefined if s.startswith(compiled_once.SYMBOL_PREFIX)]
    while pending:
        symbol = pending.pop()
        if symbol in found:
            continue
        code, function = compiled_once.object_code(symbol)
        calls, defines = symbols(code)
        missing = sorted(set(calls) - set(defines))
        found[symbol] = {"object": code, "function": function, "undefined": missing}
        pending += [s for s in missing if s.startswith(compiled_once.SYMBOL_PREFIX)]
    return found


def has_code(path: str) -> bool:
    """Whether the artifact at ``path`` holds a kernel's code (not one saying why there is
    none, nor an unreadable one or one of another format)."""
    try:
        with open(path, "rb") as f:
            artifact = pickle.load(f)
    except Exception:  # noqa: BLE001 - absent or damaged: no code
        return False
    return (isinstance(artifact, dict) and artifact.get("format") == FORMAT
            and "objects" in artifact)


def takes_arguments(arg_types: list) -> bool:
    """Whether the entry point :func:`emit` writes takes arguments of ``arg_types`` (a
    plan's: arrays, real and boolean scalars, extents; not complex scalars)."""
    return all(t[0] != "scalar" or np.dtype(t[1]).kind in "biuf" for t in arg_types)


def host() -> tuple:
    """What the object code is specific to: the target triple, the CPU's name and features
    (numba compiles for the host CPU; a cache directory shared with another machine must not
    run its code here). The loader compares it with its own."""
    import llvmlite.binding as llvm
    return (llvm.get_process_triple(), llvm.get_host_cpu_name(),
            llvm.get_host_cpu_features().flatten())


def not_emitted(path: str, err: BaseException) -> None:
    """Writes at ``path`` an artifact saying why the kernel has no native form (``err``), so
    the program's loader counts the reason (:data:`plax_numba.native_loader.fallbacks`)."""
    reason = (str(err) if isinstance(err, NotEmitted)
              else f"emission failed: {type(err).__name__}: {err}")
    _write(path, {"format": FORMAT, "unsupported": reason})


def _write(path: str, artifact: dict) -> None:
    write_atomically(path, pickle.dumps(artifact, protocol=pickle.HIGHEST_PROTOCOL))


def _entry_object(name: str, context, overload, arg_types: list) -> tuple[bytes, dict]:
    """The object code of the ``METH_FASTCALL`` entry point ``name`` calling the kernel's
    compiled function with numba's calling convention (built with numba's own lowering
    helpers, so the argument packing is numba's); and the globals the loader fills with the
    results' dtype objects (global name -> dtype string)."""
    from llvmlite import ir
    import llvmlite.binding as llvm
    from numba.core import cgutils, types
    from numba.np.arrayobj import make_array, populate_array
    fndesc = overload.fndesc
    argtypes, restype = list(fndesc.argtypes), fndesc.restype
    if isinstance(restype, (types.Integer, types.NoneType)):
        results = None
    elif isinstance(restype, types.BaseTuple) and all(
            isinstance(t, (types.Array, types.Number, types.Boolean)) for t in restype):
        results = list(restype)
    else:
        raise NotEmitted(f"the kernel returns {restype}")
    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    obj = i8.as_pointer()
    module = ir.Module(name=name)
    module.triple = llvm.get_process_triple()

    def slot(gname):
        g = ir.GlobalVariable(module, obj, name=gname)
        g.initializer = ir.Constant(obj, None)
        return g
    ndarray_type = slot(name + "_ndarray_type")
    callee_type = context.call_conv.get_function_type(restype, argtypes)
    kernel_slot = slot(name + "_kernel")  # the kernel's address, set by the loader

    def declare(fname, ret, args):
        return ir.Function(module, ir.FunctionType(ret, args), name=fname)
    set_string = declare("PyErr_SetString", ir.VoidType(), [obj, obj])
    occurred = declare("PyErr_Occurred", obj, [])
    as_double = declare("PyFloat_AsDouble", ir.DoubleType(), [obj])
    as_ssize = declare("PyNumber_AsSsize_t", i64, [obj, obj])
    as_index = declare("PyNumber_Index", obj, [obj])
    as_ulong = declare("PyLong_AsUnsignedLongLongMask", i64, [obj])
    is_true = declare("PyObject_IsTrue", i32, [obj])
    decref = declare("Py_DecRef", ir.VoidType(), [obj])
    incref = declare("Py_IncRef", ir.VoidType(), [obj])
    save = declare("PyEval_SaveThread", obj, [])
    restore = declare("PyEval_RestoreThread", ir.VoidType(), [obj])
    tuple_new = declare("PyTuple_New", obj, [i64])
    tuple_set = declare("PyTuple_SetItem", i32, [obj, i64, obj])
    from_double = declare("PyFloat_FromDouble", obj, [ir.DoubleType()])
    from_long = declare("PyLong_FromLongLong", obj, [i64])
    from_ulong = declare("PyLong_FromUnsignedLongLong", obj, [i64])
    from_bool = declare("PyBool_FromLong", obj, [i64])
    to_array = declare("NRT_adapt_ndarray_to_python_acqref", obj, [obj, obj, i32, i32, obj])
    release = declare("NRT_MemInfo_release", ir.VoidType(), [obj])
    # numba's convention, which the kernel's own code follows too: the symbol PyExc_X is the
    # exception class itself (not CPython's variable pointing to it; the loader registers it)
    type_error = ir.GlobalVariable(module, i8, name="PyExc_TypeError")
    none = ir.GlobalVariable(module, i8, name="_Py_NoneStruct")

    def cstring(gname, message):
        data = bytearray(message.encode() + b"\0")
        g = ir.GlobalVariable(module, ir.ArrayType(i8, len(data)), name=gname)
        g.global_constant = True
        g.initializer = ir.Constant(ir.ArrayType(i8, len(data)), data)
        return g
    bad_args = cstring(name + "_bad_args", (
        f"plax_numba: a native kernel was called with arguments other than those it was "
        f"compiled for: {_describe(arg_types)} (arrays C-contiguous and aligned)"))

    fn = ir.Function(module, ir.FunctionType(obj, [obj, obj.as_pointer(), i64]), name=name)
    _, argv, nargs = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    fail_block = fn.append_basic_block("fail")
    type_block = fn.append_basic_block("bad_type")

    def field(base, offset, ty):
        p = b.gep(base, [ir.Constant(i64, offset)])
        return b.load(b.bitcast(p, ty.as_pointer()))

    def check(cond):
        ok = fn.append_basic_block("ok")
        b.cbranch(cond, ok, type_block)
        b.position_at_end(ok)

    def failed_if(cond):
        with b.if_then(cond, likely=False):
            with b.if_then(b.icmp_unsigned("!=", b.call(occurred, []),
                                           ir.Constant(obj, None))):
                b.branch(fail_block)

    check(b.icmp_signed("==", nargs, ir.Constant(i64, len(arg_types))))
    values = []
    for i, (t, nb_type) in enumerate(zip(arg_types, argtypes)):
        arg = b.load(b.gep(argv, [ir.Constant(i64, i)]))
        if t[0] in ("array", "rarray"):
            ndim = t[2]
            check(b.icmp_unsigned("==", field(arg, 8, obj), b.load(ndarray_type)))
            check(b.icmp_signed("==", field(arg, ARRAY_NDIM, i32), ir.Constant(i32, ndim)))
            descr = field(arg, ARRAY_DESCR, obj)
            check(b.icmp_signed("==", field(descr, DESCR_TYPE_NUM, i32),
                                ir.Constant(i32, np.dtype(t[1]).num)))
            flags = b.and_(field(arg, ARRAY_FLAGS, i32), ir.Constant(i32, C_CONTIGUOUS_ALIGNED))
            check(b.icmp_signed("==", flags, ir.Constant(i32, C_CONTIGUOUS_ALIGNED)))
            dims = b.bitcast(field(arg, ARRAY_DIMS, obj), i64.as_pointer())
            strides = b.bitcast(field(arg, ARRAY_STRIDES, obj), i64.as_pointer())
            ary = make_array(nb_type)(context, b)
            data_type = ary.data.type
            populate_array(
                ary, data=b.bitcast(field(arg, ARRAY_DATA, obj), data_type),
                shape=[b.load(b.gep(dims, [ir.Constant(i64, d)])) for d in range(ndim)],
                strides=[b.load(b.gep(strides, [ir.Constant(i64, d)])) for d in range(ndim)],
                itemsize=context.get_constant(types.intp, np.dtype(t[1]).itemsize),
                meminfo=None, parent=b.bitcast(arg, ary.parent.type))
            values.append(ary._getvalue())
            continue
        ty = context.get_value_type(nb_type)
        if isinstance(nb_type, types.Boolean):
            v = b.call(is_true, [arg])
            failed_if(b.icmp_signed("<", v, ir.Constant(i32, 0)))
            v = b.icmp_signed("!=", v, ir.Constant(i32, 0))
            v = b.zext(v, ty) if ty.width > 1 else v
        elif isinstance(nb_type, types.Float):
            v = b.call(as_double, [arg])
            failed_if(b.fcmp_ordered("==", v, ir.Constant(ir.DoubleType(), -1.0)))
            v = b.fptrunc(v, ty) if isinstance(ty, ir.FloatType) else v
        elif isinstance(nb_type, types.Integer) and not nb_type.signed and nb_type.bitwidth == 64:
            index = b.call(as_index, [arg])
            with b.if_then(b.icmp_unsigned("==", index, ir.Constant(obj, None)), likely=False):
                b.branch(fail_block)
            v = b.call(as_ulong, [index])
            b.call(decref, [index])
            failed_if(b.icmp_signed("==", v, ir.Constant(i64, -1)))
        elif isinstance(nb_type, types.Integer):
            v = b.call(as_ssize, [arg, ir.Constant(obj, None)])
            failed_if(b.icmp_signed("==", v, ir.Constant(i64, -1)))
            v = b.trunc(v, ty) if ty.width < 64 else v
        else:
            raise NotEmitted(f"an argument of type {nb_type}")
        values.append(v)
    state = b.call(save, [])
    callee = b.bitcast(b.load(kernel_slot), callee_type.as_pointer())
    status, retval = context.call_conv.call_function(b, callee, restype, argtypes, values)
    b.call(restore, [state])
    with b.if_then(b.not_(status.is_ok), likely=False):
        # the kernel's exception raised as numba's own wrapper raises it (a user exception
        # is unpickled by numba_unpickle, which imports numba.core.serialize then: only on
        # this path)
        context.call_conv.raise_error(b, context.get_python_api(b), status)
        b.branch(fail_block)
    descrs = {}
    if results is None:
        b.call(incref, [none])
        b.ret(none)
    else:
        out = b.call(tuple_new, [ir.Constant(i64, len(results))])
        with b.if_then(b.icmp_unsigned("==", out, ir.Constant(obj, None)), likely=False):
            b.branch(fail_block)
        for j, rt in enumerate(results):
            value = b.extract_value(retval, j)
            if isinstance(rt, types.Array):
                gname = f"{name}_descr_{j}"
                descrs[gname] = np.dtype(str(rt.dtype)).str
                stored = cgutils.alloca_once_value(b, value)
                item = b.call(to_array, [b.bitcast(stored, obj), b.load(ndarray_type),
                                         ir.Constant(i32, rt.ndim), ir.Constant(i32, 1),
                                         b.load(slot(gname))])
                meminfo = b.extract_value(value, 0)
                with b.if_then(b.icmp_unsigned("!=", meminfo, ir.Constant(meminfo.type, None))):
                    b.call(release, [b.bitcast(meminfo, obj)])
            elif isinstance(rt, types.Boolean):
                item = b.call(from_bool, [b.zext(value, i64)])
            elif isinstance(rt, types.Float):
                item = b.call(from_double, [b.fpext(value, ir.DoubleType())
                                            if rt.bitwidth < 64 else value])
            elif isinstance(rt, types.Integer):
                wide = (value if rt.bitwidth == 64 else
                        b.sext(value, i64) if rt.signed else b.zext(value, i64))
                item = b.call(from_long if rt.signed else from_ulong, [wide])
            else:
                raise NotEmitted(f"a result of type {rt}")
            with b.if_then(b.icmp_unsigned("==", item, ir.Constant(obj, None)), likely=False):
                b.call(decref, [out])
                b.branch(fail_block)
            b.call(tuple_set, [out, ir.Constant(i64, j), item])
        b.ret(out)
    b.position_at_end(type_block)
    b.call(set_string, [type_error, b.bitcast(bad_args, obj)])
    b.branch(fail_block)
    b.position_at_end(fail_block)
    b.ret(ir.Constant(obj, None))

    mod = llvm.parse_assembly(str(module))
    mod.verify()
    return overload.library.codegen._tm.emit_object(mod), descrs


def _describe(arg_types: list) -> str:
    return ", ".join(f"{t[1]} array of rank {t[2]}" if t[0] in ("array", "rarray") else
                     f"{t[1]} scalar" if t[0] == "scalar" else "an integer"
                     for t in arg_types)


def symbols(elf: bytes) -> tuple[list[str], list[str]]:
    """The names of the undefined and of the defined symbols of the ELF64 relocatable
    object ``elf``: ``(undefined, defined)``.

    Raises:
      NotEmitted: not a little-endian ELF64 object.
    """
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise NotEmitted("the object code is not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize)
                for i in range(shnum)]
    undefined, defined = [], []
    for sh in sections:
        if sh[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sections[sh[6]]
        str_off = strtab[4]
        for k in range(sh[5] // sh[9]):
            st_name, _info, _other, st_shndx, _value, _size = struct.unpack_from(
                "<IBBHQQ", elf, sh[4] + k * sh[9])
            if st_name:
                end = elf.index(b"\0", str_off + st_name)
                name = elf[str_off + st_name:end].decode()
                (undefined if st_shndx == 0 else defined).append(name)
    return undefined, defined
