"""Compiling generated CUDA source without a GPU: NVRTC to PTX, and the host C++ check.

NVRTC (the CUDA runtime compiler) needs no GPU and no driver: it ships as the
``nvidia-cuda-nvrtc-cu12`` wheel, whose ``libnvrtc.so.12`` lives in
``site-packages/nvidia/cuda_nvrtc/lib``. CuPy 14 finds it there itself (through
``cuda-pathfinder``); older CuPy looks only in a CUDA toolkit, so :func:`preload_nvrtc` loads the
wheel's library with ``ctypes`` (``RTLD_GLOBAL``) before CuPy's first NVRTC call, which makes
the later ``dlopen("libnvrtc.so.12")`` find the already-loaded library. The backend calls it
before compiling kernels, the tests before compiling anything.

:func:`compile_ptx` is what CI uses to check every generated kernel: a compile error or a
warning fails. :func:`compile_host` builds the same source with ``-DPLAX_HOST`` as a shared
library for the host (g++), whose ``plax_host`` entry runs the generated per-element code
serially, so its values can be checked against the NumPy backend without a GPU.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading

from plax.atomic_file import write_atomically

#: NVRTC options of every kernel: the oldest architecture plax supports (Ampere: bf16 and
#: TF32 tensor cores), C++17 (hex float literals), and no fast-math (IEEE results as the CPU
#: backends give)
NVRTC_OPTIONS = ("-arch=compute_80", "--std=c++17")
#: ... plus ``-G`` (no device optimisation): the front end's errors and warnings, which is what
#: checking generated source needs, at a tenth of the time (1.4 s instead of 19 s for the 666
#: single-primitive kernels in one unit); CI compiles a sample with :data:`NVRTC_OPTIONS` too
NVRTC_CHECK_OPTIONS = NVRTC_OPTIONS + ("-G",)


class CompileError(RuntimeError):
    """NVRTC or the host compiler rejected (or warned about) generated source; the message
    holds the compiler's log and the source."""


def nvrtc_library_paths() -> list[str]:
    """``libnvrtc.so*`` files of the ``nvidia-cuda-nvrtc-cu12`` wheel on ``sys.path``."""
    found = []
    for entry in sys.path:
        found += glob.glob(os.path.join(entry, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so*"))
    return sorted(p for p in found if "builtins" not in os.path.basename(p))


_preloaded: list = []


def preload_nvrtc() -> str | None:
    """Loads the wheel's NVRTC library globally (once), so CuPy finds it without a CUDA
    toolkit; returns its path, or None where the wheel is not installed (CuPy then searches
    ``CUDA_PATH`` and the system as usual)."""
    if _preloaded:
        return _preloaded[0]
    for path in nvrtc_library_paths():
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
        _preloaded.append(path)
        return path
    return None


def nvrtc_version() -> tuple[int, int]:
    """NVRTC's ``(major, minor)`` version (loads it; needs CuPy, not a GPU)."""
    preload_nvrtc()
    from cupy.cuda import nvrtc
    return tuple(nvrtc.getVersion())


def compile_ptx(source: str, name: str = "plax_kernel.cu", options=NVRTC_OPTIONS,
                allow_warnings: bool = False) -> str:
    """Compiles CUDA C++ ``source`` to PTX with NVRTC (no GPU needed).

    Args:
      source: the translation unit.
      name: its file name in messages.
      options: NVRTC options (default :data:`NVRTC_OPTIONS`).
      allow_warnings: if False (the default), a warning in NVRTC's log is an error.

    Returns:
      The PTX text.

    Raises:
      CompileError: NVRTC failed or warned, with its log and the numbered source.
    """
    ptx = _compile(source, name, options, allow_warnings, "ptx")
    return ptx.decode() if isinstance(ptx, bytes) else ptx


#: NVRTC options of the kernels plax launches (besides the device's ``-arch``), spelled out
#: rather than left to defaults, because CuPy's ``RawModule(code=...)`` appends ``-ftz=true``
#: to every compile and so flushes float32 subnormals to zero, which NumPy and XLA (its
#: ``xla_gpu_ftz`` is off) keep. Division and square root are IEEE round-to-nearest (XLA uses
#: IEEE ``sqrt.rn`` and the slightly looser ``div.full`` for float32; IEEE division gives the
#: CPU backends' bits); multiply-adds may contract to FMA, as XLA's GPU compiler lets LLVM do.
DEVICE_OPTIONS = ("--std=c++17", "-ftz=false", "-prec-div=true", "-prec-sqrt=true", "-fmad=true")


def device_target(compute_capability: int, supported=None) -> tuple[str, str]:
    """The ``-arch`` option and output kind plax compiles a device's kernels for.

    A device NVRTC knows gets a cubin (``-arch=sm_XY``: machine code, loaded as is, as CuPy
    does); a newer device gets PTX for the newest architecture below it that NVRTC supports,
    which the driver compiles on load.

    Args:
      compute_capability: the device's, as an integer (``90`` for an H100/H200).
      supported: the architectures NVRTC supports (default: NVRTC's ``getSupportedArchs``).

    Returns:
      ``("-arch=sm_90", "cubin")`` or ``("-arch=compute_90", "ptx")``.

    Raises:
      CompileError: NVRTC supports no architecture at or below the device's.

    Example:
      >>> device_target(90, supported=[75, 80, 86, 89, 90])
      ('-arch=sm_90', 'cubin')
    """
    if supported is None:
        preload_nvrtc()
        from cupy.cuda import nvrtc
        supported = nvrtc.getSupportedArchs()
    supported = sorted(int(a) for a in supported)
    cc = int(compute_capability)
    if cc in supported:
        return f"-arch=sm_{cc}", "cubin"
    below = [a for a in supported if a <= cc]
    if not below:
        raise CompileError(f"NVRTC {nvrtc_version()} supports architectures {supported}, none at "
                           f"or below the device's compute capability {cc}: install an NVRTC "
                           "(nvidia-cuda-nvrtc wheel) that supports this GPU")
    return f"-arch=compute_{below[-1]}", "ptx"


def compile_binary(source: str, options, kind: str, name: str = "plax_kernel.cu") -> bytes:
    """Compiles ``source`` with NVRTC to what a device loads: a cubin or PTX.

    Unlike ``cupy.RawModule(code=...)`` nothing is added to ``options`` (CuPy adds
    ``-ftz=true``); warnings are allowed (the source checks of CI are where they fail).

    Args:
      source: the translation unit.
      options: every NVRTC option, ``-arch`` included (see :func:`device_target`).
      kind: ``"cubin"`` (an ``-arch=sm_XY`` compile) or ``"ptx"``.
      name: the file name in messages.

    Returns:
      The binary's bytes (PTX as its text's bytes).

    Raises:
      CompileError: NVRTC failed, with its log and the numbered source.
      ValueError: an unknown ``kind``.

    Example:
      >>> arch, kind = device_target(90)                                    # doctest: +SKIP
      >>> cubin = compile_binary(src, DEVICE_OPTIONS + (arch,), kind)       # doctest: +SKIP
    """
    if kind not in ("cubin", "ptx"):
        raise ValueError(f"kind must be 'cubin' or 'ptx', got {kind!r}")
    out = _compile(source, name, options, True, kind)
    return out.encode() if isinstance(out, str) else bytes(out)


def _compile(source: str, name: str, options, allow_warnings: bool, kind: str):
    preload_nvrtc()
    from cupy.cuda import nvrtc
    prog = nvrtc.createProgram(source, name, [], [])
    try:
        try:
            nvrtc.compileProgram(prog, list(options))
        except nvrtc.NVRTCError as err:
            raise CompileError(f"NVRTC failed ({err}):\n{nvrtc.getProgramLog(prog)}\n"
                               f"{_numbered(source)}") from None
        log = nvrtc.getProgramLog(prog).strip()
        if log and not allow_warnings:
            raise CompileError(f"NVRTC warned:\n{log}\n{_numbered(source)}")
        try:
            return nvrtc.getCUBIN(prog) if kind == "cubin" else nvrtc.getPTX(prog)
        except nvrtc.NVRTCError as err:  # (e.g. a cubin of a virtual architecture's compile)
            raise CompileError(f"NVRTC gave no {kind} ({err}) for options {list(options)}") from None
    finally:
        nvrtc.destroyProgram(prog)


#: the standard headers every generated kernel's host preamble includes (``plax_cupy.codegen``)
HOST_HEADERS = ("cmath", "cstring", "cstdlib")
#: the host compiler's flags (besides ``-D<define>`` and the output). GNU C++14, not C++17 as
#: NVRTC compiles: C++17's ``<cmath>`` adds the special functions' templates, which doubled the
#: precompiled header every build loads (the simulated GPU's conformance kit builds ~1400
#: kernels: 218 -> 172 s); GNU mode keeps the hexadecimal float literals the preamble writes.
#: ``-ffp-contract=off`` matters here: GNU mode would otherwise fuse multiply-adds
HOST_FLAGS = ("-std=gnu++14", "-O0", "-fPIC", "-fno-fast-math", "-ffp-contract=off")

_precompiled: dict = {}  # (compiler, define, workdir) -> the -include options ([] if none)
_precompiled_lock = threading.Lock()  # (threads of one process would share its temp names)

#: host compiler runs of :func:`compile_host` in this process (builds not found in its cache):
#: the simulated GPU's count of kernel compilations
HOST_BUILDS = [0]


def _precompiled_header(compiler: str, define: str, workdir: str,
                        text: str | None = None) -> list[str]:
    """``-include`` options naming a precompiled header of ``text`` (default: the
    ``#include`` lines of :data:`HOST_HEADERS`), built once in ``workdir`` per compiler
    version, define, flags and text: parsing those headers is most of a small kernel's g++
    build at ``-O0`` (0.16 s CPU; 0.08 s with the header precompiled), and the simulated GPU's
    tests build every kernel they run this way. The kernels' own ``#include`` lines then find
    the headers already included; their preamble defines nothing those headers use before
    including them, so the result is the same program. :func:`compile_host` passes
    :data:`plax_cupy.codegen.PREAMBLE` itself as ``text`` for the kernels that begin with it
    (all of plax's), and builds only the rest. Empty (plain builds) when the compiler cannot
    build one; a compiler that cannot use it includes the header's text instead."""
    if text is None:
        text = "".join(f"#include <{name}>\n" for name in HOST_HEADERS)
    key = (compiler, define, workdir, text)
    if key in _precompiled:
        return _precompiled[key]
    with _precompiled_lock:
        if key not in _precompiled:
            _precompiled[key] = _build_precompiled_header(compiler, define, workdir, text)
        return _precompiled[key]


def _build_precompiled_header(compiler: str, define: str, workdir: str, text: str) -> list[str]:
    options: list[str] = []
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                                 timeout=60).stdout
        digest = hashlib.sha1("\0".join((version, define) + HOST_FLAGS + (text,))
                              .encode()).hexdigest()[:16]
        header = os.path.join(workdir, f"pch{digest}.h")
        if not os.path.exists(header + ".gch"):
            write_atomically(header, text)
            out = f"{header}.{os.getpid()}.gch.tmp"
            done = subprocess.run([compiler, f"-D{define}", *HOST_FLAGS, "-x", "c++-header",
                                   "-o", out, header], capture_output=True, text=True,
                                  timeout=300)
            if done.returncode != 0:
                raise OSError(done.stderr)
            os.replace(out, header + ".gch")
        options = ["-include", header]
    except (OSError, subprocess.SubprocessError):
        options = []  # builds without it, as before
    return options


def compile_host(source: str, workdir: str | None = None, define: str = "PLAX_HOST") -> ctypes.CDLL:
    """Builds ``source`` with ``-DPLAX_HOST`` as a host shared library (g++, ``-O0``, no
    fast-math) and loads it; cached by the source's hash in ``workdir``. ``define="PLAX_SIM"``
    builds the CUDA kernels themselves for the host instead (one thread per block; see
    ``tests/cupy/fake_cupy.py``). The standard headers come precompiled
    (:func:`_precompiled_header`).

    Args:
      source: the generated CUDA C++ source.
      workdir: where sources, libraries and the precompiled header are kept (default
        ``$TMPDIR/plax_cupy_host``).
      define: ``"PLAX_HOST"`` or ``"PLAX_SIM"``.

    Returns:
      The loaded library.

    Raises:
      CompileError: the compiler failed, with its output and the numbered source.

    Example::

      lib = compile_host(plan.source)   # lib.plax_host(...) runs the kernel's per-element code
    """
    workdir = workdir or os.path.join(tempfile.gettempdir(), "plax_cupy_host")
    os.makedirs(workdir, exist_ok=True)
    digest = hashlib.sha1((define + source).encode()).hexdigest()[:16]
    lib = os.path.join(workdir, f"k{digest}.so")
    if not os.path.exists(lib):
        _build_library(source, workdir, define, lib)
    try:
        return ctypes.CDLL(lib)
    except OSError:
        # linked by the linker alone, it needs a library the process has not loaded (a C++
        # runtime symbol, say): built again and linked by the compiler's driver
        _build_library(source, workdir, define, lib, driver=True)
        return ctypes.CDLL(lib)


def _build_library(source: str, workdir: str, define: str, lib: str,
                   driver: bool = False) -> None:
    """:func:`compile_host`'s build of ``source`` into the shared library ``lib``: compiled
    to an object, then linked (:func:`_link_shared`)."""
    # names of this process and thread: programs' kernels are built on several threads
    # (plax_cupy.kernel_modules), and other processes may build the same source at once
    unique = f"{os.getpid()}.{threading.get_ident()}"
    src = f"{lib[:-3]}.{unique}.cpp"
    compiler = os.environ.get("CXX", "g++")
    text, header = _split_preamble(compiler, define, workdir, source)
    with open(src, "w") as f:
        f.write(text)
    obj, tmp = lib + f".{unique}.o", lib + f".{unique}.tmp"
    cmd = [compiler, f"-D{define}", *HOST_FLAGS, "-c", *header, "-o", obj, src]
    done = subprocess.run(cmd, capture_output=True, text=True)
    os.remove(src)
    if done.returncode != 0:
        raise CompileError(f"{' '.join(cmd)} failed:\n{done.stderr}\n{_numbered(source)}")
    try:
        _link_shared(compiler, obj, tmp, driver)
    finally:
        os.remove(obj)
    os.replace(tmp, lib)
    with _precompiled_lock:
        HOST_BUILDS[0] += 1


@functools.lru_cache(maxsize=None)
def linker_of(compiler: str) -> str | None:
    """The path of the linker ``compiler`` runs (``-print-prog-name=ld``), or None; asked
    once per compiler and process."""
    found = subprocess.run([compiler, "-print-prog-name=ld"], capture_output=True,
                           text=True).stdout.strip()
    return shutil.which(found) if found else None


def _link_shared(compiler: str, obj: str, out: str, driver: bool = False) -> None:
    """Links the object ``obj`` as the shared library ``out``: with the compiler's linker
    alone (``ld -shared OBJ -lm``: ~3 ms), not through the compiler's driver, which adds the
    C++ runtime and its start files (~27 ms of a ~90 ms build; the generated code calls only
    libm), unless ``driver`` or the linker fails."""
    linker = None if driver else linker_of(compiler)
    if linker and subprocess.run([linker, "-shared", "-o", out, obj, "-lm"],
                                 capture_output=True).returncode == 0:
        return
    cmd = [compiler, "-shared", "-o", out, obj]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise CompileError(f"{' '.join(cmd)} failed:\n{done.stderr}")


def _split_preamble(compiler: str, define: str, workdir: str, source: str) -> tuple[str, list]:
    """``(text to build, -include options)`` of ``source``: a kernel beginning with
    :data:`plax_cupy.codegen.PREAMBLE` (~27 KB, which every build parsed again: ~8 ms of a
    ~95 ms build) takes it from a precompiled header and builds the rest, its lines numbered
    as in ``source`` (``#line``) so the compiler's messages match :func:`_numbered`; any other
    source builds whole, with the standard headers precompiled."""
    from plax_cupy.codegen import PREAMBLE
    if source.startswith(PREAMBLE) and PREAMBLE.endswith("\n"):
        header = _precompiled_header(compiler, define, workdir, PREAMBLE)
        if header:
            first = PREAMBLE.count("\n") + 1   # the line of source the rest begins on
            return f"#line {first}\n{source[len(PREAMBLE):]}", header
    return source, _precompiled_header(compiler, define, workdir)


def _numbered(source: str, limit: int = 80) -> str:
    """The source with line numbers (the first ``limit`` lines: the full text of a batched
    translation unit would bury the log)."""
    lines = source.splitlines()
    shown = "\n".join(f"{i + 1:4d} | {line}" for i, line in enumerate(lines[:limit]))
    return shown + (f"\n     ... ({len(lines) - limit} more lines)" if len(lines) > limit else "")
