"""``plax.ad_checkpoint``: names and policies for rematerialisation, as ``jax.ad_checkpoint``.

``plax.checkpoint`` (alias ``remat``) itself lives at the top level, as in JAX
(:mod:`plax.transforms.checkpoint`). :func:`checkpoint_name` tags a value with the ``name``
primitive, which the ``save_only_these_names`` family of policies looks for, and
:func:`print_saved_residuals` shows what reverse mode saves.
"""
from __future__ import annotations

from typing import Any, Callable

from plax.transforms.checkpoint import checkpoint_policies

__all__ = ["checkpoint_name", "checkpoint_policies", "print_saved_residuals", "Saveable",
           "Recompute", "Offloadable"]


class _PolicyAnswer:
    """What a rematerialisation policy may answer for one value (JAX's three outcomes)."""

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return self._name


Saveable = _PolicyAnswer("Saveable")
Recompute = _PolicyAnswer("Recompute")


class Offloadable:
    """A policy answer: save the value, offloaded from ``src`` to ``dst`` memory."""

    def __init__(self, src: str, dst: str):
        self.src, self.dst = src, dst

    def __repr__(self) -> str:
        return f"Offloadable(src={self.src!r}, dst={self.dst!r})"


def checkpoint_name(x: Any, name: str) -> Any:
    """Tags ``x`` (a pytree of arrays) with ``name`` for ``save_only_these_names`` policies.

    Args:
      x: the value to name.
      name: the name a policy refers to.

    Returns:
      ``x`` with each leaf passed through the ``name`` primitive (its value unchanged).

    Example:
      >>> from plax.ad_checkpoint import checkpoint_name
      >>> checkpoint_name(jnp.float32(2.0), "z")
      Array(2., dtype=float32)
    """
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name expects a string name, got {name!r} of type "
                        f"{type(name).__name__}.")
    from plax import tree_util
    from plax.lax.base import asarray
    from plax.transforms.checkpoint import name_p
    return tree_util.tree_map(lambda leaf: name_p.bind(asarray(leaf), name=name), x)


def print_saved_residuals(f: Callable, *args: Any, **kwargs: Any) -> None:
    """Prints the values reverse mode saves to differentiate ``f`` at ``args``: one line each.

    Args:
      f: the function, as it would be given to ``plax.vjp``.
      *args: its arguments (differentiated with respect to all of them).
      **kwargs: keyword arguments passed through, not differentiated.

    Example:
      >>> from plax.ad_checkpoint import print_saved_residuals
      >>> print_saved_residuals(lambda x: jnp.sin(x).sum(), jnp.ones(3))
      f32[3] residual
    """
    import functools
    from plax import tree_util
    from plax.core.trace import get_aval
    from plax.transforms.autodiff import vjp
    from plax.lax.base import asarray
    from plax.transforms.checkpoint import describe_saved
    args = tree_util.tree_map(asarray, args)  # host values become the Arrays vjp is given
    described: dict = {}
    token = describe_saved.set(described)  # checkpoint says where the values it saves come from
    try:
        _, f_vjp = vjp(functools.partial(f, **kwargs) if kwargs else f, *args)
    finally:
        describe_saved.reset(token)
    arg_ids = {id(leaf): i for i, leaf in enumerate(tree_util.tree_leaves(args))}
    for leaf in tree_util.tree_leaves(f_vjp):
        if callable(leaf):
            continue
        if id(leaf) in arg_ids:
            where = f" from argument {arg_ids[id(leaf)]}"
        elif id(leaf) in described:
            where = " " + described[id(leaf)]
        else:
            where = " residual"
        print(get_aval(leaf).str_short() + where)
