"""Records JAX's results (dtype, weak type, shape and values) for the expressions of
``jnp_dtype_table.py`` into ``jax_dtype_table.json``, the reference of test_jnp_dtype_table.py.

Run with real JAX installed (x64 disabled, CPU):
    python tests/numpy/record_jax_dtypes.py
"""
from __future__ import annotations

import json
import pathlib
import warnings

import ml_dtypes
import numpy as np

from jnp_dtype_table import EXPRESSIONS

HERE = pathlib.Path(__file__).parent


def flat_values(x) -> list:
    """The values of ``x`` as a flat list of floats (complex numbers as [re, im] pairs)."""
    x = np.asarray(x)
    if np.iscomplexobj(x):
        return [[float(v.real), float(v.imag)] for v in x.reshape(-1)]
    return x.astype(np.float64).reshape(-1).tolist()


def describe(out) -> list:
    import jax
    return [{"dtype": str(np.dtype(o.dtype)), "weak_type": bool(o.weak_type),
             "shape": list(o.shape), "value": flat_values(o)}
            for o in jax.tree_util.tree_leaves(out)]


def main() -> None:
    import jax  # only the recording needs JAX; the test imports flat_values without it
    import jax.numpy as jax_numpy
    assert not jax.config.jax_enable_x64, "record with x64 disabled (JAX's default)"
    table = {}
    env = {"jnp": jax_numpy, "np": np, "bf16": ml_dtypes.bfloat16}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for expr in EXPRESSIONS:
            table[expr] = describe(eval(expr, dict(env)))  # noqa: S307 - our own table
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in table.items()]
    text = ('{\n "jax_version": ' + json.dumps(jax.__version__) + ',\n "results": {\n'
            + ",\n".join(lines) + "\n }\n}\n")
    json.loads(text)  # well formed
    (HERE / "jax_dtype_table.json").write_text(text)
    print(f"recorded {len(table)} expressions with JAX {jax.__version__}")


if __name__ == "__main__":
    main()
