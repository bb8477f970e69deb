"""Entry point of the CuPy GPU backend (``plax.backends: cupy = plax_cupy.plugin``).

The hook reports the backend only where CuPy imports and a CUDA driver lists at least one GPU;
elsewhere it returns no backend, quietly, so installing the ``cuda12`` extra on a machine
without a GPU changes nothing (``plax_cupy.status()`` / ``python -m plax_cupy`` say why).
"""
from plax.plugins import hookimpl


@hookimpl
def plax_backends():
    from plax_cupy.runtime import probe  # no CuPy import unless CuPy is installed
    gpus, _reason = probe()
    if not gpus:
        return []
    from plax_cupy.backend import CupyBackend  # imports cupy
    return [CupyBackend(gpus)]
