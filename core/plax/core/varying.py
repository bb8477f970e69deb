"""Varying manual axes (vma): typing values by the mesh axes along which they may differ.

Inside ``shard_map(check_vma=True)`` every value is typed by the set of mesh axes along which
it may differ between devices (``ShapedArray.vma``), as in JAX. The type changes what
reverse mode computes, not what the forward program does:

* an argument varies over the mesh axes its in_spec names; an operation's result varies
  over the union of its operands' axes; a collective says what it does to the axes
  (``psum`` over ``"i"`` removes ``"i"``, ``all_gather`` adds it);
* an invariant value used together with varying ones is implicitly broadcast to them (JAX
  inserts ``pvary``), and the transpose of that broadcast is a sum over the devices: when a
  cotangent that varies over axes reaches a value that does not, :func:`reduce_cotangent`
  sums it over those axes;
* ``psum`` of a value that already varies over the axes transposes to the identity (the
  cotangent is equal on every device already).

Outside such a body (``pmap``, ``vmap(axis_name=...)``, ``shard_map(check_vma=False)``)
nothing is typed and the collectives keep their untyped rules (``psum`` transposes to
``psum``). The transform that traces a typed body opens :func:`typing` around the trace; the
multi-device plugin registers the primitives that type their own results and the sum that
reduces cotangents.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Hashable, Iterable, Iterator

from plax.core.trace import get_aval, state as _trace_state

_NO_AXES: frozenset = frozenset()

# The typing stack is per thread (``plax.core.trace.state.vma``, beside the trace stack it
# types): its top holds the mesh axes of the typed body being traced, None when untyped (an
# untyped mapped body inside a typed one pushes None). Read it with :func:`current`,
# :func:`active` or :func:`typed_axes`.
# primitives whose abstract evaluation sets the vma of its results itself (collectives,
# calls whose body was traced typed); others get the union of their operands'
_self_typed: set = set()
_reducer: list = [None]
# the rule typing results of operations on unreduced values (the multi-device plugin's)
_unreduced_rule: list = [None]
# the cast marking a value as varying over more axes (the multi-device plugin's ``pvary``)
_caster: list = [None]


def axes_of(aval: Any) -> frozenset:
    """The mesh axes ``aval`` is typed as varying over (none for an aval without the field)."""
    return getattr(aval, "vma", _NO_AXES)


def current() -> frozenset | None:
    """The mesh axes of the typed body the running thread traces now, or None (untyped)."""
    return _trace_state.vma[-1]


def active() -> bool:
    """Whether values traced now are typed by their varying axes."""
    return _trace_state.vma[-1] is not None


def typed_axes() -> frozenset:
    """The mesh axes that values traced now are typed over (empty when untyped)."""
    return _trace_state.vma[-1] or _NO_AXES


@contextlib.contextmanager
def typing(axes: Iterable[Hashable] | None) -> Iterator[None]:
    """Types the values traced in the block by the ``axes`` they vary over (``None``: stops
    typing, for an untyped mapped body inside a typed one).

    Example:
      >>> with typing(("x",)):
      ...     active(), typed_axes()
      (True, frozenset({'x'}))
    """
    stack = _trace_state.vma
    stack.append(None if axes is None else frozenset(axes))
    try:
        yield
    finally:
        stack.pop()


def register_self_typed(primitive) -> None:
    """Declares that ``primitive``'s abstract evaluation sets its results' ``vma`` itself
    (a collective, or a call whose results' types come from its traced body)."""
    _self_typed.add(primitive)


def register_reducer(reduce: Callable[[Any, tuple], Any]) -> None:
    """Sets ``reduce(ct, axes)``, the sum of a cotangent over the devices along ``axes``
    (the multi-device plugin's ``psum``)."""
    _reducer[0] = reduce


def register_caster(cast: Callable[[Any, tuple], Any]) -> None:
    """Sets ``cast(x, axes)``, ``x`` typed as varying over ``axes`` too (the multi-device
    plugin's ``pvary``)."""
    _caster[0] = cast


def vary_like(value: Any, like: Any) -> Any:
    """``value`` typed as varying over the axes ``like`` varies over (not those it is
    unreduced over), as JAX types a value made "like" another inside a typed body
    (``zeros_like``, ``full_like``: a ``pvary`` after the fill). Outside a typed body, or
    when ``value`` varies over them already, ``value`` itself."""
    if _trace_state.vma[-1] is None or _caster[0] is None:
        return value
    missing = axes_of(get_aval(like)) - axes_of(get_aval(value))
    if not missing:
        return value
    return _caster[0](value, tuple(sorted(missing, key=str)))


def unreduced_of(aval: Any) -> frozenset:
    """The mesh axes along which ``aval``'s devices hold partial sums (``{U:Y}`` inside a
    shard_map body; none for an aval without the field)."""
    return getattr(aval, "unreduced", _NO_AXES)


def register_unreduced_rule(rule: Callable) -> None:
    """Sets ``rule(primitive, in_avals, params, out_avals) -> out_avals``: the types of an
    operation's results when some operand is unreduced (JAX's errors where it refuses
    one), as the multi-device plugin defines them."""
    _unreduced_rule[0] = rule


def type_unreduced(primitive, in_avals, params: dict, out_avals):
    """``out_avals`` (a list for a primitive with several results) typed by the unreduced
    rule when an operand is unreduced (else as they are)."""
    rule = _unreduced_rule[0]
    if rule is None or not any(getattr(a, "unreduced", None) for a in in_avals):
        return out_avals
    return rule(primitive, in_avals, params, out_avals)


def result_vma(primitive, in_avals) -> frozenset | None:
    """The varying axes of ``primitive``'s results given its operands' avals: their union,
    or None when the primitive types its results itself or no operand varies."""
    if primitive in _self_typed:
        return None
    out = _NO_AXES
    for a in in_avals:
        v = axes_of(a)
        if v:
            out = out | v
    return out or None


def outside(aval, name):
    """``aval`` of a per-device value as seen from outside the vmap level that binds mesh
    axis ``name`` (shard_map's vmap formulation batches along it): no longer varying over it."""
    vma = axes_of(aval)
    return aval.update(vma=vma - {name}) if name in vma else aval


def reduce_cotangent(ct: Any, target_aval: Any) -> Any:
    """``ct`` summed over the axes it varies over and its target value (of type
    ``target_aval``) does not: the transpose of the implicit broadcast of an invariant
    value."""
    extra = axes_of(get_aval(ct)) - axes_of(target_aval)
    if not extra or _reducer[0] is None:
        return ct
    return _reducer[0](ct, tuple(sorted(extra, key=str)))
