"""lax.ragged_all_to_all under vmap(axis_name=...) (one process): JAX 0.10.2's documented
example, random ragged layouts against a NumPy loop of JAX's pseudocode, groups, jit, grads
against finite differences, and JAX's errors. (XLA:CPU cannot run JAX's ragged_all_to_all,
so values are checked against JAX's documentation and the loop; error types against JAX's
tracing where JAX is installed. The multi-device run is in multi_device_checks.py.)"""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.test_util import check_grads

R = np.random.default_rng(25)


def _ref(operand, output, in_off, send, out_off, recv, groups=None):
    """JAX's pseudocode, member by member: ``operand`` ... ``recv`` stacked over members."""
    n_all = operand.shape[0]
    groups = groups or [list(range(n_all))]
    result = np.array(output, copy=True)
    for group in groups:
        n = len(group)
        per = in_off.shape[1] // n
        for r, me in enumerate(group):
            for i in range(in_off.shape[1]):
                s, j = divmod(i, per)
                sender = group[s]
                start, dst = in_off[sender, r * per + j], out_off[sender, r * per + j]
                size = recv[me, i]
                result[me, dst:dst + size] = operand[sender, start:start + size]
    return result


def _layout(n, per, tail=(), groups=None):
    """A consistent random ragged exchange among ``n`` members: sizes drawn per (sender,
    receiver, j); each sender packs its slices, each receiver packs what it receives."""
    groups = groups or [list(range(n))]
    g = len(groups[0])
    k = g * per
    sizes = R.integers(0, 4, (n, k))                              # sender's send_sizes
    in_off = np.zeros((n, k), np.int32)
    out_off = np.zeros((n, k), np.int32)
    recv = np.zeros((n, k), np.int32)
    in_off[:, 1:] = np.cumsum(sizes, axis=1)[:, :-1]
    for group in groups:
        for r, me in enumerate(group):
            at = 1                                                # a padding row first
            for i in range(k):
                s, j = divmod(i, per)
                size = sizes[group[s], r * per + j]
                out_off[group[s], r * per + j] = at
                recv[me, i] = size
                at += size
    n_rows = int(sizes.sum(axis=1).max()) + 2
    m_rows = int(recv.sum(axis=1).max()) + 3
    operand = R.standard_normal((n, n_rows) + tail).astype(np.float32)
    output = R.standard_normal((n, m_rows) + tail).astype(np.float32)
    return operand, output, in_off, sizes.astype(np.int32), out_off, recv


def _vmapped(**kw):
    return plax.vmap(lambda *a: lax.ragged_all_to_all(*a, axis_name="i", **kw), axis_name="i")


def test_jax_documented_example():
    out = _vmapped()(jnp.array([[1., 2., 2.], [3., 4., 0.]]), jnp.zeros((2, 4)),
                     jnp.array([[0, 1], [0, 1]]), jnp.array([[1, 2], [1, 1]]),
                     jnp.array([[0, 0], [1, 2]]), jnp.array([[1, 1], [2, 1]]))
    np.testing.assert_array_equal(out, [[1, 3, 0, 0], [2, 2, 4, 0]])
    assert out.dtype == np.float32


@pytest.mark.parametrize("n, per, tail", [(2, 1, ()), (3, 2, (2,)), (4, 1, (2, 3))])
def test_random_layouts_match_loop(n, per, tail):
    args = _layout(n, per, tail)
    np.testing.assert_array_equal(_vmapped()(*args), _ref(*args))


def test_axis_index_groups():
    groups = [[0, 2], [1, 3]]
    args = _layout(4, 2, (2,), groups)
    np.testing.assert_array_equal(_vmapped(axis_index_groups=groups)(*args),
                                  _ref(*args, groups=groups))


def test_jit_matches_eager():
    args = _layout(3, 1, (2,))
    np.testing.assert_array_equal(plax.jit(_vmapped())(*args), _vmapped()(*args))


def test_grads_match_finite_differences():
    operand, output, *tables = _layout(3, 1)
    f = lambda a, b: _vmapped()(a, b, *tables)
    check_grads(f, (operand.astype(np.float64), output.astype(np.float64)), order=1,
                modes=("fwd", "rev"))


def test_integer_and_bool_data():
    for dtype in (np.int32, np.bool_):
        operand, output, *tables = _layout(2, 2)
        operand, output = (operand > 0).astype(dtype), (output > 0).astype(dtype)
        out = _vmapped()(operand, output, *tables)
        assert out.dtype == dtype
        np.testing.assert_array_equal(out, _ref(operand, output, *tables))


BAD = {
    "float_offsets": (lambda t: (t[0].astype(np.float32),) + t[1:], ValueError,
                      "input_offsets must be integer"),
    "float_recv_sizes": (lambda t: t[:3] + (t[3].astype(np.float32),), ValueError,
                         "recv_sizes must be integer"),
    "two_d_sizes": (lambda t: (t[0],) + (t[1][:, :, None],) + t[2:], ValueError,
                    "send_sizes must be rank 1"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_errors(name):
    operand, output, *tables = _layout(2, 1)
    change, exc, match = BAD[name]
    with pytest.raises(exc, match=match):
        _vmapped()(operand, output, *change(tuple(tables)))


@pytest.mark.parametrize("name", sorted(BAD))
def test_errors_are_jax_types(name):
    jax = pytest.importorskip("jax")
    operand, output, *tables = _layout(2, 1)
    change, exc, _ = BAD[name]
    from jax.sharding import AxisType, PartitionSpec
    mesh = jax.make_mesh((1,), ("i",), axis_types=(AxisType.Auto,))
    f = jax.shard_map(lambda *a: jax.lax.ragged_all_to_all(*a, axis_name="i"), mesh=mesh,
                      in_specs=PartitionSpec(), out_specs=PartitionSpec(), check_vma=False)
    with pytest.raises(exc):  # JAX checks at tracing (its CPU backend cannot run it)
        jax.make_jaxpr(f)(*[a[0] for a in (operand, output, *change(tuple(tables)))])


def test_errors_jax_leaves_to_xla():
    operand, output, *tables = _layout(2, 1)
    with pytest.raises(ValueError, match="multiple of the number of members"):
        _vmapped()(operand, output, *[np.concatenate([t, t[:, :1]], 1) for t in tables])
    with pytest.raises(TypeError, match="same dtype"):
        _vmapped()(operand, output.astype(np.int32), *tables)
    with pytest.raises(ValueError, match="past their leading axis"):
        _vmapped()(operand, output[:, :, None], *tables)
    with pytest.raises(NameError, match="unbound axis name"):
        lax.ragged_all_to_all(operand[0], output[0], *[t[0] for t in tables], axis_name="i")
