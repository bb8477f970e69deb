"""``x.at[idx].<op>(y)`` with integer arrays (and static ints and slices among them) stages one
scatter of windows, with the start indices and dimension numbers of the gather ``x[idx]``
reads with, as JAX 0.10.2 stages it (no iota of all of ``x``'s positions): values against
NumPy's ``ufunc.at`` in float64 over forms x ops x modes x index arrays (negative,
out-of-range, repeated), the staged jaxprs against JAX's, gradients against finite
differences, ``vmap`` against a loop, ``jit`` against eager on every CPU backend."""
from __future__ import annotations

import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax, plugins
from plax.test_util import check_grads
from jnp_index_strategies import numpy_update, target_positions

CPU_BACKENDS = sorted(name for name, b in plugins.registry().backends.items()
                      if b.platform == "cpu")
SHAPE = (5, 6, 7)

# name -> index from two integer arrays: ``i`` for an axis of 5, ``j`` for an axis of 6 or 7
FORMS = {
    "rows": lambda i, j: i,
    "rows_cols": lambda i, j: (i, j),
    "slice_then_array": lambda i, j: (slice(None), j),
    "ellipsis_then_array": lambda i, j: (Ellipsis, j),
    "non_adjacent": lambda i, j: (i, slice(None), j),
    "int_then_array": lambda i, j: (0, j),
    "array_then_negative_int": lambda i, j: (i, -1),
    "part_slice_then_array": lambda i, j: (slice(1, 4), j),
    "array_then_negative_step": lambda i, j: (i, slice(None, None, -2)),
    "new_axis_first": lambda i, j: (None, i, j),
    "broadcast_outer": lambda i, j: (i[:, None], j[None, :]),
}
# in-bounds, distinct positions (negative ones among them)
I_UNIQUE, J_UNIQUE = np.array([3, -1, 0], np.int32), np.array([5, 0, -3], np.int32)
# repeated, negative and out-of-range on both sides (7 and -6 on the axis of 5, 9 beyond 7)
I_OOB, J_OOB = np.array([1, -1, 7, 1, -6], np.int32), np.array([0, -2, 3, 9, 0], np.int32)
OPS = ["set", "add", "multiply", "min", "max"]
RNG = np.random.default_rng(47)
X = RNG.integers(-5, 6, SHAPE).astype(np.float32)  # small integers: every op exact in float32


def _values(shape, op):
    low, high = (1, 4) if op == "multiply" else (-9, 10)
    return RNG.integers(low, high, shape).astype(np.float32)


def _selected_shape(form, i, j) -> tuple:
    """The shape of ``x[idx]`` (which does not depend on the index values)."""
    return np.empty(SHAPE)[FORMS[form](np.zeros_like(i), np.zeros_like(j))].shape


def _check(out, idx, y, op, mode):
    """``out`` against NumPy's float64 update; where a clipped ``set`` writes one position
    twice, either value may win (as in JAX)."""
    want, candidates = numpy_update(X, idx, y, op, "clip" if mode == "clip" else "drop")
    got = np.asarray(out, np.float64).reshape(-1)
    want = want.reshape(-1)
    for pos, vals in candidates.items():
        assert got[pos] in vals, (pos, got[pos], vals)
        want[pos] = got[pos]
    np.testing.assert_array_equal(got, want, err_msg=f"x.at[{idx!r}].{op}(y, mode={mode})")


@pytest.mark.parametrize("form", sorted(FORMS))
def test_values_match_numpy_for_every_op_and_mode(form):
    for (i, j), modes in (((I_UNIQUE, J_UNIQUE), (None, "clip", "promise_in_bounds")),
                          ((I_OOB, J_OOB), ("drop", "clip"))):
        idx, unique = FORMS[form](i, j), i is I_UNIQUE
        for op in OPS:
            y = _values(_selected_shape(form, i, j), op)
            for mode in modes:
                out = getattr(jnp.asarray(X).at[idx], op)(y, mode=mode, unique_indices=unique,
                                                        indices_are_sorted=False)
                _check(out, idx, y, op, mode)


@pytest.mark.parametrize("op", ["divide", "power", "subtract"])
def test_other_updates_through_the_windowed_scatter(op):
    for form in ("rows_cols", "slice_then_array", "non_adjacent"):
        idx = FORMS[form](I_OOB, J_OOB)
        y = RNG.integers(1, 3, _selected_shape(form, I_OOB, J_OOB)).astype(np.float32)
        out = getattr(jnp.asarray(X).at[idx], op)(y)
        want = numpy_update(X, idx, -y, "add")[0] if op == "subtract" else \
            numpy_update(X, idx, y, op)[0]
        np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_one_windowed_scatter_and_no_iota_of_the_operand(form):
    idx = FORMS[form](I_UNIQUE, J_UNIQUE)
    y = np.zeros(X[idx].shape, np.float32)
    jaxpr = plax.make_jaxpr(lambda x, y: x.at[idx].max(y, unique_indices=True))(X, y)
    (eqn,) = [e for e in jaxpr.jaxpr.eqns if e.primitive.name.startswith("scatter")]
    assert eqn.primitive is lax.scatter_max_p
    assert eqn.invars[0].aval.shape == SHAPE  # (not the flattened operand)
    assert eqn.params["unique_indices"] is True
    assert not [e for e in jaxpr.jaxpr.eqns
                if e.primitive.name == "iota" and e.outvars[0].aval.size >= X.size]


def _without_update_computation(text: str) -> str:
    # JAX's scatters also print their combining computation (update_consts, update_jaxpr),
    # which plax's scatter primitives do not carry as parameters
    return re.sub(r"\n\s*update_consts=\(\)\n\s*update_jaxpr=(None|\{[^\n]*\})", "", text)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_staged_as_jax_stages_it(form):
    jax = pytest.importorskip("jax", reason="compares with JAX itself")
    idx_of = FORMS[form]
    y = np.zeros(_selected_shape(form, I_UNIQUE, J_UNIQUE), np.float32)
    programs = (lambda x, i, j, y: x.at[idx_of(i, j)].add(y),
                lambda x, i, j, y: x.at[idx_of(i, j)].set(y, mode="clip"),
                lambda x, i, j, y: x.at[idx_of(i, j)].multiply(y, unique_indices=True))
    for f in programs:
        ours = str(plax.make_jaxpr(f)(X, I_UNIQUE, J_UNIQUE, y))
        theirs = str(jax.make_jaxpr(f)(X, I_UNIQUE, J_UNIQUE, y))
        assert ours == _without_update_computation(theirs)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_gradients_against_finite_differences(form):
    idx = FORMS[form](I_UNIQUE, J_UNIQUE)
    x = RNG.standard_normal(SHAPE).astype(np.float32)
    # updates half a unit above or below the elements they meet: no near-tie for max
    y = x[idx] + RNG.choice([-0.5, 0.5], x[idx].shape).astype(np.float32)
    x, y = jnp.asarray(x), jnp.asarray(y)
    for op in ("set", "add", "max"):
        check_grads(lambda a, v: getattr(a.at[idx], op)(v), (x, y), order=1)
    check_grads(lambda a, v: a.at[idx].multiply(v, unique_indices=True), (x, y), order=1)
    # out-of-range updates get no cotangent (they are dropped), repeated ones each get theirs
    idx = FORMS[form](I_OOB, J_OOB)
    v = jnp.ones(_selected_shape(form, I_OOB, J_OOB), np.float32)
    g = plax.grad(lambda v: jnp.sum(jnp.asarray(X).at[idx].add(v) * X))(v)
    pos = target_positions(idx, SHAPE, "drop")
    want = np.where(pos >= 0, X.reshape(-1)[np.maximum(pos, 0)], 0.0)
    np.testing.assert_array_equal(np.asarray(g), want)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_vmap_against_a_loop(form):
    idx_of = FORMS[form]
    xs = RNG.integers(-5, 6, (3,) + SHAPE).astype(np.float32)
    i_s = np.stack([I_OOB, np.roll(I_OOB, 1), -I_OOB])
    j_s = np.stack([J_OOB, np.roll(J_OOB, 2), J_OOB[::-1]])
    ys = RNG.integers(-9, 10, (3,) + _selected_shape(form, I_OOB, J_OOB)).astype(np.float32)
    for op in ("add", "min"):
        f = lambda x, i, j, y: getattr(x.at[idx_of(i, j)], op)(y)  # noqa: E731
        got = plax.vmap(f)(xs, i_s, j_s, ys)
        want = [numpy_update(xs[b], idx_of(i_s[b], j_s[b]), ys[b], op)[0] for b in range(3)]
        np.testing.assert_array_equal(np.asarray(got), np.stack(want))
        # the indices shared, the operand and the values batched
        got = plax.vmap(f, in_axes=(0, None, None, 0))(xs, I_OOB, J_OOB, ys)
        want = [numpy_update(xs[b], idx_of(I_OOB, J_OOB), ys[b], op)[0] for b in range(3)]
        np.testing.assert_array_equal(np.asarray(got), np.stack(want))


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_jit_matches_eager_on_every_cpu_backend(backend):
    cases = [("rows_cols", "add", None), ("slice_then_array", "set", "clip"),
             ("non_adjacent", "min", None), ("int_then_array", "multiply", "drop"),
             ("array_then_negative_step", "max", None), ("new_axis_first", "add", "clip")]
    ys = [_values(_selected_shape(form, I_OOB, J_OOB), op) for form, op, _ in cases]

    def f(x, i, j, ys):
        return [getattr(x.at[FORMS[form](i, j)], op)(y, mode=mode)
                for (form, op, mode), y in zip(cases, ys)]
    jitted = plax.jit(f, backend=backend)(X, I_OOB, J_OOB, ys)
    eager = f(jnp.asarray(X), I_OOB, J_OOB, [jnp.asarray(y) for y in ys])
    for (form, op, mode), a, b, y in zip(cases, jitted, eager, ys):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        _check(a, FORMS[form](I_OOB, J_OOB), y, op, mode)
