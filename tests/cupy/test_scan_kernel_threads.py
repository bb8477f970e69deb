"""The persistent scan kernel (``plax_scan``, :mod:`plax_cupy.scan_kernel`) run by a real
block of threads.

The simulated GPU runs one thread per block, so a missing ``__syncthreads()`` between two of a
step's phases, a phase reading what another thread of the same phase writes, or a carry
buffer overwritten while another thread still reads it would pass every simulated test. Here
each kernel is built for the host as ``test_kernels_rows.py`` builds its row kernels (the
block's threads as ``std::thread``\\ s, ``__syncthreads()`` a ``std::barrier``, ``__shared__``
memory shared between them) and run with 32, 64 and 256 threads -- sizes that are not
multiples of the thread count, so threads own different numbers of elements -- several times
over (a race shows only in some interleavings). Each output element is one thread's, folded in
a fixed order whatever the block size, so every run must equal the one-thread run bit for bit;
the one-thread run is checked against the NumPy backend's ``scan`` (within rounding).

Bodies: the tanh RNN (its ``W`` staged in shared memory) and its gradient's two scans (``W``
staged transposed), a reverse scan with a pytree carry (float32, int32, bool) through
broadcasts, transposes, reductions, ``dynamic_slice`` and ``dot_general``, ``xs=None`` on
float64 and float16, a batched ``dot_general`` with a transpose and reductions, a body
whose working set lives in the global scratch, and one of pad, concatenate, stack, split,
gather, scatter, argmax/argmin, cumulative ops (cumlogsumexp too) and sorts (a bitonic
network: a phase per stage, each reading its partner's position) (and its gradient's two
scans).

:func:`test_every_phase_is_fenced` audits the generated source itself, walking a step's phases
and barriers: no phase reads another thread's element of an array written since the last
barrier, and the step, the carry's initial copy and the staged constants end with a barrier.
With NVRTC, the same bodies' sources (staged constants included) compile with its checks.

Cost: one g++ build (``-O0``) per body, about 1 s each; the file takes about 6-8 CPU-seconds.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from gpu_env import requires_nvrtc
from test_kernels_rows import _kernels, needs_cxx20
from test_simulated_scan_kernel import (_forms, _forms_args, _forms_loss, _many, _many_args, _rnn,
                                        _rnn_loss, _scans)

THREADS = (32, 64, 256)


def _operands(params, rng) -> list:
    """Random operands of the scan equation's avals (consts, initial carry, xs)."""
    closed = params["jaxpr"]
    length = int(params["length"])
    nc, ncarry = int(params["num_consts"]), int(params["num_carry"])
    out = []
    for j, v in enumerate(closed.jaxpr.invars):
        shape = tuple(v.aval.shape) if j < nc + ncarry else (length,) + tuple(v.aval.shape)
        dtype = np.dtype(v.aval.dtype)
        if dtype == np.bool_:
            out.append(rng.integers(0, 2, shape).astype(bool))
        elif dtype.kind in "iu":
            out.append(rng.integers(-3, 4, shape).astype(dtype))
        else:   # (bfloat16 and float16 through float32)
            out.append((rng.normal(size=shape) * 0.5).astype(np.float32).astype(dtype))
    return out


def _reference(params, operands) -> list:
    """The scan on the NumPy backend."""
    import plax
    from plax import lax
    fn = plax.jit(lambda *a: lax.scan_p.bind(*a, **params), backend="numpy")
    return [np.asarray(r) for r in fn(*operands)]


def _run_threads(tmp_path, plan, operands, threads) -> list:
    """``plan``'s kernel on the host with one block of ``threads`` threads; outputs and the
    scratch prefilled with 7s (an element nobody writes shows)."""
    run = _kernels(tmp_path, plan.source, preamble=False)["plax_scan"]
    ins = [np.ascontiguousarray(np.asarray(c)) for c in plan.body_consts]
    ins += [np.ascontiguousarray(a) for a in operands]
    for a, dtype in zip(ins, plan.in_dtypes):
        assert a.dtype == dtype, (a.dtype, dtype)
    outs = [np.full(s, 7, d) for s, d in zip(plan.out_shapes, plan.out_dtypes)]
    extra = [np.full(plan.scratch_bytes, 7, np.uint8)] if plan.scratch_bytes else []
    run(1, threads, *ins, *outs, *extra)
    return outs


def _check(tmp_path, params, rng, repeats, rtol=1e-5, atol=1e-5):
    """``params``' scan as one kernel: one thread (the simulated GPU's way) against the NumPy
    backend, then ``repeats`` runs with each block size bit for bit equal to it (each element
    is one thread's, folded in a fixed order, whatever the block size: any difference is a
    race). Returns the plan."""
    from plax_cupy import scan_kernel
    plan = scan_kernel.plan_scan(params)
    operands = _operands(params, rng)
    want = _reference(params, operands)
    alone = _run_threads(tmp_path, plan, operands, 1)
    for k, (g, w) in enumerate(zip(alone, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, w.dtype)
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"output {k}")
        else:   # (sums and contractions fold in another order than NumPy's)
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                       rtol=rtol, atol=atol, err_msg=f"output {k}")
    for threads in THREADS:
        for rep in range(repeats):
            got = _run_threads(tmp_path, plan, operands, threads)
            for k, (g, a) in enumerate(zip(got, alone)):
                np.testing.assert_array_equal(g.reshape(-1).view(np.uint8), a.reshape(-1).view(np.uint8),
                                              err_msg=f"output {k}, {threads} threads, run {rep}")
    return plan


def _rnn_args(hidden=37, steps=9):
    rng = np.random.default_rng(0)
    return ((rng.normal(size=(hidden, hidden)) * 0.3).astype(np.float32),
            rng.normal(size=hidden).astype(np.float32),
            rng.normal(size=(steps, hidden)).astype(np.float32))


@needs_cxx20
def test_rnn_with_a_block_of_threads(tmp_path):
    # 37 hidden units: the 32-thread block's first thread owns two elements, the others one;
    # 64 and 256 threads leave some idle (20 runs each: races are probabilistic)
    (params,) = _scans(_rnn, *_rnn_args())
    plan = _check(tmp_path, params, np.random.default_rng(1), repeats=20)
    # W (constant across steps) is staged in shared memory once, before the loop
    assert re.search(r"ks0\[i\] = k0\[", plan.source) and "* (float)ks0[" in plan.source


@needs_cxx20
def test_rnn_gradient_scans_with_a_block_of_threads(tmp_path):
    import plax
    forward, backward = _scans(plax.grad(_rnn_loss, argnums=(0, 1)), *_rnn_args(hidden=21, steps=7))
    assert backward["reverse"] and not forward["reverse"]
    from plax_cupy import scan_kernel
    # the reverse scan reads W transposed: staged transposed (the output's axis, consecutive
    # threads, walks the copy's last axis: no shared-memory bank conflicts)
    back = scan_kernel.plan_scan(backward).source
    assert "ks0[i] = k0[((i / 21) % 21) * 1 + ((i / 1) % 21) * 21];" in back, back
    for params in (forward, backward):
        _check(tmp_path, params, np.random.default_rng(2), repeats=4)


def _batched(W, c, xs):
    """A batched dot_general (batch axis 0) with a transposed operand, a broadcast along a
    middle axis, reductions over two axes: every index map of the kernel at uneven sizes."""
    import plax.numpy as jnp
    from plax import lax

    def body(c, x):                                        # c (3, 7), x (3, 5), W (3, 7, 5)
        y = jnp.einsum("bk,bjk->bj", x, W)                 # batch, contraction over 5
        z = jnp.transpose(c + y)[:, :, None] * x[None, :, 1:3].transpose(0, 1, 2)  # (7, 3, 2)
        s = z.sum(axis=(0, 2))                             # (3,)
        m = jnp.max(jnp.abs(z), axis=1)                    # (7, 2)
        new = jnp.tanh(c * 0.5 + s[:, None] * 0.1 - m.sum() * 0.01)
        return new, (s, m.T)
    return lax.scan(body, c, xs)


@needs_cxx20
def test_reverse_pytree_carry_and_index_maps_with_a_block_of_threads(tmp_path):
    (many,) = _scans(_many, *_many_args(k=5, steps=11, seed=3))
    plan = _check(tmp_path, many, np.random.default_rng(4), repeats=4)
    assert {"broadcast_in_dim", "transpose", "dynamic_slice", "dot_general", "reduce_max",
            "rev"} <= set(plan.primitives)
    rng = np.random.default_rng(5)
    args = (rng.normal(size=(3, 7, 5)).astype(np.float32), rng.normal(size=(3, 7)).astype(np.float32),
            rng.normal(size=(6, 3, 5)).astype(np.float32))
    (batched,) = _scans(_batched, *args)
    plan = _check(tmp_path, batched, np.random.default_rng(6), repeats=4)
    assert {"dot_general", "transpose", "broadcast_in_dim", "reduce_sum", "reduce_max"} <= set(plan.primitives)


@needs_cxx20
@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_xs_none_with_a_block_of_threads(tmp_path, dtype):
    import plax
    from plax import lax

    def f(c):
        return lax.scan(lambda c, _: (plax.numpy.tanh(c[::-1] * 0.75 + 0.5), c.sum()), c, None,
                        length=7)
    with plax.config.override("jax_enable_x64", True):   # (float64 kept as it is)
        (params,) = _scans(f, np.ones(45, plax.numpy.dtype(dtype)))
        assert params["jaxpr"].jaxpr.invars[0].aval.dtype == plax.numpy.dtype(dtype)
        tol = 1e-12 if dtype == "float64" else 1e-2   # (float16: rounded after each operation)
        _check(tmp_path, params, np.random.default_rng(7), repeats=4, rtol=tol, atol=tol)


@needs_cxx20
def test_working_set_in_the_global_scratch_with_a_block_of_threads(tmp_path):
    import plax.numpy as jnp
    from plax import lax
    from plax_cupy import scan_kernel

    def f(P, c, xs):   # c (13, 101): every value 5 KiB, a dozen of them, the carry twice
        def body(c, x):
            a = jnp.transpose(c @ P)[::-1]                 # (101, 13), a transpose and a rev
            b = jnp.tanh(a * 0.5 + x[:, None])             # x (101,) broadcast
            d = jnp.exp(-b * b) + jnp.sin(a)
            e = jnp.transpose(d + b)[:, ::-1] + c * 0.25
            return e / (1.0 + jnp.abs(e).max(axis=1, keepdims=True)), e.sum(axis=0)
        return lax.scan(body, c, xs)
    rng = np.random.default_rng(8)
    (params,) = _scans(f, (rng.normal(size=(101, 101)) * 0.1).astype(np.float32),
                       rng.normal(size=(13, 101)).astype(np.float32),
                       rng.normal(size=(5, 101)).astype(np.float32))
    plan = _check(tmp_path, params, rng, repeats=3)
    assert plan.scratch_bytes > scan_kernel.SHARED_BYTES
    assert "ks0" not in plan.source and "* (float)k0[" in plan.source   # P read in place


def _forms_scans() -> list:
    """The scans of the pad/concatenate/gather/scatter/argmax/cumulative body and of its
    gradient."""
    import plax
    (table, _), (v0, _), xs = _forms_args()
    return _scans(_forms, *_forms_args()) + _scans(plax.grad(_forms_loss, argnums=(0, 1, 2)), table, v0, xs)


@needs_cxx20
def test_pad_gather_scatter_argmax_cumulative_with_a_block_of_threads(tmp_path):
    forms = _forms_scans()
    assert len(forms) == 3
    plan = _check(tmp_path, forms[0], np.random.default_rng(9), repeats=2)
    assert {"pad", "concatenate", "stack", "split", "gather", "scatter-add", "scatter",
            "scatter-max", "argmax", "argmin", "cumsum", "cumprod", "cummax", "cumlogsumexp",
            "sort"} <= set(plan.primitives)
    # the gradient's reverse scan (pads, scatter-adds, empty values); its forward one is
    # audited by test_every_phase_is_fenced (a build each costs ~1.5 CPU-seconds)
    plan = _check(tmp_path, forms[2], np.random.default_rng(10), repeats=1)
    assert {"pad", "scatter-add"} <= set(plan.primitives)


def _step_code(source: str) -> str:
    """The body of the step loop."""
    step = source[source.index("for (long long s = 0;"):]
    return step[:step.index("\n  }\n")]


def _bodies() -> list:
    """The scans of this file's bodies (the RNN's forward and gradient scans with ``W``
    staged, straight and transposed; many primitives; the batched contraction)."""
    import plax
    rng = np.random.default_rng(5)
    return (_scans(_rnn, *_rnn_args()) + _scans(plax.grad(_rnn_loss), *_rnn_args())
            + _scans(_many, *_many_args(k=5, steps=11, seed=3))
            + _scans(_batched, *(rng.normal(size=s).astype(np.float32)
                                 for s in ((3, 7, 5), (3, 7), (6, 3, 5))))
            + _forms_scans())


@requires_nvrtc
def test_staged_sources_compile_with_nvrtc():
    from plax_cupy import nvrtc, scan_kernel
    for params in _bodies():
        nvrtc.compile_ptx(scan_kernel.plan_scan(params).source, "scan.cu",
                          options=nvrtc.NVRTC_CHECK_OPTIONS)


def test_every_phase_is_fenced():
    """The audit, on the generated source (independently of how the generator decides): walking
    a step's phases and barriers in order, no phase reads an element other than ``i`` (another
    thread's: element ``i`` of every phase is thread ``i % blockDim.x``'s) of an array some
    phase wrote since the last barrier; phases write only element ``i`` of their arrays (and
    ``ys[t * n + i]``); the step ends with a barrier (the next step reads the carry at any
    element, and rewrites the slots this one read); the carry's initial copy and the staged
    constants are fenced before the loop; the step reads carry buffer ``s & 1`` and writes
    ``(s + 1) & 1``. The RNN needs one barrier a step (its phases read their own elements)."""
    from plax_cupy import scan_kernel
    bodies = _bodies()
    for params in bodies:
        plan = scan_kernel.plan_scan(params)
        code = _step_code(plan.source)
        assert code.rstrip().endswith("__syncthreads();"), code[-200:]
        dirty: set = set()
        phases = barriers = 0
        for piece in re.split(r"(__syncthreads\(\);)", code):
            if piece == "__syncthreads();":
                dirty.clear()
                barriers += 1
                continue
            for phase in re.split(r"\n    \{\n", piece)[1:]:
                phases += 1
                writes = re.findall(r"\b(\w+)\[([^\]]*)\] = ", phase)
                for name, index in writes:
                    assert index == "i" or (name.startswith("ys") and index.endswith("LL + i")), phase
                for name in dirty:
                    for index in re.findall(rf"\b{name}\[([^\]]*)\]", phase):
                        assert index == "i", f"{name}[{index}] read unfenced:\n{phase}"
                dirty |= {name for name, _ in writes}
        assert (phases, barriers) == (plan.phases, plan.barriers) and phases > 0
        before = plan.source[plan.source.index("cb0[i] = init0[i];"):plan.source.index("for (long long s = 0;")]
        assert "__syncthreads();" in before
        assert re.search(r"c0 = cb0 \+ \(s & 1\) \* \d+;", plan.source)
        assert re.search(r"cn0 = cb0 \+ \(\(s \+ 1\) & 1\) \* \d+;", plan.source)
    rnn = scan_kernel.plan_scan(bodies[0])
    assert (rnn.phases, rnn.barriers) == (3, 1)
