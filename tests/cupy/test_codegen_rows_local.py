"""Row-local clusters (issue 24): softmax, log-softmax, layer norm and ``x / norm(x)`` as one
kernel with a block per row (``plax.lowering.FusionOptions.row_local``, ``Cluster.row_axes``;
``plax_cupy.codegen_rows_local``).

* The fusion rule (CPU side): which programs form a row-local cluster (reductions over trailing
  axes, rows of 2 to ``codegen.ROW_LOCAL_MAX_ELEMENTS`` elements), what stays apart (a row one
  past the cap, a leading axis reduced), and that the NumPy backend, which does not ask, is
  unaffected (the Numba backend asks too, for longer rows).
* The geometry: rows of up to 32 share warps (lane groups, shuffles), longer ones a block a
  row; softmax up to the register bound (8 elements a thread) loads ``x`` once and keeps
  ``exp(x - max)`` in registers, one past it re-reads; ``one_hot``'s iota (and under ``grad``
  the ``one_hot`` half of the gradient) joins a cross-entropy's group.
* Values: the surveyed programs and their gradients over rows of 2, 3, 7, 15, 16, 17, 31, 32,
  33, 1000, 2048 and 2049 elements, rank 1 to 3, float32, float16, bfloat16, float64 and int32,
  keepdims and not, an input broadcast over the rows (layer norm's scale), NaN and +-inf rows,
  a one_hot cross-entropy's gradient (labels out of range too): ``plax_rows`` built for the
  host with a block of ``std::thread``\\ s (a shuffle is an exchange at the block barrier; all
  kernels in one build), two blocks taking the rows in turn, against the NumPy backend (floats
  within the float-sum tolerances, integers bit for bit).
* NVRTC compiles them without a warning, with no local memory (held values are registers)
  and with butterfly shuffles (where NVRTC is available).
* On the simulated GPU (this file again in a child process): softmax, layer norm, softmax
  over rows of 10 (lane groups) and the one_hot cross-entropy's gradient are one launch; a row
  one past the cap keeps today's plan; values equal to the NumPy backend's. ``grad`` of a
  linear model's per-example cross-entropy under ``vmap`` (``logp[y]``, ``take_along_axis``,
  ``one_hot``) is 4 launches (the products, the row-local kernel, the bias gradient's column
  sums), ``logp[y]``'s values bit for bit those with the row-local fusion off, and right where
  the generator declines the group. ``take_along_axis`` with 3 labels a row and its gradient
  are one launch each, bit for bit the values with the fusion off.
"""
from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

from gpu_env import requires_nvrtc
from test_codegen_arg_reductions import _launches, _put
from test_kernels_rows import _kernels, needs_cxx20
from test_simulated_streams import SIMULATED, on_simulated_gpu, run_file_on_simulated_gpu
from plax_cupy import codegen

BF16 = np.dtype(ml_dtypes.bfloat16)
cpu_side = pytest.mark.skipif(SIMULATED, reason="checked in the parent process")


def _programs():
    """``{name: fn}``: the row-local programs the tests cover."""
    import plax
    from plax import numpy as jnp

    def layer_norm(x):
        mean = jnp.mean(x, -1, keepdims=True)
        var = jnp.mean((x - mean) ** 2, -1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5)

    def layer_norm_flat(x, g):   # (no keepdims: kept-shaped values, a scale over the rows)
        mean = jnp.mean(x, -1)
        centred = x - mean[..., None]
        return centred * plax.lax.rsqrt(jnp.mean(centred * centred, -1) + 1e-5)[..., None] * g

    def xent_one_hot(x, labels):   # (one_hot's iota read through a broadcast)
        onehot = plax.nn.one_hot(labels, x.shape[-1], dtype=x.dtype)
        return -jnp.mean(jnp.sum(plax.nn.log_softmax(x, axis=-1) * onehot, -1))

    def pick_one_hot(x, labels):   # (the iota before the reduction: it joins the group too)
        onehot = plax.nn.one_hot(labels, x.shape[-1], dtype=x.dtype)
        return x - jnp.sum(x * onehot, -1, keepdims=True) + onehot

    def xent_take(x, labels, mode=None):   # (the classic loss: a gather of one element a row)
        logp = plax.nn.log_softmax(x, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=-1, mode=mode))

    def pick_take(x, labels, mode=None):   # (the gathered element read by the row again)
        picked = jnp.take_along_axis(plax.nn.log_softmax(x, axis=-1), labels[..., None], -1,
                                     mode=mode)
        return x - picked

    def xent_take_labels(x, labels, mode=None):   # (k labels a row: top-k, multi-label)
        logp = plax.nn.log_softmax(x, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, labels, axis=-1, mode=mode))

    def per_example(pick):   # (grad of the mean of a per-example loss under vmap)
        def loss(x, labels):
            return jnp.mean(plax.vmap(lambda r, y: -pick(plax.nn.log_softmax(r), y))(x, labels))
        return plax.grad(loss)

    return {
        "softmax": lambda x: plax.nn.softmax(x, axis=-1),
        "softmax2": lambda x: plax.nn.softmax(x, axis=(-2, -1)),
        "log_softmax": lambda x: plax.nn.log_softmax(x, axis=-1),
        "layer_norm": layer_norm,
        "layer_norm_flat": layer_norm_flat,
        "normalize": lambda v: v / jnp.linalg.norm(v),
        "int_rows": lambda x: x * jnp.sum(x, -1, keepdims=True) - jnp.max(x, -1)[..., None],
        "grad_softmax": plax.grad(lambda x: jnp.sum(plax.nn.softmax(x, axis=-1) ** 2)),
        "grad_layer_norm": plax.grad(lambda x, y: jnp.sum(layer_norm(x) * y)),
        "grad_log_softmax": plax.grad(lambda x, w: jnp.sum(plax.nn.log_softmax(x, axis=-1) * w)),
        "xent_one_hot": xent_one_hot,
        "pick_one_hot": pick_one_hot,
        "grad_xent_one_hot": plax.grad(xent_one_hot),
        "xent_take": xent_take,
        "grad_xent_take": plax.grad(xent_take),   # (the gather's transpose: a scatter-add)
        "pick_take": pick_take,
        "vmap_pick_take": plax.vmap(pick_take),   # (batching dims (0, 1))
        "grad_xent_take_clip": plax.grad(lambda x, l: xent_take(x, l, "clip")),
        "pick_take_clip": lambda x, l: pick_take(x, l, "clip"),   # (out of range: clamped)
        # k labels a row: the picks (out of range: NaN, clamped) and the gradient's scatter
        "take_labels": lambda x, l: jnp.take_along_axis(plax.nn.log_softmax(x, axis=-1), l, -1),
        "take_labels_clip": lambda x, l: jnp.take_along_axis(x - jnp.max(x, -1, keepdims=True),
                                                             l, -1, mode="clip"),
        "grad_xent_take_labels": plax.grad(xent_take_labels),
        # per-example losses under vmap: the zeros row and the cotangent are broadcasts of
        # other shapes; logp[y]'s gather and scatter keep their window of one
        "grad_vmap_xent_index": per_example(lambda logp, y: logp[y]),
        "grad_vmap_xent_take": per_example(
            lambda logp, y: jnp.take_along_axis(logp, y[None], -1)[0]),
        "grad_vmap_xent_one_hot": per_example(
            lambda logp, y: jnp.sum(logp * plax.nn.one_hot(y, logp.shape[-1], dtype=logp.dtype))),
        # the gathered element itself, through a select (a copy): its bits
        "pick_bits": lambda x, l: jnp.where(x > jnp.max(x, -1, keepdims=True), 0.0,
                                            jnp.take_along_axis(x, l[:, None], -1)),
    }


def _linear_model_grad(pick: str):
    """``grad`` with respect to ``(w, b)`` of the mean of a per-example softmax cross-entropy
    of a linear model under ``jax.vmap(loss, in_axes=(None, 0, 0))``, the label picked by
    ``logp[y]`` (``"index"``), ``take_along_axis`` (``"take"``) or a ``one_hot`` product."""
    import plax
    from plax import numpy as jnp
    picks = {"index": lambda logp, y: logp[y],
             "take": lambda logp, y: jnp.take_along_axis(logp, y[None], -1)[0],
             "one_hot": lambda logp, y: jnp.sum(logp * plax.nn.one_hot(y, logp.shape[-1]))}

    def loss(params, x, y):
        w, b = params
        return -picks[pick](plax.nn.log_softmax(x @ w + b), y)

    return plax.grad(lambda p, x, y: jnp.mean(plax.vmap(loss, in_axes=(None, 0, 0))(p, x, y)))


def _linear_model_args(n: int, classes: int, features: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    w = np.round(rng.standard_normal((features, classes)), 2).astype(np.float32)
    b = np.round(rng.standard_normal(classes), 2).astype(np.float32)
    x = np.round(rng.standard_normal((n, features)), 2).astype(np.float32)
    return [(w, b), x, _labels((n, classes))]


#: (program, shape, dtype): rows of 7, 32 and 1000 elements, rank 1 to 3, every float type
CASES = [("softmax", (5, 7), np.dtype(np.float32)), ("softmax2", (2, 3, 5), np.dtype(np.float32)),
         ("log_softmax", (3, 32), np.dtype(np.float16)), ("layer_norm", (2, 1000), BF16),
         ("layer_norm_flat", (2, 3, 32), np.dtype(np.float32)),
         ("normalize", (1000,), np.dtype(np.float64)), ("int_rows", (4, 9), np.dtype(np.int32)),
         ("grad_softmax", (4, 7), np.dtype(np.float32)),
         ("grad_layer_norm", (3, 32), np.dtype(np.float32)),
         ("grad_log_softmax", (3, 7), np.dtype(np.float16)),
         # around the geometry's bounds: rows of 2, 3, 15, 16 (lane groups of 2 to 16 sharing
         # a warp; 5x8 rows of 16 over two blocks of 16 rows: the grid-stride loop's second
         # turn half live), 17, 31, 32 (a warp a row), 33 (a block a row), 2048 (the register
         # bound: 8 elements a thread) and 2049 (re-read)
         ("softmax", (3, 2), np.dtype(np.float32)), ("softmax", (5, 3), np.dtype(np.float64)),
         ("log_softmax", (4, 15), BF16), ("softmax", (5, 8, 16), np.dtype(np.float16)),
         ("layer_norm", (2, 17), np.dtype(np.float32)), ("int_rows", (3, 31), np.dtype(np.int32)),
         ("log_softmax", (2, 33), np.dtype(np.float32)),
         ("grad_log_softmax", (5, 16), np.dtype(np.float32)),
         ("grad_softmax", (2, 2048), np.dtype(np.float32)),
         ("softmax", (2, 2049), np.dtype(np.float32)),
         # one_hot's iota inside: class indices of a row, out-of-range labels (-1, C) too
         ("grad_xent_one_hot", (6, 10), np.dtype(np.float32)),
         ("grad_xent_one_hot", (3, 40), np.dtype(np.float16)),
         ("normalize", (10,), np.dtype(np.float32)),
         ("pick_one_hot", (3, 5, 12), np.dtype(np.float64)),   # (one row, its block's second group idle)
         # take_along_axis's gather and, under grad, its scatter-add within the row: labels at
         # the row's first and last element, -1, and out of range (C, -C-1: NaN, dropped)
         ("grad_xent_take", (6, 10), np.dtype(np.float32)),
         ("grad_xent_take", (6, 33), np.dtype(np.float16)),
         ("grad_xent_take", (4, 10), BF16), ("grad_xent_take", (2, 2049), np.dtype(np.float32)),
         ("pick_take", (6, 10), np.dtype(np.float64)),
         ("vmap_pick_take", (2, 3, 33), np.dtype(np.float32)),
         ("grad_xent_take_clip", (6, 7), np.dtype(np.float32)),
         ("pick_take_clip", (6, 7), np.dtype(np.float32)),
         # grad of a per-example loss under vmap (labels out of range too: clamped by
         # logp[y], dropped by take_along_axis, a zeros row of one_hot)
         ("grad_vmap_xent_index", (6, 10), np.dtype(np.float32)),
         ("grad_vmap_xent_index", (3, 33), np.dtype(np.float64)),
         ("grad_vmap_xent_take", (6, 10), BF16),
         ("grad_vmap_xent_one_hot", (6, 40), np.dtype(np.float32)),
         # k labels a row (repeated in a row, -1, out of range): picks, a block a row, the
         # gradient's chain of k scatter-adds
         ("take_labels", (6, 10), np.dtype(np.float32)),
         ("take_labels_clip", (3, 40), np.dtype(np.float64)),
         ("grad_xent_take_labels", (6, 10), np.dtype(np.float32)),
         ("grad_xent_take_labels", (4, 33), BF16),
         # NaNs of either sign with payloads (a signalling one too) and -0 at the labels
         ("pick_bits", (6, 10), np.dtype(np.float32)), ("pick_bits", (6, 40), np.dtype(np.float64))]

#: cases whose operand holds NaN, +inf and -inf (a row each)
NONFINITE = {("softmax", (5, 8, 16)), ("log_softmax", (4, 15)), ("softmax", (5, 3))}


def _operands(name, shape, dtype, rng):
    if dtype.kind in "iu":
        x = rng.integers(-5, 6, size=shape).astype(dtype)
    else:
        x = np.round(rng.standard_normal(shape), 2).astype(dtype)
    if (name, shape) in NONFINITE:
        rows = x.reshape(-1, shape[-1])
        rows[0, 1], rows[1, 0], rows[2, 2] = np.nan, np.inf, -np.inf
    if name == "layer_norm_flat":
        return [x, np.round(rng.standard_normal(shape[-1:]), 2).astype(dtype)]
    if name.endswith("_one_hot"):
        return [x, rng.integers(-1, shape[-1] + 1, size=shape[:-1]).astype(np.int32)]
    if name.endswith(("_take", "_take_clip", "_index")):
        return [x, _labels(shape)]
    if "_labels" in name:   # (3 labels a row)
        return [x, _labels(shape[:-1] + (3, shape[-1]))]
    if name == "pick_bits":
        return [_payload_nans(x), np.arange(shape[0], dtype=np.int32) % shape[-1]]
    if name in ("grad_layer_norm", "grad_log_softmax"):
        return [x, np.round(rng.standard_normal(shape), 2).astype(dtype)]
    return [x]


def _payload_nans(x):
    """``x`` with row ``r``'s element ``r`` a NaN of either sign with a payload (signalling
    or quiet) or -0, in turn."""
    bits = x.view(np.uint32 if x.dtype.itemsize == 4 else np.uint64).copy()
    shift = 32 if x.dtype.itemsize == 8 else 0
    patterns = [0x7f800001, 0xffc00123, 0x80000000, 0x7fc0beef]   # (float32's; float64: high word)
    for r in range(bits.shape[0]):
        bits[r, r % bits.shape[1]] = np.uint64(patterns[r % 4]) << np.uint64(shift) | \
            np.uint64(r if shift else 0)
    return bits.view(x.dtype)


def _labels(shape):
    """take_along_axis labels for rows of ``shape[-1]`` classes: the first, the last, -1 (the
    last again), C and -C-1 (out of range), in turn."""
    c = shape[-1]
    cycle = np.array([0, c - 1, -1, c, -c - 1, c // 2], np.int32)
    return np.resize(cycle, shape[:-1])


def _units(fn, args):
    import plax
    from plax.lowering.calls import spliced_calls
    from plax.lowering.program import fusion_units
    from plax_cupy.emitter import CupyEmitter
    jaxpr = spliced_calls(plax.make_jaxpr(fn)(*args).jaxpr)   # (as the driver splices them)
    return jaxpr, fusion_units(jaxpr, CupyEmitter)


def _row_local(units):
    from plax.lowering import Cluster
    return [u for u in units if isinstance(u, Cluster) and u.row_axes]


@cpu_side
def test_the_fusion_rule():
    import plax
    from plax import numpy as jnp
    from plax.core.jaxpr import JaxprEqn
    from plax.lowering import Cluster, Emitter
    from plax.lowering.program import fusion_units
    from plax_cupy.emitter import CupyEmitter
    from plax_numpy.backend import NumpyEmitter
    progs = _programs()
    x = np.ones((4, 7), np.float32)
    # softmax and layer norm: the whole program one row-local cluster over the rows
    for name in ("softmax", "layer_norm", "grad_softmax"):
        with plax.config.override("jax_enable_x64", False):
            _, units = _units(progs[name], [x])
        (c,) = units
        assert isinstance(c, Cluster) and c.row_axes == 1 and c.shape == (4, 7), name
    _, units = _units(progs["softmax2"], [np.ones((2, 3, 5), np.float32)])
    assert [u.row_axes for u in units] == [2]
    # a row one past the cap, or a leading axis reduced: today's plan (an epilogue at most)
    cap = codegen.ROW_LOCAL_MAX_ELEMENTS
    assert not _row_local(_units(progs["softmax"], [np.ones((2, cap + 1), np.float32)])[1])
    assert _row_local(_units(progs["softmax"], [np.ones((1, cap), np.float32)])[1])
    assert not _row_local(_units(lambda x: plax.nn.softmax(x, axis=0), [x])[1])
    # rows of one element: the reduction is a reshape (no reduction left to fuse)
    assert not _row_local(_units(progs["softmax"], [np.ones((4, 1), np.float32)])[1])
    # one_hot's iota joins the cross-entropy's group, and under grad so does the one_hot
    # half of the gradient (row-local work on the same rows that does not read the group)
    labels = np.arange(4, dtype=np.int32)
    units = _units(progs["xent_one_hot"], [x, labels])[1]
    assert [bool(u.row_axes) for u in units] == [True, False]
    assert "iota" in [e.primitive.name for e in units[0].eqns]
    for name in ("grad_xent_one_hot", "pick_one_hot"):
        (c,) = _units(progs[name], [x, labels])[1]
        assert c.row_axes == 1 and "iota" in [e.primitive.name for e in c.eqns], name

    # take_along_axis within the rows: under grad its scatter-add (with the labels' index
    # arithmetic, the mean's scalars and the zeros row) joins the group, the whole gradient
    # one cluster; forward, its gather (the loss's mean over the rows stays apart)
    (c,) = _units(progs["grad_xent_take"], [x, labels])[1]
    assert c.row_axes == 1 and "scatter-add" in [e.primitive.name for e in c.eqns]
    first, mean = _units(progs["xent_take"], [x, labels])[1]
    assert first.row_axes == 1 and "gather" in [e.primitive.name for e in first.eqns]
    assert not mean.row_axes
    # k labels a row (an (n, k) index): under grad the scatter-add of k updates a row joins,
    # the whole gradient one cluster, up to ROW_LOCAL_MAX_LABELS labels and fewer than the
    # row's elements; past either the scatter stays out
    from plax.lowering.fusion import ROW_LOCAL_MAX_LABELS
    k = ROW_LOCAL_MAX_LABELS
    many = np.ones((4, 3 * k), np.float32)
    (c,) = _units(progs["grad_xent_take_labels"], [x, np.zeros((4, 2), np.int32)])[1]
    assert c.row_axes == 1 and "scatter-add" in [e.primitive.name for e in c.eqns]
    (c,) = _units(progs["grad_xent_take_labels"], [many, np.zeros((4, k), np.int32)])[1]
    assert c.row_axes == 1
    for operand, labels_ in [(many, np.zeros((4, k + 1), np.int32)),
                             (x, np.zeros((4, 7), np.int32))]:
        units = _units(progs["grad_xent_take_labels"], [operand, labels_])[1]
        assert all("scatter-add" not in [e.primitive.name for e in u.eqns]
                   for u in _row_local(units)) and len(units) > 1, labels_.shape

    # grad of a per-example loss under vmap: one cluster for each form of the pick; with a
    # bias, its gradient's column sums (a reduction across the rows) stay apart, a unit of
    # their own reading the cluster's cotangent
    for name in ("grad_vmap_xent_index", "grad_vmap_xent_take", "grad_vmap_xent_one_hot"):
        (c,) = _units(progs[name], [x, labels])[1]
        assert c.row_axes == 1 and c.shape == (4, 7), name
    units = _units(_linear_model_grad("index"), _linear_model_args(4, 7, 3))[1]
    (c,) = _row_local(units)
    assert "scatter-add" in [e.primitive.name for e in c.eqns]
    (sums,) = [u for u in units if isinstance(u, JaxprEqn) and u.primitive.name == "reduce_sum"]
    assert tuple(sums.params["axes"]) == (0,) and any(sums.invars[0] is v for v in c.outputs)
    assert not any(isinstance(u, Cluster) and u is not c and
                   {"reduce_sum", "scatter-add"} & {e.primitive.name for e in u.eqns} for u in units)

    def softmax_plus_iota(x):   # (the iota, after the start, returned too: it stays out, and
        s = plax.nn.softmax(x, axis=-1)   # softmax's group stands)
        r = plax.lax.iota(np.float32, x.shape[-1])
        return s + r, r
    (c,) = _row_local(_units(softmax_plus_iota, [x])[1])
    assert "iota" not in [e.primitive.name for e in c.eqns]
    from plax_cupy.codegen_rows_local import plan_rows
    plan_rows(c)   # (not declined)
    # work on the results alone stays an epilogue (no row re-read)
    (c,) = _units(lambda x: jnp.sum(x, -1) * 2.0, [x])[1]
    assert c.epilogue and not c.row_axes
    # NumPy's generator does not ask; the CuPy and Numba generators do (Numba's rows are
    # longer: tests/numba/test_row_local_kernels.py)
    assert Emitter.fusion_options().row_local == 0
    assert CupyEmitter.fusion_options().row_local == cap
    j = plax.make_jaxpr(progs["layer_norm"])(x).jaxpr
    assert NumpyEmitter.fusion_options().row_local == 0
    assert not _row_local(fusion_units(j, NumpyEmitter))
    try:
        from plax_numba.emitter import NumbaEmitter
    except ImportError:
        return
    assert NumbaEmitter.fusion_options().row_local >= cap
    assert _row_local(fusion_units(j, NumbaEmitter))


@cpu_side
def test_short_rows_share_warps_and_rows_stay_in_registers():
    from plax_cupy.codegen_rows_local import ROW_REGISTER_ELEMENTS, plan_rows
    progs = _programs()

    def plan(name, shape, dtype=np.float32):
        (c,) = _row_local(_units(progs[name], [np.ones(shape, dtype)])[1])
        return plan_rows(c)

    def body(p):   # (the kernel, without the macros that name the shuffle)
        return p.source[p.source.index('void plax_rows('):]

    # rows of 10: lane groups of 16, 16 rows a block of 256, shuffles and no shared memory
    p = plan("softmax", (64, 10))
    assert (p.lanes, p.rows_per_block, p.threads) == (16, 16, 256)
    assert "PLAX_ROWS_XOR(" in body(p) and "__shared__" not in body(p)
    assert (plan("softmax", (3, 2)).lanes, plan("layer_norm", (2, 17)).lanes) == (2, 32)
    # rows of 33: a block a row, the tree in shared memory
    p = plan("softmax", (2, 33))
    assert (p.lanes, p.rows_per_block) == (64, 1) and "__shared__" in body(p)
    # softmax over rows up to the register bound reads x once and keeps exp(x - max) for
    # the division; one past it re-reads x in each of its three phases
    bound = 256 * ROW_REGISTER_ELEMENTS
    for row, held, loads in [(40, 2, 1), (bound, 2, 1), (bound + 1, 0, 3)]:
        p = plan("softmax", (2, row))
        (x,) = [v.name for v in p.inputs if v.kind == "array"]   # (the other: -inf, a literal)
        assert (p.held, body(p).count(f"{x}[i]")) == (held, loads), (row, p.held)
        assert body(p).count("expf(") == (1 if held else 2)
    # float64 rows at the bound: x and exp(x - max) are 4 words an element, the budget
    p = plan("softmax", (2, bound), np.float64)
    assert p.held == 2 and p.per_thread == ROW_REGISTER_ELEMENTS


def _plans():
    """``(case, plan, jaxpr, cluster, args)`` per case, the cluster the whole program."""
    import plax
    from plax_cupy.codegen_rows_local import plan_rows
    rng = np.random.default_rng(42)
    progs = _programs()
    out = []
    with plax.config.override("jax_enable_x64", True):
        for case in CASES:
            name, shape, dtype = case
            args = _operands(name, shape, dtype, rng)
            jaxpr, units = _units(progs[name], args)
            (cluster,) = _row_local(units)
            assert len(units) == 1, (name, units)
            out.append((case, plan_rows(cluster, literal_values=False), jaxpr, cluster, args))
    return out


#: the host's stand-in for a warp's lane exchange: the block's threads (std::threads) meet at
#: the block barrier (every thread of a block shuffles together: the kernels' row loop is
#: uniform over the block)
_HOST_SHUFFLE = r"""
template <typename V> static V __shfl_xor_sync(unsigned int, V value, int lane_mask) {
  static V lanes[1024];
  lanes[threadIdx.x] = value;
  __syncthreads();
  const V got = lanes[threadIdx.x ^ lane_mask];
  __syncthreads();
  return got;
}
"""


def _source(plans, host: bool = False) -> str:
    """One translation unit holding every plan's kernel (each named ``plax_rows_k<i>``), the
    device kernels kept in the host build (``host``: with the lane exchange's stand-in)."""
    parts = [codegen.PREAMBLE] + ([_HOST_SHUFFLE] if host else [])
    for i, plan in enumerate(plans):
        assert plan.source.startswith(codegen.PREAMBLE)
        parts.append(plan.source[len(codegen.PREAMBLE):].replace("plax_rows(", f"plax_rows_k{i}("))
    return "\n".join(parts)


def _close(got, want, dtype) -> bool:
    if dtype.kind in "iu":
        return np.array_equal(got, want)
    tol = {np.dtype(np.float16): 4e-3, BF16: 2e-2, np.dtype(np.float64): 1e-12}.get(dtype, 1e-5)
    return np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol,
                       equal_nan=True)


@cpu_side
@needs_cxx20
def test_values_match_numpy_with_a_block_of_threads(tmp_path):
    import plax
    plans = _plans()
    source = _source([plan for _, plan, _, _, _ in plans], host=True)
    source = source.replace('#ifndef PLAX_HOST\nextern "C" __global__ void plax_rows',
                            '#if 1\nextern "C" __global__ void plax_rows')
    run = _kernels(tmp_path, source, preamble=False)
    failures = []
    for k, (case, plan, jaxpr, cluster, args) in enumerate(plans):
        name, shape, dtype = case
        with plax.config.override("jax_enable_x64", True):
            want = plax.jit(_programs()[name], backend="numpy")(*args)
        values = {id(v): a for v, a in zip(jaxpr.invars, args)}
        kernel_args = []
        for inp in plan.inputs:
            value = values.get(id(inp.atom))
            if value is None:   # (a literal, read from memory in this plan)
                value = np.asarray(inp.atom.val, inp.dtype).reshape(1)
            value = np.ascontiguousarray(value)
            kernel_args.append(value.view(np.uint16) if value.dtype == BF16 else value)
        outs = [np.full(s, 77, np.uint16 if d == BF16 else d)
                for s, d in zip(plan.out_shapes, plan.out_dtypes)]
        # (two blocks: the rows in turn; a block of the plan's threads)
        run[f"plax_rows_k{k}"](min(2, plan.n_rows), plan.threads, *kernel_args, *outs, plan.n_rows)
        (got,) = [o.view(BF16) if d == BF16 else o for o, d in zip(outs, plan.out_dtypes)]
        want = np.asarray(want)
        if name == "pick_bits":   # (a copy: the bits)
            got, want = got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}")
        if got.shape != want.shape or not _close(got, want, want.dtype):
            failures.append((case, got, want))
    assert not failures, failures[:2]


@cpu_side
@requires_nvrtc
def test_rows_kernels_compile_with_nvrtc_without_warnings():
    from plax_cupy import nvrtc
    from plax_cupy.codegen_rows_local import plan_rows
    plans = [plan for _, plan, _, _, _ in _plans()]
    # (and the row-local kernels of a linear model's per-example loss under vmap, whose bias
    # gradient's column sums stay apart: the cotangent an output)
    for pick in ("index", "take", "one_hot"):
        units = _units(_linear_model_grad(pick), _linear_model_args(64, 10, 32))[1]
        plans.append(plan_rows(_row_local(units)[0], literal_values=False))
    ptx = nvrtc.compile_ptx(_source(plans), "rows_local.cu")   # (a warning is an error)
    assert ptx.count(".entry plax_rows") == len(plans)
    # the held row values are registers (constant indices after unrolling: no local memory),
    # and the lane groups' reductions are butterfly shuffles
    assert ".local" not in ptx and "shfl.sync.bfly" in ptx


# ---------------------------------------------------------------- on the simulated GPU

@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    run_file_on_simulated_gpu(__file__, skipped=5)   # (this one and the CPU-side tests skip there)


@on_simulated_gpu
def test_softmax_and_layer_norm_are_one_launch(monkeypatch):
    import plax
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    progs = _programs()
    rng = np.random.default_rng(3)
    x = np.round(rng.standard_normal((6, 40)), 2).astype(np.float32)
    past = np.round(rng.standard_normal((2, codegen.ROW_LOCAL_MAX_ELEMENTS + 1)), 2).astype(np.float32)
    short = np.round(rng.standard_normal((2, 3, 10)), 2).astype(np.float32)  # (lane groups)
    labels = rng.integers(0, 40, size=6).astype(np.int32)
    take = _labels(x.shape)   # (out of range ones too)
    ones = np.ones((4, 1), np.float32)   # (rows of 1: no reduction left, values alone)
    for name, operand, most in [("softmax", x, 1), ("layer_norm", x, 1), ("softmax", past, 4),
                                ("softmax", short, 1), ("grad_xent_one_hot", (x, labels), 1),
                                ("grad_xent_take", (x, take), 1), ("xent_take", (x, take), 2),
                                ("grad_xent_take", (ones, _labels(ones.shape)), None)]:
        operands = operand if isinstance(operand, tuple) else (operand,)
        f = plax.jit(progs[name])
        launches, got = _launches(f, *[_put(a) for a in operands])
        want = plax.jit(progs[name], backend="numpy")(*operands)
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-6, err_msg=name)
        assert most is None or (launches == most if most <= 2 else launches > 1), \
            (name, operands[0].shape, launches)
    # with CUDA graphs on: captured and replayed (each new graph's first replays checked
    # against a plain run), one launch a call, the same values
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "1")
    f = plax.jit(lambda x: progs["softmax"](x))   # (a new program, the same kernel)
    for _ in range(3):
        launches, got = _launches(f, _put(x))
    np.testing.assert_allclose(got, np.asarray(plax.jit(progs["softmax"], backend="numpy")(x)),
                               rtol=1e-5, atol=1e-6)
    assert launches == 1


@on_simulated_gpu
def test_grad_of_a_per_example_loss_under_vmap(monkeypatch):
    """``grad`` of the mean of a per-example cross-entropy of a linear model under
    ``vmap(loss, in_axes=(None, 0, 0))``: the forward product, the row-local kernel (the
    log-softmax, the pick's transpose and the cotangent of the logits), the bias gradient's
    column sums and the weights' product -- 4 launches for each form of the pick (before:
    10, 9 and 6), the values those of the NumPy backend (float tolerance) and, for
    ``logp[y]``, bit for bit those with the row-local path off (more launches)."""
    import plax
    import plax_cupy
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    args = _linear_model_args(12, 10, 5, seed=7)
    on_gpu = [plax.device_put(a, plax.devices("gpu")[0]) for a in args]

    def run(pick):
        f = plax.jit(_linear_model_grad(pick))   # (a new program: compiled with today's cap)
        plax.block_until_ready(f(*on_gpu))
        with plax_cupy.count() as c:
            out = plax.block_until_ready(f(*on_gpu))
        assert c.host_fallbacks == 0, c.fallbacks
        return c.launches, [np.asarray(g) for g in plax.tree_util.tree_leaves(out)]

    results = {}
    for pick in ("index", "take", "one_hot"):
        want = plax.tree_util.tree_leaves(plax.jit(_linear_model_grad(pick), backend="numpy")(*args))
        launches, got = results[pick] = run(pick)
        assert launches == 4, (pick, launches)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-6, err_msg=pick)
    # (the path off for logp[y] alone: its kernels are most of this test's g++ builds)
    with monkeypatch.context() as off:
        off.setattr(codegen, "ROW_LOCAL_MAX_ELEMENTS", 0)
        old_launches, old = run("index")
    assert old_launches > 6
    for g, o in zip(results["index"][1], old):
        np.testing.assert_array_equal(g, o)
    # a generator declining the group lowers its parts as they were, the part of the cluster
    # it split (its column sums left in place) among them: the same values
    from plax_cupy import codegen_rows_local

    def decline(cluster, **kw):
        raise codegen.Unsupported("declined by the test")
    monkeypatch.setattr(codegen_rows_local, "plan_rows", decline)
    launches, declined = run("index")
    assert launches > 4
    for g, o in zip(declined, old):
        np.testing.assert_allclose(g, o, rtol=1e-6, atol=1e-7)


@on_simulated_gpu
def test_k_labels_a_row_are_one_launch(monkeypatch):
    """``take_along_axis`` with 3 labels a row (repeated in a row, -1 and out of range among
    them) and the gradient of its cross-entropy's mean: one launch each (before: 3 for the
    loss with its mean -- now 2 -- and 9 for the gradient), the values those of the NumPy
    backend and, for the picks and the gradient, bit for bit those with the row-local fusion
    off."""
    import plax
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    progs = _programs()
    rng = np.random.default_rng(5)
    x = np.round(rng.standard_normal((12, 10)), 2).astype(np.float32)
    labels = _labels((12, 3, 10))

    def loss(x, l):   # (its mean across the rows a second launch)
        return -plax.numpy.mean(progs["take_labels"](x, l))

    for name, fn, most in [("take_labels", progs["take_labels"], 1), ("loss", loss, 2),
                           ("grad_xent_take_labels", progs["grad_xent_take_labels"], 1)]:
        launches, got = _launches(plax.jit(fn), _put(x), _put(labels))
        want = np.asarray(plax.jit(fn, backend="numpy")(x, labels))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)
        assert launches == most, (name, launches)
        if name == "loss":
            continue   # (its kernels are the picks' and a mean's: the path off checked below)
        with monkeypatch.context() as off:
            off.setattr(codegen, "ROW_LOCAL_MAX_ELEMENTS", 0)
            apart, old = _launches(plax.jit(lambda *a: fn(*a)), _put(x), _put(labels))
        np.testing.assert_array_equal(got, old, err_msg=name)
        assert apart > most, (name, apart)
