"""plax's disk cache of compiled CUDA kernels: one cubin (or PTX) file per source, NVRTC
options (the device's ``-arch`` among them) and NVRTC version, shared by every process.

plax compiles its generated kernels with its own NVRTC call (:func:`plax_cupy.nvrtc.
compile_binary`, so that no ``-ftz=true`` is added as CuPy adds it) and so keeps their binaries
itself rather than in CuPy's kernel cache. The directory is ``$PLAX_CUPY_CACHE_DIR``, else
``$XDG_CACHE_HOME/plax_cupy`` (``~/.cache/plax_cupy``); where it cannot be created, a
directory of this process's own under the temporary directory (nothing shared). Files are
written under a temporary name and renamed into place, so processes compiling the same kernel
at once each find either nothing or a whole file. Nothing is ever evicted: delete the directory
to empty it.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import threading

from plax.atomic_file import write_atomically
from plax_cupy import nvrtc

#: bumped when what a cache file holds changes meaning (its name changes with it)
FORMAT = "plax_cupy-kernel-1"

_lock = threading.Lock()
_STATS = {"compiled": 0, "loaded": 0}
_fallback_dir: list = []


def cache_dir() -> str:
    """The cache directory (see the module), created if missing.

    Returns:
      its path.

    Example:
      >>> os.path.isdir(cache_dir())   # doctest: +SKIP
      True
    """
    chosen = os.environ.get("PLAX_CUPY_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "plax_cupy")
    try:
        os.makedirs(chosen, exist_ok=True)
        return chosen
    except OSError:
        with _lock:
            if not _fallback_dir:
                _fallback_dir.append(tempfile.mkdtemp(prefix="plax_cupy_kernels_"))
            return _fallback_dir[0]


def cache_key(source: str, options, version) -> str:
    """The hex digest naming the binary of ``source`` compiled with ``options`` by NVRTC
    ``version`` (every input that changes the binary is in it)."""
    text = "\0".join([FORMAT, ".".join(map(str, version)), *options, source])
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def compiled(source: str, options: tuple, kind: str) -> str:
    """The path of ``source``'s binary compiled with ``options``: from the cache, or compiled
    with NVRTC now and written there.

    Args:
      source: the CUDA C++ translation unit.
      options: every NVRTC option, ``-arch`` included.
      kind: ``"cubin"`` or ``"ptx"`` (:func:`plax_cupy.nvrtc.device_target`).

    Returns:
      the file's path (for ``cupy.RawModule(path=...)``).

    Raises:
      plax_cupy.nvrtc.CompileError: NVRTC rejected the source.

    Example:
      >>> arch, kind = nvrtc.device_target(90)                                # doctest: +SKIP
      >>> cupy.RawModule(path=compiled(src, nvrtc.DEVICE_OPTIONS + (arch,), kind))  # doctest: +SKIP
    """
    directory = cache_dir()
    path = os.path.join(directory, f"{cache_key(source, options, nvrtc.nvrtc_version())}.{kind}")
    if os.path.exists(path):
        with _lock:
            _STATS["loaded"] += 1
        return path
    binary = nvrtc.compile_binary(source, options, kind)
    write_atomically(path, binary)
    with _lock:
        _STATS["compiled"] += 1
    return path


def stats() -> dict:
    """``{"compiled": binaries NVRTC compiled in this process, "loaded": binaries found in the
    cache}``."""
    with _lock:
        return dict(_STATS)
