"""plax.nn: JAX's neural-network functions (activations, softmax, attention, initializers).

    import plax as jax
    y = jax.nn.relu(x)
    w = jax.nn.initializers.glorot_normal()(jax.random.key(0), (784, 256))

Everything is written on plax.numpy and plax.lax, so it runs on every backend and
composes with ``grad``, ``jit`` and ``vmap`` — the block-scaled products ``scaled_matmul``
and ``scaled_dot_general`` (cuDNN kernels in JAX) included.
"""
from plax.nn import initializers
from plax.nn.activations import (identity, relu, relu6, sigmoid, sparse_sigmoid, softplus,
                                 sparse_plus, soft_sign, silu, swish, mish, log_sigmoid, elu,
                                 selu, celu, leaky_relu, hard_tanh, hard_sigmoid, hard_silu,
                                 hard_swish, gelu, glu, squareplus, log1mexp, tanh)
from plax.nn.softmax import softmax, log_softmax, logsumexp, logmeanexp, standardize
from plax.nn.one_hot import one_hot
from plax.nn.attention import dot_product_attention
from plax.nn.scaled import get_scaled_dot_general_config, scaled_dot_general, scaled_matmul

__all__ = ["initializers", "identity", "relu", "relu6", "sigmoid", "sparse_sigmoid", "softplus",
           "sparse_plus", "soft_sign", "silu", "swish", "mish", "log_sigmoid", "elu", "selu",
           "celu", "leaky_relu", "hard_tanh", "hard_sigmoid", "hard_silu", "hard_swish", "gelu",
           "glu", "squareplus", "log1mexp", "tanh", "softmax", "log_softmax", "logsumexp",
           "logmeanexp", "standardize", "one_hot", "dot_product_attention",
           "get_scaled_dot_general_config", "scaled_dot_general", "scaled_matmul"]
