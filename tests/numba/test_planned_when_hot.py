"""A program's first calls lower less: tiered, a whole-program kernel is planned only once
its program is hot (:func:`plax_numba.tiered.planned_when_hot`), and the passes over one
program share its fusion units (:func:`plax.lowering.program.fusion_units`).

No test here compiles a kernel: the compile jobs are recorded, never run.
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import numpy as jnp
from plax.lowering import program


def _small(x, y):  # a whole-program kernel's program: small, several clusters
    h = jnp.tanh(x * 2.0 + y)
    return jnp.sin(h).sum(axis=0) * jnp.max(h, axis=1).sum() - jnp.cos(x).mean(), h * y


def _args():
    x = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
    return jnp.asarray(x), jnp.asarray(x[::-1] * 0.5)


@pytest.fixture
def tiered_no_compiles(monkeypatch, tmp_path):
    """Tiering on (compile after 2 runs, in the background thread: no worker process), an
    empty kernel cache, and the compile jobs recorded instead of run."""
    from plax_numba import cache, tiered
    monkeypatch.delenv("PLAX_NUMBA_SYNC", raising=False)
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "2")
    monkeypatch.setenv("PLAX_NUMBA_WORKERS", "0")
    monkeypatch.setattr(cache, "_dir", str(tmp_path))
    monkeypatch.setattr(cache, "_compiled", {})
    monkeypatch.setattr(cache, "_kernels", {})
    monkeypatch.setattr(cache, "request", lambda *a, **k: None)
    jobs: list = []
    monkeypatch.setattr(tiered, "submit", lambda job, lane="compile": jobs.append(job))
    return jobs


def _counting_plans(monkeypatch) -> list:
    from plax_numba import wholegen
    plans: list = []
    real = wholegen.plan_program

    def plan_program(jaxpr):
        plans.append(jaxpr)
        return real(jaxpr)
    monkeypatch.setattr(wholegen, "plan_program", plan_program)
    return plans


def _same(got, want):
    leaves = plax.tree_util.tree_leaves
    for g, w in zip(leaves(got), leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_whole_program_is_planned_when_hot(tiered_no_compiles, monkeypatch):
    plans = _counting_plans(monkeypatch)
    args = _args()
    want = plax.jit(_small, backend="numpy")(*args)
    f = plax.jit(_small, backend="numba")
    _same(f(*args), want)  # the first call: the reference tier, no plan, nothing requested
    assert plans == [] and tiered_no_compiles == []
    _same(f(*args), want)  # hot: planned now, and its kernel requested in the same call
    assert len(plans) == 1 and len(tiered_no_compiles) == 1
    _same(f(*args), want)  # (the kernel is never compiled here: still the reference tier)
    assert len(plans) == 1 and len(tiered_no_compiles) == 1
    text = f.lower(*args).compile().as_text()
    assert "whole-program kernel" in text and "def kernel(" in text


def test_a_program_never_hot_is_never_planned(tiered_no_compiles, monkeypatch):
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "1000")
    plans = _counting_plans(monkeypatch)
    args = _args()
    want = plax.jit(_small, backend="numpy")(*args)
    f = plax.jit(_small, backend="numba")
    for _ in range(3):
        _same(f(*args), want)
    assert plans == [] and tiered_no_compiles == []


def test_planned_when_hot_plans_once_with_kernels_requested_at_once(monkeypatch):
    from plax_numba import tiered
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "2")
    made: list = []

    def plan():
        made.append(tiered.compile_after())  # 1 while planning: request at the first run
        return lambda a, b: ["planned", a + b]
    step = tiered.planned_when_hot(lambda a, b: ["cold", a + b], plan, 2, after=3)
    assert [step(1, 2)[0] for _ in range(4)] == ["cold", "cold", "planned", "planned"]
    assert made == [1] and step.__plax_planned__["runs"] == 3
    assert tiered.compile_after() == 2  # (outside the planning: the setting again)
    assert step(2, 5) == ["planned", 7]


def test_passes_over_a_program_share_its_fusion_units(tiered_no_compiles, numba_backend):
    # the dispatch count (whole_program_worthwhile) and the reference tier's lowering ask
    # for the units of the same jaxpr: formed once
    jaxpr = plax.make_jaxpr(_small)(*_args()).jaxpr
    before = program.fusion_units_formed()
    numba_backend.compile(jaxpr, plax.devices("cpu")[0])
    assert program.fusion_units_formed() - before == 1


def test_a_plan_that_fails_leaves_the_reference_tier_running():
    from plax.lowering import PlaxFallbackWarning
    from plax_numba import tiered

    def plan():
        raise RuntimeError("no plan")
    step = tiered.planned_when_hot(lambda a: [a * 2], plan, 1, after=2)
    assert step(3) == [6]
    with pytest.warns(PlaxFallbackWarning, match="no plan"):
        assert step(4) == [8]
    assert step(5) == [10] and step.plan_now()(1) == [2]


def test_threads_making_a_program_hot_at_once_plan_it_once():
    import threading
    import time
    from plax_numba import tiered
    made: list = []

    def plan():
        made.append(1)
        time.sleep(0.05)  # (the other threads arrive while it plans)
        return lambda a: ["planned", a]
    step = tiered.planned_when_hot(lambda a: ["cold", a], plan, 1, after=1)
    results: list = []
    threads = [threading.Thread(target=lambda i=i: results.append(step(i))) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made == [1]  # (a thread arriving while it plans may wait for it or run cold)
    assert sorted(r[1] for r in results) == [0, 1, 2, 3]
    assert step(9) == ["planned", 9]
