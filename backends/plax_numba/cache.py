"""Compiled kernels, keyed by their generated source: in memory, and on disk through numba.

A kernel's source is written to ``<cache dir>/k_<hash>.py`` (the hash covers the source,
the scalar helpers' source and the numba version) and imported from there, so numba's own
on-disk cache (``cache=True``, which needs a real source file) keeps its machine code: a
second process loads it instead of compiling. Within a process, one dispatcher per source;
numba keys its compiled versions by argument types.

The cache directory is ``$PLAX_NUMBA_CACHE_DIR``, else ``$XDG_CACHE_HOME/plax_numba`` (or
``~/.cache/plax_numba``), else a temporary directory when those are not writable.

numba itself is imported by the first load or compilation (:func:`load_kernel`), not by this
module: with tiering, a program's first call only names its kernels (their source and
path), so a process whose jitted functions never get hot never pays numba's import
(~0.15-0.25 s on a 2-core host, the bulk of a first call).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
import time

import numpy as np

_HEADER = '''"""A plax_numba kernel, generated from {primitives}."""
import math
import numpy as np
from numba import njit, prange
from plax_numba.scalar import fmax, fmin, idiv, irem, fsign, logistic, round_away, exp_f32
from plax_numba.scalar import tanh_f32, logistic_f32
from plax_numba.libm_free import log_f32, expm1_f32, erf_f32, erfc_f32, sin_f32, cos_f32
from plax_numba.libm_free import erf_inv_f32, lgamma_f32, digamma_f32
from plax_numba.scalar import bitcast, nextafter_f32, nextafter_f64
from plax_numba.special import bessel_i0e_f32, bessel_i0e_f64, bessel_i1e_f32, bessel_i1e_f64
from plax_numba.special import digamma_f64
from plax_numba.special_gamma import igamma_f32, igamma_f64, igammac_f32, igammac_f64
from plax_numba.special_gamma import igamma_grad_a_f32, igamma_grad_a_f64
from plax_numba.special_gamma import random_gamma_grad_f32, random_gamma_grad_f64
from plax_numba.special_zeta import zeta_f32, zeta_f64, polygamma_f32, polygamma_f64
from plax_numba.special_beta import betainc_f32, betainc_f64
from plax_numba.special_erf import erf_inv_f64
from plax_numba.arrays import dot_rows, dot_loops, dot_blas, dot_blas_mv, dot_bool, matvec_t

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy", boundscheck=False)
_PARALLEL = dict(_OPTIONS, parallel=True)

'''

_lock = threading.Lock()
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


def _salt() -> str:
    helpers = b""
    here = os.path.dirname(os.path.abspath(__file__))
    # the helpers the generated kernels call
    for name in ("scalar.py", "libm_free.py", "special.py", "special_gamma.py",
                 "special_zeta.py", "special_beta.py", "special_erf.py", "arrays.py"):
        with open(os.path.join(here, name), "rb") as f:  # read, not imported: no numba
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
            probe = os.path.join(path, f".probe{os.getpid()}")
            with open(probe, "w"):
                pass
            os.remove(probe)
        except OSError:
            continue
        _dir = path
        return path
    raise OSError(f"plax_numba: no writable cache directory among {candidates}")


def module_source(kernel_source: str, primitives: list[str]) -> str:
    """The complete module text of a kernel (header, helpers' imports, the kernel)."""
    return _HEADER.format(primitives=_describe(primitives)) + kernel_source


def _describe(primitives: list[str]) -> str:
    names = list(dict.fromkeys(primitives))  # first-use order, once each
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
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        # numba pickles the module's name into its cache and imports it when loading
        sys.modules[name] = module
        spec.loader.exec_module(module)
        kernel = _kernels[path] = module.kernel
        return kernel


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

    On tiering's background thread (:func:`plax_numba.tiered.compiles_in_worker`) the
    compilation runs in a worker process (:mod:`plax_numba.compile_worker`), which writes
    numba's disk cache, and this process only loads the machine code from there
    (:func:`load_compiled`); elsewhere (``PLAX_NUMBA_SYNC=1``, ``PLAX_NUMBA_WORKERS=0``)
    numba compiles here."""
    from plax_numba import tiered
    if tiered.compiles_in_worker():
        return load_compiled(text, arg_types)
    compile_for_cache(text, arg_types)
    kernel = _kernels[source_path(text)]
    _compiled[_key(text, arg_types)] = kernel
    return kernel


#: what happened to kernels tiering asked for: compiled in a worker and loaded here from the
#: disk cache ("loaded"), or compiled here after all because the cache missed them
#: ("compiled here": another process's index write may drop an entry)
load_stats = {"loaded": 0, "compiled here": 0}
#: seconds spent by each :func:`load_compiled`: importing numba (the first), waiting for the
#: worker beyond that, loading the machine code here (benchmarks print them)
load_times: list = []


def compile_for_cache(text: str, arg_types: list, directory: str | None = None) -> None:
    """Compiles the kernel of module ``text`` for ``arg_types`` into numba's disk cache (or
    finds it there), and marks it as there (:func:`on_disk`). Runs in a compile worker
    (:func:`load_compiled`, which passes its cache ``directory``) and for synchronous
    compilations."""
    global _dir
    if directory is not None:
        _dir = directory  # a worker serves one process: its cache directory
    kernel = load_kernel(text)
    kernel.compile(numba_signature(arg_types))
    marker = _marker(text, arg_types)
    if not os.path.exists(marker):
        with open(marker, "w"):
            pass


def _marker(text: str, arg_types: list) -> str:
    sig = hashlib.sha256(repr(_key(text, arg_types)[1]).encode()).hexdigest()[:12]
    return f"{source_path(text)[:-3]}.{sig}.ok"


def on_disk(text: str, arg_types: list) -> bool:
    """Whether the kernel of ``text`` for ``arg_types`` was compiled into numba's disk cache
    (by any process): a file test, no numba import. A hint, not a promise (another process's
    index write can drop an entry; :func:`load_compiled` then compiles in place)."""
    return os.path.exists(_marker(text, arg_types))


_prepared = []


def _prepare_numba() -> None:
    """Imports numba and builds its CPU typing and target contexts (their registries import
    numba's NumPy support and SciPy's BLAS: most of a first load's cost), once."""
    if _prepared:
        return
    import numba  # noqa: F401
    try:  # numba's own lazy set-up, done here ahead of the first load
        from numba.core.registry import cpu_target
        cpu_target.typing_context.refresh()
        cpu_target.target_context.refresh()
    except Exception:  # noqa: BLE001 - an internal of numba moved: the load does it later
        pass
    import plax_numba.arrays, plax_numba.libm_free, plax_numba.scalar  # noqa: F401,E401
    _prepared.append(True)


def load_compiled(text: str, arg_types: list):
    """The kernel of ``text`` for ``arg_types``, compiled in a worker process and loaded here
    from numba's disk cache: this thread waits on the worker with the GIL released, and only
    the load (unpickling and linking machine code: milliseconds, plus numba's import the first
    time, overlapped with the worker's compilation) runs here, at a short GIL switch interval
    (:func:`plax_numba.tiered.yielding_gil`) so the program's threads wait little for it."""
    from plax_numba import compile_worker, tiered
    write_source(text)
    job = None if on_disk(text, arg_types) else compile_worker.submit(compile_for_cache, text,
                                                                      arg_types, cache_dir())
    clock = time.perf_counter
    start = clock()
    with tiered.yielding_gil():
        _prepare_numba()  # the first time, while the worker compiles
    imported = clock()
    if job is not None:
        job.result()  # raises WorkerCompileError (the worker's traceback) if it failed
    compiled = clock()
    with tiered.yielding_gil():
        kernel = load_kernel(text)
        sig = numba_signature(arg_types)
        misses = sum(kernel.stats.cache_misses.values())
        kernel.compile(sig)
        missed = sum(kernel.stats.cache_misses.values()) > misses
    load_stats["compiled here" if missed else "loaded"] += 1
    load_times.append({"import numba": imported - start, "worker": compiled - imported,
                       "load": clock() - compiled})
    _compiled[_key(text, arg_types)] = kernel
    return kernel


def entry_point(kernel, arg_types: list):
    """The compiled entry point of ``kernel`` for ``arg_types``: callable without the
    dispatcher's type lookup (the caller passes exactly those types: C-contiguous arrays of
    the right dtypes and ranks, scalars)."""
    return kernel.overloads[numba_signature(arg_types)].entry_point
