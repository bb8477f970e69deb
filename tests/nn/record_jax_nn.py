"""Records real JAX's answers for the plax.nn tests into jax_nn_answers.json.

    python tests/nn/record_jax_nn.py      # needs real JAX (CPU is enough)

It evaluates the cases of nn_cases.py with ``jax.nn``: activation values and elementwise
gradients (float32, and float64 under x64), reductions and attention with the gradient
of a weighted sum, result dtypes and weak types, and initializer outputs as raw bytes.
"""
from __future__ import annotations

import json
import sys

import numpy as np

import jax
import jax.numpy as jnp

import nn_cases


def _floats(a) -> list:
    """A float array as nested lists, non-finite values as strings (JSON has none)."""
    a = np.asarray(a, np.float64)
    return [float(v) if np.isfinite(v) else str(v) for v in a.ravel()]


def record_elementwise(dtype) -> dict:
    out = {}
    for name, (fn, points) in nn_cases.elementwise(jax.nn).items():
        x = jnp.asarray(np.asarray(points, dtype))
        value = fn(x)
        grad = jax.vmap(jax.grad(lambda t: fn(t)))(x)
        out[name] = {"value": _floats(value), "grad": _floats(grad), "dtype": str(value.dtype)}
    return out


def record_reductions(dtype) -> dict:
    out = {}
    for name, (fn, x) in nn_cases.reductions(jax.nn, jnp).items():
        x = jnp.asarray(x.astype(dtype))
        value = fn(x)
        w = jnp.asarray(nn_cases.weights(value.shape).astype(dtype))
        grad = jax.grad(lambda t: jnp.sum(fn(t) * w))(x)
        out[name] = {"value": _floats(value), "shape": list(value.shape),
                     "grad": _floats(grad), "dtype": str(value.dtype)}
    return out


def record_attention(dtype) -> dict:
    out = {}
    for name, (fn, qkv) in nn_cases.attention(jax.nn).items():
        q, k, v = (jnp.asarray(a.astype(dtype)) for a in qkv)
        value = fn(q, k, v)
        w = jnp.asarray(nn_cases.weights(value.shape).astype(dtype))
        grads = jax.grad(lambda q, k, v: jnp.sum(fn(q, k, v) * w), argnums=(0, 1, 2))(q, k, v)
        out[name] = {"value": _floats(value), "shape": list(value.shape),
                     "grads": [_floats(g) for g in grads], "dtype": str(value.dtype)}
    return out


def record_dtypes() -> dict:
    out = {}
    for fname in nn_cases.DTYPE_FUNCTIONS:
        for iname, x in nn_cases.dtype_inputs(np, jnp).items():
            try:
                r = getattr(jax.nn, fname)(x)
                out[f"{fname}/{iname}"] = [str(r.dtype), bool(r.weak_type)]
            except Exception as e:  # noqa: BLE001 - the error class is the answer
                out[f"{fname}/{iname}"] = ["error", type(e).__name__]
    return out


def record_initializers() -> list:
    rows = []
    for case in nn_cases.initializer_cases():
        with jax.enable_x64(case["x64"]), \
                jax.threefry_partitionable(case["partitionable"]):
            init = nn_cases.make_initializer(jax.nn.initializers, case)
            key = (jax.random.key(case["seed"]) if case["typed_key"]
                   else jax.random.PRNGKey(case["seed"]))
            args = (key, tuple(case["shape"])) + ((case["dtype"],) if case["dtype"] else ())
            value = np.asarray(init(*args))
        rows.append(dict(case, result_dtype=str(value.dtype), result_shape=list(value.shape),
                         hex=nn_cases.bit_hex(value)))
    return rows


def main() -> None:
    data = {"jax_version": jax.__version__}
    data["elementwise_float32"] = record_elementwise(np.float32)
    data["reductions_float32"] = record_reductions(np.float32)
    data["attention_float32"] = record_attention(np.float32)
    data["dtypes"] = record_dtypes()
    with jax.enable_x64(True):
        data["elementwise_float64"] = record_elementwise(np.float64)
        data["reductions_float64"] = record_reductions(np.float64)
        data["attention_float64"] = record_attention(np.float64)
    data["initializers"] = record_initializers()
    nn_cases.RECORDING.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    print(f"recorded JAX {jax.__version__}'s plax.nn answers in {nn_cases.RECORDING}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
