"""Fewer launches on the simulated GPU (issue 24's last counts): split reductions and
multi-tensor kernels, each one launch.

* A reduction split over several blocks per output is one launch: each block stores its
  partial, fences, counts itself done on its output's tagged counter, and the last block
  combines the partials in chunk order. Values against NumPy in float64; results bit for bit
  the same whichever block finishes last (the simulation runs the blocks forward, reversed and
  shuffled); a CUDA graph replaying the launch on new inputs stays right (the last block leaves
  the counter clear); a block that counts itself done without a fence is caught (the
  simulation models the fence), so the check can fail.
* Independent small elementwise clusters ready at one point -- an SGD update of several
  parameters of different shapes -- are one multi-tensor kernel
  (:func:`plax.lowering.horizontal_groups`, ``plax_cupy.codegen.plan_group``): one launch,
  values equal to the NumPy backend's; a member above ``codegen.HORIZONTAL_MAX_ELEMENTS`` keeps
  its own launch.

:func:`test_on_the_simulated_gpu` runs this file again in a child process with
``-p fake_cupy_plugin``; the other tests skip here.
"""
from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from gpu_env import requires_nvrtc
from test_simulated_streams import SIMULATED, on_simulated_gpu, run_file_on_simulated_gpu


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    run_file_on_simulated_gpu(__file__, skipped=2)   # (this one and the NVRTC check skip there)


def _put(x):
    import plax
    return plax.device_put(x, plax.devices("gpu")[0])


def _row_sums(x):
    import plax.numpy as jnp
    return jnp.sum(jnp.exp(x) * 2.0, axis=1), jnp.max(x, axis=1)


@on_simulated_gpu
def test_split_reduction_is_one_launch_whatever_block_finishes_last(monkeypatch):
    import fake_cupy
    import plax
    import plax_cupy
    from plax_cupy import codegen
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    x = np.random.default_rng(0).normal(size=(3, 5000)).astype(np.float32)
    # (the simulated GPU has 2 multiprocessors: 3 blocks per output)
    assert codegen.reduction_launch(3, 5000, 2)[2] == 3
    f = plax.jit(_row_sums, backend="cupy")
    xd = _put(x)
    results = {}
    for order in ("forward", "reverse", "shuffled"):
        monkeypatch.setattr(fake_cupy, "BLOCK_ORDER", order)
        with plax_cupy.count() as c:
            out = f(xd)
        assert (c.launches, c.host_fallbacks) == (1, 0), c
        results[order] = [np.asarray(o) for o in out]
    s, m = results["forward"]
    np.testing.assert_allclose(s, (np.exp(x.astype(np.float64)) * 2).sum(1), rtol=1e-5)
    np.testing.assert_array_equal(m, x.max(1))
    for order, got in results.items():  # the combine's order is fixed, not the blocks'
        for g, w in zip(got, results["forward"]):
            np.testing.assert_array_equal(g.view(np.uint32), w.view(np.uint32), err_msg=order)


@on_simulated_gpu
def test_split_reduction_replayed_as_a_graph_on_new_inputs():
    import fake_cupy
    import plax
    import plax.numpy as jnp
    f = plax.jit(lambda x: jnp.sum(x, axis=1) * 3.0 + jnp.max(x))   # two launches: a graph
    rng = np.random.default_rng(1)
    xs = [rng.normal(size=(2, 6000)).astype(np.float32) for _ in range(3)]
    graphs = fake_cupy.COUNTS.get("graph_launches", 0)
    for x in [xs[0], xs[0], xs[1], xs[2], xs[1]]:   # plain, capture, then replays
        got = np.asarray(f(_put(x)))
        want = x.astype(np.float64).sum(1) * 3 + x.max()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    assert fake_cupy.COUNTS.get("graph_launches", 0) - graphs >= 3


@on_simulated_gpu
def test_a_count_without_a_fence_is_caught(monkeypatch):
    """The negative control: the kernel's fence removed, the simulated launch fails."""
    import fake_cupy
    import plax
    from plax_cupy import codegen
    plan_cluster = codegen.plan_cluster

    def unfenced(cluster, **kw):
        plan = plan_cluster(cluster, **kw)
        fence = "        __threadfence();  // the partials visible before the count says they are\n"
        assert fence in plan.source
        plan.source = plan.source.replace(fence, "")
        return plan
    monkeypatch.setattr(codegen, "plan_cluster", unfenced)
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    x = np.random.default_rng(2).normal(size=(3, 5000)).astype(np.float32)
    with pytest.raises(fake_cupy.UnfencedCountError, match="without a __threadfence"):
        plax.jit(lambda v: _row_sums(v), backend="cupy")(_put(x))   # (a program of its own)


def _sgd(params, grads):
    return [p - 0.01 * g for p, g in zip(params, grads)]


def _sgd_args(seed=3):
    rng = np.random.default_rng(seed)
    shapes = [(20, 8), (8,), (8, 8), (8,), (8, 3), (3,)]
    return ([rng.normal(size=s).astype(np.float32) for s in shapes],
            [rng.normal(size=s).astype(np.float32) for s in shapes])


@on_simulated_gpu
def test_parameter_updates_are_one_multi_tensor_launch(monkeypatch):
    import plax
    import plax_cupy
    from plax_cupy import codegen
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    params, grads = _sgd_args()
    want = plax.jit(_sgd, backend="numpy")(params, grads)
    args = (_put(params), _put(grads))
    for bound, launches in ((codegen.HORIZONTAL_MAX_ELEMENTS, 1), (100, 2), (0, 6)):
        # (100: the [20, 8] update is above it, its own launch; 0: no groups)
        monkeypatch.setattr(codegen, "HORIZONTAL_MAX_ELEMENTS", bound)
        f = plax.jit(lambda p, g: _sgd(p, g), backend="cupy")
        f(*args)
        with plax_cupy.count() as c:
            got = f(*args)
        assert (c.launches, c.host_fallbacks) == (launches, 0), (bound, c)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@on_simulated_gpu
def test_an_emitter_subclass_sets_the_horizontal_bound(monkeypatch):
    """A subclass of the CuPy emitter setting ``horizontal_max_elements`` (the attribute the
    plugin guide documents) changes the grouping, ``codegen.HORIZONTAL_MAX_ELEMENTS`` left as
    it is; the emitter itself reads that constant (its default)."""
    import plax
    import plax_cupy
    from plax_cupy import codegen, emitter
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    assert emitter.CupyEmitter.horizontal_max_elements == codegen.HORIZONTAL_MAX_ELEMENTS > 160

    class Bounded(emitter.CupyEmitter):
        horizontal_max_elements = 100   # the [20, 8] update above it: its own launch

    monkeypatch.setattr(emitter, "CupyEmitter", Bounded)   # (what the backend compiles with)
    params, grads = _sgd_args(4)
    want = plax.jit(_sgd, backend="numpy")(params, grads)
    args = (_put(params), _put(grads))
    f = plax.jit(lambda p, g: _sgd(p, g), backend="cupy")
    f(*args)
    with plax_cupy.count() as c:
        got = f(*args)
    assert (c.launches, c.host_fallbacks) == (2, 0), c
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.skipif(SIMULATED, reason="compiles with the real NVRTC: run outside the simulation")
@requires_nvrtc
def test_published_partials_are_read_a_word_at_a_time():
    # the combining block reads the other blocks' partials past the L1 cache (volatile
    # loads, codegen.PREAMBLE's plax_read_published): one 32-bit load per word of a 4- or
    # 8-byte value (was one per byte), a byte at a time only for a 2-byte one
    from plax_cupy import codegen, nvrtc
    types = ("float", "double", "plax_c64", "plax_c128", "long long", "unsigned short")
    params = ", ".join(f"const {t}* p{i}, {t}* o{i}" for i, t in enumerate(types))
    reads = " ".join(f"o{i}[0] = plax_read_published(p{i});" for i in range(len(types)))
    source = codegen.PREAMBLE + f'extern "C" __global__ void plax_reads({params}) {{ {reads} }}'
    ptx = nvrtc.compile_ptx(source, "published.cu",
                            options=("-arch=compute_80",) + nvrtc.DEVICE_OPTIONS)
    loads = re.findall(r"ld\.volatile\.global\.(\w+)", ptx)
    assert sorted(loads) == ["u32"] * (1 + 2 + 2 + 4 + 2) + ["u8"] * 2, loads
    nvrtc.compile_ptx(source, "published.cu", options=nvrtc.NVRTC_CHECK_OPTIONS)  # no warning
