"""plax.random: JAX's keyed pseudo-random numbers, bit for bit (Threefry-2x32).

    from plax import random
    key = random.PRNGKey(0)
    key, subkey = random.split(key)
    x = random.normal(subkey, (3,))

See docs/random.md for keys, splitting, and the two bit layouts
(``jax_threefry_partitionable``).
"""
__all__ = [
    "PRNGKey", "PRNGKeyArray", "PRNGImpl", "KeyDType", "key", "split", "fold_in", "bits",
    "key_data", "wrap_key_data", "key_impl", "key_dtype", "default_prng_impl", "clone",
    "threefry_2x32", "uniform", "normal", "truncated_normal", "bernoulli", "rademacher",
    "randint", "exponential", "laplace", "logistic", "cauchy", "gumbel", "gamma", "loggamma",
    "beta", "dirichlet", "permutation", "choice", "categorical", "poisson",
    "multivariate_normal", "orthogonal", "ball", "generalized_normal",
    "chisquare", "f", "t", "rayleigh", "wald", "pareto", "lognormal", "maxwell",
    "double_sided_maxwell", "weibull_min", "triangular", "geometric", "binomial", "multinomial",
]

from plax.random.keys import (PRNGKey, PRNGKeyArray, PRNGImpl, KeyDType, key, split, fold_in, bits,
                              key_data, wrap_key_data, key_impl, key_dtype, default_prng_impl,
                              clone, threefry_2x32)
from plax.random.samplers import (uniform, normal, truncated_normal, bernoulli, rademacher,
                                  randint, exponential, laplace, logistic, cauchy, gumbel)
from plax.random.gamma_family import gamma, loggamma, beta, dirichlet
from plax.random.discrete import permutation, choice, categorical, poisson
from plax.random.multivariate import multivariate_normal, orthogonal, ball, generalized_normal
from plax.random.more_samplers import (chisquare, f, t, rayleigh, wald, pareto, lognormal, maxwell,
                                      double_sided_maxwell, weibull_min, triangular, geometric,
                                      binomial, multinomial)
