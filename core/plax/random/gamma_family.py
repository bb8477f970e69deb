"""Gamma-family samplers: gamma, loggamma, beta, dirichlet (and their implicit gradients).

Gamma variates use Marsaglia and Tsang's rejection method ("A simple method
for generating gamma variables", ACM TOMS 26(3), 2000), element by element
with one key per element, exactly as JAX does: for ``a < 1`` a sample for
``a + 1`` is boosted by ``U**(1/a)``. The rejection loops run through
:func:`plax.random._loops.while_loop` (a Python loop when eager, a
``lax.while_loop`` when traced: exact for every input either way).

Gradients with respect to ``a`` are implicit (JAX's): ``dx/da = -(dF/da) /
(dF/dx)`` for the gamma CDF ``F``, the primitive ``lax.random_gamma_grad``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from plax import dtypes, lax
from plax import numpy as jnp
from plax.core.trace import get_aval
from plax.random._loops import while_loop
from plax.random._util import float_dtype, resolve_shape, shape_of, takes_out_sharding
from plax.random.keys import check_key, split_data
from plax.random.samplers import _normal_real, _subkeys, _uniform

def _vmap(fn):
    from plax.transforms.vmap_api import vmap
    return vmap(fn)


def _c(value, like):
    return lax.full((), value, get_aval(like).dtype)


# ------------------------------------------------------------------ the sampler

def _gamma_one(keys, alpha, log_space: bool):
    """One gamma sample per (key, alpha) pair; ``keys`` is ``uint32[n, 2]``, alpha ``[n]``."""
    dtype = get_aval(alpha).dtype
    one, zero = _c(1, alpha), _c(0, alpha)
    boost_mask = lax.ge(alpha, one)
    boosted = lax.select(boost_mask, alpha, lax.add(alpha, one))
    d = lax.sub(boosted, _c(1.0 / 3.0, alpha))
    c = lax.div(_c(1.0 / 3.0, alpha), lax.sqrt(d))

    pairs = _vmap(lambda k: split_data(k, (2,)))(keys)
    key, subkey = pairs[:, 0], pairs[:, 1]
    normal_one = _vmap(lambda k: _normal_real(k, (), dtype))
    uniform_one = _vmap(lambda k: _uniform(k, (), dtype))

    def not_accepted(state):
        _, x_sq, v_cubed, u = state
        squeeze = lax.sub(one, lax.mul(_c(0.0331, alpha), lax.mul(x_sq, x_sq)))
        log_bound = lax.add(lax.mul(x_sq, _c(0.5, alpha)),
                            lax.mul(d, lax.add(lax.sub(one, v_cubed), lax.log(v_cubed))))
        return lax.bitwise_and(lax.ge(u, squeeze), lax.ge(lax.log(u), log_bound))

    def propose(state):
        round_key = state[0]
        keys3 = _vmap(lambda k: split_data(k, (3,)))(round_key)
        next_key, x_key, u_key = keys3[:, 0], keys3[:, 1], keys3[:, 2]

        def v_not_positive(inner):
            return lax.le(inner[2], zero)

        def draw_v(inner):
            inner_pairs = _vmap(lambda k: split_data(k, (2,)))(inner[0])
            x = normal_one(inner_pairs[:, 1])
            return inner_pairs[:, 0], x, lax.add(one, lax.mul(x, c))

        init_inner = (x_key, lax.full_like(alpha, 0), lax.full_like(alpha, -1))
        _, x, v = while_loop(v_not_positive, draw_v, init_inner)
        x_sq = lax.mul(x, x)
        v_cubed = lax.mul(lax.mul(v, v), v)
        return next_key, x_sq, v_cubed, uniform_one(u_key)

    # The initial state fails the acceptance test, so at least one proposal is made.
    init = (key, lax.full_like(alpha, 0), lax.full_like(alpha, 1), lax.full_like(alpha, 2))
    _, _, v_cubed, _ = while_loop(not_accepted, propose, init)

    if log_space:
        u = uniform_one(subkey)
        log_samples = lax.log1p(lax.neg(u))  # minus an exponential sample
        no_boost = lax.bitwise_or(boost_mask, lax.eq(log_samples, zero))
        log_boost = lax.select(no_boost, lax.full_like(alpha, 0),
                               lax.mul(log_samples, lax.div(one, alpha)))
        return lax.add(lax.add(lax.log(d), lax.log(v_cubed)), log_boost)
    samples = lax.sub(one, uniform_one(subkey))
    boost = lax.select(boost_mask, lax.full_like(alpha, 1), lax.pow(samples, lax.div(one, alpha)))
    return lax.mul(lax.mul(d, v_cubed), boost)


def _gamma_impl(data, a, log_space: bool):
    shape = get_aval(a).shape
    size = int(np.prod(shape, dtype=np.int64))
    keys = split_data(data, (size,))
    samples = _gamma_one(keys, lax.reshape(a, (size,)), log_space) if size else lax.reshape(a, (0,))
    return lax.reshape(samples, shape)


# ------------------------------------------------------------------ implicit gradient

def _gamma_grad(sample, a, log_space: bool):
    if log_space:
        # d log(x) = dx / x; exp(log x) may round to 0, so use the smallest normal float then
        samples = lax.exp(sample)
        tiny = lax.full_like(samples, float(dtypes.finfo(get_aval(samples).dtype).tiny))
        samples = lax.select(lax.eq(samples, _c(0, samples)), tiny, samples)
        return lax.div(lax.random_gamma_grad(a, samples), samples)
    return lax.random_gamma_grad(a, sample)


def _make_gamma_fn(log_space: bool):
    from plax.transforms.custom_derivatives import custom_jvp

    @custom_jvp
    def sample(data, a):
        return _gamma_impl(data, a, log_space)

    @sample.defjvp
    def _sample_jvp(primals, tangents):
        data, a = primals
        _, t = tangents
        out = sample(data, a)
        shape = get_aval(a).shape
        flat = lambda v: lax.reshape(v, (int(np.prod(shape, dtype=np.int64)),))  # noqa: E731
        grad = lax.reshape(_gamma_grad(flat(out), flat(a), log_space), shape)
        return out, lax.mul(t, grad)

    return sample


_gamma_sample = _make_gamma_fn(False)
_loggamma_sample = _make_gamma_fn(True)


def _gamma(data, a, shape: tuple[int, ...], dtype: np.dtype, log_space: bool = False):
    a = lax.convert_element_type(jnp.asarray(a), dtype)
    if get_aval(a).shape != shape:
        a = jnp.broadcast_to(a, shape)
    return (_loggamma_sample if log_space else _gamma_sample)(data, a)


# ------------------------------------------------------------------ public samplers

@takes_out_sharding
def gamma(key: Any, a: Any, shape: Any = None, dtype: Any = None):
    """Gamma random values with shape parameter ``a`` (unit scale): density ∝ x**(a-1) e**-x.

    Differentiable in ``a`` (implicit reparameterisation, as in JAX).

    Args:
      key: a single PRNG key.
      a: shape parameter(s), broadcast-compatible with ``shape``.
      shape: the result's shape (default: the shape of ``a``).
      dtype: a float dtype (default float32, float64 with x64).

    Returns:
      An array of ``shape`` and ``dtype``.

    Example:
      >>> random.gamma(random.PRNGKey(0), 2.0, (3,))
      Array([1.5897877, 1.7599413, 1.1290071], dtype=float32)
    """
    data, _ = check_key("gamma", key)
    dt = float_dtype(dtype, "gamma")
    shape = resolve_shape("gamma", shape, a)
    return _gamma(data, a, shape, dt)


@takes_out_sharding
def loggamma(key: Any, a: Any, shape: Any = None, dtype: Any = None):
    """The log of gamma random values, computed in log space (accurate for tiny ``a``).

    ``exp(loggamma(key, a))`` agrees with ``gamma(key, a)`` to rounding.

    Example:
      >>> random.loggamma(random.PRNGKey(0), 0.01, (3,))
      Array([ -11.478928,   -9.828522, -137.9457  ], dtype=float32)
    """
    data, _ = check_key("loggamma", key)
    dt = float_dtype(dtype, "loggamma")
    shape = resolve_shape("loggamma", shape, a)
    return _gamma(data, a, shape, dt, log_space=True)


@takes_out_sharding
def beta(key: Any, a: Any, b: Any, shape: Any = None, dtype: Any = None):
    """Beta random values: density ∝ x**(a-1) (1-x)**(b-1) on [0, 1].

    Computed from two log-gamma samples without overflow, as in JAX.

    Example:
      >>> jnp.round(random.beta(random.PRNGKey(0), 2.0, 3.0, (4,)), 4)
      Array([0.2363, 0.4905, 0.6838, 0.5423], dtype=float32)
    """
    data, _ = check_key("beta", key)
    dt = float_dtype(dtype, "beta")
    shape = resolve_shape("beta", shape, a, b)
    return _beta(data, a, b, shape, dt)


def _beta(data, a, b, shape, dtype):
    key_a, key_b = _subkeys(data, 2)
    a = jnp.broadcast_to(lax.convert_element_type(jnp.asarray(a), dtype), shape)
    b = jnp.broadcast_to(lax.convert_element_type(jnp.asarray(b), dtype), shape)
    log_a = _gamma(key_a, a, shape, dtype, log_space=True)
    log_b = _gamma(key_b, b, shape, dtype, log_space=True)
    log_max = lax.max(log_a, log_b)
    scaled_a = lax.exp(lax.sub(log_a, log_max))
    scaled_b = lax.exp(lax.sub(log_b, log_max))
    return lax.div(scaled_a, lax.add(scaled_a, scaled_b))


@takes_out_sharding
def dirichlet(key: Any, alpha: Any, shape: Any = None, dtype: Any = None):
    """Dirichlet random vectors with concentrations ``alpha`` (last axis) summing to one.

    Args:
      key: a single PRNG key.
      alpha: concentrations of shape ``(..., n)``.
      shape: the batch shape (default ``alpha.shape[:-1]``); the result has shape
        ``shape + (n,)``.
      dtype: a float dtype.

    Raises:
      ValueError: if ``alpha`` has rank 0 or the batch shapes do not broadcast.

    Example:
      >>> jnp.round(random.dirichlet(random.PRNGKey(0), jnp.array([1.0, 2.0, 3.0])), 4)
      Array([0.1423, 0.4049, 0.4528], dtype=float32)
    """
    data, _ = check_key("dirichlet", key)
    dt = float_dtype(dtype, "dirichlet")
    alpha_shape = shape_of(alpha)
    if len(alpha_shape) < 1:
        raise ValueError("dirichlet requires alpha.ndim >= 1, got alpha.ndim == 0")
    batch = resolve_shape("dirichlet", shape, np.empty(alpha_shape[:-1]))
    alpha = lax.convert_element_type(jnp.asarray(alpha), dt)
    log_samples = _gamma(data, alpha, batch + alpha_shape[-1:], dt, log_space=True)
    return _softmax_last(log_samples)


def _softmax_last(x):
    x_max = lax.stop_gradient(jnp.max(x, axis=-1, keepdims=True))
    unnormalized = jnp.exp(jnp.subtract(x, x_max))
    return jnp.divide(unnormalized, jnp.sum(unnormalized, axis=-1, keepdims=True))
