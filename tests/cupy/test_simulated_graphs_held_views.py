"""A compiled program whose result is a *view of an input* (issue 24: wrong ``ys`` of a host-loop
``scan`` on the simulated GPU).

A plan copies a fresh input into a static buffer of its own; a result that is a view of that
input (``c[0]``, ``c[1:]``, a reshape) is a second registered buffer on the same memory. A caller
holding that view left the static buffer's own reference counts as they were (the plan's view
already holds it), so another plan's capture steered its outputs into that buffer: the earlier
result changed. The ownership rule is now per memory (:meth:`GraphedProgram._free`), and a new
plan's check reads the held earlier results before the capture and after its launches.

Each test checks values against NumPy (a Python loop): a ``scan`` that stays a host loop
(``sort`` in its body), the same body called from a Python loop keeping each step's view, a
``fori_loop`` and a ``while_loop`` carrying the view, a view of an input bound in place; and that
a new plan's check writes back a held result its launches wrote, and runs plainly.

:func:`test_on_the_simulated_gpu` runs this file again in a child process with
``-p fake_cupy_plugin``; the other tests skip here.
"""
from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest

from test_simulated_streams import SIMULATED, on_simulated_gpu, run_file_on_simulated_gpu


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    run_file_on_simulated_gpu(__file__)


@pytest.fixture(autouse=True)
def executables(request):
    """The executables CupyBackend.compile returns in the test (conftest's
    ``compiled_programs``, on the simulated GPU only)."""
    return request.getfixturevalue("compiled_programs") if SIMULATED else []


#: views of the carry ``c`` (5 floats) a body returns: (plax, NumPy)
VIEWS = {
    "element": lambda c: c[0],
    "slice": lambda c: c[1:],
    "reshape": lambda c: c.reshape(1, 5),
}


def _data(steps=6, seed=0):
    r = np.random.default_rng(seed)
    return r.standard_normal(5).astype(np.float32), r.standard_normal((steps, 5)).astype(np.float32)


def _body(view):
    import plax.numpy as jnp
    # (a sort: under scan a host loop where the one-kernel scan declines it, one compiled body
    # program called each step)
    return lambda c, v: (jnp.sort(c + v), view(c))


def _numpy_loop(view, c0, xs):
    """The carries' views, step by step, in NumPy."""
    c, ys = c0.copy(), []
    for v in xs:
        ys.append(np.array(view(c)))
        c = np.sort(c + v)
    return c, np.stack(ys)


def _graphed(executables, min_captures=1):
    """The graphed body programs compiled in the test that captured at least one plan."""
    found = [e.graphed for e in executables if getattr(e, "graphed", None) is not None
             and e.graphed.captures >= min_captures]
    assert found, [getattr(e, "graphed", None) for e in executables]
    return found


@on_simulated_gpu
@pytest.mark.parametrize("view", list(VIEWS))
def test_a_host_loop_scan_returning_a_view_of_its_carry(view, executables, monkeypatch):
    import plax
    from plax import lax
    from plax_cupy import scan_kernel
    from plax_cupy.graphs import ReplayMismatchWarning
    # (the one-kernel scan takes sorts up to MAX_SORT: none here, so the scan stays a host loop)
    monkeypatch.setattr(scan_kernel, "MAX_SORT", 0)
    c0, xs = _data()
    f = plax.jit(lambda c, x: lax.scan(_body(VIEWS[view]), c, x), backend="cupy")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReplayMismatchWarning)
        carry, ys = f(c0, xs)
    want_c, want_ys = _numpy_loop(VIEWS[view], c0, xs)
    np.testing.assert_array_equal(np.asarray(ys), want_ys)
    np.testing.assert_array_equal(np.asarray(carry), want_c)
    body = _graphed(executables)[0]
    assert body.replays >= 2 and not body.reason, body.describe()   # (graphs ran, correctly)


@on_simulated_gpu
def test_a_python_loop_keeping_each_steps_view(executables):
    """The same hazard outside ``scan``: a caller keeping each call's view while feeding the
    other result back."""
    import plax
    import plax.numpy as jnp
    c0, xs = _data(8, seed=1)
    step = plax.jit(_body(VIEWS["slice"]), backend="cupy")
    c, kept = jnp.asarray(c0), []
    for v in xs:
        c, y = step(c, jnp.asarray(v))
        kept.append(y)
    want_c, want_ys = _numpy_loop(VIEWS["slice"], c0, xs)
    np.testing.assert_array_equal(np.stack([np.asarray(y) for y in kept]), want_ys)
    np.testing.assert_array_equal(np.asarray(c), want_c)
    assert _graphed(executables)[0].replays >= 2


@on_simulated_gpu
@pytest.mark.parametrize("loop", ["fori_loop", "while_loop"])
def test_a_loop_carrying_a_view_of_its_carry(loop, executables):
    """A loop body whose carry holds the previous carry's first element (a view of an input)."""
    import plax
    import plax.numpy as jnp
    from plax import lax
    c0, xs = _data(6, seed=2)

    def run(c, x):
        def body(i, state):
            c, first, total = state
            return jnp.sort(c + x[i]), c[0], total + first

        state = (c, c[0], jnp.float32(0))
        if loop == "fori_loop":
            return lax.fori_loop(0, len(xs), body, state)
        return lax.while_loop(lambda s: s[0] < len(xs), lambda s: (s[0] + 1,) + body(s[0], s[1:]),
                              (0,) + state)[1:]

    c, first, total = plax.jit(run, backend="cupy")(c0, xs)
    want_c, firsts = _numpy_loop(VIEWS["element"], c0, xs)
    want_total = np.float32(0)
    for prev in np.concatenate([[c0[0]], firsts[:-1]]):
        want_total = np.float32(want_total + prev)
    np.testing.assert_array_equal(np.asarray(c), want_c)
    np.testing.assert_array_equal(np.asarray(first), firsts[-1])
    np.testing.assert_array_equal(np.asarray(total), want_total)


@on_simulated_gpu
def test_a_view_of_a_bound_input_kept_by_the_caller(executables):
    """An input passed again (bound: read in place) returned as a view: each kept view holds
    its own call's values (the plan takes that slot as its own, all static)."""
    import plax
    import plax.numpy as jnp
    c0, xs = _data(6, seed=3)
    step = plax.jit(_body(VIEWS["slice"]), backend="cupy")
    c = jnp.asarray(c0)   # the same Array every call
    kept = [step(c, jnp.asarray(v)) for v in xs]
    for v, (sorted_, view) in zip(xs, kept):
        np.testing.assert_array_equal(np.asarray(view), c0[1:])
        np.testing.assert_array_equal(np.asarray(sorted_), np.sort(c0 + v))
    assert _graphed(executables)[0].captures >= 1


@on_simulated_gpu
@pytest.mark.parametrize("room", ["device", "host"])
def test_the_check_writes_back_a_held_result_a_new_plan_wrote(executables, monkeypatch, room):
    """A new plan whose launches write an earlier result the caller holds (a flaw the
    ownership rule exists to prevent, made here by a launch that also overwrites that result):
    its check sees the held result changed, writes it back, warns and runs the program plainly
    from then on, and every value stays right; from a host snapshot too (``room="host"``: what
    ``graph_check.held_snapshot`` keeps where the held results do not fit beside the capture)."""
    import fake_cupy
    import plax
    import plax.numpy as jnp
    from plax_cupy import graph_check, graphs
    if room == "host":
        monkeypatch.setattr(graph_check, "snapshot_room", lambda: 0)
    c0, xs = _data(4, seed=4)
    step = plax.jit(_body(VIEWS["slice"]), backend="cupy")
    c, kept = jnp.asarray(c0), []
    for v in xs[:2]:                     # plain, then captured: kept[1] is a plan's output
        c, y = step(c, jnp.asarray(v))
        kept.append(y)
    replay = graphs._Plan.replay

    def replay_writing_a_held_result(plan, *args):
        outputs = replay(plan, *args)
        graphs._raw(kept[1]._buf).fill(-7.0)   # (the stray write)
        return outputs

    monkeypatch.setattr(graphs._Plan, "replay", replay_writing_a_held_result)
    fake_cupy.FAULTS_INJECTED[0] += 1   # (the wrong launch is on purpose: the plugin allows it)
    with pytest.warns(graphs.ReplayMismatchWarning,
                      match=r"wrote memory the caller holds: an earlier result \(float32\[4\]\) "
                            r"changed in 4 of 4 elements \(first at flat index 0\); written back"):
        for v in xs[2:]:                 # the next call captures a new plan and checks it
            c, y = step(c, jnp.asarray(v))
            kept.append(y)
    want_c, want_ys = _numpy_loop(VIEWS["slice"], c0, xs)
    np.testing.assert_array_equal(np.stack([np.asarray(y) for y in kept]), want_ys)
    np.testing.assert_array_equal(np.asarray(c), want_c)
    program = _graphed(executables)[0]
    assert "wrote memory the caller holds" in program.reason and not program.plans


def _capture_with_a_held_result(n: int):
    """``(bytes read to the host, Counters)`` of the call that captures a plan of a two-kernel
    program of ``n`` float32s, an earlier result of ``n`` held by the caller meanwhile."""
    import fake_cupy
    import plax
    import plax.numpy as jnp
    from plax_cupy import runtime
    f = plax.jit(lambda x: jnp.sort(x) * 2.0, backend="cupy")
    x = jnp.asarray(np.arange(n, dtype=np.float32)[::-1].copy())
    f(x)                                  # (a plain first call)
    held = f(x)                           # (captured: the plan's output, registered)
    before = fake_cupy.COUNTS["device_to_host_bytes"]
    with runtime.count() as c:
        out = f(x)                        # (a second plan captured and checked, `held` held)
    read = fake_cupy.COUNTS["device_to_host_bytes"] - before
    np.testing.assert_array_equal(np.asarray(held), np.sort(np.arange(n, dtype=np.float32)) * 2)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(held))
    return read, c


@on_simulated_gpu
def test_the_held_result_check_reads_a_few_bytes_whatever_the_size(executables):
    """The check of held results compares them on the device: what comes to the host for them
    is two integers per held result in one read, not the results themselves (the check's reads
    of the call's own outputs, three of each, are the rest)."""
    extra = {}
    for n in (16, 4096):
        read, c = _capture_with_a_held_result(n)
        assert c.verify_reads == 3 + 1, c   # (the output's three, the held results' one)
        extra[n] = read - 3 * 4 * n
    assert _graphed(executables)[-1].verified == 2
    assert extra[16] == extra[4096] and 0 < extra[16] <= 16 * 2, extra


@on_simulated_gpu
def test_held_results_past_the_snapshot_room_are_checked_from_the_host(executables, monkeypatch):
    """Where the held results would not fit beside the capture
    (``graph_check.snapshot_room``), their snapshots are taken on the host (each read once
    before and once after) and the new plan is still checked."""
    from plax_cupy import graph_check
    monkeypatch.setattr(graph_check, "snapshot_room", lambda: 0)
    read, c = _capture_with_a_held_result(4096)
    assert c.verify_reads == 3 + 2, c   # (the output's three, the held result's two)
    assert read >= 3 * 4 * 4096 + 2 * 4 * 4096, read
    assert _graphed(executables)[-1].verified == 2
