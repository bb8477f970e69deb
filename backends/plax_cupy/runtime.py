"""What the CuPy backend asks of the machine: is there CuPy, a driver and a GPU; memory limits;
out-of-memory errors that name the device.

:func:`probe` never raises: it returns the GPUs it found (possibly none) and, when none, one
line saying why (CuPy missing, no driver, no device). The plugin hook reports the backend only
where it found a GPU, so a machine with CuPy but without a GPU sees nothing change.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuInfo:
    """What :func:`probe` learned about one GPU."""

    id: int
    name: str
    compute_capability: tuple[int, int]
    multiprocessors: int
    total_memory: int


_probed: list = []


def probe() -> tuple[list[GpuInfo], str]:
    """The CUDA GPUs CuPy can use, and why there are none (``""`` when there are some).

    Cached for the process: a driver does not appear while it runs.
    """
    if _probed:
        return _probed[0]
    result = _probe()
    _probed.append(result)
    return result


def _probe() -> tuple[list[GpuInfo], str]:
    if os.environ.get("PLAX_CUPY_DISABLE"):
        return [], "disabled by PLAX_CUPY_DISABLE"
    if importlib.util.find_spec("cupy") is None:
        return [], "CuPy is not installed (pip install 'plax[cuda12]')"
    if "cupy" not in sys.modules and not _driver_loadable():
        # importing CuPy costs ~0.15 s; without a driver it could only say the same
        return [], "no CUDA GPU present (no CUDA driver: libcuda cannot be loaded)"
    try:
        import cupy
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # CUDARuntimeError without a driver, ImportError of a bad wheel
        text = str(err).splitlines()[0] if str(err) else type(err).__name__
        return [], f"no CUDA GPU present ({type(err).__name__}: {text})"
    if count == 0:
        return [], "no CUDA GPU present (the driver reports 0 devices)"
    gpus = []
    for i in range(count):
        p = cupy.cuda.runtime.getDeviceProperties(i)
        name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
        gpus.append(GpuInfo(i, name, (int(p["major"]), int(p["minor"])),
                            int(p["multiProcessorCount"]), int(p["totalGlobalMem"])))
    return gpus, ""


def _driver_loadable() -> bool:
    """Whether the CUDA driver library loads (cheap: no CuPy import, no device query)."""
    import ctypes
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll", "libcuda.dylib"):
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            continue
    return False


def memory_fraction() -> float | None:
    """``PLAX_GPU_MEMORY_FRACTION`` as a float in (0, 1], or None where unset.

    Raises:
      ValueError: a value that is not a number in (0, 1].
    """
    raw = os.environ.get("PLAX_GPU_MEMORY_FRACTION")
    if not raw:
        return None
    try:
        value = float(raw)
        if not 0.0 < value <= 1.0:
            raise ValueError
    except ValueError:
        raise ValueError(f"PLAX_GPU_MEMORY_FRACTION must be a number in (0, 1], got {raw!r}") from None
    return value


class GpuOutOfMemoryError(MemoryError):
    """A GPU allocation failed: names the device and the bytes asked for. The memory pool
    stays usable (cached blocks were released and the allocation retried once first)."""

    def __init__(self, device, nbytes: int | None, detail: str = ""):
        asked = f"{nbytes} bytes" if nbytes is not None else "memory"
        limit = ""
        frac = os.environ.get("PLAX_GPU_MEMORY_FRACTION")
        if frac:
            limit = f" (PLAX_GPU_MEMORY_FRACTION={frac} limits the pool)"
        super().__init__(f"Out of memory on {device} ({getattr(device, 'device_kind', '')}): "
                         f"could not allocate {asked}{limit}. {detail}".strip())
        self.device, self.nbytes = device, nbytes


def oom_bytes(err) -> int | None:
    """The size a CuPy ``OutOfMemoryError`` asked for (its first argument), if known."""
    args = getattr(err, "args", ())
    if args and isinstance(args[0], int):
        return args[0]
    import re
    m = re.search(r"allocating ([0-9,]+) bytes", str(err))
    return int(m.group(1).replace(",", "")) if m else None
