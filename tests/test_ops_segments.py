"""``jax.ops`` segment reductions against a NumPy loop (and beside JAX 0.10.2 where installed),
plus the small names of JAX's surface added with them: ``jax.typing``, ``named_scope``,
``named_call``, ``print_environment_info`` and ``process_indices``."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import ops

_REDUCE = {"sum": (np.add, 0), "prod": (np.multiply, 1), "max": (np.maximum, -np.inf),
           "min": (np.minimum, np.inf)}


def _reference(kind, data, ids, n, clip=False):
    op, identity = _REDUCE[kind]
    data = np.asarray(data, np.float64)
    out = np.full((n,) + data.shape[1:], identity, np.float64)
    for row, s in zip(data, ids):
        if clip:
            s = min(max(s, 0), n - 1)
        if 0 <= s < n:
            out[s] = op(out[s], row)
    return out


_CASES = {
    "dropped_negative_id": (np.array([1.0, 2, 3, 4]), np.array([0, 0, 2, -1]), 4, {}),
    "unsorted_2d": (np.arange(8.0).reshape(4, 2), np.array([1, 0, 1, 5]), 2, {}),
    "bucketed": (np.array([1.5, 2, 3, 4, 0.5]), np.array([0, 1, 1, 0, 1]), 2,
                 {"bucket_size": 2}),
    "clip": (np.array([1.0, 2, 3, 4]), np.array([0, 1, 7, 0]), 2, {"mode": "clip"}),
}


@pytest.mark.parametrize("case", sorted(_CASES))
@pytest.mark.parametrize("kind", sorted(_REDUCE))
def test_segment_reductions_match_a_loop(kind, case):
    data, ids, n, kw = _CASES[case]
    got = getattr(ops, f"segment_{kind}")(jnp.asarray(data, np.float32), jnp.asarray(ids), n,
                                         **kw)
    want = _reference(kind, data, ids, n, clip=kw.get("mode") == "clip")
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-6)
    assert got.dtype == np.float32


@pytest.mark.parametrize("kind", sorted(_REDUCE))
def test_integer_identities_and_inferred_count(kind):
    got = getattr(ops, f"segment_{kind}")(jnp.array([1, 2, 3]), jnp.array([0, 0, 2]))
    assert got.shape == (3,) and got.dtype == np.int32
    empty = {"sum": 0, "prod": 1, "max": np.iinfo(np.int32).min,
             "min": np.iinfo(np.int32).max}[kind]
    assert int(got[1]) == empty


def test_under_jit_and_grad():
    d = jnp.array([1.0, 2, 3, 4])
    ids = jnp.array([2, 1, 0, 0])
    f = plax.jit(lambda d, i: ops.segment_sum(d, i, 3))
    np.testing.assert_array_equal(f(d, ids), [7.0, 2.0, 1.0])
    g = plax.grad(lambda d: ops.segment_sum(d, jnp.array([0, 1, 1, 0]), 2)[1] * 3)(d)
    np.testing.assert_array_equal(g, [0.0, 3.0, 3.0, 0.0])
    with pytest.raises(plax.errors.ConcretizationTypeError, match="num_segments"):
        plax.jit(lambda d, i: ops.segment_sum(d, i))(d, ids)


def test_errors():
    with pytest.raises(TypeError, match="bool"):
        ops.segment_sum(jnp.array([True, False]), jnp.array([0, 0]))
    with pytest.raises(TypeError, match="integer"):
        ops.segment_sum(jnp.ones(2), jnp.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="non-negative"):
        ops.segment_sum(jnp.ones(2), jnp.array([0, 1]), -1)
    with pytest.raises(TypeError, match="segment_sum requires ndarray or scalar arguments"):
        ops.segment_sum([1.0, 2.0], jnp.array([0, 1]))


@pytest.mark.parametrize("kind", sorted(_REDUCE))
def test_beside_jax(kind):
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    import jax.ops  # noqa: F401
    for data, ids, n, kw in _CASES.values():
        ours = getattr(ops, f"segment_{kind}")(jnp.asarray(data, np.float32), jnp.asarray(ids),
                                              n, **kw)
        theirs = getattr(jax.ops, f"segment_{kind}")(jax.numpy.asarray(data, np.float32),
                                                     jax.numpy.asarray(ids), n, **kw)
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6)


def test_typing_names():
    from plax.typing import ArrayLike, DTypeLike
    import typing
    assert plax.Array in typing.get_args(ArrayLike) and float in typing.get_args(ArrayLike)
    assert np.dtype in typing.get_args(DTypeLike)


def test_named_scope_and_named_call_leave_the_program_unchanged():
    f = lambda x: x * 2  # noqa: E731
    plain = str(plax.make_jaxpr(f)(1.0))
    with plax.named_scope("layer"):
        assert str(plax.make_jaxpr(f)(1.0)) == plain
    assert str(plax.make_jaxpr(plax.named_call(f, name="double"))(1.0)) == plain
    assert plax.named_call(f, name="double")(3) == 6
    with pytest.raises(TypeError, match="named_scope name argument must be a string."):
        with plax.named_scope(3):
            pass


def test_environment_info_and_process_indices(capsys):
    text = plax.print_environment_info(return_string=True)
    assert text.splitlines()[0] == f"plax:   {plax.__version__}"
    assert f"numpy:  {np.__version__}" in text and "process_count: 1" in text
    assert plax.print_environment_info() is None
    assert capsys.readouterr().out.strip() == text
    assert plax.process_indices() == list(range(plax.process_count()))


def test_flatten_one_level_with_keys():
    import collections
    from plax.tree_util import DictKey, GetAttrKey, SequenceKey, flatten_one_level_with_keys
    Pair = collections.namedtuple("Pair", "a b")
    assert flatten_one_level_with_keys({"b": (2, 3), "a": 1}) == (
        ((DictKey("a"), 1), (DictKey("b"), (2, 3))), ("a", "b"))
    assert flatten_one_level_with_keys([1, None]) == (
        ((SequenceKey(0), 1), (SequenceKey(1), None)), None)
    # each field its own key (JAX 0.10.2 names both 'a': a bug not copied)
    assert flatten_one_level_with_keys(Pair(1, 2)) == (
        [(GetAttrKey("a"), 1), (GetAttrKey("b"), 2)], Pair)
    assert flatten_one_level_with_keys(None) == ((), None)
    with pytest.raises(ValueError, match="can't tree-flatten type"):
        flatten_one_level_with_keys(1)
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    for t in [{"b": (2, 3), "a": 1}, [1, None], (1,), None]:
        assert repr(flatten_one_level_with_keys(t)) == repr(
            jax.tree_util.flatten_one_level_with_keys(t))
