"""The conformance kit on the simulated GPU, with zero host round trips.

One child process runs ``pytest --pyargs plax.testing.conformance --plax-backend=cupy
--plax-conformance-quick`` with ``-p fake_cupy_plugin`` and ``PLAX_SIM_TRAFFIC`` set, so the
plugin records each test's host traffic (``plax_cupy.count()`` around the test, and the
simulated CuPy's own count of device-to-host reads). Then:

* the kit passes;
* per primitive of ``plax.lax``: no test ran it on the host reference kernels
  (``host_fallbacks``); primitives still without a GPU path are listed in
  :data:`KNOWN_HOST_FALLBACKS`, strictly expected to fail, so a primitive that gains its path
  must leave the list;
* no test read a device value to the host other than through the backend's ``to_host``
  (reading results, host callbacks' operands, ``cond``/``while`` decisions): a kernel that
  calls ``.get()``/``.item()``/``float()`` on a device array is a hidden synchronisation;
* no test copied host data to the device other than through the backend's ``put``
  (``device_put``, constants of compiled programs): a kernel that builds a table on the host
  and uploads it per call is a host copy (build it on the device).

The kit takes about a minute on the simulation once its kernels are compiled (with g++, cached
in ``/tmp/plax_cupy_host``; the first run compiles them, a few minutes).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from test_simulated_streams import REPO, child_env

#: primitive name -> why it still leaves the device; remove an entry when its kernel lands
#: (the strict xfail then fails, saying so)
KNOWN_HOST_FALLBACKS: dict[str, str] = {}

pytestmark = pytest.mark.skipif(shutil.which("g++") is None or "fake_cupy" in sys.modules,
                                reason="no C++ compiler (g++) for the simulated GPU, or "
                                       "already on it")


def _lax_primitive_names() -> list[str]:
    from plax.testing.conformance.test_coverage import lax_primitives
    return [p.name for p in lax_primitives()]


@pytest.fixture(scope="module")
def kit():
    """``(returncode, output tail, {test id: traffic})`` of the kit on the simulated GPU."""
    # a directory of our own: pytest prunes old tmp_path_factory directories, and a parallel
    # pytest session of the same user may do so while the kit runs
    tmp = tempfile.mkdtemp(prefix="plax_sim_traffic_")
    path = os.path.join(tmp, "traffic.json")
    env = dict(child_env(), PLAX_SIM_TRAFFIC=path)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "fake_cupy_plugin", "-q",
                           "-p", "no:cacheprovider", "-p", "no:randomly", "-W", "ignore",
                           "--pyargs", "plax.testing.conformance", "--plax-backend=cupy",
                           "--plax-conformance-quick"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=1500)
    tail = done.stdout[-5000:] + done.stderr[-2000:]
    try:
        assert os.path.exists(path), tail  # the session ran to its end
        with open(path) as f:
            return done.returncode, tail, json.load(f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_conformance_kit_passes_on_the_simulated_gpu(kit):
    returncode, tail, _ = kit
    assert returncode == 0, tail


def _params():
    return [pytest.param(name, marks=[pytest.mark.xfail(strict=True, reason=KNOWN_HOST_FALLBACKS[name])]
                         if name in KNOWN_HOST_FALLBACKS else [])
            for name in _lax_primitive_names()]


@pytest.mark.parametrize("primitive", _params())
def test_primitive_never_leaves_the_device(kit, primitive):
    _, _, traffic = kit
    tests = sorted(t for t, rec in traffic.items() if rec["fallbacks"].get(primitive))
    assert not tests, (f"{primitive!r} ran on the host reference kernels (no GPU path) in "
                       f"{len(tests)} conformance tests, e.g. {tests[:5]}")


def test_no_host_read_outside_the_backends_to_host(kit):
    _, _, traffic = kit
    hidden = {t: rec["unaccounted_reads"] for t, rec in traffic.items() if rec["unaccounted_reads"]}
    assert not hidden, ("device values read to the host by something other than the backend's "
                        f"to_host (a kernel synchronising on the host): {dict(list(hidden.items())[:10])}")


def test_no_host_to_device_copy_outside_the_backends_put(kit):
    _, _, traffic = kit
    hidden = {t: rec["unaccounted_writes"] for t, rec in traffic.items() if rec.get("unaccounted_writes")}
    assert not hidden, ("host data copied to the device by something other than the backend's "
                        f"put (a kernel uploading a host array): {dict(list(hidden.items())[:10])}")


def test_known_fallbacks_are_primitives():
    # a misspelt entry would xfail nothing and hide nothing: keep the list honest
    assert set(KNOWN_HOST_FALLBACKS) <= set(_lax_primitive_names())
