"""Mutable array references: plax.new_ref / Ref / plax.freeze / plax.ref, beside JAX 0.10.

Values are checked against NumPy or a Python loop, gradients against finite differences
(and JAX where installed), printing and error messages against JAX's own strings.
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.state.discharge import discharge_closed, jaxpr_has_refs
from plax.state.primitives import ref_primitives

try:
    import jax
    import jax.numpy as jjnp
    from jax import lax as jlax
except ImportError:  # CI has no JAX
    jax = jjnp = jlax = None

needs_jax = pytest.mark.skipif(jax is None, reason="JAX not installed")


def both(fn):
    """``fn(jax_module, jnp_module, lax_module)`` for plax and (when installed) JAX."""
    out = [fn(plax, jnp, lax)]
    if jax is not None:
        out.append(fn(jax, jjnp, jlax))
    return out


def same_text(fn):
    texts = both(fn)
    if len(texts) == 2:
        assert texts[0] == texts[1]
    return texts[0]


# ------------------------------------------------------------------ eager refs

def test_eager_write_read_and_repr_match_jax():
    def run(jx, np_, _):
        r = jx.new_ref(np_.zeros(3))
        r[1] = 2.0
        out = [repr(r), str(jx.typeof(r)), r.shape, str(r.dtype), r.ndim]
        r[1] += 1
        r[0:2] = np_.array([5.0, 6.0])
        out += [repr(r), np.asarray(jx.freeze(r)).tolist()]
        return out

    out = same_text(run)
    assert out[0] == "Ref([0., 2., 0.], dtype=float32)"
    assert out[1] == "Ref{float32[3]}"
    assert out[5] == "Ref([5., 6., 0.], dtype=float32)"


@pytest.mark.parametrize("make", [lambda np_: np_.zeros((2, 3)), lambda np_: 1.0,
                                  lambda np_: 3, lambda np_: np_.bool_(True)])
def test_repr_of_shapes_and_weak_types_match_jax(make):
    text = same_text(lambda jx, np_, _: repr(jx.new_ref(make(np_))))
    assert text.startswith("Ref(")


def test_addupdate_swap_and_get():
    r = plax.new_ref(jnp.arange(4.0))
    plax.ref.addupdate(r, 1, 10.0)
    r.addupdate(jnp.ones(4))
    old = plax.ref.swap(r, 0, 7.0)
    assert float(old) == 1.0
    assert float(plax.ref.get(r, 1)) == 12.0
    np.testing.assert_array_equal(np.asarray(plax.freeze(r)), [7.0, 12.0, 3.0, 4.0])


def test_new_ref_copies_nothing_it_should_not():
    x = jnp.zeros(3)
    r = plax.new_ref(x)
    r[0] = 1.0
    np.testing.assert_array_equal(np.asarray(x), [0.0, 0.0, 0.0])  # arrays stay immutable


@pytest.mark.parametrize("idx", [(1, slice(1, None)), (slice(None), 1), (slice(None, None, 2),),
                                 (-1,), (Ellipsis, 0), (np.array([0, 2]),)])
def test_indexing_reads_like_numpy(idx):
    base = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    r = plax.new_ref(jnp.asarray(base))
    np.testing.assert_array_equal(np.asarray(r[idx]), base[idx])
    traced = plax.jit(lambda x: plax.new_ref(x)[idx])(jnp.asarray(base))
    np.testing.assert_array_equal(np.asarray(traced), base[idx])


def test_integer_array_write_under_jit_and_eagerly():
    want = np.zeros(5, np.float32)
    want[[1, 3]] = [5.0, 6.0]
    q = plax.new_ref(jnp.zeros(5))

    @plax.jit
    def put(idx, v):
        q[idx] = v
        return q[idx] * 2

    np.testing.assert_array_equal(np.asarray(put(jnp.array([1, 3]), jnp.array([5.0, 6.0]))),
                                  [10.0, 12.0])
    np.testing.assert_array_equal(np.asarray(plax.freeze(q)), want)


# ------------------------------------------------------------------ errors

def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e)
    return None


@pytest.mark.parametrize("case", ["shape", "dtype", "oob", "list"])
def test_errors_match_jax(case):
    def run(jx, np_, _):
        fns = {
            "shape": lambda: jx.new_ref(np_.zeros(3)).__setitem__(..., np_.ones(4)),
            "dtype": lambda: jx.new_ref(np_.zeros(3)).__setitem__(..., np_.ones(3, np_.int32)),
            "oob": lambda: jx.new_ref(np_.zeros(3))[5],
            "list": lambda: jx.new_ref([1.0, 2.0]),
        }
        return _error(fns[case])

    kind, msg = same_text(run)
    assert kind in ("ValueError", "TypeError")


def test_refs_are_not_arrays():
    r = plax.new_ref(jnp.arange(3.0))
    with pytest.raises(TypeError, match="sin requires ndarray or scalar arguments"):
        jnp.sin(r)
    with pytest.raises(TypeError):
        r + 1
    with pytest.raises(TypeError, match="mutable array reference"):
        plax.new_ref(r)


# ------------------------------------------------------------------ printing

def _internal(jx, np_, _):
    def f(x):
        ref = jx.new_ref(x)
        ref[0] = ref[1] * 2
        ref[1:] += 1.0
        return jx.freeze(ref)
    return str(jx.make_jaxpr(f)(np_.arange(3.0)))


def _ref_argument(jx, np_, _):
    def g(ref, y):
        ref[...] = ref[...] + y
        ref[0] += 1
    return str(jx.make_jaxpr(g)(jx.new_ref(np_.zeros(3)), 1.0))


def _indexing(jx, np_, _):
    def f(x, i, arr):
        r = jx.new_ref(x)
        a, b, e, g, h = r[1, 1:], r[0], r[-1], r[i, 2], r[arr]
        r[0, :2] = a[:2]
        jx.ref.addupdate(r, (1,), b)
        jx.ref.addupdate(r, ..., x)
        m = jx.ref.swap(r, 0, b)
        return a, b, e, g, h, m
    return str(jx.make_jaxpr(f)(np_.zeros((3, 4)), 1, np_.array([0, 2])))


def _jit_call(jx, np_, _):
    @jx.jit
    def inc(r, y):
        r[...] += y
    return str(jx.make_jaxpr(inc)(jx.new_ref(np_.zeros(3)), 1.0))


def _scan(jx, np_, lax_):
    def sc(x):
        r = jx.new_ref(np_.zeros(()))

        def body(carry, xi):
            r[...] += xi
            return carry, None
        lax_.scan(body, None, x)
        return r[...]
    return str(jx.make_jaxpr(sc)(np_.arange(4.0)))


def _cond(jx, np_, lax_):
    def cd(p):
        r = jx.new_ref(np_.zeros(2))

        def t():
            r[0] = 1.0

        def f():
            r[1] = 2.0
        lax_.cond(p, t, f)
        return r[...]
    text = str(jx.make_jaxpr(cd)(True))
    return text[text.index("c:Ref"):]  # how zeros print is not this test's business


@pytest.mark.parametrize("program", [_internal, _ref_argument, _indexing, _jit_call, _scan,
                                     _cond])
def test_jaxpr_printing_matches_jax(program):
    text = same_text(program)
    assert "Ref{" in text


def test_printing_forms():
    text = _internal(plax, jnp, lax)
    assert "b:Ref{f32[3]} = new_ref[kind=None memory_space=None] a" in text
    assert "c:f32[] <- b[1]" in text
    assert "b[0] <- d" in text
    text = _jit_call(plax, jnp, lax)
    assert "f:f32[3], a[...] <- a[...], e" in text  # inside a body: the old value is named


def test_closed_over_ref_is_a_constant_and_a_trailing_call_operand():
    c = plax.new_ref(jnp.zeros(3))

    @plax.jit
    def closed(y):
        c[0] += y
        return y * 2

    text = str(plax.make_jaxpr(closed)(1.0))
    assert text.startswith("{ lambda a:Ref{f32[3]}; b:f32[]. let")
    assert "] b a" in text


# ------------------------------------------------------------------ jit on every backend

def test_jit_with_ref_arguments_and_closures(backend_name):
    r = plax.new_ref(jnp.zeros(3))

    def inc(r, y):
        r[...] += y

    f = plax.jit(inc, backend=backend_name)
    f(r, 1.0)
    f(r, 2.0)
    np.testing.assert_array_equal(np.asarray(plax.freeze(r)), [3.0, 3.0, 3.0])

    c = plax.new_ref(jnp.zeros(3))

    def closed(y):
        c[0] += y
        plax.ref.addupdate(c, 2, y * 2)
        return y * 2

    g = plax.jit(closed, backend=backend_name)
    assert float(g(1.0)) == 2.0 and float(g(2.0)) == 4.0
    np.testing.assert_array_equal(np.asarray(plax.freeze(c)), [3.0, 0.0, 6.0])


def _loops(x):
    r = plax.new_ref(jnp.zeros(()))

    def body(carry, xi):
        r[...] += xi * carry
        return carry + 1.0, None
    lax.scan(body, 1.0, x)

    def fori_body(i, _):
        r[...] += i
    lax.fori_loop(0, 3, fori_body, None)

    def while_body(k):
        r[...] += 100.0
        return k + 1
    lax.while_loop(lambda k: k < 2, while_body, 0)
    lax.cond(x[0] > 0, lambda: r.__setitem__(..., r[...] * 10), lambda: None)
    return r[...]


def _loops_reference(x):
    total, carry = 0.0, 1.0
    for xi in x:
        total += xi * carry
        carry += 1.0
    total += 0 + 1 + 2 + 200.0
    return total * 10 if x[0] > 0 else total


@pytest.mark.parametrize("start", [0.0, 1.0])
def test_control_flow_with_refs(backend_name, start):
    x = np.arange(start, start + 4.0, dtype=np.float32)
    want = _loops_reference(x)
    assert float(_loops(jnp.asarray(x))) == want  # eager
    assert float(plax.jit(_loops, backend=backend_name)(jnp.asarray(x))) == want


def test_eager_loops_over_closed_refs():
    q = plax.new_ref(jnp.zeros(2))

    def body(c, xi):
        q[0] += xi
        return c, None
    lax.scan(body, 0.0, jnp.arange(3.0))
    lax.fori_loop(0, 4, lambda i, _: q.__setitem__(1, q[1] + i), None)
    np.testing.assert_array_equal(np.asarray(plax.freeze(q)), [3.0, 6.0])


def test_backends_see_no_ref_primitives():
    def f(r, x):
        lax.fori_loop(0, 2, lambda i, _: r.__setitem__(i, x[i]), None)
        return r[...] * 2

    closed = plax.make_jaxpr(f)(plax.new_ref(jnp.zeros(2)), jnp.ones(2))
    assert jaxpr_has_refs(closed)
    pure, ref_in = discharge_closed(closed)
    assert ref_in == [0] and not jaxpr_has_refs(pure)
    assert not any(e.primitive in ref_primitives for e in pure.jaxpr.eqns)
    outs = plax.core.eval_jaxpr(pure.jaxpr, pure.consts, jnp.zeros(2), jnp.array([3.0, 4.0]))
    np.testing.assert_array_equal(np.asarray(outs[0]), [6.0, 8.0])
    np.testing.assert_array_equal(np.asarray(outs[1]), [3.0, 4.0])  # the final ref value


@pytest.mark.parametrize("make", ["created", "argument"])
def test_jit_refuses_to_return_a_ref(make):
    def run(jx, np_, _):
        if make == "created":
            return _error(lambda: jx.jit(lambda x: jx.new_ref(x))(np_.ones(2)))
        return _error(lambda: jx.jit(lambda r: r)(jx.new_ref(np_.zeros(3))))

    results = both(run)
    kind, msg = results[0]
    assert kind == "ValueError"
    assert "but mutable array references cannot be returned." in msg
    if make == "argument":
        assert msg.endswith("The returned mutable array was passed in as the argument r.")
    if len(results) == 2:
        assert results[1][0] == kind
        assert results[1][1].split("traced for jit")[1].split("\n")[0] == \
            msg.split("traced for jit")[1].split("\n")[0]


# ------------------------------------------------------------------ vmap

def _uses_internal_ref(jx, np_, x):
    r = jx.new_ref(np_.zeros(3))
    r[...] = r[...] + x
    r[0] += x[1] * x[2]
    return jx.freeze(r)


def test_vmap_of_a_function_with_its_own_ref_matches_a_loop():
    xs = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    got = plax.vmap(lambda x: _uses_internal_ref(plax, jnp, x))(jnp.asarray(xs))
    want = np.stack([np.asarray(_uses_internal_ref(plax, jnp, jnp.asarray(x))) for x in xs])
    np.testing.assert_array_equal(np.asarray(got), want)


def test_vmap_writes_into_a_batched_ref_argument():
    r = plax.new_ref(jnp.zeros((2, 3)))

    def h(r, x):
        r[...] += x
        r[1] += 5.0
    plax.vmap(h)(r, jnp.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(plax.freeze(r)),
                                  [[0.0, 6.0, 2.0], [3.0, 9.0, 5.0]])


def test_vmap_reads_an_unbatched_ref():
    r = plax.new_ref(jnp.arange(3.0))
    out = plax.vmap(lambda x: r[...] * x)(jnp.ones((2, 3)))
    np.testing.assert_array_equal(np.asarray(out), [[0.0, 1.0, 2.0]] * 2)


def test_vmap_refuses_writes_into_an_unbatched_ref():
    def run(jx, np_, _):
        ref = jx.new_ref(np_.zeros(3))

        def g(x):
            ref[...] += x
            return x
        return _error(lambda: jx.vmap(g)(np_.ones((2, 3))))

    kind, msg = same_text(run)
    assert kind == "Exception" and "unbatched array reference of type Ref{float32[3]}" in msg


# ------------------------------------------------------------------ differentiation

def _fd_grad(f, x, eps=1e-3):
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in range(x.size):
        d = np.zeros_like(x)
        d.flat[i] = eps
        g.flat[i] = (float(f(jnp.asarray(x + d, jnp.float32)))
                     - float(f(jnp.asarray(x - d, jnp.float32)))) / (2 * eps)
    return g


def _loss(x):
    return _uses_internal_ref(plax, jnp, x).sum()


@pytest.mark.parametrize("wrap", [lambda g: g, plax.jit])
def test_grad_through_an_internal_ref(wrap):
    x = jnp.arange(3.0)
    got = wrap(plax.grad(_loss))(x)
    np.testing.assert_allclose(np.asarray(got), _fd_grad(_loss, x), rtol=1e-2)
    np.testing.assert_array_equal(np.asarray(got), [1.0, 3.0, 2.0])


def test_jvp_and_vjp_through_an_internal_ref():
    x = jnp.arange(3.0)
    f = lambda x: _uses_internal_ref(plax, jnp, x)  # noqa: E731
    y, t = plax.jvp(f, (x,), (jnp.ones(3),))
    np.testing.assert_array_equal(np.asarray(t), [4.0, 1.0, 1.0])
    _, pullback = plax.vjp(f, x)
    np.testing.assert_array_equal(np.asarray(pullback(jnp.ones(3))[0]), [1.0, 3.0, 2.0])


def test_grad_through_a_scan_writing_a_ref():
    def s(x):
        r = plax.new_ref(0.0)

        def body(c, xi):
            r[...] += xi * c
            return c, None
        lax.scan(body, 2.0, x)
        return r[...]

    got = plax.grad(s)(jnp.arange(3.0))
    np.testing.assert_allclose(np.asarray(got), _fd_grad(s, np.arange(3.0)), rtol=1e-2)


def test_grad_refuses_differentiated_writes_into_an_outer_ref():
    def run(jx, np_, _):
        ref = jx.new_ref(np_.zeros(3))

        def g(x):
            ref[...] += x
            return x.sum()
        return _error(lambda: jx.grad(g)(np_.arange(3.0)))

    kind, msg = same_text(run)
    assert kind == "Exception" and "non-differentiated array reference" in msg


def test_grad_reads_an_outer_ref():
    ref = plax.new_ref(jnp.arange(3.0))
    got = plax.grad(lambda x: (ref[...] * x).sum())(jnp.ones(3))
    np.testing.assert_array_equal(np.asarray(got), [0.0, 1.0, 2.0])


def test_addupdate_method_of_a_traced_ref():
    r = plax.new_ref(jnp.zeros(2))

    @plax.jit
    def f(r, x):
        r.addupdate(x, 1)

    f(r, 3.0)
    np.testing.assert_array_equal(np.asarray(plax.freeze(r)), [0.0, 3.0])
    with pytest.raises(AttributeError, match="addupdate"):
        plax.jit(lambda x: x.addupdate(1.0))(jnp.zeros(2))


@pytest.mark.parametrize("case", ["twice", "closed_and_passed"])
def test_jit_refuses_aliased_refs_like_jax(case):
    def run(jx, np_, _):
        r = jx.new_ref(np_.zeros(3))

        def f(a, b):
            a[0] = 1.0
            b[1] = 2.0

        def g(a):
            a[0] = 1.0
            r[1] = 3.0
        call = (lambda: jx.jit(f)(r, r)) if case == "twice" else (lambda: jx.jit(g)(r))
        kind, msg = _error(call)
        return kind, msg.split(" at ")[0], msg.split(" for jit")[1]

    kind, _, tail = same_text(run)
    assert kind == "ValueError"
    assert tail.endswith("appeared at both a and b." if case == "twice"
                         else "was both closed over and passed as the argument a")


def test_jit_call_inside_grad_and_vmap_with_refs():
    def g(x):
        r = plax.new_ref(x)

        @plax.jit
        def inner():
            r[...] = r[...] * 2
        inner()
        return r[...]

    assert float(plax.grad(g)(3.0)) == 2.0
    r = plax.new_ref(jnp.zeros((2, 3)))

    def h(r, x):
        r[...] += x
    plax.vmap(plax.jit(h))(r, jnp.ones((2, 3)))
    np.testing.assert_array_equal(np.asarray(plax.freeze(r)), np.ones((2, 3)))


def test_grad_through_fori_loop_indexing_a_ref():
    def read(x):
        r = plax.new_ref(x)
        return lax.fori_loop(0, 3, lambda i, c: c + r[i] * r[i], 0.0)

    def write(x):
        r = plax.new_ref(jnp.zeros(3))

        def body(i, c):
            r[i] = x[i] * x[i]
            return c
        lax.fori_loop(0, 3, body, 0.0)
        return r[...].sum()

    x = jnp.arange(3.0)
    for f in (read, write):
        np.testing.assert_allclose(np.asarray(plax.grad(f)(x)), _fd_grad(f, x), rtol=1e-2)
        np.testing.assert_allclose(np.asarray(plax.jit(plax.grad(f))(x)), [0.0, 2.0, 4.0])


def test_refs_made_under_nested_transforms():
    # every active transform makes the ref: batched under vmap, with a tangent under grad
    def f(x):
        return _uses_internal_ref(plax, jnp, x).sum()

    xs = jnp.asarray(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    loop = np.stack([np.asarray(plax.grad(f)(x)) for x in xs])
    np.testing.assert_array_equal(np.asarray(plax.vmap(plax.grad(f))(xs)), loop)
    np.testing.assert_array_equal(np.asarray(plax.jit(plax.vmap(plax.grad(f)))(xs)), loop)
    np.testing.assert_array_equal(np.asarray(plax.grad(lambda x: plax.vmap(f)(x).sum())(xs)),
                                  loop)
    # the only second-order term is d2/dx1dx2 of x1 * x2
    want = np.zeros((3, 3), np.float32)
    want[1, 2] = want[2, 1] = 1.0
    np.testing.assert_array_equal(np.asarray(plax.hessian(f)(jnp.arange(3.0))), want)
