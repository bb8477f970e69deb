"""tests/cupy's simulated GPU (``fake_cupy``) for the GPU benchmark scripts, which run on it
with ``--simulated`` (or always: gpu_launches.py, gpu_rows.py, gpu_kernel_cost.py's planning
child) in CI and on machines without a GPU."""
from __future__ import annotations

import os
import sys
import types

_FAKE_CUPY_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "cupy")


def install(sm_count: int | None = None) -> types.ModuleType:
    """Puts the simulated CuPy in place of CuPy, before plax_cupy imports it: launches and
    copies are counted as on a real GPU (``plax_cupy.count()``), the times mean nothing.

    Args:
      sm_count: the multiprocessor count the simulated device reports (the launch
        configuration depends on it); ``None``: the simulation's default.

    Returns:
      The ``fake_cupy`` module (for scripts that wrap its kernel launches to record them).

    Example:
      >>> fake_cupy = install(sm_count=132)
      >>> import plax; plax.devices("gpu")   # the simulated device
    """
    if _FAKE_CUPY_DIR not in sys.path:
        sys.path.insert(0, _FAKE_CUPY_DIR)
    import fake_cupy
    if sm_count is None:
        fake_cupy.install()
    else:
        fake_cupy.install(sm_count=sm_count)
    return fake_cupy
