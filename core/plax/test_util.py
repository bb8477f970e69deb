"""Numerical derivative checks: ``check_grads`` compares jvp and vjp against finite differences.

Example:
  >>> from plax.test_util import check_grads
  >>> check_grads(jnp.sin, (1.0,), order=2)
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from plax import dtypes, tree_util

_default_tol = {np.dtype(np.float16): 1e-1, dtypes.bfloat16: 1e-1, np.dtype(np.float32): 2e-2,
                np.dtype(np.float64): 1e-5, np.dtype(np.complex64): 2e-2,
                np.dtype(np.complex128): 1e-5}
_default_eps = {np.dtype(np.float16): 1e-1, dtypes.bfloat16: 1e-1, np.dtype(np.float32): 1e-2,
                np.dtype(np.float64): 1e-5, np.dtype(np.complex64): 1e-2,
                np.dtype(np.complex128): 1e-5}


def _dtype(x) -> np.dtype:
    return dtypes.dtype(x)


def _is_float(x) -> bool:
    return dtypes.is_inexact(_dtype(x))


def _tol(leaves, given):
    if given is not None:
        return given
    return max([_default_tol.get(_dtype(x), 1e-5) for x in leaves if _is_float(x)] or [1e-5])


def _random_like(rng, x):
    import plax.numpy as jnp
    dt = _dtype(x)
    shape = np.shape(x) if not hasattr(x, "shape") else x.shape
    if not dtypes.is_inexact(dt):
        return np.zeros(shape, dtypes.float0)
    v = rng.standard_normal(shape)
    if dtypes.is_complex(dt):
        v = v + 1j * rng.standard_normal(shape)
    return jnp.asarray(np.asarray(v).astype(dt))


def _inner(xs, ys):
    total = 0.0
    for x, y in zip(xs, ys):
        if isinstance(x, np.ndarray) and x.dtype == dtypes.float0:
            continue
        if isinstance(y, np.ndarray) and y.dtype == dtypes.float0:
            continue
        total = total + np.sum(np.asarray(x, np.complex128) * np.conj(np.asarray(y, np.complex128))).real
    return total


def _conj(x):
    """The complex conjugate of a complex array (anything else unchanged)."""
    if isinstance(x, np.ndarray) and x.dtype == dtypes.float0:
        return x
    if not dtypes.is_complex(_dtype(x)):
        return x
    import plax.numpy as jnp
    return jnp.asarray(np.conj(np.asarray(x)))


def numerical_jvp(f: Callable, primals: Sequence, tangents: Sequence, eps: float | None = None):
    """Central-difference directional derivative of ``f`` at ``primals`` along ``tangents``."""
    import plax.numpy as jnp
    leaves = tree_util.tree_leaves(primals)
    if eps is None:
        eps = max([_default_eps.get(_dtype(x), 1e-5) for x in leaves if _is_float(x)] or [1e-5])

    def shifted(sign):
        out = []
        for p, t in zip(primals, tangents):
            if isinstance(t, np.ndarray) and t.dtype == dtypes.float0:
                out.append(p)
            else:
                out.append(jnp.asarray(p) + (sign * eps) * jnp.asarray(t))
        return f(*out)

    plus, minus = shifted(1.0), shifted(-1.0)
    return tree_util.tree_map(
        lambda a, b: (np.asarray(a, np.complex128 if np.iscomplexobj(a) else np.float64)
                      - np.asarray(b, np.complex128 if np.iscomplexobj(b) else np.float64)) / (2 * eps),
        plus, minus)


def _assert_close(actual, expected, tol, what):
    a_leaves = tree_util.tree_leaves(actual)
    e_leaves = tree_util.tree_leaves(expected)
    assert len(a_leaves) == len(e_leaves), f"{what}: {len(a_leaves)} outputs vs {len(e_leaves)}"
    for a, e in zip(a_leaves, e_leaves):
        a = np.asarray(a, np.complex128 if np.iscomplexobj(a) else np.float64)
        e = np.asarray(e, np.complex128 if np.iscomplexobj(e) else np.float64)
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol, err_msg=what)


def check_jvp(f: Callable, f_jvp: Callable, args: Sequence, atol=None, rtol=None, eps=None,
              rng=None) -> None:
    """Checks ``f_jvp(args, tangents)`` against central differences of ``f``."""
    rng = rng or np.random.default_rng(0)
    tangents = [_random_like(rng, a) for a in args]
    v_out, t_out = f_jvp(tuple(args), tuple(tangents))
    tol = _tol(tree_util.tree_leaves(args), atol if atol is not None else rtol)
    _assert_close(v_out, f(*args), tol, "jvp primal output differs from f(*args)")
    t_num = numerical_jvp(f, args, tangents, eps)
    _assert_close(t_out, t_num, tol, "jvp tangent differs from finite differences")


def check_vjp(f: Callable, f_vjp: Callable, args: Sequence, atol=None, rtol=None, eps=None,
              rng=None) -> None:
    """Checks ``Re sum(t * vjp(conj(ct))) == Re sum(J t * conj(ct))`` (JAX's convention: the
    VJP of a holomorphic function multiplies by ``f'`` without conjugating it), with ``J t``
    from central differences."""
    rng = rng or np.random.default_rng(1)
    v_out, vjp_fun = f_vjp(*args)
    tol = _tol(tree_util.tree_leaves(args), atol if atol is not None else rtol)
    _assert_close(v_out, f(*args), tol, "vjp primal output differs from f(*args)")
    tangents = [_random_like(rng, a) for a in args]
    out_leaves, out_tree = tree_util.tree_flatten(v_out)
    cts = [_random_like(rng, o) for o in out_leaves]
    ct_tree = tree_util.tree_unflatten(out_tree, [_conj(c) for c in cts])
    pulled = vjp_fun(ct_tree)
    t_num = tree_util.tree_leaves(numerical_jvp(f, args, tangents, eps))
    lhs = _inner(tangents, [_conj(p) for p in tree_util.tree_leaves(pulled)])
    rhs = _inner(t_num, cts)
    scale = max(1.0, abs(rhs))
    assert abs(lhs - rhs) <= tol * scale * 5, (
        f"vjp inconsistent with finite differences: <vjp(ct), t> = {lhs}, <ct, J t> = {rhs}")


def check_grads(f: Callable, args: Sequence, order: int, modes: Sequence[str] = ("fwd", "rev"),
                atol=None, rtol=None, eps=None) -> None:
    """Checks the derivatives of ``f`` at ``args`` up to ``order`` against finite differences.

    Args:
      f: a function of arrays.
      args: a tuple of arguments.
      order: 1 checks first derivatives; 2 also checks the derivatives of the derivative, etc.
      modes: ``"fwd"`` (jvp) and/or ``"rev"`` (vjp).

    Raises:
      AssertionError: naming the mode, order and the mismatch.
    """
    from plax.transforms.autodiff import jvp, vjp
    args = tuple(args)
    for mode in modes:
        if mode not in ("fwd", "rev"):
            raise ValueError(f"unknown mode {mode!r}; expected 'fwd' or 'rev'")

    def _check(f, args, order, salt):
        rng = np.random.default_rng(salt)
        if "fwd" in modes:
            check_jvp(f, lambda p, t: jvp(f, p, t), args, atol, rtol, eps, rng)
            if order > 1:
                tangents = [_random_like(rng, a) for a in args]
                _check(lambda *a: jvp(f, a, tangents)[1], args, order - 1, salt + 1)
        if "rev" in modes:
            check_vjp(f, lambda *a: vjp(f, *a), args, atol, rtol, eps, rng)
            if order > 1:
                out = f(*args)
                out_leaves, out_tree = tree_util.tree_flatten(out)
                ct = tree_util.tree_unflatten(out_tree, [_random_like(rng, o) for o in out_leaves])
                _check(lambda *a: vjp(f, *a)[1](ct), args, order - 1, salt + 2)

    _check(f, args, order, 0)
