"""The runnable examples run, and the seed tutorial prints the values JAX printed for it.

The expected values below are copied from the tutorial text (shared/seeds/003, "JAX for the
Impatient"), i.e. recorded from real JAX with ``jax_threefry_partitionable=False``. Key bits are
compared exactly. Normal samples differ from that older JAX release in the seventh digit (JAX's
``erf_inv`` approximation changed since; plax matches today's JAX), and the tutorial ran its
matrix products at the accelerator's reduced default precision, so losses are compared with a
tolerance and the final loss must land in the tutorial's range.

The examples run on the default device, whatever backends are installed
(tests/test_installed_backend.py runs these tests with another backend installed).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_example(relpath: str, timeout: int = 300) -> str:
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    # each timing of the seed tutorials once: their timings are printed, not checked (5 x 5 runs
    # of 1000x1000 products and 1M-element selus were most of the examples' time)
    env.setdefault("PLAX_EXAMPLES_TIMING_ROUNDS", "1")
    proc = subprocess.run([sys.executable, str(ROOT / relpath)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)
    assert proc.returncode == 0, f"{relpath} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def impatient_output() -> str:
    return run_example("examples/seeds/jax_for_the_impatient.py")


def test_seed_prng_keys_match_the_tutorial(impatient_output):
    out = impatient_output
    assert "new key    [4146024105  967050713]" in out
    assert "new subkey [2718843009 1272950319]" in out
    # key, *subkeys = random.split(key, 4) printed the arrays below in the tutorial
    for words in ("3306097435, 3899823266", "147607341, 367236428", "2280136339, 1907318301",
                  "781391491, 1939998335"):
        assert re.search(r"\[\s*" + words.replace(", ", r",?\s+") + r"\]", out), words


def _floats_after(label: str, out: str) -> list[float]:
    return [float(m) for m in re.findall(re.escape(label) + r"\s*\[?\s*(-?\d+\.\d+)", out)]


def test_seed_normal_samples_match_the_tutorial(impatient_output):
    assert _floats_after("gives: ", impatient_output)[0] == pytest.approx(-0.20584236, abs=1e-6)
    assert _floats_after("--> normal", impatient_output)[1] == pytest.approx(0.14389051, abs=1e-6)
    assert _floats_after("--> normal", impatient_output)[2] == pytest.approx(-1.2515285, abs=2e-5)


def test_seed_linear_regression_matches_the_tutorial(impatient_output):
    losses = {int(step): float(v) for step, v in
              re.findall(r"Loss step (\d+):\s+(\d+\.\d+(?:e-?\d+)?)", impatient_output)[:21]}
    true_loss = _floats_after('Loss for "true" W,b: ', impatient_output)[0]
    assert true_loss == pytest.approx(0.02363973, rel=1e-4)
    assert losses[0] == pytest.approx(10.971258, rel=1e-3)
    assert losses[5] == pytest.approx(1.0783367, rel=1e-2)
    assert losses[20] == pytest.approx(0.09448608, rel=2e-2)
    # the tutorial ends between 0.01157 and 0.01170 (its two training loops)
    assert 0.0115 < losses[100] < 0.0118
    assert all(losses[a] >= losses[b] for a, b in zip(range(0, 100, 5), range(5, 101, 5)))


def test_quickstart_runs():
    import plax  # the same environment as the example's: it prints the default device
    out = run_example("examples/quickstart.py")
    assert "grad: 14.0 12.0 6.0" in out
    assert "Loss step 100:" in out
    assert f"devices: {plax.devices()!r}" in out
    assert f"default backend: {plax.default_backend()}" in out


def test_intro_seed_runs():
    out = run_example("examples/seeds/jax_intro.py")
    assert "14.0 12.0 6.0" in out
    assert "Array(5, dtype=int32)" in out
    assert "Array([5, 5], dtype=int32)" in out


def test_quickstart_seed_runs():
    out = run_example("examples/seeds/jax_quickstart.py")
    # grad(sum_logistic)(arange(3.)) is the first printed vector of three numbers: the
    # logistic's derivative, to float32 accuracy (its last digit depends on the device's exp)
    num = r"(-?\d+\.\d*(?:e[-+]?\d+)?)"
    first = re.search(rf"^\[\s*{num}\s+{num}\s+{num}\s*\]$", out, re.M)
    assert first, out
    s = 1 / (1 + np.exp(-np.arange(3.0)))
    assert [float(v) for v in first.groups()] == pytest.approx(s * (1 - s), rel=1e-6)


def _losses(out: str) -> tuple[dict[int, float], float, float]:
    """The ``step N  loss X`` lines, and the ``first loss A  last loss B`` summary."""
    steps = {int(s): float(v) for s, v in re.findall(r"^step\s+(\d+)\s+loss\s+(\S+)$", out, re.M)}
    [(first, last)] = re.findall(r"^first loss (\S+)\s+last loss (\S+)$", out, re.M)
    return steps, float(first), float(last)


def _assert_trained(out: str, factor: float) -> None:
    import math
    steps, first, last = _losses(out)
    assert steps and 0 in steps, out
    assert all(math.isfinite(v) for v in (*steps.values(), first, last)), out
    assert first == steps[0]
    assert last < factor * first, f"loss fell from {first} only to {last}"


def test_cnn_example_trains():
    """Conv + max/average pooling (reduce_window) + dense + softmax cross-entropy, jitted grad."""
    out = run_example("examples/cnn.py")
    _assert_trained(out, factor=0.25)  # about 1.26 -> 0.06
    [accuracy] = _floats_after("test accuracy ", out)
    assert accuracy > 0.8  # three classes: chance is 1/3


def test_rnn_scan_example_trains():
    """A tanh RNN through lax.scan, differentiated in reverse and jitted."""
    out = run_example("examples/rnn_scan.py")
    _assert_trained(out, factor=0.5)  # about 0.23 -> 0.08
