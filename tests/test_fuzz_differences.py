"""Regression tests for differences from JAX 0.10.2 found by fuzzing plax against it (issue 25,
item 6): out-of-range axes, scan carries that change dtype, ``.at[].add`` on bool arrays, the
float16 cumulative sum's last digits, ``arange`` with a zero step, and the weak type of the
cotangent of a Python-float primal under ``vmap`` of ``vjp``.

Each expected behaviour is written out (CI has no JAX); where JAX is installed the same call
runs through JAX as well, to show the expectation is JAX's.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax

try:
    import jax
    import jax.numpy as jax_numpy
except ImportError:  # the JAX halves of the tests are skipped
    jax = jax_numpy = None

needs_jax = pytest.mark.skipif(jax is None, reason="JAX is not installed: no side-by-side check")

A23 = np.zeros((2, 3), np.float32)

# ------------------------------------------------------------------ axis out of range

AXIS_CASES = {
    "sum": (lambda m: m.sum(A23, axis=2), "axis 2 is out of bounds for array of dimension 2"),
    "sum_negative": (lambda m: m.sum(A23, axis=-3),
                     "axis -3 is out of bounds for array of dimension 2"),
    "concatenate": (lambda m: m.concatenate([A23, A23], axis=2),
                    "axis 2 is out of bounds for array of dimension 2"),
    "cumsum": (lambda m: m.cumsum(A23, axis=5), "axis 5 is out of bounds for array of dimension 2"),
    "expand_dims": (lambda m: m.expand_dims(A23, 5),
                    "axis 5 is out of bounds for array of dimension 3"),
    "moveaxis": (lambda m: m.moveaxis(A23, 5, 0), "axis 5 is out of bounds for array of dimension 2"),
    "sort": (lambda m: m.sort(A23, axis=5), "axis 5 is out of bounds for array of dimension 2"),
    "stack": (lambda m: m.stack([A23, A23], axis=5),
              "axis 5 is out of bounds for array of dimension 3"),
    "flip": (lambda m: m.flip(A23, axis=5), "axis 5 is out of bounds for array of dimension 2"),
    "squeeze": (lambda m: m.squeeze(A23, axis=5), "axis 5 is out of bounds for array of dimension 2"),
    "take": (lambda m: m.take(A23, 0, axis=5), "axis 5 is out of bounds for array of dimension 2"),
    "diff": (lambda m: m.diff(A23, axis=5), "axis 5 is out of bounds for array of dimension 2"),
    "roll": (lambda m: m.roll(A23, 1, axis=5), "axis 5 is out of bounds for array of dimension 2"),
}


@pytest.mark.parametrize("case", list(AXIS_CASES))
def test_axis_out_of_range_is_a_plain_value_error(case):
    call, message = AXIS_CASES[case]
    with pytest.raises(ValueError) as info:
        call(jnp)
    # JAX's exception, not NumPy's AxisError (a ValueError subclass) leaking through
    assert type(info.value) is ValueError
    assert str(info.value) == message


@needs_jax
@pytest.mark.parametrize("case", list(AXIS_CASES))
def test_axis_out_of_range_matches_jax(case):
    call, message = AXIS_CASES[case]
    with pytest.raises(ValueError) as info:
        call(jax_numpy)
    assert type(info.value) is ValueError and str(info.value) == message


def test_softmax_axis_out_of_range():
    with pytest.raises(ValueError, match="axis 5 is out of bounds for array of dimension 2"):
        plax.nn.softmax(A23, axis=5)


# ------------------------------------------------------------------ scan carry types

XS = np.arange(3.0, dtype=np.float32)

CARRY_ERRORS = {
    # a weak float carry stays a float when the body returns an int32: the check names it
    "weak_float_to_int32": (lambda L, n: L.scan(lambda c, x: (n.int32(1), x), 0.0, XS),
                            "The input carry c has type float32[] but the corresponding output "
                            "carry component has type int32[], so the dtypes do not match."),
    "weak_float_to_weak_int": (lambda L, n: L.scan(lambda c, x: (1, x), 0.0, XS),
                               "The input carry c has type float32[] but the corresponding "
                               "output carry component has type int32[], so the dtypes do not "
                               "match."),
    "tree_component": (lambda L, n: L.scan(lambda carry, x: ((carry[0], n.int32(1)), x),
                                           (1.0, n.float32(0)), XS),
                       "The input carry component carry[1] has type float32[] but the "
                       "corresponding output carry component has type int32[], so the dtypes "
                       "do not match."),
    "while_loop": (lambda L, n: L.while_loop(lambda c: False, lambda val: n.int32(1), 0.0),
                   "The input carry val has type float32[] but the corresponding output carry "
                   "component has type int32[], so the dtypes do not match."),
    "fori_loop": (lambda L, n: L.fori_loop(0, 2, lambda i, c: n.int32(1), 0.0),
                  "The input carry component loop_carry[1] has type float32[] but the "
                  "corresponding output carry component has type int32[], so the dtypes do not "
                  "match."),
}


def _libs():
    out = [(lax, jnp)]
    if jax is not None:
        out.append((jax.lax, jax_numpy))
    return out


@pytest.mark.parametrize("case", list(CARRY_ERRORS))
def test_carry_changing_dtype_raises_type_error_naming_the_carry(case):
    call, message = CARRY_ERRORS[case]
    for L, n in _libs():  # plax, then JAX where installed
        with pytest.raises(TypeError) as info:
            call(L, n)
        assert message in str(info.value), (L.__name__, str(info.value))


def test_scan_carry_weak_types_follow_jax():
    def avals(out):
        return [(np.dtype(x.dtype).name, bool(x.weak_type)) for x in
                plax.tree_util.tree_leaves(out)[:1]]
    cases = {  # init, body carry output -> final carry type (JAX 0.10.2)
        "weak_int_to_float32": (0, lambda c: jnp.float32(1), ("float32", False)),
        "weak_int_to_weak_float": (0, lambda c: c + 1.5, ("float32", False)),
        "weak_float_to_float32": (0.0, lambda c: jnp.float32(1), ("float32", False)),
        "weak_float_stays_weak": (0.0, lambda c: c + 1, ("float32", True)),
        "float32_to_weak_float": (jnp.float32(0), lambda c: 1.0, ("float32", True)),
        "weak_int_to_int8": (0, lambda c: jnp.int8(1), ("int8", False)),
    }
    for name, (init, body, want) in cases.items():
        out = lax.scan(lambda c, x: (body(c), x), init, XS)
        assert avals(out) == [want], name


@needs_jax
def test_scan_carry_weak_types_match_jax():
    for init, body in ((0, lambda n, c: c + 1.5), (0.0, lambda n, c: c + 1),
                       (np.float32(0), lambda n, c: 1.0), (0, lambda n, c: n.int8(1))):
        for L, n in _libs():
            out = L.scan(lambda c, x: (body(n, c), x), init, XS)[0]
            got = (np.dtype(out.dtype).name, bool(out.weak_type))
            if L is lax:
                want = got
            else:
                assert got == want


# ------------------------------------------------------------------ .at[] on bool arrays

BOOLS = np.array([True, False, True])

AT_CASES = {  # JAX scatters in the promoted type, then casts back to bool
    "add_negative": (lambda b, n: b.at[1].add(-2), [True, True, True]),
    "add_cancels_to_false": (lambda b, n: b.at[0].add(-1), [False, False, True]),
    "add_repeated": (lambda b, n: b.at[n.array([0, 0])].add(-1), [True, False, True]),
    "multiply_zero": (lambda b, n: b.at[0].multiply(0), [False, False, True]),
    "multiply_half": (lambda b, n: b.at[0].multiply(0.5), [True, False, True]),
    "add_float": (lambda b, n: b.at[1].add(0.5), [True, True, True]),
}


@pytest.mark.parametrize("case", list(AT_CASES))
def test_at_add_on_bool_arrays(case):
    call, want = AT_CASES[case]
    for _, n in _libs():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # JAX's unsafe-cast warning
            out = call(n.asarray(BOOLS), n)
        assert out.dtype == np.bool_
        np.testing.assert_array_equal(np.asarray(out), want)


def test_at_update_warns_of_an_unsafe_cast_as_jax_does():
    with pytest.warns(FutureWarning, match="cannot safely cast value from dtype=int32 to "
                                           "dtype=bool"):
        jnp.asarray(BOOLS).at[1].add(-2)
    # int32 scatters in float32 then truncates: (3 * 0.5 -> 1.5 -> 1) and (1 + 0.5 + 0.5 -> 2)
    with pytest.warns(FutureWarning):
        out = jnp.array([1, 2, 3]).at[jnp.array([0, 0, 2])].multiply(0.5)
    np.testing.assert_array_equal(np.asarray(out), [0, 2, 1])
    with pytest.warns(FutureWarning):
        out = jnp.array([1, 2, 3]).at[jnp.array([0, 0])].add(0.5)
    np.testing.assert_array_equal(np.asarray(out), [2, 2, 3])


def test_at_add_of_a_bool_update_to_a_bool_array_still_raises():
    with pytest.raises(TypeError, match="bool"):
        jnp.asarray(BOOLS).at[0].add(True)
    if jax is not None:
        with pytest.raises(TypeError):
            jax_numpy.asarray(BOOLS).at[0].add(True)


def test_at_add_on_bool_under_jit_and_vmap():
    b = jnp.asarray(BOOLS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        np.testing.assert_array_equal(
            np.asarray(plax.jit(lambda b: b.at[0].add(-1))(b)), [False, False, True])
        out = plax.vmap(lambda b: b.at[0].add(-1))(jnp.stack([b, b]))
    np.testing.assert_array_equal(np.asarray(out), [[False, False, True]] * 2)


# ------------------------------------------------------------------ cumsum's accumulation order

def _xla_order_cumsum(x: np.ndarray, combine=np.add, identity=0) -> np.ndarray:
    """A slow model of XLA's CPU cumulative sum of a 1-d array (blocks of 16 scanned in order,
    a scan of the block totals, one combine per element), every step rounded to x's dtype."""
    n = len(x)
    if n <= 16:
        out, acc = [], None
        for v in x:
            acc = v if acc is None else combine(acc, v)
            out.append(acc)
        return np.array(out, x.dtype)
    pad = -n % 16
    blocks = np.concatenate([x, np.full(pad, identity, x.dtype)]).reshape(-1, 16)
    inner = np.stack([_xla_order_cumsum(b, combine, identity) for b in blocks])
    totals = _xla_order_cumsum(inner[:, -1].copy(), combine, identity)
    before = np.concatenate([np.full(1, identity, x.dtype), totals[:-1]])
    return combine(inner, before[:, None]).astype(x.dtype).reshape(-1)[:n]


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("n", [10, 50, 300])
def test_float16_cumsum_accumulates_in_xla_order(backend, n):
    plax.devices(backend=backend)  # skips below when the backend is missing
    x = np.linspace(0.1, 3.3, n).astype(np.float16)
    want = _xla_order_cumsum(x)
    for fun in (jnp.cumsum, plax.jit(jnp.cumsum, backend=backend)):
        got = np.asarray(fun(x))
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    # not float32 accumulation rounded at the end: that differs here (it was plax's order)
    if n >= 50:
        assert (np.cumsum(x.astype(np.float32)).astype(np.float16) != want).any()


def test_reverse_and_2d_cumsum_and_cumprod_agree_with_the_model():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 3)).astype(np.float16)
    got = np.asarray(jnp.cumsum(x, axis=0))
    for k in range(3):
        np.testing.assert_array_equal(got[:, k], _xla_order_cumsum(x[:, k]))
    p = rng.uniform(0.9, 1.1, 70).astype(np.float16)
    np.testing.assert_array_equal(np.asarray(jnp.cumprod(p)),
                                  _xla_order_cumsum(p, np.multiply, 1))


JAX_CUMULATIVE_CASES = [  # (dtype, shape, axis, reverse, op): each one XLA compile
    ("float16", (300, 2), 0, False, "cumsum"),
    ("float16", (3, 100), 1, True, "cumsum"),
    ("bfloat16", (70,), 0, False, "cumprod"),
    ("float32", (500,), 0, False, "cumsum"),
]


@needs_jax
@pytest.mark.parametrize("dtype,shape,axis,reverse,op", JAX_CUMULATIVE_CASES)
def test_cumulative_sums_match_jax_bit_for_bit(dtype, shape, axis, reverse, op):
    rng = np.random.default_rng(1)
    x = rng.uniform(0.9, 1.1, shape) if op == "cumprod" else rng.standard_normal(shape)
    xj = jax_numpy.asarray(x, dtype=dtype)
    want = np.asarray(getattr(jax.lax, op)(xj, axis=axis, reverse=reverse))
    got = np.asarray(getattr(lax, op)(jnp.asarray(np.asarray(xj)), axis=axis, reverse=reverse))
    assert got.dtype == want.dtype
    assert got.tobytes() == want.tobytes()


# ------------------------------------------------------------------ arange with a zero step

def test_arange_zero_step_raises_zero_division_error():
    for args in ((0, 5, 0), (0.0, 5.0, 0.0)):
        with pytest.raises(ZeroDivisionError, match="step"):
            jnp.arange(*args)
        if jax is not None:
            with pytest.raises(ZeroDivisionError):
                jax_numpy.arange(*args)


# ------------------------------------------------------------------ weak type of cotangents

def _weak_types(out):
    return [bool(x.weak_type) for x in plax.tree_util.tree_leaves(out)]


VJP_CASES = {  # the weak type of each returned cotangent, as JAX 0.10.2 gives it
    "vmap_over_cotangent": (
        lambda j, n: j.vmap(lambda ct: j.vjp(n.sin, 2.0)[1](ct))(n.ones(4)), [False]),
    "strong_cotangent": (lambda j, n: j.vjp(n.sin, 2.0)[1](n.ones(())), [False]),
    "weak_cotangent": (lambda j, n: j.vjp(n.sin, 2.0)[1](1.0), [True]),
    "promoted_float": (  # 2.0 is promoted to float32: its cotangent is cast back, weakly typed
        lambda j, n: j.vmap(lambda v: j.vjp(lambda a, b: a * b, v, 2.0)[1](n.ones(())))(
            n.arange(3.0)), [False, True]),
    "vmap_of_grad": (lambda j, n: j.vmap(j.grad(lambda a, b: a * b, argnums=1),
                                         in_axes=(0, None))(n.arange(3.0), 2.0), [True]),
}


@pytest.mark.parametrize("case", list(VJP_CASES))
def test_cotangent_weak_types(case):
    call, want = VJP_CASES[case]
    assert _weak_types(call(plax, jnp)) == want
    if jax is not None:
        assert [bool(x.weak_type) for x in jax.tree_util.tree_leaves(call(jax, jax_numpy))] \
            == want
