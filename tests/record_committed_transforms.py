"""Records whether JAX 0.10.2 commits the results of :mod:`committed_transform_cases` in
``committed_transforms_jax.json`` (run where JAX is installed; CI compares plax with the
record).

    JAX_PLATFORMS=cpu python tests/record_committed_transforms.py
"""
from __future__ import annotations

import json
import pathlib

import jax
import jax.numpy as jnp

from committed_transform_cases import answers

if __name__ == "__main__":
    got = answers(jax, jnp)
    out = {"jax_version": jax.__version__, "answers": got}
    path = pathlib.Path(__file__).with_name("committed_transforms_jax.json")
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(got)} answers to {path}")
