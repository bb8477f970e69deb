"""Records the public names of JAX's user-facing namespaces into ``jax_names.json``.

Run with real JAX installed (``python tests/numpy/record_jax_names.py``); the committed
JSON lets ``test_name_coverage.py`` compare plax with JAX on machines without JAX.
"""
from __future__ import annotations

import importlib
import json
import pathlib

# plax module -> the JAX module whose names it must offer
NAMESPACES = {
    "numpy": "jax.numpy",
    "numpy.linalg": "jax.numpy.linalg",
    "numpy.fft": "jax.numpy.fft",
    "nn": "jax.nn",
    "nn.initializers": "jax.nn.initializers",
    "scipy.special": "jax.scipy.special",
    "scipy.stats": "jax.scipy.stats",
    "lax": "jax.lax",
}


def record() -> dict:
    """``{plax-relative module: sorted public names of the JAX module}`` plus the JAX version."""
    import jax
    out = {"jax_version": jax.__version__, "namespaces": {}}
    for key, modname in NAMESPACES.items():
        mod = importlib.import_module(modname)
        out["namespaces"][key] = sorted(n for n in dir(mod) if not n.startswith("_"))
    return out


if __name__ == "__main__":
    path = pathlib.Path(__file__).with_name("jax_names.json")
    path.write_text(json.dumps(record(), indent=1) + "\n")
    print(f"wrote {path}")
