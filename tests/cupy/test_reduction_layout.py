"""How a generated reduction kernel (``plax_reduce``) spreads its outputs over a block
(:func:`plax_cupy.codegen.reduction_layout`, issue 24): the launch configurations of the MLP
step's reductions on an H200, and the kernel with a real block of threads.

On the H200 the MLP step (784-2048-2048-10, batch 4096) took 1.19x JAX. Its reductions were
a block of 256 threads per output: the loss's four row reductions of 10 elements each left 246
of a block's threads idle and paid a full tree for each of 4096 rows, and the two hidden
bias gradients (column sums of 4096 x 2048) read a column per block, each warp load touching
32 rows (32 sectors for 128 useful bytes). Now column sums put 32 consecutive outputs on a
warp and short rows share a block. The simulated GPU runs one thread per block, so the kernel
is also built here for the host with a block of ``std::thread``\\ s (as
``test_kernels_rows.py`` does) and run with 256 and 64 threads (each thread then covers
several of the block's slots), one or several blocks per output group, against NumPy.
"""
from __future__ import annotations

import numpy as np
import pytest

from test_kernels_rows import _kernels, needs_cxx20

H200_SMS = 132


def _launch(shape, axes):
    from plax_cupy import codegen
    opb, fastest = codegen.reduction_layout(shape, axes)
    n_red = int(np.prod([shape[a] for a in axes]))
    n_out = int(np.prod(shape)) // n_red
    grid, block, bpo = codegen.reduction_launch(n_out, n_red, H200_SMS, outputs_per_block=opb)
    return opb, fastest, grid, block, bpo


def test_mlp_step_reductions_fill_an_h200():
    from plax_cupy import codegen
    resident = H200_SMS * 2048                 # threads an H200 holds at once
    # the hidden bias gradients: column sums of 4096 x 2048, 32 outputs a warp, the 4096 rows
    # split over 17 blocks a group: 1088 blocks, 31 rows a thread (was 2048 blocks, a column
    # each, a warp's load over 32 rows)
    assert _launch((4096, 2048), (0,)) == (32, True, 1088, 256, 17)
    # the loss's row reductions (4096 rows of 10): 16 threads a row, 16 rows a block
    assert _launch((4096, 10), (1,)) == (16, False, 256, 256, 1)
    # the output bias gradient (10 columns of 4096): one group of 16 outputs, 32 blocks
    assert _launch((4096, 10), (0,)) == (16, True, 32, 256, 32)
    # long rows keep a block per output (the reduced lanes take the block)
    assert _launch((4096, 512), (1,))[:2] == (1, False)
    assert _launch((10**8,), (0,))[:2] == (1, False)
    # the column sums' threads cover the device and none loops over more than 32 rows
    opb, _, grid, block, bpo = _launch((4096, 2048), (0,))
    assert grid * block >= resident
    assert -(-4096 // (bpo * block // opb)) <= 32
    # a middle axis reduced: not a column layout (its outputs are not consecutive)
    assert codegen.reduction_layout((8, 300, 5), (1,)) == (1, False)
    with pytest.raises(ValueError):
        codegen.reduction_launch(10, 10, outputs_per_block=3)


def _reduce_kernel(fn, x):
    """The planned kernel of ``fn(x)``'s one fusion cluster (a multiply and a reduction)."""
    import plax
    from plax_cupy import codegen
    from kernel_source_util import clusters_of
    (cluster,) = clusters_of(plax.make_jaxpr(fn)(x).jaxpr)
    return codegen.plan_cluster(cluster)


def _host_build(tmp_path, plan):
    """``plax_reduce`` of ``plan`` built for the host (:func:`test_kernels_rows._kernels`; the
    source's ``#ifndef PLAX_HOST`` around the kernel lifted): ``fn(grid, threads, *args)``."""
    source = plan.source.replace('#ifndef PLAX_HOST\nextern "C" __global__ void plax_reduce(',
                                 '#if 1\nextern "C" __global__ void plax_reduce(')
    return _kernels(tmp_path, source, preamble=False)["plax_reduce"]


@needs_cxx20
@pytest.mark.parametrize("shape,axes,op", [((300, 70), (0,), "sum"),    # columns, 3 groups
                                           ((37, 10), (1,), "max"),      # short rows, 16 a block
                                           ((3, 5000), (1,), "sum")])    # long rows, split
def test_reduce_kernel_with_a_block_of_threads(tmp_path, shape, axes, op):
    from plax import lax
    from plax_cupy import codegen
    rng = np.random.default_rng(4)
    x = rng.normal(size=shape).astype(np.float32)
    reduce_ = lax.reduce_sum if op == "sum" else lax.reduce_max
    plan = _reduce_kernel(lambda v: reduce_(v * np.float32(2), axes=axes), x)
    opb = codegen.reduction_layout(shape, axes)[0]
    assert plan.outputs_per_block == opb and f"OPB = {opb}," in plan.source
    run = _host_build(tmp_path, plan)
    want = (x.astype(np.float64) * 2).sum(axis=axes) if op == "sum" else (x * 2).max(axis=axes)
    (_, red), = plan.reductions
    for sms in (1, 2):   # one block per group, and several (a split finished by the last)
        grid, block, bpo = codegen.reduction_launch(plan.n_out, plan.n_red, sms,
                                                    outputs_per_block=opb)
        for threads in (256, 64):
            out = np.full(plan.n_out, 7, np.float32)
            partials = np.full(plan.n_out * bpo, 7, red.acc)
            done = np.zeros(plan.n_out, np.uint64)
            operands = [float(inp.value) if inp.kind == "literal" else x for inp in plan.inputs]
            run(grid, threads, *operands, partials, out, plan.n_out, plan.n_red, bpo, done, 5)
            np.testing.assert_allclose(out, want.reshape(-1), rtol=1e-6,
                                       err_msg=f"{sms} SMs: grid {grid}, bpo {bpo}, {threads}")
            assert not done.any()   # the last block of each group cleared its counter
        if plan.n_out >= 70:
            assert bpo > 1 or sms == 1
