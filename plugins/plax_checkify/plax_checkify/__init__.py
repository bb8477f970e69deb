"""plax-checkify: JAX's ``checkify`` for plax, available as ``plax.experimental.checkify``.

``checkify(f, errors=...)`` turns the checks in ``f`` (a user's :func:`check`, and where
asked NaNs, division by zero and out-of-bounds indexing) into an error value returned beside
``f``'s outputs. The checks are traced into the program as array operations (no host
callback), so they run on every backend and compose with ``jit``, ``vmap`` and ``grad``.

Example:
  >>> from plax.experimental import checkify
  >>> def f(x, i):
  ...     checkify.check(x[0] > 0, "x[0] must be positive, got {}", x[0])
  ...     return jnp.log(x)[i]
  >>> err, out = plax.jit(checkify.checkify(f, errors=checkify.all_checks))(
  ...     jnp.array([-1., 2.]), 0)
  >>> err.get()
  'x[0] must be positive, got -1.0 (`check` failed)'
"""
from plax_checkify.errors import (DivisionByZeroError, Error, FailedCheckError, JaxException,
                                  JaxRuntimeError, NaNError, OOBError, all_checks,
                                  automatic_checks, div_checks, float_checks, index_checks,
                                  nan_checks, user_checks)
from plax_checkify.transform import ErrorState, checkify, checkify_rules, nan_check_rule
from plax_checkify.check import check, check_p
from plax_checkify import rules as _rules  # registers the rules of plax's primitives

__version__ = "0.1.0"

__all__ = [
    "checkify", "check", "Error", "JaxRuntimeError", "JaxException", "FailedCheckError",
    "NaNError", "DivisionByZeroError", "OOBError", "user_checks", "nan_checks", "div_checks",
    "index_checks", "float_checks", "automatic_checks", "all_checks", "ErrorState",
    "checkify_rules", "nan_check_rule", "check_p",
]
