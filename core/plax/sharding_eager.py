"""Eager work while a mesh is set (``plax.set_mesh``), as JAX 0.10 places it.

In JAX every eager operation is a small ``jit`` call, so under a set mesh it follows
``jit``'s rules:

* its result lies on the mesh: an operation on values held by no mesh (host values,
  uncommitted arrays, arrays replicated on the mesh) gives ``NamedSharding(mesh,
  P(None, ...))``, one ``None`` per dimension, and ``jnp.asarray``/``jnp.array`` of a host
  value gives ``NamedSharding(mesh, P())`` (:func:`placed_host_value`);
* an argument committed to one device that is not the mesh's set of devices is refused with
  JAX's ``ValueError`` ("Received incompatible devices for jitted computation ... jit's
  context mesh ..."), in an eager operation and in a ``jit`` call alike
  (:func:`check_committed_devices`).

Values placed so keep unsharded types (see :func:`_plain_aval`). Under a mesh of Auto axes
every such value is placed ``P()``, as JAX places it there. A replicated value is computed
once: CPU devices share the host's memory, so one buffer serves every device of a CPU mesh,
as it serves a mesh of one device of any platform (several GPUs get a copy each). Nothing
here runs when no mesh is set: the eager and ``jit`` fast paths read one flag
(:data:`plax.sharding.mesh_maybe_set`).
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Sequence

from plax.array import _BUF, Array, _Piece, _ShardedArray, _sharded, host_or_uncommitted
from plax.core.trace import state as trace_state
from plax.sharding import (AxisType, NamedSharding, PartitionSpec, _full_index,
                           _mesh_of_abstract, get_mesh, in_internal_eager_work,
                           internal_eager_work, no_mesh_in_this_thread)
from plax.state.types import Ref, is_ref_aval

_REPLICATED: dict = {}  # (id(mesh), rank) -> NamedSharding(mesh, P(None, ...))


def current_mesh():
    """The current mesh (``set_mesh``/``use_mesh``) with its devices, that eager work and
    ``jit`` calls are placed on and checked against; None when none is set or the running
    thread does plax's own eager work (:func:`plax.sharding.internal_eager_work`).

    Example:
      >>> current_mesh() is None  # no mesh set
      True
    """
    if in_internal_eager_work():
        return None
    mesh = get_mesh()
    return None if mesh is None else _mesh_of_abstract(mesh)


def _places(mesh) -> bool:
    """Whether eager results are placed on ``mesh`` (one of Explicit or Auto axes; inside
    ``shard_map`` a mesh of Manual axes places nothing)."""
    return mesh is not None and not mesh.empty and AxisType.Manual not in mesh.axis_types


def _rank_spec(mesh) -> bool:
    """Whether results are placed ``P(None, ...)`` (a mesh with an Explicit axis: the spec
    of an unsharded type) rather than ``P()`` (a mesh of Auto axes, as JAX places them)."""
    return AxisType.Explicit in mesh.axis_types


def replicated(mesh, rank: int | None) -> NamedSharding:
    """``NamedSharding(mesh, P(None, ...))`` with ``rank`` entries (``P()`` for None).

    Example:
      >>> replicated(plax.make_mesh((1,), ("x",)), 2).spec
      P(None, None)
    """
    key = (id(mesh), rank)  # (the sharding kept here holds the mesh: its id stays its own)
    found = _REPLICATED.get(key)
    if found is None:
        spec = PartitionSpec() if rank is None else PartitionSpec(*(None,) * rank)
        found = _REPLICATED[key] = NamedSharding(mesh, spec)
    return found


def incompatible_devices(what: str, aval, device_ids: Sequence[int], platform: str,
                         mesh) -> ValueError:
    """JAX's error for an argument (``what``: ``"argument x of f"``) on the devices
    ``device_ids`` (of ``platform``) given to a computation under the context mesh ``mesh``.

    Returns:
      The ValueError, to raise.

    Example:
      >>> err = incompatible_devices("argument v of f", plax.typeof(jnp.ones(2)), [3], "cpu",
      ...                            plax.make_mesh((1,), ("x",)))
      >>> str(err)[:66]
      'Received incompatible devices for jitted computation. Got argument'
    """
    mesh_ids = [d.id for d in mesh.devices.flat]
    mesh_platform = mesh.devices.flat[0].platform.upper()
    return ValueError(
        f"Received incompatible devices for jitted computation. Got {what} with shape "
        f"{_type_text(aval)} and with device ids {list(device_ids)} on platform "
        f"{platform.upper()} and jit's context mesh with device ids {mesh_ids} on platform "
        f"{mesh_platform}")


def _type_text(aval) -> str:
    """A value's type as JAX's device errors write it: ``float32[3]``, ``Ref{float32[]}``."""
    dims = ",".join(str(n) for n in aval.shape)
    shape = f"{aval.dtype.name}[{dims}]"
    return f"Ref{{{shape}}}" if is_ref_aval(aval) else shape  # (a ref's type, as JAX's)


def incompatible_arguments(first: tuple, second: tuple) -> ValueError:
    """JAX's error for two operands of one computation committed to two devices; ``first``
    and ``second``: ``(what, aval, device)``, ``what`` naming the operand as JAX does
    (``"argument x of f"``, ``"argument args[0] of swap"``; ``aval`` None for one it names
    by no type: ``"ARG_SHARDING"``, a ref a ``jit`` closes over).

    Returns:
      The ValueError, to raise.

    Example:
      >>> d = plax.devices()[0]
      >>> aval = plax.typeof(jnp.ones(2))
      >>> err = incompatible_arguments(("argument x of f", aval, d), ("argument y of f", aval, d))
      >>> str(err)[:73]
      'Received incompatible devices for jitted computation. Got argument x of f'
    """
    parts = [f"{what}{'' if aval is None else f' with shape {_type_text(aval)} and'} with "
             f"device ids {[device.id]} on platform {device.platform.upper()}"
             for what, aval, device in (first, second)]
    return ValueError("Received incompatible devices for jitted computation. Got "
                      + " and ".join(parts))


def one_device_of(x: Any) -> Any:
    """The one device ``x`` is committed to: a committed one-device Array's, or a ref's
    whose value lies on one device (JAX 0.10 commits a ``new_ref`` made off any mesh to its
    value's device, committed or not); else None (host values, uncommitted arrays, values
    over a mesh).

    Example:
      >>> one_device_of(plax.new_ref(jnp.ones(2))), one_device_of(jnp.ones(2))
      (CpuDevice(id=0), None)
    """
    if type(x) is Ref:
        x = x._value
        return x._device if type(x) is Array else None
    if isinstance(x, Array) and x._committed and \
            (type(x) is Array or len(getattr(x, "_pieces", ())) == 1):
        return x._device
    return None


def on_one_device(x: Any) -> bool:
    """Whether ``x`` is an Array committed to one device or a ref of a one-device value
    (:func:`one_device_of`, not a value placed on a mesh): under a mesh, what JAX 0.10 keeps
    on that device, typing it with no mesh.

    Example:
      >>> on_one_device(plax.device_put(1.0, plax.devices()[0])), on_one_device(1.0)
      (True, False)
    """
    if type(x) is Ref:
        return type(x._value) is Array
    return type(x) is Array and x._committed


def check_committed_devices(leaves: Sequence, mesh, name_of: Callable[[int], str]) -> bool:
    """JAX's ValueError for the first of ``leaves`` committed to one device
    (:func:`one_device_of`: refs too) when the mesh's devices are not that one device
    (``name_of(i)`` names leaf ``i``: ``"argument a of f"``). Uncommitted arrays, host
    values and arrays on several devices pass.

    Returns:
      Whether the results of a computation of ``leaves`` under ``mesh`` stay on the
      mesh's one device rather than being placed on the mesh: JAX 0.10 commits them to
      the device of an operand committed there (an Array or a ref, not a value placed on a
      mesh) when the mesh has no Explicit axis (an Explicit one types them on the mesh).

    Example:
      >>> auto = plax.make_mesh((1,), ("x",), axis_types=(plax.sharding.AxisType.Auto,))
      >>> check_committed_devices([plax.device_put(1.0, plax.devices()[0])], auto, str)
      True
      >>> check_committed_devices([plax.new_ref(jnp.ones(2))], plax.make_mesh((1,), ("x",)), str)
      False
      >>> check_committed_devices([1.0], auto, str)
      False
    """
    devices = mesh.devices
    only = devices.flat[0] if devices.size == 1 else None
    kept = False
    for i, x in enumerate(leaves):
        if host_or_uncommitted(x):
            continue
        device = one_device_of(x)
        if device is not None:
            if device is not only:
                raise incompatible_devices(name_of(i), x.aval, [device.id], device.platform,
                                           mesh)
            kept = kept or on_one_device(x)
    return kept and AxisType.Explicit not in mesh.axis_types


#: the ``jax.numpy`` function JAX's message names for a primitive of another name
_NUMPY_NAMES = {"mul": "multiply", "sub": "subtract", "div": "divide", "neg": "negative",
                "max": "maximum", "min": "minimum", "pow": "power", "rem": "remainder",
                "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
                "gt": "greater", "ge": "greater_equal", "abs": "absolute"}


def eager_operand_name(prim, i: int) -> str:
    """How JAX's message names operand ``i`` of an eager operation (JAX runs it as the jitted
    ``jax.numpy`` function, whose parameters are ``x``, ``y``).

    Example:
      >>> eager_operand_name(plax.lax.add_p, 1)
      'argument y of add'
    """
    arg = ("x", "y")[i] if i < 2 else f"args[{i}]"
    return f"argument {arg} of {_NUMPY_NAMES.get(prim.name, prim.name)}"


def _off_mesh_value(x, mesh) -> Any:
    """``x`` as a one-device value when it is held by no mesh or replicated on ``mesh`` (a
    replicated array's whole value on its first device), else None. A value split over
    Explicit axes of size 1 (``P('x')`` on a one-device mesh) is not taken for a replicated
    one: its type names those axes, so its results keep its spec; over Auto axes its type
    names none, and it is (as JAX types it)."""
    t = type(x)
    if t is Array:
        return x
    if t is _ShardedArray:
        s = x._sharding
        if s is replicated(mesh, x.ndim) or s is replicated(mesh, None) or (
                isinstance(s, NamedSharding) and s.mesh == mesh and s.is_fully_replicated and
                not _splits_over_explicit_axis(s.spec, mesh) and
                not s.spec.unreduced and not s.spec.reduced):
            return Array._new(x._buf, _plain_aval(x.aval), x._device, False)
        return None
    if isinstance(x, Array) or type(x) is Ref:  # a pending array, a ref: computed as it is
        return None
    return x  # a host value


def _splits_over_explicit_axis(spec: PartitionSpec, mesh) -> bool:
    """Whether ``spec`` splits a dimension over an Explicit axis of ``mesh``."""
    explicit = mesh.explicit_axes
    return any(a in explicit for e in spec.partitions if e is not None
               for a in (e if isinstance(e, tuple) else (e,)))


def _plain_aval(aval):
    """``aval`` without a sharding. A value placed here keeps an unsharded type (its
    ``.sharding`` says where it lies): plax runs a ``jax.numpy`` function as several eager
    operations, whose intermediate values JAX's single ``jit`` would type unsharded, so
    they go with split operands as constants do (``jnp.where(x > 0, x, 0.0)``)."""
    from plax.core.shaped_array import ShapedArray
    return ShapedArray(aval.shape, aval.dtype, aval.weak_type)


def apply_on_mesh(prim, args: Sequence, params: dict, compute: Callable) -> Any:
    """``compute(prim, args, params)`` (eager dispatch's general path) under the current
    mesh: JAX's device check, then, when no operand is split (all are host values,
    uncommitted or replicated on the mesh), computed once and placed replicated on the
    mesh (see the module).

    Returns:
      The result(s) of ``prim``.

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     (jnp.ones(2) + 1).sharding.spec
      P(None,)
    """
    mesh = current_mesh()
    if mesh is None:
        return compute(prim, args, params)
    kept = check_committed_devices(args, mesh, lambda i: eager_operand_name(prim, i))
    if not _places(mesh) or kept:
        return compute(prim, args, params)
    from plax.sharding_device_typed import stays_on_device
    if stays_on_device(prim, args, mesh):  # an Explicit axis: typed with no mesh (see there)
        if _ShardedArray not in map(type, args):
            return compute(prim, args, params)
        return _computed_on_device(prim, args, params, compute, mesh)
    plain = []
    for a in args:
        v = _off_mesh_value(a, mesh)
        if v is None:  # a split operand: computed where it lies (by plax's own eager work)
            with internal_eager_work():
                return compute(prim, args, params)
        plain.append(v)
    out = compute(prim, plain, params)
    if prim.name in _BODY_RULES and _rank_spec(mesh):  # typed by its bodies (see there)
        from plax.sharding_device_typed import placed_body_results
        return placed_body_results(prim, out, args, params, mesh)
    rank_spec = _rank_spec(mesh) and not _keeps_short_type(prim, args)
    if prim.multiple_results:
        return [place_replicated(o, mesh, rank_spec) for o in out]
    return place_replicated(out, mesh, rank_spec)


def _computed_on_device(prim, args: Sequence, params: dict, compute: Callable, mesh) -> Any:
    """``compute(prim, args, params)`` for an operation whose result stays on the device of
    its first committed operand (:func:`plax.sharding_device_typed.stays_on_device`) while
    an operand that does not type it lies on the mesh (``dynamic_slice(c, i)``, ``i`` placed
    on the mesh): computed from that operand's value on the device, committed there."""
    device = next(d for d in map(one_device_of, args) if d is not None)
    plain = [a if v is None else v for a, v in zip(args, (_off_mesh_value(a, mesh)
                                                        for a in args))]
    with internal_eager_work():  # (the mesh is that device's: nothing to place)
        out = compute(prim, plain, params)
    if prim.multiple_results:
        return [committed_to(o, device, mesh) for o in out]
    return committed_to(out, device, mesh)


#: primitives whose JAX sharding rule keeps a short spec (``P()``, the spec JAX gives a host
#: value) when every operand has one, besides one-operand elementwise and cumulative ones
#: (which forward their operand's type) and reductions (which drop the reduced entries of an
#: empty spec): the rest write one entry per dimension (``P(None, ...)``)
_SHORT_SPEC_RULES = frozenset({"reshape", "squeeze", "transpose", "slice", "rev", "sort",
                               "dot_general", "argmax", "argmin", "pad", "dynamic_slice",
                               "dynamic_update_slice", "top_k", "reduce_window_sum",
                               "reduce_window_max", "reduce_window_min"})
#: of those, the ones of several operands (the rest take one; ``sort`` takes several, each
#: result typed as its operand; ``dynamic_slice``'s other operands are its start indices)
_SEVERAL_OPERANDS = frozenset({"dot_general", "pad", "sort", "dynamic_slice",
                               "dynamic_update_slice"})
#: of those, the ones whose ``jax.numpy`` function (``flip``, ``argmax``, ``argmin``,
#: ``pad``) converts a host operand to an Array first when called eagerly, which places it
#: on the mesh (``P(None, ...)`` then): inside a ``jit`` the conversion places nothing.
#: (``transpose`` and ``squeeze`` are not among them: ``lax.transpose``, ``swapaxes``,
#: ``rollaxis`` and ``lax.squeeze`` keep ``P()``; ``jnp.transpose``, ``moveaxis`` and
#: ``jnp.squeeze`` convert first, by :func:`host_operands_placed`.)
_CONVERTED_FIRST_EAGERLY = frozenset({"rev", "argmax", "argmin", "pad"})
#: of those, the ones whose rule types the result from its leading operands only (how many):
#: ``dynamic_slice``'s and ``dynamic_update_slice``'s start indices and ``pad``'s padding
#: value do not type it (``dynamic_slice(c, i)`` stays on ``c``'s device, whatever ``i``'s)
_TYPING_OPERANDS = {"dynamic_slice": 1, "dynamic_update_slice": 2, "pad": 1}


def typing_operands(prim, operands: Sequence) -> Sequence:
    """The operands of ``prim`` whose types its sharding rule forwards to its result (all of
    them but for :data:`_TYPING_OPERANDS`).

    Example:
      >>> typing_operands(plax.lax.pad_p, ["x", "padding value"])
      ['x']
    """
    n = _TYPING_OPERANDS.get(prim.name)
    return operands if n is None else operands[:n]


def _keeps_short_spec(prim, n_operands: int, eager: bool) -> bool:
    """Whether ``prim`` applied to ``n_operands`` operands all typed ``P()`` gives ``P()``
    (see :data:`_SHORT_SPEC_RULES`), eagerly or inside a ``jit``."""
    from plax.lowering.fusion import CUMULATIVE, ELEMENTWISE, REDUCTION, fusion_kind
    kind = fusion_kind(prim, cumulative=True)
    if kind in (ELEMENTWISE, CUMULATIVE):
        return n_operands == 1
    name = prim.name
    if kind != REDUCTION and name not in _SHORT_SPEC_RULES:
        return False
    if eager and name in _CONVERTED_FIRST_EAGERLY:
        return False
    return n_operands == 1 or name in _SEVERAL_OPERANDS


def _keeps_short_type(prim, args: Sequence) -> bool:
    """Whether JAX's result is placed ``P()``: JAX types a host value or an uncommitted array
    ``P()`` (a value placed on the mesh ``P(None, ...)``), and the rule of ``prim`` keeps
    that short spec (:func:`_keeps_short_spec`: ``sin``, ``cumsum``, ``sum``, ``dot``)."""
    for a in typing_operands(prim, args):  # (indices typed on the mesh type nothing)
        if isinstance(a, Array) and (type(a) is not Array or a._committed):
            return False
    return _keeps_short_spec(prim, len(args), eager=True)


def short_outputs(jaxpr, short_inputs: Sequence[bool]) -> list[bool]:
    """Which outputs of ``jaxpr`` JAX types ``P()`` when the inputs marked in
    ``short_inputs`` are host values (typed ``P()`` by JAX's ``jit``): those computed from
    them (or from literals, host scalars too) through rules that keep a short spec
    (:func:`_keeps_short_spec`), nested ``jit`` calls followed into their bodies.

    Example:
      >>> jaxpr = plax.make_jaxpr(lambda v: (jnp.sin(v), v + 1))(np.ones(2)).jaxpr
      >>> short_outputs(jaxpr, [True])
      [True, False]
    """
    return forwarded_outputs(jaxpr, short_inputs)


def forwarded_outputs(jaxpr, marks: Sequence[bool], reads: frozenset = frozenset(),
                      consts: bool | Sequence[bool] = False) -> list[bool]:
    """Which outputs of ``jaxpr`` are computed from the inputs marked in ``marks`` through
    rules that forward their operands' type (:func:`_keeps_short_spec`, or a primitive named
    in ``reads``), the bodies of nested ``jit`` calls, ``cond``, ``while`` and ``scan``
    followed (:func:`_body_outputs`). A literal operand counts as marked (so an equation of
    literals alone is marked too). ``consts``: the jaxpr's constants count as marked (a
    sequence: those it marks; nested bodies' constants count as marked then).
    (:func:`short_outputs`; :func:`plax.sharding_device_typed.device_typed_outputs`.)
    Worked out once per jaxpr and marks (a ``jit`` call under a mesh asks per call)."""
    if consts is not True and consts is not False:
        consts = tuple(consts)
    key = (tuple(marks), reads, consts)
    memo = _forwarded.get(jaxpr)
    if memo is None:
        memo = _forwarded[jaxpr] = {}
    out = memo.get(key)
    if out is None:
        out = memo[key] = _forwarded_walk(jaxpr, marks, reads, consts)
    return list(out)


# Jaxpr -> {(marks, reads, consts): forwarded_outputs' answer} (weakly keyed: walked once)
_forwarded: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def _forwarded_walk(jaxpr, marks: Sequence[bool], reads: frozenset,
                    consts: bool | tuple) -> tuple:
    """:func:`forwarded_outputs`, worked out."""
    from plax.core.jaxpr import Var
    marked = {v for v, m in zip(jaxpr.invars, marks) if m}
    if consts is True or consts is False:
        if consts:
            marked.update(jaxpr.constvars)
    else:
        marked.update(v for v, m in zip(jaxpr.constvars, consts) if m)
        consts = True
    for eqn in jaxpr.eqns:
        inner = _body_outputs(eqn, marked, reads, consts)
        if inner is not None:
            marked.update(v for v, s in zip(eqn.outvars, inner) if s)
            continue
        if not eqn.invars or not all(v in marked for v in
                                     typing_operands(eqn.primitive, eqn.invars)
                                     if isinstance(v, Var)):
            continue
        if eqn.primitive.name in reads or \
                _keeps_short_spec(eqn.primitive, len(eqn.invars), eager=False):
            marked.update(eqn.outvars)
    return tuple(isinstance(v, Var) and v in marked for v in jaxpr.outvars)


def _body_outputs(eqn, marked: set, reads: frozenset,
                  consts: bool | Sequence[bool]) -> list[bool] | None:
    """Which outputs of ``eqn`` -- a ``jit`` call, ``cond``, ``while`` or ``scan``, whose
    operands in ``marked`` are marked -- its bodies type as their marked inputs (see
    :func:`forwarded_outputs`): JAX types a call's and a branch's results as its body types
    them (a ``cond``'s as all branches agree), and a loop's carry as its body keeps it
    (worked out to a fixed point). None for any other equation."""
    from plax.core.jaxpr import Var
    from plax.lowering.calls import call_body
    body = call_body(eqn)
    rule = _BODY_RULES.get(eqn.primitive.name) if body is None else None
    if body is None and rule is None:
        return None
    marks = [not isinstance(v, Var) or v in marked for v in eqn.invars]
    walk = lambda jaxpr, m: forwarded_outputs(jaxpr, m, reads, consts)
    return walk(body.jaxpr, marks) if body is not None else rule(eqn.params, marks, walk)


def _cond_outputs(params: dict, marks: list, walk: Callable) -> list[bool]:
    """``cond``: what every branch keeps (the index operand types none of them)."""
    outs = [walk(b.jaxpr, marks[1:]) for b in params["branches"]]
    return [all(o) for o in zip(*outs)]


def _loop_carry(carry: list, body: Callable) -> list[bool]:
    """The carry marks a loop keeps: those its body (``body(carry)`` -> the body's carry
    marks) returns marked for marked inputs, to a fixed point."""
    while True:
        kept = [c and o for c, o in zip(carry, body(carry))]
        if kept == carry:
            return carry
        carry = kept


def _while_outputs(params: dict, marks: list, walk: Callable) -> list[bool]:
    """``while``: the carry its body keeps (the condition types nothing)."""
    start = params["cond_nconsts"]
    body_consts = marks[start:start + params["body_nconsts"]]
    jaxpr = params["body_jaxpr"].jaxpr
    return _loop_carry(marks[start + params["body_nconsts"]:],
                       lambda carry: walk(jaxpr, body_consts + carry))


def _scan_outputs(params: dict, marks: list, walk: Callable) -> list[bool]:
    """``scan``: the carry its body keeps, then its stacked outputs as the body types them."""
    n_consts, n_carry = params["num_consts"], params["num_carry"]
    consts, xs = marks[:n_consts], marks[n_consts + n_carry:]
    jaxpr = params["jaxpr"].jaxpr
    carry = _loop_carry(marks[n_consts:n_consts + n_carry],
                        lambda c: walk(jaxpr, consts + c + xs)[:n_carry])
    return carry + walk(jaxpr, consts + carry + xs)[n_carry:]


#: primitives with bodies whose results :func:`_body_outputs` types from them
_BODY_RULES: dict = {"cond": _cond_outputs, "while": _while_outputs, "scan": _scan_outputs}


def host_operands_placed(operands: Sequence) -> list:
    """``operands`` with each host value converted to an Array placed on the set mesh as
    ``jnp.asarray`` places it (``P()``), as JAX's ``jax.numpy`` functions that convert their
    operands first (``tensordot``, ``einsum``) hand them to their rules: typed ``P(None,
    ...)`` then, so their results are too. Arrays, tracers, and everything while no mesh
    is set or a function is traced, are returned as they are.

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     host_operands_placed([np.ones(2)])[0].sharding.spec
      P()
    """
    mesh = current_mesh()
    if not _places(mesh) or trace_state.depth:
        return list(operands)
    from plax.array import HOST_VALUE_TYPES, from_host
    # (other objects: the caller's error)
    return [place_replicated(from_host(x), mesh, rank_spec=False)
            if isinstance(x, HOST_VALUE_TYPES) else x for x in operands]


def computed_as_one(fn: Callable, operands: Sequence) -> Any:
    """``fn(*operands)``, a ``jax.numpy`` function that plax computes as several eager
    operations where JAX runs one ``jit`` whose rules all keep a host value's ``P()``
    (``matmul`` of a vector through ``reshape``, ``dot_general`` and ``squeeze``; ``dot``
    with a scalar): when every operand is a host value or an uncommitted Array and a mesh
    that places results is set, computed unplaced and its result placed ``P()``, as JAX's;
    otherwise computed as it is. Call it only when :data:`plax.sharding.mesh_maybe_set`
    is true (the no-mesh path reads that flag only).

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     computed_as_one(jnp.matmul, (np.ones((2, 3)), np.ones(3))).sharding.spec
      P()
    """
    mesh = current_mesh()
    if not _places(mesh) or trace_state.depth or not all(map(host_or_uncommitted, operands)):
        return fn(*operands)
    with no_mesh_in_this_thread():   # (other threads' eager work is placed meanwhile)
        out = fn(*operands)
    return place_replicated(out, mesh, rank_spec=False)


def placed_host_results(outs: Sequence, operands: Sequence, name: str,
                        keeps_type: Sequence[bool] = ()) -> list:
    """``outs``, results of the ``jax.numpy`` function ``name`` that plax computes on the
    host from its concrete ``operands`` (``jnp.unique``, ``jnp.nonzero`` without a traced
    size) where JAX computes them with its primitives, placed as JAX's eager results are
    under the current mesh: JAX's device check, then kept on the device of a committed
    operand where a mesh of no Explicit axis keeps them (:func:`check_committed_devices`;
    not those of :data:`_JOINS_MESH_VALUES`), else placed on the mesh ``P(None, ...)``
    (``P()`` over Auto axes; the rules that give them, ``sort``'s compaction by a gather,
    type them there). As they are when no mesh places results or a function is traced.
    Call it only when :data:`plax.sharding.mesh_maybe_set` is true.

    ``keeps_type[i]`` true: output ``i`` is, in JAX, a gather of whole slices of the first
    operand along an axis it is not split on (``unique(x, axis=k)``'s values), so where that
    operand's type is sharded over the mesh it keeps the sharding (its spec over every axis).

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     placed_host_results([jnp.ones(2)], [np.ones(2)], "unique")[0].sharding.spec
      P(None,)
    """
    mesh = current_mesh()
    if not _places(mesh) or trace_state.depth:
        return list(outs)
    kept = check_committed_devices(operands, mesh, lambda i: f"argument args[{i}] of {name}")
    if kept and name not in _JOINS_MESH_VALUES:
        device = next(d for d in map(one_device_of, operands) if d is not None)
        import plax  # (moved there: the host's results lie on the default device)
        return [plax.device_put(o, device) for o in outs]
    typed = None
    if any(keeps_type):
        from plax.sharding_types import explicit_type
        typed = explicit_type(operands[0])
    placed = []
    for i, o in enumerate(outs):
        if typed is not None and i < len(keeps_type) and keeps_type[i]:
            import plax
            spec = tuple(typed.spec) + (None,) * (o.ndim - len(typed.spec))
            placed.append(plax.device_put(o, NamedSharding(mesh, PartitionSpec(*spec))))
        else:
            placed.append(place_replicated(o, mesh, _rank_spec(mesh)))
    return placed


#: ``jax.numpy`` functions computed on the host (:func:`placed_host_results`) whose JAX
#: computation joins its operand with an array it makes eagerly, placed on the set mesh
#: (``nonzero``: ``bincount``'s ``zeros``), so that even a mesh of no Explicit axis places
#: their results there rather than keeping them on a committed operand's device
_JOINS_MESH_VALUES = frozenset({"nonzero"})


def update_typed_as_scatter(x: Any, y: Any) -> bool:
    """Whether the eager result of an ``.at[]`` update of static bounds of ``x`` by ``y``,
    which plax computes by a ``dynamic_update_slice`` shortcut, is to be placed as JAX 0.10
    types it (:func:`placed_as_scatter`): JAX computes every such update by a scatter, whose
    rule types the result on the set mesh, so under a mesh with an Explicit axis
    ``c.at[0].set(c[1])`` (``c`` committed to one device) goes to the mesh where a
    ``dynamic_update_slice`` of operands typed with no mesh keeps ``c``'s device. False with
    no such mesh, and when a function is traced: there plax keeps its shortcut as it is (a
    scatter would type the result as JAX's, but costs every traced static update under such
    a mesh 4x, ``jit(a.at[0].set(a[1]))`` on 512x512: 32 -> 125 us, mesh values included, to
    place one rare case; a known difference, tests/test_explicit_sharding_device_typed.py).
    Call it only when :data:`plax.sharding.mesh_maybe_set` is true.

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     update_typed_as_scatter(jnp.ones(2), 1.0)
      True
    """
    mesh = current_mesh()
    if not _places(mesh) or AxisType.Explicit not in mesh.axis_types:
        return False
    from plax.core.trace import Tracer
    return not (isinstance(x, Tracer) or isinstance(y, Tracer))


def placed_as_scatter(out: Any) -> Any:
    """``out``, the eager result of an ``.at[]`` update computed by plax's shortcut, placed
    on the current mesh as JAX's scatter places it (``P(None, ...)``) when the shortcut kept
    it on one device (see :func:`update_typed_as_scatter`); else as it is.

    Example:
      >>> mesh = plax.make_mesh((1,), ("x",))
      >>> c = plax.device_put(jnp.ones(2), plax.devices()[0])
      >>> with plax.set_mesh(mesh):
      ...     placed_as_scatter(c).sharding.spec
      P(None,)
    """
    if type(out) is Array and out._committed:
        mesh = current_mesh()
        if mesh is not None:
            return place_replicated(out, mesh)
    return out


def placed_copy(x: Any) -> Any:
    """What ``jnp.array`` of the Array ``x`` (a copy) gives under a set mesh, as JAX's copy
    places it (an eager one-operand operation): an uncommitted array ``P()``, an array
    replicated on the mesh ``P(None, ...)`` (``P()`` over Auto axes); a split array (and one
    committed to a device) is returned as it is.

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     jnp.array(jnp.asarray(np.ones(2))).sharding.spec
      P(None,)
    """
    mesh = current_mesh()
    if not _places(mesh) or trace_state.depth or (type(x) is Array and x._committed):
        return x
    if _names_axes(x):  # (P('x'): split, or over axes of size 1; JAX's copy keeps its spec)
        s = x._sharding
        if _rank_spec(mesh) and s.mesh == mesh and len(s.spec.partitions) < x.ndim:
            # its type's spec: one entry per dimension (P('x') of a matrix: P('x', None))
            parts = s.spec.partitions + (None,) * (x.ndim - len(s.spec.partitions))
            return _respecified(x, NamedSharding(mesh, PartitionSpec(*parts)))
        return x
    value = _off_mesh_value(x, mesh)
    if value is None:
        return x
    return place_replicated(value, mesh, _rank_spec(mesh) and type(x) is not Array)


def _names_axes(x: Any) -> bool:
    """Whether ``x`` lies on a mesh with a spec naming an axis (split, or laid over an axis
    of size 1): JAX keeps such a spec where it keeps a value's sharding."""
    s = getattr(x, "_sharding", None)
    return type(x) is _ShardedArray and isinstance(s, NamedSharding) and \
        any(e is not None for e in s.spec.partitions)


def placed_like(x: Any, sharding: Any) -> Any:
    """``x``, made eagerly, placed as JAX's eager ``full_like`` places a result like an
    array of ``sharding``: when that is a replicated NamedSharding on the set mesh, as the
    operand's spec is written (``P()`` or one ``None`` per dimension). None for any other.

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     jnp.zeros_like(jnp.asarray(np.ones(2))).sharding.spec
      P()
    """
    mesh = current_mesh()
    if not _places(mesh) or not isinstance(sharding, NamedSharding) or \
            sharding.mesh != mesh or not sharding.is_fully_replicated or \
            sharding.spec.unreduced or sharding.spec.reduced or \
            any(e is not None for e in sharding.spec.partitions):  # (P('x'): placed so)
        return None
    value = _off_mesh_value(x, mesh)
    if value is None:
        return None
    # as JAX's: ``a``'s spec as written, whatever ``x``'s rank (``shape=`` may change it)
    return place_replicated(value, mesh, len(sharding.spec.partitions) or None)


def place_replicated(x: Any, mesh, rank_spec: bool | int | None = True) -> Any:
    """``x`` (a one-device Array) replicated on ``mesh``: ``P(None, ...)`` (``P()`` when not
    ``rank_spec``; an int: that many ``None``), one shared buffer on a CPU mesh. Other values
    are returned as they are.

    Example:
      >>> mesh = plax.make_mesh((1,), ("x",))
      >>> place_replicated(jnp.ones(3), mesh).sharding.spec
      P(None,)
    """
    if type(x) is not Array:
        return x
    if rank_spec is True:
        rank_spec = x.ndim
    sharding = replicated(mesh, rank_spec or None)  # (False, 0 and None: ``P()``)
    layout = _one_buffer_layout(sharding, x.aval.shape, x._device)
    if layout is not None:
        return _shared(x._buf, x.aval, sharding, layout)
    import plax
    placed = plax.device_put(x, sharding)
    placed.aval = _plain_aval(x.aval)  # see _plain_aval
    return placed


def placed_argument(x: Any, mesh) -> Any:
    """``x`` (a host value, or an uncommitted one-device Array) as ``plax.device_put(x,
    NamedSharding(mesh, P()))`` places it -- typed with that sharding when ``mesh`` has an
    Explicit axis -- and weakly typed where ``x`` is (a Python scalar): how a ``jit`` call
    under a set mesh of Explicit axes takes its host and uncommitted arguments. On a mesh of
    CPU devices one buffer serves every device (:func:`replica_on_host`): an Array's own,
    or one copy of a host value (its owner may write to it after the call).

    Example:
      >>> mesh = plax.make_mesh((1,), ("x",))
      >>> placed_argument(np.ones(2), mesh).sharding.spec
      P()
    """
    sharding = replicated(mesh, None)
    if type(x) is not Array and one_buffer_mesh(mesh):
        from plax.array import from_host
        x = from_host(x, device=sharding._device_assignment[0])  # (the one copy)
    if type(x) is Array:
        placed = replica_on_host(x, sharding)
        if placed is not None:
            return placed
        weak = x.aval.weak_type
    else:
        from plax.transforms.staging import abstractify
        weak = abstractify(x).weak_type
    import plax
    from plax.transforms.jit_shardings import with_weak_type
    return with_weak_type(plax.device_put(x, sharding), weak)


def replica_on_host(x: Any, sharding) -> Any:
    """``x`` (a plain Array) placed as ``plax.device_put(x, sharding)`` places it, typed as
    that places it (with ``x``'s weak type), when ``sharding`` gives every device the whole
    value and those devices and ``x``'s are CPU devices, or the sharding's one device is
    ``x``'s: every device then holds ``x``'s one buffer (CPU devices share the host's memory,
    and an Array's buffer is never written), where ``device_put`` copies it to each. None
    otherwise.

    Example:
      >>> s = plax.NamedSharding(plax.make_mesh((1,), ("x",)), plax.P())
      >>> replica_on_host(jnp.ones(2), s).sharding.spec
      P()
    """
    if type(x) is not Array:
        return None
    aval = x.aval
    layout = _one_buffer_layout(sharding, aval.shape, x._device)
    if layout is None:
        return None
    from plax.core.shaped_array import ShapedArray
    # (typed as device_put types a placed value: its shape, dtype and weak type only)
    return _shared(x._buf, ShapedArray(aval.shape, aval.dtype, aval.weak_type), sharding,
                   layout, plain=False)


_ONE_BUFFER_MESHES: dict = {}  # id(mesh) -> (mesh, whether one_buffer_mesh(mesh))


def one_buffer_mesh(mesh) -> bool:
    """Whether one buffer can serve every device of ``mesh`` as a replicated value's piece:
    all are CPU devices (they share the host's memory), or there is one device, of any
    platform (asked once per mesh).

    Example:
      >>> one_buffer_mesh(plax.make_mesh((1,), ("x",)))
      True
    """
    found = _ONE_BUFFER_MESHES.get(id(mesh))
    if found is None or found[0] is not mesh:
        if len(_ONE_BUFFER_MESHES) >= 64:
            _ONE_BUFFER_MESHES.clear()
        devices = mesh.devices
        found = _ONE_BUFFER_MESHES[id(mesh)] = (
            mesh, devices.size == 1 or all(d.platform == "cpu" for d in devices.flat))
    return found[1]


_LAYOUTS: dict = {}  # (id(sharding), shape) -> (sharding, [(device, index, backend)] | None)


def _one_buffer_layout(sharding, shape: tuple, device) -> list | None:
    """:func:`_layout` when the one buffer of a value on ``device`` can serve each of its
    pieces: ``device`` and the sharding's devices are CPU devices, or the sharding's one
    device is ``device``; else None (a copy per device is needed)."""
    layout = _layout(sharding, shape)
    if layout is not None:
        first = layout[0][0]
        if first is device or (first.platform == "cpu" and device.platform == "cpu"):
            return layout
    return None


def _layout(sharding, shape: tuple) -> list | None:
    """The pieces ``(device, index, backend)`` of a value of ``shape`` placed as ``sharding``
    says when that is a NamedSharding giving each of its devices the whole value over a mesh
    of CPU devices or of one device (:func:`one_buffer_mesh`); else None. Worked out once per
    sharding and shape (the sharding is kept with it, so a later one at the same address is
    not taken for it)."""
    key = (id(sharding), shape)
    found = _LAYOUTS.get(key)
    if found is not None and found[0] is sharding:
        return found[1]
    layout = None
    if type(sharding) is NamedSharding and one_buffer_mesh(sharding.mesh):
        spec = sharding.spec
        if not spec.unreduced and not spec.reduced and sharding.is_fully_replicated:
            if all(e is None for e in spec):
                # every device holds the whole value (the spec may be longer than the rank:
                # JAX's full_like(a, shape=...) keeps a's spec as written)
                whole = _full_index(len(shape))
                indices = dict.fromkeys(sharding._device_assignment, whole)
            else:  # axes of size 1: their index, as device_put writes it
                indices = sharding.devices_indices_map(shape)
            layout = [(d, indices[d], d.backend) for d in sharding._device_assignment]
    if len(_LAYOUTS) >= 512:  # bounded: eager shapes vary
        _LAYOUTS.clear()
    _LAYOUTS[key] = (sharding, layout)
    return layout


def _shared(buf, aval, sharding: NamedSharding, layout: list, plain: bool = True) -> Array:
    """An Array replicated as ``sharding`` says whose every device holds the one buffer
    ``buf`` (CPU devices share the host's memory), with the pieces ``layout`` lists
    (:func:`_one_buffer_layout`). ``plain``: typed unsharded (see :func:`_plain_aval`), else as a
    placed value (``_sharded``: with the sharding over an Explicit mesh)."""
    out = _sharded(_plain_aval(aval) if plain else aval, sharding,  # see _plain_aval
                   [_Piece(d, i, buf, b) for d, i, b in layout], True, typed=not plain)
    _BUF.__set__(out, buf)  # the whole value already: nothing to gather
    return out


def placed_host_value(x: Any) -> Any:
    """What ``jnp.asarray``/``jnp.array`` of a host value gives under a set mesh: the
    one-device Array ``x`` placed with ``NamedSharding(mesh, P())``
    (as it is otherwise: no mesh set, or a constant of a function being traced).

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     jnp.asarray(np.ones(2)).sharding.spec
      P()
    """
    mesh = current_mesh()
    if not _places(mesh) or trace_state.depth:
        return x
    return place_replicated(x, mesh, rank_spec=False)


def placed_ref_value(x: Any) -> Any:
    """The value ``new_ref(x)`` holds when made eagerly under a set mesh: JAX 0.10 copies
    ``x`` there, so a host value or an uncommitted one-device Array is placed
    ``NamedSharding(mesh, P())``, one committed to another device than the mesh's one is
    its ``ValueError``, and a value on the mesh stays as it is.

    Example:
      >>> x = jnp.ones(2)  # (made off the mesh: uncommitted, on one device)
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     plax.new_ref(x).sharding.spec
      P()
    """
    mesh = current_mesh()
    if not _places(mesh) or trace_state.depth:
        return x
    check_committed_devices([x], mesh, lambda i: "argument args[0] of copy")
    if type(x) is Array and not x._committed:
        return place_replicated(x, mesh, rank_spec=False)
    return x


def ref_access(name: str, ref: Ref, operands: Sequence, compute: Callable) -> Any:
    """``compute(*operands)``: the eager ``get``, ``swap`` or ``addupdate`` (``name``) of the
    concrete ``ref`` with ``operands`` (the value written, then the indices), placed as JAX
    0.10 places it under the current mesh, where it runs as one primitive taking the ref as
    ``args[0]``:

    * a ref committed to one device (a ref made off any mesh: :func:`one_device_of`) under a
      mesh of other devices is JAX's ``ValueError`` (``argument args[0] of get``), as is an
      operand committed elsewhere;
    * under a mesh of the ref's one device, the access runs there unplaced: what it reads
      and the ref's new value are committed to that device (JAX keeps the ref there);
    * a ref over the mesh keeps its placement (its type): a value written is laid out as the
      one it replaces (:func:`laid_out_as`), and reads are placed as eager work is.

    With no mesh set (or in plax's own eager work) it is ``compute(*operands)``.

    Example:
      >>> r = plax.new_ref(jnp.ones(2))
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     r[...] = np.zeros(2, np.float32)
      >>> r.sharding
      SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)
    """
    mesh = current_mesh()
    if not _places(mesh):
        return compute(*operands)
    check_committed_devices([ref, *operands], mesh, lambda i: f"argument args[{i}] of {name}")
    old = ref._value
    device = one_device_of(ref)
    if device is None:  # over the mesh
        out = compute(*operands)
        if ref._value is not old:
            ref._value = laid_out_as(ref._value, old)
        return out
    plain = []
    for x in operands:
        v = _off_mesh_value(x, mesh)
        plain.append(x if v is None else v)
    with internal_eager_work():  # (the mesh is the ref's device: nothing to place)
        out = compute(*plain)
    ref._value = committed_to(ref._value, device, mesh)
    return committed_to(out, device, mesh)


def committed_to(x: Any, device, mesh) -> Any:
    """``x`` (an access's or a ``jit`` call's result: an Array, or a value replicated on
    ``mesh``, the mesh of ``device`` alone) as an Array committed to ``device``; anything
    else as it is.

    Example:
      >>> d = plax.devices()[0]
      >>> committed_to(jnp.ones(2), d, plax.make_mesh((1,), ("x",))).committed
      True
    """
    if isinstance(x, Array):
        v = _off_mesh_value(x, mesh)
        if type(v) is Array and v._device is device:
            return v if v._committed else Array._new(v._buf, v.aval, device, True)
    return x


def laid_out_as(value: Any, old: Any) -> Any:
    """``value``, written into a ref that held ``old`` (a value over a mesh), laid out as
    ``old`` was and typed as it: a ref keeps its placement across writes (one-device runs,
    values placed otherwise). Returned as it is when it already lies so.

    Example:
      >>> mesh = plax.make_mesh((1,), ("x",))
      >>> old = plax.device_put(jnp.ones(2), plax.NamedSharding(mesh, plax.P()))
      >>> laid_out_as(jnp.zeros(2), old).sharding.spec
      P()
    """
    if value is old:
        return value
    sharding = old.sharding
    if type(value) is _ShardedArray and value._sharding == sharding:
        # the same layout (P(None,) is P()): its buffers, under the ref's sharding and type
        out = _sharded(old.aval, sharding, list(value._pieces), True, typed=False)
        _BUF.__set__(out, _BUF.__get__(value, _ShardedArray))
        return out
    import plax
    placed = plax.device_put(value, sharding)
    placed.aval = old.aval
    return placed


def with_short_specs(outs: list, jaxpr, short_inputs: Sequence[bool]) -> list:
    """``outs`` (results of a top-level ``jit`` call of ``jaxpr`` partitioned over the set
    mesh) with each one JAX types ``P()`` (:func:`short_outputs`: computed from host
    arguments, marked in ``short_inputs``, by rules that keep their short spec) placed so:
    the same buffers, its sharding's spec ``P()`` rather than ``P(None, ...)``.

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     plax.jit(jnp.sin)(np.ones(2)).sharding.spec
      P()
    """
    if not any(short_inputs) or len(short_inputs) != len(jaxpr.invars) or \
            len(outs) != len(jaxpr.outvars):
        return outs
    return [_short_spec(o) if s else o for o, s in zip(outs, short_outputs(jaxpr, short_inputs))]


def _short_spec(x: Any) -> Any:
    """``x``, replicated over a mesh, as an Array of the same buffers placed ``P()``."""
    s = getattr(x, "_sharding", None)
    if type(x) is not _ShardedArray or not isinstance(s, NamedSharding) or \
            not s.is_fully_replicated or s.spec.unreduced or s.spec.reduced or \
            not s.spec.partitions:
        return x
    return _respecified(x, replicated(s.mesh, None))


def _respecified(x: Any, sharding: NamedSharding) -> Any:
    """``x`` (on a mesh) as an Array of the same buffers under ``sharding``, the same layout
    written by another spec (``P()`` for ``P(None, ...)``, ``P('x', None)`` for ``P('x')``)."""
    out = _sharded(x.aval, sharding, list(x._pieces), x._committed)
    _BUF.__set__(out, _BUF.__get__(x, _ShardedArray))
    return out


#: ``placed_results(mesh=...)`` not given: the current mesh is looked up (None: no mesh)
_CURRENT = object()


def placed_results(outs: list, jaxpr=None, short_inputs: Sequence[bool] = (),
                   kept: bool = False, mesh: Any = _CURRENT,
                   short_consts: Sequence[bool] = ()) -> list:
    """The results of a top-level ``jit`` call under a set mesh, each
    one-device result (a program with no argument on the mesh) placed replicated on it
    (not while a function is traced: a value made then is one of its constants):
    ``P()`` where JAX's rules keep the short spec of host arguments (``short_inputs``
    marks them among ``jaxpr``'s inputs; :func:`short_outputs`), else ``P(None, ...)``.
    ``kept``: an argument keeps them on its device (what :func:`check_committed_devices`
    returns); they are committed there instead. ``mesh``: the current mesh when the
    caller has worked it out (a ``jit`` call does, once; None: no mesh is set, nothing is
    placed); not given, it is looked up (:func:`current_mesh`). ``short_consts``: which of
    ``jaxpr``'s constants JAX types as host values (``jit(lambda: jnp.sin(host))()`` gives
    ``P()``; :func:`plax.sharding_device_typed.typed_with_no_mesh`).

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     plax.jit(lambda: jnp.ones(2))().sharding.spec
      P(None,)
    """
    if mesh is _CURRENT:
        mesh = current_mesh()
    if not _places(mesh) or trace_state.depth:
        return outs
    if kept:
        return [Array._new(o._buf, o.aval, o._device, True) if type(o) is Array else o
                for o in outs]
    rank_spec = _rank_spec(mesh)
    if rank_spec and (any(short_inputs) or any(short_consts)) and jaxpr is not None and \
            len(short_inputs) == len(jaxpr.invars) and len(outs) == len(jaxpr.outvars):
        # (a result typed by its program, placed already, keeps its buffers: _short_spec)
        short = forwarded_outputs(jaxpr, short_inputs, consts=short_consts or False)
        return [(place_replicated(o, mesh, False) if type(o) is Array else _short_spec(o))
                if s else place_replicated(o, mesh) for o, s in zip(outs, short)]
    return [place_replicated(o, mesh, rank_spec) for o in outs]
