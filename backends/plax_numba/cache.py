"""Compiled kernels, keyed by their generated source: in memory, and on disk through numba.

A kernel's source is written to ``<cache dir>/k_<hash>.py`` (the hash covers the source,
the sources of the helpers it may call and of the modules they import, :func:`key_sources`,
and the numba version) and imported from there, so numba's own
on-disk cache (``cache=True``, which needs a real source file) keeps its machine code: a
second process loads it instead of compiling. Within a process, one dispatcher per source;
numba keys its compiled versions by argument types.

The cache directory is ``$PLAX_NUMBA_CACHE_DIR``, else ``$XDG_CACHE_HOME/plax_numba`` (or
``~/.cache/plax_numba``), else a temporary directory when those are not writable.

numba itself is imported by the first load or compilation (:func:`load_kernel`), not by this
module: with tiering, a program's first call only names its kernels (their source and
path), so a process whose jitted functions never get hot never pays numba's import
(~0.15-0.25 s on a 2-core host, the bulk of a first call). A kernel compiled by a worker
also has a native artifact beside its cache entry (:mod:`plax_numba.native_emit`), which
this process links without importing numba at all (:mod:`plax_numba.native_loader`,
:func:`_load_native`); numba's own loading is the fallback, for kernels without a usable
artifact and with ``PLAX_NUMBA_NATIVE=0``.
"""
from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib.util
import os
import re
import sys
import tempfile
import threading
import time

import numpy as np

_HEADER = '''"""A plax_numba kernel, generated from {primitives}."""
import math
import numpy as np
from numba import njit, prange
{helpers}
_OPTIONS = dict(cache=True, nogil=True, error_model="numpy", boundscheck=False)
_PARALLEL = dict(_OPTIONS, parallel=True)

'''

#: the helpers generated kernels may call, by module: a kernel's module imports those it
#: names (:func:`module_source`), so a compile worker never imports the rest (importing
#: ``plax_numba.special`` imports all of plax: 0.22 CPU seconds of a worker's start-up, for
#: kernels that call no Bessel function)
_HELPERS = {
    "plax_numba.scalar": ("fmax", "fmin", "idiv", "irem", "fsign", "logistic", "round_away",
                          "exp_f32", "tanh_f32", "logistic_f32", "bitcast", "nextafter_f32",
                          "nextafter_f64", "fma_f32", "fma_f64", "fma_odd_f32"),
    "plax_numba.libm_free": ("log_f32", "expm1_f32", "erf_f32", "erfc_f32", "sin_f32",
                             "cos_f32", "erf_inv_f32", "lgamma_f32", "digamma_f32",
                             "log_f32_once", "sin_f32_once", "cos_f32_once",
                             "expm1_f32_once", "erf_f32_once", "erfc_f32_once",
                             "erf_inv_f32_once", "lgamma_f32_once", "digamma_f32_once"),
    "plax_numba.special": ("bessel_i0e_f32", "bessel_i0e_f64", "bessel_i1e_f32",
                           "bessel_i1e_f64", "digamma_f64", "bessel_i0e_f32_once",
                           "bessel_i0e_f64_once", "bessel_i1e_f32_once", "bessel_i1e_f64_once",
                           "digamma_f64_once"),
    "plax_numba.special_gamma": ("igamma_f32", "igamma_f64", "igammac_f32", "igammac_f64",
                                 "igamma_grad_a_f32", "igamma_grad_a_f64",
                                 "random_gamma_grad_f32", "random_gamma_grad_f64"),
    "plax_numba.special_zeta": ("zeta_f32", "zeta_f32_once", "zeta_f64", "polygamma_f32",
                                "polygamma_f64"),
    "plax_numba.special_beta": ("betainc_f32", "betainc_f64"),
    "plax_numba.special_erf": ("erf_inv_f64", "erf_inv_f64_once"),
    "plax_numba.threefry_kernels": ("hash_words", "hash_item"),
    "plax_numba.numpy_calls": ("log1p_f32", "log1p_f64", "log1p_scalar_f32",
                               "log1p_scalar_f64", "log1p_into"),
    "plax_numba.arrays": ("dot_rows", "dot_loops", "dot_blas", "dot_blas_mv", "dot_bool",
                          "matvec_t"),
}

_lock = threading.RLock()  # (re-entered: a program's module loads its cluster kernels')
_kernels: dict[str, object] = {}   # file key -> dispatcher
_dir: str | None = None


def _numba_version() -> str:
    """numba's version, from its distribution's metadata (importing numba costs ~0.2 s)."""
    numba = sys.modules.get("numba")
    if numba is not None:
        return numba.__version__
    try:
        from importlib.metadata import version
        return version("numba")
    except Exception:  # noqa: BLE001 - not installed as a distribution: import it
        import numba
        return numba.__version__


#: the modules whose source a kernel's machine code depends on besides its own text: the helpers
#: generated kernels import (:data:`_HELPERS`), the modules those helpers are compiled from or
#: with, and the native artifact's entry point (:mod:`plax_numba.native_emit`, written beside
#: each compiled kernel); :func:`key_sources` adds what they import at module level
_KEY_MODULES = ("scalar", "libm_free", "special", "special_gamma", "special_zeta", "special_beta",
                "special_erf", "arrays", "threefry_kernels", "numpy_calls", "numpy_loops",
                "f32_coefficients", "compiled_once", "scan_lines", "native_emit")

# a module-level (unindented) import of a plax or plax_numba module; group 3: what a ``from``
# import takes (a parenthesised list may span lines)
_MODULE_IMPORT = re.compile(r"^(?:from[ \t]+((?:plax_numba|plax)(?:\.\w+)*)[ \t]+import[ \t]+"
                            r"(\([^)]*\)|[^\n]*)|import[ \t]+((?:plax_numba|plax)(?:\.\w+)*))",
                            re.M)


def _module_file(name: str, plax_dir: str | None) -> str | None:
    """The source file of module ``name`` (``plax_numba.x`` or ``plax.y.z``), found without
    importing it; None for a package (its ``__init__`` re-exports: the code is in the
    submodules an import names) or a name that is not a module."""
    top, *rest = name.split(".")
    base = os.path.dirname(os.path.abspath(__file__)) if top == "plax_numba" else plax_dir
    if base is None or not rest:
        return None
    path = os.path.join(base, *rest) + ".py"
    return path if os.path.isfile(path) else None


def key_sources() -> list[str]:
    """The source files a compiled kernel depends on besides its own text, which the kernel
    cache's keys hash (:func:`source_path`, :func:`module_marker`): numba's disk cache keys a
    kernel by its own file only, so a kernel whose helper changed would otherwise load the
    machine code compiled from the old helper (from a cache directory shared by two
    checkouts, or kept across an upgrade).

    They are the modules of :data:`_KEY_MODULES` and, followed through theirs, every
    ``plax_numba`` module they import at module level; the ``plax`` modules they import (the
    constants of :mod:`plax.lax.special_series`, the rotations of
    :mod:`plax.lax.random_bits`) are included but not followed (the code compiled from them
    is their own; their imports would take in the whole core). Read as text, not imported:
    numba is not imported.

    Returns:
      The absolute paths, each once, in a fixed order.

    Example::

      digest = hashlib.sha256(b"".join(open(p, "rb").read() for p in key_sources()))
    """
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.find_spec("plax")  # (the top package only: nothing imported)
    plax_dir = (list(spec.submodule_search_locations)[0]
                if spec is not None and spec.submodule_search_locations else None)
    todo = [os.path.join(here, f"{name}.py") for name in _KEY_MODULES]
    seen: list[str] = []
    while todo:
        path = todo.pop(0)
        if path in seen:
            continue
        seen.append(path)
        if os.path.dirname(path) != here:
            continue  # a plax module: included, not followed
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for match in _MODULE_IMPORT.finditer(text):
            module = match.group(1) or match.group(3)
            names = re.sub(r"#[^\n]*", "", match.group(2) or "")
            found = _module_file(module, plax_dir)
            if found is not None:
                todo.append(found)
            for word in re.findall(r"\w+", names):  # ``from plax_numba import threefry``
                found = _module_file(f"{module}.{word}", plax_dir)
                if found is not None:
                    todo.append(found)
    return seen


def _salt() -> str:
    helpers = b""
    for path in key_sources():  # read, not imported: no numba
        with open(path, "rb") as f:
            helpers += f.read()
    return hashlib.sha256(helpers + _numba_version().encode() + np.__version__.encode()
                          + sys.version.encode()).hexdigest()


_SALT = _salt()


def cache_dir() -> str:
    """The directory holding generated kernel sources and numba's cache files."""
    global _dir
    if _dir is not None:
        return _dir
    candidates = []
    if os.environ.get("PLAX_NUMBA_CACHE_DIR"):
        candidates.append(os.environ["PLAX_NUMBA_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    candidates.append(os.path.join(base, "plax_numba"))
    candidates.append(os.path.join(tempfile.gettempdir(), f"plax_numba_{os.getuid()}"))
    for path in candidates:
        try:
            os.makedirs(path, exist_ok=True)
            # per process and thread: two threads probing at once must not remove each
            # other's probe (which made both give up on a writable directory)
            probe = os.path.join(path, f".probe{os.getpid()}_{threading.get_ident()}")
            with open(probe, "w"):
                pass
            os.remove(probe)
        except OSError:
            continue
        _dir = path
        return path
    raise OSError(f"plax_numba: no writable cache directory among {candidates}")


def use_cache_dir(directory: str | None) -> None:
    """Makes ``directory`` this process's cache directory (a compile worker serves one
    process: its jobs name that process's directory); None changes nothing."""
    global _dir
    if directory is not None:
        _dir = directory


def module_source(kernel_source: str, primitives: list[str]) -> str:
    """The complete module text of a kernel: the header, the imports of the helpers
    (:data:`_HELPERS`) ``kernel_source`` names, and ``kernel_source``.

    Args:
      kernel_source: the generated kernel (a function named ``kernel``, and its own helpers).
      primitives: the primitives it computes (named in the module's docstring).

    Returns:
      The module's text.

    Example::

      text = module_source(plan.source, plan.primitives)
    """
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", kernel_source))
    helpers = "".join(f"from {module} import {', '.join(used)}\n"
                      for module, names in _HELPERS.items()
                      for used in [[n for n in names if n in words]] if used)
    return _HEADER.format(primitives=_describe(primitives), helpers=helpers) + kernel_source


#: primitives whose kernels are another's code, named as that one in the module's docstring:
#: the docstring is part of the text the cache keys on, so ``add_any`` (the ``add`` that sums
#: tangents) named as itself made each of its kernels a second compilation of ``add``'s
_SAME_CODE_AS = {"add_any": "add"}


def _describe(primitives: list[str]) -> str:
    # first-use order, once each
    names = list(dict.fromkeys(_SAME_CODE_AS.get(p, p) for p in primitives))
    text = " ".join(names[:40]) + (" ..." if len(names) > 40 else "")
    return f"the equations ({text})"


def source_path(text: str) -> str:
    """Where the module ``text`` lives on disk (written on first use)."""
    key = hashlib.sha256((_SALT + text).encode()).hexdigest()[:24]
    return os.path.join(cache_dir(), f"k_{key}.py")


def write_source(text: str) -> str:
    """Writes the module ``text`` to its :func:`source_path` unless it is there; returns the
    path. The file is never rewritten: numba's cache index is keyed by its modification
    time, so a rewrite would invalidate the machine code of every process."""
    path = source_path(text)
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        try:
            os.link(tmp, path)  # atomic and never replaces: a concurrent writer's file stays
        except FileExistsError:
            pass
        except OSError:  # no hard links here: an atomic rename (same text, newer time)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    return path


def load_kernel(text: str):
    """The numba dispatcher defined by the module ``text`` (imported once per process)."""
    path = source_path(text)
    with _lock:
        kernel = _kernels.get(path)
        if kernel is not None:
            return kernel
        write_source(text)
        name = "plax_numba_kernels." + os.path.basename(path)[:-3]
        kernel = _kernels[path] = _import_file(name, path).kernel
        serialize_index_writes(kernel)
        return kernel


def serialize_index_writes(kernel) -> None:
    """Makes the index writes of ``kernel``'s numba disk cache exclusive between processes
    (an ``fcntl.flock`` on ``<index>.lock``). numba saves an entry by reading a source's
    index, adding the entry and writing the index back, unlocked: two processes saving
    entries of one source at once (two programs' workers compiling a kernel for different
    argument types) lose one of them, and a marker (:func:`on_disk`) then names a kernel
    the cache lacks. Nothing where ``fcntl`` or numba's cache object is not as expected.

    Args:
      kernel: a numba dispatcher with ``cache=True``.

    Example::

      serialize_index_writes(load_kernel(text))   # (load_kernel does it)
    """
    try:
        import fcntl
        index = kernel._cache._cache_file
        save, lock_path = index.save, index._index_path + ".lock"
    except (ImportError, AttributeError):
        return
    if getattr(save, "__plax_locked__", False):
        return

    def locked_save(key, data):
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            save(key, data)
    locked_save.__plax_locked__ = True
    index.save = locked_save


def _import_file(name: str, path: str):
    """Imports the module file ``path`` as ``name`` (registered in ``sys.modules``: numba
    pickles the module's name into its cache and imports it when loading)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def numba_signature(arg_types: list):
    """The numba signature for a plan's ``arg_types`` (C-contiguous arrays, read-only ones for
    ``"rarray"``, scalars, intp)."""
    import numba
    from numba import types
    sig = []
    for t in arg_types:
        if t[0] == "array":
            sig.append(types.Array(numba.from_dtype(t[1]), t[2], "C"))
        elif t[0] == "rarray":
            sig.append(types.Array(numba.from_dtype(t[1]), t[2], "C", readonly=True))
        elif t[0] == "scalar":
            sig.append(numba.from_dtype(t[1]))
        else:
            sig.append(types.intp)
    return tuple(sig)


_compiled: dict = {}  # (file key, argument types) -> dispatcher compiled for them


def _key(text: str, arg_types: list) -> tuple:
    return (source_path(text), tuple(tuple(t) for t in arg_types))


def compiled_kernel(text: str, arg_types: list):
    """The dispatcher of ``text`` if it was compiled for ``arg_types`` in this process, else
    None (a dictionary lookup: programs sharing a kernel skip tiering)."""
    return _compiled.get(_key(text, arg_types))


def compile_kernel(text: str, arg_types: list):
    """Loads (or compiles) the kernel for exactly ``arg_types``; returns the dispatcher.

    A kernel already in the disk cache (:func:`on_disk`) is only loaded. On tiering's
    background thread (:func:`plax_numba.tiered.compiles_in_worker`) the compilation runs
    in a worker process (:mod:`plax_numba.compile_worker`), which writes numba's disk cache,
    and this process only loads the machine code from there (:func:`load_compiled`);
    elsewhere (``PLAX_NUMBA_SYNC=1``, ``PLAX_NUMBA_WORKERS=0``) numba compiles here."""
    from plax_numba import tiered
    if tiered.compiles_in_worker() or on_disk(text, arg_types):
        return load_compiled(text, arg_types)
    from plax_numba import native_loader
    native = native_loader.enabled()
    compile_for_cache(text, arg_types, native=native)
    kernel = _load_native(text, arg_types) if native else None
    if kernel is None:  # (compiled into numba's disk cache, or compiled now: see above)
        kernel = _kernels[source_path(text)]
        kernel.compile(numba_signature(arg_types))
    _compiled[_key(text, arg_types)] = kernel
    return kernel


#: what happened to kernels tiering asked for: loaded here from the disk cache ("loaded");
#: a load on the program's thread that did not happen ("missed here": the cache lacked the
#: entry, or numba's compiler lock was held; the reference path runs and the background
#: thread loads it); a miss on the background thread sent back to the worker to be written
#: into the cache again ("recached": another process's index write can drop an entry); or
#: compiled in this process after all ("compiled here": only where numba's own loading path
#: must be used, see :func:`load_dispatcher`)
load_stats = {"loaded": 0, "missed here": 0, "recached": 0, "compiled here": 0}
#: seconds spent by each :func:`load_compiled`: importing numba (the first), waiting for the
#: worker beyond that, loading the machine code here (benchmarks print them); and the id of
#: the process that compiled the kernel ("compiled by"; None: it was on disk already), and
#: when it was ready (``time.perf_counter()``, "at")
load_times: list = []
#: when each serial form (:func:`serial_variant`) was ready (``time.perf_counter()``)
serial_loaded_at: list = []


def compile_for_cache(text: str, arg_types: list, directory: str | None = None,
                      native: bool = False) -> int:
    """Compiles the kernel of module ``text`` for ``arg_types`` and marks it as compiled
    (:func:`on_disk`). Runs in a compile worker (:func:`load_compiled`, which passes its
    cache ``directory``) and for synchronous compilations (:func:`compile_kernel`).

    With ``native`` the kernel is written as a native artifact
    (:func:`plax_numba.native_emit.emit`), before the marker, for the program to link without
    numba (:mod:`plax_numba.native_loader`): compiled without numba's Python wrappers where
    the artifact's entry point takes its arguments (:func:`_compile_native`), else into
    numba's disk cache as without ``native``, with an artifact saying why there is no native
    form (a kernel kind the entry point does not cover). Without ``native``, into numba's disk
    cache (or found there). Returns the id of the process that ran it (``load_times``
    records it)."""
    use_cache_dir(directory)
    kernel = load_kernel(text)
    marker = _marker(text, arg_types)
    if not (native and _compile_native(text, kernel, arg_types, marker)):
        kernel.compile(numba_signature(arg_types))
        if native:
            from plax_numba import native_emit
            path = native_emit.artifact_path(marker)
            if not os.path.exists(path):
                try:
                    native_emit.emit(text, arg_types, path)
                except Exception as err:  # noqa: BLE001 - NotEmitted, or a numba internal
                    # moved: the program loads this kernel through numba, counting why
                    native_emit.not_emitted(path, err)
    mark(marker)
    return os.getpid()


#: kernels :func:`_compile_native` compiled without numba's Python wrappers (``"bare"``),
#: and those it tried so but the entry point could not call or numba did not compile
#: (``"declined"``: compiled again the usual way); tests read it
native_compiles = {"bare": 0, "declined": 0}


def _compile_native(text: str, kernel, arg_types: list, marker: str) -> bool:
    """Writes the native artifact of ``kernel`` for ``arg_types`` from a compilation without
    numba's Python wrappers: True when the artifact is written (or was there), False when
    the caller compiles the kernel the usual way instead.

    numba wraps each kernel in a CPython entry point (unboxing every argument, boxing the
    results) and a C one, both lowered, optimised and compiled with the kernel: about 40% of
    a small kernel's compilation (0.22 -> 0.14 CPU s). The program never calls them once it
    links the artifact, whose own entry point does that work. So they are left out
    (``no_cpython_wrapper``, ``no_cfunc_wrapper``, on a dispatcher of the same function
    without numba's disk cache: the cache would hand numba's loader a kernel it cannot
    call), when the native loader works in this process (it does in the program then: same
    machine, same NumPy) and the entry point takes every argument type (results it cannot
    box are known only after the compilation: ``"declined"``). A program that cannot link
    the artifact after all loads the kernel through numba, which compiles it there with its
    wrappers (:func:`load_dispatcher`): slower, never wrong."""
    import numba
    from plax_numba import native_emit, native_loader
    path = native_emit.artifact_path(marker)
    if os.path.exists(path):  # (another process's: with code, or saying why there is none)
        return native_emit.has_code(path)
    if not native_loader.prepare() or not native_emit.takes_arguments(arg_types):
        return False
    options = {k: v for k, v in kernel.targetoptions.items() if k not in ("nopython", "cache")}
    try:
        bare = numba.njit(no_cpython_wrapper=True, no_cfunc_wrapper=True,
                          **options)(kernel.py_func)
        bare.compile(numba_signature(arg_types))
        native_emit.emit(text, arg_types, path, bare)
    except Exception:  # noqa: BLE001 - NotEmitted (results the entry cannot box), or numba
        # refusing this form: the usual compilation follows, and reports what is wrong
        native_compiles["declined"] += 1
        return False
    native_compiles["bare"] += 1
    return True


def _load_native(text: str, arg_types: list):
    """The kernel of ``text`` for ``arg_types`` linked from its native artifact without
    numba (:func:`plax_numba.native_loader.load`), or None (the loader is off, or the
    kernel has no usable artifact: the caller loads it through numba)."""
    from plax_numba import native_emit, native_loader
    if not native_loader.enabled():
        return None
    try:
        return native_loader.load(native_emit.artifact_path(_marker(text, arg_types)))
    except Exception as err:  # noqa: BLE001 - a loader bug must not fail the kernel
        native_loader.count_fallback(f"loader error: {type(err).__name__}: {err}")
        return None


def _marker(text: str, arg_types: list) -> str:
    sig = hashlib.sha256(repr(_key(text, arg_types)[1]).encode()).hexdigest()[:12]
    return f"{source_path(text)[:-3]}.{sig}.ok"


def on_disk(text: str, arg_types: list) -> bool:
    """Whether the kernel of ``text`` for ``arg_types`` was compiled into numba's disk cache
    (by any process): a file test, no numba import. A hint, not a promise (another process's
    index write can drop an entry; :func:`load_compiled` then compiles in place)."""
    return os.path.exists(_marker(text, arg_types))


_prepared = []
_prepare_lock = threading.RLock()  # (re-entered by prepare_numba_now)


@contextlib.contextmanager
def _collections_deferred():
    """Python's cyclic garbage collector paused inside the context (a collection holds the
    GIL from start to end: one over the ~50k objects numba's import allocates stalled every
    other thread for 50-270 ms on a loaded 2-core host). At the end the objects allocated
    meanwhile leave the young generations at once, without being walked: into the permanent
    generation while a compile window is open (:func:`plax_numba.tiered.compile_window_open`,
    which unfreezes them when it closes), else into the oldest generation, whose next
    collection walks them at its usual time. ``PLAX_NUMBA_GC_FREEZE=0``: nothing done."""
    from plax_numba import tiered
    if not tiered.freezing_gc():
        yield
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        window = tiered.compile_window_open()
        # (never touching a freeze of the program's own)
        if (window and tiered.froze_for_window()) or gc.get_freeze_count() == 0:
            gc.freeze()  # young -> permanent, O(1)
            if not window:
                gc.unfreeze()  # permanent -> oldest, O(1)
        if enabled:
            gc.enable()


def prepare_numba_now() -> bool:
    """:func:`prepare_numba` on the program's thread: only if that needs no wait for another
    thread (one preparing numba already, or compiling: numba's runtime starts under its
    compiler lock). False if it would have waited (the caller leaves the load to the
    background thread)."""
    if _prepared:
        return True
    if not _prepare_lock.acquire(blocking=False):
        return False  # (the background thread is importing numba)
    try:
        from numba.core.compiler_lock import global_compiler_lock
        lock = getattr(global_compiler_lock, "_lock", None)
        if lock is None or not lock.acquire(blocking=False):
            return False
        try:
            prepare_numba()  # (both locks are re-entrant for this thread: RLock, or held)
        finally:
            lock.release()
    finally:
        _prepare_lock.release()
    return True


def prepare_numba() -> None:
    """Imports numba and starts what loading cached machine code needs: numba's runtime
    (NRT) symbols. Not numba's typing and lowering registries (``refresh()``: importing its
    NumPy and SciPy support, 0.6 s on a quiet 2-core host, twice the import itself), which
    only a compilation needs (:func:`_load_cached` loads without them).

    The cyclic garbage collector is paused meanwhile (:func:`_collections_deferred`): the
    set-up runs on the background thread while the program's threads run, and a
    collection during it would hold the GIL for as long as it takes to walk the heap."""
    if _prepared:
        return
    with _prepare_lock:
        if _prepared:
            return
        with _collections_deferred():
            import numba  # noqa: F401
            try:
                from numba.core.registry import cpu_target
                from numba.core.runtime import rtsys
                rtsys.initialize(cpu_target.target_context)
            except Exception:  # noqa: BLE001 - an internal moved: loads take numba's path
                _lean.clear()
            # (no helper module: each kernel's module imports the helpers it names)
        _prepared.append(True)


_lean = [True]  # whether _load_cached may load without numba's registries

# what _load_cached found
LOADED, MISSING, BUSY, UNAVAILABLE = "loaded", "missing", "busy", "unavailable"


def _load_cached(kernel, sig, parallel: bool, wait: bool = True) -> str:
    """Loads ``kernel``'s machine code for ``sig`` from numba's disk cache into the
    dispatcher. Returns :data:`LOADED`; :data:`MISSING` if the cache has no entry for it;
    :data:`BUSY` if ``wait`` is False and numba's compiler lock is held (a compilation in
    this process may hold it for seconds); :data:`UNAVAILABLE` if it cannot be loaded this
    way (numba's internals moved: only numba's own path loads it).

    numba's own path (``dispatcher.compile``) first builds its full typing and lowering
    registries, which the machine code does not use: the code only calls numba's C helpers
    and runtime (registered by :func:`prepare_numba`) and, for a parallel kernel, the
    threading layer's scheduler (started here). This reads the cache entry through the
    dispatcher's cache object and installs the overload as numba does, holding numba's
    compiler lock as numba does (LLVM's linking is not thread-safe)."""
    if tuple(sig) in kernel.overloads:  # (ready already: no lock needed to see it)
        return LOADED
    if not _lean:
        return UNAVAILABLE
    try:
        from numba.core.compiler_lock import global_compiler_lock
        lock = getattr(global_compiler_lock, "_lock", None)
        if wait:
            global_compiler_lock.acquire()
        elif lock is None:
            return UNAVAILABLE  # no way to try the lock: never wait for it here
        elif not lock.acquire(blocking=False):
            return BUSY
        try:
            if tuple(sig) in kernel.overloads:
                return LOADED
            if parallel:
                from numba.np.ufunc.parallel import _launch_threads
                _launch_threads()
            cres = kernel._cache._load_overload(sig, kernel.targetctx)
            if cres is None:
                return MISSING
            kernel.targetctx.insert_user_function(cres.entry_point, cres.fndesc,
                                                  [cres.library])
            kernel.add_overload(cres)
        finally:
            if wait:
                global_compiler_lock.release()
            else:
                lock.release()
    except Exception:  # noqa: BLE001 - numba's internals moved: its own path loads it
        _lean.clear()
        return UNAVAILABLE
    return LOADED


def try_load(kernel, sig, parallel: bool) -> bool:
    """Loads ``kernel``'s machine code for ``sig`` from numba's disk cache if that can be
    done at once: what the program's own thread does for a kernel :func:`on_disk` says is
    cached. Never compiles and never waits for numba's compiler lock (a compilation may
    hold it for seconds); False if the entry is missing, the lock is held, or only numba's
    own path could load it (the caller then runs the reference path and leaves the load
    to tiering's background thread).

    Args:
      kernel: a numba dispatcher with ``cache=True``.
      sig: the argument types (a tuple of numba types).
      parallel: whether it is a ``parallel=True`` kernel.

    Returns:
      Whether the kernel is ready for ``sig``.

    Example::

      if not try_load(kernel, numba_signature(arg_types), False):
          ...  # reference path; the background thread loads it (load_dispatcher)
    """
    with _collections_deferred():
        return _load_cached(kernel, sig, parallel, wait=False) == LOADED


def load_now(text: str, arg_types: list):
    """The kernel of module ``text`` for ``arg_types`` loaded from the disk cache on this
    thread (:func:`try_load`: no compilation, no wait on numba's compiler lock), or None
    (counted as ``"missed here"`` in :data:`load_stats`). For the program's thread, when
    :func:`on_disk` says the kernel is cached: a miss is never compiled here.

    Args:
      text: the kernel's module text (:func:`module_source`).
      arg_types: the plan's argument types.

    Returns:
      The numba dispatcher, ready for ``arg_types``, or None.

    Example::

      kernel = load_now(text, plan.arg_types) if on_disk(text, plan.arg_types) else None
    """
    start = time.perf_counter()
    kernel = _load_native(text, arg_types)
    if kernel is not None:
        load_stats["loaded"] += 1
        load_times.append({"import numba": 0.0, "worker": 0.0,
                           "load": time.perf_counter() - start, "compiled by": None,
                           "at": time.perf_counter(), "native": True})
        _compiled[_key(text, arg_types)] = kernel
        return kernel
    if not prepare_numba_now():
        load_stats["missed here"] += 1
        return None
    imported = time.perf_counter()
    with _collections_deferred():  # (its helpers' modules, imported the first time)
        kernel = load_kernel(text)
    if not try_load(kernel, numba_signature(arg_types), "prange(" in text):
        load_stats["missed here"] += 1
        return None
    load_stats["loaded"] += 1
    load_times.append({"import numba": imported - start, "worker": 0.0,
                       "load": time.perf_counter() - imported, "compiled by": None,
                       "at": time.perf_counter()})
    _compiled[_key(text, arg_types)] = kernel
    return kernel


class KernelNotCachedError(RuntimeError):
    """A kernel the compile worker compiled is still missing from numba's disk cache after
    it was written there again (:func:`load_dispatcher`)."""


#: how many times the background thread sends a kernel missing from the disk cache back to
#: the worker before giving up on it (one warning; the reference path keeps running)
RECACHE_ATTEMPTS = 2


def load_dispatcher(kernel, sig, parallel: bool) -> bool:
    """Makes ``kernel`` (a numba dispatcher with ``cache=True``) ready for ``sig``: its
    machine code loaded from numba's disk cache (:func:`_load_cached`, the garbage
    collector paused). True if it was loaded, False if it was compiled here.

    A kernel missing from the cache (another process's index write can drop an entry:
    numba rewrites a source's whole index, and the last writer wins) is, on tiering's
    background thread with compile workers (:func:`plax_numba.tiered.compiles_in_worker`),
    sent back to a worker that writes it into the cache again (:func:`recache`), then
    loaded; never compiled here. Elsewhere (``PLAX_NUMBA_SYNC=1``, ``PLAX_NUMBA_WORKERS=0``)
    numba's own path runs, which compiles here on a miss, as those modes do anyway.

    Args:
      kernel: the dispatcher.
      sig: the argument types (a tuple of numba types).
      parallel: whether it is a ``parallel=True`` kernel (its threading layer is started).

    Returns:
      Whether the machine code came from the disk cache.

    Raises:
      KernelNotCachedError: on the background thread, the kernel is still missing after
        :data:`RECACHE_ATTEMPTS` trips to the worker.

    Example::

      load_dispatcher(load_kernel(text), numba_signature(arg_types), False)
    """
    from plax_numba import tiered
    in_worker = tiered.compiles_in_worker()
    for attempt in range(RECACHE_ATTEMPTS + 1):
        with _collections_deferred():
            state = _load_cached(kernel, sig, parallel)
        if state == LOADED:
            return True
        if not in_worker or attempt == RECACHE_ATTEMPTS:
            break
        _recache_in_worker(kernel, sig)
        if state == UNAVAILABLE:
            break  # (in the cache now: numba's own path below loads it)
    if in_worker and state == MISSING:
        raise KernelNotCachedError(
            f"plax_numba: the kernel {_kernel_name(kernel)} is missing from numba's disk "
            f"cache ({cache_dir()}) after the compile worker wrote it there "
            f"{RECACHE_ATTEMPTS + 1} times; another process may be rewriting the cache "
            "index concurrently. Set PLAX_NUMBA_CACHE_DIR to a directory of this "
            "process's own to avoid it.")
    misses = sum(kernel.stats.cache_misses.values())
    kernel.compile(sig)
    return sum(kernel.stats.cache_misses.values()) == misses


def _kernel_name(kernel) -> str:
    func = kernel.py_func
    return f"{func.__module__}.{func.__qualname__}"


def _recache_in_worker(kernel, sig) -> None:
    """Has a compile worker write ``kernel``'s entry for ``sig`` into numba's disk cache
    (:func:`recache`), waiting for it with the GIL released."""
    from plax_numba import compile_worker
    func = kernel.py_func
    module = sys.modules[func.__module__]
    load_stats["recached"] += 1
    compile_worker.submit(recache, func.__module__, getattr(module, "__file__", None),
                          func.__name__, tuple(sig), cache_dir()).result()


def recache(module_name: str, path: str | None, name: str, sig: tuple,
            directory: str | None = None) -> int:
    """Writes the entry of kernel ``name`` of module ``module_name`` (imported from
    ``path`` if not importable by name: a generated kernel) for ``sig`` into numba's disk
    cache, compiling it if this process has not: what a compile worker runs for a kernel
    the user's process found missing (:func:`load_dispatcher`). A kernel this process
    compiled (or loaded) earlier is in its dispatcher but may be gone from the cache's
    index, so it is saved again, or compiled afresh by a new dispatcher of the same
    function (numba saves only what it compiles). Returns this process's id."""
    import numba
    use_cache_dir(directory)
    kernel = _kernels.get(path)  # a generated kernel this process imported from that file
    if kernel is None:
        module = sys.modules.get(module_name)
        if module is None or getattr(module, "__file__", None) != path:
            # (a generated module of that name may come from another cache directory)
            module = (_import_file(module_name, path) if path is not None else
                      importlib.import_module(module_name))
        kernel = getattr(module, name)
    serialize_index_writes(kernel)
    sig = tuple(sig)
    if sig not in kernel.overloads:
        kernel.compile(sig)  # loads it if the cache has it after all, else compiles and saves
        return os.getpid()
    try:
        kernel._cache.save_overload(sig, kernel.overloads[sig])  # compiled here: its object
        return os.getpid()
    except Exception:  # noqa: BLE001 - loaded here (no object code to save): compile anew
        pass
    options = {k: v for k, v in kernel.targetoptions.items() if k != "nopython"}
    fresh = numba.njit(cache=True, **options)(kernel.py_func)
    serialize_index_writes(fresh)
    fresh.compile(sig)
    return os.getpid()


def module_marker(path: str, key) -> str:
    """The marker file saying that the kernels of the fixed module at ``path`` (say
    :mod:`plax_numba.threefry_kernels`) were compiled into numba's disk cache for ``key``:
    named from the module's source, the helpers' and versions' salt and ``key``."""
    with open(path, "rb") as f:
        digest = hashlib.sha256(_SALT.encode() + f.read() + repr(key).encode()).hexdigest()
    name = os.path.splitext(os.path.basename(path))[0]
    return os.path.join(cache_dir(), f"m_{name}_{digest[:24]}.ok")


def mark(marker: str) -> None:
    """Creates the (empty) marker file ``marker`` unless it exists (:func:`on_disk`)."""
    if not os.path.exists(marker):
        with open(marker, "w"):
            pass


def serial_variant(text: str) -> str | None:
    """The module ``text`` of a ``parallel=True`` kernel with its loop made serial (same
    arguments, same results up to the order of a reduction's additions); None for a serial
    kernel. numba compiles it in well under half the time of the parallel form (the parfor
    passes are most of that), so tiering runs it while the parallel form compiles."""
    if "@njit(**_PARALLEL)" not in text:
        return None
    return (text.replace("@njit(**_PARALLEL)", "@njit(**_OPTIONS)").replace("prange(", "range(")
            + "\n# the serial form of a parallel kernel: tiering's step before it\n")


_requests: dict = {}   # _key -> the worker jobs request() started for that kernel
_requests_lock = threading.Lock()


def _start_jobs(text: str, arg_types: list, serial_first: bool) -> dict:
    """Submits the worker compilations of ``text`` (and first of its serial form, when
    ``serial_first`` and it is parallel) that the disk cache lacks: ``{"serial": (text,
    future or None), "final": (text, future or None)}`` (None: on disk already)."""
    from plax_numba import compile_worker
    jobs = {}
    serial = serial_variant(text) if serial_first else None
    for name, variant in (("serial", serial), ("final", text)):
        if variant is None:
            continue
        write_source(variant)
        future = None
        if not on_disk(variant, arg_types):
            from plax_numba import native_loader
            future = compile_worker.submit(compile_for_cache, variant, arg_types, cache_dir(),
                                           native_loader.enabled())
        jobs[name] = (variant, future)
    return jobs


def request(text: str, arg_types: list, interim=None) -> None:
    """Starts the worker compilation of the kernel of ``text`` for ``arg_types`` now, on the
    caller's thread (pickling the job and writing it to the worker's pipe: well under a
    millisecond), when tiering finds a step hot; :func:`load_compiled`, later on the
    background thread, waits for it. So the worker compiles a program's hot kernels back to
    back while this process loads the finished ones, and a parallel kernel's serial form
    (:func:`serial_variant`) goes first when ``interim`` is given: :func:`load_compiled`
    hands its dispatcher to ``interim`` as soon as it is loaded, while the parallel kernel
    still compiles. Nothing when workers are disabled or the kernel is on disk; errors
    surface in :func:`load_compiled`."""
    from plax_numba import compile_worker
    if compile_worker.workers_wanted() == 0 or on_disk(text, arg_types):
        return
    key = _key(text, arg_types)
    with _requests_lock:
        if key not in _requests:
            _requests[key] = (_start_jobs(text, arg_types, interim is not None), interim)


def load_compiled(text: str, arg_types: list):
    """The kernel of ``text`` for ``arg_types``, compiled in a worker process (unless it is
    in the disk cache already) and loaded here from numba's disk cache: this thread waits on
    the worker with the GIL released, and only the load (unpickling and linking machine
    code: milliseconds, plus numba's import the first time, overlapped with the worker's
    compilation) runs here, at a short GIL switch interval
    (:func:`plax_numba.tiered.yielding_gil`), the garbage collector paused, so the
    program's threads wait little for it."""
    from plax_numba import tiered
    with _requests_lock:  # started by request(), with what to do with the serial form
        jobs, interim = _requests.pop(_key(text, arg_types), (None, None))
    if jobs is None:
        jobs = _start_jobs(text, arg_types, serial_first=False)
    from plax_numba import native_loader
    clock = time.perf_counter
    start = clock()
    with tiered.yielding_gil():  # the first time, while the worker compiles
        if not native_loader.enabled():
            prepare_numba()
        else:
            try:
                native_loader.prepare()
            except Exception:  # noqa: BLE001 - the load itself counts what went wrong
                pass
    imported = clock()
    _load_interim(jobs, arg_types, interim)
    job = jobs["final"][1]
    if job is not None:
        compiled_by = job.result()  # raises WorkerCompileError (with the worker's traceback)
    else:
        compiled_by = None  # on disk already
    compiled = clock()
    with tiered.yielding_gil():
        kernel = _load_native(text, arg_types)  # numba is not imported for it
    if kernel is not None:
        load_stats["loaded"] += 1
        load_times.append({"import numba": 0.0, "worker": compiled - imported,
                           "load": clock() - compiled, "compiled by": compiled_by,
                           "at": clock(), "native": True})
        _compiled[_key(text, arg_types)] = kernel
        return kernel
    with tiered.yielding_gil():
        prepare_numba()  # (nothing the first time round: numba is set up already)
    compiled = clock()
    with tiered.yielding_gil():
        with _collections_deferred():  # (its helpers' modules, imported the first time)
            kernel = load_kernel(text)
        loaded = load_dispatcher(kernel, numba_signature(arg_types), "prange(" in text)
    load_stats["loaded" if loaded else "compiled here"] += 1
    load_times.append({"import numba": imported - start, "worker": compiled - imported,
                       "load": clock() - compiled, "compiled by": compiled_by,
                       "at": clock()})
    _compiled[_key(text, arg_types)] = kernel
    return kernel


def _load_interim(jobs: dict, arg_types: list, interim) -> None:
    """Loads the serial form among ``jobs`` and hands it to ``interim``, unless the final
    kernel is ready as soon (on disk, or its job done); a serial form that failed is skipped
    silently (the final kernel's own failure is what gets reported)."""
    from plax_numba import tiered
    final = jobs["final"][1]
    if interim is None or "serial" not in jobs or final is None or final.done():
        return
    text, future = jobs["serial"]
    try:
        if future is not None:
            future.result()
        with tiered.yielding_gil():
            kernel = _load_native(text, arg_types)
            if kernel is None:
                prepare_numba()
                with _collections_deferred():
                    kernel = load_kernel(text)
                load_dispatcher(kernel, numba_signature(arg_types), False)
        interim(kernel)
        serial_loaded_at.append(time.perf_counter())
    except Exception:  # noqa: BLE001 - only a shortcut; the parallel kernel follows
        pass


def entry_point(kernel, arg_types: list):
    """The compiled entry point of ``kernel`` for ``arg_types``: callable without the
    dispatcher's type lookup (the caller passes exactly those types: C-contiguous arrays of
    the right dtypes and ranks, scalars). For a kernel linked without numba
    (:class:`plax_numba.native_loader.NativeKernel`) its entry point, which checks them."""
    from plax_numba.native_loader import NativeKernel  # (imports no numba)
    if isinstance(kernel, NativeKernel):
        return kernel.function
    return kernel.overloads[numba_signature(arg_types)].entry_point
