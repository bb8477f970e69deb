"""Records where JAX 0.10.2 puts the results of :mod:`device_typed_cases` in
``device_typed_jax.json`` (run where JAX is installed; CI compares plax with the record).

    JAX_PLATFORMS=cpu python tests/record_device_typed.py
"""
from __future__ import annotations

import json
import pathlib

import jax
import jax.numpy as jnp

from device_typed_cases import answers

if __name__ == "__main__":
    got = answers(jax, jnp)
    out = {"jax_version": jax.__version__, "answers": got}
    path = pathlib.Path(__file__).with_name("device_typed_jax.json")
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(got)} answers to {path}")
