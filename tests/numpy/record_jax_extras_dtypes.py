"""Records JAX's results (dtype, weak type, shape, values) for the expressions of
``jnp_extras_dtype_table.py`` into ``jax_extras_dtype_table.json``.

Run with real JAX installed (x64 disabled, CPU):
    python tests/numpy/record_jax_extras_dtypes.py
"""
from __future__ import annotations

import json

import numpy as np

from jnp_extras_dtype_table import EXPRESSIONS, RECORDING, evaluate, flat_values


def main() -> None:
    import jax
    import jax.numpy as jax_numpy
    assert not jax.config.jax_enable_x64, "record with x64 disabled (JAX's default)"
    table = {}
    for group in EXPRESSIONS.values():
        for expr in group:
            out = evaluate(jax_numpy, expr)
            table[expr] = [{"dtype": str(np.dtype(o.dtype)), "weak_type": bool(o.weak_type),
                            "shape": list(o.shape), "value": flat_values(o)}
                           for o in jax.tree_util.tree_leaves(out)]
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in table.items()]
    text = ('{\n "jax_version": ' + json.dumps(jax.__version__) + ',\n "results": {\n'
            + ",\n".join(lines) + "\n }\n}\n")
    json.loads(text)
    RECORDING.write_text(text)
    print(f"recorded {len(table)} expressions with JAX {jax.__version__}")


if __name__ == "__main__":
    main()
