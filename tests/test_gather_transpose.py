"""Out-of-bounds and negative indices in every gather / dynamic_slice / scatter path, forward
and backward, against JAX's semantics.

Each row of the table is an indexing operation in one mode, run on ``X = [1, 2, 3, 4, 5]``
with the index pairs of ``INDEX_CASES`` (in bounds, negative, past the end, before the
start). The expected value and gradients come from a small model of JAX's rules:

* gathers (``x[idx]``, ``.at[].get``, ``take``, ``take_along_axis``, ``lax.gather``) first
  wrap negative indices (not ``lax.gather``, ``take(mode="clip")`` nor
  ``take_along_axis(mode="promise_in_bounds")``), then per mode:

  - ``"promise_in_bounds"`` (the default of ``x[idx]`` and ``lax.gather``): clamped on the
    way forward; the transpose, a scatter-add, drops out-of-bounds cotangents (zero gradient);
  - ``"clip"``: clamped both ways (the gradient goes to the clamped element);
  - ``"fill"`` / ``"drop"`` (the default of ``take``): NaN, with zero gradient;

* a scalar index (an int, a 0-d array, a traced scalar) and ``lax.dynamic_slice`` and
  friends wrap negative starts, then clamp the window into the array, both ways;
* scatters (``.at[].set/add``, ``lax.scatter*``) drop out-of-bounds updates (``"drop"``, the
  default, and ``"promise_in_bounds"``) or clamp them (``"clip"``); the cotangent of a dropped
  update under ``"promise_in_bounds"`` is unspecified (JAX's own is not meaningful), so it is
  not checked.

The table runs without JAX; when JAX is importable, every row is also run on JAX and compared
with the same model.
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax

try:
    import jax
    import jax.numpy as jax_numpy
    from jax import lax as jax_lax
except ImportError:  # pragma: no cover - depends on the environment
    jax = None

N = 5
X = np.arange(1.0, N + 1, dtype=np.float32)
U = np.array([10.0, 20.0], np.float32)
INDEX_CASES = {"in_bounds": [1, 3], "negative": [-1, -5], "high": [5, 7], "low": [-6, -9]}


# ------------------------------------------------------------------ the model of JAX's rules

def _wrapped(idx, wrap):
    idx = np.asarray(idx)
    return np.where(idx < 0, idx + N, idx) if wrap else idx


def gather_ref(rule, wrap):
    """(value, d/dx, d/du) of ``sum(ct * f(x))``, ``ct = 1, 2, ...``, for a gather of ``idx``."""
    def ref(idx):
        idx = np.asarray(idx)
        if rule == "wrap":  # take(mode="wrap"): modulo, then in bounds
            i, kind = np.mod(idx, N), "clip"
        else:
            i, kind = _wrapped(idx, wrap), rule
        oob = (i < 0) | (i >= N)
        c = np.clip(i, 0, N - 1)
        value = X[c].astype(np.float32)
        if kind == "fill":
            value[oob] = np.nan
        live = ~oob if kind in ("fill", "promise_in_bounds") else np.ones_like(oob)
        ct = np.arange(1.0, len(idx) + 1)
        gx = np.zeros(N)
        np.add.at(gx, c[live], ct[live])
        return value, gx, np.zeros(2)
    return ref


def window_ref(size, update=False, squeeze=False):
    """A window of ``size`` at the first index, negative starts wrapped, then clamped."""
    def ref(idx):
        s = int(np.clip(_wrapped(idx[0], True), 0, N - size))
        if update:
            value = X.copy()
            value[s:s + size] = U[:size]
            ct = np.arange(1.0, N + 1)
            gx = ct.copy()
            gx[s:s + size] = 0
            gu = np.zeros(2)
            gu[:size] = ct[s:s + size]
            return value, gx, gu
        value = X[s:s + size]
        gx = np.zeros(N)
        gx[s:s + size] = np.arange(1.0, size + 1)
        return (value[0] if squeeze else value), gx, np.zeros(2)
    return ref


def scatter_ref(op, rule, wrap=True):
    """``x.at[idx].<op>(u)``: dropped or clamped updates; the last of repeated indices wins a
    ``set`` (as XLA's CPU scatter, and plax's, order them)."""
    def ref(idx):
        i = _wrapped(idx, wrap)
        oob = (i < 0) | (i >= N)
        c = np.clip(i, 0, N - 1) if rule == "clip" else i
        live = np.ones_like(oob) if rule == "clip" else ~oob
        ct = np.arange(1.0, N + 1)
        value, gx, gu = X.copy(), ct.copy(), np.zeros(2)
        for k in range(2):
            if live[k]:
                if op == "set":
                    value[c[k]] = U[k]
                    gx[c[k]] = 0
                else:
                    value[c[k]] += U[k]
        for k in range(2):
            if live[k] and (op != "set" or k == max(j for j in range(2) if live[j] and c[j] == c[k])):
                gu[k] = ct[c[k]]
        if rule == "promise_in_bounds":
            gu[oob] = np.nan  # unspecified
        return value, gx, gu
    return ref


# ------------------------------------------------------------------ the operations

def _dnums(lax_mod, scatter=False):
    if scatter:
        return lax_mod.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                               scatter_dims_to_operand_dims=(0,))
    return lax_mod.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,),
                                          start_index_map=(0,))


def _scalar(m, idx):
    return m.asarray(idx[0], dtype=m.int32)


# (name, f(m, lax, x, u, idx) written against a jax.numpy-like module, reference)
GATHERS = [
    ("x[idx]", lambda m, L, x, u, i: x[m.asarray(i)], gather_ref("promise_in_bounds", True)),
    ("at.get()", lambda m, L, x, u, i: x.at[m.asarray(i)].get(),
     gather_ref("promise_in_bounds", True)),
] + [
    (f"at.get({mode})", (lambda mode: lambda m, L, x, u, i: x.at[m.asarray(i)].get(mode=mode))(mode),
     gather_ref(rule, True))
    for mode, rule in [("clip", "clip"), ("fill", "fill"), ("drop", "fill"),
                       ("promise_in_bounds", "promise_in_bounds")]
] + [
    (f"take({mode})", (lambda mode: lambda m, L, x, u, i: m.take(x, m.asarray(i), mode=mode))(mode),
     ref)
    for mode, ref in [(None, gather_ref("fill", True)), ("fill", gather_ref("fill", True)),
                      ("clip", gather_ref("clip", False)), ("wrap", gather_ref("wrap", True))]
] + [
    (f"take_along_axis({mode})", (lambda mode: lambda m, L, x, u, i: m.take_along_axis(
        x, m.asarray(i), axis=0, mode=mode))(mode), ref)
    for mode, ref in [(None, gather_ref("fill", True)), ("fill", gather_ref("fill", True)),
                      ("clip", gather_ref("clip", True)),
                      ("promise_in_bounds", gather_ref("promise_in_bounds", False))]
] + [
    (f"lax.gather({mode})", (lambda mode: lambda m, L, x, u, i: L.gather(
        x, m.asarray(i)[:, None], _dnums(L), (1,), mode=mode))(mode), gather_ref(rule, False))
    for mode, rule in [(None, "promise_in_bounds"), ("clip", "clip"), ("fill", "fill"),
                       ("promise_in_bounds", "promise_in_bounds")]
]

WINDOWS = [
    ("x[scalar]", lambda m, L, x, u, i: x[_scalar(m, i)], window_ref(1, squeeze=True)),
    ("x[int]", lambda m, L, x, u, i: x[int(i[0])], window_ref(1, squeeze=True)),
    ("at[scalar].get()", lambda m, L, x, u, i: x.at[_scalar(m, i)].get(),
     window_ref(1, squeeze=True)),
    ("at[scalar].get(clip)", lambda m, L, x, u, i: x.at[_scalar(m, i)].get(mode="clip"),
     window_ref(1, squeeze=True)),
    ("lax.dynamic_slice", lambda m, L, x, u, i: L.dynamic_slice(x, (_scalar(m, i),), (2,)),
     window_ref(2)),
    ("lax.dynamic_slice(int)", lambda m, L, x, u, i: L.dynamic_slice(x, (int(i[0]),), (2,)),
     window_ref(2)),
    ("lax.dynamic_slice_in_dim", lambda m, L, x, u, i: L.dynamic_slice_in_dim(x, _scalar(m, i), 2),
     window_ref(2)),
    ("lax.dynamic_index_in_dim", lambda m, L, x, u, i: L.dynamic_index_in_dim(
        x, _scalar(m, i), keepdims=False), window_ref(1, squeeze=True)),
    ("lax.dynamic_update_slice", lambda m, L, x, u, i: L.dynamic_update_slice(
        x, u, (_scalar(m, i),)), window_ref(2, update=True)),
    ("lax.dynamic_update_slice_in_dim", lambda m, L, x, u, i: L.dynamic_update_slice_in_dim(
        x, u, _scalar(m, i), 0), window_ref(2, update=True)),
]

SCATTERS = [
    (f"at.{op}({mode})", (lambda op, mode: lambda m, L, x, u, i: getattr(
        x.at[m.asarray(i)], op)(u, mode=mode))(op, mode), scatter_ref(op, rule))
    for op in ("set", "add")
    for mode, rule in [(None, "drop"), ("drop", "drop"), ("clip", "clip"),
                       ("promise_in_bounds", "promise_in_bounds")]
] + [
    (f"lax.{name}({mode})", (lambda name, mode: lambda m, L, x, u, i: getattr(L, name)(
        x, m.asarray(i)[:, None], u, _dnums(L, True), mode=mode))(name, mode),
     scatter_ref(op, rule, wrap=False))
    for name, op in [("scatter", "set"), ("scatter_add", "add")]
    for mode, rule in [(None, "drop"), ("clip", "clip"), ("promise_in_bounds", "promise_in_bounds")]
]

ROWS = [pytest.param(f, ref, idx, id=f"{name}-{case}")
        for name, f, ref in GATHERS + WINDOWS + SCATTERS
        for case, idx in INDEX_CASES.items()]


def _run(m, L, grad, f, idx, jit=None):
    x, u = m.asarray(X), m.asarray(U)

    def loss(x, u):
        out = f(m, L, x, u, idx)
        ct = m.arange(1.0, out.size + 1, dtype=m.float32).reshape(out.shape)
        return m.sum(m.where(m.isnan(out), 0.0, out) * ct)

    value = f(m, L, x, u, idx)
    if jit is not None:
        value_jit = jit(lambda x, u: f(m, L, x, u, idx))(x, u)
        np.testing.assert_array_equal(np.asarray(value_jit), np.asarray(value))
    gx, gu = grad(loss, argnums=(0, 1))(x, u)
    return np.asarray(value), np.asarray(gx), np.asarray(gu)


def _check(got, expected, label):
    for what, g, e in zip(("value", "d/dx", "d/du"), got, expected):
        e = np.asarray(e, np.float64)
        g = np.asarray(g, np.float64)
        assert g.shape == e.shape, f"{label}: {what} shape {g.shape}, expected {e.shape}"
        if what == "d/du":  # NaN marks an unspecified cotangent
            g, e = np.where(np.isnan(e), 0, g), np.where(np.isnan(e), 0, e)
        np.testing.assert_allclose(g, e, rtol=1e-6, equal_nan=True,
                                   err_msg=f"{label}: {what}")


@pytest.mark.parametrize("f,ref,idx", ROWS)
def test_value_and_gradient(f, ref, idx):
    expected = ref(idx)
    _check(_run(jnp, lax, plax.grad, f, idx, jit=plax.jit), expected, "plax")
    if jax is not None:
        _check(_run(jax_numpy, jax_lax, jax.grad, f, idx), expected, "jax")


def test_out_of_bounds_gather_gradient_is_zero():
    # the reported case: the gradient of x[idx] does not reach the clamped element
    x = jnp.asarray(X)
    idx = jnp.array([1, 7, -9])
    np.testing.assert_array_equal(np.asarray(x[idx]), [2.0, 5.0, 1.0])
    g = plax.grad(lambda x: jnp.sum(x[idx]))(x)
    np.testing.assert_array_equal(np.asarray(g), [0.0, 1.0, 0.0, 0.0, 0.0])
    # with mode="clip" the clamped reads do get it
    g = plax.grad(lambda x: jnp.sum(x.at[idx].get(mode="clip")))(x)
    np.testing.assert_array_equal(np.asarray(g), [1.0, 1.0, 0.0, 0.0, 1.0])


def test_two_dimensional_rows_and_pairs():
    x2 = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    rows = np.array([3, -1, -4, 1])
    cols = np.array([0, 5, 1, -5])

    def run(m, grad):
        x = m.asarray(x2)
        r, c = m.asarray(rows), m.asarray(cols)
        out = []
        for f in (lambda x: x[r], lambda x: x[r, c], lambda x: x[:, c],
                  lambda x: x.at[r].get(mode="clip"), lambda x: x.at[r, c].get(mode="fill")):
            out.append((np.asarray(f(x)),
                        np.asarray(grad(lambda x: m.sum(m.where(m.isnan(f(x)), 0.0, f(x))))(x))))
        return out

    got = run(jnp, plax.grad)
    # x[rows]: rows 3 and -4 are out of bounds (clamped reads, no gradient)
    np.testing.assert_array_equal(got[0][0], x2[[2, 2, 0, 1]])
    np.testing.assert_array_equal(got[0][1], np.array([[0] * 4, [1] * 4, [1] * 4], np.float32))
    # x[rows, cols]: every pair has a coordinate out of bounds (-4 + 3 and -5 + 4 are still
    # negative), so every read is clamped and none gets a gradient
    np.testing.assert_array_equal(got[1][0], x2[[2, 2, 0, 1], [0, 3, 1, 0]])
    np.testing.assert_array_equal(got[1][1], np.zeros((3, 4), np.float32))
    # x[:, cols]: columns 5 and -5 are out of bounds
    np.testing.assert_array_equal(got[2][0], x2[:, [0, 3, 1, 0]])
    expected = np.zeros((3, 4), np.float32)
    expected[:, [0, 1]] = 1
    np.testing.assert_array_equal(got[2][1], expected)
    # clip: clamped both ways
    np.testing.assert_array_equal(got[3][1], np.array([[1] * 4, [1] * 4, [2] * 4], np.float32))
    # fill: NaN out of bounds, zero gradient there
    assert np.isnan(got[4][0]).all()
    np.testing.assert_array_equal(got[4][1], np.zeros((3, 4), np.float32))
    if jax is not None:
        for (v, g), (jv, jg) in zip(got, run(jax_numpy, jax.grad)):
            np.testing.assert_array_equal(v, jv)
            np.testing.assert_array_equal(g, jg)


def test_vmapped_scalar_index_clamps_both_ways():
    # under vmap a scalar index is batched: JAX's dynamic_slice path, clamped both ways
    x2 = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    ks = np.array([5, -1, -9], np.int32)

    def run(m, vmap, grad):
        f = lambda x: vmap(lambda r, k: r[k])(x, m.asarray(ks))  # noqa: E731
        return np.asarray(f(m.asarray(x2))), np.asarray(grad(lambda x: m.sum(f(x)))(m.asarray(x2)))

    value, g = run(jnp, plax.vmap, plax.grad)
    np.testing.assert_array_equal(value, [3.0, 7.0, 8.0])
    expected = np.zeros((3, 4), np.float32)
    expected[0, 3] = expected[1, 3] = expected[2, 0] = 1
    np.testing.assert_array_equal(g, expected)
    if jax is not None:
        jv, jg = run(jax_numpy, jax.vmap, jax.grad)
        np.testing.assert_array_equal(value, jv)
        np.testing.assert_array_equal(g, jg)


def test_dynamic_slice_allow_negative_indices():
    x = jnp.arange(5)
    np.testing.assert_array_equal(np.asarray(lax.dynamic_slice(x, (-2,), (2,))), [3, 4])
    np.testing.assert_array_equal(
        np.asarray(lax.dynamic_slice(x, (jnp.int32(-2),), (2,), allow_negative_indices=False)),
        [0, 1])  # not wrapped: clamped to 0
    with pytest.raises(ValueError, match="allow_negative_indices"):
        lax.dynamic_slice(x, (-2,), (2,), allow_negative_indices=False)
    np.testing.assert_array_equal(np.asarray(lax.dynamic_slice(x, jnp.array([-1]), (2,))), [3, 4])
    np.testing.assert_array_equal(
        np.asarray(lax.dynamic_update_slice(x, jnp.array([7, 8], jnp.int32), (-1,))),
        [0, 1, 2, 7, 8])
    # unsigned starts are never negative
    np.testing.assert_array_equal(np.asarray(lax.dynamic_slice(x, (np.uint8(3),), (2,))), [3, 4])
