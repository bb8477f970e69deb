"""Records JAX 0.10.2's answers to :mod:`device_typed_cases` (where results are placed under
an Explicit mesh) in ``device_typed_jax.json`` and to :mod:`committed_transform_cases`
(whether transformations commit their results) in ``committed_transforms_jax.json`` (run
where JAX is installed; CI compares plax with the records).

    JAX_PLATFORMS=cpu python tests/record_device_typed.py
"""
from __future__ import annotations

import json
import pathlib

import jax
import jax.numpy as jnp

import committed_transform_cases
import device_typed_cases


def record(answers, name: str) -> None:
    """Writes ``answers(jax, jax.numpy)`` and JAX's version to ``name`` beside this file."""
    got = answers(jax, jnp)
    out = {"jax_version": jax.__version__, "answers": got}
    path = pathlib.Path(__file__).with_name(name)
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(got)} answers to {path}")


if __name__ == "__main__":
    record(device_typed_cases.answers, "device_typed_jax.json")
    record(committed_transform_cases.answers, "committed_transforms_jax.json")
