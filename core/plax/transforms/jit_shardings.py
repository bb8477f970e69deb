"""``jit(in_shardings=, out_shardings=)``: what JAX 0.10.2 does with them at a call.

A top-level call (no enclosing trace) checks each argument against its ``in_shardings``
entry and places the outputs as ``out_shardings`` say; under a trace both are inert, as in
JAX (the traced types are the arguments' and the body's: ``make_jaxpr`` of a ``jit`` with
``out_shardings=P('Y', 'X')`` of an ``f32[8@X,8@Y]`` still types the result ``8@X,8@Y``).

- An argument that already has a sharding (a sharded array, or one committed to a device)
  must have exactly the one given: otherwise JAX's ``ValueError`` ("Sharding passed to jit
  does not match the sharding on the respective arg"). Nothing is moved: under explicit
  sharding an argument's sharding is its type, so a disagreement is a type error, not a
  transfer.
- An argument without one (a NumPy array, a Python scalar, an uncommitted Array) is placed
  as its entry says when no mesh is set; under a set mesh of Explicit axes JAX types such a
  value as replicated on the mesh whatever the entry says, and so does plax
  (:func:`placed_on_context_mesh`, applied to every top-level ``jit`` call).
- Each output is placed as its ``out_shardings`` entry says, through the same placement
  ``reshard`` uses (blocks move between the devices; nothing is gathered on one device), so
  ``jit(f, out_shardings=P('Y', 'X'))(x)`` is typed ``float32[8@Y,8@X]``. Donation is then
  decided against these placed outputs (:mod:`plax.transforms.donation`), as XLA aliases
  the buffers of the program whose result shardings ``out_shardings`` fixed.

Under a trace they are also recorded, as JAX records them: the ``jit`` equation carries
``in_shardings=``/``out_shardings=`` (one entry per operand and result, resolved to
NamedShardings, ``UnspecifiedValue`` where none was given; absent when none was given at
all), which ``make_jaxpr`` prints and the transforms of the call carry to the calls they
derive (:func:`jvp_params`, :func:`linearize_params`, :func:`transpose_params`,
:func:`batch_params`); and ``eval_shape``/``Lowered.out_info`` give the outputs the
``out_shardings`` entries as their ``ShapeDtypeStruct`` shardings (:func:`out_info`).
"""
from __future__ import annotations

from typing import Any, Sequence

from plax import tree_util


def _is_spec_leaf(s: Any) -> bool:
    from plax.sharding import PartitionSpec, Sharding
    return s is None or isinstance(s, (Sharding, PartitionSpec))


def _check_leaves(tree: Any, what: str) -> None:
    """JAX's TypeError for an entry that is neither a Sharding, a PartitionSpec nor None."""
    for s in tree_util.tree_leaves(tree, is_leaf=_is_spec_leaf):
        if not _is_spec_leaf(s):
            raise TypeError(f"{what} leaf specifications are expected to be PartitionSpec "
                            f"instances or None, but got {s!r}")


def _resolved(s: Any, what: str):
    """``s`` (a Sharding, a PartitionSpec or None) as a Sharding or None; a PartitionSpec
    needs a current mesh (JAX's RuntimeError otherwise)."""
    from plax.sharding import NamedSharding, PartitionSpec, _mesh_of_abstract, get_mesh
    if not isinstance(s, PartitionSpec):
        return s
    mesh = _mesh_of_abstract(get_mesh())
    if mesh is None or mesh.empty:
        raise RuntimeError(
            f"jit requires a non-empty mesh in context if you are passing `PartitionSpec`s "
            f"to {what}. You can define a context mesh via `jax.set_mesh(mesh)`. "
            f"Alternatively, provide `Sharding`s to {what} and then the mesh context manager "
            "is not required.")
    for entry in s.partitions:
        for axis in (entry if isinstance(entry, tuple) else (entry,)):
            if axis is not None and axis not in mesh.axis_names:
                raise ValueError(f"Resource axis: {axis} of {s!r} is not found in mesh: "
                                 f"{tuple(mesh.axis_names)}.")
    return NamedSharding(mesh, s)


class _Unspecified:
    """No sharding given for this operand or result (JAX's ``UnspecifiedValue``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UnspecifiedValue"

    def __reduce__(self):
        return "UNSPECIFIED"


#: the entry of an operand or result no sharding was given for
UNSPECIFIED = _Unspecified()


def _flat_entries(given: Any, values: Any, what: str) -> list:
    """``given`` (a pytree prefix of ``values`` whose leaves are Shardings,
    PartitionSpecs or None) as one resolved entry per leaf of ``values``: a Sharding, or
    :data:`UNSPECIFIED`."""
    targets = tree_util.tree_broadcast(given, values, is_leaf=_is_spec_leaf)
    treedef = tree_util.tree_structure(values)
    out = []
    for entry in treedef.flatten_up_to(targets):
        s = _resolved(entry, what)
        out.append(UNSPECIFIED if s is None else s)
    return out


class JitShardings:
    """The ``in_shardings``/``out_shardings`` of one ``jit``, applied at top-level calls.

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     f = jax.jit(lambda u: u * 2, out_shardings=plax.P("x"))
      ...     f(jnp.ones(4)).sharding.spec
      P('x',)
    """

    __slots__ = ("in_shardings", "out_shardings")

    def __init__(self, in_shardings: Any, out_shardings: Any):
        _check_leaves(in_shardings, "in_shardings")
        _check_leaves(out_shardings, "out_shardings")
        self.in_shardings = in_shardings
        self.out_shardings = out_shardings

    # ---- arguments
    def place_arguments(self, dyn_args: tuple, has_kwargs: bool) -> list:
        """The dynamic positional arguments, each checked against (or placed by) its
        ``in_shardings`` entry.

        Raises:
          ValueError: keyword arguments with ``in_shardings``, ``in_shardings`` not a prefix
            of the positional arguments, or an argument sharded otherwise than its entry.
          RuntimeError: a PartitionSpec entry with no current mesh.
        """
        if self.in_shardings is None:
            return list(dyn_args)
        if has_kwargs:
            raise ValueError("pjit does not support kwargs when in_shardings is specified.")
        given = self.in_shardings
        if isinstance(given, list):
            given = tuple(given)
        if isinstance(given, tuple) and not _is_spec_leaf(given):  # (a PartitionSpec is one)
            if len(given) != len(dyn_args):
                raise ValueError(
                    "pjit in_shardings specification must be a tree prefix of the positional "
                    "arguments tuple. In particular, pjit in_shardings must either be a "
                    "Sharding, a PartitionSpec, or a tuple of length equal to the number of "
                    "positional arguments. But pjit in_shardings is the wrong length: got a "
                    f"tuple or list of length {len(given)} for an args tuple of length "
                    f"{len(dyn_args)}.")
        else:
            given = (given,) * len(dyn_args)
        out = []
        for arg, entry in zip(dyn_args, given):
            if entry is None:
                out.append(arg)
                continue
            try:
                targets = tree_util.tree_broadcast(entry, arg, is_leaf=_is_spec_leaf)
            except ValueError as err:
                raise ValueError(f"pjit in_shardings is not a pytree prefix of the "
                                 f"arguments: {err}") from None
            out.append(tree_util.tree_map(lambda t, x: self._argument(x, t), targets, arg,
                                          is_leaf=_is_spec_leaf))
        return out

    @staticmethod
    def _argument(x: Any, entry: Any) -> Any:
        import plax
        from plax.array import Array
        from plax.sharding import get_mesh
        s = _resolved(entry, "in_shardings")
        if s is None:
            return x
        if isinstance(x, Array) and (x._committed or type(x) is not Array):
            have = x.sharding
            if not _same(have, s, x.ndim):
                raise ValueError(
                    "Sharding passed to jit does not match the sharding on the respective "
                    f"arg. Got jit sharding: {s!r},\narg sharding: {have!r} for arg type: "
                    f"{plax.typeof(x)}")
            return x
        mesh = get_mesh()
        if mesh is not None and not mesh.empty:
            return x  # the call places it replicated on the mesh, as JAX types it (docstring)
        return plax.device_put(x, s)

    # ---- the jit equation's parameters
    def in_params(self, dyn_args: tuple, n_kwarg_leaves: int) -> tuple:
        """One entry per leaf of the dynamic arguments (positional, then keyword): the
        ``in_shardings`` a ``jit`` equation records (:data:`UNSPECIFIED` where none)."""
        if self.in_shardings is None:
            n = len(tree_util.tree_leaves(dyn_args))
            return (UNSPECIFIED,) * (n + n_kwarg_leaves)
        given = self.in_shardings
        if isinstance(given, list):
            given = tuple(given)
        if not (isinstance(given, tuple) and not _is_spec_leaf(given)):
            given = (given,) * len(dyn_args)
        try:
            entries = _flat_entries(tuple(given), tuple(dyn_args), "in_shardings")
        except ValueError as err:
            if "Resource axis" in str(err):
                raise
            raise ValueError(f"pjit in_shardings is not a pytree prefix of the arguments: "
                             f"{err}") from None
        return tuple(entries) + (UNSPECIFIED,) * n_kwarg_leaves

    def out_params(self, out: Any) -> tuple:
        """One entry per output leaf: the ``out_shardings`` a ``jit`` equation records."""
        if self.out_shardings is None:
            return (UNSPECIFIED,) * len(tree_util.tree_leaves(out))
        try:
            return tuple(_flat_entries(self.out_shardings, out, "out_shardings"))
        except ValueError as err:
            if "Resource axis" in str(err):
                raise
            raise ValueError(f"pytree structure error: pjit out_shardings is not a pytree "
                             f"prefix of the outputs:\n{err}") from None

    # ---- outputs
    def place_outputs(self, out: Any) -> Any:
        """``out`` with each leaf placed as its ``out_shardings`` entry says.

        Raises:
          ValueError: ``out_shardings`` not a prefix of the outputs, or an entry naming more
            dimensions than its output has.
          RuntimeError: a PartitionSpec entry with no current mesh.
        """
        if self.out_shardings is None:
            return out
        from plax.sharding import NamedSharding, _place_tree
        try:
            targets = tree_util.tree_broadcast(self.out_shardings, out, is_leaf=_is_spec_leaf)
        except ValueError as err:
            raise ValueError(f"pytree structure error: pjit out_shardings is not a pytree "
                             f"prefix of the outputs:\n{err}") from None
        paths_leaves, treedef = tree_util.tree_flatten_with_path(out)
        entries = treedef.flatten_up_to(targets)
        placed = []
        for (path, leaf), entry in zip(paths_leaves, entries):
            s = _resolved(entry, "out_shardings")
            if s is None:
                placed.append(leaf)
                continue
            ndim = len(getattr(leaf, "shape", ()))
            if isinstance(s, NamedSharding) and len(s.spec) > ndim:
                raise ValueError(
                    "One of pjit outputs with pytree key path result"
                    f"{tree_util.keystr(path)} is incompatible with its sharding annotation "
                    f"{s!r}: Sharding {s!r} is only valid for values of rank at least "
                    f"{len(s.spec)}, but was applied to a value of rank {ndim}.")
            if getattr(leaf, "sharding", None) == s:  # (an equivalent one is replaced)
                placed.append(leaf)
            else:
                placed.append(_place_tree(leaf, s, "jit out_shardings", typed=True))
        return tree_util.tree_unflatten(treedef, placed)


def _same(have: Any, want: Any, ndim: int) -> bool:
    """Whether two shardings place an array of rank ``ndim`` alike (``P('X')`` and
    ``P('X', None)`` do)."""
    if have is None:
        return False
    if have == want:
        return True
    try:
        return bool(have.is_equivalent_to(want, ndim))
    except (AttributeError, TypeError, ValueError):
        return False


# ------------------------------------------------------------------ the traced call

#: the per-operand parameters of a ``jit`` equation and the entry of an operand none was
#: given for; then the per-result ones (each parameter is printed only when some entry
#: differs from its default, as JAX prints them)
_PER_OPERAND = {"in_shardings": UNSPECIFIED, "donated_invars": False}
_PER_RESULT = {"out_shardings": UNSPECIFIED}


def call_params(in_entries: Sequence = (), out_entries: Sequence = (),
                donated: Sequence[bool] = ()) -> dict:
    """The per-operand and per-result parameters of a ``jit`` equation: ``in_shardings``
    and ``out_shardings`` (present when some entry was given), ``donated_invars`` (present
    when some operand is donated)."""
    params = {}
    for name, entries in (("in_shardings", in_entries), ("out_shardings", out_entries),
                          ("donated_invars", donated)):
        default = _PER_OPERAND.get(name, _PER_RESULT.get(name))
        if any(e is not default for e in entries):
            params[name] = tuple(entries)
    return params


def _split(params: dict, n_in: int, n_out: int) -> tuple[dict, dict, dict]:
    """``(per-operand entries, per-result entries, the other parameters)`` of a ``jit``
    equation's ``params``, each per-operand or per-result parameter as a full tuple."""
    rest = dict(params)
    ins = {k: tuple(rest.pop(k, None) or (d,) * n_in) for k, d in _PER_OPERAND.items()}
    outs = {k: tuple(rest.pop(k, None) or (d,) * n_out) for k, d in _PER_RESULT.items()}
    return ins, outs, rest


def _joined(rest: dict, ins: dict, outs: dict) -> dict:
    return {**rest, **call_params(ins["in_shardings"], outs["out_shardings"],
                                  ins["donated_invars"])}


def has_call_params(params: dict) -> bool:
    """Whether a ``jit`` equation has per-operand or per-result parameters (then the calls
    derived from it carry them: :func:`jvp_params`, ...)."""
    return any(k in params for k in _PER_OPERAND) or any(k in params for k in _PER_RESULT)


def jvp_params(params: dict, n_in: int, n_out: int, nonzeros: Sequence[bool],
               out_nonzeros: Sequence[bool]) -> dict:
    """The parameters of the JVP call of a ``jit`` equation: the primals' entries, then
    each nonzero tangent with its primal's (as JAX's JVP rule of ``jit`` extends them)."""
    ins, outs, rest = _split(params, n_in, n_out)
    ins = {k: v + tuple(e for e, nz in zip(v, nonzeros) if nz) for k, v in ins.items()}
    outs = {k: v + tuple(e for e, nz in zip(v, out_nonzeros) if nz) for k, v in outs.items()}
    return _joined(rest, ins, outs)


def linearize_params(params: dict, n_in: int, n_out: int, n_known_outs: int,
                     n_residuals: int, nonzeros: Sequence[bool],
                     out_nonzeros: Sequence[bool], known_primal_outs: Sequence[int]
                     ) -> tuple[dict, dict]:
    """The parameters of the known and unknown calls a linearized ``jit`` equation splits
    into: the known call takes the primals' entries and gives its primal outputs theirs
    (residuals unspecified); the unknown call takes the residuals unspecified and the
    tangents with their primals' shardings (none donated), and gives the output tangents
    theirs. ``known_primal_outs[k]`` is the primal output the known call's output ``k`` is
    (or -1 for a residual)."""
    ins, outs, rest = _split(params, n_in, n_out)
    known_outs = {k: tuple(v[i] if i >= 0 else _PER_RESULT[k] for i in known_primal_outs)
                  for k, v in outs.items()}
    known = _joined(rest, ins, known_outs)
    t_ins = {k: (d,) * n_residuals + (tuple(e for e, nz in zip(ins[k], nonzeros) if nz)
                                      if k == "in_shardings" else (d,) * sum(nonzeros))
             for k, d in _PER_OPERAND.items()}
    t_outs = {k: tuple(e for e, nz in zip(v, out_nonzeros) if nz) for k, v in outs.items()}
    return known, _joined(rest, t_ins, t_outs)


def transpose_params(params: dict, n_in: int, n_out: int, undefined: Sequence[bool],
                     ct_present: Sequence[bool], out_nonzeros: Sequence[bool]) -> dict:
    """The parameters of the transposed call of a linear ``jit`` equation: the residual
    operands keep their shardings, the cotangents take the outputs', and the input
    cotangents it returns take the linear inputs' (as JAX's transpose rule of ``jit``);
    nothing is donated."""
    ins, outs, rest = _split(params, n_in, n_out)
    t_in = tuple(e for e, u in zip(ins["in_shardings"], undefined) if not u) + tuple(
        e for e, c in zip(outs["out_shardings"], ct_present) if c)
    linear = [e for e, u in zip(ins["in_shardings"], undefined) if u]
    t_out = tuple(e for e, nz in zip(linear, out_nonzeros) if nz)
    return {**rest, **call_params(t_in, t_out)}


def batch_params(params: dict, n_in: int, n_out: int, in_dims: Sequence,
                 out_dims: Sequence) -> dict:
    """The parameters of the batched call of a ``jit`` equation: each NamedSharding entry
    gains an unsplit dimension where its value is batched (as JAX's batching rule of
    ``jit`` inserts it); donation is kept."""
    ins, outs, rest = _split(params, n_in, n_out)
    ins["in_shardings"] = tuple(_with_batch_dim(e, d)
                                for e, d in zip(ins["in_shardings"], in_dims))
    outs["out_shardings"] = tuple(_with_batch_dim(e, d)
                                  for e, d in zip(outs["out_shardings"], out_dims))
    return _joined(rest, ins, outs)


def _with_batch_dim(entry: Any, dim) -> Any:
    from plax.sharding import NamedSharding, PartitionSpec
    if dim is None or not isinstance(entry, NamedSharding):
        return entry
    parts = list(entry.spec.partitions)
    parts += [None] * max(0, dim - len(parts))
    parts.insert(dim, None)
    return NamedSharding(entry.mesh, PartitionSpec(*parts))


# ------------------------------------------------------------------ eval_shape

def out_info(jitted: Any, out_tree: Any, out_avals: Sequence) -> Any:
    """The outputs of a traced jit as ShapeDtypeStructs, as JAX's ``out_info`` gives them:
    each with its ``out_shardings`` entry when one was given, else with its type's sharding
    when that lies on a mesh of Explicit axes (a NamedSharding over the AbstractMesh), else
    with none.

    Example:
      >>> jax.jit(jnp.sin).eval_shape(jnp.ones(3))
      ShapeDtypeStruct(shape=(3,), dtype=float32)
    """
    from plax.core.shaped_array import ShapeDtypeStruct
    shardings = getattr(jitted, "_shardings", None)
    if shardings is not None and shardings.out_shardings is not None:
        entries = shardings.out_params(tree_util.tree_unflatten(out_tree, list(out_avals)))
    else:
        entries = (UNSPECIFIED,) * len(out_avals)
    leaves = []
    for aval, entry in zip(out_avals, entries):
        s = entry if entry is not UNSPECIFIED else _type_sharding(aval)
        leaves.append(ShapeDtypeStruct(aval.shape, aval.dtype, aval.weak_type, s))
    return tree_util.tree_unflatten(out_tree, leaves)


def _type_sharding(aval: Any) -> Any:
    """The sharding of a traced output's type when its mesh has only Explicit (or Manual)
    axes, as JAX's ``out_info`` reports it; else None."""
    from plax.sharding import AxisType
    if type(aval).__name__ != "ShapedArray":
        return None
    if getattr(aval, "sharding", None) is None:
        from plax.sharding import get_mesh
        mesh = get_mesh()
        if mesh is None or mesh.empty:
            return None
    from plax.sharding_types import type_sharding
    s = type_sharding(None, aval)
    types = s.mesh.axis_types
    if not types or any(t not in (AxisType.Explicit, AxisType.Manual) for t in types):
        return None
    return s


# ------------------------------------------------------------------ host arguments

def placed_on_context_mesh(leaves: list, mesh: Any) -> list | None:
    """The argument leaves of a top-level ``jit`` call with each host value (a NumPy array,
    a Python or NumPy scalar) and each uncommitted Array placed replicated on ``mesh``, as
    JAX 0.10 types and places them when the current mesh (``plax.set_mesh``) has Explicit
    axes: ``NamedSharding(mesh, P())``, so the results lie on the mesh too
    (``jit(f)(np.ones((8, 4))).sharding`` is ``NamedSharding(mesh, P(None, None))``).

    Args:
      leaves: the call's argument leaves.
      mesh: the current mesh as :func:`plax.sharding_eager.current_mesh` gives it (the
        call works it out once): None in plax's own eager work, which places nothing.

    Returns:
      The leaves, placed; None when ``mesh`` has no Explicit axis or nothing needs
      placing (the usual case).

    Example:
      >>> mesh = plax.make_mesh((1,), ("x",))
      >>> placed_on_context_mesh([np.ones(2)], mesh)[0].sharding.spec
      P()
    """
    from plax.sharding import AxisType
    if mesh is None or mesh.empty or AxisType.Explicit not in mesh.axis_types:
        return None
    from plax.array import host_or_uncommitted
    todo = [i for i, x in enumerate(leaves) if host_or_uncommitted(x)]
    if not todo:
        return None
    from plax.sharding_eager import placed_argument
    out = list(leaves)
    for i in todo:
        out[i] = placed_argument(leaves[i], mesh)
    return out


def with_weak_type(placed: Any, weak: bool) -> Any:
    """``placed`` (an Array just made by a placement, which types it strongly) weakly typed
    again when the value it was made from was (``weak``).

    Example:
      >>> with_weak_type(plax.device_put(1.0), True).aval.weak_type
      True
    """
    if weak and not placed.aval.weak_type:
        from plax.core.shaped_array import ShapedArray
        a = placed.aval
        placed.aval = ShapedArray(a.shape, a.dtype, True, a.vma, a.sharding)
    return placed
