"""What the explicit-sharding tests share: the header of the script they run in a child
interpreter, once under ``import plax as jax`` and once under JAX, and the runner.

A test module writes ``SCRIPT = PRELUDE + r'''...'''``: after the prelude the script has
``json``, ``re``, ``sys``, ``np``, ``jax`` (plax or JAX, with 8 CPU devices), ``sharding``
(``plax.sharding`` or ``jax.sharding``), ``jnp``, ``lax``, ``P`` and :func:`ty`; it prints one
JSON value last, which :func:`run_child` returns.
"""
from __future__ import annotations

from subprocess_util import last_json, run_python

PRELUDE = r'''
import json, re, sys
import numpy as np

if sys.argv[1] == "jax":
    import jax
    import jax.sharding as sharding
    jax.config.update("jax_num_cpu_devices", 8)
else:
    import plax as jax
    import plax.sharding as sharding
jnp, lax, P = jax.numpy, jax.lax, jax.P


def ty(x):  # the dimensions of a type (or of each in a tuple), as both print them: "[8@X,4]"
    if isinstance(x, (tuple, list)):
        return [ty(v) for v in x]
    s = str(jax.typeof(x))
    return s[s.index("["):s.index("]") + 1]
'''


def run_child(script: str, which: str, **env: str):
    """Runs ``script`` (starting with :data:`PRELUDE`) in a fresh interpreter with 8 CPU
    devices, under ``which`` (``"plax"`` or ``"jax"``), with ``env`` added to the child's
    environment, and returns the JSON value it printed last."""
    child = {"PLAX_NUM_CPU_DEVICES": "8", "PLAX_PLATFORMS": "cpu", "JAX_PLATFORMS": "cpu", **env}
    return last_json(run_python(env=child, args=["-c", script, which]))
