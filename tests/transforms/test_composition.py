"""The composition matrix: every ordered composition of up to three of {jit, grad, vmap, jvp}
(plus jacfwd / jacrev / hessian with one more transform on either side), applied to a dozen
functions, against references computed without plax's transforms:

* derivatives: central finite differences of the *eager* function in float64 (x64 on);
* vmap: a Python loop over the batch, stacking the results;
* jit: the un-jitted function.

The transformed function runs in the default float32 mode; inputs are float32-exact so both
sides see the same numbers, and the tolerance covers float32 rounding plus the truncation
error of nested central differences.
"""
from __future__ import annotations

import functools
import itertools
import zlib

import numpy as np
import pytest

import plax
from plax import lax
from plax import numpy as jnp
from plax import tree_util

# ---------------------------------------------------------------------------- the functions


def _elementwise(x):                      # scalar -> scalar chain
    return jnp.sin(x) * jnp.exp(-x * x) + jnp.tanh(x) / (1.0 + x ** 2) + jnp.log1p(x * x)


def _reductions(x):                       # (2, 3): reductions with an axis
    return (jnp.sum(x ** 2, axis=0) * jnp.max(x, axis=1).sum()
            + jnp.mean(x, axis=0) - jnp.prod(x, axis=0) + jnp.min(x, axis=1, keepdims=True))


@functools.lru_cache(maxsize=None)
def _consts():
    # Closed-over arrays: created once, eagerly, outside every transform.
    w = np.array([[0.5, -1.0], [0.25, 0.75], [-0.5, 0.3]], np.float32)
    return {"w": jnp.asarray(w), "m": jnp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3) / 4 - 0.5),
            "xs": jnp.asarray(np.array([[1.0, -0.5, 0.25], [0.3, 0.2, -1.0]], np.float32)),
            "counts": jnp.asarray(np.array([1, 2, 3], np.int32))}


def _matmul(x):                           # (2, 3) @ (3, 2), and x @ x.T
    w = _consts()["w"]
    return jnp.tanh(x @ w) @ w.T + jnp.dot(x, x.T).sum() * 0.1


def _broadcasting(x):                     # vector (3,) against matrix (2, 3) and (2, 1)
    m = _consts()["m"]
    return m * x + x[None, :] ** 2 - jnp.sum(m, axis=1, keepdims=True) * jnp.sin(x)


def _basic_indexing(x):                   # (3, 3): slices, ints, negative, None
    return x[1:3, ::2] * x[0, ::2] + x[-1, 1] - x[None, 2, :2] ** 2 + x[:, 1][::3].sum()


def _advanced_indexing(x):                # (5,) and repeated integer indices
    i = jnp.array([0, 2, 2, 4])
    j = jnp.array([1, 1, 3, 0])
    m = x.reshape(1, 5) * jnp.ones((2, 1))
    return x[i] * x[j] + m[jnp.array([1, 0]), jnp.array([3, 3])].sum() + x[x.shape[0] - 1]


def _at_updates(x):                       # (4,): .at[].set / .add / .multiply
    y = x.at[1].set(x[0] ** 2)
    y = y.at[jnp.array([0, 2, 2])].add(x[3] * 2.0)
    y = y.at[3].multiply(x[1])
    return y.at[1:3].set(jnp.sin(y[:2])) * x


def _pytree_in_out(p):                    # dict in, nested dict/tuple out
    xs = _consts()["xs"]
    h = jnp.tanh(xs @ p["w"] + p["b"])
    return {"y": h, "n": (jnp.sum(p["w"] ** 2), p["b"] * h[0])}


def _where(x):                            # (4,) selu-like and branch selection
    selu = 1.05 * jnp.where(x > 0, x, 1.67 * jnp.exp(x) - 1.67)
    return selu + jnp.where(x < 0, x ** 2, jnp.sin(x)) * jnp.where(x > 0, 2.0, x)


def _logsumexp_softmax(x):                # (2, 4)
    mx = jnp.max(x, axis=-1, keepdims=True)
    lse = jnp.log(jnp.sum(jnp.exp(x - mx), axis=-1, keepdims=True)) + mx
    softmax = jnp.exp(x - lse)
    return softmax * x + lse


def _integer_side_inputs(x):              # (3,) with int32 arrays and integer arithmetic
    counts = _consts()["counts"]
    idx = (counts * 2) % 3                # [2, 1, 0]
    scale = (counts + jnp.arange(3)).astype(jnp.float32)
    return x ** 3 * scale + x[idx] * counts - (x * counts)[counts - 1] ** 2


def _closure(x):                          # (3,): closes over concrete arrays
    c = _consts()
    return jnp.dot(c["m"], jnp.sin(x)) + c["w"][:, 0].sum() * x.sum() + c["xs"][0, 1]


def _shape_ops(x):                        # (2, 3): reshape, transpose, concatenate, cumsum
    flat = jnp.concatenate([x.reshape(-1), jnp.cumsum(x.T, axis=0).ravel(), x[:, ::-1][0]])
    return jnp.stack([flat[:5], flat[5:10]]) * jnp.cos(flat[10:15])


@plax.custom_jvp
def _softplus(x):
    return jnp.log1p(jnp.exp(x))


@_softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _softplus(x), t / (1.0 + jnp.exp(-x))


def _custom_jvp(x):                       # (3,): a custom_jvp function inside
    return _softplus(x) * x + _softplus(x[::-1] * 2.0)


@plax.custom_vjp
def _scaled_sin(x, w):
    return jnp.sin(x) * w


def _scaled_sin_fwd(x, w):
    return _scaled_sin(x, w), (jnp.cos(x), jnp.sin(x), w)


def _scaled_sin_bwd(res, ct):
    cos_x, sin_x, w = res
    return ct * cos_x * w, ct * sin_x


_scaled_sin.defvjp(_scaled_sin_fwd, _scaled_sin_bwd)


def _custom_vjp(x):                       # (3,): a custom_vjp function inside (reverse mode only)
    return _scaled_sin(x, x[::-1] + 1.0) + x ** 2


def _cond(x):                             # (3,): lax.cond on a data-dependent predicate
    return lax.cond(x[0] > 0, lambda v: jnp.sin(v) * v[::-1], lambda v: jnp.cos(v) + v ** 2, x) * x


def _switch(x):                           # (3,): lax.switch with a clamped index from the data
    i = (x[1] > 0).astype(jnp.int32) + 1
    return lax.switch(i, [jnp.sin, lambda v: v * jnp.exp(v), lambda v: jnp.tanh(v) ** 2], x)


def _scan(x):                             # (4,): a tanh cell over the elements, carry and ys
    def cell(h, xt):
        h = jnp.tanh(h * 0.8 + xt)
        return h, h * xt
    h, ys = lax.scan(cell, x[0] * 0.5, x)
    return ys + h


def _fori_loop(x):                        # (3,): static trip count (reverse-differentiable)
    return lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) * x + c * 0.5, x)


def _while_loop(x):                       # (3,): trip count from a counter (forward modes only)
    def body(c):
        i, v = c
        return i + 1, jnp.sin(v) * x + v * 0.5
    return lax.while_loop(lambda c: c[0] < 3, body, (0, x))[1]


def _cholesky(x):                         # (3, 3): the factor of an SPD matrix built from x
    a = x @ x.T + 3.0 * jnp.eye(3)
    return jnp.linalg.cholesky(a)


def _conv(x):                             # (1, 4, 3, 1): a 3x3 SAME conv with two filters
    w = jnp.asarray(np.linspace(-1.0, 1.0, 18, dtype=np.float32).reshape(3, 3, 1, 2))
    y = lax.conv_general_dilated(x, w.astype(x.dtype), (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jnp.tanh(y)


def _reduce_window(x):                    # (4, 3): max- and average-pooling, 2x2 windows
    mx = lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID")
    avg = lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), "SAME") / 4.0
    return mx.sum() * avg


CASES = {
    "elementwise": (_elementwise, ()),
    "reductions": (_reductions, (2, 3)),
    "matmul": (_matmul, (2, 3)),
    "broadcasting": (_broadcasting, (3,)),
    "basic_indexing": (_basic_indexing, (3, 3)),
    "advanced_indexing": (_advanced_indexing, (5,)),
    "at_updates": (_at_updates, (4,)),
    "pytree": (_pytree_in_out, {"w": (3, 2), "b": (2,)}),
    "where": (_where, (4,)),
    "logsumexp_softmax": (_logsumexp_softmax, (2, 4)),
    "integer_side_inputs": (_integer_side_inputs, (3,)),
    "closure": (_closure, (3,)),
    "shape_ops": (_shape_ops, (2, 3)),
    "custom_jvp": (_custom_jvp, (3,)),
    "custom_vjp": (_custom_vjp, (3,)),
    "cond": (_cond, (3,)),
    "switch": (_switch, (3,)),
    "scan": (_scan, (4,)),
    "fori_loop": (_fori_loop, (3,)),
    "while_loop": (_while_loop, (3,)),
    "cholesky": (_cholesky, (3, 3)),
    # (third derivatives by finite differences cost the cube of the input's size: 12
    # elements, not 16, keep these two to seconds; non-square, so a swapped axis shows)
    "conv": (_conv, (1, 4, 3, 1)),
    "reduce_window": (_reduce_window, (4, 3)),
}
# custom_vjp functions support reverse mode only (jvp of them raises TypeError, as in JAX);
# while_loop supports forward mode only (reverse mode raises, as in JAX).
FORWARD_MODE = {"jvp", "jacfwd", "hessian"}
REVERSE_MODE = {"grad", "jacrev", "hessian"}
EXCLUDED = {"custom_vjp": FORWARD_MODE, "while_loop": REVERSE_MODE}


def _make_input(case: str, batch: tuple) -> object:
    """Float32-exact float64 inputs, away from the kinks of `where`/`max` (|x| in [0.3, 1.2])."""
    rng = np.random.default_rng(zlib.crc32(f"{case}{batch}".encode()))
    spec = CASES[case][1]

    def leaf(shape):
        mag = rng.uniform(0.3, 1.2, batch + tuple(shape))
        sign = rng.choice([-1.0, 1.0], batch + tuple(shape))
        return (mag * sign).astype(np.float32).astype(np.float64)

    if isinstance(spec, dict):
        return {k: leaf(s) for k, s in spec.items()}
    return leaf(spec)


# ---------------------------------------------------------------------------- plax side

def _tree_sum(tree):
    return sum(jnp.sum(leaf) for leaf in tree_util.tree_leaves(tree))


def _tangent_values(shape) -> np.ndarray:
    """A fixed, non-trivial tangent direction for a leaf of ``shape``."""
    n = int(np.prod(shape, dtype=int))
    return np.cos(0.7 * np.arange(n) + 0.3).reshape(shape)


def _tangent_like(x):
    return tree_util.tree_map(
        lambda a: jnp.asarray(_tangent_values(a.shape).astype(a.dtype)), x)


def _plax_transform(name: str, g, backend_name: str):
    if name == "jit":
        return plax.jit(g, backend=backend_name)
    if name == "grad":
        return plax.grad(lambda x: _tree_sum(g(x)))
    if name == "vmap":
        return plax.vmap(g)
    if name == "jvp":
        return lambda x: plax.jvp(g, (x,), (_tangent_like(x),))[1]
    if name == "jacfwd":
        return plax.jacfwd(g)
    if name == "jacrev":
        return plax.jacrev(g)
    if name == "hessian":
        return plax.hessian(lambda x: _tree_sum(g(x)))
    raise AssertionError(name)


# ---------------------------------------------------------------------------- reference side

EPS = 1e-3


def _np_tree_sum(tree) -> float:
    return float(sum(np.sum(leaf) for leaf in tree_util.tree_leaves(tree)))


def _eager_x64(f):
    """The untransformed plax function evaluated in float64, returning NumPy leaves."""

    # Nested central differences revisit many points (x + e_i - e_i, ...): memoise.
    memo: dict = {}

    def ref(x):
        leaves = tree_util.tree_leaves(x)
        key = tuple((np.shape(a), np.asarray(a, np.float64).tobytes()) for a in leaves)
        hit = memo.get(key)
        if hit is None:
            with plax.config.override("jax_enable_x64", True):
                out = f(tree_util.tree_map(jnp.asarray, x))
                hit = memo[key] = tree_util.tree_map(lambda a: np.asarray(a, np.float64), out)
        return hit

    return ref


def _perturbed(x, leaf_index, flat_index, delta):
    leaves, tree = tree_util.tree_flatten(x)
    leaves = [np.array(a, np.float64, copy=True) for a in leaves]
    leaves[leaf_index].reshape(-1)[flat_index] += delta
    return tree_util.tree_unflatten(tree, leaves)


def _fd_jacobian(g):
    """Central-difference Jacobian, structured like JAX's: out tree of in trees of
    arrays with shape ``out.shape + in.shape``."""

    def jac(x):
        in_leaves, in_tree = tree_util.tree_flatten(x)
        out = g(x)
        out_leaves, out_tree = tree_util.tree_flatten(out)
        blocks = [[np.zeros(np.shape(o) + np.shape(i)) for i in in_leaves] for o in out_leaves]
        for li, leaf in enumerate(in_leaves):
            for k in range(np.size(leaf)):
                hi = tree_util.tree_leaves(g(_perturbed(x, li, k, EPS)))
                lo = tree_util.tree_leaves(g(_perturbed(x, li, k, -EPS)))
                for oi, (h, l) in enumerate(zip(hi, lo)):
                    col = (np.asarray(h) - np.asarray(l)) / (2 * EPS)
                    blocks[oi][li].reshape(np.shape(col) + (-1,))[..., k] = col
        return tree_util.tree_unflatten(
            out_tree, [tree_util.tree_unflatten(in_tree, row) for row in blocks])

    return jac


def _fd_grad(h):
    """Central-difference gradient of scalar ``h``, structured like its input."""

    def grad(x):
        leaves, tree = tree_util.tree_flatten(x)
        out = []
        for li, leaf in enumerate(leaves):
            g = np.zeros(np.shape(leaf))
            for k in range(np.size(leaf)):
                g.reshape(-1)[k] = (h(_perturbed(x, li, k, EPS))
                                    - h(_perturbed(x, li, k, -EPS))) / (2 * EPS)
            out.append(g)
        return tree_util.tree_unflatten(tree, out)

    return grad


def _loop_vmap(g):
    def batched(xb):
        leaves, tree = tree_util.tree_flatten(xb)
        size = np.shape(leaves[0])[0]
        outs = [g(tree_util.tree_unflatten(tree, [a[i] for a in leaves])) for i in range(size)]
        return tree_util.tree_map(lambda *ys: np.stack(ys), *outs)

    return batched


def _fd_jvp(g):
    def jvp(x):
        t = tree_util.tree_map(lambda a: _tangent_values(np.shape(a)), x)
        hi = g(tree_util.tree_map(lambda a, d: a + EPS * d, x, t))
        lo = g(tree_util.tree_map(lambda a, d: a - EPS * d, x, t))
        return tree_util.tree_map(lambda a, b: (np.asarray(a) - np.asarray(b)) / (2 * EPS), hi, lo)

    return jvp


def _ref_transform(name: str, g):
    if name == "jit":
        return g
    if name == "grad":
        return _fd_grad(lambda x: _np_tree_sum(g(x)))
    if name == "vmap":
        return _loop_vmap(g)
    if name == "jvp":
        return _fd_jvp(g)
    if name in ("jacfwd", "jacrev"):
        return _fd_jacobian(g)
    if name == "hessian":
        return _fd_jacobian(_fd_grad(lambda x: _np_tree_sum(g(x))))
    raise AssertionError(name)


# ---------------------------------------------------------------------------- the matrix

BASE = ("jit", "grad", "vmap", "jvp")
COMPOSITIONS = [c for n in (1, 2, 3) for c in itertools.product(BASE, repeat=n)]
COMPOSITIONS += [(j,) for j in ("jacfwd", "jacrev", "hessian")]
COMPOSITIONS += [c for j in ("jacfwd", "jacrev", "hessian") for t in BASE
                 for c in ((t, j), (j, t))]
BATCH_SIZES = (2, 3, 2)  # vmap levels from the outermost in


def _batch_shape(composition) -> tuple:
    return BATCH_SIZES[:composition.count("vmap")]


def _compose(composition, f, transform):
    g = f
    for name in reversed(composition):
        g = transform(name, g)
    return g


def _order(composition) -> int:
    """The number of differentiations: sets the finite-difference tolerance."""
    weights = {"grad": 1, "jvp": 1, "jacfwd": 1, "jacrev": 1, "hessian": 2}
    return sum(weights.get(t, 0) for t in composition)


def _tolerance(composition) -> float:
    return {0: 1e-5, 1: 1e-4, 2: 5e-4, 3: 3e-3, 4: 1e-2}[_order(composition)]


MATRIX = [pytest.param(case, comp, id=f"{case}-{'-'.join(comp)}")
          for case in CASES for comp in COMPOSITIONS
          if not EXCLUDED.get(case, set()).intersection(comp)]


# The nested finite differences of the eager float64 function are most of the matrix's time
# (a third derivative of a 16-element input evaluates the function ~5,500 times). None of it
# depends on the backend under test, and ``jit`` is the identity on the reference side, so
# the reference values are kept per case and composition without its jits (``grad(jit(grad
# (f)))`` reuses ``grad(grad(f))``'s, every backend after the first reuses all of them), and
# the function's values per case and input (``grad(grad(grad(f)))`` reuses the points of
# ``grad(grad(f))``).
_REFERENCES: dict = {}
_EAGER: dict = {}
# The staged form of a composition is the same jaxpr on every backend but for the name in its
# jit equations' ``backend`` parameter (tracing happens before a backend is involved), so it is
# staged and type-checked once per case and composition in a process, by the first backend to
# get there: the check (check_jaxpr prints every equation it visits) and the second tracing
# were ~a third of the matrix's time, and repeating them per backend checked nothing new.
_TYPE_CHECKED: set = set()


def _reference(case: str, composition: tuple, x):
    key = (case, tuple(t for t in composition if t != "jit"))
    want = _REFERENCES.get(key)
    if want is None:
        f = _EAGER.get(case)
        if f is None:
            f = _EAGER[case] = _eager_x64(CASES[case][0])
        want = _REFERENCES[key] = _compose(composition, f, _ref_transform)(x)
    return want


def test_composition_matches_reference(case, composition, backend_name):
    fun = CASES[case][0]
    x = _make_input(case, _batch_shape(composition))
    transformed = _compose(composition, fun, lambda n, g: _plax_transform(n, g, backend_name))
    x32 = tree_util.tree_map(lambda a: jnp.asarray(a.astype(np.float32)), x)
    got = transformed(x32)
    if (case, composition) not in _TYPE_CHECKED:  # the staged form is well typed
        plax.core.check_jaxpr(plax.make_jaxpr(transformed)(x32))
        _TYPE_CHECKED.add((case, composition))
    want = _reference(case, composition, x)
    got_leaves, got_tree = tree_util.tree_flatten(got)
    want_leaves, want_tree = tree_util.tree_flatten(want)
    assert got_tree == want_tree, f"structure {got_tree} != reference {want_tree}"
    tol = _tolerance(composition)
    for g, w in zip(got_leaves, want_leaves):
        g = np.asarray(g)
        assert g.dtype == np.float32, f"{composition} gave dtype {g.dtype}"
        assert g.shape == np.shape(w), f"{composition} gave shape {g.shape}, want {np.shape(w)}"
        scale = max(1.0, float(np.max(np.abs(w), initial=0.0)))
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale,
                                   err_msg=f"{case}: {'('.join(composition)}(f)")


# ---------------------------------------------------------------------------- compiled kernels
#
# The matrix above runs on every installed backend. A backend that compiles in the background
# runs a function called once on its reference path (plax_numba compiles a cluster once it is
# hot, see plax_numba.tiered), so the matrix alone would not check its kernels. This subset
# runs with compilation forced before the first call (PLAX_NUMBA_SYNC=1, read by the Numba
# backend only): every function under jit alone and under jit composed with one other
# transform on either side, (jit, t) and (t, jit) for t in grad, vmap and jvp, which puts
# forward, reverse and batched programs through the compiler. Deeper compositions produce
# the same primitives in larger programs; compiling all of them (about 1,900 kernels) would
# cost CI ten minutes, and the conformance kit already compiles every primitive on every
# dtype on this backend. The reference (NumPy) backend compiles nothing: the subset is
# parametrized over the selected backends that are not the reference one.
COMPILED_COMPOSITIONS = [("jit",)] + [c for t in ("grad", "vmap", "jvp")
                                      for c in (("jit", t), (t, "jit"))]
COMPILED_MATRIX = [pytest.param(case, comp, id=f"{case}-{'-'.join(comp)}")
                   for case in CASES for comp in COMPILED_COMPOSITIONS
                   if not EXCLUDED.get(case, set()).intersection(comp)]


def pytest_generate_tests(metafunc):
    # The matrix is parametrized here rather than by a decorator: this hook runs before
    # tests/conftest.py's, which adds ``backend_name``, so a case and composition is the outer
    # loop and its backends follow each other in the collection order. pytest-xdist hands out
    # consecutive tests, so the backends of one entry run in one process, reusing its
    # reference values (_REFERENCES) and its type check (_TYPE_CHECKED); with the backend
    # outermost, half the matrix ran where neither was computed yet.
    if metafunc.function.__name__ == "test_composition_matches_reference":
        metafunc.parametrize("case,composition", MATRIX)
    if "compiling_backend" in metafunc.fixturenames:
        from plax import plugins
        from plax.testing.conformance.plugin import selected_backends
        registry = plugins.registry()
        names = [n for n in selected_backends(metafunc.config)
                 if not getattr(registry.get_backend(n), "reference", False)]
        metafunc.parametrize("compiling_backend", names)


@pytest.mark.parametrize("case,composition", COMPILED_MATRIX)
def test_composition_compiled_matches_reference(case, composition, compiling_backend, monkeypatch):
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")
    test_composition_matches_reference(case, composition, compiling_backend)
