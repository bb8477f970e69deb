"""Multi-tensor kernels' vector path (``plax_cupy.codegen.plan_group``, issue 24), checked
without a GPU.

A group's members of at least ``VECTOR_MIN_ELEMENTS`` elements that have a vector path alone
(``codegen.VectorPlan``) take ``v`` elements a thread at once (a *unit*); the others one. Here:

* the emission: the kernel loops over units (``GroupKernel.widths``), checks each vectorised
  member's alignment once, and loads and stores its chunks whole; a group with no such member
  keeps the element loop;
* NVRTC compiles it without a warning (float32, float16 and float64 members), 128-bit accesses
  in the optimised PTX;
* on the simulated GPU (this file again, in a child process): one launch, every member's values
  bit for bit the NumPy backend's, each with a tail of ``n % v`` elements, and a misaligned view
  of a member's operand taking that member's scalar units.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import plax
from plax.core.jaxpr import Literal
from gpu_env import GPU_PROBLEM, requires_nvrtc
from kernel_source_util import groups_of
from plax_cupy import codegen
from test_simulated_streams import SIMULATED, run_file_on_simulated_gpu

on_a_gpu = pytest.mark.skipif(not SIMULATED and bool(GPU_PROBLEM),
                              reason="needs a GPU, real or simulated (test_on_the_simulated_gpu)")

#: the members: float32 above VECTOR_MIN_ELEMENTS with a tail of 1 (4 elements a unit), a small
#: float32 (units of one), float16 with a tail of 4 (8 a unit), float64 with a tail of 1 (2)
MEMBERS = [((257, 257), np.float32), ((8,), np.float32), ((65540,), np.float16),
           ((65537,), np.float64)]


def _sgd(params, grads):
    return [p - 0.25 * g for p, g in zip(params, grads)]


def _operands(seed=0):
    rng = np.random.default_rng(seed)
    return ([rng.normal(size=s).astype(d) for s, d in MEMBERS],
            [rng.normal(size=s).astype(d) for s, d in MEMBERS])


def _plan(seed=0):
    """The group's kernel, and its members' operands (NumPy: per member, one per input)."""
    params, grads = _operands(seed)
    with plax.config.override("jax_enable_x64", True):
        jaxpr = plax.make_jaxpr(_sgd)(params, grads).jaxpr
        (group,) = groups_of(jaxpr)
        plan = codegen.plan_group(group.members)
    value = {id(v): x for v, x in zip(jaxpr.invars, params + grads)}
    # (0.25 is a literal: a scalar parameter, or for float16 a rank-0 array)
    operands = [[np.asarray(inp.atom.val, inp.dtype) if isinstance(inp.atom, Literal)
                 else value[id(inp.atom)] for inp in member.inputs] for member in plan.members]
    return plan, operands


def test_big_members_take_units_of_a_vector():
    plan, _ = _plan()
    assert plan.widths == [4, 1, 8, 2]
    src = plan.source
    # units: 16513 (66049 / 4, rounded up) + 8 + 8193 + 32769
    assert "u < 57483LL" in src and 57483 == sum(-(-m.n // w) for m, w in zip(plan.members,
                                                                              plan.widths))
    # (m0_a0: the literal 0.25, a scalar; m0_a1, m0_a2: the gradient and the parameter)
    assert "const bool aligned0 = ((((unsigned long long)m0_a1 & 15u) |" in src
    assert "plax_vload<float, 4>(m0_a1_r, m0_a1 + e);" in src
    assert "plax_vstore<double, 2>(m3_o0 + e, m3_o0_r);" in src
    assert "for (long long i = e; i < e + 8 && i < 65540LL; ++i) plax_elem_m2(i," in src
    assert "aligned1" not in src      # (the small member: no vector path)
    # a group whose members are all below VECTOR_MIN_ELEMENTS keeps its element loop
    small = [np.ones(5, np.float32), np.ones(3, np.float32)]
    (group,) = groups_of(plax.make_jaxpr(_sgd)(small, small).jaxpr)
    small_plan = codegen.plan_group(group.members)
    assert small_plan.widths == [1, 1] and "plax_vload" not in small_plan.source


@requires_nvrtc
def test_group_vector_path_compiles_without_warnings():
    from plax_cupy import nvrtc
    from test_codegen_vector import assert_128_bit_accesses
    plan, _ = _plan()
    nvrtc.compile_ptx(plan.source, "group.cu", options=nvrtc.NVRTC_CHECK_OPTIONS)
    assert_128_bit_accesses(plan.source)


# ---------------------------------------------------------------- on the simulated GPU

@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    run_file_on_simulated_gpu(__file__, skipped=2)   # (this one, and NVRTC there)


def _put(xs):
    return [plax.device_put(x, plax.devices("gpu")[0]) for x in xs]


@on_a_gpu
def test_group_values_in_one_launch(monkeypatch):
    import plax_cupy
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    params, grads = _operands(1)
    with plax.config.override("jax_enable_x64", True):
        want = plax.jit(_sgd, backend="numpy")(params, grads)
        f = plax.jit(_sgd, backend="cupy")
        args = (_put(params), _put(grads))
        f(*args)
        with plax_cupy.count() as c:
            got = f(*args)
    assert (c.launches, c.host_fallbacks) == (1, 0), c
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@on_a_gpu
def test_misaligned_member_takes_scalar_units():
    import cupy
    from plax_cupy.backend import GroupLauncher
    backend = plax.plugins.registry().get_backend("cupy")
    plan, operands = _plan(2)
    with plax.config.override("jax_enable_x64", True):
        want = plax.jit(_sgd, backend="numpy")(*_operands(2))
    buffers, where = [], []
    for k, (member, ops) in enumerate(zip(plan.members, operands)):
        where.append([])
        for inp, x in zip(member.inputs, ops):
            where[-1].append(len(buffers))
            if inp.kind == "literal":
                buffers.append(x[()])
            elif k == 0:   # member 0's arrays as views 4 bytes into larger buffers: misaligned
                wide = cupy.asarray(np.concatenate([[0], x.ravel()]).astype(x.dtype))
                buffers.append(wide[1:].reshape(x.shape))
            else:
                buffers.append(cupy.asarray(x))
    outs = GroupLauncher(plan, backend, where)(*buffers)
    for k, (g, w) in enumerate(zip(outs, want)):
        np.testing.assert_array_equal(cupy.asnumpy(g), np.asarray(w), err_msg=str(k))
