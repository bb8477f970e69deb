"""Custom batching rules (``jax.custom_batching``): :class:`custom_vmap` gives a function
its own ``vmap`` rule; :func:`sequential_vmap` batches a function with a loop.

Example:
  >>> from plax.custom_batching import custom_vmap
  >>> @custom_vmap
  ... def f(x):
  ...     return x + 1.0
  >>> _ = f.def_vmap(lambda axis_size, in_batched, xs: (xs * 10.0, True))
  >>> plax.vmap(f)(jnp.arange(2.0))
  Array([ 0., 10.], dtype=float32)
"""
from plax.transforms.custom_batching import custom_vmap, sequential_vmap

__all__ = ["custom_vmap", "sequential_vmap"]
