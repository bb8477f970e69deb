"""Literals and constants as host values: what a backend uploads once, at compile time.

Tracing records Python scalars as :class:`~plax.core.jaxpr.Literal` atoms holding host
values; lowering turns them into NumPy scalars of the literal's dtype here, never through a
device round trip.
"""
from __future__ import annotations

import numpy as np

from plax.core.jaxpr import Literal


def literal_value(lit: Literal) -> np.ndarray:
    """The host value of a literal: a rank-0 NumPy array of the literal's dtype.

    Example:
      >>> from plax.core import ShapedArray
      >>> literal_value(Literal(2.0, ShapedArray((), np.float32, True)))
      array(2., dtype=float32)
    """
    val = lit.val
    if hasattr(val, "_host_value"):  # a plax Array captured as a literal
        val = val._host_value()
    return np.asarray(val, dtype=lit.aval.dtype)
