"""The calls whose JAX answers ``record_jax_nn.py`` records and the plax.nn tests replay.

Each case is built from a namespace argument (``jax`` when recording, ``plax`` when
testing), so the recorder and the tests evaluate the very same expressions.
"""
from __future__ import annotations

import math
import pathlib

import numpy as np

RECORDING = pathlib.Path(__file__).with_name("jax_nn_answers.json")

# Points of every elementwise activation: the kinks (0, +-1, -3, 3, 6) included.
POINTS = [-7.0, -6.0, -3.5, -3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 5.5, 6.0, 7.0]
POSITIVE_POINTS = [1e-3, 0.1, 0.5, math.log(2.0), 1.0, 2.0, 10.0, 30.0]


def elementwise(nn) -> dict:
    """name -> (function of one array, points)."""
    f = {
        "identity": nn.identity, "relu": nn.relu, "relu6": nn.relu6, "sigmoid": nn.sigmoid,
        "sparse_sigmoid": nn.sparse_sigmoid, "softplus": nn.softplus,
        "sparse_plus": nn.sparse_plus, "soft_sign": nn.soft_sign, "silu": nn.silu,
        "swish": nn.swish, "mish": nn.mish, "log_sigmoid": nn.log_sigmoid, "elu": nn.elu,
        "elu_alpha2": lambda x: nn.elu(x, 2.0), "selu": nn.selu, "celu": nn.celu,
        "celu_alpha05": lambda x: nn.celu(x, 0.5), "leaky_relu": nn.leaky_relu,
        "leaky_relu_02": lambda x: nn.leaky_relu(x, negative_slope=0.2),
        "hard_tanh": nn.hard_tanh, "hard_sigmoid": nn.hard_sigmoid, "hard_silu": nn.hard_silu,
        "hard_swish": nn.hard_swish, "gelu_tanh": nn.gelu,
        "gelu_exact": lambda x: nn.gelu(x, approximate=False), "squareplus": nn.squareplus,
        "squareplus_b1": lambda x: nn.squareplus(x, 1.0), "tanh": nn.tanh,
    }
    out = {name: (fn, POINTS) for name, fn in f.items()}
    out["log1mexp"] = (nn.log1mexp, POSITIVE_POINTS)
    return out


def _inputs(seed: int, shape) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def reductions(nn, jnp) -> dict:
    """name -> (function of one array returning an array, input as float64 NumPy array).

    The tests compare the values and the gradient of ``sum(out * weights)``.
    """
    x = _inputs(0, (3, 5))
    x_inf = x.copy()
    x_inf[0, 1] = -np.inf
    x_inf[2, :] = -np.inf
    mask = _inputs(1, (3, 5)) > 0
    mask[1] = False  # a row with nothing selected
    b = _inputs(2, (3, 5))
    x3 = _inputs(3, (2, 3, 4))
    return {
        "softmax": (lambda a: nn.softmax(a), x),
        "softmax_axis0": (lambda a: nn.softmax(a, axis=0), x),
        "softmax_axes": (lambda a: nn.softmax(a, axis=(0, 2)), x3),
        "softmax_none": (lambda a: nn.softmax(a, axis=None), x),
        "softmax_neginf": (lambda a: nn.softmax(a), x_inf[:2]),
        "softmax_where": (lambda a: nn.softmax(a, where=mask), x),
        "log_softmax": (lambda a: nn.log_softmax(a), x),
        "log_softmax_axis0": (lambda a: nn.log_softmax(a, axis=0), x),
        "log_softmax_where": (lambda a: jnp.where(mask, nn.log_softmax(a, where=mask), 0.), x),
        "logsumexp": (lambda a: nn.logsumexp(a), x),
        "logsumexp_axis1_keep": (lambda a: nn.logsumexp(a, axis=1, keepdims=True), x),
        "logsumexp_neginf": (lambda a: nn.logsumexp(a, axis=1), x_inf),
        "logsumexp_b": (lambda a: nn.logsumexp(a, axis=1, b=np.abs(b)), x),
        "logsumexp_sign": (lambda a: jnp.stack(nn.logsumexp(a, axis=0, b=b, return_sign=True)),
                           x),
        "logsumexp_where": (lambda a: nn.logsumexp(a, axis=0, where=mask), x),
        "logmeanexp": (lambda a: nn.logmeanexp(a, axis=1), x),
        "logmeanexp_where": (lambda a: nn.logmeanexp(a, axis=0, where=mask), x),
        "standardize": (lambda a: nn.standardize(a), x),
        "standardize_stable": (lambda a: nn.standardize(a, axis=0, algorithm="stable"), x),
        "standardize_where": (lambda a: nn.standardize(a, axis=None, where=mask), x),
        "standardize_given": (lambda a: nn.standardize(a, mean=0.5, variance=2.0), x),
        "glu": (lambda a: nn.glu(a, axis=0), x3[:, :2]),
        "glu_last": (lambda a: nn.glu(a), x3),
    }


def attention(nn) -> dict:
    """name -> (function of (q, k, v), (q, k, v) as float64 NumPy arrays)."""
    B, T, S, N, K, H = 2, 4, 5, 4, 2, 3
    q, k, v = _inputs(10, (B, T, N, H)), _inputs(11, (B, S, K, H)), _inputs(12, (B, S, K, H))
    qs, ks, vs = _inputs(13, (B, T, K, H)), _inputs(14, (B, T, K, H)), _inputs(15, (B, T, K, H))
    bias = _inputs(16, (1, N, T, S))
    bias1 = _inputs(17, (B, 1, T, S))
    mask = _inputs(18, (B, N, T, S)) > -0.5
    qlen = np.array([3, 4], np.int32)
    kvlen = np.array([5, 2], np.int32)
    full = (q, k, v)
    square = (qs, ks, vs)
    return {
        "plain": (lambda q, k, v: nn.dot_product_attention(q, k, v), full),
        "unbatched": (lambda q, k, v: nn.dot_product_attention(q[0], k[0], v[0]), full),
        "scale": (lambda q, k, v: nn.dot_product_attention(q, k, v, scale=0.7), full),
        "bias": (lambda q, k, v: nn.dot_product_attention(q, k, v, bias), full),
        "bias_one_head": (lambda q, k, v: nn.dot_product_attention(q, k, v, bias1), full),
        "mask": (lambda q, k, v: nn.dot_product_attention(q, k, v, mask=mask), full),
        "causal": (lambda q, k, v: nn.dot_product_attention(q, k, v, is_causal=True), square),
        "causal_bias_mask": (lambda q, k, v: nn.dot_product_attention(
            q, k, v, bias[:, :2, :, :4], mask[:, :2, :, :4], is_causal=True), square),
        "seq_lengths": (lambda q, k, v: nn.dot_product_attention(
            q, k, v, query_seq_lengths=qlen, key_value_seq_lengths=kvlen), full),
        "window": (lambda q, k, v: nn.dot_product_attention(q, k, v, local_window_size=(1, 0)),
                   square),
        "window_int": (lambda q, k, v: nn.dot_product_attention(q, k, v, local_window_size=1),
                       full),
        "residual": (lambda q, k, v: nn.dot_product_attention(q, k, v, is_causal=True,
                                                              return_residual=True)[1], square),
    }


def initializer_cases() -> list[dict]:
    """Initializer calls: factory name and kwargs (None: the initializer itself), key seed,
    shape, dtype, and the flags."""
    cases = []

    def add(name, kwargs=None, shape=(4, 6), dtype="float32", seed=0, x64=False,
            partitionable=True, typed_key=False):
        cases.append({"name": name, "kwargs": kwargs, "shape": list(shape), "dtype": dtype,
                      "seed": seed, "x64": x64, "partitionable": partitionable,
                      "typed_key": typed_key})

    for name in ("zeros", "ones"):
        add(name, None, (2, 3))
        add(name, None, (2, 3), "float64", x64=True)
    add("constant", {"value": -1.5}, (3,))
    add("constant", {"value": 2}, (2, 2), "int32")
    for name, kwargs in [("uniform", {}), ("uniform", {"scale": 3.0}), ("normal", {}),
                         ("normal", {"stddev": 2.5}), ("truncated_normal", {}),
                         ("truncated_normal", {"stddev": 0.5, "lower": -1.0, "upper": 3.0})]:
        add(name, kwargs, (5, 7), seed=1)
        add(name, kwargs, (5, 7), "float64", seed=2, x64=True)
        add(name, kwargs, (3, 4), "float16", seed=3)
    add("normal", {"dtype": "bfloat16"}, (3, 4), None, seed=4)
    for name in ("glorot_uniform", "glorot_normal", "xavier_uniform", "xavier_normal",
                 "lecun_uniform", "lecun_normal", "he_uniform", "he_normal",
                 "kaiming_uniform", "kaiming_normal"):
        add(name, {}, (6, 9), seed=5)
        add(name, {}, (3, 3, 4, 8), "float64", seed=6, x64=True)
    for mode in ("fan_in", "fan_out", "fan_avg", "fan_geo_avg"):
        for dist in ("truncated_normal", "normal", "uniform"):
            add("variance_scaling", {"scale": 1.7, "mode": mode, "distribution": dist},
                (5, 3, 8), seed=7)
    for dist in ("truncated_normal", "normal", "uniform"):
        add("variance_scaling", {"scale": 2.0, "mode": "fan_avg", "distribution": dist},
            (4, 5), "complex64", seed=8)
    add("variance_scaling", {"scale": 1.0, "mode": "fan_in", "distribution": "normal",
                             "in_axis": 0, "out_axis": (1, 2), "batch_axis": 3},
        (3, 4, 5, 2), seed=9)
    add("variance_scaling", {"scale": 1.0, "mode": "fan_out", "distribution": "uniform",
                             "in_axis": (0, 1), "out_axis": -1, "batch_axis": (2,)},
        (3, 4, 2, 5), seed=9)
    add("lecun_normal", {"in_axis": 0, "out_axis": 1}, (7,) + (3,), seed=10)
    add("he_normal", {"in_axis": -1, "out_axis": -2, "batch_axis": 0}, (2, 4, 3), seed=10)
    add("glorot_uniform", {}, (6, 9), seed=11, partitionable=False)
    add("glorot_normal", {}, (6, 9), seed=11, partitionable=False)
    add("glorot_normal", {}, (6, 9), seed=12, typed_key=True)
    add("orthogonal", {}, (4, 4), seed=13)
    add("orthogonal", {}, (3, 6), seed=13)
    add("orthogonal", {}, (6, 3), seed=13)
    add("orthogonal", {"scale": 2.0, "column_axis": 0}, (3, 2, 4), seed=14)
    add("orthogonal", {}, (5, 5), "float64", seed=15, x64=True)
    add("orthogonal", {}, (0, 3), seed=15)
    add("delta_orthogonal", {}, (3, 2, 4), seed=16)
    add("delta_orthogonal", {"scale": 0.5}, (3, 3, 3, 3), seed=17)
    add("delta_orthogonal", {}, (2, 3, 3, 2, 2), seed=18)
    return cases


def make_initializer(initializers, case: dict):
    """The initializer of ``case`` and the dtype argument to call it with (None: default)."""
    if case["kwargs"] is None:
        return getattr(initializers, case["name"])
    return getattr(initializers, case["name"])(**case["kwargs"])


def dtype_inputs(np_mod, jnp) -> dict:
    """Inputs of the result-dtype table: name -> value."""
    return {"f32": jnp.asarray(np_mod.array([0.5, -1.0], np_mod.float32)),
            "i32": jnp.asarray(np_mod.array([1, -2], np_mod.int32)),
            "f16": jnp.asarray(np_mod.array([0.5, -1.0], np_mod.float16)),
            "pyfloat": 0.5, "pyint": 2}


DTYPE_FUNCTIONS = ["identity", "relu", "relu6", "sigmoid", "sparse_sigmoid", "softplus",
                   "sparse_plus", "soft_sign", "silu", "mish", "log_sigmoid", "elu", "selu",
                   "celu", "leaky_relu", "hard_tanh", "hard_sigmoid", "hard_silu", "gelu",
                   "squareplus", "log1mexp", "log_softmax", "logsumexp", "logmeanexp",
                   "standardize"]


def bit_hex(a) -> str:
    """The raw bytes of an array as hex (bit-exact, any dtype)."""
    return np.ascontiguousarray(np.asarray(a)).tobytes().hex()


_ANSWERS: dict = {}


def answers() -> dict:
    """The recorded JAX answers (loaded once)."""
    if not _ANSWERS:
        import json
        _ANSWERS.update(json.loads(RECORDING.read_text()))
    return _ANSWERS


def floats(values) -> np.ndarray:
    """A recorded list of floats (non-finite ones stored as strings) as a float64 array."""
    return np.array([float(v) for v in values], np.float64)


def weights(shape) -> np.ndarray:
    """The fixed weights of the recorded scalar ``sum(out * weights)``."""
    return np.linspace(-1.0, 1.5, int(np.prod(shape))).reshape(shape)
