"""Discrete samplers: permutation, choice, categorical and poisson.

Shuffles sort by fresh random 32-bit keys (a few rounds for huge arrays),
sampling without replacement uses the Gumbel top-k trick, and Poisson
variates use Knuth's multiplication method for small rates and Hörmann's
transformed rejection (PTRS) for rates of 10 and above, all as in JAX.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from plax import dtypes, lax
from plax import numpy as jnp
from plax.core.trace import Tracer, get_aval
from plax.random._fma import fma
from plax.random._loops import while_loop
from plax.random._special import lgamma
from plax.random._util import canonical_shape, check_shape, int_dtype, shape_of, takes_out_sharding
from plax.random.keys import bits_data, check_key
from plax.random.samplers import _gumbel, _subkeys, _uniform
from plax.sharding_types import with_out_sharding

# Rounds unrolled when traced (see plax.random._loops). Knuth's loop runs one round more than
# the largest sample and only serves rates below 10: P(Poisson(10) >= 47) < 2e-17 per element.
# Hormann's rejection rejects an element with probability below 0.3 per round (measured at
# lam = 10, the worst case), so a million elements all finish within 28 rounds except with
# probability ~1e6 * 0.3**28 < 1e-8.
POISSON_KNUTH_TRACED_ROUNDS = 48
POISSON_REJECTION_TRACED_ROUNDS = 28


def _concrete_int(x: Any, what: str) -> int:
    if isinstance(x, Tracer):
        raise TypeError(f"{what} must be a concrete integer, got a traced value. Under jit, mark "
                        "it static (static_argnums).")
    return int(np.asarray(x))


def _ndim(x: Any) -> int:
    return len(shape_of(x))


# ------------------------------------------------------------------ permutation

@takes_out_sharding
def permutation(key: Any, x: Any, axis: int = 0, independent: bool = False):
    """A random permutation of ``arange(x)`` (an int) or of ``x`` along ``axis`` (an array).

    Args:
      key: a single PRNG key.
      x: an integer ``n`` (permute ``arange(n)``) or an array.
      axis: the axis of ``x`` to shuffle. Default 0.
      independent: if True, shuffle every 1-D slice along ``axis`` independently;
        otherwise whole slices move together.

    Returns:
      The shuffled array.

    Raises:
      TypeError: if ``x`` is a non-integer scalar.

    Example:
      >>> random.permutation(random.PRNGKey(0), 5)
      Array([0, 1, 4, 3, 2], dtype=int32)
    """
    data, _ = check_key("permutation", key)
    if _ndim(x) == 0:
        if not dtypes.is_integer(dtypes.dtype(x)):
            raise TypeError("x must be an integer or at least 1-dimensional")
        n = _concrete_int(x, "argument x of random.permutation()")
        return _shuffle(data, jnp.arange(n), 0)
    x = jnp.asarray(x)
    from plax.lax.base import canonicalize_axis
    axis = canonicalize_axis(axis, x.ndim)
    if independent or x.ndim == 1:
        return _shuffle(data, x, axis)
    order = _shuffle(data, jnp.arange(x.shape[axis]), 0)
    return jnp.take(x, order, axis=axis)


def _shuffle(data, x, axis: int):
    """Sorts ``x`` along ``axis`` by random 32-bit keys, repeated enough rounds that all
    elements get distinct key strings with high probability (JAX's heuristic)."""
    size = math.prod(get_aval(x).shape)
    exponent = 3
    rounds = int(np.ceil(exponent * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        data, subkey = _subkeys(data, 2)
        sort_keys = bits_data(subkey, 32, get_aval(x).shape)
        _, x = lax.sort_key_val(sort_keys, x, axis)
    return x


# ------------------------------------------------------------------ choice

def _top_k_indices(x, k: int):
    """Indices of the ``k`` largest entries along the last axis, largest first (ties: lower
    index first), like ``lax.top_k``."""
    shape = get_aval(x).shape
    iota = lax.broadcasted_iota(np.int32, shape, len(shape) - 1)
    _, order = lax.sort_key_val(lax.neg(x), iota, len(shape) - 1)
    return lax.slice_in_dim(order, 0, k, axis=len(shape) - 1)


def choice(key: Any, a: Any, shape: Sequence[int] = (), replace: bool = True, p: Any = None,
           axis: int = 0, mode: str | None = None):
    """Random samples from ``a`` (an array along ``axis``, or ``arange(a)`` for an int).

    Args:
      key: a single PRNG key.
      a: an integer ``n`` or an array to sample from.
      shape: the number of draws, as a shape. Default ``()``.
      replace: sample with replacement (default) or without.
      p: optional probabilities of each entry (a 1-D array of length ``n``); they need not
        sum to one (as in JAX, they are normalised by their sum).
      axis: the axis of ``a`` to sample along. Default 0.
      mode: gumbel mode for sampling without replacement with ``p`` (``"low"``/``"high"``).

    Returns:
      The samples, of shape ``shape`` (int ``a``) or ``a.shape`` with ``axis`` replaced by
      ``shape``.

    Raises:
      TypeError: if ``shape`` is not a sequence.
      ValueError: for an empty population, more draws than entries without replacement,
        or ``p`` of the wrong shape.

    Example:
      >>> random.choice(random.PRNGKey(0), 10, (3,), replace=False)
      Array([0, 1, 8], dtype=int32)
    """
    data, _ = check_key("choice", key)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"shape argument of random.choice must be a sequence, got {shape}")
    shape = canonical_shape(shape, "choice")
    arr = jnp.asarray(a)
    if arr.ndim == 0:
        n_inputs = _concrete_int(a, "The population size a of random.choice()")
    else:
        from plax.lax.base import canonicalize_axis
        axis = canonicalize_axis(axis, arr.ndim)
        n_inputs = arr.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(shape, dtype=arr.dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population (size "
                         f"{n_inputs}) when 'replace=False'")
    if p is None:
        if replace:
            from plax.random.samplers import _randint_any
            ind = _randint_any(data, shape, 0, n_inputs, dtypes.default_int_dtype())
            result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis=axis)
        else:
            pool = jnp.arange(n_inputs) if arr.ndim == 0 else arr
            shuffled = permutation(data, pool, axis)
            result = lax.slice_in_dim(shuffled, 0, n_draws, axis=axis if arr.ndim else 0)
    else:
        p_arr = jnp.asarray(p)
        if not dtypes.is_inexact(p_arr.dtype):
            p_arr = p_arr.astype(dtypes.default_float_dtype())
        if tuple(p_arr.shape) != (n_inputs,):
            raise ValueError("p must be None or a 1D vector with the same size as a.shape[axis]. "
                             f"p has shape {tuple(p_arr.shape)} and a.shape[axis] is {n_inputs}.")
        if replace:
            p_cuml = jnp.cumsum(p_arr)
            total = p_cuml[-1]
            r = jnp.multiply(total, jnp.subtract(1, _uniform(data, shape, p_cuml.dtype)))
            ind = jnp.searchsorted(p_cuml, r).astype(dtypes.default_int_dtype())
        else:
            mode = "low" if mode is None else mode
            g = jnp.add(_gumbel(data, (n_inputs,), p_arr.dtype, mode), jnp.log(p_arr))
            ind = _top_k_indices(g, n_draws).astype(dtypes.default_int_dtype())
        result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis=axis)
    out_shape = shape if arr.ndim == 0 else arr.shape[:axis] + tuple(shape) + arr.shape[axis + 1:]
    return jnp.reshape(result, out_shape)


# ------------------------------------------------------------------ categorical

def categorical(key: Any, logits: Any, axis: int = -1, shape: Any = None, replace: bool = True,
                mode: str | None = None, *, out_sharding=None):
    """Samples category indices from unnormalised log-probabilities (the Gumbel-max trick).

    Args:
      key: a single PRNG key.
      logits: log-probabilities (up to a constant) along ``axis``.
      axis: the category axis. Default -1.
      shape: the result's shape; it must end with the logits' batch shape (their shape
        without ``axis``). Default: that batch shape.
      replace: with replacement (default); without it, the leading ``shape`` entries must
        not outnumber the categories.
      mode: gumbel mode, ``"low"`` (default) or ``"high"``.

    Returns:
      Integer indices of ``shape``.

    Raises:
      ValueError: for incompatible shapes or too many draws without replacement.

    Example:
      >>> random.categorical(random.PRNGKey(0), jnp.log(jnp.array([0.2, 0.8])), shape=(5,))
      Array([1, 1, 1, 1, 0], dtype=int32)
    """
    if out_sharding is not None:
        return with_out_sharding(lambda: categorical(key, logits, axis, shape, replace, mode),
                                 out_sharding)
    data, _ = check_key("categorical", key)
    logits = jnp.asarray(logits)
    ndim = logits.ndim
    from plax.lax.base import canonicalize_axis
    axis_c = canonicalize_axis(axis, ndim)
    batch_shape = tuple(d for i, d in enumerate(logits.shape) if i != axis_c)
    if shape is None:
        shape = batch_shape
    else:
        shape = canonical_shape(shape, "categorical")
        check_shape("categorical", shape, batch_shape)
    prefix = shape[:len(shape) - len(batch_shape)]
    dtype = logits.dtype
    mode = "low" if mode is None else mode
    if replace:
        logits_shape = list(shape[len(shape) - len(batch_shape):])
        logits_shape.insert(axis_c, logits.shape[axis_c])
        g = _gumbel(data, (*prefix, *logits_shape), dtype, mode)
        expanded = lax.expand_dims(logits, tuple(range(len(prefix))))
        return jnp.argmax(jnp.add(g, expanded), axis=axis_c + len(prefix))
    k = math.prod(prefix)
    if k > logits.shape[axis_c]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number of "
                         f"categories ({logits.shape[axis_c]}).")
    perturbed = jnp.add(logits, _gumbel(data, logits.shape, dtype, mode))
    indices = _top_k_indices(jnp.moveaxis(perturbed, axis_c, -1), k)
    # indices: batch_shape + (k,) -> (k,) + batch_shape -> shape
    indices = jnp.moveaxis(indices, -1, 0)
    return jnp.reshape(indices, shape)


# ------------------------------------------------------------------ poisson

@takes_out_sharding
def poisson(key: Any, lam: Any, shape: Any = None, dtype: Any = None):
    """Poisson random integers with rate ``lam`` (computed in float32, as in JAX).

    Args:
      key: a single PRNG key.
      lam: the rate(s), ``>= 0``, broadcast-compatible with ``shape``.
      shape: the result's shape (default: the shape of ``lam``).
      dtype: an integer dtype (default int32, int64 with x64).

    Returns:
      Integers of ``shape``; ``lam == 0`` gives 0.

    Example:
      >>> random.poisson(random.PRNGKey(0), 3.0, (5,))
      Array([0, 0, 4, 4, 1], dtype=int32)
    """
    data, _ = check_key("poisson", key)
    dt = int_dtype(dtype, "poisson")
    shape = canonical_shape(shape, "poisson") if shape is not None else shape_of(lam)
    lam = jnp.broadcast_to(jnp.asarray(lam), shape)
    lam = lax.convert_element_type(lam, np.float32)
    return _poisson(data, lam, tuple(shape), dt)


def _poisson(data, lam, shape, dtype):
    use_knuth = lax.bitwise_or(lax.ne(lam, lam), lax.lt(lam, lax.full_like(lam, 10)))
    lam_knuth = lax.select(use_knuth, lam, lax.full_like(lam, 0.0))
    lam_rejection = lax.select(use_knuth, lax.full_like(lam, 1e5), lam)
    knuth = _poisson_knuth(data, lam_knuth, shape, dtype)
    rejection = _poisson_rejection(data, lam_rejection, shape, dtype)
    result = lax.select(use_knuth, knuth, rejection)
    return lax.select(lax.eq(lam, lax.full_like(lam, 0)), lax.full_like(result, 0), result)


def _poisson_knuth(data, lam, shape, dtype):
    """Counts uniforms multiplied (in log space) until the product falls below exp(-lam)."""
    f32 = np.dtype(np.float32)
    neg_lam = lax.neg(lam)

    def any_running(state):
        return jnp.any(lax.gt(state[2], neg_lam))

    def step(state):
        key, k, log_prod = state
        key, subkey = _subkeys(key, 2)
        k = lax.select(lax.gt(log_prod, neg_lam), lax.add(k, lax.full_like(k, 1)), k)
        u = _uniform(subkey, shape, f32)
        return key, k, lax.add(log_prod, lax.log(u))

    init = (data, lax.full(shape, 0, dtype), lax.full(shape, 0.0, f32))
    _, k, _ = while_loop(any_running, step, init, POISSON_KNUTH_TRACED_ROUNDS)
    return lax.sub(k, lax.full_like(k, 1))


def _poisson_rejection(data, lam, shape, dtype):
    """Hörmann's transformed rejection with squeeze (PTRS), for lam >= 10."""
    f32 = np.dtype(np.float32)

    def c(v):
        return lax.full_like(lam, v)

    log_lam = lax.log(lam)
    b = fma(c(2.53), lax.sqrt(lam), c(0.931))
    a = fma(c(0.02483), b, c(-0.059))
    inv_alpha = lax.add(c(1.1239), lax.div(c(1.1328), lax.sub(b, c(3.4))))
    v_r = lax.sub(c(0.9277), lax.div(c(3.6224), lax.sub(b, c(2.0))))

    def any_rejected(state):
        return jnp.any(lax.bitwise_not(state[2]))

    def step(state):
        key, k_out, accepted = state
        key, sub0, sub1 = _subkeys(key, 3)
        u = lax.sub(_uniform(sub0, shape, f32), c(0.5))
        v = _uniform(sub1, shape, f32)
        u_shifted = lax.sub(c(0.5), lax.abs(u))
        slope = lax.add(lax.div(lax.mul(c(2.0), a), u_shifted), b)
        k = lax.floor(lax.add(fma(slope, u, lam), c(0.43)))
        s = lax.log(lax.div(lax.mul(v, inv_alpha),
                            lax.add(lax.div(a, lax.mul(u_shifted, u_shifted)), b)))
        t = lax.sub(fma(k, log_lam, lax.neg(lam)), lgamma(lax.add(k, c(1.0))))
        accept1 = lax.bitwise_and(lax.ge(u_shifted, c(0.07)), lax.le(v, v_r))
        reject = lax.bitwise_or(lax.lt(k, c(0.0)),
                                lax.bitwise_and(lax.lt(u_shifted, c(0.013)), lax.gt(v, u_shifted)))
        accept2 = lax.le(s, t)
        accept = lax.bitwise_or(accept1, lax.bitwise_and(lax.bitwise_not(reject), accept2))
        k_out = lax.select(accept, k, k_out)
        return key, k_out, lax.bitwise_or(accepted, accept)

    init = (data, lax.full(shape, -1.0, f32), lax.full(shape, False, np.dtype(bool)))
    _, k, _ = while_loop(any_rejected, step, init, POISSON_REJECTION_TRACED_ROUNDS)
    return lax.convert_element_type(k, dtype)
