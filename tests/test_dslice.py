"""``jax.ds`` (``dslice``): a slice with a traced start, on refs and arrays, as JAX 0.10.2 has
it (beside JAX where installed), with values against NumPy slicing."""
from __future__ import annotations

import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.state.indexing import Slice


def test_ds_builds_slices_as_python_slices_read():
    assert repr(plax.ds(1, 2)) == "Slice(start=1, size=2, stride=1)"
    assert plax.ds(None) == slice(None)
    assert plax.ds(3) == Slice(0, 3, 1)
    assert plax.ds(1, 2, 3) == Slice(1, 2, 3)
    with pytest.raises(ValueError, match="Non-static stride in `dslice`"):
        plax.ds(1, 2, jnp.int32(1))
    with pytest.raises(ValueError, match="`stride` must be >= 0"):
        Slice(0, 2, -1)


def test_ds_beside_jax():
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    for args in [(1, 2), (None,), (3,), (1, 2, 3)]:
        assert repr(plax.ds(*args)) == repr(jax.ds(*args))


def test_slice_is_a_pytree_whose_traced_start_is_a_leaf():
    leaves, tree = plax.tree_util.tree_flatten(plax.ds(1, 2))
    assert leaves == []
    assert plax.tree_util.tree_unflatten(tree, leaves) == plax.ds(1, 2)
    f = plax.jit(lambda x, s: x[s])
    x = jnp.arange(10.0)
    traced = []
    g = plax.jit(lambda x, i: (traced.append(1), x[plax.ds(i, 3)])[1])
    np.testing.assert_array_equal(g(x, 2), [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(g(x, 5), [5.0, 6.0, 7.0])
    assert len(traced) == 1  # the start is an operand, not part of the cache key
    np.testing.assert_array_equal(f(x, plax.ds(1, 2)), [1.0, 2.0])


_ARRAY_CASES = [  # (shape, make the index from i, the NumPy index for a start i)
    ((10,), lambda i: plax.ds(i, 2), lambda i: slice(i, i + 2)),
    ((10,), lambda i: plax.ds(i, 3, 2), lambda i: slice(i, i + 5, 2)),
    ((2, 3, 4), lambda i: (0, plax.ds(i, 2), np.array([1, 2])),
     lambda i: (0, slice(i, i + 2), np.array([1, 2]))),
    ((2, 3, 4), lambda i: (Ellipsis, plax.ds(i, 2)), lambda i: (Ellipsis, slice(i, i + 2))),
    ((2, 3, 4), lambda i: (None, plax.ds(i, 1), 1), lambda i: (None, slice(i, i + 1), 1)),
]


@pytest.mark.parametrize("case", range(len(_ARRAY_CASES)))
def test_array_indexing_eager_and_jit(case):
    shape, make, ref_index = _ARRAY_CASES[case]
    host = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    x = jnp.asarray(host)
    for i in (0, 1):
        want = host[ref_index(i)]
        np.testing.assert_array_equal(x[make(i)], want)
        np.testing.assert_array_equal(plax.jit(lambda x, i: x[make(i)])(x, i), want)


@pytest.mark.parametrize("op", ["set", "add", "multiply"])
def test_array_updates(op):
    host = np.arange(10, dtype=np.float32)
    f = plax.jit(lambda x, i: getattr(x.at[plax.ds(i, 3, 2)], op)(7.0))
    for i in (0, 3):
        want = host.copy()
        sl = slice(i, i + 5, 2)
        want[sl] = {"set": 7.0, "add": want[sl] + 7, "multiply": want[sl] * 7}[op]
        np.testing.assert_array_equal(f(jnp.asarray(host), i), want)


def test_traced_start_is_wrapped_and_clamped_as_dynamic_slice_does():
    x = jnp.arange(10.0)
    f = plax.jit(lambda x, i: x[plax.ds(i, 3)])
    np.testing.assert_array_equal(f(x, -2), [7.0, 8.0, 9.0])  # -2 wraps to 8, clamped to 7
    np.testing.assert_array_equal(f(x, 9), [7.0, 8.0, 9.0])


def test_gradient_through_a_dynamic_slice():
    x = np.linspace(-1, 1, 10)
    g = plax.grad(lambda x, i: jnp.sum(x[plax.ds(i, 3)] ** 2))(jnp.asarray(x, np.float32), 4)
    want = np.zeros(10)
    want[4:7] = 2 * x[4:7]
    np.testing.assert_allclose(g, want, rtol=1e-6)


def _ref_program(x, i):
    r = plax.new_ref(x)
    r[1, plax.ds(i, 2)] = jnp.ones(2)
    r[plax.ds(1, 2), plax.ds(i, 1)] += 1.0
    r[2, plax.ds(i, 2, 2)] = r[0, plax.ds(i, 2, 2)] * 10
    return r[...], r[0, plax.ds(i, 3)]


def _ref_reference(host, i):
    out = host.copy()
    out[1, i:i + 2] = 1.0
    out[1:3, i:i + 1] += 1.0
    out[2, i:i + 3:2] = out[0, i:i + 3:2] * 10
    return out, out[0, i:i + 3]


@pytest.mark.parametrize("jitted", [False, True])
def test_refs_read_and_write_dynamic_slices(jitted):
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    f = plax.jit(_ref_program) if jitted else _ref_program
    for i in (0, 1):
        got, row = f(jnp.asarray(host), i)
        want, want_row = _ref_reference(host, i)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(row, want_row)


def _ref_lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if "<-" in ln or "+=" in ln]


def _printed(jx, np_):
    def f(x, i):
        r = jx.new_ref(x)
        r[1, jx.ds(i, 2)] = x[0, :2]
        r[jx.ds(1, 2), jx.ds(i, 1)] += x[:2, :1]
        return r[0, jx.ds(i, 3)]
    return str(jx.make_jaxpr(f)(np_.ones((3, 4)), 1))


def test_ref_equations_print_as_jax_prints_them():
    lines = _ref_lines(_printed(plax, jnp))
    assert any(re.fullmatch(r"[a-z]+\[1,b:b\+2\] <- [a-z]+", ln) for ln in lines), lines
    assert any(re.search(r"<- [a-z]+\[1:,b:b\+1\]", ln) for ln in lines), lines
    assert any(re.search(r"<- [a-z]+\[0,b:b\+3\]", ln) for ln in lines), lines


def test_ref_equations_beside_jax():
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    # the indices as printed (other variables are named after other equations' counts)
    indices = lambda text: [re.findall(r"\[[^\]]*\]", ln) for ln in _ref_lines(text)]  # noqa
    assert indices(_printed(plax, jnp)) == indices(_printed(jax, jax.numpy))


def test_refs_under_vmap_with_static_dynamic_slices():
    def h(x):
        r = plax.new_ref(x)
        r[plax.ds(1, 2)] = r[plax.ds(2, 2)] * 2
        return r[...]
    host = np.arange(10, dtype=np.float32).reshape(2, 5)
    want = host.copy()
    want[:, 1:3] = host[:, 2:4] * 2
    np.testing.assert_array_equal(plax.vmap(h)(jnp.asarray(host)), want)


def test_batched_starts_on_refs_read_and_write_each_example():
    # JAX 0.10.2 refuses a batched start on a ref (NotImplementedError); plax takes it, as its
    # scan batches a fori_loop's counter (below), and checks it against a loop
    def g(x, i):
        r = plax.new_ref(x)
        old = r[plax.ds(i, 2)]
        r[plax.ds(i, 2)] = old * 10
        r[1, plax.ds(i, 2, 2)] += 1.0
        return r[...], old
    x = np.arange(30, dtype=np.float32).reshape(2, 3, 5)
    starts = np.array([0, 1], np.int32)
    got, old = plax.vmap(g, (0, 0))(jnp.asarray(x), jnp.asarray(starts))
    for k, i in enumerate(starts):
        want = x[k].copy()
        want_old = want[i:i + 2].copy()
        want[i:i + 2] *= 10
        want[1, i:i + 4:2] += 1
        np.testing.assert_array_equal(got[k], want)
        np.testing.assert_array_equal(old[k], want_old)
    # an array (not a ref) takes a batched start too (as in JAX)
    np.testing.assert_array_equal(
        plax.vmap(lambda x, i: x[plax.ds(i, 2)], (None, 0))(jnp.arange(5.0), jnp.array([0, 1])),
        [[0.0, 1.0], [1.0, 2.0]])


def _loop_program(jx):
    np_ = jx.numpy

    def f(x):
        r = jx.new_ref(np_.zeros(8))

        def body(i, c):
            r[jx.ds(i * 2, 2)] = x[jx.ds(i * 2, 2)] * (i + 1.0)
            return c
        jx.lax.fori_loop(0, 4, body, 0)
        return jx.freeze(r)
    return f


def test_fori_loop_writing_windows_under_vmap_jit_and_grad():
    f = _loop_program(plax)
    x = np.arange(8, dtype=np.float32)
    scale = np.repeat(np.arange(1, 5), 2).astype(np.float32)
    np.testing.assert_array_equal(plax.jit(f)(jnp.asarray(x)), x * scale)
    np.testing.assert_array_equal(plax.grad(lambda x: f(x).sum())(jnp.asarray(x)), scale)
    xs = np.stack([x, x + 1])
    np.testing.assert_array_equal(plax.vmap(f)(jnp.asarray(xs)), xs * scale)


def test_fori_loop_windows_beside_jax():
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    xs = np.stack([np.arange(8.0), np.arange(8.0) + 1]).astype(np.float32)
    np.testing.assert_array_equal(plax.vmap(_loop_program(plax))(jnp.asarray(xs)),
                                  jax.vmap(_loop_program(jax))(jax.numpy.asarray(xs)))


def test_errors():
    r = plax.new_ref(jnp.arange(10.0))
    with pytest.raises(ValueError, match=re.escape(
            "Out of bound slice: start=9, size=2, stride=1, dim=10.")):
        r[plax.ds(9, 2)]
    with pytest.raises(TypeError, match="slice_sizes"):
        jnp.arange(10.0)[plax.ds(0, 11)]
    with pytest.raises(TypeError, match="integer scalar"):
        r[plax.ds(jnp.zeros(2, np.int32), 2)]
