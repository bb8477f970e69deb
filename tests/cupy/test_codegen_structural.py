"""Structural fusion's kernels (``plax_cupy.codegen_structural``) checked without a GPU: the
PRNG in both threefry modes, concatenations of slices and reads through pad, rev,
transpose and gather plan as one kernel each, and NVRTC
compiles every such kernel (the scalar loop and the vector path) without an error or a
warning. Their values run on the simulated GPU (``test_kernels_b_random.py``)."""
from __future__ import annotations

import re

import numpy as np

import plax
from plax import numpy as jnp
from plax import lax, random
from gpu_env import requires_nvrtc
from kernel_source_util import batch_source, clusters_of, units_of
from plax.lowering import spliced_calls
from plax_cupy import codegen


def _programs() -> list:
    """``(name, fn, partitionable, example arguments)`` of programs holding structural reads."""
    key = np.asarray(random.PRNGKey(1))
    x = np.linspace(-1, 1, 9).astype(np.float32)
    big = codegen.VECTOR_MIN_ELEMENTS + 5   # (the vector path, and a tail)
    return [
        ("normal, original", lambda k: random.normal(k, (999,)), False, (key,)),
        ("normal vector path, original", lambda k: random.normal(k, (big,)), False, (key,)),
        ("bits u64, original", lambda k: random.bits(k, (5,), jnp.uint64), False, (key,)),
        ("normal bf16 2-D, original", lambda k: random.normal(k, (7, 3), jnp.bfloat16), False, (key,)),
        ("split, original", lambda k: random.split(k, 7), False, (key,)),
        ("split, partitionable", lambda k: random.split(k, 7), True, (key,)),
        ("fold_in", lambda k: random.fold_in(k, 3), True, (key,)),
        ("concatenate of slices", lambda x: jnp.concatenate(
            [jnp.exp(x), jnp.sin(x[::2]) * 2.0, x[:2] + 1.0])[1:-1] * 3.0, True, (x,)),
        ("concatenate along an inner axis", lambda x: jnp.concatenate(
            [jnp.reshape(x, (3, 3)), jnp.reshape(jnp.cos(x), (3, 3))[:, :1]], axis=1), True, (x,)),
        ("pad, interior and crops", lambda x: lax.pad(
            jnp.reshape(jnp.exp(x), (3, 3)), 1.5, ((1, -1, 2), (-2, 3, 0))) * 2.0, True, (x,)),
        ("pad crop only", lambda x: lax.pad(jnp.sin(x), 0.0, ((-2, -3, 0),)) + 1.0, True, (x,)),
        ("rev of a transpose 3-D", lambda x: jnp.flip(jnp.transpose(
            jnp.reshape(jnp.tanh(x), (1, 3, 3)), (2, 0, 1)), (0, 2)) + 1.0, True, (x,)),
        ("pad int8 rank 4", lambda x: lax.pad(
            jnp.reshape(x.astype(jnp.int8) * 3, (1, 3, 1, 3)), jnp.int8(7),
            ((0, 1, 0), (1, 0, 1), (0, 0, 0), (-1, 2, 0))) + jnp.int8(1), True, (x,)),
        ("dynamic_slice, int32 starts", lambda x: lax.dynamic_slice(
            jnp.reshape(jnp.exp(x), (3, 3)), (jnp.int32(1), jnp.int32(-1)), (2, 2)) * 2.0,
         True, (x,)),
        ("dynamic_slice, unsigned start", lambda x: lax.dynamic_slice(
            jnp.cos(x), (jnp.uint32(3_000_000_000),), (5,)) + 1.0, True, (x,)),
        ("gather, index normalization", lambda x: jnp.reshape(x, (3, 3))[
            jnp.array([2, -1, 0, 4])] * 2.0, True, (x,)),
        ("gather fill f16, fused operand", lambda x: jnp.exp(jnp.reshape(x, (3, 3))).astype(
            jnp.float16).at[:, jnp.array([0, 5], jnp.uint32)].get(mode="fill", fill_value=2)
            + jnp.float16(1), True, (x,)),
        ("gather two start axes, int8 indices", lambda x: jnp.reshape(x, (3, 3))[
            jnp.array([0, 2], jnp.int8), jnp.array([1, -1], jnp.int8)] - 1.0, True, (x,)),
        ("gather batching axes, take_along_axis", lambda x: jnp.take_along_axis(
            jnp.reshape(x, (3, 3)), (jnp.reshape(x, (3, 3)) > 0).astype(jnp.int32), axis=1)
            * 2.0, True, (x,)),
        ("transpose vector path", lambda v: jnp.transpose(
            jnp.reshape(jnp.exp(v), (-1, 8))) * 2.0, True,
         (np.linspace(-1, 1, 8 * (codegen.VECTOR_MIN_ELEMENTS // 8 + 3)).astype(np.float32),)),
    ]


def _clusters(fn, partitionable: bool, args) -> tuple:
    saved = plax.config.read("jax_threefry_partitionable")
    plax.config.update("jax_threefry_partitionable", partitionable)
    try:
        jaxpr = spliced_calls(plax.make_jaxpr(fn)(*args).jaxpr)
    finally:
        plax.config.update("jax_threefry_partitionable", saved)
    return clusters_of(jaxpr), units_of(jaxpr)


def test_structural_programs_plan_one_kernel_each():
    for name, fn, partitionable, args in _programs():
        clusters, units = _clusters(fn, partitionable, args)
        assert len(units) == 1 and len(clusters) == 1, (name, units)
        plan = codegen.plan_cluster(clusters[0])
        if "original" in name and "split" not in name:
            # one hash per element: the two words' pieces share one evaluation (no branch)
            assert plan.elem_source.count("plax_threefry_elem(") == 1, name


@requires_nvrtc
def test_structural_kernels_compile_with_nvrtc_without_warnings():
    from plax_cupy import nvrtc
    plans = []
    for name, fn, partitionable, args in _programs():
        clusters, _ = _clusters(fn, partitionable, args)
        plans += [codegen.plan_cluster(c) for c in clusters]
    assert any(p.vector is not None for p in plans)
    # (one translation unit each: the kernels holding a hash each define its helper)
    hashing = [p for p in plans if "plax_threefry_elem(" in p.source]
    others, _ = batch_source([p.source for p in plans if p not in hashing])
    for k, source in enumerate([others] + [p.source for p in hashing]):
        ptx = nvrtc.compile_ptx(source, f"structural{k}.cu")   # (a warning is an error)
        assert ".entry plax_elementwise" in ptx


@requires_nvrtc
def test_fused_gather_with_uint64_starts_compiles_without_warnings():
    # starts of 2^63 and beyond compared as unsigned before the clamp, in both modes
    from plax.lax.slicing import GatherDimensionNumbers
    from plax_cupy import nvrtc
    dn = GatherDimensionNumbers(offset_dims=(0, 2), collapsed_slice_dims=(1,), start_index_map=(1,))
    with plax.config.override("jax_enable_x64", True):
        for mode in ("clip", "fill"):
            clusters, _ = _clusters(lambda x, u: lax.gather(x, u, dn, (4, 1, 6), mode=mode) + 1.0,
                                    True, (np.ones((4, 5, 6)), np.ones((5, 1), np.uint64)))
            (plan,) = [codegen.plan_cluster(c) for c in clusters]
            assert re.search(r"\(unsigned long long\)\(\w+\) > 4ULL \? 4LL", plan.elem_source)
            assert mode == "clip" or re.search(r"\(\w+ <= 4ULL\)", plan.elem_source)
            assert ".entry plax_elementwise" in nvrtc.compile_ptx(plan.source, f"gather_{mode}.cu")
