"""Functional updates ``x.at[idx].set/add/multiply/min/max/divide/power/get`` for random index
expressions (hypothesis), against a NumPy reference (``np.add.at`` and friends) that applies
JAX's rules: repeated indices accumulate, out-of-bounds updates are dropped by default and
clamped with ``mode="clip"``, out-of-bounds reads give ``fill_value`` with ``mode="fill"``."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import plax
import plax.numpy as jnp
from jnp_index_strategies import index_expressions, numpy_update, shapes, target_positions
from jnp_testutil import assert_close, check_avals_like_jax, check_raises_like_jax

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

OPS = ["set", "add", "multiply", "min", "max", "divide", "power"]


def _check_update(x, idx, y, op, mode, out):
    expected, candidates = numpy_update(x, idx, y, op, "clip" if mode == "clip" else "drop")
    got = np.asarray(out).astype(expected.dtype if op not in ("divide", "power") or
                                 np.asarray(out).dtype.kind == "f" else np.float64)
    flat_got, flat_exp = got.reshape(-1), expected.reshape(-1).copy()
    for pos, vals in candidates.items():  # a repeated index in set: any of its values may win
        assert flat_got[pos] in vals, (pos, flat_got[pos], vals)
        flat_exp[pos] = flat_got[pos]
    assert_close(flat_got.reshape(x.shape).astype(out.dtype),
                 flat_exp.reshape(x.shape), dtype=out.dtype,
                 err_msg=f"x.at[{idx!r}].{op}(y, mode={mode}) on shape {x.shape}")


@SETTINGS
@given(data=st.data(), op=st.sampled_from(OPS), mode=st.sampled_from([None, "drop", "clip"]))
def test_at_update_matches_numpy_reference(data, op, mode):
    shape = data.draw(shapes(min_dims=1, max_dims=3))
    idx, _ = data.draw(index_expressions(shape, allow_oob=True))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    dtype = np.int32 if op in ("add", "multiply", "min", "max", "set") and \
        data.draw(st.booleans()) else np.float32
    if op == "power":
        x = rng.uniform(0.5, 2.0, shape).astype(np.float32)
    else:
        x = rng.integers(-5, 6, shape).astype(dtype)
    try:
        target = target_positions(idx, shape, "clip" if mode == "clip" else "drop")
    except IndexError:
        return  # NumPy rejects the index itself (e.g. masks of the wrong shape)
    y_shape = data.draw(st.sampled_from([(), target.shape, target.shape[1:] or ()]))
    y = (rng.integers(1, 4, y_shape) if op in ("multiply", "divide", "power")
         else rng.integers(-5, 6, y_shape)).astype(dtype)
    ref = getattr(jnp.asarray(x).at[idx], op)
    if mode is not None and (0 in shape and mode == "clip"):
        return
    out = ref(y) if mode is None else ref(y, mode=mode)
    _check_update(x, idx, y, op, mode, out)
    if op != "divide":
        assert out.dtype == x.dtype
    assert out.shape == x.shape


@SETTINGS
@given(data=st.data(), fill=st.sampled_from([None, -1.0, 7.5]))
def test_at_get_fill_and_clip(data, fill):
    shape = data.draw(shapes(min_dims=1, max_dims=3))
    if 0 in shape:
        return
    idx, _ = data.draw(index_expressions(shape, allow_oob=True, allow_bool=False))
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    try:
        pos = target_positions(idx, shape, "drop")
    except IndexError:
        return
    flat = x.reshape(-1)
    expected = np.where(pos >= 0, flat[np.maximum(pos, 0)], np.nan if fill is None else fill)
    out = jnp.asarray(x).at[idx].get(mode="fill", fill_value=fill)
    assert_close(out, expected.astype(np.float32), err_msg=f"{idx!r} on {shape}")
    clipped = target_positions(idx, shape, "clip")
    assert_close(jnp.asarray(x).at[idx].get(mode="clip"), flat[clipped])
    assert_close(jnp.asarray(x).at[idx].get(), flat[clipped])  # reads clamp by default


# ---------------------------------------------------------------- fixed cases

def test_repeated_indices_accumulate():
    x = np.zeros(5, np.float32)
    idx = np.array([0, 1, 0, 0, 4, -1])
    y = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], np.float32)
    ref = x.copy()
    np.add.at(ref, idx, y)
    assert_close(jnp.asarray(x).at[idx].add(y), ref)
    ref = np.ones(5, np.float32)
    np.multiply.at(ref, idx, y)
    assert_close(jnp.ones(5).at[idx].multiply(y), ref)
    ref = np.full(5, 10.0, np.float32)
    np.minimum.at(ref, idx, y)
    assert_close(jnp.full(5, 10.0).at[idx].min(y), ref)
    ref = np.zeros(5, np.float32)
    np.maximum.at(ref, idx, y)
    assert_close(jnp.zeros(5).at[idx].max(y), ref)


def test_out_of_bounds_updates_are_dropped_or_clipped():
    x = jnp.arange(5.0)
    assert_close(x.at[7].set(9.0), np.arange(5.0))
    assert_close(x.at[-6].add(9.0), np.arange(5.0))
    assert_close(x.at[np.array([1, 10, -10])].set(9.0), np.array([0, 9, 2, 3, 4.0]))
    assert_close(x.at[7].set(9.0, mode="clip"), np.array([0, 1, 2, 3, 9.0]))
    assert_close(x.at[np.array([-10, 10])].add(1.0, mode="clip"), np.array([1, 1, 2, 3, 5.0]))
    assert_close(x.at[7].get(mode="fill", fill_value=-1.0), np.float32(-1.0))
    assert_close(x.at[7].get(), np.float32(4.0))
    with pytest.raises(ValueError, match="mode"):
        x.at[0].set(1.0, mode="wrong")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.float16, np.float32,
                                   np.complex64, np.bool_])
def test_at_keeps_dtype_and_casts_values(dtype):
    x = np.zeros((2, 3), dtype)
    out = jnp.asarray(x).at[0, 1].set(1)
    assert out.dtype == dtype
    ref = x.copy()
    ref[0, 1] = 1
    assert_close(out, ref)
    if dtype == np.bool_:  # as in JAX, booleans cannot be added (set, min and max work)
        check_raises_like_jax(lambda: jnp.asarray(x).at[0].add(True),
                              lambda a: a.at[0].add(True), x)
        out = jnp.asarray(x).at[:, np.array([0, 2])].max(True)
        assert_close(out, np.array([[True, False, True]] * 2))
        return
    out = jnp.asarray(x).at[:, np.array([0, 2])].add(2)
    assert out.dtype == dtype
    check_avals_like_jax(out, lambda a: a.at[:, np.array([0, 2])].add(2), x)
    i = np.arange(6, dtype=np.int32)
    check_avals_like_jax(jnp.asarray(i).at[0].set(1.5), lambda a: a.at[0].set(1.5), i)
    check_avals_like_jax(jnp.asarray(i).at[0].divide(2), lambda a: a.at[0].divide(2), i)
    check_avals_like_jax(jnp.asarray(i).at[0].power(2), lambda a: a.at[0].power(2), i)


def test_at_weak_type_follows_the_operand():
    w = jnp.asarray(3.0)
    assert w.weak_type
    assert w.at[()].set(5.0).weak_type
    s = jnp.zeros(3).at[1].set(5)
    assert not s.weak_type


def test_at_update_value_shapes():
    x = np.zeros((3, 4), np.float32)
    xp = jnp.asarray(x)
    # broadcasting, and leading size-1 axes of the values are dropped as in NumPy
    assert_close(xp.at[0].set(np.arange(4.0)), np.vstack([np.arange(4.0), x[1:]]))
    assert_close(xp.at[0].set(np.arange(4.0)[None]), np.vstack([np.arange(4.0), x[1:]]))
    assert_close(xp.at[:, 1].set([1.0, 2.0, 3.0]), _set(x, (slice(None), 1), [1.0, 2.0, 3.0]))
    err = check_raises_like_jax(lambda: xp.at[0].set(np.ones(3)),
                                lambda a: a.at[0].set(np.ones(3)), x)
    assert "(3,)" in str(err) and "(4,)" in str(err)


def _set(x, idx, y):
    out = x.copy()
    out[idx] = y
    return out


def test_at_subtract_apply_and_aliases():
    x = jnp.arange(4.0)
    assert_close(x.at[1:3].subtract(1.0), np.array([0, 0, 1, 3.0]))
    assert_close(x.at[np.array([0, 0])].mul(3.0), np.array([0, 1, 2, 3.0]))
    assert_close(x.at[2].apply(lambda v: v * 10), np.array([0, 1, 20, 3.0]))
    assert "IndexUpdateRef" in repr(x.at[0]) and "IndexUpdateHelper" in repr(x.at)


def test_at_on_empty_arrays():
    e = jnp.zeros((0, 3))
    assert e.at[np.array([0])].set(1.0).shape == (0, 3)
    assert e.at[:, 1].add(1.0).shape == (0, 3)


# integer array indices of a non-empty shape into an empty axis: JAX 0.10.2 builds a gather of
# a one-element slice of that axis, which its shape rule refuses (TypeError naming the axis)
EMPTY_AXIS_READS = [
    ("rows", (0, 3), lambda x: x[np.array([0, 1])], 0),
    ("rows .at get", (0, 3), lambda x: x.at[jnp.array([0])].get(), 0),
    ("rows .at get fill", (0, 3), lambda x: x.at[jnp.array([0])].get(mode="fill"), 0),
    ("columns", (3, 0), lambda x: x[:, jnp.array([0])], 1),
    ("array then int", (0, 2), lambda x: x[jnp.array([0]), 1], 0),
    ("int then array", (2, 0), lambda x: x[1, jnp.array([0])], 1),
]


@pytest.mark.parametrize("label,shape,read,axis", EMPTY_AXIS_READS,
                         ids=[c[0] for c in EMPTY_AXIS_READS])
def test_reading_an_empty_axis_at_integer_arrays_is_a_type_error(label, shape, read, axis):
    x = jnp.zeros(shape)
    for f in (read, jax_jit(read)):
        with pytest.raises(TypeError, match=rf"Slice size at index {axis} in gather op is out "
                                            rf"of range, must be within \[0, 0 \+ 1\), got 1"):
            f(x)


def test_reading_an_empty_axis_selecting_nothing_or_at_scalars():
    x = jnp.zeros((0, 3))
    assert x[jnp.zeros((0,), np.int32)].shape == (0, 3)  # nothing selected: no error
    for read in (lambda x: x[0], lambda x: x.at[0].get(), lambda x: x[jnp.array(0)]):
        with pytest.raises(IndexError, match="out of bounds for axis 0 with size 0"):
            read(x)  # a scalar index: IndexError, as JAX (and NumPy)
    for mode in (None, "fill", "clip"):  # jnp.take: its own IndexError, as JAX words it
        with pytest.raises(IndexError, match=r"Cannot do a non-empty jnp.take\(\) from an "
                                             r"empty axis"):
            jnp.take(x, jnp.array([0]), axis=0, mode=mode)
    assert jnp.take(x, jnp.zeros((0,), np.int32), axis=0).shape == (0, 3)


def test_updates_into_an_empty_operand_as_jax():
    import plax
    x = jnp.zeros((0, 3))
    # a scalar index into the empty axis: IndexError (JAX's), whatever the mode
    for update in (lambda x: x.at[0].set(1.0), lambda x: x.at[np.int32(0)].add(1.0),
                   lambda x: x.at[jnp.array(0)].max(1.0), lambda x: x.at[-1].set(1.0, mode="drop"),
                   lambda x: jnp.zeros((3, 0)).at[:, 0].multiply(2.0)):
        for f in (update, jax_jit(update)):
            with pytest.raises(IndexError, match="out of bounds for axis [01] with size 0"):
                f(x)
    # integer arrays: the operand comes back, but the scatter's derivatives gather from the
    # empty axis, which JAX refuses (TypeError), for the updates and the operand alike
    assert x.at[jnp.array([0])].set(1.0).shape == (0, 3)
    message = r"Slice size at index {} in gather op is out of range"
    for method, axis, x0, idx, u in (("set", 0, x, jnp.array([0]), jnp.ones((1, 3))),
                                     ("add", 0, x, jnp.array([0, 1]), 1.0),
                                     ("min", 0, x, jnp.array([0]), jnp.ones(3)),
                                     ("set", 1, jnp.zeros((3, 0)), (slice(None), jnp.array([0])),
                                      jnp.ones((3, 1)))):
        def loss(u, x0=x0, idx=idx, method=method):
            return getattr(x0.at[idx], method)(u).sum()
        for grad in (plax.grad(loss), jax_jit(plax.grad(loss))):
            with pytest.raises(TypeError, match=message.format(axis)):
                grad(u)
    with pytest.raises(TypeError, match=message.format(0)):
        plax.grad(lambda x: x.at[jnp.array([0])].set(1.0).sum())(x)
    # an empty window or no index selects nothing: a zero gradient, as in JAX
    g = plax.grad(lambda u: jnp.zeros((0, 2)).at[:, jnp.array([0])].set(u).sum())(1.0)
    np.testing.assert_array_equal(np.asarray(g), 0.0)
    g = plax.grad(lambda u: x.at[jnp.zeros((0,), np.int32)].set(u).sum())(jnp.ones((0, 3)))
    assert g.shape == (0, 3)
    # the tangent of add is a scatter-add of the tangents: it needs no gather
    _, t = plax.jvp(lambda u: x.at[jnp.array([0])].add(u), (jnp.ones((1, 3)),),
                    (jnp.ones((1, 3)),))
    assert t.shape == (0, 3)


def test_empty_axis_errors_as_jax():
    jax = pytest.importorskip("jax")
    cases = [(lambda np_, x: x[np_.array([0, 1])], (0, 3)),
             (lambda np_, x: x.at[0].set(1.0), (0, 3)),
             (lambda np_, x: x.at[np_.array([0])].get(mode="fill"), (0, 3))]
    for read, shape in cases:
        with pytest.raises(Exception) as want:
            read(jax.numpy, jax.numpy.zeros(shape))
        with pytest.raises(Exception) as got:
            read(jnp, jnp.zeros(shape))
        assert type(got.value) is type(want.value), (got.value, want.value)
    loss = lambda np_, u: np_.zeros((0, 3)).at[np_.array([0])].set(u).sum()  # noqa: E731
    with pytest.raises(TypeError) as want:
        jax.grad(lambda u: loss(jax.numpy, u))(np.ones((1, 3), np.float32))
    with pytest.raises(TypeError) as got:
        __import__("plax").grad(lambda u: loss(jnp, u))(np.ones((1, 3), np.float32))
    assert str(got.value).startswith(str(want.value))  # (plax adds the sizes)


def jax_jit(f):
    import plax
    return plax.jit(f)


def test_at_seed_examples():
    """The updates the seed tutorials use: x.at[0, 0].set and x.at[i].add in a loop."""
    m = jnp.zeros((3, 3)).at[0, 0].set(1.0)
    assert_close(m, np.diag([1.0, 0, 0]))
    acc = jnp.zeros(4, dtype=jnp.int32)
    for i in range(4):
        acc = acc.at[i].add(i * i)
    assert_close(acc, np.array([0, 1, 4, 9]))


def test_whole_row_updates_stage_one_row_scatter_as_jax():
    # x.at[rows] (rows: an integer array on the first axis, the rest whole) is one scatter of
    # row windows, as JAX stages it, not a scatter of every element at its flat position
    x = np.arange(24.0, dtype=np.float32).reshape(4, 3, 2)
    rows = np.array([[1, -1], [1, 7]], np.int32)
    for index in (rows, (rows, slice(None)), (rows, Ellipsis), (rows, slice(None), slice(None))):
        jaxpr = plax.make_jaxpr(lambda t, r: t.at[(r,) + index[1:] if isinstance(index, tuple)
                                                  else r].add(1.0))(x, rows)
        text = str(jaxpr)
        assert "iota" not in text and text.count("scatter-add") == 1, text
        assert "update_window_dims=(2, 3), inserted_window_dims=(0,)" in text, text
    expected = x.copy()
    for r in rows.ravel():
        if -4 <= r < 4:
            expected[r] += 1.0  # NumPy's unbuffered add; the out-of-range row dropped
    np.testing.assert_array_equal(jnp.asarray(x).at[rows].add(1.0), expected)


def test_whole_row_updates_print_as_jax():
    jax = pytest.importorskip("jax")
    x = np.zeros((5, 3), np.float32)
    rows = np.array([0, 2, -1], np.int32)
    for op in ("add", "set", "max"):
        ours = str(plax.make_jaxpr(lambda t, r: getattr(t.at[r], op)(1.0))(x, rows))
        theirs = str(jax.make_jaxpr(lambda t, r: getattr(t.at[r], op)(1.0))(x, rows))
        # (JAX's scatter prints its combining jaxpr, which plax's primitives do not carry)
        theirs = "\n".join(line for line in theirs.splitlines()
                           if "update_consts" not in line and "update_jaxpr" not in line)
        assert ours == theirs, (op, ours, theirs)
