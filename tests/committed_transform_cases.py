"""Transformations of functions of an array committed to one device (no mesh set), and
whether JAX 0.10.2 commits each result (recorded by ``record_device_typed.py`` in
``committed_transforms_jax.json``; ``test_committed_transforms.py`` checks plax against the
record, and against JAX where it is installed).

JAX's rule, read off these answers and its source: every ``jax.numpy`` function is a
``jit``, and a transformation runs its pieces as ``jit`` calls, so a result is committed when
the piece computing it took a committed value. A ``vjp``'s cotangents are computed from the
cotangent given (uncommitted here) and the residuals the forward pass kept: a residual
computed from ``c`` (``cos(c)`` for ``sin``, ``c`` itself for ``x * x``) and a constant the
forward pass converted inside a ``jax.numpy`` function that took ``c`` (the ``2`` of ``x *
2``, an argument of ``jnp.multiply``) are committed, so ``grad`` of ``(x * 2).sum()`` is
committed while ``grad`` of ``x.sum()`` (no residual) or ``x.mean()`` (its divisor a literal
of ``jnp.mean``'s program) is not.
"""
from __future__ import annotations


def cases(lib, jnp) -> dict:
    """name -> a function of (c committed, u uncommitted) computing one result (or several)."""
    f = lambda x, y: (x * 2).sum()
    g = jnp.sin
    return {
        "grad(2x sum)(c, u)": lambda c, u: lib.grad(f)(c, u),
        "grad(2x sum)(u, c)": lambda c, u: lib.grad(f)(u, c),
        "grad(2x sum, argnums=1)(u, c)": lambda c, u: lib.grad(f, argnums=1)(u, c),
        "value_and_grad(2x sum)(c, u)": lambda c, u: lib.value_and_grad(f)(c, u),
        "grad(sum)(c)": lambda c, u: lib.grad(lambda x: x.sum())(c),
        "grad(neg sum)(c)": lambda c, u: lib.grad(lambda x: (-x).sum())(c),
        "grad(mean)(c)": lambda c, u: lib.grad(lambda x: x.mean())(c),
        "grad(x * x sum)(c)": lambda c, u: lib.grad(lambda x: (x * x).sum())(c),
        "grad(sin sum)(c)": lambda c, u: lib.grad(lambda x: jnp.sin(x).sum())(c),
        "grad(1 + 0 * sum)(c)": lambda c, u: lib.grad(lambda x: 1.0 + 0 * x.sum())(c),
        "grad(x * uncommitted 2)(c)": lambda c, u: lib.grad(
            lambda x: (x * jnp.float32(2)).sum())(c),
        "jit(grad(2x sum))(c)": lambda c, u: lib.jit(lib.grad(lambda x: (x * 2).sum()))(c),
        "checkpoint grad(sin sum)(c)": lambda c, u: lib.grad(
            lib.checkpoint(lambda x: jnp.sin(x).sum()))(c),
        "vjp(sin, c) out": lambda c, u: lib.vjp(g, c)[0],
        "vjp(sin, c) pullback(u)": lambda c, u: lib.vjp(g, c)[1](u),
        "vjp(sin, u) pullback(c)": lambda c, u: lib.vjp(g, u)[1](c),
        "jvp(sin, c, u)": lambda c, u: lib.jvp(g, (c,), (u,)),
        "jvp(sin, u, c)": lambda c, u: lib.jvp(g, (u,), (c,)),
        "vmap(sin)(c)": lambda c, u: lib.vmap(g)(c),
        "vmap(add)(c, u)": lambda c, u: lib.vmap(lambda a, b: a + b)(c, u),
        "jacfwd(sin)(c)": lambda c, u: lib.jacfwd(g)(c),
        "jacrev(sin)(c)": lambda c, u: lib.jacrev(g)(c),
        "hessian(sin sum)(c)": lambda c, u: lib.hessian(lambda x: jnp.sin(x).sum())(c),
        "linearize(sin, c) out": lambda c, u: lib.linearize(g, c)[0],
        "linearize(sin, c) f_jvp(u)": lambda c, u: lib.linearize(g, c)[1](u),
        "linearize(sin, u) f_jvp(c)": lambda c, u: lib.linearize(g, u)[1](c),
        "value_and_grad(sin sum)(c)": lambda c, u: lib.value_and_grad(
            lambda x: jnp.sin(x).sum())(c),
        "grad(dot(x, x))(c)": lambda c, u: lib.grad(lambda x: jnp.dot(x, x))(c),
        "grad(sin(x) * c sum)(u)": lambda c, u: lib.grad(lambda x: (jnp.sin(x) * c).sum())(u),
        "grad(x sum, argnums=(0, 1))(c, u)": lambda c, u: lib.grad(
            lambda x, y: (x * y).sum(), argnums=(0, 1))(c, u),
        "vjp(x * x, c) pullback(u)": lambda c, u: lib.vjp(lambda x: x * x, c)[1](u),
        "jacfwd(x * x)(c)": lambda c, u: lib.jacfwd(lambda x: x * x)(c),
        "jacrev(x * x)(c)": lambda c, u: lib.jacrev(lambda x: x * x)(c),
        "jvp(x * x, c, u)": lambda c, u: lib.jvp(lambda x: x * x, (c,), (u,)),
        "jvp(x * x, u, c)": lambda c, u: lib.jvp(lambda x: x * x, (u,), (c,)),
        "jvp(lax.sin, u, c)": lambda c, u: lib.jvp(lib.lax.sin, (u,), (c,)),
        # functions of several results: jax.numpy's (jits) commit every primal result by a
        # committed tangent that the JVP reads (not argsort's), lax's primitives do not
        "jvp(jnp.linalg.qr, u, c)": lambda c, u: lib.jvp(jnp.linalg.qr, (_m(u),), (_m(c),)),
        "jvp(jnp.linalg.qr, c, u)": lambda c, u: lib.jvp(jnp.linalg.qr, (_m(c),), (_m(u),)),
        "jvp(jnp.linalg.svd, u, c)": lambda c, u: lib.jvp(jnp.linalg.svd, (_m(u),), (_m(c),)),
        "jvp(scipy.linalg.lu, u, c)": lambda c, u: lib.jvp(lib.scipy.linalg.lu, (_m(u),),
                                                           (_m(c),)),
        "jvp(lax.linalg.qr, u, c)": lambda c, u: lib.jvp(lib.lax.linalg.qr, (_m(u),), (_m(c),)),
        "jvp(lax.sort of 2, u, c)": lambda c, u: lib.jvp(
            lambda x: lib.lax.sort((x, x), num_keys=1), (u,), (c,)),
        "jvp(jnp.sort, u, c)": lambda c, u: lib.jvp(jnp.sort, (u,), (c,)),
        # more jax.numpy functions of several results (each a jit in JAX), and lax's
        "jvp(jnp.linalg.eigh, u, c)": lambda c, u: lib.jvp(jnp.linalg.eigh, (_m(u),), (_m(c),)),
        "jvp(jnp.linalg.eigh, c, u)": lambda c, u: lib.jvp(jnp.linalg.eigh, (_m(c),), (_m(u),)),
        "jvp(lax.linalg.eigh, u, c)": lambda c, u: lib.jvp(lib.lax.linalg.eigh, (_m(u),),
                                                           (_m(c),)),
        "jvp(jnp.linalg.slogdet, u, c)": lambda c, u: lib.jvp(jnp.linalg.slogdet, (_m(u),),
                                                              (_m(c),)),
        "jvp(jnp.linalg.eigvals, u, c)": lambda c, u: lib.jvp(jnp.linalg.eigvals, (_m(u),),
                                                              (_m(c),)),
        "jvp(floor_divide by 2, u, c)": lambda c, u: lib.jvp(
            lambda x: jnp.floor_divide(x, 2.0), (u,), (c,)),
        "jvp(divmod by 2, u, c)": lambda c, u: lib.jvp(lambda x: jnp.divmod(x, 2.0), (u,), (c,)),
        "jvp(jnp.frexp, u, c)": lambda c, u: lib.jvp(jnp.frexp, (u,), (c,)),
        "jvp(jnp.modf, u, c)": lambda c, u: lib.jvp(jnp.modf, (u,), (c,)),
        "jvp(unique with counts, u, c)": lambda c, u: lib.jvp(
            lambda x: jnp.unique(x, return_counts=True, size=3), (u,), (c,)),
        "jvp(jnp.linalg.lstsq, u, c)": lambda c, u: lib.jvp(
            lambda a: jnp.linalg.lstsq(a, a[0])[:2], (_m(u),), (_m(c),)),
        "jvp(jnp.argsort, u, c)": lambda c, u: lib.jvp(jnp.argsort, (u,), (c,)),
        "jvp(jnp.linalg.svd, c, u)": lambda c, u: lib.jvp(jnp.linalg.svd, (_m(c),), (_m(u),)),
    }


def _m(v):
    """A (3, 3) matrix of full rank (distinct singular values) built from ``v`` (3 ones) by
    operations that keep its device and committedness."""
    import numpy as np
    return v[:, None] * np.array([[3, 1, 0], [1, 2, 1], [0, 1, 4]], np.float32)


def _committed(v):
    """Whether ``v`` is committed; ``"float0"`` for a tangent of an integer value (a NumPy
    array of dtype float0 in both, on no device)."""
    return bool(v.committed) if hasattr(v, "committed") else str(v.dtype)


def answers(lib, jnp) -> dict:
    """name -> whether ``lib`` commits each result (or the exception it raises)."""
    c = lib.device_put(jnp.ones(3), lib.devices()[0])
    u = jnp.ones(3)
    out = {}
    for name, f in cases(lib, jnp).items():
        try:
            out[name] = [_committed(v) for v in lib.tree_util.tree_leaves(f(c, u))]
        except Exception as e:  # noqa: BLE001 - recorded as it is
            out[name] = f"{type(e).__name__}: {e}"
    return out
