"""``jax.ref``: mutable array references.

``new_ref(x)`` makes a :class:`Ref` (``empty_ref(ty)`` one whose contents are unset, inside
``jit``; ``free_ref`` invalidates one); ``ref[idx]`` / ``get`` reads, ``ref[idx] = v`` / ``set``
writes, ``swap`` writes and returns the old value, ``addupdate`` accumulates, ``freeze``
reads the final value as an Array. See docs/state.md.

Example:
  >>> r = jax.ref.new_ref(jnp.zeros(3))
  >>> jax.ref.addupdate(r, 1, 2.0)
  >>> jax.ref.freeze(r)
  Array([0., 2., 0.], dtype=float32)
"""
from plax.state import rules as _rules  # noqa: F401  (registers printing, JVP, batching)
from plax.state.primitives import (empty_ref, free_ref, freeze, new_ref,
                                   ref_addupdate as addupdate, ref_get as get, ref_set as set,
                                   ref_swap as swap)
from plax.state.types import AbstractRef, Ref

__all__ = ["AbstractRef", "Ref", "addupdate", "empty_ref", "free_ref", "freeze", "get", "new_ref",
           "set", "swap"]
