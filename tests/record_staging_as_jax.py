"""Records JAX 0.10.2's jaxpr text of :data:`staging_cases.CASES` in
``staging_as_jax.json`` (run where JAX is installed; CI compares plax with the record).

    python tests/record_staging_as_jax.py
"""
from __future__ import annotations

import json
import pathlib

import jax
import jax.numpy as jnp

from staging_cases import CASES, jaxpr_text

if __name__ == "__main__":
    out = {"jax_version": jax.__version__,
           "jaxprs": {name: jaxpr_text(jax, jnp, name) for name in CASES}}
    path = pathlib.Path(__file__).with_name("staging_as_jax.json")
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(CASES)} jaxprs to {path}")
