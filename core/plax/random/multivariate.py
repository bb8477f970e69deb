"""Vector- and matrix-valued samplers: multivariate_normal, orthogonal, ball, generalized_normal.

The Cholesky factor and the QR decomposition these need are computed here,
column by column, with ``plax.numpy`` operations (static loops over the matrix
size, so they work under ``jit``, ``vmap`` and ``grad``); they were written
before ``plax.numpy.linalg`` existed. They agree with LAPACK's results to
rounding: a Cholesky factor is unique, and ``orthogonal`` normalises the QR
factor's signs, which makes it unique too. ``multivariate_normal``'s ``"svd"``
and ``"eigh"`` methods use ``plax.numpy.linalg``.
"""
from __future__ import annotations

import operator
from typing import Any

from plax import dtypes
from plax import numpy as jnp
from plax.random._util import (broadcast_shapes, canonical_shape, check_shape, float_dtype,
                               takes_out_sharding)
from plax.random.gamma_family import _gamma
from plax.random.keys import check_key
from plax.random.samplers import _exponential, _normal, _rademacher, _subkeys


# ------------------------------------------------------------------ small dense linear algebra

def cholesky(a):
    """The lower Cholesky factor ``L`` (``a = L @ L^T``) of symmetric matrices ``a[..., n, n]``.

    The input is symmetrised first (``(a + a^T) / 2``), as JAX does; a matrix that is not
    positive definite gives NaNs.
    """
    a = jnp.divide(jnp.add(a, jnp.swapaxes(a, -1, -2)), 2)
    n = a.shape[-1]
    columns = []  # columns[j] holds L[..., j:, j]
    rows = [[] for _ in range(n)]  # rows[i][j] = L[..., i, j] for j < i, as (...,) arrays
    for j in range(n):
        prev = rows[j]
        diag_sq = a[..., j, j]
        if prev:
            left = jnp.stack(prev, axis=-1)
            diag_sq = jnp.subtract(diag_sq, jnp.sum(jnp.multiply(left, left), axis=-1))
        diag = jnp.sqrt(diag_sq)
        below = a[..., j + 1:, j]
        if prev and j + 1 < n:
            lower_rows = jnp.stack([jnp.stack(rows[i], axis=-1) for i in range(j + 1, n)], axis=-2)
            below = jnp.subtract(below, jnp.sum(jnp.multiply(lower_rows, left[..., None, :]),
                                                axis=-1))
        column = jnp.divide(below, diag[..., None]) if j + 1 < n else below
        for offset, i in enumerate(range(j + 1, n)):
            rows[i].append(column[..., offset])
        columns.append((diag, column))
    # assemble L from its columns: zeros above the diagonal
    full_columns = []
    for j, (diag, column) in enumerate(columns):
        parts = []
        if j:
            parts.append(jnp.zeros(diag.shape + (j,), diag.dtype))
        parts.append(diag[..., None])
        if j + 1 < n:
            parts.append(column)
        full_columns.append(jnp.concatenate(parts, axis=-1))
    return jnp.stack(full_columns, axis=-1)


def _orthonormal_columns(z):
    """``q`` of the reduced QR decomposition of ``z[..., m, k]`` (m >= k) with ``R``'s diagonal
    made positive: Gram-Schmidt with one re-orthogonalisation pass for stability."""
    k = z.shape[-1]
    basis = []
    for j in range(k):
        v = z[..., :, j]
        for _ in range(2):
            for q in basis:
                v = jnp.subtract(v, jnp.multiply(jnp.sum(jnp.multiply(q, v), axis=-1,
                                                         keepdims=True), q))
        norm = jnp.sqrt(jnp.sum(jnp.multiply(v, v), axis=-1, keepdims=True))
        basis.append(jnp.divide(v, norm))
    return jnp.stack(basis, axis=-1)


# ------------------------------------------------------------------ multivariate normal

@takes_out_sharding
def multivariate_normal(key: Any, mean: Any, cov: Any, shape: Any = None, dtype: Any = None,
                        method: str = "cholesky"):
    """Multivariate normal vectors with mean ``mean[..., n]`` and covariance ``cov[..., n, n]``.

    Computed as ``mean + L @ z`` with ``L`` the Cholesky factor of ``cov`` and ``z``
    standard normal (JAX's construction, so the same key gives the same vectors).

    Args:
      key: a single PRNG key.
      mean: mean vector(s), shape ``(..., n)``.
      cov: positive definite covariance matrix(es), shape ``(..., n, n)``.
      shape: the batch shape of the result (default: the broadcast batch shape of
        ``mean`` and ``cov``); the result has shape ``shape + (n,)``.
      dtype: a float dtype (default: that of ``mean``).
      method: how ``cov`` is factored: ``"cholesky"`` (the default), ``"svd"`` or
        ``"eigh"`` (``U sqrt(S)`` of the decomposition; these accept semi-definite
        covariances, and the vectors drawn depend on the decomposition's sign conventions).

    Raises:
      ValueError: for inconsistent shapes or an unknown method.

    Example:
      >>> random.multivariate_normal(random.PRNGKey(0), jnp.zeros(2), jnp.eye(2), (3,))
      Array([[ 1.6226422 ,  2.0252647 ],
             [-0.43359444, -0.07861735],
             [ 0.1760909 , -0.97208923]], dtype=float32)
    """
    data, _ = check_key("multivariate_normal", key)
    if method not in ("svd", "eigh", "cholesky"):
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    mean = jnp.asarray(mean)
    cov = jnp.asarray(cov)
    common = dtypes.result_type(mean.dtype, cov.dtype)
    if not dtypes.is_inexact(common):
        common = dtypes.default_float_dtype()
    mean, cov = mean.astype(common), cov.astype(common)
    dt = common if dtype is None else float_dtype(dtype, "multivariate_normal")
    if not dtypes.is_float(dt):
        raise ValueError(f"dtype argument to `multivariate_normal` must be a float dtype, got "
                         f"{dt.name}")
    if mean.ndim < 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == "
                         f"{mean.ndim}")
    if cov.ndim < 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == {cov.ndim}")
    n = mean.shape[-1]
    if tuple(cov.shape[-2:]) != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, but "
                         f"got cov.shape == {tuple(cov.shape)}.")
    if shape is None:
        shape = broadcast_shapes("multivariate_normal", mean.shape[:-1], cov.shape[:-2])
    else:
        shape = canonical_shape(shape, "multivariate_normal")
        check_shape("normal", shape, mean.shape[:-1], cov.shape[:-2])
    if method == "svd":  # cov = U S U^T: factor U sqrt(S) (positive semi-definite cov works)
        u, s, _ = jnp.linalg.svd(cov)
        factor = jnp.multiply(u, jnp.sqrt(s)[..., None, :])
    elif method == "eigh":  # cov = V W V^T: factor V sqrt(W)
        w, v = jnp.linalg.eigh(cov)
        factor = jnp.multiply(v, jnp.sqrt(w)[..., None, :])
    else:
        factor = cholesky(cov)
    samples = _normal(data, tuple(shape) + (n,), dt)
    return jnp.add(mean, jnp.einsum("...ij,...j->...i", factor, samples))


# ------------------------------------------------------------------ orthogonal

@takes_out_sharding
def orthogonal(key: Any, n: int, shape: Any = (), dtype: Any = None, m: int | None = None):
    """Random matrices with orthonormal rows or columns, uniform (Haar) over the orthogonal
    group: the signed ``Q`` factor of a Gaussian matrix (Mezzadri, 2007).

    Args:
      key: a single PRNG key.
      n: the number of rows.
      shape: batch dimensions. Default ``()``.
      dtype: a float dtype.
      m: the number of columns (default ``n``).

    Returns:
      An array of shape ``shape + (n, m)``.

    Example:
      >>> q = random.orthogonal(random.PRNGKey(0), 3)
    """
    data, _ = check_key("orthogonal", key)
    dt = float_dtype(dtype, "orthogonal")
    shape = canonical_shape(shape, "orthogonal")
    n = operator.index(n)
    cols = n if m is None else operator.index(m)
    z = _normal(data, tuple(shape) + (max(n, cols), min(n, cols)), dt)
    q = _orthonormal_columns(z)
    return jnp.swapaxes(q, -1, -2) if n < cols else q


# ------------------------------------------------------------------ generalized normal and ball

@takes_out_sharding
def generalized_normal(key: Any, p: float, shape: Any = (), dtype: Any = None):
    """Generalized normal values: density ∝ ``exp(-|x|**p)``.

    Example:
      >>> jnp.round(random.generalized_normal(random.PRNGKey(0), 1.5, (3,)), 4)
      Array([ 1.0604,  0.0892, -1.3751], dtype=float32)
    """
    data, _ = check_key("generalized_normal", key)
    dt = float_dtype(dtype, "generalized_normal")
    shape = canonical_shape(shape, "generalized_normal")
    return _generalized_normal(data, p, shape, dt)


def _reciprocal(p):
    # a Python number stays one (JAX computes ``1 / p`` in Python there), arrays divide
    return 1 / p if isinstance(p, (int, float)) else jnp.divide(1, p)


def _generalized_normal(data, p, shape, dtype):
    key_g, key_r = _subkeys(data, 2)
    inv_p = _reciprocal(p)
    g = _gamma(key_g, inv_p, tuple(shape), dtype)
    r = _rademacher(key_r, shape, dtype)
    return jnp.multiply(r, jnp.power(g, inv_p))


@takes_out_sharding
def ball(key: Any, d: int, p: float = 2, shape: Any = (), dtype: Any = None):
    """Points uniformly distributed in the unit ``p``-norm ball of dimension ``d``.

    Args:
      key: a single PRNG key.
      d: the dimension.
      p: the norm's exponent. Default 2.
      shape: batch dimensions; the result has shape ``shape + (d,)``.
      dtype: a float dtype.

    Example:
      >>> random.ball(random.PRNGKey(0), 3, shape=(2,))
      Array([[ 0.91715974,  0.39274216,  0.0116535 ],
             [-0.8613651 ,  0.31684825, -0.06285544]], dtype=float32)
    """
    data, _ = check_key("ball", key)
    dt = float_dtype(dtype, "ball")
    shape = canonical_shape(shape, "ball")
    d = operator.index(d)
    k1, k2 = _subkeys(data, 2)
    g = _generalized_normal(k1, p, tuple(shape) + (d,), dt)
    e = _exponential(k2, shape, dt)
    norm = jnp.power(jnp.add(jnp.sum(jnp.power(jnp.abs(g), p), axis=-1), e), _reciprocal(p))
    return jnp.divide(g, norm[..., None])

