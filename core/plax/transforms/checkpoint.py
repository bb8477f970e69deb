"""``checkpoint`` (remat): mark a function whose intermediates may be recomputed in the
backward pass instead of stored.

plax's reverse mode keeps every residual (the linear jaxpr closes over them), so
checkpoint is the identity transformation here: results and gradients are
exactly those of the undecorated function; only the memory trade-off that
rematerialisation offers in JAX is not made.
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence


def checkpoint(fun: Callable | None = None, *, prevent_cse: bool = True, policy=None,
               static_argnums: int | Sequence[int] = ()) -> Callable:
    """Returns ``fun`` unchanged in meaning (see the module docstring for what is not done).

    Example:
      >>> jax.grad(jax.checkpoint(jnp.sin))(0.0)
      Array(1., dtype=float32, weak_type=True)
    """
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy,
                                 static_argnums=static_argnums)

    @functools.wraps(fun)
    def remat_f(*args, **kwargs):
        return fun(*args, **kwargs)

    return remat_f


remat = checkpoint


class checkpoint_policies:
    """Names of JAX's rematerialisation policies (accepted, with no effect on results)."""

    @staticmethod
    def everything_saveable(*_, **__):
        return True

    @staticmethod
    def nothing_saveable(*_, **__):
        return False

    dots_saveable = everything_saveable
    checkpoint_dots = everything_saveable
    dots_with_no_batch_dims_saveable = everything_saveable

    @staticmethod
    def save_only_these_names(*names):
        return checkpoint_policies.everything_saveable
