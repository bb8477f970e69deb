"""Compiled CuPy programs replay as one CUDA graph on a static buffer plan (issue 24, "Speed").

On the simulated GPU (:mod:`fake_cupy`: a capture records the kernels and CuPy operations
issued on the stream and replays them over the same device memory on ``Graph.launch``):

* a compiled MLP step and a ``scan`` run plainly on the first call, are captured on the second
  (the inputs copied into the plan, the graph) and replay from the third as one launch when
  the inputs are the same Arrays (the outputs are the plan's own buffers, handed out without
  a copy), with no host copy and no Python per kernel or per loop iteration; values equal to
  the plain path and to the NumPy backend; a new input is one copy more;
* a training loop (each step's results fed to the next) alternates between two plans, the
  parameters' copies from the other plan's outputs captured as one graph: two launches a step;
* a plan never overwrites results a caller still holds, nor a view of them: with every result
  kept, calls after the second plan run plainly;
* a program of one fused kernel (selu), and programs with ``cond``/``while``/host callbacks,
  run plainly, with the reason in ``as_text()``; ``PLAX_CUDA_GRAPHS=0`` disables graphs;
* a stale captured pointer (a buffer freed after capture) is caught on replay;
* CuPy's library calls in a capture as CuPy 14.2 treats them (each test cites the source line):
  cuBLAS/cuSOLVER and size reads (``nonzero``, masks) refused; Thrust sorts and CUB reductions
  captured, their scratch held by the capturer; a captured cuFFT transform needs its cached plan
  (so plax's ``fft`` programs own their plans: ``test_kernels_b_fft.py``), ``sort``
  programs replay;
* four threads calling one compiled program get their own results;
* out of memory while capturing raises ``GpuOutOfMemoryError``.

:func:`test_on_the_simulated_gpu` runs this file again in a child process with
``-p fake_cupy_plugin``; the other tests skip here.
"""
from __future__ import annotations

import os
import shutil
import threading

import numpy as np
import pytest

from test_simulated_streams import SIMULATED, on_simulated_gpu, run_file_on_simulated_gpu

MAX_PLANS = 3   # plax_cupy.graphs.MAX_PLANS (not imported here: CuPy may be absent)


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    run_file_on_simulated_gpu(__file__)


def _gpu():
    import plax
    return plax.devices("gpu")[0]


def _loss(p, x, y):
    import plax.numpy as jnp
    h = jnp.tanh(x @ p[0] + p[1])
    return jnp.mean((h @ p[2] - y) ** 2)


def _step(p, x, y):
    import plax
    return [w - 0.1 * g for w, g in zip(p, plax.grad(_loss)(p, x, y))]


def _mlp_args(seed=0):
    r = np.random.default_rng(seed)
    p = [r.normal(size=s).astype(np.float32) for s in [(8, 16), (16,), (16, 4)]]
    return p, r.normal(size=(32, 8)).astype(np.float32), r.normal(size=(32, 4)).astype(np.float32)


def _scan(xs):
    import plax.numpy as jnp
    from plax import lax
    return lax.scan(lambda c, v: (c * 0.9 + jnp.sin(v), c * v), jnp.zeros(4, jnp.float32), xs)


def _scan_mlp(w, xs):
    """A scan whose body is several launches (a product, then a fused cluster)."""
    import plax.numpy as jnp
    from plax import lax
    return lax.scan(lambda c, v: (jnp.tanh(c @ w + v), jnp.sum(c)), jnp.zeros(4, jnp.float32), xs)


def _calls(f, args, n):
    """``n`` calls of ``f``, each call's results read and dropped before the next; returns each
    call's outputs (host) and counts."""
    import plax
    import plax_cupy
    import fake_cupy
    results = []
    for _ in range(n):
        kernels = fake_cupy.COUNTS["kernel_launches"]
        with plax_cupy.count() as c:
            out = plax.tree_util.tree_leaves(f(*args))
        host = [np.asarray(o) for o in out]   # the reads, after the counted call
        results.append((host, c, fake_cupy.COUNTS["kernel_launches"] - kernels, len(out)))
        del out
    return results


@pytest.fixture(autouse=True)
def executables(request):
    """The executables CupyBackend.compile returns in the test, latest last (conftest's
    ``compiled_programs``, on the simulated GPU only)."""
    return request.getfixturevalue("compiled_programs") if SIMULATED else []


def _text(executables, first: int = 0) -> str:
    """The text of the first program compiled since ``first`` (a jit's own, before its bodies)."""
    return executables[first].as_text()


@on_simulated_gpu
@pytest.mark.parametrize("program", ["mlp", "scan", "scan-of-several-kernels"])
def test_replays_as_a_graph_from_the_third_call(program, executables):
    import plax
    import fake_cupy
    gpu = _gpu()
    if program == "mlp":
        p, x, y = _mlp_args()
        fn, host_args = _step, (p, x, y)
    elif program == "scan":
        fn, host_args = _scan, (np.random.default_rng(1).normal(size=(12, 4)).astype(np.float32),)
    else:
        r = np.random.default_rng(4)
        fn, host_args = _scan_mlp, (r.normal(size=(4, 4)).astype(np.float32) * 0.5,
                                    r.normal(size=(9, 4)).astype(np.float32))
    args = plax.device_put(host_args, gpu)
    f = plax.jit(fn)
    runs = _calls(f, args, 1)   # plain (a scan's body, a program of its own, may replay)
    graphs = fake_cupy.COUNTS.get("graph_launches", 0)
    runs += _calls(f, args, 3)
    # calls 2 (its launch and the check's replay, graph_check), 3, 4
    assert fake_cupy.COUNTS.get("graph_launches", 0) - graphs == 4
    n_in = len(plax.tree_util.tree_leaves(args))
    # the capture: the inputs, the same Arrays as the first call's, are read in place
    assert (runs[1][1].launches, runs[1][1].device_copies) == (1, 0)
    for host, c, kernels, n_out in runs[2:]:
        assert (c.host_to_device, c.device_to_host, c.host_fallbacks, c.device_copies) == (0, 0, 0, 0)
        assert c.launches == 1       # the graph alone: same inputs, outputs handed out uncopied
        assert kernels == 0                          # no kernel launched from Python
    assert runs[0][1].launches > runs[2][1].launches
    assert "CUDA graph: captured" in _text(executables)
    assert len(executables[0].graphed.plans) == 1   # each call's results were dropped
    # values: plain path (graphs off), and the NumPy backend
    os.environ["PLAX_CUDA_GRAPHS"] = "0"
    first = len(executables)
    try:
        plain = plax.jit(lambda *a: fn(*a))
        want = [np.asarray(o) for o in plax.tree_util.tree_leaves(plain(*args))]
        assert "PLAX_CUDA_GRAPHS=0" in _text(executables, first)
    finally:
        del os.environ["PLAX_CUDA_GRAPHS"]
    ref = plax.jit(fn, backend="numpy")(*plax.device_put(host_args, plax.devices("cpu")[0]))
    ref = [np.asarray(o) for o in plax.tree_util.tree_leaves(ref)]
    for host, *_ in runs:
        for got, w, r in zip(host, want, ref):
            np.testing.assert_array_equal(got, w)
            np.testing.assert_allclose(got, r, rtol=2e-5, atol=1e-6)


@on_simulated_gpu
@pytest.mark.parametrize("keep", [False, True])
def test_fresh_inputs_each_call(keep):
    """A loop uploading a new input each call: the pool hands the freed block back, so its
    pointer recurs and the plans read it in place (one launch, no copy); inputs kept alive (new
    pointers every call) are copied into a plan's static buffer, one copy each."""
    import plax
    import plax_cupy
    gpu = _gpu()
    f = plax.jit(_scan)
    r = np.random.default_rng(5)
    hosts = [r.normal(size=(7, 4)).astype(np.float32) for _ in range(7)]
    ref = plax.jit(_scan, backend="numpy")
    kept, counts = [], []
    for h in hosts:
        x = plax.device_put(h, gpu)
        with plax_cupy.count() as c:
            out = plax.tree_util.tree_leaves(f(x))
        counts.append((c.launches, c.device_copies, c.host_to_device, c.device_to_host))
        want = plax.tree_util.tree_leaves(ref(plax.device_put(h, plax.devices("cpu")[0])))
        for o, w in zip(out, want):
            np.testing.assert_allclose(np.asarray(o), np.asarray(w), rtol=2e-5, atol=1e-6)
        if keep:
            kept.append(x)
        del x, out
    if keep:   # a new pointer each call: the new input copied in, the graph
        assert counts[3:] == [(2, 1, 0, 0)] * 4, counts
    else:      # (x alternates between two blocks: a plan for each, from the fourth call)
        assert counts[3:] == [(1, 0, 0, 0)] * 4, counts


@on_simulated_gpu
def test_a_training_loop_on_fresh_batches():
    """``params = step(params, device_put(x), device_put(y))``: the parameters are the other
    plan's outputs, the batch's blocks recur: one launch a step, nothing copied."""
    import plax
    import plax_cupy
    gpu = _gpu()
    p, x, y = _mlp_args(3)
    f = plax.jit(lambda *a: _step(*a))
    params = plax.device_put(p, gpu)
    ref = plax.device_put(p, plax.devices("cpu")[0])
    g = plax.jit(_step, backend="numpy")
    counts = []
    for k in range(8):
        xk, yk = x + 0.01 * k, y - 0.01 * k
        with plax_cupy.count() as c:
            params = f(params, plax.device_put(xk, gpu), plax.device_put(yk, gpu))
        counts.append((c.launches, c.device_copies))
        ref = g(ref, *plax.device_put((xk, yk), plax.devices("cpu")[0]))
    for a, b in zip(params, ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
    assert counts[3:] == [(1, 0)] * 5, counts


@on_simulated_gpu
def test_a_training_loop_feeds_outputs_back(executables):
    """Each step's parameters are the last step's results: two plans take turns, each reading
    the other's outputs in place and writing where the other reads: one launch a step."""
    import plax
    import plax_cupy
    gpu = _gpu()
    p, x, y = _mlp_args(2)
    f = plax.jit(lambda *a: _step(*a))   # a program of its own
    params = plax.device_put(p, gpu)
    xd, yd = plax.device_put((x, y), gpu)
    ref = plax.device_put(p, plax.devices("cpu")[0])
    g = plax.jit(_step, backend="numpy")
    xc, yc = plax.device_put((x, y), plax.devices("cpu")[0])
    launches, copies = [], []
    for _ in range(7):
        with plax_cupy.count() as c:
            params = f(params, xd, yd)
        launches.append(c.launches)
        copies.append(c.device_copies)
        ref = g(ref, xc, yc)
    for a, b in zip(params, ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
    n = len(p)
    # plain; the first plan (the parameters, new, copied into it; the batch read in place);
    # the second, captured on the first's outputs with its own outputs steered into the first
    # plan's parameter buffers; then the two take turns, each reading the other's outputs
    assert launches[1:] == [n + 1] + [1] * 5, launches
    assert copies[1:] == [n] + [0] * 5, copies
    assert len(executables[0].graphed.plans) == 2


@on_simulated_gpu
def test_steered_results_kept_are_never_overwritten(executables):
    """In a training loop one plan's outputs live in the other plan's static input buffers. A
    caller keeping those results and calling with other parameters (which that plan would copy
    into the same buffers) gets its own results, and the kept ones keep their values."""
    import plax
    gpu = _gpu()
    p, x, y = _mlp_args(4)
    f = plax.jit(lambda *a: _step(*a))
    params = plax.device_put(p, gpu)
    xd, yd = plax.device_put((x, y), gpu)
    for _ in range(4):
        params = f(params, xd, yd)
    program = executables[0].graphed
    # (ids: a reference held here would itself keep the plans from replaying)
    steered = {id(o) for plan in program.plans for o in plan.outputs
               if any(o is s for other in program.plans for s in other.static if s is not None)}
    assert steered   # the loop's second plan writes into the first plan's static buffers
    kept = f(params, xd, yd)
    if not any(id(k._buf) in steered for k in kept):
        kept = f(kept, xd, yd)        # the second plan's: in the first plan's static buffers
    assert any(id(k._buf) in steered for k in kept)
    del params
    want = [np.asarray(k) for k in kept]
    other = plax.device_put(_mlp_args(5)[0], gpu)
    g = plax.jit(_step, backend="numpy")
    cpu = plax.devices("cpu")[0]
    for _ in range(3):
        got = f(other, xd, yd)
        ref = g(plax.device_put(_mlp_args(5)[0], cpu), *plax.device_put((x, y), cpu))
        for a, b in zip(got, ref):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
        del got
    for k, w in zip(kept, want):
        np.testing.assert_array_equal(np.asarray(k), w)


@on_simulated_gpu
def test_inputs_that_never_recur_bound_the_captures(executables):
    """Inputs kept alive (a new pointer every call) with results dropped: the plans stay at
    most MAX_PLANS, captures stop once they no longer pay, and every call is a replay with the
    input copied in (two launches) or a plain call, never a capture each call."""
    import plax
    import plax_cupy
    gpu = _gpu()
    f = plax.jit(lambda v: _scan(v))
    r = np.random.default_rng(12)
    inputs = [plax.device_put(r.normal(size=(5, 4)).astype(np.float32), gpu) for _ in range(24)]
    launches = []
    for x in inputs:
        with plax_cupy.count() as c:
            f(x)
        launches.append(c.launches)
    program = executables[0].graphed
    assert len(program.plans) <= MAX_PLANS
    assert program.captures <= 2 * MAX_PLANS + program.replays // 4 + 1
    assert launches[-8:] == [2] * 8, launches


@on_simulated_gpu
def test_results_kept_are_never_overwritten(executables):
    """A caller keeping every result: a plan replays only once its outputs are let go, so after
    the last plan the calls run plainly rather than overwrite a result still held."""
    import plax
    gpu = _gpu()
    f = plax.jit(lambda v: _scan(v))   # a program of its own
    r = np.random.default_rng(8)
    hosts = [r.normal(size=(5, 4)).astype(np.float32) for _ in range(MAX_PLANS + 3)]
    kept = [f(plax.device_put(h, gpu)) for h in hosts]
    for h, got in zip(hosts, kept):
        want = plax.jit(_scan, backend="numpy")(plax.device_put(h, plax.devices("cpu")[0]))
        for o, w in zip(plax.tree_util.tree_leaves(got), plax.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(np.asarray(o), np.asarray(w), rtol=2e-5, atol=1e-6)
    program = executables[0].graphed
    assert len(program.plans) == MAX_PLANS and program.plain_calls == len(hosts) - 1 - MAX_PLANS
    del kept
    plain, replays = program.plain_calls, program.replays
    f(plax.device_put(hosts[0], gpu))   # the results let go: the plans serve again (a replay,
    assert program.plain_calls == plain  # or a capture in place of a plan nobody holds)
    assert program.replays == replays + 1 and len(program.plans) == MAX_PLANS


@on_simulated_gpu
def test_bfloat16_results_kept_are_never_overwritten(executables):
    """bfloat16 results are Bf16Buffers around the plan's bits: held, they keep it too."""
    import ml_dtypes
    import plax
    import plax.numpy as jnp
    gpu, bf16 = _gpu(), np.dtype(ml_dtypes.bfloat16)
    f = plax.jit(lambda x: (jnp.sin(x) * 2 + x) @ x.T - 1)
    r = np.random.default_rng(10)
    hosts = [r.normal(size=(4, 8)).astype(bf16) for _ in range(MAX_PLANS + 2)]
    kept = [f(plax.device_put(h, gpu)) for h in hosts]
    ref = plax.jit(lambda x: (jnp.sin(x) * 2 + x) @ x.T - 1, backend="numpy")
    for h, got in zip(hosts, kept):
        want = ref(plax.device_put(h, plax.devices("cpu")[0]))
        assert got.dtype == bf16
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    program = executables[0].graphed
    assert len(program.plans) == MAX_PLANS and program.plain_calls == 1


@on_simulated_gpu
def test_an_input_returned_as_a_result(executables):
    """A program returning its input hands out the plan's copy of it: held, the plan does not
    copy the next input over it."""
    import plax
    gpu = _gpu()
    f = plax.jit(lambda x, y: (x, x @ y + 1))
    r = np.random.default_rng(11)
    y = plax.device_put(r.normal(size=(3, 3)).astype(np.float32), gpu)
    hosts = [r.normal(size=(2, 3)).astype(np.float32) for _ in range(4)]
    kept = [f(plax.device_put(h, gpu), y) for h in hosts]
    yh = np.asarray(y).astype(np.float64)
    for h, (same, prod) in zip(hosts, kept):
        np.testing.assert_array_equal(np.asarray(same), h)
        np.testing.assert_allclose(np.asarray(prod), h.astype(np.float64) @ yh + 1, rtol=1e-5)
    assert len(executables[0].graphed.plans) == MAX_PLANS


@on_simulated_gpu
def test_a_view_of_a_result_keeps_its_plan_from_replaying(executables):
    """A slice of a result views the plan's output memory: while it lives, the plan that wrote
    it does not replay; its values stay those of its own call."""
    import plax
    gpu = _gpu()
    f = plax.jit(lambda v: _scan(v))   # a program of its own
    r = np.random.default_rng(9)
    x = plax.device_put(r.normal(size=(6, 4)).astype(np.float32), gpu)
    f(x)                                # plain
    carry, ys = f(x)                    # captured: the first plan's outputs
    program = executables[0].graphed
    first = program.plans[0]
    view = ys[2:]
    want = np.asarray(view)
    del carry, ys
    for _ in range(3):                  # other inputs, results dropped
        f(plax.device_put(r.normal(size=(6, 4)).astype(np.float32), gpu))
    np.testing.assert_array_equal(np.asarray(view), want)
    assert first in program.plans and first.replays == 1 and len(program.plans) >= 2
    del view
    f(x)                                # let go: the first plan (x in place, no copy) replays
    assert first.replays == 2


def _host_only_primitive():
    """A plugin's elementwise primitive with a NumPy kernel and no GPU kernel: on the GPU it
    runs as the counted host fallback (every lax primitive has a GPU path)."""
    import plax_numpy
    from plax.core.primitive import Primitive
    prim = Primitive("simulated_host_only")
    prim.def_abstract_eval(lambda x: x)
    plax_numpy.register_impl(prim, lambda x: np.arcsin(x))
    return prim


@on_simulated_gpu
@pytest.mark.parametrize("program, reason", [
    ("selu", "no more than a replay"),
    ("cond", "cond decides its branch on the host"),
    ("while", "while decides each iteration on the host"),
    ("callback", "host callback"),
    ("host", "a primitive runs on the host: simulated_host_only"),
])
def test_programs_that_need_the_host_run_plainly(program, reason, executables):
    import plax
    import plax.numpy as jnp
    from plax import lax
    fns = {
        "selu": lambda x: 1.05 * jnp.where(x > 0, x, 1.67 * jnp.exp(x) - 1.67),
        "cond": lambda x: lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: v - 1, x) * 3 + 1,
        "while": lambda x: lax.while_loop(lambda v: v.sum() < 100, lambda v: v * 2 + 1, x),
        "callback": lambda x: plax.pure_callback(
            lambda v: np.asarray(v) * 2, plax.ShapeDtypeStruct(x.shape, x.dtype), jnp.sin(x)) + 1,
    }
    x = np.linspace(0.5, 2, 8).astype(np.float32)
    if program == "host":  # a plugin's primitive with a reference (NumPy) kernel only
        host_only = _host_only_primitive()
        fns["host"] = lambda z: host_only.bind(z * 0.3) * 2 + jnp.exp(z) - z
    x = plax.device_put(x, _gpu())
    f = plax.jit(fns[program])
    first = np.asarray(f(x))
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(f(x)), first)
    # (the bodies of cond/while are programs of their own, and may replay as graphs)
    assert executables[0].graphed.plans == []
    text = _text(executables)
    assert "CUDA graph: no, runs plainly" in text and reason in text, text[-300:]


@on_simulated_gpu
def test_a_stale_captured_pointer_is_caught():
    import cupy
    import fake_cupy
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        a = cupy.arange(256, dtype=cupy.float32)
        s.begin_capture()
        b = a * 2
        graph = s.end_capture()
        graph.launch(s)
        np.testing.assert_array_equal(b.get(), np.arange(256) * 2)
        del a                                   # the captured input is freed
        with pytest.raises(fake_cupy.UseAfterFreeError, match="stale"):
            graph.launch(s)
        c = cupy.full(256, 3, dtype=cupy.float32)  # its block reused: a GPU reads it in place
        graph.launch(s)
        np.testing.assert_array_equal(b.get(), np.full(256, 6))
        del c   # (the capture's own allocations freed and reused: test_the_plan_owns_its_buffers)


@on_simulated_gpu
def test_capture_refuses_host_traffic_and_poisons_its_outputs():
    import cupy
    import fake_cupy
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        a = cupy.arange(4, dtype=cupy.float32)
        s.begin_capture()
        b = a + 1
        with pytest.raises(fake_cupy.StreamCaptureError):
            b.get()
        with pytest.raises(fake_cupy.StreamCaptureError):
            cupy.asarray(np.ones(3))
        graph = s.end_capture()
        s.synchronize()
        assert np.isnan(b.get()).all()          # nothing ran at capture
        graph.launch(s)
        np.testing.assert_array_equal(b.get(), [1, 2, 3, 4])


@on_simulated_gpu
def test_a_capture_leaves_memory_unchanged_and_each_launch_computes():
    """Nothing runs while a stream captures: writes into memory from before the capture (an
    in-place update, a copy, an in-place sort, a result an allocator steers into memory it
    already holds) are recorded, memory is as it was when the capture ends, and each launch
    runs them in order on memory as it is then."""
    import cupy
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        a = cupy.arange(4, dtype=cupy.float32)
        b = cupy.asarray(np.array([3, 1, 2, 0], np.float32))
        c = cupy.zeros(4, dtype=cupy.float32)
        index = cupy.asarray(np.array([3, 0], np.int64))
        held = cupy.full(2, 7, dtype=cupy.float32)
        s.synchronize()
        kept = []   # (the capture's temporaries and the sort's scratch: the graph uses them)

        def holding(nbytes):
            kept.append(cupy.get_default_memory_pool().malloc(nbytes))
            return kept[-1]
        s.begin_capture()
        with cupy.cuda.using_allocator(holding):
            a += 1
            cupy.copyto(c, a * 2)
            b.sort()
        with cupy.cuda.using_allocator(lambda nbytes: held._mem):
            taken = cupy.take(a, index)        # written into held's memory: no new allocation
        graph = s.end_capture()
        s.synchronize()
        for x, want in ((a, [0, 1, 2, 3]), (b, [3, 1, 2, 0]), (c, [0] * 4), (held, [7, 7])):
            np.testing.assert_array_equal(x.get(), want)
        for first in (1, 2):
            graph.launch(s)
            s.synchronize()
            np.testing.assert_array_equal(a.get(), np.arange(4) + first)
            np.testing.assert_array_equal(c.get(), (np.arange(4) + first) * 2)
            np.testing.assert_array_equal(b.get(), [0, 1, 2, 3])
            np.testing.assert_array_equal(taken.get(), [3 + first, first])
            np.testing.assert_array_equal(held.get(), taken.get())


@on_simulated_gpu
def test_work_outside_a_capture_sees_and_keeps_the_memory_a_gpu_holds():
    """While a stream captures (CuPy's default relaxed mode: other threads and streams may
    work meanwhile), another thread's reads of memory a captured step wrote see the bytes from
    before the capture (nothing ran), its writes to that memory stay after the capture ends
    (the capture puts back only what it computed), and each launch then computes from them."""
    import threading
    import cupy
    s = cupy.cuda.Stream(non_blocking=True)
    seen = {}

    def outside():   # (another thread: its current stream is the legacy default one)
        seen["during"] = a.get()
        a[2:] = cupy.asarray(np.array([50, 60], np.float32))
        cupy.copyto(b, a * 3)
        seen["b"] = b.get()

    with s:
        a = cupy.arange(4, dtype=cupy.float32)
        b = cupy.zeros(4, dtype=cupy.float32)
        s.synchronize()
        s.begin_capture()
        a += 1
        cupy.copyto(b, a)
        thread = threading.Thread(target=outside)
        thread.start()
        thread.join()
        graph = s.end_capture()
    np.testing.assert_array_equal(seen["during"], [0, 1, 2, 3])
    np.testing.assert_array_equal(seen["b"], [0, 3, 150, 180])
    np.testing.assert_array_equal(a.get(), [0, 1, 50, 60])
    np.testing.assert_array_equal(b.get(), [0, 3, 150, 180])
    graph.launch(s)
    s.synchronize()
    np.testing.assert_array_equal(a.get(), [1, 2, 51, 61])
    np.testing.assert_array_equal(b.get(), [1, 2, 51, 61])


@on_simulated_gpu
def test_a_failed_capture_names_its_first_error(executables):
    """A synchronisation inside a capture: CUDA refuses it and invalidates the capture, so
    ending it raises too; the program's reason is the first error, not the invalidation."""
    import plax
    import plax.numpy as jnp
    import fake_cupy
    x = plax.device_put(np.arange(12, dtype=np.float32).reshape(3, 4), _gpu())
    f = plax.jit(lambda x: (jnp.sin(x) + 1) @ x.T)
    want = np.asarray(f(x))
    program = executables[0].graphed
    fn = program.fn

    def synchronising(*buffers):
        program.backend.stream(program.device).synchronize()
        return fn(*buffers)
    program.fn = synchronising
    np.testing.assert_array_equal(np.asarray(f(x)), want)   # (run plainly instead)
    line = program.describe()
    assert "capture failed (StreamCaptureError: cudaErrorStreamCaptureUnsupported" in line, line
    assert "1 captured" not in line and "2 plain" in line, line
    s = fake_cupy.Stream(non_blocking=True)
    s.begin_capture()
    with pytest.raises(fake_cupy.StreamCaptureError):
        s.synchronize()
    with pytest.raises(fake_cupy.StreamCaptureError, match="cudaErrorStreamCaptureInvalidated"):
        s.end_capture()
    assert not s.is_capturing()


@on_simulated_gpu
def test_capture_refuses_cupys_library_calls():
    """As CuPy's cuBLAS and cuSOLVER bindings (whose ``setStream`` raises while the stream
    captures): a float product or a factorisation through CuPy is refused in a capture; an
    integer product (CuPy's own kernel) is not."""
    import cupy
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        a = cupy.ones((2, 3, 3), dtype=cupy.float32)
        n = cupy.ones((2, 3, 3), dtype=cupy.int32)
        s.begin_capture()
        try:
            with pytest.raises(NotImplementedError, match="cuBLAS API during stream capture"):
                cupy.matmul(a, a)
            with pytest.raises(NotImplementedError, match="cuBLAS API"):
                a @ a
            with pytest.raises(NotImplementedError, match="cuSOLVER API"):
                cupy.linalg.cholesky(a)
            cupy.matmul(n, n)
        finally:
            s.end_capture()
        cupy.matmul(a, a)   # not capturing: allowed


def _hlines(executables) -> str:
    return [line for line in _text(executables).splitlines() if line.startswith("# CUDA graph")][0]


@on_simulated_gpu
@pytest.mark.parametrize("direct", [True, False])
def test_products_are_captured_through_the_loaded_cublas(direct, executables, monkeypatch):
    """The H200's MLP step (issue 24): every capture of a program holding a product failed
    (CuPy's cuBLAS binding refuses a capturing stream), so it ran plainly, one launch per kernel,
    with graphs on as off. Through ``plax_cupy.cublas_direct`` (the simulated libcublas here,
    found loaded in the process as the real one is) the product is captured: one launch a call,
    the values of the plain path. Without it, the simulation does as the H200 did, and says
    why in ``as_text()``."""
    import plax
    from plax_cupy import cublas_direct
    if not direct:
        monkeypatch.setattr(cublas_direct, "_binding", [None])
    elif cublas_direct.binding() is not None:
        assert isinstance(cublas_direct.binding().library, __import__("ctypes").CDLL)
    p, x, y = _mlp_args(5)
    args = plax.device_put((p, x, y), _gpu())
    runs = _calls(plax.jit(lambda *a: _step(*a)), args, 4)   # (a program of its own)
    launches = [c.launches for _, c, _, _ in runs]
    line = _hlines(executables)
    if direct:
        assert launches[1:] == [1, 1, 1], launches
        assert line.endswith("calls: 1 captured, 3 replayed, 1 plain (last: the first call, "
                             "which compiles)"), line
    else:
        assert launches[1:] == launches[:1] * 3 and launches[0] > 1, launches
        assert ("no, runs plainly (capture failed (NotImplementedError: calling cuBLAS API "
                "during stream capture is currently unsupported))") in line, line
        assert "calls: 0 captured, 0 replayed, 4 plain" in line, line
    for host, *_ in runs[1:]:
        for got, want in zip(host, runs[0][0]):
            np.testing.assert_array_equal(got, want)


@on_simulated_gpu
def test_an_implicit_gemm_convolution_is_captured(executables, monkeypatch):
    """The H200's conv row (two launches with graphs on as off): its gather kernel and cuBLAS
    product replay as one launch, with the plain call's values. (The case and thresholds of
    test_kernels_b_convolution's NHWC implicit GEMM: the same gather kernel.)"""
    import plax
    from plax import lax
    from plax_cupy import kernels_convolution
    monkeypatch.setattr(kernels_convolution, "GEMM_MIN_TERMS", 0)
    monkeypatch.setattr(kernels_convolution, "GEMM_MIN_FEATURES", 0)
    r = np.random.default_rng(11)
    x = plax.device_put(r.normal(size=(1, 7, 6, 4)).astype(np.float32), _gpu())
    w = plax.device_put(r.normal(size=(3, 2, 4, 6)).astype(np.float32), _gpu())
    f = plax.jit(lambda x, w: lax.conv_general_dilated(
        x, w, (2, 1), ((1, 1), (0, 1)), rhs_dilation=(1, 2),
        dimension_numbers=("NHWC", "HWIO", "NHWC")))
    runs = _calls(f, (x, w), 3)
    assert [c.launches for _, c, _, _ in runs] == [2, 1, 1]
    assert "calls: 1 captured, 2 replayed, 1 plain" in _hlines(executables)
    for host, *_ in runs[1:]:
        np.testing.assert_array_equal(host[0], runs[0][0][0])


def test_direct_cublas_binds_the_c_functions_and_checks_their_status(tmp_path):
    """``plax_cupy.cublas_direct`` (no CuPy needed): the C entry points are bound with their
    argument types, a status other than success raises ``CUBLASError`` naming it, and the
    library is looked up among the files the process has mapped."""
    import ctypes
    from plax_cupy import cublas_direct
    calls = []

    class Library:   # C functions as ctypes hands them out (argtypes set by the binding)
        def __getattr__(self, name):
            if name not in ("cublasSetStream_v2", "cublasGetPointerMode_v2",
                            "cublasSetPointerMode_v2", "cublasGemmStridedBatchedEx"):
                raise AttributeError(name)

            def fn(*args):
                calls.append((name, args))
                return 15 if name == "cublasGemmStridedBatchedEx" else 0
            self.__dict__[name] = fn
            return fn

    lib = cublas_direct.DirectCublas(Library())
    lib.setStream(1, 2)
    lib.setWorkspace(1, 3, 4)     # (absent from this library: nothing called)
    with pytest.raises(cublas_direct.CUBLASError, match="CUBLAS_STATUS_NOT_SUPPORTED"):
        lib.gemmStridedBatchedEx(*range(23))
    assert [c[0] for c in calls] == ["cublasSetStream_v2", "cublasGemmStridedBatchedEx"]
    gemm = lib.library.cublasGemmStridedBatchedEx
    assert len(gemm.argtypes) == 23 and gemm.argtypes[10] is ctypes.c_longlong
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r--p 00000000 00:00 0 \n7f01-7f02 r-xp 0 00:00 1   [vdso]\n")
    assert cublas_direct.loaded_library(str(maps)) is None or \
        os.path.basename(cublas_direct.loaded_library(str(maps))._name).startswith("libcublas")


@on_simulated_gpu
def test_as_text_says_why_the_last_call_ran_plainly(executables):
    """Results kept by the caller: the calls past the plans run plainly, and the line says so."""
    import plax
    f = plax.jit(lambda v: _scan(v))
    xs = np.random.default_rng(9).normal(size=(5, 4)).astype(np.float32)
    kept = [f(plax.device_put(xs, _gpu())) for _ in range(MAX_PLANS + 2)]
    line = _hlines(executables)
    assert f"calls: {MAX_PLANS} captured, {MAX_PLANS} replayed, 2 plain (last: every plan it " \
        "fits writes buffers the caller still holds" in line, line
    del kept


@on_simulated_gpu
def test_the_plan_owns_its_buffers(executables):
    """The graph's pointers stay valid however the caller's arrays come and go: freeing the
    plan's buffers is what a stale pointer would be, and the fake catches it."""
    import plax
    import fake_cupy
    xs = np.random.default_rng(3).normal(size=(6, 4)).astype(np.float32)
    f = plax.jit(lambda v: _scan(v))
    for _ in range(3):  # fresh input arrays each call, dropped after it
        out = f(plax.device_put(xs, _gpu()))
    program = executables[0].graphed
    assert program.plan is not None
    program.plan.held.clear()
    program.plan.inputs.clear()
    program.plan.outputs.clear()
    import cupy
    junk = [cupy.zeros(n, dtype=cupy.uint8) for n in (64, 512, 1024, 4096)]  # reuse blocks
    with pytest.raises(fake_cupy.UseAfterFreeError):
        program.plan.graph.launch(program.backend.stream(program.device))
    del junk, out


@on_simulated_gpu
def test_four_threads_share_one_compiled_program():
    import plax
    gpu = _gpu()
    f = plax.jit(_step)
    inputs = [plax.device_put(_mlp_args(seed), gpu) for seed in range(4)]
    want = [[np.asarray(o) for o in plax.jit(_step, backend="numpy")(
        *plax.device_put(_mlp_args(seed), plax.devices("cpu")[0]))] for seed in range(4)]
    errors, got = [], {}

    def worker(i):
        try:
            for _ in range(4):
                got[i] = [np.asarray(o) for o in f(*inputs[i])]
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(4):
        for a, b in zip(got[i], want[i]):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


@on_simulated_gpu
def test_a_read_to_the_host_waits_for_another_threads_capture():
    """CUDA refuses to synchronise a capturing stream (and drops the capture): a read to the
    host on another thread waits for the capture to end (the device's graph lock)."""
    import plax
    from plax_cupy import graphs
    x = plax.device_put(np.arange(6, dtype=np.float32), _gpu())
    backend, device = plax.plugins.registry().get_backend("cupy"), _gpu()
    stream = backend.stream(device)
    capturing, ended, errors, got = threading.Event(), [], [], []

    def capture():
        with graphs.device_lock(device.id):
            stream.begin_capture()
            capturing.set()
            for _ in range(200):   # (time for the reader to try)
                threading.Event().wait(0.001)
            ended.append(True)
            stream.end_capture()

    def read():
        capturing.wait()
        try:
            got.append((backend.to_host(x._buffer_on(device)), bool(ended)))
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)
    threads = [threading.Thread(target=capture), threading.Thread(target=read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    np.testing.assert_array_equal(got[0][0], np.arange(6))
    assert got[0][1]   # (read after the capture ended)


@on_simulated_gpu
def test_out_of_memory_while_capturing():
    import plax
    import fake_cupy
    from plax_cupy.runtime import GpuOutOfMemoryError
    xs = plax.device_put(np.ones((64, 4), np.float32), _gpu())
    f = plax.jit(lambda v: _scan(v * 2))
    f(xs)                                   # plain
    saved = fake_cupy.MEMORY
    fake_cupy.MEMORY = 256                  # the capture's first allocation is larger
    try:
        with pytest.raises(GpuOutOfMemoryError):
            f(xs)
    finally:
        fake_cupy.MEMORY = saved


# ---------------------------------------------------------------- which CuPy calls a capture takes
# (CuPy 14.2's sources, tag v14.2.0; the table in docs/gpu.md, "Which library calls a CUDA graph
# capture takes")

@on_simulated_gpu
def test_capture_refuses_calls_that_read_their_results_size():
    """``nonzero`` (and ``where(cond)``, ``argwhere``, ``unique``, a boolean mask index) read
    the size of their result to the host: ``cupy/_core/_routines_indexing.pyx`` line 123,
    ``count_nonzero = int(scan_index[-1])  # synchronize!``, and line 802 for a mask; the
    device-to-host copy is refused by ``cupy/cuda/memory.pyx`` line 718 ("the current stream
    is capturing, so D2H transfers ...") before CUDA sees it, so the capture goes on."""
    import cupy
    import fake_cupy
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        a = cupy.arange(6, dtype=cupy.float32) - 2
        s.begin_capture()
        calls = {"nonzero": lambda: cupy.nonzero(a), "where": lambda: cupy.where(a > 0),
                 "argwhere": lambda: cupy.argwhere(a), "unique": lambda: cupy.unique(a),
                 "mask": lambda: a[a > 0], "method": lambda: a.nonzero()}
        for name, call in calls.items():
            with pytest.raises(fake_cupy.StreamCaptureError, match="result's size"):
                call()
        b = cupy.where(a > 0, a, 0)                     # (three operands: a kernel)
        graph = s.end_capture()                         # (not invalidated)
        graph.launch(s)
        np.testing.assert_array_equal(b.get(), [0, 0, 0, 1, 2, 3])
        assert len(cupy.nonzero(a)[0]) == 5             # not capturing: allowed


@on_simulated_gpu
@pytest.mark.parametrize("call", ["argsort", "sum"])
def test_a_captured_library_call_writes_scratch_the_capturer_must_hold(call):
    """CuPy's sorts call Thrust with ``thrust::cuda::par_nosync`` (``cupy/cuda/cupy_thrust.cu``
    line 324: no synchronisation, so the capture takes them), whose temporary storage comes
    from CuPy's allocator (``cupy/cuda/thrust.pyx`` line 39, ``memory.alloc``) and goes back to
    the pool when the sort returns: a replay writes it again, so it must stay the graph's. CUB's
    reductions likewise (``cupy/_core/_cub_reduction.pyx`` line 451, ``memory.alloc``)."""
    import cupy
    import fake_cupy
    x = np.array([3.0, -1.0, 2.0, 0.5] * 64, np.float32)
    want = np.argsort(x, kind="stable") if call == "argsort" else x.sum()
    scratch = 3 * x.nbytes if call == "argsort" else 512
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        a = cupy.asarray(x)
        s.begin_capture()
        order = getattr(cupy, call)(a)
        graph = s.end_capture()
        junk = cupy.empty(scratch, cupy.uint8)          # the pool hands the scratch out again
        with pytest.raises(fake_cupy.UseAfterFreeError, match="stale"):
            graph.launch(s)
        del junk, order, graph
        held = []

        def holding(nbytes):                            # (as plax's capture allocator)
            held.append(cupy.get_default_memory_pool().malloc(nbytes))
            return held[-1]
        with cupy.cuda.using_allocator(holding):
            s.begin_capture()
            order = getattr(cupy, call)(a)
            graph = s.end_capture()
        junk = cupy.empty(scratch, cupy.uint8)
        graph.launch(s)
        np.testing.assert_array_equal(order.get(), want)
        del junk


@on_simulated_gpu
def test_a_captured_fft_reads_its_cached_cufft_plan():
    """``cupy.fft`` transforms through a plan from CuPy's LRU cache (``cupy/fft/_cache.pyx``
    line 265, 16 plans; ``cupy/fft/_fft.py`` line 155); ``cufftSetStream`` is not refused
    (``cupy/cuda/cufft.pyx`` line 574, no capture check), so the transform is captured, but an
    eviction destroys the plan (``cufftDestroy``) whose memory the graph reads on replay."""
    import cupy
    import fake_cupy
    x = (np.arange(16) % 5).astype(np.complex64)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        a = cupy.asarray(x)
        cupy.fft.fft(a)                                 # the plan, made outside the capture
        s.begin_capture()
        y = cupy.fft.fft(a)
        graph = s.end_capture()
        graph.launch(s)
        np.testing.assert_allclose(y.get(), np.fft.fft(x), rtol=1e-5, atol=1e-4)
        cache = cupy.fft.config.get_plan_cache()
        for n in range(17, 17 + cache.get_size()):      # sixteen other transforms evict it
            cupy.fft.fft(cupy.ones(n, cupy.complex64))
        with pytest.raises(fake_cupy.UseAfterFreeError, match="stale"):
            graph.launch(s)


@on_simulated_gpu
def test_a_sort_program_replays(executables):
    """plax's ``sort`` (Thrust) is captured (``fft`` programs: test_kernels_b_fft.py)."""
    import plax
    import plax.numpy as jnp
    x = plax.device_put(np.array([3.0, -1.0, np.nan, 2.0, -0.0, 0.0] * 4, np.float32), _gpu())
    f = plax.jit(lambda v: jnp.sort(v * 2 + 1) - 1)
    runs = _calls(f, (x,), 4)
    want = np.sort(np.asarray(x) * 2 + 1) - 1
    for host, _, _, _ in runs:
        np.testing.assert_array_equal(host[0], want)
    assert runs[-1][2] == 0 and "1 captured, 3 replayed" in _hlines(executables), \
        _hlines(executables)
