"""Mutable array references (JAX's ``jax.new_ref`` / ``jax.ref``): their types
(:mod:`plax.state.types`), primitives (:mod:`plax.state.primitives`), rules
(:mod:`plax.state.rules`) and discharge (:mod:`plax.state.discharge`). The public API is
:mod:`plax.ref`; docs/state.md explains the design."""
