"""``jax.checkpoint_policies``: which intermediates a ``checkpoint`` saves for reverse mode.

A policy is ``policy(primitive, *avals, **params)`` answering True/``Saveable`` (save the
value), False/``Recompute`` (recompute it) or ``Offloadable`` (save it in other memory; plax's
devices keep it where it is). The policies are shaped as JAX 0.10.2 shapes them, so that a
``remat2`` equation prints its ``policy=`` parameter as JAX prints it: plain functions
(``<function everything_saveable at 0xXXXXXXXXXXXX>``), frozen dataclasses
(``DotsSaveable(only_if_no_batch_dims=False)``, ``SaveOnlyTheseNames(...)``) and closures
(``<function save_from_both_policies.<locals>.policy at 0x...>``). :func:`pp_policy` is that
printing; the ``checkpoint`` primitive registers it for its ``policy`` parameter.
"""
from __future__ import annotations

import dataclasses
import re
import types
from typing import Any, Callable

# Primitives are matched by name: this module is imported by the checkpoint primitive's own
# module, before plax.lax (dot_general, conv_general_dilated) exists.
_NAME = "name"
_DOTS = ("dot_general", "conv_general_dilated")


def _answers():
    from plax.ad_checkpoint import Offloadable, Recompute, Saveable
    return Saveable, Recompute, Offloadable


def _no_batch_dims_dot(prim, params) -> bool:
    if prim.name != "dot_general":
        return False
    (_, _), (lhs_batch, rhs_batch) = params["dimension_numbers"]
    return not lhs_batch and not rhs_batch


def everything_saveable(*_, **__) -> bool:
    """Saves every intermediate (no recomputation: ``checkpoint`` has no effect)."""
    return True


def nothing_saveable(*_, **__) -> bool:
    """Saves nothing but the inputs; everything else is recomputed."""
    return False


@dataclasses.dataclass(frozen=True)
class DotsSaveable:
    """Saves the results of matrix products and convolutions (with
    ``only_if_no_batch_dims``: only products without batch dimensions)."""

    only_if_no_batch_dims: bool

    def __call__(self, prim, *_, **params) -> bool:
        if self.only_if_no_batch_dims:
            return _no_batch_dims_dot(prim, params)
        return prim.name in _DOTS


@dataclasses.dataclass(frozen=True)
class SaveOnlyTheseNames:
    """Saves the values named (``checkpoint_name``) with one of ``saveable_names``."""

    saveable_names: frozenset

    def __call__(self, prim, *_, **params) -> bool:
        return prim.name == _NAME and params["name"] in self.saveable_names


@dataclasses.dataclass(frozen=True)
class SaveAnyNamesButThese:
    """Saves every named value except those named with one of ``names``."""

    names: frozenset

    def __call__(self, prim, *_, **params) -> bool:
        return prim.name == _NAME and params["name"] not in self.names


dots_saveable = DotsSaveable(only_if_no_batch_dims=False)
dots_with_no_batch_dims_saveable = DotsSaveable(only_if_no_batch_dims=True)


def save_only_these_names(*names: str) -> SaveOnlyTheseNames:
    """A policy saving only the values named with one of ``names``.

    Args:
      *names: the names given to ``checkpoint_name``.

    Returns:
      The policy.

    Example:
      >>> jax.checkpoint_policies.save_only_these_names("h")
      SaveOnlyTheseNames(saveable_names=frozenset({'h'}))
    """
    return SaveOnlyTheseNames(frozenset(names))


def save_any_names_but_these(*names: str) -> SaveAnyNamesButThese:
    """A policy saving every named value except those named with one of ``names``.

    Example:
      >>> jax.checkpoint_policies.save_any_names_but_these("h")
      SaveAnyNamesButThese(names=frozenset({'h'}))
    """
    return SaveAnyNamesButThese(frozenset(names))


def save_anything_except_these_names(*names: str) -> Callable:
    """A policy saving every value (named or not) except those named with one of ``names``.

    Example:
      >>> policy = jax.checkpoint_policies.save_anything_except_these_names("h")
    """
    excluded = frozenset(names)
    # a lambda, as JAX's (its qualified name is what a jaxpr prints)
    return lambda prim, *_, **params: not (prim.name == _NAME and params["name"] in excluded)


def save_and_offload_only_these_names(*, names_which_can_be_saved, names_which_can_be_offloaded,
                                      offload_src: str, offload_dst: str) -> Callable:
    """Saves the values named in ``names_which_can_be_saved``, offloads (from ``offload_src``
    to ``offload_dst`` memory) those named in ``names_which_can_be_offloaded``, recomputes the
    rest. plax's devices keep residuals where they are (CPU buffers are host memory already),
    so an offloaded value is simply saved.

    Raises:
      ValueError: if a name is in both lists (as in JAX).

    Example:
      >>> policy = jax.checkpoint_policies.save_and_offload_only_these_names(
      ...     names_which_can_be_saved=["a"], names_which_can_be_offloaded=["b"],
      ...     offload_src="device", offload_dst="pinned_host")
    """
    saved, offloaded = set(names_which_can_be_saved), set(names_which_can_be_offloaded)
    both = saved & offloaded
    if both:
        raise ValueError(
            "The names should be exclusive and should not intersect in "
            "`names_which_can_be_saved` and `names_which_can_be_offloaded`. Got "
            f"names_which_can_be_saved={saved}, names_which_can_be_offloaded={offloaded} "
            f"and the intersection={both}")

    def policy(prim, *_, **params):
        saveable, recompute, offloadable = _answers()
        if prim.name == _NAME and params["name"] in saved:
            return saveable
        if prim.name == _NAME and params["name"] in offloaded:
            return offloadable(src=offload_src, dst=offload_dst)
        return recompute
    return policy


def offload_dot_with_no_batch_dims(offload_src: str, offload_dst: str) -> Callable:
    """Offloads (saves, in plax: see :func:`save_and_offload_only_these_names`) the results of
    matrix products without batch dimensions; recomputes the rest.

    Example:
      >>> policy = jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host")
    """
    def policy(prim, *_, **params):
        _, recompute, offloadable = _answers()
        if _no_batch_dims_dot(prim, params):
            return offloadable(src=offload_src, dst=offload_dst)
        return recompute
    return policy


def save_from_both_policies(policy_1: Callable, policy_2: Callable) -> Callable:
    """Saves what either of two boolean policies saves.

    Raises:
      ValueError: (when the policy runs) if either policy answers something but a bool, as in
        JAX.

    Example:
      >>> cp = jax.checkpoint_policies
      >>> policy = cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("h"))
    """
    def policy(prim, *args, **params):
        out1 = policy_1(prim, *args, **params)
        out2 = policy_2(prim, *args, **params)
        if not (isinstance(out1, bool) and isinstance(out2, bool)):
            raise ValueError(
                f"The return value of the policies should be a boolean. Got: {out1} and {out2}. "
                "Please write a custom policy function directly, rather than using this helper "
                "function.")
        return out1 or out2
    return policy


#: ``jax.checkpoint_policies``: a namespace, as in JAX.
checkpoint_policies = types.SimpleNamespace(
    everything_saveable=everything_saveable,
    nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable,
    checkpoint_dots=dots_saveable,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=dots_with_no_batch_dims_saveable,
    offload_dot_with_no_batch_dims=offload_dot_with_no_batch_dims,
    save_anything_except_these_names=save_anything_except_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_only_these_names=save_only_these_names,
    save_from_both_policies=save_from_both_policies,
    save_and_offload_only_these_names=save_and_offload_only_these_names,
)

_ADDRESS = re.compile(r" at 0x([0-9a-fA-F]+)")


def pp_policy(policy: Any) -> str:
    """A ``policy=`` parameter as JAX prints it in a jaxpr: its ``str``, with memory
    addresses masked (``<function f at 0xXXXXXXXXXXXX>``) so that the text is reproducible.

    Example:
      >>> pp_policy(checkpoint_policies.dots_saveable)
      'DotsSaveable(only_if_no_batch_dims=False)'
    """
    return _ADDRESS.sub(lambda m: " at 0x" + "X" * len(m.group(1)), str(policy))
