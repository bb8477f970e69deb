"""The samplers' multiply-add reaches the CUDA kernels as one ``fmaf`` (the ``fma`` primitive),
not as an emulation from plain operations; float16/bfloat16 as the exact odd-rounding helper.
Planned without a GPU (the generated source only)."""
from __future__ import annotations

import numpy as np

import plax
from plax import dtypes, random
from plax.lax.fused_multiply_add import fma

from kernel_source_util import clusters_of
from plax_cupy import codegen


def test_uniform_with_bounds_is_one_fused_kernel_calling_fmaf():
    jaxpr = plax.make_jaxpr(lambda k: random.uniform(k, (64,), minval=-1.0, maxval=3.0))(
        random.PRNGKey(0)).jaxpr
    clusters = clusters_of(jaxpr)
    assert len(clusters) == 1
    assert sum(len(c.eqns) for c in clusters) <= 20   # ~60 with the emulation
    source = codegen.plan_cluster(clusters[0]).source
    assert "fmaf(" in source


def test_half_types_round_to_odd_then_once():
    for d in (np.float16, dtypes.bfloat16):
        x = np.ones(8, d)
        (eqn,) = plax.make_jaxpr(fma)(x, x, x).jaxpr.eqns
        source = codegen.plan_equation(eqn).source
        round_fn = "plax_round_f16" if d == np.float16 else "plax_round_bf16"
        assert f"{round_fn}(plax_fma_odd_f32(" in source
