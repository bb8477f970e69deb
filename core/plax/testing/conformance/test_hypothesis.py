"""Random shapes and parameters (hypothesis) for the shape and indexing primitives whose
parameter space is too large to enumerate: broadcast_in_dim, reshape, transpose, pad, slice,
dynamic_slice and gather. Each example runs eagerly through the backend and under ``jit``,
against the loop references of the spec modules and the abstract eval."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plax import lax
from plax.lax import GatherDimensionNumbers as GDN
from plax.lax import GatherScatterMode as Mode

from .harness import Case, Spec, check_values, examples, rand
from .spec_indexing import gather_ref
from .spec_shape import pad_ref

SETTINGS = settings(max_examples=examples(25), deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

small_dim = st.integers(0, 4)
shapes = st.lists(small_dim, min_size=0, max_size=3).map(tuple)


def run(prim, params, operands, ref, backend, backend_name, exact=True):
    """check_values on one hand-built case (operands fixed, dtype float32 or int32)."""
    case = Case(params, lambda rng: [np.asarray(o) for o in operands], ref, str(params),
                exact_bits=exact)
    d = str(np.asarray(operands[0]).dtype) if operands else "int32"
    check_values(Spec(prim, (d,), lambda _: [case], nondiff=True), d, backend, backend_name)


@st.composite
def broadcast_problems(draw):
    out_shape = tuple(draw(st.lists(small_dim, max_size=4)))
    dims = tuple(sorted(draw(st.sets(st.integers(0, max(len(out_shape) - 1, 0)),
                                     max_size=len(out_shape))))) if out_shape else ()
    operand = tuple(draw(st.sampled_from([1, out_shape[d]])) for d in dims)
    return operand, out_shape, dims


@SETTINGS
@given(problem=broadcast_problems())
def test_broadcast_in_dim(problem, backend, backend_name):
    from .spec_shape import _broadcast_ref
    operand, shape, dims = problem
    x = rand(np.random.default_rng(0), operand, np.float32)
    params = dict(shape=shape, broadcast_dimensions=dims)
    run(lax.broadcast_in_dim_p, params, [x], lambda x: _broadcast_ref(x, **params), backend,
        backend_name)


@st.composite
def reshape_problems(draw):
    shape = draw(shapes)
    size = math.prod(shape)
    if size == 0:  # any shape with a zero in it
        new = draw(st.permutations(list(shape) + [draw(small_dim)]))
    else:  # a random factorisation of the size
        new, left = [], size
        while left > 1:
            f = draw(st.sampled_from([d for d in range(2, left + 1) if left % d == 0]))
            new.append(f)
            left //= f
        new = draw(st.permutations(new + [1] * draw(st.integers(0, 2))))
    return shape, tuple(new)


@SETTINGS
@given(problem=reshape_problems())
def test_reshape(problem, backend, backend_name):
    shape, new = problem
    x = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    run(lax.reshape_p, dict(new_sizes=new), [x], lambda x: x.reshape(new), backend, backend_name)


@SETTINGS
@given(shape=shapes, data=st.data())
def test_transpose(shape, data, backend, backend_name):
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    x = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    run(lax.transpose_p, dict(permutation=perm), [x], lambda x: np.transpose(x, perm), backend,
        backend_name)


@st.composite
def pad_problems(draw):
    shape = draw(shapes)
    config = []
    for d in shape:
        interior = draw(st.integers(0, 2))
        inner = d + max(d - 1, 0) * interior
        lo = draw(st.integers(-inner, 3))
        hi = draw(st.integers(-(inner + lo), 3))  # the padded size stays >= 0
        config.append((lo, hi, interior))
    return shape, tuple(config)


@SETTINGS
@given(problem=pad_problems())
def test_pad(problem, backend, backend_name):
    shape, config = problem
    x = rand(np.random.default_rng(1), shape, np.float32)
    pv = np.float32(-7.5)
    run(lax.pad_p, dict(padding_config=config), [x, pv], lambda x, p: pad_ref(x, p, config),
        backend, backend_name)


@st.composite
def slice_problems(draw):
    shape = draw(shapes)
    start, limit, strides = [], [], []
    for d in shape:
        lo = draw(st.integers(0, d))
        start.append(lo)
        limit.append(draw(st.integers(lo, d)))
        strides.append(draw(st.integers(1, 3)))
    return shape, tuple(start), tuple(limit), tuple(strides)


@SETTINGS
@given(problem=slice_problems())
def test_slice(problem, backend, backend_name):
    shape, start, limit, strides = problem
    x = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    params = dict(start_indices=start, limit_indices=limit, strides=strides)
    run(lax.slice_p, params, [x],
        lambda x: x[tuple(slice(a, b, c) for a, b, c in zip(start, limit, strides))], backend,
        backend_name)


@SETTINGS
@given(shape=shapes, data=st.data())
def test_dynamic_slice(shape, data, backend, backend_name):
    sizes = tuple(data.draw(st.integers(0, d)) for d in shape)
    starts = [np.int32(data.draw(st.integers(-3, d + 3))) for d in shape]
    x = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)

    def ref(x, *st_):
        lo = [min(max(int(s), 0), d - n) for s, d, n in zip(st_, shape, sizes)]
        return x[tuple(slice(a, a + n) for a, n in zip(lo, sizes))]
    run(lax.dynamic_slice_p, dict(slice_sizes=sizes), [x] + starts, ref, backend, backend_name)


@st.composite
def gather_problems(draw):
    """A random valid gather: which operand axes are indexed, collapsed, batched or windowed,
    a random index batch shape, in- and out-of-bounds indices, and a mode."""
    operand = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    rank = len(operand)
    axes = list(range(rank))
    n_batching = draw(st.integers(0, 1)) if rank > 1 else 0
    obatch = tuple(sorted(draw(st.permutations(axes))[:n_batching]))
    free = [a for a in axes if a not in obatch]
    start_map = tuple(draw(st.permutations(free))[:draw(st.integers(1, len(free)))]) if free else ()
    slice_sizes = tuple(1 if a in obatch else draw(st.integers(0 if a not in start_map else 1,
                                                                operand[a])) for a in axes)
    collapsed = tuple(sorted(a for a in start_map if slice_sizes[a] == 1 and draw(st.booleans())))
    batch_shape = [operand[a] for a in obatch] + draw(st.lists(st.integers(0, 3), max_size=2 - n_batching))
    ibatch = tuple(range(n_batching))
    batch_shape = tuple(batch_shape)
    windowed = [a for a in axes if a not in collapsed and a not in obatch]
    out_rank = len(batch_shape) + len(windowed)
    offset = tuple(sorted(draw(st.permutations(range(out_rank)))[:len(windowed)]))
    indices = np.array(draw(st.lists(st.integers(-2, 5), min_size=math.prod(batch_shape) * len(start_map),
                                     max_size=math.prod(batch_shape) * len(start_map))), np.int32)
    indices = indices.reshape(batch_shape + (len(start_map),))
    mode = draw(st.sampled_from([Mode.CLIP, Mode.FILL_OR_DROP]))
    dn = GDN(offset_dims=offset, collapsed_slice_dims=collapsed, start_index_map=start_map,
             operand_batching_dims=obatch, start_indices_batching_dims=ibatch)
    return operand, indices, dict(dimension_numbers=dn, slice_sizes=slice_sizes,
                                  indices_are_sorted=False, unique_indices=False, mode=mode,
                                  fill_value=None)


@SETTINGS
@given(problem=gather_problems())
def test_gather(problem, backend, backend_name):
    operand, indices, params = problem
    x = rand(np.random.default_rng(2), operand, np.float32)
    run(lax.gather_p, params, [x, indices], lambda x, i: gather_ref(x, i, **params), backend,
        backend_name)
