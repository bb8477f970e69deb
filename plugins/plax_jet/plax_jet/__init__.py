"""plax-jet: Taylor-mode forward differentiation, available as ``plax.experimental.jet``.

``jet(f, primals, series)`` pushes a truncated Taylor series through ``f`` in one pass,
giving the higher derivatives of ``f`` along a curve without nesting ``jvp``.

Example:
  >>> from plax.experimental.jet import jet
  >>> jet(jnp.exp, (0.,), ((1., 0., 0.),))
  (Array(1., dtype=float32, weak_type=True), [Array(1., ...), Array(1., ...), Array(1., ...)])
"""
from plax_jet.trace import JetTrace, JetTracer, jet, jet_rules
from plax_jet import rules as _rules  # registers the rules of plax's primitives

__version__ = "0.1.0"

__all__ = ["jet", "jet_rules", "JetTrace", "JetTracer"]
