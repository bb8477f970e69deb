"""plax-cost-analysis: XLA-style cost analysis of a jaxpr, as ``plax.experimental.cost_analysis``.

``plax.jit(f).lower(*args).cost_analysis()`` (in the core) resolves this plugin and returns a
:class:`CostAnalysis`: a dict with JAX's keys ``"flops"``, ``"transcendentals"``,
``"bytes accessed"`` and the per-operand ``"bytes accessed{i}{}"`` / ``"bytes accessedout{}"``,
summed over the jaxpr's equations by one rule per primitive (the ``"cost_analysis"`` transform
table). ``python -m plax cost MODULE:FUNC --shape f32[3,4]`` prints it from the command line.

Example:
  >>> import plax, plax.numpy as jnp
  >>> plax.jit(lambda a, b: a @ b).lower(jnp.ones((3, 4)), jnp.ones((4, 5))).cost_analysis()
  {'flops': 120.0, 'transcendentals': 0.0, 'bytes accessed': 188.0, 'bytes accessed0{}': 48.0,
   'bytes accessed1{}': 80.0, 'bytes accessedout{}': 60.0}

See this package's README for how the numbers compare with XLA's.
"""
from plax_cost_analysis.analysis import (CostAnalysis, TRANSFORM, cost_analysis, cost_of,
                                         jaxpr_cost)
from plax_cost_analysis import rules as _rules  # registers the rules
from plax_cost_analysis.rules import bytes_only_primitives

__all__ = ["CostAnalysis", "TRANSFORM", "cost_analysis", "cost_of", "jaxpr_cost",
           "bytes_only_primitives"]
