"""A captured CUDA graph that would replay wrongly on a GPU is caught, not returned (issue 24).

Each new buffer plan's capture launch and its first replay are compared with a plain run of
the same call (:mod:`plax_cupy.graph_check`). On the simulated GPU, ``fake_cupy.replay_fault``
makes a capture that succeeds replay wrongly, silently, in the ways a real one could (a host
value baked in at capture, scratch a launch leaves dirty, a library workspace freed after the
capture), in the MLP step's cuBLAS calls and (uncleared scratch) the look-back ``cumsum``; for
each: the warning names the output, the largest difference and the direct library bindings or
scratch-keeping kernels, every call returns correct values, the program runs plainly
afterwards, and warns once. A check that runs out of memory runs the call plainly. A correct
program is verified silently (``fake_cupy_plugin`` fails any test in which a program replayed
wrongly without a fault injected: every simulated graph test runs with the check on). With
``PLAX_CUDA_GRAPHS_VERIFY=0`` the wrong replay is returned.

The rule itself (bits, or the tolerance of a program whose capture takes another library entry
point) is checked on host arrays here, without a GPU; :func:`test_on_the_simulated_gpu` runs
the rest in a child process with ``-p fake_cupy_plugin`` (with ``test_simulated_threads.py``).
"""
from __future__ import annotations

import os
import shutil
import warnings

import numpy as np
import pytest

from test_simulated_graphs import _mlp_args, _step
from test_simulated_streams import SIMULATED, on_simulated_gpu, run_file_on_simulated_gpu


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    # (and the threads' tests of the counters, graphs and Jacobi params: one child for both)
    run_file_on_simulated_gpu(__file__, os.path.join(os.path.dirname(__file__),
                                                     "test_simulated_threads.py"))


# ---------------------------------------------------------------- the rule (host arrays)

def _rule(fn, *args):
    import plax
    from plax_cupy import graph_check
    from plax_cupy.graphs import _equations
    jaxpr = plax.make_jaxpr(fn)(*args)
    return graph_check.Rule.of(_equations(jaxpr), jaxpr)


def test_the_rule_is_bits_unless_a_capture_takes_another_library_entry_point():
    import plax.numpy as jnp
    from plax import lax
    x = np.ones((3, 5), np.float32)
    elementwise = _rule(lambda a: jnp.tanh(a) * 2, x)
    assert not elementwise.tolerant and elementwise.tolerance(np.float32) == 0.0
    looked_back = _rule(lambda a: jnp.cumsum(a, axis=1) + 1, x)
    assert not looked_back.tolerant and "cumsum" in looked_back.paths
    # a product: cuBLAS through cublas_direct in the capture, CuPy's matmul when plain; its
    # reduction length is the contraction's (5) plus the sum's (3), a scan body's times its length
    product = _rule(lambda a, w: jnp.sum(a @ w, axis=0), x, np.ones((5, 2), np.float32))
    assert product.tolerant and product.length == 5 + 3 and "dot_general" in product.paths
    scanned = _rule(lambda w, xs: lax.scan(lambda c, v: (c @ w + v, c), jnp.zeros(5), xs),
                    np.ones((5, 5), np.float32), np.ones((7, 5), np.float32))
    assert scanned.length == 7 * 5
    assert product.tolerance(np.float32) == pytest.approx(32 * np.finfo(np.float32).eps * 8)
    assert product.tolerance(np.dtype("float16")) == 2.0 ** -4   # (capped)


def test_an_integer_output_may_differ_only_where_a_near_tie_decides_it():
    """In a program whose capture takes another library entry point (a product), an integer
    output may differ in an element only where a near tie could decide it -- an argmax of a
    product's floats, a comparison or conversion of them, a sort they key, lu's pivots, also
    through a scan's carry, a while's trip count, a cond's branch -- else (a step counter, an
    argmax of the inputs themselves, a loop counter) it must be equal: a wrong counter is
    caught."""
    import plax.numpy as jnp
    from plax import lax
    from plax_cupy.graph_check import compare

    def step(w, x, n):
        h = x @ w
        counted = lax.scan(lambda c, v: (c + 1, jnp.argmax(v @ w)), n, x)
        summed = lax.scan(lambda c, v: (c + jnp.argmax(v @ w), 0), n, x)
        return (jnp.argmax(h, axis=1), n + 1, counted, jnp.argmax(x, axis=1),
                (h > 1).astype(jnp.int32), jnp.argsort(h[0]), summed[0],
                lax.while_loop(lambda c: c[0] < c[1], lambda c: (c[0] + 1, c[1]),
                               (0, jnp.argmax(h).astype(jnp.int32)))[0],
                lax.fori_loop(0, 3, lambda i, c: c + i, n), lax.linalg.lu(w)[1],
                lax.cond(h[0, 0] > 1, lambda a: a + 1, lambda a: a, n),
                lax.cond(n > 0, lambda a: a @ w, lambda a: a, x))
    w, x = np.eye(3, dtype=np.float32), np.ones((4, 3), np.float32)
    rule = _rule(step, w, x, np.int32(0))
    assert rule.tolerant
    assert rule.ties == (True,    # argmax of the product
                         False,   # the step counter
                         False,   # a scan's counting carry ...
                         True,    # ... and its argmaxes of products
                         False,   # argmax of an input
                         True,    # a comparison of the product
                         True,    # a sort it keys
                         True,    # a carry summing argmaxes of products
                         True,    # a while whose trip count an argmax of the product sets
                         False,   # a fori_loop's sum of its counter
                         True,    # lu's pivots
                         True,    # a cond a comparison of the product picks
                         True)    # a float output (its tolerance)
    labels, counter = np.arange(128, dtype=np.int32), np.int32(5)
    flipped = labels.copy()
    flipped[3] = 4
    assert compare([flipped, counter], [labels, counter], rule) is None     # a near tie
    problem = compare([labels, counter + 1], [labels, counter], rule)       # a wrong counter
    assert problem.startswith("output 1 (int32[]): 1 of 1 elements differ (allowed 0"), problem
    # a program of bit-exact kernels only: nothing may differ (no tie is possible)
    exact = _rule(lambda x, n: (jnp.argmax(jnp.tanh(x), axis=1), n + 1), x, np.int32(0))
    assert not exact.tolerant and exact.ties == ()
    assert "1 of 128" in compare([flipped, counter], [labels, counter], exact)


def test_compare_finds_what_a_wrong_replay_gives_and_passes_rounding():
    from plax.dtypes import bfloat16
    from plax_cupy.graph_check import Rule, compare
    bits = Rule({}, False, 1)
    tolerant = Rule({"dot_general": "cuBLAS"}, True, 100, (True, True))  # (outputs may tie)
    p = np.array([1.0, -2.0, np.nan, np.inf, 0.0], np.float32)
    assert compare([p.copy()], [p], bits) is None
    nudged = p.copy()
    nudged[0] = np.nextafter(np.float32(1), np.float32(2))
    assert "largest difference" in compare([nudged], [p], bits)     # one ulp: not the same bits
    assert compare([nudged], [p], tolerant) is None                  # within rounding
    assert "NaN" in compare([np.where(np.isnan(p), 0, p)], [p], tolerant)
    stale = p.copy()
    stale[1] = 0.0                                                   # a zero where -2 was
    assert "output 0 (float32[5]): largest difference 2" in compare([stale], [p], tolerant)
    assert "infinities" in compare([np.where(np.isinf(p), -np.inf, p)], [p], tolerant)
    labels = np.arange(128)
    flipped = labels.copy()
    flipped[3] = 4                                                   # a near tie decided otherwise
    assert compare([flipped], [labels], tolerant) is None
    assert "1 of 128 elements differ" in compare([flipped], [labels], bits)
    # (an integer output no near tie decides: equal bits, in a tolerant program too)
    assert "1 of 128 elements differ" in compare([p, flipped], [p, labels], tolerant._replace(
        ties=(True, False)))
    assert "3 of 128" in compare([np.where(labels < 3, 9, labels)], [labels], tolerant)
    z = np.array([1 + 1j, 2 - 1j], np.complex64)
    assert compare([z.copy()], [z], bits) is None and compare([z * 0], [z], tolerant)
    # a complex scalar and a transposed (Fortran-ordered) complex output: each part's bits
    for c in (np.complex64(1 - 2j) * np.ones((), np.complex64),
              np.asfortranarray(np.outer(z, z).astype(np.complex64))):
        assert compare([c.copy()], [c], bits) is None
        assert "largest difference" in compare([c + np.complex64(1j)], [c], bits)
    assert "2 outputs against 1" in compare([p, p], [p], bits)
    # bfloat16 (compared widened to float32): its own epsilon (a bf16 ulp is not a wrong replay)
    wide = np.array([1.0, 0.5], np.float32)
    bf16_ulp = wide + np.float32(2.0 ** -7)
    assert compare([bf16_ulp], [wide], tolerant) is not None
    assert compare([bf16_ulp.astype(bfloat16)], [wide.astype(bfloat16)], tolerant) is None


def test_counts_routed_by_one_thread_leave_another_threads_alone():
    """``runtime.counted_as``: within the block this thread's launches count where the route
    says (the check's: verify_launches; a capture's: nowhere), a nested route in turn, while
    another thread's count as usual, its increments a plain list's all along; afterwards this
    thread's are a plain list's again."""
    import threading
    from plax_cupy import runtime
    routed, done, other = threading.Event(), threading.Event(), []

    def meanwhile():
        assert routed.wait(60)
        other.append(type(runtime.THIS_THREAD.counts))
        runtime.note_launch(5)
        runtime.THIS_THREAD.counts[runtime.D2H] += 1
        done.set()

    thread = threading.Thread(target=meanwhile)
    thread.start()
    with runtime.count() as c:
        with runtime.counted_as(runtime.CHECKING):
            runtime.note_launch(2)
            runtime.note_copy()
            runtime.THIS_THREAD.counts[runtime.D2H] += 3
            with runtime.counted_as(runtime.CAPTURING):
                runtime.note_launch(7)
                runtime.note_copy(7)
            routed.set()
            assert done.wait(60)
            runtime.move_counts(runtime.LAUNCHES, runtime.VERIFY_LAUNCHES, 4)  # (net nothing)
        runtime.note_launch()
        runtime.move_counts(runtime.LAUNCHES, runtime.VERIFY_LAUNCHES, 1)
        thread.join()
    assert (c.launches, c.device_copies, c.device_to_host) == (5, 0, 1), c
    assert (c.verify_launches, c.verify_reads) == (3, 3), c
    assert other == [list], other   # (another thread's increments never routed)
    assert type(runtime.THIS_THREAD.counts) is list   # (no route left: a plain list again)


def test_an_ended_threads_counts_stay_in_the_totals():
    """Each thread counts in a list of its own; when a thread ends, its counts are folded into
    the totals of ended threads: the process's totals keep them, and the registry of live
    threads' lists does not grow with the threads a program starts."""
    import threading
    from plax_cupy import runtime
    before, live = runtime.counters(), len(runtime._LIVE)
    for _ in range(20):
        thread = threading.Thread(target=lambda: (runtime.note_launch(3),
                                                  runtime.note_fallback("simulated_ended")))
        thread.start()
        thread.join()
    after = runtime.counters()
    assert (after.launches - before.launches, after.host_fallbacks - before.host_fallbacks) \
        == (60, 20), (before, after)
    assert runtime.fallback_primitives()["simulated_ended"] >= 20
    assert len(runtime._LIVE) == live


def test_a_this_thread_count_read_from_another_thread_is_the_entering_threads():
    """A ``count(this_thread=True)`` block read by another thread while it is open gives the
    entering thread's work, not the reading thread's own."""
    import threading
    from plax_cupy import runtime
    seen = []
    with runtime.count(this_thread=True) as c:
        runtime.note_launch(3)
        runtime.note_fallback("simulated_entering")

        def elsewhere():
            runtime.note_launch(100)
            runtime.note_fallback("simulated_reading")
            seen.append((c.launches, c.fallbacks))
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
    assert seen == [(3, {"simulated_entering": 1})], seen
    assert (c.launches, c.fallbacks) == (3, {"simulated_entering": 1}), c


# ---------------------------------------------------------------- on the simulated GPU


@on_simulated_gpu
def test_a_first_call_is_judged_by_its_own_threads_work_alone(monkeypatch, executables):
    """A program's first call decides whether it can be captured from what the calling thread
    did (``runtime.count(this_thread=True)``): another thread's host copy and host fallback
    meanwhile neither bar it from graphs nor show in its reason, and its own still do."""
    import threading
    import plax
    from plax_cupy import graphs, runtime
    from test_simulated_graphs import _host_only_primitive
    host_only = _host_only_primitive()
    host_args, want = _expected()
    args = plax.device_put(host_args, _gpu())
    x = plax.device_put(np.linspace(0.5, 2, 8).astype(np.float32), _gpu())
    first_call, other_done, errors = threading.Event(), threading.Event(), []
    real_plain = graphs.GraphedProgram._plain

    def plain(self, buffers, why):   # (a first call waits, before it ends, for the other's work)
        out = real_plain(self, buffers, why)
        if why.startswith("the first call") and not first_call.is_set():
            first_call.set()
            assert other_done.wait(60), "the other thread's work did not end"
        return out

    def meanwhile():
        try:
            assert first_call.wait(60), "the first call did not begin"
            # a host copy and a host fallback, counted as another GPU's would be (on this one
            # a copy counts, then waits for the device's lock, which the first call holds)
            runtime.THIS_THREAD.counts[runtime.D2H] += 1
            runtime.note_fallback("simulated_elsewhere")
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)
        finally:
            other_done.set()

    monkeypatch.setattr(graphs.GraphedProgram, "_plain", plain)
    thread = threading.Thread(target=meanwhile)
    thread.start()
    with runtime.count() as c:
        _run(plax.jit(_fresh_step()), args)
    thread.join()
    assert not errors, errors
    assert c.device_to_host >= 1 and c.fallbacks == {"simulated_elsewhere": 1}, c
    assert not executables[0].graphed.reason, executables[0].graphed.reason
    # its own host fallback bars it, and its reason names its own alone
    first_call.clear(), other_done.clear()
    thread = threading.Thread(target=meanwhile)
    thread.start()
    plax.jit(lambda z: host_only.bind(z * 0.3) * 2 + plax.numpy.exp(z) - z)(x)
    thread.join()
    assert not errors, errors
    reason = executables[-1].graphed.reason
    assert reason == "a primitive runs on the host: simulated_host_only", reason

def _gpu():
    import plax
    return plax.devices("gpu")[0]


def _run(f, args):
    """One call's results on the host, and its counts."""
    import plax
    import plax_cupy
    with plax_cupy.count() as c:
        out = plax.tree_util.tree_leaves(f(*args))
    return [np.asarray(o) for o in out], c


def _fresh_step():
    """The MLP step as a function of its own: a program jit has not compiled yet (its kernels
    are the same, already built)."""
    return lambda p, x, y: _step(p, x, y)


def _expected():
    import plax
    args = _mlp_args()
    ref = plax.jit(_step, backend="numpy")(*plax.device_put(args, plax.devices("cpu")[0]))
    return args, [np.asarray(o) for o in plax.tree_util.tree_leaves(ref)]


@pytest.fixture(autouse=True)
def executables(request):
    """The executables CupyBackend.compile returns in the test, latest last."""
    return request.getfixturevalue("compiled_programs") if SIMULATED else []


@on_simulated_gpu
def test_a_correct_program_is_verified_silently(executables):
    import plax
    from plax_cupy.graphs import ReplayMismatchWarning
    host_args, want = _expected()
    args = plax.device_put(host_args, _gpu())
    f = plax.jit(_fresh_step())
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReplayMismatchWarning)
        runs = [_run(f, args) for _ in range(4)]
    for got, _ in runs:
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    (_, plain), (_, capture), (_, replay) = runs[0], runs[1], runs[2]
    n_out = len(want)
    # the capture's own launch is the call's; the plain run and the second launch are the
    # check's, its reads (each output of the two launches and of the plain run) too
    assert (capture.launches, capture.device_to_host, capture.device_copies) == (1, 0, 0)
    assert capture.verify_launches == plain.launches + 1 and capture.verify_reads == 3 * n_out
    assert (replay.launches, replay.verify_launches, replay.verify_reads) == (1, 0, 0)
    text = executables[0].as_text()
    assert "verified: 1 plan(s)' first two launches equal to a plain run (within" in text, text
    assert executables[0].graphed.plans and not executables[0].graphed.reason


def _long_cumsum(v):
    """A long row's cumsum (one look-back kernel, kernels_rows) and a fused kernel after it."""
    import plax.numpy as jnp
    return jnp.cumsum(v) * 2


@on_simulated_gpu
@pytest.mark.parametrize("kind,step,written,caught_at", [
    ("baked", "gemm", -1, "the capture's launch"),
    ("uncleared", "gemm", -1, "its replay"),
    ("freed-workspace", "gemm", -1, "the capture's launch"),
    # the look-back's output (its launch passes the input, then the output, then the scratch)
    ("uncleared", "cumulative_sum_float_single_pass", 1, "its replay"),
])
def test_a_wrong_replay_is_caught_and_the_program_runs_plainly(kind, step, written, caught_at,
                                                               executables):
    import plax
    import fake_cupy
    from plax_cupy import kernels_rows
    from plax_cupy.graphs import ReplayMismatchWarning
    if step == "gemm":   # (the MLP step's cuBLAS calls, captured through cublas_direct)
        host_args, want = _expected()
        fn, path, shape = _fresh_step(), "dot_general (cuBLAS gemm (cublas_direct))", "[8, 16]"
    else:
        v = np.random.default_rng(3).normal(size=4 * kernels_rows.LONG_ROW).astype(np.float32)
        host_args, want = (v,), [np.asarray(plax.jit(_long_cumsum, backend="numpy")(v))]
        fn, path = (lambda v: _long_cumsum(v)), "cumsum (the look-back scratch (kernels_rows))"
        shape = f"[{v.size}]"
    args = plax.device_put(host_args, _gpu())
    f = plax.jit(fn)
    with fake_cupy.replay_fault(kind, step, written):
        runs = [_run(f, args)]
        with pytest.warns(ReplayMismatchWarning) as caught:
            runs.append(_run(f, args))
        graphs = fake_cupy.COUNTS.get("graph_launches", 0)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ReplayMismatchWarning)   # (it warns once)
            runs += [_run(f, args) for _ in range(2)]
    message = str(caught[0].message)
    assert len(caught) == 1 and f"{caught_at} differed from a plain run" in message, message
    assert f"output 0 (float32{shape})" in message and "largest difference" in message, message
    assert path in message, message
    # every call correct: the plain run's results where the graph's were not (a long float32
    # cumsum: another summation order than the NumPy backend's)
    atol = 1e-6 if step == "gemm" else 1e-2
    for got, _ in runs:
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol)
    assert fake_cupy.COUNTS.get("graph_launches", 0) == graphs   # plain from then on
    assert all(c.launches == runs[0][1].launches for _, c in runs[2:])
    program = executables[0].graphed
    assert program.plans == [] and "replayed wrongly" in program.reason
    assert "runs plainly (a CUDA graph of it replayed wrongly" in executables[0].as_text()


@on_simulated_gpu
def test_with_the_check_off_the_wrong_replay_is_returned(monkeypatch, executables):
    import plax
    import fake_cupy
    monkeypatch.setenv("PLAX_CUDA_GRAPHS_VERIFY", "0")   # (read when the program compiles)
    host_args, want = _expected()
    args = plax.device_put(host_args, _gpu())
    f = plax.jit(_fresh_step())
    with fake_cupy.replay_fault("baked", "gemm"):
        runs = [_run(f, args) for _ in range(3)]
    np.testing.assert_allclose(runs[0][0][0], want[0], rtol=1e-5, atol=1e-6)
    for got, c in runs[1:]:   # what the check guards against: garbage, silently
        assert c.verify_launches == 0 and not np.allclose(got[0], want[0], equal_nan=False)
    assert "replays not verified (PLAX_CUDA_GRAPHS_VERIFY=0)" in executables[0].as_text()


@on_simulated_gpu
def test_a_check_out_of_memory_runs_the_call_plainly(monkeypatch, executables):
    import cupy
    import plax
    from plax_cupy import graph_check
    host_args, want = _expected()
    args = plax.device_put(host_args, _gpu())
    f = plax.jit(_fresh_step())
    _run(f, args)

    def full(buffer):   # (the plain run beside the plans' buffers does not fit)
        raise cupy.cuda.memory.OutOfMemoryError(1 << 40, 0, 1 << 30)
    monkeypatch.setattr(graph_check, "to_host", full)
    got, c = _run(f, args)   # the capture: its check runs out of memory
    monkeypatch.undo()
    later, plain = _run(f, args)
    for g, w in zip(got + later, want + want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    program = executables[0].graphed
    assert program.plans == [] and "ran out of memory" in program.reason
    # the call ran plainly: its launches are a plain run's, the graph's launch the check's,
    # and it was no replay
    assert (c.launches, c.verify_launches) == (plain.launches, 1), c
    assert (program.captures, program.replays, program.plain_runs) == (1, 0, 3)


@on_simulated_gpu
def test_only_the_checking_threads_work_counts_as_the_checks(monkeypatch):
    """While one thread checks a new plan, another thread's launches (a plain program: on
    another GPU it would not wait for the device's lock) count as launches, not as the
    check's; the check's own launches and reads count as verify_* alone."""
    import threading
    import plax
    import plax_cupy
    from plax_cupy import graph_check
    host_args, want = _expected()
    args = plax.device_put(host_args, _gpu())
    n_out = len(want)
    f = plax.jit(_fresh_step())
    _, plain = _run(f, args)                       # the first call: plain
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")    # (read when the program compiles)
    other = plax.jit(_fresh_step())
    _, alone = _run(other, args)                   # compiled, plain, not under the lock
    monkeypatch.delenv("PLAX_CUDA_GRAPHS")
    checking, other_done, errors, results = threading.Event(), threading.Event(), [], {}
    real_to_host = graph_check.to_host

    def to_host(buffer):   # (the check's first read waits for the other thread's call)
        if not checking.is_set():
            checking.set()
            assert other_done.wait(60), "the other thread's call did not end"
        return real_to_host(buffer)

    def capture():
        try:
            results["capture"] = f(*args)
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)
            checking.set()

    def meanwhile():
        try:
            assert checking.wait(60), "the check did not begin"
            results["other"] = other(*args)
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)
        finally:
            other_done.set()

    monkeypatch.setattr(graph_check, "to_host", to_host)
    threads = [threading.Thread(target=capture), threading.Thread(target=meanwhile)]
    with plax_cupy.count() as c:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    # the capture's launch and the other thread's plain run; the check's plain run and second
    # launch, and its reads (each output of the two launches and of the plain run)
    assert c.launches == 1 + alone.launches and c.device_copies == 0, c
    assert c.verify_launches == plain.launches + 1 and c.verify_reads == 3 * n_out, c
    assert alone.verify_launches == 0 and plain.launches == alone.launches
    for key in ("capture", "other"):
        for g, w in zip(plax.tree_util.tree_leaves(results[key]), want):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6)


@on_simulated_gpu
def test_held_changes_compares_bits_on_the_device():
    """``graph_check.held_changes``: a held result's bits against its device snapshot, -0.0
    against 0.0 and NaN payloads told apart, 16-byte elements, booleans and strided views
    compared element by element; unchanged ones answer None, size 0 too."""
    import cupy
    from plax_cupy import graph_check
    nan2 = np.frombuffer(np.uint32(0x7FC00001).tobytes(), np.float32)[0]
    floats = cupy.asarray(np.array([0.0, np.nan, 1.0, 2.0], np.float32))
    wide = cupy.asarray(np.arange(6, dtype=np.complex128).reshape(2, 3))
    flags = cupy.asarray(np.array([True, False, True]))
    view = cupy.asarray(np.arange(12.0).reshape(3, 4))[:, 1::2]   # (strided)
    empty = cupy.asarray(np.zeros(0, np.int8))
    held = [floats, wide, flags, view, empty]
    snaps = [graph_check.held_snapshot(b) for b in held]
    on_host = floats.get()   # (the snapshot where the device has no room: compared on the host)
    assert graph_check.held_changes(list(zip(held, snaps))) == [None] * 5
    floats[1:3] = cupy.asarray(np.array([nan2, 1.0], np.float32))   # (another NaN payload)
    floats[0] = cupy.asarray(np.array(-0.0, np.float32))
    wide[1, 2] = cupy.asarray(np.array(5 - 0j, np.complex128)) * 1j
    view[2, 1] = cupy.asarray(np.array(-1.0))
    assert graph_check.held_changes(list(zip(held, snaps))) == \
        [(2, 0), (1, 5), None, (1, 5), None]
    assert graph_check.held_changes([(floats, on_host), (flags, flags.get())]) == [(2, 0), None]


@on_simulated_gpu
def test_a_held_snapshot_without_room_on_the_device_is_kept_on_the_host(monkeypatch):
    """``graph_check.held_snapshot`` copies a held result to the host where its device copy
    raises CuPy's OutOfMemoryError (one read, no launch), and only then: another error of the
    copy is raised; the host snapshot still finds a change."""
    import cupy
    import fake_cupy
    from plax_cupy import graph_check, runtime
    held = cupy.asarray(np.arange(64, dtype=np.float32))
    monkeypatch.setattr(fake_cupy, "MEMORY", 128)   # (the 256-byte copy does not fit)
    with runtime.count() as c:
        before = graph_check.held_snapshot(held)
    monkeypatch.undo()
    assert isinstance(before, np.ndarray) and (c.verify_reads, c.launches) == (1, 0), c
    np.testing.assert_array_equal(before, np.arange(64, dtype=np.float32))
    held[3] = cupy.asarray(np.array(-3.0, np.float32))
    assert graph_check.held_changes([(held, before)]) == [(1, 3)]

    def broken(self, *args, **kwargs):
        raise RuntimeError("not a lack of memory")
    monkeypatch.setattr(fake_cupy.ndarray, "copy", broken)
    with pytest.raises(RuntimeError, match="not a lack of memory"):
        graph_check.held_snapshot(held)


@on_simulated_gpu
def test_held_changes_finds_one_flipped_bit_in_every_dtype_and_layout():
    """Every dtype a held result can have (each comparison word size: 1, 2, 4, 8 bytes, and
    16-byte elements as two words; bfloat16 is held as its uint16 bits), 0-d, one element, a
    strided and a transposed view: unchanged answers None, one flipped bit of the last element
    (C order of the view) is found, against a device snapshot and a host one."""
    import cupy
    from plax_cupy import graph_check
    rng = np.random.default_rng(0)
    for dtype in (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                  np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128):
        for shape, layout in (((), None), ((1,), None), ((5, 7), None), ((5, 7), "strided"),
                              ((5, 7), "transposed")):
            n = int(np.prod(shape))
            host = rng.integers(0, 2, n).astype(bool) if dtype is np.bool_ else \
                rng.integers(0, 256, n * np.dtype(dtype).itemsize, np.uint8).view(dtype)
            base = cupy.asarray(host.reshape(shape))
            held = {"strided": lambda a: a[:, ::2], "transposed": lambda a: a.T}.get(
                layout, lambda a: a)(base)
            snaps = [graph_check.held_snapshot(held)]
            snaps.append(graph_check.to_host(snaps[0]))
            assert graph_check.held_changes([(held, s) for s in snaps]) == [None, None]
            flat = held.get().reshape(-1)
            bits = flat.view(np.uint8)
            bits[-1] ^= 1   # (the last byte of the last element: a bool's 0/1, else its top bits)
            held[...] = cupy.asarray(flat.reshape(held.shape))
            assert graph_check.held_changes([(held, s) for s in snaps]) == \
                [(1, held.size - 1)] * 2, (dtype, shape, layout)


@on_simulated_gpu
def test_the_snapshot_room_is_half_of_what_the_pool_may_still_hand_out(monkeypatch):
    """``graph_check.snapshot_room`` leaves the capture half of what the device and the pool
    could still hand out, within the pool's limit; ``held_snapshot(..., on_device=False)``
    keeps the copy on the host (one read, no launch)."""
    import cupy
    from plax_cupy import graph_check, runtime
    pool = cupy.get_default_memory_pool()
    monkeypatch.setattr(pool, "limit", pool.limit)   # (put back after the test)
    pool.set_limit(size=pool.used_bytes() + 4096)
    assert graph_check.snapshot_room() == 2048
    pool.set_limit(size=pool.used_bytes() // 2)      # (already past the limit: no room)
    assert graph_check.snapshot_room() == 0
    held = cupy.asarray(np.arange(64, dtype=np.float32))
    with runtime.count() as c:
        before = graph_check.held_snapshot(held, on_device=False)
    assert isinstance(before, np.ndarray) and (c.verify_reads, c.launches) == (1, 0), c
    held[5] = cupy.asarray(np.array(7.5, np.float32))
    assert graph_check.held_changes([(held, before)]) == [(1, 5)]


@on_simulated_gpu
def test_a_comparison_without_room_on_the_device_runs_on_the_host(monkeypatch):
    """Where the device comparison's temporaries do not fit, ``held_changes`` compares those
    results on the host instead of failing the check."""
    import cupy
    import fake_cupy
    from plax_cupy import graph_check
    held = [cupy.asarray(np.arange(64, dtype=np.float32)), cupy.asarray(np.ones(64, np.int32))]
    snaps = [graph_check.held_snapshot(h) for h in held]
    held[0][9] = cupy.asarray(np.array(-1.0, np.float32))
    monkeypatch.setattr(fake_cupy, "MEMORY", 32)   # (a 64-element comparison does not fit)
    assert graph_check.held_changes(list(zip(held, snaps))) == [(1, 9), None]
