"""pytest plugin: run a pytest session on the simulated CUDA device of :mod:`fake_cupy`.

    PYTHONPATH=backends:tests/cupy python -m pytest -p fake_cupy_plugin tests/cupy/test_gpu.py
    PYTHONPATH=backends:tests/cupy python -m pytest -p fake_cupy_plugin \
        --pyargs plax.testing.conformance --plax-backend=cupy --plax-conformance-quick

Loaded with ``-p`` (before any conftest), it puts the simulated CuPy in place of the real one
and registers the CuPy backend's plugin, which then finds one "GPU"; every simulated CuPy
operation counts as a launch in ``plax_cupy.counters()``.
"""
import fake_cupy

fake_cupy.install()


def _register():
    # at import (``-p`` loads this before the conformance kit chooses its backends)
    from plax import plugins
    import plax_cupy.plugin
    from plax_cupy import runtime
    if "cupy" not in plugins.registry().backends:
        plugins.register_plugin(plax_cupy.plugin, name="plax_cupy_simulated")
    fake_cupy.LAUNCH_HOOK = runtime.note_launch


_register()
