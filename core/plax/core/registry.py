"""The transform registry: one rule table per transform, keyed by primitive.

``register_rule("batch", add_p)(rule)`` is the only way a rule gets in. The
core defines the tables ``jvp``, ``transpose``, ``batch``, ``impl`` (an
eager rule that replaces backend dispatch, used by primitives defined in terms
of other primitives) and ``dce`` (``rule(eqn, used) -> eqn``: the equation
without the outputs :func:`plax.core.passes.dce` found unused, for primitives
holding sub-jaxprs); a plugin may add its own with :func:`new_transform`.
"""
from __future__ import annotations

from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)

_tables: dict[str, dict] = {"jvp": {}, "transpose": {}, "batch": {}, "impl": {}, "dce": {}}

_hints = {
    "jvp": "it cannot be differentiated (jvp/grad)",
    "transpose": "it cannot be transposed, so reverse mode (grad/vjp) cannot pass through it",
    "batch": "it cannot be batched with vmap",
    "impl": "it has no eager implementation",
    "dce": "dead-code elimination keeps all of its outputs",
}


def new_transform(name: str, hint: str | None = None) -> dict:
    """Creates (or returns) the rule table of transform ``name``, for plugins adding a transform.

    Args:
      name: the table's name, used by :func:`register_rule` and :func:`get_rule`.
      hint: what a missing rule means, for :func:`get_rule`'s error (completing "so ...");
        default: "transform {name!r} cannot process it".

    Returns:
      The table (primitive -> rule); interpreters may read it directly for speed.

    Example:
      >>> my_rules = new_transform("my_transform", hint="my_transform cannot pass through it")
      >>> my_p = plax.core.Primitive("my_op")
      >>> rule = register_rule("my_transform", my_p)(lambda x: x)
      >>> my_rules[my_p] is rule
      True
    """
    if hint is not None:
        _hints[name] = hint
    return _tables.setdefault(name, {})


def transforms() -> tuple[str, ...]:
    """The names of all transforms that have a rule table."""
    return tuple(_tables)


def rule_table(transform: str) -> dict:
    """The table of ``transform`` itself (primitive -> rule), for fast lookups in interpreters."""
    try:
        return _tables[transform]
    except KeyError:
        raise KeyError(f"Unknown transform {transform!r}; known: {', '.join(_tables)}. "
                       "A plugin creates a new one with plax.core.new_transform(name).") from None


def register_rule(transform: str, primitive) -> Callable[[F], F]:
    """Returns a decorator that registers the rule of ``primitive`` for ``transform``.

    Args:
      transform: the table's name, e.g. ``"jvp"``, ``"transpose"``, ``"batch"``.
      primitive: the :class:`~plax.core.Primitive` the rule is for.

    Returns:
      A decorator that stores the rule and returns it unchanged.

    Example:
      >>> my_p = plax.core.Primitive("my_op")
      >>> @register_rule("batch", my_p)
      ... def _my_batch(args, dims, **params):
      ...     return my_p.bind(*args, **params), dims[0]
      >>> get_rule("batch", my_p) is _my_batch
      True
    """
    table = rule_table(transform)

    def register(rule: F) -> F:
        table[primitive] = rule
        return rule

    return register


def get_rule(transform: str, primitive) -> Callable:
    """The rule of ``primitive`` for ``transform``.

    Raises:
      NotImplementedError: naming the primitive and the transform when no rule is registered.
    """
    rule = rule_table(transform).get(primitive)
    if rule is None:
        why = _hints.get(transform, f"transform {transform!r} cannot process it")
        raise NotImplementedError(
            f"Primitive {primitive.name!r} has no {transform!r} rule, so {why}. Register one "
            f"with plax.core.register_rule({transform!r}, {primitive.name}_p).")
    return rule


def has_rule(transform: str, primitive) -> bool:
    """Whether ``primitive`` has a rule for ``transform``."""
    return primitive in _tables.get(transform, ())
