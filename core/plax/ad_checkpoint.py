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


def saved_residuals(f: Callable, *args: Any, **kwargs: Any) -> list[tuple[Any, str]]:
    """The values reverse mode saves to differentiate ``f`` at ``args``, each with where it
    comes from, as JAX lists them.

    Found as JAX finds them: ``f``'s VJP is traced to a jaxpr whose outputs are the
    residuals, and each is described by what produces it there -- a literal, a constant,
    ``the argument x``, or, followed by ``from file:line:col (function)`` (the line of ``f``
    that made it, recorded while tracing: :mod:`plax.core.source_info`), a value ``named
    'a'`` (``checkpoint_name``), the output of a jitted function, or the ``output of sin``.

    Args:
      f: the function, as it would be given to ``plax.vjp``.
      *args: its arguments (differentiated with respect to all of them).
      **kwargs: keyword arguments passed through, not differentiated.

    Returns:
      A list of ``(ShapedArray, description)``.

    Example:
      >>> [why for _, why in saved_residuals(lambda x: jnp.sin(x).sum(), jnp.ones(3))]
      ... # doctest: +ELLIPSIS
      ['output of cos from ...:1:... (<lambda>)']
    """
    import sys
    with _capturing(sys._getframe(1)):
        return [(aval, why) for aval, why, _ in _saved_residuals(f, args, kwargs)]


class _capturing:
    """Records the source lines of staged values and the checkpoint policies met while
    ``f``'s VJP is traced."""

    def __init__(self, boundary):
        from plax.core.source_info import capturing_sources
        self.sources = capturing_sources(boundary=boundary)

    def __enter__(self):
        from plax.transforms import checkpoint
        seen = checkpoint.policies_seen  # the running thread's
        self.saved, seen.policies = seen.policies, []
        self.sources.__enter__()

    def __exit__(self, *exc):
        from plax.transforms import checkpoint
        checkpoint.policies_seen.policies = self.saved
        return self.sources.__exit__(*exc)


def _offloaded_to_host(eqn, policies) -> bool:
    """Whether a checkpoint policy met while tracing offloads ``eqn``'s result to host memory
    (JAX then saves a ``device_put`` to host; plax keeps the value where it is)."""
    avals = [v.aval for v in eqn.invars]
    for policy in policies:
        try:  # a policy asked about an equation it was not written for must not fail this
            answer = policy(eqn.primitive, *avals, **eqn.params)
        except Exception:  # noqa: BLE001
            continue
        if isinstance(answer, Offloadable):
            return "host" in str(answer.dst)
    return False


def _saved_residuals(f: Callable, args, kwargs) -> list[tuple[Any, str, str]]:
    """``(aval, description, memory)``: memory is ``"host"`` for an offloaded residual."""
    import functools
    from plax import tree_util
    from plax.core.jaxpr import Literal
    from plax.core.trace import DebugInfo
    from plax.lax.base import asarray
    from plax.transforms.autodiff import vjp
    from plax.transforms.checkpoint import name_p
    from plax.transforms.jit import make_jaxpr
    args = tree_util.tree_map(asarray, args)
    fun = functools.partial(f, **kwargs) if kwargs else f
    leaves, in_tree = tree_util.tree_flatten(args)

    def residuals(*flat):
        f_vjp = vjp(fun, *tree_util.tree_unflatten(in_tree, list(flat)))[1]
        return [r for r in tree_util.tree_leaves(f_vjp) if not callable(r)]

    from plax.transforms import checkpoint
    jaxpr = make_jaxpr(residuals)(*leaves).jaxpr
    policies = list(checkpoint.policies_seen.policies or ())
    wanted = {id(v) for v in jaxpr.outvars if not isinstance(v, Literal)}
    out: list[tuple[Any, str, str]] = [(v.aval, "from a literal", "") for v in jaxpr.outvars
                                       if isinstance(v, Literal)]
    out += [(v.aval, "from a constant", "") for v in jaxpr.constvars if id(v) in wanted]
    try:
        names = DebugInfo("saved_residuals", fun, in_tree).arg_names()
    except Exception:  # noqa: BLE001 (a description must not fail)
        names = [f"args[{i}]" for i in range(len(leaves))]
    out += [(v.aval, f"from the argument {n}", "") for v, n in zip(jaxpr.invars, names)
            if id(v) in wanted]
    from plax.core.source_info import source_of
    for eqn in jaxpr.eqns:
        for v in eqn.outvars:
            if id(v) not in wanted:
                continue
            if _offloaded_to_host(eqn, policies):
                # as JAX lists it: the copy to host memory that it saves, with no source line
                out.append((v.aval, "output of device_put from ", "host"))
                continue
            if eqn.primitive is name_p:
                why = f"named '{eqn.params['name']}'"
            elif eqn.primitive.name == "jit":
                why = f"output of jitted function '{eqn.params.get('name', '?')}'"
            else:
                why = f"output of {eqn.primitive.name}"
            # as JAX: " from " and the source, empty where no line of f made the value
            out.append((v.aval, f"{why} from {source_of(v) or ''}", ""))
    return out


def print_saved_residuals(f: Callable, *args: Any, **kwargs: Any) -> None:
    """Prints the values reverse mode saves to differentiate ``f`` at ``args``: one line each,
    its type and where it comes from (see :func:`saved_residuals`).

    Args:
      f: the function, as it would be given to ``plax.vjp``.
      *args: its arguments (differentiated with respect to all of them).
      **kwargs: keyword arguments passed through, not differentiated.

    Example:
      >>> from plax.ad_checkpoint import print_saved_residuals
      >>> print_saved_residuals(lambda x: jnp.sin(x).sum(), jnp.ones(3))  # doctest: +SKIP
      f32[3] output of cos from <stdin>:1:26 (<lambda>)
    """
    import sys
    with _capturing(sys._getframe(1)):
        found = _saved_residuals(f, args, kwargs)
    for aval, why, memory in found:
        text = aval.str_short()
        if memory:  # JAX writes the memory space after the dtype: f32<host>[3]
            text = text.replace("[", f"<{memory}>[", 1)
        print(text, why)
