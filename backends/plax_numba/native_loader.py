"""Loads compiled kernels into the program's process without importing numba.

The compile worker writes, beside numba's cache entry, a kernel's native artifact
(:mod:`plax_numba.native_emit`): object code and a CPython ``METH_FASTCALL`` entry point.
This module links it with llvmlite's MCJIT (``import llvmlite.binding``: ~45 ms, against
numba's ~300 ms and the ~50k objects its import allocates) and wraps the entry point as a
builtin function (``PyCFunction_NewEx`` through ctypes), which the step calls as it called
numba's compiled entry point: the same arguments, no dispatcher, a smaller per-call cost.

The kernels' references into numba's C helpers and runtime (``NRT_MemInfo_alloc_aligned``
for ``np.empty``, ``NRT_adapt_ndarray_to_python_acqref`` to box results,
``numba_gil_ensure`` on error paths, ...) are resolved from numba's extension modules,
loaded as shared objects (their init functions run, which also starts NRT's memory system;
numba's Python package is not imported); a parallel kernel's, from numba's threading layer,
which this module starts as numba would (:func:`_start_threads`). A kernel whose artifact
is missing, of another format or CPU, or names a symbol nothing resolves is not loaded
here: :func:`load` returns None, counts why in :data:`fallbacks`, and the caller loads it
through numba as before: never a wrong result. ``PLAX_NUMBA_NATIVE=0`` turns the loader off.
"""
from __future__ import annotations

import contextlib
import ctypes
import glob
import importlib.machinery
import importlib.util
import os
import pickle
import sys
import threading

from plax.atomic_file import write_atomically
from plax.config import env_flag
from plax_numba.permanent_memory import permanent_copy

#: kernels loaded here, and why the others were not (reason -> count; tests read them)
stats = {"loaded": 0}
fallbacks: dict = {}

_lock = threading.RLock()
_ready: list = []        # [llvm binding module, its native target, host()] once set up
_unusable: list = []     # why the loader cannot work in this process (set once)
_keep: list = []         # engines and dtypes kernels point at: alive as long as the process
_resolved: set = set()   # symbols LLVM's linker resolves (registered, or in the process)


def enabled() -> bool:
    """Whether kernels load through this module (``PLAX_NUMBA_NATIVE``, default on)."""
    return env_flag("PLAX_NUMBA_NATIVE", True)


def count_fallback(reason: str) -> None:
    """Counts a kernel that loads through numba instead, under ``reason``
    (:data:`fallbacks`)."""
    fallbacks[reason] = fallbacks.get(reason, 0) + 1


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


_METH_FASTCALL = 0x80


def _numba_extension(name: str, pattern: str):
    """Numba's C extension ``name`` (a dotted name under the ``numba`` package) initialised
    from its file, without importing numba's Python package (not put in ``sys.modules``;
    numba's own import later shares the same shared object and module state)."""
    paths = _package_files("numba", pattern)
    if not paths:
        raise ImportError(f"numba's {name} extension is missing ({pattern})")
    loader = importlib.machinery.ExtensionFileLoader(name, paths[0])
    module = loader.create_module(importlib.util.spec_from_file_location(
        name, paths[0], loader=loader))
    loader.exec_module(module)
    return module


def _package_files(package: str, pattern: str) -> list[str]:
    """Files matching ``pattern`` under the installed ``package``, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return []
    return glob.glob(os.path.join(list(spec.submodule_search_locations)[0], pattern))


def _preload(paths: list[str]) -> None:
    """Maps the shared objects ``paths`` into the process with the GIL released: ``dlopen``
    called as a ctypes foreign function (ctypes releases the GIL around those), where
    ``ctypes.CDLL`` and an extension module's import call it holding the GIL (mapping
    llvmlite's 180 MB library took ~27 ms: a pause of every other thread). Their later
    loads find them mapped. Failures are left to those loads to report."""
    try:
        libc = ctypes.CDLL(None)
        dlopen = libc.dlopen
    except (OSError, AttributeError):
        return
    dlopen.argtypes, dlopen.restype = [ctypes.c_char_p, ctypes.c_int], ctypes.c_void_p
    for path in paths:
        dlopen(os.fsencode(path), os.RTLD_NOW)  # (the mode ctypes and imports use)


def _layout_matches() -> bool:
    """Whether this NumPy's array and descriptor structs have the field offsets the entry
    points read (:mod:`plax_numba.native_emit`)."""
    import numpy as np
    from plax_numba import native_emit as e
    a = np.zeros((3, 5), np.float32)
    read = lambda addr, t: t.from_address(addr).value  # noqa: E731
    base = id(a)
    dims = read(base + e.ARRAY_DIMS, ctypes.c_void_p)
    strides = read(base + e.ARRAY_STRIDES, ctypes.c_void_p)
    if (read(base + e.ARRAY_DATA, ctypes.c_void_p) != a.ctypes.data
            or read(base + e.ARRAY_NDIM, ctypes.c_int) != 2
            or (read(dims, ctypes.c_ssize_t), read(dims + 8, ctypes.c_ssize_t)) != (3, 5)
            or (read(strides, ctypes.c_ssize_t), read(strides + 8, ctypes.c_ssize_t))
            != a.strides
            or read(base + e.ARRAY_DESCR, ctypes.c_void_p) != id(a.dtype)
            or (read(base + e.ARRAY_FLAGS, ctypes.c_int) & e.C_CONTIGUOUS_ALIGNED
                != e.C_CONTIGUOUS_ALIGNED)
            or read(id(a.dtype) + e.DESCR_TYPE_NUM, ctypes.c_int) != a.dtype.num):
        return False
    b = a[:, 1:]
    return not read(id(b) + e.ARRAY_FLAGS, ctypes.c_int) & 1


def _set_up() -> bool:
    """LLVM's native target and numba's C helpers' symbols, once per process; False (with
    the reason in :data:`_unusable`) where that cannot be done."""
    if _ready:
        return True
    if _unusable:
        return False
    try:
        if sys.maxsize < 2 ** 32 or sys.byteorder != "little" or not sys.platform.startswith(
                "linux"):
            raise RuntimeError("only 64-bit little-endian Linux is supported")
        if not _layout_matches():
            raise RuntimeError("NumPy's array struct layout differs from the expected one")
        _preload(_package_files("llvmlite", "binding/libllvmlite*.so")
                 + _package_files("numba", "core/runtime/_nrt_python*.so")
                 + _package_files("numba", "_helperlib*.so"))
        import llvmlite.binding as llvm
        from plax_numba import native_emit
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        if "numba" in sys.modules:
            # numba registered its helpers itself (same addresses); make sure of NRT's
            from numba.core.runtime import _nrt_python as nrt
            from numba import _helperlib as helperlib
        else:
            nrt = _numba_extension("numba.core.runtime._nrt_python",
                                   "core/runtime/_nrt_python*.so")
            helperlib = _numba_extension("numba._helperlib", "_helperlib*.so")
        # the names numba registers them under (numba.core.runtime.nrt, numba.core.base)
        for name, address in nrt.c_helpers.items():
            llvm.add_symbol(name if name.startswith("_") else "NRT_" + name, address)
        for name, address in helperlib.c_helpers.items():
            llvm.add_symbol("numba_" + name, address)
        _ready[:] = [llvm, llvm.Target.from_default_triple(), native_emit.host()]
        return True
    except Exception as err:  # noqa: BLE001 - every kernel then loads through numba
        _unusable.append(f"{type(err).__name__}: {err}")
        return False


#: the threading layer's entry points parallel kernels call (numba.np.ufunc.parallel
#: registers the same names)
_PARALLEL_SYMBOLS = {
    "numba_parallel_for": "parallel_for", "do_scheduling_signed": "do_scheduling_signed",
    "do_scheduling_unsigned": "do_scheduling_unsigned", "allocate_sched": "allocate_sched",
    "deallocate_sched": "deallocate_sched", "get_num_threads": "get_num_threads",
    "set_num_threads": "set_num_threads", "get_thread_id": "get_thread_id",
    "set_parallel_chunksize": "set_parallel_chunksize",
    "get_parallel_chunksize": "get_parallel_chunksize", "get_sched_size": "get_sched_size"}
_threads: dict = {}   # "layer", "get", "set": the threading layer started here


def _tbb_usable() -> bool:
    """Whether TBB is present and new enough for numba's TBB layer (numba's own check)."""
    try:
        lib = ctypes.CDLL("libtbb.so.12")
        version = lib.TBB_runtime_interface_version
        version.restype = ctypes.c_int
        return version() >= 12060
    except (OSError, AttributeError):
        return False


def _start_threads(llvm) -> None:
    """Starts numba's threading layer for parallel kernels and registers its entry points,
    as ``numba.np.ufunc.parallel._launch_threads`` does: the layer ``NUMBA_THREADING_LAYER``
    names (default: TBB if usable, else OpenMP, else the workqueue), with
    ``NUMBA_NUM_THREADS`` threads (default: the CPUs this process may run on). When numba is
    imported, numba starts it itself."""
    if _threads:
        return
    if "numba" in sys.modules:
        import numba
        from numba.np.ufunc.parallel import _launch_threads
        _launch_threads()
        _threads.update(layer=numba.threading_layer(), get=numba.get_num_threads,
                        set=numba.set_num_threads)
        return
    wanted = os.environ.get("NUMBA_THREADING_LAYER", "default").strip().lower() or "default"
    order = {"default": ["tbb", "omp", "workqueue"], "tbb": ["tbb"], "omp": ["omp"],
             "workqueue": ["workqueue"], "safe": ["tbb"], "threadsafe": ["tbb", "omp"],
             "forksafe": ["tbb", "workqueue"]}.get(wanted)
    if order is None:
        raise RuntimeError(f"NUMBA_THREADING_LAYER={wanted} is not one the loader starts")
    lib = None
    for layer in order:
        if layer == "tbb" and not _tbb_usable():
            continue
        module = "workqueue" if layer == "workqueue" else f"{layer}pool"
        _preload(_package_files("numba", f"np/ufunc/{module}*.so"))
        try:
            lib = _numba_extension(f"numba.np.ufunc.{module}", f"np/ufunc/{module}*.so")
            break
        except ImportError:
            continue
    if lib is None:
        raise RuntimeError(f"no threading layer among {order} could be loaded")
    for symbol, attr in _PARALLEL_SYMBOLS.items():
        llvm.add_symbol(symbol, getattr(lib, attr))
    try:
        threads = int(os.environ.get("NUMBA_NUM_THREADS", "") or 0)
    except ValueError:
        threads = 0
    if threads <= 0:
        threads = max(1, len(os.sched_getaffinity(0)))
    ctypes.CFUNCTYPE(None, ctypes.c_int)(lib.launch_threads)(threads)
    set_threads = ctypes.CFUNCTYPE(None, ctypes.c_int)(lib.set_num_threads)
    set_threads(threads)
    _threads.update(layer=layer, get=ctypes.CFUNCTYPE(ctypes.c_int)(lib.get_num_threads),
                    set=set_threads, module=lib)


def thread_count_functions():
    """``(get, set)``: the calling thread's count of threads for parallel kernels, as
    ``numba.get_num_threads``/``numba.set_num_threads`` (numba's when numba is imported,
    else the threading layer's this module started); None when no layer was started."""
    if "numba" in sys.modules:
        import numba
        return numba.get_num_threads, numba.set_num_threads
    if not _threads:
        return None
    return _threads["get"], _threads["set"]


def _resolve_all(llvm, names, objects: dict | None = None) -> bool:
    """Whether every one of ``names`` is resolved (:func:`_resolve`, ``objects`` an artifact's
    compiled-once functions); the unresolved ones are counted as the reason to fall back."""
    missing = [s for s in names if s not in _resolved and not _resolve(llvm, s, objects)]
    if missing:
        count_fallback(f"unresolved symbols: {' '.join(missing[:5])}")
        return False
    _resolved.update(names)
    return True


def _resolve(llvm, name: str, objects: dict | None = None) -> bool:
    """Whether LLVM's linker can resolve ``name``: an exception class (``PyExc_*``, the class
    itself, as numba registers it), registered already (numba's helpers, :func:`_set_up`), a
    compiled-once function whose object code the artifact carries (``objects``, linked here:
    :func:`_link_compiled_once`), or exported by the process or a library it loaded globally
    (the Python C API, libm), which is then registered."""
    if name in _PARALLEL_SYMBOLS:
        try:
            _start_threads(llvm)
        except Exception as err:  # noqa: BLE001 - this kernel loads through numba instead
            count_fallback(f"threading layer not started: {err}")
            return False
        return True
    if name.startswith("PyExc_"):
        # numba's convention (numba.core.base): the symbol is the exception class itself
        import builtins
        cls = getattr(builtins, name[len("PyExc_"):], None)
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            return False
        llvm.add_symbol(name, id(cls))
        return True
    if llvm.address_of_symbol(name):
        return True
    from plax_numba import numpy_loops  # (numba-free)
    if numpy_loops.is_loop_symbol(name):
        # NumPy's own ufunc loop a kernel calls for NumPy's bits (plax_numba.numpy_calls)
        try:
            numpy_loops.register(llvm)
        except RuntimeError as err:
            count_fallback(str(err))
            return False
        return bool(llvm.address_of_symbol(name))
    if name.startswith("plax_once."):
        # a heavy scalar form compiled once per process (plax_numba.compiled_once): linked
        # from the artifact's copy of its object code; else numba compiles it or loads it
        # from its disk cache, so numba is imported for it
        if objects and name in objects:
            return _link_compiled_once(llvm, name, objects)
        from plax_numba import compiled_once
        return compiled_once.resolve(name)
    try:
        address = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, name))
    except ValueError:  # dlsym found nothing
        return False
    llvm.add_symbol(name, address)
    return True


def _link_compiled_once(llvm, symbol: str, objects: dict) -> bool:
    """Links the compiled-once function ``symbol`` from its object code in ``objects`` (an
    artifact's ``compiled_once``, :func:`plax_numba.native_emit.compiled_once_objects`) and
    registers its address under ``symbol``, once per process; False (counted) where a symbol
    its code needs is unresolved or the link fails."""
    entry = objects[symbol]
    if not _resolve_all(llvm, entry["undefined"], objects):
        return False
    try:
        engine = _link_objects(llvm, [entry["object"]])
        address = engine.get_function_address(entry["function"])
        if not address:
            raise RuntimeError(f"{entry['function']} not found in the linked object")
    except Exception as err:  # noqa: BLE001 - the kernel loads through numba instead
        count_fallback(f"link failed: {type(err).__name__}")
        return False
    llvm.add_symbol(symbol, address)
    stats["compiled_once"] = stats.get("compiled_once", 0) + 1
    return True


def _link_objects(llvm, objects: list[bytes]):
    """An MCJIT engine holding the relocatable ``objects``, linked (their undefined symbols
    resolved beforehand) and kept as long as the process."""
    # (an engine owns its target machine: one each)
    machine = _ready[1].create_target_machine(codemodel="jitdefault", jit=True)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)
    # never disposed, not even at exit: the kernel may run until the last moment
    engine._owned = True
    for obj in objects:
        engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    _keep.append(engine)
    return engine


def prepare() -> bool:
    """Sets the loader up now (llvmlite, numba's C helpers; once per process), so the first
    :func:`load` does not pay for it: tiering calls it on its background thread while the
    worker compiles. Returns whether the loader can work in this process."""
    with _lock:
        return _set_up()


class NativeKernel:
    """A kernel linked by this module: ``function`` is its entry point, a builtin function
    taking the kernel's arguments (what numba's compiled entry point takes)."""

    def __init__(self, function, path: str):
        self.function, self.path = function, path

    def __repr__(self) -> str:
        return f"NativeKernel({os.path.basename(self.path)})"


def load(path: str) -> NativeKernel | None:
    """Links the native artifact at ``path`` into this process; None (counted in
    :data:`fallbacks`) if it is absent or cannot be loaded here.

    Args:
      path: the artifact's path (:func:`plax_numba.native_emit.artifact_path`).

    Returns:
      The :class:`NativeKernel`, or None: load the kernel through numba instead.

    Example::

      kernel = load(native_emit.artifact_path(marker))
      if kernel is not None:
          kernel.function(x, out, x.size)
    """
    if not enabled():
        return None
    try:
        with open(path, "rb") as f:
            artifact = pickle.load(f)
    except FileNotFoundError:
        count_fallback("no native artifact (a kernel kind it does not cover)")
        return None
    except Exception:  # noqa: BLE001 - a damaged file: numba's cache still has the kernel
        count_fallback("unreadable native artifact")
        return None
    from plax_numba import native_emit
    if not isinstance(artifact, dict) or artifact.get("format") != native_emit.FORMAT:
        count_fallback("native artifact of another format")
        return None
    if "unsupported" in artifact:
        count_fallback(artifact["unsupported"])
        return None
    with _lock:
        if not _set_up():
            count_fallback(f"loader unavailable: {_unusable[0]}")
            return None
        llvm, _, here = _ready
        if artifact.get("host") != here:
            count_fallback("compiled for another CPU or target")
            return None
        if not _resolve_all(llvm, artifact["undefined"], artifact["compiled_once"]):
            return None
        try:
            engine = _link_objects(llvm, artifact["objects"])
            entry = engine.get_function_address(artifact["entry"])
            slot = engine.get_global_value_address(artifact["entry"] + "_ndarray_type")
            kernel = engine.get_function_address(artifact["kernel"])
            kernel_slot = engine.get_global_value_address(artifact["entry"] + "_kernel")
            if not (entry and slot and kernel and kernel_slot):
                raise RuntimeError("entry point not found in the linked object")
        except Exception as err:  # noqa: BLE001 - numba's own loading still works
            count_fallback(f"link failed: {type(err).__name__}")
            return None
        import numpy as np
        ctypes.c_void_p.from_address(slot).value = id(np.ndarray)
        # (the entry point's object serves every kernel of its types: it calls this one's)
        ctypes.c_void_p.from_address(kernel_slot).value = kernel
        for gname, dtype in artifact["descrs"].items():  # the results' dtype objects
            descr = np.dtype(dtype)
            ctypes.c_void_p.from_address(engine.get_global_value_address(gname)).value = \
                id(descr)
            _keep.append(descr)
        function = _builtin(engine, artifact["entry"], entry)
        stats["loaded"] += 1
        return NativeKernel(function, path)


def link_ir(text: str, entry: str, opt: int = 2, cache_path: str | None = None):
    """Compiles the LLVM IR module ``text`` for this CPU (LLVM's passes at ``opt``, loop
    vectorisation on) and links it into this process; returns its ``METH_FASTCALL``
    function ``entry`` as a builtin function. The module may call the Python C API and
    numba's C helpers (resolved as for an artifact, :func:`load`) and must define a global
    ``<entry>_ndarray_type`` (a pointer), which is set to ``numpy.ndarray``. LLVM's work
    (parsing, passes, code generation) runs in llvmlite's C calls, GIL released.
    :mod:`plax_numba.llvm_tier` builds its first-tier kernels with it.

    Args:
      text: the module, LLVM IR text.
      entry: the entry point's symbol.
      opt: LLVM's optimisation level (0-3).
      cache_path: where the module's machine code is kept (None: nowhere). A file there
        (written by an earlier call with the same arguments) is linked instead of running
        LLVM's passes and code generation; otherwise the machine code made is written
        there. The caller keys the path by everything the code depends on (the IR, this
        CPU, ``opt``, LLVM's version: :func:`machine_key`).

    Returns:
      The builtin function.

    Raises:
      RuntimeError: the loader cannot work here, or a symbol the module uses is unresolved.
      Exception: llvmlite's, for IR that does not parse or verify.

    Example::

      function = link_ir(first.ir, first.entry)
    """
    with _lock:
        if not _set_up():
            raise RuntimeError(f"the native loader cannot work here: {_unusable[0]}")
        llvm, target, here = _ready
    triple, cpu, features = here
    module = llvm.parse_assembly(text)
    module.verify()
    machine = target.create_target_machine(cpu=cpu, features=features, opt=opt,
                                           codemodel="jitdefault", jit=True)
    module.triple = triple
    module.data_layout = str(machine.target_data)
    cached = _read_object(cache_path)
    if cached is None:  # (a cached object skips the passes: the machine code is made)
        tuning = llvm.create_pipeline_tuning_options(speed_level=opt)
        tuning.loop_vectorization = tuning.slp_vectorization = opt >= 2
        builder = llvm.create_pass_builder(machine, tuning)
        builder.getModulePassManager().run(module, builder)
    undefined = ([f.name for f in module.functions
                  if f.is_declaration and not f.name.startswith("llvm.")]
                 + [g.name for g in module.global_variables if g.is_declaration])
    with _lock:
        missing = [s for s in undefined if s not in _resolved and not _resolve(llvm, s)]
        if missing:
            raise RuntimeError(f"unresolved symbols: {' '.join(missing[:5])}")
        _resolved.update(undefined)
        for libcall in ("fmaf", "fma"):  # llvm.fma on a CPU without FMA units
            if libcall not in _resolved and _resolve(llvm, libcall):
                _resolved.add(libcall)
        engine = llvm.create_mcjit_compiler(module, machine)
        engine._owned = True  # never disposed: the kernel may run until the last moment
        if cache_path is not None:
            engine.set_object_cache(
                lambda _module, data: _write_object(cache_path, data),
                lambda _module: cached)
        engine.finalize_object()
        address = engine.get_function_address(entry)
        slot = engine.get_global_value_address(entry + "_ndarray_type")
        if not address or not slot:
            raise RuntimeError(f"{entry} or its ndarray slot is not in the linked module")
        import numpy as np
        ctypes.c_void_p.from_address(slot).value = id(np.ndarray)
        return _builtin(engine, entry, address)


def machine_key(opt: int) -> str:
    """What machine code made by :func:`link_ir` depends on besides its IR: this CPU (name
    and features), ``opt`` and llvmlite's LLVM. Sets the loader up if it is not."""
    with _lock:
        if not _set_up():
            raise RuntimeError(f"the native loader cannot work here: {_unusable[0]}")
        llvm, _, (triple, cpu, features) = _ready
    return f"{triple} {cpu} {features} O{opt} llvm {llvm.llvm_version_info}"


def _read_object(path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            return f.read() or None
    except OSError:
        return None


def _write_object(path: str, data: bytes) -> None:
    """``data`` at ``path``, whole or not at all (another process may read it meanwhile); a
    directory that cannot be written leaves the code uncached."""
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomically(path, data)


def _builtin(engine, entry: str, address: int):
    """A builtin function calling the ``METH_FASTCALL`` function at ``address``; its method
    definition and ``engine`` are kept alive as long as the process."""
    # CPython reads a builtin's definition until the function itself is freed (its repr, the
    # garbage collector's traversal, its deallocation), and programs hold their functions to
    # interpreter exit, where the collector clears what is left in any order. So the
    # definition and its name live in memory nothing frees (tens of bytes a kernel, as the
    # engine holding its code is never disposed either): not in a ctypes object, whose
    # buffer the collector's clearing frees (SIGSEGV at exit, reading the freed definition).
    method = _MethodDef(permanent_copy(entry.encode() + b"\0"), address, _METH_FASTCALL, None)
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.argtypes, new.restype = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p], \
        ctypes.py_object
    function = new(permanent_copy(bytes(method)), None, None)
    _keep.append(engine)
    return function
