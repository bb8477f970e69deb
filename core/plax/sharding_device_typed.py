"""Results that stay on one device under an Explicit mesh, as JAX 0.10.2 places them.

Under a set mesh JAX types an array committed to one device with an *empty* mesh (not the
set one), and each primitive's sharding rule types its result: a rule that forwards its
operand's type (``sin``, ``convert_element_type``, reductions, ``cumsum``, ``reshape``,
``transpose``, ``dot_general``, ``sort``) keeps the empty mesh, a rule that falls back to
the set mesh when no operand has one (elementwise operations of two or more operands such
as ``add`` and ``select_n``, ``broadcast_in_dim``, ``concatenate``) types it on the set
mesh (``dynamic_slice``, ``dynamic_update_slice`` and ``pad`` type it from their operand
and update alone, not from start indices or a padding value). A result of the empty mesh
comes back as the computation's first committed argument's sharding
(``SingleDeviceSharding``: on that device, committed; ``P()`` when that argument lies on
the mesh), one of the set mesh as
``NamedSharding(mesh, P(None, ...))``. So ``jnp.sin(c)`` and ``jit(jnp.sin)(c)`` stay on
``c``'s device while ``c + 1`` and ``c + c`` are placed on the mesh. (Under a mesh of no
Explicit axis every result of such an operand stays on its device:
:func:`plax.sharding_eager.check_committed_devices`.)

Which rules keep their operand's type is the table plax already keeps for host values'
short spec (:func:`plax.sharding_eager._keeps_short_spec`), read for a ``jit`` program.
"""
from __future__ import annotations

from typing import Any, Sequence

from plax.array import Array, host_or_uncommitted
from plax.core.trace import Tracer
from plax.sharding import AxisType, NamedSharding
from plax.sharding_eager import (_keeps_short_spec, _type_text, current_mesh, typing_operands,
                                 on_one_device as _on_one_device)
from plax.sharding_indexing import mesh_axes_str, update_sharding_error
from plax.sharding_types import sharded_dims_str, spec_dims
from plax.transforms.staging import abstractify


def stays_on_device(prim, args: Sequence, mesh) -> bool:
    """Whether the eager result of ``prim`` on ``args`` under ``mesh`` (the set one, whose
    devices the caller checked) stays on the device of its committed operands, as JAX 0.10
    keeps it under an Explicit axis: an operand is committed to one device, none lies on
    the mesh, and the rule of ``prim`` forwards its operand's type.

    Example:
      >>> mesh = plax.make_mesh((1,), ("x",))
      >>> c = plax.device_put(jnp.ones(2), plax.devices()[0])
      >>> stays_on_device(plax.lax.sin_p, [c], mesh), stays_on_device(plax.lax.add_p, [c, c], mesh)
      (True, False)
    """
    if AxisType.Explicit not in mesh.axis_types or not _first_committed_on_one_device(args):
        return False
    return all(_on_one_device(a) or host_or_uncommitted(a) for a in typing_operands(prim, args)) \
        and _keeps_short_spec(prim, len(args), eager=False)


def _first_committed(leaves: Sequence, unread: frozenset = frozenset()) -> Any:
    """The first of ``leaves`` (those not in ``unread``) that is committed, or None: JAX 0.10
    gives a result typed with no mesh the sharding of the computation's first committed
    argument (``SingleDeviceSharding`` when it lies on one device, ``P()`` on the mesh
    otherwise)."""
    return next((x for i, x in enumerate(leaves)
                 if i not in unread and not host_or_uncommitted(x)), None)


def _first_committed_on_one_device(leaves: Sequence, unread: frozenset = frozenset()) -> bool:
    """Whether :func:`_first_committed` of ``leaves`` lies on one device rather than on the
    mesh; False when none is committed."""
    return _on_one_device(_first_committed(leaves, unread))


def device_typed_outputs(jaxpr, leaves: Sequence, mesh, unread: frozenset = frozenset(),
                         const_marks: Sequence[bool] = (),
                         marks: Sequence[bool] | None = None) -> list[bool] | None:
    """Which outputs of a top-level ``jit`` program of ``jaxpr``, called with argument
    ``leaves`` under ``mesh``, JAX 0.10 types with no mesh (so they stay on the committed
    arguments' device). When the program reads an argument committed to one device (a leaf
    not in ``unread``), JAX types it, and host and uncommitted arguments, host constants
    (``const_marks``: :func:`typed_with_no_mesh` of the values of ``jaxpr``'s constants) and
    literals, with no mesh (``marks``: :func:`typed_with_no_mesh` of ``leaves``, when the
    caller has it); an output stays when it is computed from those through rules that forward
    their operand's type (bodies of calls and loops followed: ``host @ c``, ``sin(host)``,
    ``fori_loop`` of ``sin``). None when the first committed read argument does not lie on
    one device (it lies on the mesh: what is typed with no mesh is placed ``P()`` there,
    :func:`typed_with_no_mesh`), when none is committed, or the mesh has no Explicit axis
    (nothing stays).

    Example:
      >>> mesh = plax.make_mesh((1,), ("x",))
      >>> c = plax.device_put(jnp.ones(2), plax.devices()[0])
      >>> jaxpr = plax.make_jaxpr(lambda v: (jnp.sin(v), v + 1))(c).jaxpr
      >>> device_typed_outputs(jaxpr, [c], mesh)
      [True, False]
    """
    if AxisType.Explicit not in mesh.axis_types or len(leaves) != len(jaxpr.invars) or \
            not _first_committed_on_one_device(leaves, unread):
        return None
    from plax.sharding_eager import forwarded_outputs
    if marks is None:
        marks = typed_with_no_mesh(leaves, mesh)
    return forwarded_outputs(jaxpr, marks, reads=_READS, consts=const_marks)


def kept_on_device(unplaced: list, placed: list, stay: Sequence[bool], device,
                   mesh) -> list:
    """The results of a ``jit`` call: where ``stay`` (:func:`device_typed_outputs`) marks
    one, the result as computed (``unplaced``; a value typed on the mesh of ``device`` alone,
    as a host argument's is, taken off it) committed to ``device``; else ``placed``'s.

    Example:
      >>> mesh = plax.make_mesh((1,), ("x",))
      >>> d = plax.devices()[0]
      >>> kept_on_device([jnp.ones(2)], [None], [True], d, mesh)[0].committed
      True
    """
    from plax.sharding_eager import committed_to
    return [committed_to(u, device, mesh) if s else o
            for u, o, s in zip(unplaced, placed, stay)]


def typed_with_no_mesh(leaves: Sequence, mesh) -> list[bool]:
    """Which of a ``jit`` call's argument ``leaves`` JAX 0.10 types with no mesh under
    ``mesh``: host values, uncommitted arrays and (under an Explicit axis) arrays and refs
    committed to one device; values on the mesh are typed with it.

    Example:
      >>> mesh = plax.make_mesh((1,), ("x",))
      >>> typed_with_no_mesh([np.ones(2), plax.device_put(1.0, plax.devices()[0])], mesh)
      [True, True]
    """
    explicit = AxisType.Explicit in mesh.axis_types
    return [host_or_uncommitted(x) or (explicit and _on_one_device(x)) for x in leaves]


def placed_body_results(prim, outs: list, args: Sequence, params: dict, mesh) -> list:
    """The eager results ``outs`` of ``prim`` -- a primitive with bodies (``cond``,
    ``while``, ``scan``) -- on ``args`` under ``mesh`` (with an Explicit axis), placed as JAX
    0.10 places them: each typed as its bodies type it from the operands (host values and
    one-device arrays typed with no mesh, values on the mesh with it); one typed with no mesh
    takes the first committed operand's sharding (:func:`_first_committed`: it stays on that
    operand's device, or is placed ``P()`` when that operand lies on the mesh, as with no
    committed operand), one typed on the mesh is placed ``P(None, ...)``.

    Example:
      >>> mesh = plax.make_mesh((1,), ("x",))
      >>> c = plax.device_put(jnp.ones(2), plax.devices()[0])
      >>> with plax.set_mesh(mesh):
      ...     plax.lax.fori_loop(0, 2, lambda i, v: jnp.sin(v), c).sharding.device_set
      {CpuDevice(id=0)}
    """
    from plax.sharding_eager import _BODY_RULES, committed_to, forwarded_outputs, \
        place_replicated
    marks = [type(a) is Array or host_or_uncommitted(a) for a in args]
    walk = lambda jaxpr, m: forwarded_outputs(jaxpr, m, _READS, True)
    typed = _BODY_RULES[prim.name](params, marks, walk)
    # the first committed operand's sharding (no ref here: apply_on_mesh computes an
    # operation of one where it lies)
    first = _first_committed(args)
    device = first._device if type(first) is Array else None  # (else on the mesh, or none)
    return [committed_to(o, device, mesh) if t and device is not None
            else place_replicated(o, mesh, not t) for o, t in zip(outs, typed)]


def check_update_typed_as_operand(operand: Any, update: Any) -> None:
    """JAX 0.10's ShardingTypeError for an eager ``lax.dynamic_update_slice`` under a set
    mesh with an Explicit axis whose ``operand`` and ``update`` are typed apart: its rule
    wants the two typed alike. Eagerly JAX types a host value, an uncommitted array and one
    committed to one device with no mesh, a value placed on the mesh with the mesh and its
    spec (``P()`` as ``P(None, ...)``), so an operand committed to one device and an update
    on the mesh differ, as do an operand split ``P('x')`` and an update placed ``P()`` or a
    host one. An eager ``jvp``'s operands are checked by their primal values (JAX runs the
    primal computation eagerly); traced ones pass (the ``jit``'s rule checks them).

    Example:
      >>> mesh = plax.make_mesh((1,), ("x",))
      >>> c = plax.device_put(jnp.ones((2, 2)), plax.devices()[0])
      >>> with plax.set_mesh(mesh):
      ...     check_update_typed_as_operand(c, jnp.zeros((1, 2)))
      Traceback (most recent call last):
      ...
      plax.sharding_types.ShardingTypeError: dynamic_update_slice operand sharding must be equal to update sharding, got operand sharding float32[2,2]({}) and update sharding float32[1,2]({Explicit: ('x',)}).
    """
    mesh = current_mesh()
    if mesh is None or AxisType.Explicit not in mesh.axis_types:
        return
    operand, update = _eager_primal(operand), _eager_primal(update)
    if isinstance(operand, Tracer) or isinstance(update, Tracer):
        return
    kinds = (_eager_type(operand), _eager_type(update))
    if kinds[0][1:] != kinds[1][1:]:
        raise update_sharding_error(*(_eager_type_text(v, k) for v, k in zip((operand, update),
                                                                          kinds)))


def _eager_primal(v: Any) -> Any:
    """``v``'s primal value when ``v`` is an eager ``jvp``'s tracer (its primal concrete, at
    any depth of nested ``jvp``); else ``v``."""
    from plax.transforms.jvp import JVPTracer
    while type(v) is JVPTracer:
        v = v.primal
    return v


def _eager_type(v: Any) -> tuple:
    """How JAX 0.10 types ``v`` in an eager operation under a set Explicit mesh: ``(its
    NamedSharding, its mesh, the mesh axes of each dimension)`` for a value placed on a
    mesh, ``(None, None, ())`` for anything else (typed with no mesh)."""
    if isinstance(v, Array) and type(v) is not Array:  # placed on a mesh
        sharding = v.sharding
        if isinstance(sharding, NamedSharding):
            return sharding, sharding.mesh, tuple(spec_dims(sharding.spec, v.ndim))
    return None, None, ()


def _eager_type_text(v: Any, kind: tuple) -> str:
    """``v``'s type as JAX's message writes it: ``float32[2@x,2]({Explicit: ('x',)})``,
    ``float32[1,2]({})`` for one typed with no mesh."""
    sharding, mesh, _ = kind
    aval = abstractify(v)
    if sharding is None:
        return f"{_type_text(aval)}({mesh_axes_str(None)})"
    return f"{aval.dtype.name}[{sharded_dims_str(aval.shape, sharding)}]({mesh_axes_str(mesh)})"


#: ref reads: typed as the ref's value (a ref made off any mesh: committed to its device)
_READS = frozenset({"get", "freeze"})

