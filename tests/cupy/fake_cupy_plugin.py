"""pytest plugin: run a pytest session on the simulated CUDA device of :mod:`fake_cupy`.

    PYTHONPATH=backends:tests/cupy python -m pytest -p fake_cupy_plugin tests/cupy/test_gpu.py
    PYTHONPATH=backends:tests/cupy python -m pytest -p fake_cupy_plugin \
        --pyargs plax.testing.conformance --plax-backend=cupy --plax-conformance-quick

Loaded with ``-p`` (before any conftest), it puts the simulated CuPy in place of the real one
and registers the CuPy backend's plugin, which then finds one "GPU". ``plax_cupy.counters()``
counts launches as on a real GPU (where plax dispatches them); ``fake_cupy.COUNTS`` has the
simulation's own tally of CuPy operations.
"""
import fake_cupy

fake_cupy.install()


def _register():
    # at import (``-p`` loads this before the conformance kit chooses its backends)
    from plax import plugins
    import plax_cupy.plugin
    if "cupy" not in plugins.registry().backends:
        plugins.register_plugin(plax_cupy.plugin, name="plax_cupy_simulated")
    # (plax counts launches where it dispatches them, the same on the simulated GPU as on a
    # real one: plax_cupy.runtime.Counters)


_register()


# ---------------------------------------------------------------- graphs replay correctly

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _no_wrong_replay():
    """Fails a test during which a captured CUDA graph replayed otherwise than a plain run
    (``plax_cupy.graphs.MISMATCHES``), unless the test made one do so on purpose
    (``fake_cupy.replay_fault``): a correct program never warns."""
    from plax_cupy import graphs
    mismatches, injected = graphs.MISMATCHES[0], fake_cupy.FAULTS_INJECTED[0]
    yield
    if graphs.MISMATCHES[0] != mismatches and fake_cupy.FAULTS_INJECTED[0] == injected:
        pytest.fail(f"{graphs.MISMATCHES[0] - mismatches} compiled program(s) replayed a CUDA "
                    "graph otherwise than a plain run (graphs.ReplayMismatchWarning)")


# ---------------------------------------------------------------- host traffic per test

#: with ``PLAX_SIM_TRAFFIC=path``, each test's host traffic is written there (JSON) at the end
#: of the session: ``{nodeid: {"fallbacks": {primitive: n}, "unaccounted_reads": n,
#: "launches": n, "device_to_host": n, "host_to_device": n}}`` (tests with traffic only).
#: ``unaccounted_reads`` are device-to-host reads the backend did not make through ``to_host``
#: (a kernel reading a value on the host: never allowed).
_TRAFFIC: dict = {}


def _traffic_path():
    import os
    return os.environ.get("PLAX_SIM_TRAFFIC")


def _install_traffic_hooks():
    import pytest

    class _TrafficRecorder:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_call(self, item):
            import plax_cupy
            reads = fake_cupy.COUNTS["device_to_host"]
            writes = fake_cupy.COUNTS["host_to_device"]
            with plax_cupy.count() as c:
                yield
            raw_reads = fake_cupy.COUNTS["device_to_host"] - reads - c.verify_reads
            raw_writes = fake_cupy.COUNTS["host_to_device"] - writes
            if c.host_fallbacks or raw_reads != c.device_to_host or raw_writes != c.host_to_device:
                _TRAFFIC[item.nodeid] = {"fallbacks": c.fallbacks,
                                         "unaccounted_reads": raw_reads - c.device_to_host,
                                         "unaccounted_writes": raw_writes - c.host_to_device,
                                         "launches": c.launches, "device_to_host": c.device_to_host,
                                         "host_to_device": c.host_to_device}
                _write()  # as it happens: a long run cut short still reports

        def pytest_sessionfinish(self, session):
            _write()

    def _write():
        import json
        with open(_traffic_path(), "w") as f:
            json.dump(_TRAFFIC, f, indent=1, sort_keys=True)

    return _TrafficRecorder()


def pytest_configure(config):
    if _traffic_path():
        config.pluginmanager.register(_install_traffic_hooks(), "plax_sim_traffic")
