"""plax-cost-analysis: XLA-style cost analysis of a jaxpr, as ``plax.experimental.cost_analysis``.

``plax.jit(f).lower(*args).cost_analysis()`` (in the core) resolves this plugin and returns a
:class:`CostAnalysis`: a dict with JAX's keys ``"flops"``, ``"transcendentals"``,
``"bytes accessed"`` and the per-operand ``"bytes accessed{i}{}"`` / ``"bytes accessedout{}"``,
summed over the jaxpr's equations by one rule per primitive (the ``"cost_analysis"`` transform
table). ``python -m plax cost MODULE:FUNC --shape f32[3,4]`` prints it from the command line.

Example:
  >>> import plax, plax.numpy as jnp
  >>> lowered = plax.jit(lambda a, b: a @ b).lower(jnp.ones((3, 4)), jnp.ones((4, 5)))
  >>> lowered.cost_analysis()  # doctest: +NORMALIZE_WHITESPACE
  {'flops': 120.0, 'transcendentals': 0.0, 'bytes accessed': 188.0, 'bytes accessed0{}': 48.0,
   'bytes accessed1{}': 80.0, 'bytes accessedout{}': 60.0}

See this package's README for how the numbers compare with XLA's.

The names below load on first use (PEP 562): plugin discovery imports this package to export
it, and registering the rules imports every module of ``plax.lax`` (:mod:`.rules`), which
``import plax`` and ``plax.devices()`` must not pay for.
"""
from __future__ import annotations

import importlib

# public name -> the submodule defining it
_LAZY = {"CostAnalysis": "analysis", "TRANSFORM": "analysis", "cost_analysis": "analysis",
         "cost_of": "analysis", "jaxpr_cost": "analysis", "bytes_only_primitives": "rules"}

__all__ = ["CostAnalysis", "TRANSFORM", "cost_analysis", "cost_of", "jaxpr_cost",
           "bytes_only_primitives"]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'plax_cost_analysis' has no attribute {name!r}")
    importlib.import_module("plax_cost_analysis.rules")  # registers the rules (once)
    value = getattr(importlib.import_module(f"plax_cost_analysis.{_LAZY[name]}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
