"""Refs under vmap with batched indices, differentiation with respect to ref arguments, and
``empty_ref``/``free_ref``: each against a Python loop or NumPy, and beside JAX 0.10.2
where it is installed (its values, printing and errors).
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax

try:
    import jax
    import jax.numpy as jjnp
except ImportError:  # CI has no JAX
    jax = jjnp = None


def both(fn):
    """``fn(jax_module, jnp_module)`` for plax and (when installed) JAX."""
    out = [fn(plax, jnp)]
    if jax is not None:
        out.append(fn(jax, jjnp))
    return out


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e)
    return None


# ------------------------------------------------------------------ vmap with batched indices

def _loop(f, *args, in_axes):
    """``vmap(f, in_axes)(*args)`` as a Python loop over plax calls (the reference)."""
    n = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = []
    for b in range(n):
        per = [a if ax is None else jnp.asarray(np.take(np.asarray(a), b, axis=ax))
               for a, ax in zip(args, in_axes)]
        outs.append(np.asarray(f(plax, jnp, *per)))
    return np.stack(outs)


def _read_unbatched_ref(jx, np_, i):
    r = jx.new_ref(np_.arange(20.0).reshape(4, 5))
    return r[i]


def _read_column(jx, np_, i, x):
    return jx.new_ref(x)[:, i]


def _read_mixed(jx, np_, i, x):
    # an int and an array index separated by a slice: NumPy puts the index block in front
    return jx.new_ref(x)[1, :, i]


def _read_window(jx, np_, i, x):
    return jx.new_ref(x)[i, 1:]


def _read_array_index(jx, np_, ii, x):
    return jx.new_ref(x)[ii]


def _write(jx, np_, i, v):
    q = jx.new_ref(np_.zeros((3, 4)))
    q[:, i] = v
    q[:, i] += 1.0
    jx.ref.addupdate(q, (0, i), 10.0)
    return jx.freeze(q)


def _swap(jx, np_, i, v):
    q = jx.new_ref(np_.arange(12.0).reshape(3, 4))
    old = jx.ref.swap(q, (2, i), v)
    return old + q[...].sum()


_I = np.array([0, 3, 1], np.int32)
_X = np.arange(3 * 2 * 3 * 4, dtype=np.float32).reshape(3, 2, 3, 4)
_CASES = {
    "unbatched ref": (_read_unbatched_ref, (_I,), (0,)),
    "column": (_read_column, (_I, _X[:, 0]), (0, 0)),
    "column, unbatched value": (_read_column, (_I, _X[0, 0]), (0, None)),
    "int, slice, array": (_read_mixed, (_I, _X), (0, 0)),
    "window": (_read_window, (_I % 2, _X[:, :, :, 0]), (0, 0)),
    "array of indices": (_read_array_index, (np.array([[0, 1], [1, 0], [1, 1]], np.int32),
                                             _X[:, :, :, 0]), (0, 0)),
    "write": (_write, (_I, np.arange(9.0, dtype=np.float32).reshape(3, 3)), (0, 1)),
    "write, unbatched value": (_write, (_I, np.arange(3.0, dtype=np.float32)), (0, None)),
    "swap": (_swap, (_I, np.arange(3.0, dtype=np.float32)), (0, 0)),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_vmap_with_batched_indices_matches_a_loop_and_jax(case):
    f, args, in_axes = _CASES[case]
    want = _loop(f, *args, in_axes=in_axes)

    def run(jx, np_):
        g = jx.vmap(lambda *a: f(jx, np_, *a), in_axes=in_axes)
        return np.asarray(g(*[np_.asarray(a) for a in args]))

    results = both(run)
    for got in results:
        np.testing.assert_array_equal(got, want)
    got_jit = plax.jit(plax.vmap(lambda *a: f(plax, jnp, *a), in_axes=in_axes))(
        *[jnp.asarray(a) for a in args])
    np.testing.assert_array_equal(np.asarray(got_jit), want)


def test_batched_ref_argument_with_batched_indices():
    def put(ref, i, v):
        ref[i] = v
        ref[i] += 1.0

    def run(jx, np_):
        r = jx.new_ref(np_.zeros((2, 4)))
        jx.vmap(put)(r, np_.array([1, 3]), np_.array([5.0, 6.0]))
        return np.asarray(jx.freeze(r))

    for got in both(run):
        np.testing.assert_array_equal(got, [[0.0, 6.0, 0.0, 0.0], [0.0, 0.0, 0.0, 7.0]])


def test_batched_ref_with_unbatched_non_adjacent_indices():
    # the index block would jump in front of the batch axis with a plain leading slice
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    idx = np.array([0, 2], np.int32)

    def f(x):
        return plax.new_ref(x)[idx, :, 1]

    got = plax.vmap(f)(jnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(got), np.stack([xb[idx, :, 1] for xb in x]))


def test_batched_index_printing_matches_jax():
    def run(jx, np_):
        r = jx.new_ref(np_.arange(5.0))
        return str(jx.make_jaxpr(jx.vmap(lambda i: r[i]))(np_.array([0, 3, 4])))

    texts = both(run)
    assert texts[0] == "{ lambda a:Ref{f32[5]}; b:i32[3]. let c:f32[3] <- a[b] in (c,) }"
    if len(texts) == 2:
        assert texts[0] == texts[1]


def test_vmap_refuses_batched_index_writes_into_an_unbatched_ref_as_jax():
    def run(jx, np_):
        r = jx.new_ref(np_.zeros(5))
        return _error(lambda: jx.vmap(lambda i: r.__setitem__(i, 1.0))(np_.array([0, 3])))

    results = both(run)
    assert results[0][0] == "Exception"
    assert "vmapped value on an unbatched array reference of type Ref{float32[5]}" in \
        results[0][1]
    if len(results) == 2:
        assert results[0] == results[1]


def test_fori_loop_counter_index_under_vmap():
    # a batched start makes the loop counter batched: the index of every access
    def f(start, x):
        r = plax.new_ref(x)
        lax.fori_loop(start, 3, lambda i, c: r.__setitem__(i, r[i] * 2) or c, 0)
        return r[...]

    starts = np.array([0, 2], np.int32)
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    got = plax.vmap(f)(jnp.asarray(starts), jnp.asarray(x))
    want = np.stack([np.asarray(f(int(s), jnp.asarray(xb))) for s, xb in zip(starts, x)])
    np.testing.assert_array_equal(np.asarray(got), want)


# ------------------------------------------------------------------ differentiation and refs

def _sum_of_squares(r):
    return (r[...] ** 2).sum()


def test_grad_with_respect_to_a_ref_is_jax_s_error():
    def run(jx, np_):
        return _error(lambda: jx.grad(_sum_of_squares)(jx.new_ref(np_.arange(3.0))))

    results = both(run)
    assert results[0] == ("ValueError",
                          "Expected cotangent type Ref{float32[3]} but got float32[3]")
    if len(results) == 2:
        assert results[0] == results[1]


def test_vjp_with_a_ref_argument_fails_in_the_pullback_as_jax():
    def run(jx, np_):
        y, pullback = jx.vjp(lambda x, r: (x * r[...]).sum(), np_.arange(3.0),
                             jx.new_ref(np_.ones(3)))
        return float(y), _error(lambda: pullback(1.0))

    results = both(run)
    assert results[0] == (3.0, ("ValueError",
                                "Expected cotangent type Ref{float32[3]} but got float32[3]"))
    if len(results) == 2:
        assert results[0] == results[1]


def test_grad_with_respect_to_an_array_beside_a_ref_argument():
    def f(x, r):
        return (x * r[...]).sum()

    def run(jx, np_):
        return np.asarray(jx.grad(f)(np_.arange(3.0), jx.new_ref(np_.full(3, 2.0))))

    for got in both(run):
        np.testing.assert_array_equal(got, [2.0, 2.0, 2.0])


def test_jvp_with_a_ref_tangent_as_jax():
    def g(r):
        r[...] = r[...] * 3.0
        return (r[...] ** 2).sum()

    def run(jx, np_):
        r, t = jx.new_ref(np_.arange(3.0)), jx.new_ref(np_.ones(3))
        y, y_t = jx.jvp(g, (r,), (t,))
        return float(y), float(y_t), np.asarray(jx.freeze(r)), np.asarray(jx.freeze(t))

    results = both(run)
    y, y_t, r, t = results[0]
    assert (y, y_t) == (45.0, 54.0)  # sum((3x)^2), 18 * sum(x)
    np.testing.assert_array_equal(r, [0.0, 3.0, 6.0])
    np.testing.assert_array_equal(t, [3.0, 3.0, 3.0])  # the tangent ref was written too
    if len(results) == 2:
        assert results[1][:2] == (y, y_t)
        np.testing.assert_array_equal(results[1][3], t)


def test_jvp_with_an_array_tangent_for_a_ref_is_a_clear_error():
    with pytest.raises(ValueError, match="tangent of a mutable array reference"):
        plax.jvp(_sum_of_squares, (plax.new_ref(jnp.arange(3.0)),), (jnp.ones(3),))
    if jax is not None:  # JAX refuses it too (with an internal message)
        with pytest.raises(ValueError):
            jax.jvp(_sum_of_squares, (jax.new_ref(jjnp.arange(3.0)),), (jjnp.ones(3),))


# ------------------------------------------------------------------ empty_ref / free_ref

def _uses_empty_ref(jx, np_, x):
    r = jx.empty_ref(jx.ShapeDtypeStruct((3,), np_.float32))
    r[...] = x * 2
    r[1] += 1.0
    out = r[...]
    jx.free_ref(r)
    return out


def test_empty_ref_under_jit_and_its_printing_match_jax():
    def run(jx, np_):
        out = jx.jit(lambda x: _uses_empty_ref(jx, np_, x))(np_.arange(3.0))
        text = str(jx.make_jaxpr(lambda x: _uses_empty_ref(jx, np_, x))(np_.arange(3.0)))
        # JAX ends an equation without operands with a space
        return np.asarray(out).tolist(), "\n".join(line.rstrip() for line in text.split("\n"))

    results = both(run)
    out, text = results[0]
    assert out == [0.0, 3.0, 4.0]
    assert "b:Ref{f32[3]} = empty_ref[memory_space=None ty=float32[3]]\n" in text
    assert "    free_ref b\n" in text
    if len(results) == 2:
        assert results[1] == results[0]


def test_empty_ref_takes_shape_dtype_structs_and_arrays():
    for ty in (plax.ShapeDtypeStruct((2, 3), jnp.int32), jnp.zeros((2, 3), jnp.int32)):
        text = str(plax.make_jaxpr(lambda: plax.empty_ref(ty)[...])())
        assert "Ref{i32[2,3]} = empty_ref[memory_space=None ty=int32[2,3]]" in text
    with pytest.raises(TypeError, match="abstract array"):
        plax.jit(lambda: plax.empty_ref((3,)))()


def test_empty_ref_eagerly_is_jax_s_error_and_free_ref_eagerly_is_a_no_op():
    def run(jx, np_):
        made = _error(lambda: jx.empty_ref(jx.ShapeDtypeStruct((3,), np_.float32)))
        r = jx.new_ref(np_.zeros(2))
        return made, jx.free_ref(r)

    results = both(run)
    assert results[0] == (("NotImplementedError",
                           "Evaluation rule for 'empty_ref' not implemented"), ())
    if len(results) == 2:
        assert results[0] == results[1]


def test_a_ref_freed_under_jit_cannot_be_read():
    def f():
        r = plax.new_ref(jnp.zeros(3))
        plax.free_ref(r)
        return r[...]

    with pytest.raises(ValueError, match="freed"):
        plax.jit(f)()


def _ref_of_input(jx, np_, x):
    r = jx.new_ref(x)
    r[...] = r[...] * 3
    r[0] += x[1] * x[2]
    return (r[...] ** 2).sum()


def test_vmap_of_grad_of_a_ref_made_from_the_differentiated_input():
    xs = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    f = lambda x: _ref_of_input(plax, jnp, x)  # noqa: E731
    loop = np.stack([np.asarray(plax.grad(f)(jnp.asarray(x))) for x in xs])
    np.testing.assert_allclose(loop[0], [12.0, 26.0, 40.0])  # by hand: d/dx of the sum
    for got in (plax.vmap(plax.grad(f))(jnp.asarray(xs)),
                plax.jit(plax.vmap(plax.grad(f)))(jnp.asarray(xs)),
                plax.grad(lambda x: plax.vmap(f)(x).sum())(jnp.asarray(xs))):
        np.testing.assert_array_equal(np.asarray(got), loop)
    if jax is not None:
        g = jax.vmap(jax.grad(lambda x: _ref_of_input(jax, jjnp, x)))(xs)
        np.testing.assert_array_equal(np.asarray(g), loop)


def test_free_ref_under_grad_and_vmap():
    def f(x):
        r = plax.new_ref(x)
        r[...] = r[...] * 3
        out = (r[...] ** 2).sum()
        plax.free_ref(r)
        return out

    xs = jnp.asarray(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(plax.vmap(plax.grad(f))(xs)),
                                  18.0 * np.asarray(xs))
    np.testing.assert_array_equal(np.asarray(plax.jit(plax.grad(f))(xs[1])),
                                  18.0 * np.asarray(xs[1]))


def test_differentiating_a_jit_that_makes_a_ref_as_jax():
    # JAX's array_refs page (cell 13): grad through a jit whose body makes, writes and reads
    # a ref. The jit's JVP evaluates the body inline; the ref must not be made by the
    # transform whose rule is running (its tracers leaked: UnexpectedTracerError).
    def body(jx, x):
        r = jx.new_ref(x)
        r[...] = r[...] + r[...] * x  # x + x**2: d/dx = 1 + 2x
        return r[...]

    f = plax.jit(lambda x: body(plax, x))
    assert float(plax.grad(f)(3.0)) == 7.0
    p, t = plax.jvp(f, (3.0,), (1.0,))
    assert (float(p), float(t)) == (12.0, 7.0)
    assert isinstance(p, plax.Array) and isinstance(t, plax.Array)  # no tracer returned
    assert float(plax.linearize(f, 3.0)[1](1.0)) == 7.0
    xs = jnp.arange(3.0)
    np.testing.assert_array_equal(np.asarray(plax.vmap(plax.grad(f))(xs)), [1.0, 3.0, 5.0])
    assert float(plax.grad(plax.grad(f))(3.0)) == 2.0
    if jax is not None:
        jf = jax.jit(lambda x: body(jax, x))
        assert float(jax.grad(jf)(3.0)) == 7.0
        np.testing.assert_array_equal(np.asarray(jax.vmap(jax.grad(jf))(np.arange(3.0))),
                                      [1.0, 3.0, 5.0])
