"""Fusion clusters: which equations of a jaxpr a compiling backend may fuse into one kernel.

**The legality rule.** Each primitive may declare a fusion kind with :func:`register_fusible`:

* ``ELEMENTWISE``: the output has the iteration shape and each operand has it too or is a
  scalar (rank 0), read by broadcasting (at least one operand has it unless it is a scalar);
  an operand of size 1 along some axes (JAX's elementwise broadcasting) is made an explicit
  ``broadcast_in_dim`` first (:func:`plax.lowering.explicit_broadcasts`, which the lowering
  driver applies), else its equation is not fused;
* ``BROADCAST`` (``broadcast_in_dim``): the output has the iteration shape; the operand is
  read through the broadcast's index map;
* ``REDUCTION``: the *operand* has the iteration shape; the output is smaller;
* ``INDEX`` (``iota``): no operands; the output has the iteration shape and each element is
  a function of its position alone, which a generator computes from the loop's index
  instead of reading a buffer (only for a backend that asks, ``index=True`` in its
  :class:`FusionOptions`, from :attr:`plax.lowering.Emitter.fuses_index`; elsewhere such an
  equation stays a lone step and its value is written to memory).

A cluster is a maximal run of *consecutive* equations of one iteration shape, each of a
fusible kind, in which no equation reads the output of a reduction of the same cluster
(a reduction finishes only when the loop does). Keeping the run consecutive keeps the
jaxpr's order a valid schedule, so fusing never creates a cycle. Equations with sub-jaxprs
are never fused. A run of one equation is not a cluster.

**Multi-result equations.** An ``ELEMENTWISE`` primitive with several results of one shape
(``threefry2x32``: two hashed words per counter pair) joins a cluster only for a backend
whose generator computes all of its results in one pass (``multiple_results=True`` in
:class:`FusionOptions`, from :attr:`plax.lowering.Emitter.fuses_multiple_results`); the
cluster may continue from any of them. Elsewhere such an equation stays a lone step.

**Scalar producers.** Rank-0 elementwise equations (a bound converted and subtracted before
``random.uniform`` scales its samples) form a cluster of shape ``()`` or lone equations of
their own: one more kernel launch for a few flops. For a generator that asks (``scalars=True``
in :class:`FusionOptions`, from :attr:`plax.lowering.Emitter.fuses_scalar_producers`), such a
producer whose values are read by exactly one later cluster of another shape, and are not the
jaxpr's outputs, moves into that cluster ahead of its equations: the generator recomputes the
few scalar operations per element from the producer's scalar inputs (registers; no memory).

**Index equations.** ``iota`` (and so ``broadcasted_iota``) fuses as ``INDEX``: the counter
that ``random.normal`` hashes is then an expression of the loop index in the hashing kernel,
never an array in memory.

**Arg-reductions and cumulative ops** (for a backend that asks: ``arg_reductions=True`` and
``cumulative=True`` in :class:`FusionOptions`, from
:attr:`plax.lowering.Emitter.fuses_arg_reductions` and
:attr:`~plax.lowering.Emitter.fuses_cumulative`; elsewhere they stay lone equations):

* ``ARG_REDUCTION`` (``argmax``, ``argmin``) follows ``REDUCTION``'s rule exactly (the operand
  has the iteration shape, nothing in the cluster reads the result); its generator keeps the
  best value *and* its index. It is a kind of its own rather than ``REDUCTION`` with a flag
  so that a generator asking ``fusion_kind(p) == REDUCTION`` for a sum-like accumulator
  never meets an index-tracking one it did not ask for, and the rule here stays one line.
* ``CUMULATIVE`` (``cumsum``, ``cumprod``, ``cummax``, ``cummin``, ``cumlogsumexp``): the
  operand and the output have the iteration shape; the elementwise chain producing the
  operand fuses in front of it, and the generator walks the scan axis in order (from its end
  for ``reverse``). Like a reduction its value is complete only when the loop ends, so nothing
  in the cluster reads it; it joins only a run without reductions and ends its cluster, so a
  cluster holds at most one scan and the scan alone decides the loop's order.

**Structural equations** (``slice``, ``concatenate``, ``reshape``, ``squeeze``, ``pad``,
``rev``, ``transpose``, ``dynamic_slice``, ``gather``; for a backend
that asks: ``structural=True`` in :class:`FusionOptions`, from
:attr:`plax.lowering.Emitter.fuses_structural`; elsewhere they stay lone equations): each
output element is one operand element (for ``pad``, else the padding value; for a
``gather`` out of bounds, the fill value) at an index that is a function of the output's index
alone (and, for ``dynamic_slice`` and ``gather``, of its start or index values). Such an equation never joins a run; instead, after the runs are found, a unit (a
cluster, a lone fusible or structural equation) absorbs the units that feed it through
structural equations -- clusters without a reducing kind, lone elementwise, index, broadcast
and structural equations whose every value only that unit reads, each cheap (index maps and
cheap arithmetic), or with values of at least ``1 / STRUCTURAL_MAX_REPEAT`` of the reader's
elements (each element computes what it reads), or read by a reader of at most
``recompute_max_elements`` -- and becomes one cluster over its own shape holding equations of
several shapes. Its generator computes each value *at the index its reader needs*: through a
slice at an offset, through a concatenation the piece the element falls in, through a
reshape the same flat index, through a transpose the permuted index, through a rev the
mirrored one, through a pad the operand's element or the padding value, through a
``dynamic_slice`` an offset by its start indices (scalars read in the kernel, clamped), through a
``gather`` the operand element its index vector (computed or read at the element's batch
position) and window give, clamped or out of bounds the fill value. The original threefry layout (counter halves hashed as pairs,
the two words concatenated, the pad sliced off) and a key's words sliced from its data are
then part of the kernel that uses the bits. A group is formed only where an equation that
moves elements joins it (a reshape alone keeps them in place) and something other than views
(slices, reshapes, transposes, revs) does (views alone launch nothing), so programs without one keep their clusters; a generator that
declines such a cluster has its parts lowered as they were (:attr:`Cluster.parts`).

**Epilogues** (for a backend that asks: ``epilogues=True`` in :class:`FusionOptions`, from
:attr:`plax.lowering.Emitter.fuses_epilogues`): a cluster or lone equation with reductions
(``REDUCTION``, and ``ARG_REDUCTION`` where asked; none ``CUMULATIVE``, all of one output
shape and one ``axes``; a structural group's too) takes the later units that compute elementwise
on its results -- clusters without a reducing kind, lone ``ELEMENTWISE``, ``BROADCAST`` and
(with ``index``) ``INDEX`` equations, single-result, over the results' shape -- when each
reads one of its results or an earlier epilogue's, and otherwise only values computed before
the reduction (another value of its loop is not final per output) or rank-0 and
output-shaped values from before it. They become the cluster's :attr:`Cluster.epilogue`: the
generator computes them once per output, where that output's value is final (for a
reduction split over blocks, in the block that combines the partials), reading their other
operands at the output's index: ``x / norm(x)``'s ``sqrt``, a mean's division, softmax's
``log`` of the sum, an accuracy's division by the count. Moving them to the reduction's
place is a valid order: what they read is computed before it or by it. A generator that
declines such a cluster has its parts lowered as they were (:attr:`Cluster.parts`). The
"reduce, then re-read the operand" pattern (softmax) is the next rule's.

**Row-local clusters** (for a backend that asks: ``row_local=N`` in :class:`FusionOptions`,
from :attr:`plax.lowering.Emitter.row_local_max_elements`; folded before epilogues): a unit
whose ``REDUCTION`` equations all reduce the same *trailing* axes of one shape (a *row*: the
reduced elements of one kept index; rows of 2 to ``N`` elements) takes the later units that
read its values (and, in turn, the units reading theirs) when each of their equations is
row-local: single-result elementwise work whose values are all row-shaped (the iteration
shape), all one per row (the kept axes followed by size-1 axes: :func:`per_row`) or rank 0;
a reduction of the same rows; a ``broadcast_in_dim`` of a per-row or rank-0 value over the
rows or to another per-row shape, or of a value from outside the group read through its index
map; a ``reshape``/``squeeze`` between per-row shapes; a ``stop_gradient``
(:data:`ROW_LOCAL_IDENTITIES`); a ``gather``/``scatter-add`` of one element within each row
(``take_along_axis(x, labels[:, None], -1)`` and its transpose, or under ``vmap`` ``logp[y]``
and its transpose, whose window of one stays a size-1 axis: :func:`_row_local_indexing`);
with rows of one axis, values of ``k`` labels a row (:func:`labels_per_row`: an ``(n, k)``
index of ``take_along_axis``, what it picks, its transpose's updates) as per-row ones;
a structural group's equations count one by one, as a plain cluster's. A plain cluster
whose reductions over other axes than the rows' are read by nothing in it gives the group its
other equations and keeps those reductions in its place (``_row_part``: under ``grad`` of a
per-example loss under ``vmap``, the bias gradient's column sums of the cotangent the group
computes, which it then outputs). What they read from
outside must be computed before the first unit, except what moves into the group with its
reader (``_early_units``): a scalar producer (``-inf`` converted for a max), an ``iota`` the group alone reads (``one_hot``'s
class indices, read through a broadcast: a generator computes it from the index) and a unit
of row-local work on the same rows that does not read the group (``grad``'s ``one_hot`` half
of a cross-entropy), and in turn what they read; a scalar producer or ``iota`` before it that only the group reads
joins too. The group is formed only where some row-shaped value reads a reduction's result
(else the epilogue rule covers it) and becomes one :class:`Cluster` over the rows' shape, its
:attr:`Cluster.row_axes` the row's axis count: a generator computes it a row at a time in
phases (reduce the row, then compute on it again with the result, ...): softmax, log-softmax,
layer norm and their gradients in one kernel. Moving the group to its first unit's place is
a valid order: all it reads is computed there. A generator that declines such a cluster has
its parts lowered as they were (:attr:`Cluster.parts`).

**Horizontal groups** (for a backend that asks: ``horizontal=N`` in :class:`FusionOptions`,
from :attr:`plax.lowering.Emitter.horizontal_max_elements`): consecutive units that are
independent (none reads what another computes) and elementwise (clusters without a reducing
kind, lone ``ELEMENTWISE`` equations, and lone ``INDEX`` ones where ``index`` is asked too: the
``iota`` a ``random.permutation`` sorts beside its keys), each of at most ``N`` elements, form one
:class:`HorizontalGroup` -- an SGD update's ``p - lr * g`` for every parameter, each of
another shape -- which a generator may compute in one launch over their concatenated element
ranges (a "multi-tensor" kernel). Running them all at the first one's place is a valid order:
each reads only what was computed before the group. The bound keeps the grouping where a
launch saved matters: a large tensor's kernel runs long enough that its launch is cheap.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Iterator, Union

from plax.core.jaxpr import Jaxpr, JaxprEqn, Literal, Var

ELEMENTWISE = "elementwise"
BROADCAST = "broadcast"
REDUCTION = "reduction"
INDEX = "index"
ARG_REDUCTION = "arg_reduction"
CUMULATIVE = "cumulative"
STRUCTURAL = "structural"
_KINDS = (ELEMENTWISE, BROADCAST, REDUCTION, INDEX, ARG_REDUCTION, CUMULATIVE, STRUCTURAL)
#: the kinds whose result is complete only when the cluster's loop ends
_REDUCING = (REDUCTION, ARG_REDUCTION, CUMULATIVE)

_fusion_kinds: dict = {}


@dataclass(frozen=True)
class FusionOptions:
    """What a backend's generator can fuse beyond the plain kinds (each field off by default);
    :meth:`plax.lowering.Emitter.fusion_options` derives it from the emitter's ``fuses_*``
    flags, and :func:`order_for_fusion` and :func:`find_clusters` take it.

    Args:
      multiple_results: elementwise equations with several results of one shape
        (``threefry2x32``) may join clusters: the generator computes all of an equation's
        results in one pass (``Emitter.fuses_multiple_results``).
      index: ``INDEX`` equations (``iota``) may join clusters: the generator computes them
        from the loop's index (``Emitter.fuses_index``).
      scalars: scalar producers fold into the one cluster that reads them: the generator
        computes a cluster's rank-0 equations per element from its scalar inputs
        (``Emitter.fuses_scalar_producers``).
      arg_reductions: ``argmax``/``argmin`` join clusters as ``ARG_REDUCTION``: the generator
        tracks the best value's index (``Emitter.fuses_arg_reductions``).
      cumulative: ``cumsum``/``cumprod``/``cummax``/``cummin``/``cumlogsumexp`` join clusters
        as ``CUMULATIVE``: the generator walks the scan axis in order
        (``Emitter.fuses_cumulative``).
      horizontal: the largest element count of a member of a :class:`HorizontalGroup`; 0 (the
        default) forms no groups (``Emitter.horizontal_max_elements``).
      structural: ``slice``/``concatenate``/``reshape``/``squeeze``/``pad``/``rev``/``transpose``/
        ``dynamic_slice``/``gather`` (``STRUCTURAL``) join the
        unit that reads them with the units feeding them: the generator computes each value
        at the index its reader needs (``Emitter.fuses_structural``).
      recompute_max_elements: with ``structural``, the largest reader (elements) that may
        compute per element a value of any size, however costly (a key split before a small
        sampler: a launch saved is worth more than the repeated hashes); above it only cheap
        values and values of at least ``1 / STRUCTURAL_MAX_REPEAT`` of the reader's elements
        (``Emitter.recompute_max_elements``).
      epilogues: elementwise units computing on a reduction's results join its cluster as its
        :attr:`Cluster.epilogue`, computed where each result is final
        (``Emitter.fuses_epilogues``).
      row_local: the longest row (elements) of a *row-local* cluster: a reduction over
        trailing axes and the later units that compute on its rows and results (softmax,
        layer norm) become one cluster a generator computes a row at a time
        (:attr:`Cluster.row_axes`); 0 (the default) forms none
        (``Emitter.row_local_max_elements``).

    Example:
      >>> options = FusionOptions(index=True, cumulative=True)
      >>> options.index, options.scalars
      (True, False)
    """

    multiple_results: bool = False
    index: bool = False
    scalars: bool = False
    arg_reductions: bool = False
    cumulative: bool = False
    horizontal: int = 0
    structural: bool = False
    recompute_max_elements: int = 0
    epilogues: bool = False
    row_local: int = 0


#: the plain kinds only (a backend that asks for nothing more)
PLAIN = FusionOptions()


def register_fusible(primitive, kind: str) -> None:
    """Declares how ``primitive`` may join a fusion cluster (see the module docstring).

    Args:
      primitive: a :class:`~plax.core.Primitive` (a plugin's own primitives too).
      kind: ``ELEMENTWISE``, ``BROADCAST``, ``REDUCTION``, ``INDEX``, ``ARG_REDUCTION`` or
        ``CUMULATIVE``.

    Example:
      >>> my_elementwise_p = plax.core.Primitive("my_elementwise")
      >>> register_fusible(my_elementwise_p, ELEMENTWISE)
    """
    if kind not in _KINDS:
        raise ValueError(f"fusion kind must be one of {_KINDS}, got {kind!r}")
    _fusion_kinds[primitive] = kind


def integer_exponent(eqn) -> int | None:
    """The integer power an elementwise equation raises its operand to, or None.

    ``integer_pow`` carries it as its ``y`` parameter; ``square`` (JAX's ``lax.square``,
    which ``jnp.square`` and ``jnp.hypot`` stage) is the power 2. A generator writes both with
    one square-and-multiply path, so each product rounds as the reference's does.

    Args:
      eqn: a :class:`~plax.core.JaxprEqn`.

    Returns:
      The exponent, or None for an equation of any other primitive.

    Example:
      >>> j = plax.make_jaxpr(lambda x: plax.lax.square(x) + x ** 3)(1.0).jaxpr
      >>> [integer_exponent(e) for e in j.eqns]
      [2, 3, None]
    """
    name = eqn.primitive.name
    if name == "integer_pow":
        return int(eqn.params["y"])
    return 2 if name == "square" else None


def fusible_primitives() -> dict:
    """Every primitive with a declared fusion kind, and that kind (a copy: registering goes
    through :func:`register_fusible`).

    Returns:
      ``{primitive: kind}``, the kinds as :func:`register_fusible` took them (before any
      generator's opt-ins: compare with :func:`fusion_kind` for one emitter's view).

    Example:
      >>> fusible_primitives()[plax.lax.sin_p]
      'elementwise'
    """
    return dict(_fusion_kinds)


def fusion_kind(primitive, index: bool = False, arg_reductions: bool = False,
                cumulative: bool = False, structural: bool = False) -> str | None:
    """The fusion kind declared for ``primitive``, or None (never fused).

    Args:
      primitive: a :class:`~plax.core.Primitive`.
      index: whether to report ``INDEX`` (``iota``): only a generator that computes such
        values from its loop's index asks; for every other caller (which runs them as lone
        kernels) they are not fusible, None.
      arg_reductions: whether to report ``ARG_REDUCTION`` (``argmax``/``argmin``), for a
        generator that fuses them (else None).
      cumulative: whether to report ``CUMULATIVE`` (``cumsum``...), likewise.
      structural: whether to report ``STRUCTURAL`` (``slice``, ``gather``...), for a
        generator computing values at the index their reader needs (else None: such an
        equation joins no run, only a structural group).

    Returns:
      ``ELEMENTWISE``, ``BROADCAST``, ``REDUCTION``, ``INDEX``, ``ARG_REDUCTION``,
      ``CUMULATIVE``, ``STRUCTURAL`` or None.

    Example:
      >>> fusion_kind(plax.lax.iota_p), fusion_kind(plax.lax.iota_p, index=True)
      (None, 'index')
      >>> fusion_kind(plax.lax.argmax_p), fusion_kind(plax.lax.argmax_p, arg_reductions=True)
      (None, 'arg_reduction')
      >>> fusion_kind(plax.lax.gather_p), fusion_kind(plax.lax.gather_p, structural=True)
      (None, 'structural')
    """
    kind = _fusion_kinds.get(primitive)
    if ((kind == INDEX and not index) or (kind == ARG_REDUCTION and not arg_reductions)
            or (kind == CUMULATIVE and not cumulative) or (kind == STRUCTURAL and not structural)):
        return None
    return kind


def inserts_unit_axes(primitive, operand_shape: tuple, params: dict) -> bool:
    """Whether an equation is a ``broadcast_in_dim`` that only inserts size-1 axes (as JAX
    stages ``x[None]`` and ``expand_dims``): a reshape, which a backend runs as a view of its
    operand rather than as a generated copy when the equation stands alone.

    Example:
      >>> inserts_unit_axes(plax.lax.broadcast_in_dim_p, (3,),
      ...                   {"shape": (1, 3), "broadcast_dimensions": (1,)})
      True
    """
    if primitive.name != "broadcast_in_dim":
        return False
    shape, dims = params["shape"], params["broadcast_dimensions"]
    return (all(operand_shape[i] == shape[d] for i, d in enumerate(dims))
            and all(shape[k] == 1 for k in range(len(shape)) if k not in dims))


class Cluster:
    """Consecutive equations a backend may compute in one loop over ``shape``.

    Attributes:
      eqns: the equations, in program order.
      shape: the iteration shape.
      inputs: the atoms (Vars and Literals) read from outside the cluster, in first-use order.
      outputs: the Vars defined in the cluster and read after it (or returned by the jaxpr).
      parts: for a cluster made by structural fusion or given an epilogue, the units it was
        made of, in an order valid at its place (a generator that declines it has them
        lowered one by one, as they were); else None.
      epilogue: the trailing equations of ``eqns`` computed per output of the cluster's
        reductions, over their shape, once each output is final (see the module docstring,
        "Epilogues"); empty for other clusters.
      row_axes: for a row-local cluster (see the module docstring, "Row-local clusters"), how
        many trailing axes of ``shape`` form a row (what its reductions reduce); 0 for other
        clusters.
    """

    __slots__ = ("eqns", "shape", "inputs", "outputs", "parts", "epilogue", "row_axes")

    def __init__(self, eqns: list, shape: tuple, inputs: list, outputs: list,
                 parts: list | None = None, epilogue: list | None = None, row_axes: int = 0):
        self.eqns, self.shape, self.inputs, self.outputs = eqns, shape, inputs, outputs
        self.parts = parts
        self.epilogue = list(epilogue or ())
        self.row_axes = row_axes

    def __repr__(self) -> str:
        prims = " ".join(e.primitive.name for e in self.eqns)
        return f"Cluster(shape={self.shape}, [{prims}], {len(self.inputs)} in, {len(self.outputs)} out)"


def sub_cluster(eqns: list, shape: tuple, read_later: set) -> Cluster:
    """The :class:`Cluster` of ``eqns`` (a run of one cluster's equations) over ``shape``:
    its inputs are what the run reads from outside it, in first-use order; its outputs the
    values it defines whose ``id`` is in ``read_later`` (what later parts or the cluster's
    reader need). Used where a backend splits a cluster into several kernels."""
    defined, seen, inputs = set(), set(), []
    for e in eqns:
        for v in e.invars:
            if id(v) not in defined and id(v) not in seen:
                seen.add(id(v))
                inputs.append(v)
        defined.update(id(o) for o in e.outvars)
    outputs = [v for e in eqns for v in e.outvars if id(v) in read_later]
    return Cluster(list(eqns), shape, inputs, outputs)


def _iteration_shape(eqn: JaxprEqn, options: FusionOptions = PLAIN) -> tuple | None:
    """The shape ``eqn`` iterates over if it may be fused at all, else None (a multi-result
    equation only with ``options.multiple_results``, elementwise, every result of one shape;
    an ``INDEX`` equation only with ``options.index``, of rank 1 or more; an
    ``ARG_REDUCTION`` or ``CUMULATIVE`` one only when asked, over its operand of rank 1 or
    more)."""
    kind = fusion_kind(eqn.primitive, options.index, options.arg_reductions, options.cumulative)
    if kind is None or not eqn.outvars:
        return None
    if kind == INDEX:
        shape = tuple(eqn.outvars[0].aval.shape)
        return shape if shape and not eqn.invars and len(eqn.outvars) == 1 else None
    if eqn.primitive.multiple_results or len(eqn.outvars) != 1:
        if not options.multiple_results or kind != ELEMENTWISE or len(
                {tuple(v.aval.shape) for v in eqn.outvars}) != 1:
            return None
    if kind == REDUCTION:
        return tuple(eqn.invars[0].aval.shape)
    if kind in (ARG_REDUCTION, CUMULATIVE):
        shape = tuple(eqn.invars[0].aval.shape)
        return shape if len(eqn.invars) == 1 and shape else None
    shape = tuple(eqn.outvars[0].aval.shape)
    if kind == ELEMENTWISE and (any(v.aval.shape not in (shape, ()) for v in eqn.invars)
                                or (shape and not any(v.aval.shape == shape for v in eqn.invars))):
        return None  # (scalar operands only with a larger output: not elementwise, e.g. a
        # narrowing bitcast_convert_type of a scalar, f32[] -> u16[2])
    return shape


def order_for_fusion(jaxpr: Jaxpr, options: FusionOptions = PLAIN) -> Jaxpr:
    """``jaxpr`` with its equations reordered so that each fusible chain is consecutive.

    Clusters are runs of *consecutive* equations (see the module docstring), so a program
    that interleaves independent chains of different shapes -- ``tree_map(lambda g: g / n,
    grads)`` followed by ``tree_map(lambda w, g: w - lr * g, params, grads)`` -- fuses
    nothing as written. This list schedule emits, after each fusible equation other than a
    reduction (whose readers never join its cluster), a ready reader of its output with the
    same iteration shape when there is one, and otherwise the ready equation that comes
    first in the program. It is a valid order (every equation
    after its operands' producers, effectful equations in their order), and a program whose
    chains are already consecutive keeps its order.

    Args:
      jaxpr: the program.
      options: what may fuse beyond the plain kinds (as in :func:`find_clusters`).

    Returns:
      ``jaxpr`` itself when the order does not change, else a new :class:`Jaxpr`.

    Example:
      >>> def f(a, b):
      ...     a2, b2 = a / 2, b / 2
      ...     return a - a2, b - b2
      >>> j = plax.make_jaxpr(f)(jnp.ones(3), jnp.ones(4)).jaxpr
      >>> [e.primitive.name for e in order_for_fusion(j).eqns]
      ['div', 'sub', 'div', 'sub']
    """
    from plax.core.passes import dependency_graph
    eqns = jaxpr.eqns
    n = len(eqns)
    if n < 3:
        return jaxpr
    readers, waiting = dependency_graph(eqns)
    shapes = [_iteration_shape(e, options) for e in eqns]
    ready = [i for i in range(n) if not waiting[i]]
    heapq.heapify(ready)
    done = [False] * n
    order: list[int] = []
    prev = None
    while len(order) < n:
        pick = None
        # (a reduction's readers never join its cluster: following one gains nothing, and a
        # broadcast of its result would be cut off from the readers that come later)
        if (prev is not None and shapes[prev] is not None
                and fusion_kind(eqns[prev].primitive, True, True, True) not in _REDUCING):
            follow = [r for r in readers[prev]
                      if not waiting[r] and not done[r] and shapes[r] == shapes[prev]]
            pick = min(follow) if follow else None
        if pick is None:
            while done[ready[0]]:
                heapq.heappop(ready)
            pick = heapq.heappop(ready)
        done[pick] = True
        order.append(pick)
        for r in readers[pick]:
            waiting[r] -= 1
            if not waiting[r]:
                heapq.heappush(ready, r)
        prev = pick
    if order == list(range(n)):
        return jaxpr
    return Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, [eqns[i] for i in order])


def find_clusters(jaxpr: Jaxpr, options: FusionOptions = PLAIN
                  ) -> Iterator[Union[Cluster, JaxprEqn]]:
    """Splits ``jaxpr.eqns`` into fusion clusters and lone equations, in program order.

    Args:
      jaxpr: the program.
      options: a :class:`FusionOptions`, what the generator fuses beyond the plain kinds
        (multi-result, index, scalar-producer, arg-reduction and cumulative equations,
        structural groups, row-local clusters, epilogues, horizontal groups; see the module
        docstring); a backend
        passes its emitter's
        :meth:`~plax.lowering.Emitter.fusion_options`. Default: none of them.

    Yields:
      :class:`Cluster` objects (two or more equations) and :class:`JaxprEqn` objects.

    Example:
      >>> jaxpr = plax.make_jaxpr(lambda x: (jnp.sin(x) * 2).sum())(jnp.ones(3)).jaxpr
      >>> list(find_clusters(jaxpr))   # reads x and the literal 2.0
      [Cluster(shape=(3,), [sin mul reduce_sum], 2 in, 1 out)]
      >>> jaxpr = plax.make_jaxpr(lambda x: lax.cumsum(jnp.exp(x)))(jnp.ones(3)).jaxpr
      >>> list(find_clusters(jaxpr, FusionOptions(cumulative=True)))
      [Cluster(shape=(3,), [exp cumsum], 1 in, 1 out)]
    """
    units = _find_clusters(jaxpr, options)
    if options.scalars:
        units = _fold_scalar_producers(jaxpr, list(units))
    if options.structural:
        units = _fold_structural(jaxpr, list(units), options.recompute_max_elements)
    if options.row_local > 0:
        units = _fold_row_local(jaxpr, list(units), options.row_local)
    if options.epilogues:
        units = _fold_epilogues(jaxpr, list(units), options)
    if options.horizontal > 0:
        units = horizontal_groups(list(units), options.horizontal, options.index)
    yield from units


class HorizontalGroup:
    """Independent elementwise units a backend may compute in one launch (see the module
    docstring): each member over its own shape, none reading another's results.

    Attributes:
      units: the grouped units as :func:`find_clusters` made them (:class:`Cluster` or
        ``JaxprEqn``), in program order: what the lowering runs one by one where the emitter
        declines the group.
      members: one :class:`Cluster` per unit (a lone equation as a cluster of one).
      inputs: the atoms the members read, each once, in first-use order.
      outputs: the members' outputs, member after member.
    """

    __slots__ = ("units", "members", "inputs", "outputs")

    def __init__(self, units: list, members: list):
        self.units, self.members = units, members
        seen: set = set()
        self.inputs = []
        for m in members:
            for v in m.inputs:
                if id(v) not in seen:
                    seen.add(id(v))
                    self.inputs.append(v)
        self.outputs = [v for m in members for v in m.outputs]

    def __repr__(self) -> str:
        shapes = " ".join(str(m.shape) for m in self.members)
        return f"HorizontalGroup({len(self.members)} members: {shapes})"


#: the most members one group takes (a generated kernel's parameter list is bounded on some
#: devices; a backend may still decline a group it cannot take)
HORIZONTAL_MAX_MEMBERS = 32


def horizontal_groups(units: list, max_elements: int, index: bool = False) -> list:
    """``units`` with each run of two or more consecutive, independent elementwise units of at
    most ``max_elements`` elements each made one :class:`HorizontalGroup`.

    Args:
      units: clusters and lone equations in program order (as :func:`find_clusters` yields).
      max_elements: the largest member (elements of its iteration shape).
      index: lone ``INDEX`` equations (``iota``) may be members (for a generator computing
        them from the index, ``FusionOptions.index``).

    Returns:
      A new list of :class:`Cluster`, ``JaxprEqn`` and :class:`HorizontalGroup`.

    Example:
      >>> def sgd(w, b, gw, gb):
      ...     return w - 0.1 * gw, b - 0.1 * gb
      >>> j = plax.make_jaxpr(sgd)(jnp.ones((3, 2)), jnp.ones(2), jnp.ones((3, 2)), jnp.ones(2))
      >>> list(find_clusters(j.jaxpr, FusionOptions(horizontal=1024)))
      [HorizontalGroup(2 members: (3, 2) (2,))]
    """
    out: list = []
    run: list = []       # (unit, member cluster)
    made: set = set()    # ids of every value the run's equations define

    def close():
        if len(run) >= 2:
            out.append(HorizontalGroup([u for u, _ in run], [m for _, m in run]))
        else:
            out.extend(u for u, _ in run)
        run.clear()
        made.clear()

    for unit in units:
        member = _horizontal_member(unit, max_elements, index)
        if member is not None and run and (
                len(run) >= HORIZONTAL_MAX_MEMBERS
                or any(isinstance(v, Var) and id(v) in made for v in member.inputs)):
            close()
        if member is None:
            close()
            out.append(unit)
            continue
        run.append((unit, member))
        made.update(id(v) for e in member.eqns for v in e.outvars)
    close()
    return out


def _horizontal_member(unit, max_elements: int, index: bool = False) -> Cluster | None:
    """``unit`` as a member of a :class:`HorizontalGroup`, or None where it cannot be one: a
    cluster with a reducing equation, an equation that is not single-result ``ELEMENTWISE``
    (or, with ``index``, ``INDEX``), a rank-0 or empty shape, or more than ``max_elements``
    elements."""
    if isinstance(unit, Cluster):
        if any(_fusion_kinds.get(e.primitive) in _REDUCING for e in unit.eqns):
            return None
        member = unit
    else:
        kinds = (ELEMENTWISE, INDEX) if index else (ELEMENTWISE,)
        if (_fusion_kinds.get(unit.primitive) not in kinds or len(unit.outvars) != 1
                or unit.primitive.multiple_results
                or _iteration_shape(unit, FusionOptions(index=index)) is None):
            return None
        member = Cluster([unit], tuple(unit.outvars[0].aval.shape), _inputs_of([unit]),
                         list(unit.outvars))
    size = math.prod(int(d) for d in member.shape)
    if not member.shape or not 0 < size <= max_elements or not member.outputs:
        return None
    return member


def _find_clusters(jaxpr: Jaxpr, options: FusionOptions
                   ) -> Iterator[Union[Cluster, JaxprEqn]]:
    readers_after: dict = {}  # var -> index of its last reader (the jaxpr's outputs: infinity)
    for i, eqn in enumerate(jaxpr.eqns):
        for v in eqn.invars:
            if isinstance(v, Var):
                readers_after[v] = i
    for v in jaxpr.outvars:
        if isinstance(v, Var):
            readers_after[v] = len(jaxpr.eqns)

    run: list = []
    run_shape = None
    reduced: set = set()

    def close(end: int):
        if len(run) == 1:
            return run[0]
        return _make_cluster(run, run_shape, end, readers_after)

    in_run: set = set()  # the outputs of the run's equations
    for i, eqn in enumerate(jaxpr.eqns):
        shape = _iteration_shape(eqn, options)
        kind = _fusion_kinds.get(eqn.primitive) if shape is not None else None
        if (shape == () and run and run_shape != ()
                and not any(v in in_run for v in eqn.invars if isinstance(v, Var))):
            # A scalar computation the run does not feed (a weakly typed bound converted for
            # clip, a scale factor) runs before the run instead of cutting it in two.
            yield eqn
            continue
        joins = (shape is not None and run and shape == run_shape
                 and not any(v in reduced for v in eqn.invars if isinstance(v, Var))
                 and not (kind == CUMULATIVE and reduced))  # (a scan: no reduction before)
        if not joins and run:
            yield close(i)
            run, reduced, in_run = [], set(), set()
        if shape is None:
            yield eqn
            continue
        if not run:
            run_shape = shape
        run.append(eqn)
        in_run.update(eqn.outvars)
        if kind in _REDUCING:
            reduced.add(eqn.outvars[0])
        if kind == CUMULATIVE:  # a scan ends its cluster (its axis orders the loop)
            yield close(i + 1)
            run, reduced, in_run = [], set(), set()
    if run:
        yield close(len(jaxpr.eqns))


def _make_cluster(eqns: list, shape: tuple, end: int, readers_after: dict) -> Cluster:
    outputs = [v for e in eqns for v in e.outvars if readers_after.get(v, -1) >= end]
    return Cluster(list(eqns), shape, _inputs_of(eqns), outputs)


def _scalar_producer(unit) -> list | None:
    """The equations of ``unit`` if it computes rank-0 values from rank-0 values only (a lone
    elementwise equation or a cluster of shape ``()``), else None."""
    eqns = unit.eqns if isinstance(unit, Cluster) else [unit]
    for e in eqns:
        if (_fusion_kinds.get(e.primitive) != ELEMENTWISE or e.primitive.multiple_results
                or any(tuple(v.aval.shape) != () for v in list(e.invars) + list(e.outvars))):
            return None
    return eqns


def _fold_scalar_producers(jaxpr: Jaxpr, units: list) -> list:
    """``units`` with each scalar producer whose every reader lies in one later cluster of
    another shape moved into that cluster, ahead of its equations (see the module
    docstring). Moving an equation later keeps the order valid: its operands are defined
    before its old place, its readers all after the cluster's start."""
    outputs = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
    _, where = _unit_links(units)   # (id(var) -> indices of the units reading it)
    for i in range(len(units) - 1, -1, -1):  # (last first: a chain folds link by link)
        eqns = _scalar_producer(units[i])
        if eqns is None:
            continue
        made = [v for e in eqns for v in e.outvars]
        if any(id(v) in outputs for v in made):
            continue
        readers = set().union(*(where.get(id(v), set()) for v in made)) - {i}
        if len(readers) != 1:
            continue
        (j,) = readers
        target = units[j]
        if not isinstance(target, Cluster) or target.shape == ():
            continue
        inside = {id(v) for v in made}
        inputs = [v for v in _inputs_of(eqns) if id(v) not in inside]
        kept = [v for v in target.inputs if not (isinstance(v, Var) and id(v) in inside)]
        seen, merged_inputs = set(), []
        for v in inputs + kept:
            if id(v) not in seen:
                seen.add(id(v))
                merged_inputs.append(v)
        units[j] = Cluster(list(eqns) + list(target.eqns), target.shape, merged_inputs,
                           target.outputs)
        units[i] = None
        for v in _inputs_of(eqns):  # (what the moved equations read is now read by unit j)
            if isinstance(v, Var):
                where.setdefault(id(v), set()).discard(i)
                where[id(v)].add(j)
    return [u for u in units if u is not None]


def _unit_eqns(unit) -> list:
    return unit.eqns if isinstance(unit, Cluster) else [unit]


def _unit_links(units: list) -> tuple[dict, dict]:
    """``(producer, readers)`` of ``units`` (clusters and lone equations in program order, None
    for a place emptied by a fold): ``producer[id(var)]`` the index of the unit defining the
    value, ``readers[id(var)]`` the set of indices of the units reading it. The folds keep
    both current as they merge units (each update in place: no set copied per merge)."""
    producer: dict = {}
    readers: dict = {}
    for i, unit in enumerate(units):
        if unit is None:
            continue
        for e in _unit_eqns(unit):
            for v in e.invars:
                if isinstance(v, Var):
                    readers.setdefault(id(v), set()).add(i)
            for v in e.outvars:
                producer[id(v)] = i
    return producer, readers


def _absorbable(unit) -> bool:
    """Whether ``unit`` may be computed inside a later unit at the indices it is read at: its
    equations elementwise (multi-result ones too), index, broadcast or structural ones, none
    reducing."""
    return all(_fusion_kinds.get(e.primitive) in (ELEMENTWISE, INDEX, BROADCAST, STRUCTURAL)
               for e in _unit_eqns(unit))


#: how many times over structural fusion may compute a value that is not cheap: a unit whose
#: values have fewer than ``1 / STRUCTURAL_MAX_REPEAT`` of the reader's elements is not
#: absorbed unless it is cheap (:func:`_cheap`), as each element of the reader computes the
#: value it reads (above ``FusionOptions.recompute_max_elements``). Four: the 8-bit fields
#: unpacked from a 32-bit random word (an element then hashes one counter pair, as in the
#: partitionable layout); a key split in the program before a large sampler stays a kernel of
#: its own (else each sample would hash the key again)
STRUCTURAL_MAX_REPEAT = 4


def _cheap(unit) -> bool:
    """Whether ``unit`` computes only index maps (structural equations, ``iota``, broadcasts)
    and cheap arithmetic (``CHEAP_ELEMENTWISE``): nothing to save by computing it once."""
    from plax.lowering.simplify import CHEAP_ELEMENTWISE
    return all(_fusion_kinds.get(e.primitive) in (INDEX, BROADCAST, STRUCTURAL)
               or e.primitive.name in CHEAP_ELEMENTWISE for e in _unit_eqns(unit))


def _too_small(unit, size: int, recompute_max_elements: int, reads: int | None = None) -> bool:
    """Whether ``unit``'s values are too small, for a reader of ``size`` elements (above
    ``recompute_max_elements``) that evaluates them ``reads`` times (``size`` unless a pad or
    a concatenation in between fills the rest: :func:`_reads_through`), to be computed per
    element (:data:`STRUCTURAL_MAX_REPEAT`), and not cheap."""
    if size <= recompute_max_elements:
        return False
    largest = max((math.prod(v.aval.shape) for e in _unit_eqns(unit) for v in e.outvars),
                  default=0)
    return largest * STRUCTURAL_MAX_REPEAT < (size if reads is None else reads) and \
        not _cheap(unit)


def _reads_through(eqn: JaxprEqn, operand, reads: int) -> int:
    """How many evaluations of ``operand`` a unit evaluated ``reads`` times makes through
    ``eqn``: a ``pad`` (of its operand) or a ``concatenate`` reads each operand element at
    most once and fills the rest of its result otherwise (padding, other pieces), so only
    the operand's share of ``reads``; a ``gather`` reads its indices' whole index vector per
    element; any other equation (a broadcast repeats) all of them."""
    name = eqn.primitive.name
    if name == "gather" and operand is eqn.invars[1]:   # (each element reads its index vector)
        return reads * int(operand.aval.shape[-1])
    if _fusion_kinds.get(eqn.primitive) != STRUCTURAL or name not in ("concatenate", "pad") or \
            (name == "pad" and operand is not eqn.invars[0]):
        return reads
    made = math.prod(eqn.outvars[0].aval.shape)
    share = math.prod(operand.aval.shape) * sum(v is operand for v in eqn.invars)   # (x twice)
    return reads if made == 0 else min(reads, -(-reads * share // made))


#: structural equations whose result a backend cannot hand back as a view of its operand's
#: memory (a strided view): each is a copy kernel of its own unless a reader absorbs it
_BUILDS_NEW_ARRAY = ("concatenate", "pad", "dynamic_slice", "gather")   # (starts, indices on the device)

#: structural primitives (names) that keep every element at its flat (C-order) index (a
#: ``reshape`` without ``dimensions``, a ``squeeze``): read through, they move nothing, and a
#: generator reads their operand at the same flat index
KEEPS_ORDER = ("reshape", "squeeze")


def _is_view(eqn: JaxprEqn) -> bool:
    """A slice, reshape, squeeze, transpose or rev: a backend can hand back its operand's
    memory (with other strides)."""
    return _fusion_kinds.get(eqn.primitive) == STRUCTURAL and \
        eqn.primitive.name not in _BUILDS_NEW_ARRAY


def _moves_elements(eqn: JaxprEqn) -> bool:
    """A slice, concatenation, pad, transpose or rev: a structural equation that is not the
    same elements in the same order (a reshape or squeeze, which a generator reads at the
    same flat index)."""
    return _fusion_kinds.get(eqn.primitive) == STRUCTURAL and \
        eqn.primitive.name not in KEEPS_ORDER


def _fold_structural(jaxpr: Jaxpr, units: list, recompute: int = 0) -> list:
    """``units`` with each unit that reads values through structural equations merged with the
    units that feed it (see the module docstring): the merged cluster takes the reader's
    place and shape. Moving the absorbed equations to the reader's place keeps the order
    valid: each is read only by the group, and what it reads was computed before its old
    place."""
    outputs = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
    producer, readers = _unit_links(units)
    # whether a slice or concatenation / an equation other than a view is in the unit or in
    # what it could absorb (absorbable units upstream, none an output): a group of a unit
    # without both is dropped however it grows (below), so it is not grown (else a program of
    # views and elementwise equations grew each unit's whole feed: cubic in its length)
    moves: list = []
    other: list = []
    opens: list = []   # whether the unit could be absorbed at all
    for i, unit in enumerate(units):
        eqns = _unit_eqns(unit)
        opens.append(_absorbable(unit) and
                     not any(id(w) in outputs for e in eqns for w in e.outvars))
        feeds = [p for p in {producer.get(id(v)) for e in eqns for v in e.invars
                             if isinstance(v, Var)} if p is not None and p < i and opens[p]]
        moves.append(any(map(_moves_elements, eqns)) or any(moves[p] for p in feeds))
        other.append(not all(map(_is_view, eqns)) or any(other[p] for p in feeds))
    # a member of a dropped group, itself a reader of at least that group's reader's size,
    # would grow a part of that group (its bound on what is too small no tighter) while no
    # merge changed what the group saw: dropped too (else each unit of a long chain cut off
    # from its slice grew the chain again: quadratic)
    merges = 0
    dropped: dict = {}   # unit index -> (reader's size, merges) of a dropped group holding it
    for j in range(len(units) - 1, -1, -1):   # (last first: a reader takes its whole feed)
        sink = units[j]
        if sink is None or not (moves[j] and other[j]):
            continue
        if isinstance(sink, Cluster):
            if any(_fusion_kinds.get(e.primitive) not in (ELEMENTWISE, INDEX, BROADCAST, REDUCTION,
                                                               ARG_REDUCTION)
                   for e in sink.eqns):
                continue
        elif (_fusion_kinds.get(sink.primitive) not in (ELEMENTWISE, STRUCTURAL)
              or len({tuple(v.aval.shape) for v in sink.outvars}) != 1):
            continue   # (a multi-result sink, threefry2x32, stores its results of one shape)
        size = math.prod(sink.shape if isinstance(sink, Cluster) else sink.outvars[0].aval.shape)
        seen = dropped.get(j)
        if seen is not None and seen[0] <= size and seen[1] == merges:
            continue
        # each member offers the units feeding it; members are expanded last first (a unit's
        # readers all come after it), so when one is, every member reading it has counted its
        # reads (each reader its share) and has joined or been refused: only then is it kept
        # (its values read by members only, not too small for that many reads) or left out
        group = {j}
        todo = [-j]   # (a max-heap of the members to expand)
        reads = {j: size}   # member -> evaluations of its values per call (an upper bound)
        while todo:
            g = -heapq.heappop(todo)
            if g != j and (_too_small(units[g], size, recompute, reads[g]) or any(
                    r != g and r not in group
                    for e in _unit_eqns(units[g]) for w in e.outvars for r in readers.get(id(w), ()))):
                group.discard(g)
                continue
            for e in _unit_eqns(units[g]):
                for v in e.invars:
                    p = producer.get(id(v)) if isinstance(v, Var) else None
                    if p is None or p == g:
                        continue
                    through = _reads_through(e, v, reads[g])
                    if p in group:
                        reads[p] += through
                        continue
                    if units[p] is None or not _absorbable(units[p]) or any(
                            id(w) in outputs for e2 in _unit_eqns(units[p]) for w in e2.outvars):
                        continue
                    group.add(p)
                    heapq.heappush(todo, -p)
                    reads[p] = through
        eqns = [e for g in sorted(group) for e in _unit_eqns(units[g])]
        if len(group) == 1 or not any(_moves_elements(e) for e in eqns) or \
                all(_is_view(e) for e in eqns):
            for g in group:   # (views alone launch nothing: a kernel would only copy)
                seen = dropped.get(g)
                if seen is None or seen[1] != merges or seen[0] > size:
                    dropped[g] = (size, merges)
            continue
        merges += 1
        if isinstance(sink, Cluster):
            shape, outs = sink.shape, list(sink.outputs)
        else:
            shape, outs = tuple(sink.outvars[0].aval.shape), list(sink.outvars)
        inputs = _inputs_of(eqns)
        units[j] = Cluster(eqns, shape, inputs, outs, [units[g] for g in sorted(group)])
        for g in group - {j}:
            units[g] = None
        for v in inputs:   # (what the absorbed equations read is now read by unit j)
            if isinstance(v, Var):
                users = readers.setdefault(id(v), set())
                users -= group   # (in place: a shared operand's reader set is not copied per merge)
                users.add(j)
        for e in eqns:
            for v in e.outvars:
                producer[id(v)] = j
    return [u for u in units if u is not None]


def _inputs_of(eqns: list) -> list:
    """What ``eqns`` read from outside themselves (Vars and Literals), in first-use order."""
    defined, seen, inputs = set(), set(), []
    for e in eqns:
        for v in e.invars:
            if (isinstance(v, Literal) or id(v) not in defined) and id(v) not in seen:
                seen.add(id(v))
                inputs.append(v)
        defined.update(id(o) for o in e.outvars)
    return inputs


def _reduction_outputs(unit, options: FusionOptions) -> tuple | None:
    """The results' shape of the reductions of ``unit`` (a cluster without an epilogue, or a
    lone equation) if it may take an epilogue: some ``REDUCTION`` or ``ARG_REDUCTION`` (where
    asked) equations, all of one ``axes`` and result shape, no ``CUMULATIVE`` one; else
    None."""
    if isinstance(unit, Cluster):
        if unit.epilogue or unit.row_axes:
            return None
        eqns = unit.eqns
    elif _iteration_shape(unit, options) is None:
        return None
    else:
        eqns = [unit]
    kinds = [fusion_kind(e.primitive, options.index, options.arg_reductions, options.cumulative)
             for e in eqns]
    reducing = [e for e, k in zip(eqns, kinds) if k in (REDUCTION, ARG_REDUCTION)]
    if not reducing or CUMULATIVE in kinds or len(
            {(tuple(e.params.get("axes", ())), tuple(e.outvars[0].aval.shape))
             for e in reducing}) != 1:
        return None
    return tuple(reducing[0].outvars[0].aval.shape)


def _epilogue_eqns(unit, shape: tuple, options: FusionOptions) -> list | None:
    """The equations of ``unit`` if it may be an epilogue over ``shape`` (a cluster of that
    shape without parts, reducing kinds or several results, or such a lone ``ELEMENTWISE``,
    ``BROADCAST`` or, with ``index``, ``INDEX`` equation), else None."""
    if isinstance(unit, Cluster):
        if unit.parts is not None or unit.epilogue or tuple(unit.shape) != shape:
            return None
        eqns = unit.eqns
    else:
        eqns = [unit]
    kinds = (ELEMENTWISE, BROADCAST, INDEX) if options.index else (ELEMENTWISE, BROADCAST)
    for e in eqns:
        if (_fusion_kinds.get(e.primitive) not in kinds or e.primitive.multiple_results
                or len(e.outvars) != 1 or tuple(e.outvars[0].aval.shape) != shape
                or _iteration_shape(e, options) != shape):
            return None
    return eqns


def _fold_epilogues(jaxpr: Jaxpr, units: list, options: FusionOptions) -> list:
    """``units`` with each reducing unit given the later elementwise units that compute on its
    results as its epilogue (see the module docstring): the merged cluster takes the reducing
    unit's place; its outputs are what later units or the jaxpr read of its values."""
    outputs = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
    producer, readers = _unit_links(units)
    for i, unit in enumerate(units):
        if unit is None:
            continue
        shape = _reduction_outputs(unit, options)
        if shape is None:
            continue
        own = _unit_eqns(unit)
        final = {id(e.outvars[0]) for e in own
                 if fusion_kind(e.primitive, arg_reductions=options.arg_reductions)
                 in (REDUCTION, ARG_REDUCTION)}
        readable = set(final)   # (values of the merged unit an epilogue may read)
        merged, epilogue = [i], []
        # only a reader of a readable value may join: those, in program order (a unit's
        # readers all come after it, so a joining unit's readers are still ahead)
        todo = sorted({k for v in final for k in readers.get(v, ()) if k > i})
        seen = set(todo)
        while todo:
            k = heapq.heappop(todo)
            eqns = None if units[k] is None else _epilogue_eqns(units[k], shape, options)
            if eqns is None:
                continue
            made = {id(v) for e in eqns for v in e.outvars}
            reads = [v for e in eqns for v in e.invars
                     if isinstance(v, Var) and id(v) not in made]
            if not all(id(v) in readable or producer.get(id(v), -1) < i for v in reads):
                continue
            merged.append(k)
            epilogue += eqns
            readable |= made
            for r in {r for v in made for r in readers.get(v, ()) if r > k} - seen:
                seen.add(r)
                heapq.heappush(todo, r)
        if not epilogue:
            continue
        eqns = list(own) + epilogue
        taken = set(merged)
        outs = [v for e in eqns for v in e.outvars
                if id(v) in outputs or readers.get(id(v), set()) - taken]
        shape_of = unit.shape if isinstance(unit, Cluster) else _iteration_shape(unit, options)
        parts = [units[k] for k in merged]
        inputs = _inputs_of(eqns)
        units[i] = Cluster(eqns, tuple(shape_of), inputs, outs, parts, epilogue)
        for k in merged[1:]:
            units[k] = None
        # (its epilogue's values are now computed at i; ``readers`` is only consulted for
        # values a later reducing unit or its epilogue computes, never for these inputs)
        for v in (w for e in epilogue for w in e.outvars):
            producer[id(v)] = i
    return [u for u in units if u is not None]


#: primitives (names) computing their operand itself, which a row-local cluster takes as the
#: value they read (``stop_gradient``, left in a program after differentiation: elsewhere a
#: lone equation that launches nothing, but one that would cut the cluster in two)
ROW_LOCAL_IDENTITIES = ("stop_gradient",)


def _index_producer(unit) -> list | None:
    """``[unit]`` if it is a lone ``iota`` (``one_hot``'s class indices: values of the index
    alone, which a row-local cluster computes per element where a broadcast reads them),
    else None."""
    if isinstance(unit, Cluster) or unit.primitive.name != "iota" or \
            unit.params.get("sharding") is not None:
        return None
    return [unit]


def _early_units(units: list, producer: dict, reads: list, start: int, made: set, shape: tuple,
                 m: int) -> set | None:
    """The units at or after ``start`` (a row-local group's first unit) computing what
    ``reads`` (values a unit joining the group reads) needs, which may move to ``start`` with
    it: scalar producers (``-inf`` converted for a max), iotas (``one_hot``'s class
    indices) and units of row-local work on the same rows that do not read the group (the
    ``one_hot`` half of a cross-entropy's gradient), and in turn what they read; None where
    one cannot move. ``made``: the values the group makes (ids)."""
    stack = [producer[id(v)] for v in reads if producer.get(id(v), -1) >= start]
    found: set = set()
    while stack:
        p = stack.pop()
        if p in found:
            continue
        unit = units[p]
        if unit is None or p == start:
            return None
        found.add(p)
        eqns = _unit_eqns(unit)
        own = {id(v) for e in eqns for v in e.outvars}
        if _scalar_producer(unit) is None and _index_producer(unit) is None:
            if not all(_row_local_eqn(e, shape, m, lambda v: id(v) not in own) for e in eqns):
                return None
        stack += [producer[id(v)] for e in eqns for v in e.invars if isinstance(v, Var)
                  and id(v) not in own and id(v) not in made and producer.get(id(v), -1) >= start]
    return found


def _row_geometry(unit, max_row: int) -> tuple | None:
    """``(shape, row_axes)`` where ``unit`` (a cluster or a lone equation) may start a
    row-local cluster: it has ``REDUCTION`` equations, all over the same trailing axes of
    operands of one shape, whose rows have 2 to ``max_row`` elements; else None. (The folds
    before this one make plain clusters and structural groups, whose equations are checked
    one by one; row-local and epilogue clusters are only formed from here on.)"""
    reducing = [e for e in _unit_eqns(unit) if _fusion_kinds.get(e.primitive) == REDUCTION]
    layouts = {(tuple(e.invars[0].aval.shape), tuple(sorted(int(a) for a in e.params["axes"])))
               for e in reducing}
    if len(layouts) != 1:
        return None
    ((shape, axes),) = layouts
    rank, m = len(shape), len(axes)
    if not m or axes != tuple(range(rank - m, rank)) or \
            not 2 <= math.prod(shape[rank - m:]) <= max_row:
        return None
    return shape, m


def per_row(value_shape: tuple, kept: tuple) -> bool:
    """Whether a value of ``value_shape`` holds one element per row of a row-local cluster
    whose kept axes are ``kept``: the kept axes followed by any number of size-1 axes (a
    reduction's result, kept or not; ``labels[:, None, None]``, an index vector per row).

    Example:
      >>> per_row((64,), (64,)), per_row((64, 1, 1), (64,)), per_row((64, 10), (64,))
      (True, True, False)
    """
    return value_shape[:len(kept)] == kept and all(d == 1 for d in value_shape[len(kept):])


#: the most labels a row a row-local group picks or scatters at (``take_along_axis`` with a
#: ``(n, k)`` index: top-k accuracy, multi-label losses): each is an accumulator of the row's
#: kernel, and a value of ``k`` labels a row ``k`` registers a thread
ROW_LOCAL_MAX_LABELS = 8


def labels_per_row(value_shape: tuple, kept: tuple, row: int) -> int:
    """How many labels a row a value of ``value_shape`` holds in a row-local cluster whose kept
    axes are ``kept`` and whose rows have ``row`` elements: the kept axes, then ``k`` (2 to
    :data:`ROW_LOCAL_MAX_LABELS`, fewer than the row's elements), then any number of size-1
    axes -- ``idx[:, :k]`` of ``take_along_axis`` and what it picks; 0 for other shapes (one
    per row among them: :func:`per_row`).

    Example:
      >>> labels_per_row((64, 2), (64,), 10), labels_per_row((64, 2, 1), (64,), 10)
      (2, 2)
      >>> labels_per_row((64, 1), (64,), 10), labels_per_row((64, 10), (64,), 10)
      (0, 0)
    """
    n = len(kept)
    if len(value_shape) <= n or value_shape[:n] != kept or \
            any(d != 1 for d in value_shape[n + 1:]):
        return 0
    k = value_shape[n]
    return k if 2 <= k <= ROW_LOCAL_MAX_LABELS and k < row else 0


def _per_row_values(value_shape: tuple, kept: tuple, row: int) -> int:
    """Values a row of a ``value_shape`` value holds: 1 one per row (:func:`per_row`), ``k``
    with ``k`` labels a row (:func:`labels_per_row`), else 0."""
    return 1 if per_row(value_shape, kept) else labels_per_row(value_shape, kept, row)


def _row_local_indexing(eqn: JaxprEqn, shape: tuple, m: int) -> bool:
    """Whether ``eqn`` is a ``gather`` or ``scatter-add`` that selects one element *within*
    each row of a row-local cluster over ``shape`` (rows: its last axis, ``m == 1``): the
    operand row-shaped, the indices (and a scatter's updates) one per row, the rows' kept axes
    the batching dimensions of both, the one index naming the row's axis, a window of one
    element, collapsed or kept as a trailing size-1 axis of the result (updates) --
    ``take_along_axis(x, labels[:, None], -1)`` and its transpose, the scatter-add of the
    cotangent into a zeros row, and under ``vmap`` ``logp[label]`` of a per-example loss
    and its transpose (the window kept); or ``k`` indices a row (:func:`labels_per_row`:
    ``take_along_axis(x, idx[:, :k], -1)``), the labels' axis a batch axis of the result and
    the updates. Each row's block then reads (a gather: the element at the row's index) or
    writes (a scatter: the update added at the row's index) its own row."""
    name, rank = eqn.primitive.name, len(shape)
    if m != 1 or name not in ("gather", "scatter-add") or \
            tuple(eqn.invars[0].aval.shape) != shape:
        return False
    kept = shape[:rank - 1]
    indices = tuple(eqn.invars[1].aval.shape)
    # (one index a row, or k of them: ``idx[:, :k, None]``, whose labels' axis is a batch
    # axis of the gather's result and the scatter's updates)
    count = _per_row_values(indices[:-1], kept, shape[-1]) if indices else 0
    if not indices or indices[-1] != 1 or not count or \
            eqn.invars[1].aval.dtype.kind not in "iu":
        return False
    dn, batch, row_axis = eqn.params["dimension_numbers"], tuple(range(rank - 1)), (rank - 1,)
    if name == "gather":
        out = tuple(eqn.outvars[0].aval.shape)
        # (the row's axis collapsed, or its window of one kept as the result's last axis)
        window = (tuple(dn.offset_dims), tuple(dn.collapsed_slice_dims)) in \
            (((), row_axis), ((len(out) - 1,), ()))
        return window and tuple(dn.start_index_map) == row_axis and \
            tuple(dn.operand_batching_dims) == batch and \
            tuple(dn.start_indices_batching_dims) == batch and \
            tuple(eqn.params["slice_sizes"]) == (1,) * rank and \
            _per_row_values(out, kept, shape[-1]) == count
    updates = tuple(eqn.invars[2].aval.shape)
    window = (tuple(dn.update_window_dims), tuple(dn.inserted_window_dims), updates) in \
        (((), row_axis, indices[:-1]), ((len(indices) - 1,), (), indices[:-1] + (1,)))
    return window and tuple(dn.scatter_dims_to_operand_dims) == row_axis and \
        tuple(dn.operand_batching_dims) == batch and \
        tuple(dn.scatter_indices_batching_dims) == batch and \
        tuple(eqn.outvars[0].aval.shape) == shape


def _row_local_eqn(eqn: JaxprEqn, shape: tuple, m: int, is_input) -> bool:
    """Whether ``eqn`` may be part of a row-local cluster over ``shape`` whose rows are its
    ``m`` trailing axes: each value it reads or makes is row-shaped (``shape``), one per row
    (the kept axes followed by size-1 axes: :func:`per_row`) or rank 0; it is a reduction of
    the rows, single-result elementwise work, a ``broadcast_in_dim`` of a per-row or rank-0
    value over the rows or to another per-row shape (or of an input of the cluster,
    ``is_input(var)``, read through its index map), a ``reshape``/``squeeze`` between per-row
    shapes, or a gather/scatter-add within the rows (:func:`_row_local_indexing`). Where rows
    are one axis, values of ``k`` labels a row (:func:`labels_per_row`) count as per-row ones
    of their own kind: elementwise among themselves, broadcast from per-row or rank-0 values
    or between shapes of the same ``k``, the indices, picks and updates of a gather or
    scatter-add of ``k`` elements a row."""
    if eqn.primitive.multiple_results or len(eqn.outvars) != 1:
        return False
    kept = shape[:len(shape) - m]
    row = math.prod(shape[len(kept):])

    def values(s: tuple) -> int:   # (a row's values of a per-row shape: 1, k labels; else 0)
        return _per_row_values(s, kept, row) if m == 1 else int(per_row(s, kept))

    out = tuple(eqn.outvars[0].aval.shape)
    if out != shape and not values(out) and out != ():
        return False
    kind = _fusion_kinds.get(eqn.primitive)
    if kind == REDUCTION:
        return tuple(eqn.invars[0].aval.shape) == shape and out == kept and \
            tuple(sorted(int(a) for a in eqn.params["axes"])) == tuple(range(len(kept), len(shape)))
    if kind == ELEMENTWISE:
        return all(tuple(v.aval.shape) in (out, ()) for v in eqn.invars)
    op = eqn.invars[0] if eqn.invars else None
    if kind == BROADCAST:
        if eqn.params.get("sharding") is not None:
            return False
        src, dims = tuple(op.aval.shape), tuple(eqn.params["broadcast_dimensions"])
        if src == () or (per_row(src, kept) and dims[:len(kept)] == tuple(range(len(kept)))):
            return True   # (the same value for the whole row)
        if values(src) > 1:   # (k labels a row to another shape of k labels a row)
            n = len(kept) + 1
            return values(out) == values(src) and dims[:n] == tuple(range(n))
        return out == shape and isinstance(op, Var) and is_input(op)
    if eqn.primitive.name in ROW_LOCAL_IDENTITIES:
        return tuple(op.aval.shape) == out
    if kind == STRUCTURAL and eqn.primitive.name in KEEPS_ORDER:
        return values(out) > 0 and values(tuple(op.aval.shape)) == values(out) and \
            eqn.params.get("dimensions") is None
    return _row_local_indexing(eqn, shape, m)


def _rereads_rows(eqns: list, shape: tuple) -> bool:
    """Whether a row-shaped value of ``eqns`` depends on a reduction among them: the pattern
    only a row-local cluster fuses (work on a reduction's results alone is an epilogue)."""
    after: set = set()
    for e in eqns:
        if _fusion_kinds.get(e.primitive) == REDUCTION or \
                any(isinstance(v, Var) and id(v) in after for v in e.invars):
            if _fusion_kinds.get(e.primitive) != REDUCTION and \
                    tuple(e.outvars[0].aval.shape) == shape:
                return True
            after.update(id(v) for v in e.outvars)
    return False


def _row_part(unit, shape: tuple, m: int) -> tuple[list, list]:
    """``(taken, rest)``: the equations of ``unit`` a row-local group over ``shape`` may take
    and those left in place. A plain cluster (no parts, no epilogue) whose reductions over
    other axes than the rows' are read by nothing in it -- a bias gradient's column sums of
    the cotangent the group computes, under ``grad`` of a per-example loss -- leaves those
    reductions (``rest``) and offers its other equations; any other unit offers all of its
    own (``rest`` empty)."""
    eqns = _unit_eqns(unit)
    if not isinstance(unit, Cluster) or unit.parts is not None or unit.epilogue or \
            unit.row_axes:
        return eqns, []
    rest = [e for e in eqns if _fusion_kinds.get(e.primitive) == REDUCTION and
            not _row_local_eqn(e, shape, m, lambda v: False)]
    reduced = {id(v) for e in rest for v in e.outvars}
    if not rest or len(rest) == len(eqns) or \
            any(id(v) in reduced for e in eqns for v in e.invars if isinstance(v, Var)):
        return eqns, []
    return [e for e in eqns if not any(e is r for r in rest)], rest


def _rest_unit(rest: list, shape: tuple, outputs: set, readers: dict):
    """The unit of the reductions ``rest`` a row-local group left in place
    (:func:`_row_part`): the lone equation, or a cluster of them over ``shape`` whose outputs
    are those read later (``readers``: by any unit, the rest read their operands) or returned
    (``outputs``)."""
    if len(rest) == 1:
        return rest[0]
    later = {id(v) for e in rest for v in e.outvars if id(v) in outputs or readers.get(id(v))}
    return sub_cluster(rest, shape, later)


def _fold_row_local(jaxpr: Jaxpr, units: list, max_row: int) -> list:
    """``units`` with each unit that reduces rows of at most ``max_row`` elements merged with
    the later units computing on those rows and their results (see the module docstring,
    "Row-local clusters"): the merged cluster takes the reducing unit's place, which is a
    valid order because every value it reads from outside is computed before that place."""
    outputs = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
    producer, readers = _unit_links(units)
    for i, unit in enumerate(units):
        geometry = None if unit is None else _row_geometry(unit, max_row)
        if geometry is None:
            continue
        shape, m = geometry
        own = _unit_eqns(unit)
        made = {id(v) for e in own for v in e.outvars}
        outside = (lambda v: id(v) not in made)
        if not all(_row_local_eqn(e, shape, m, outside) for e in own):
            continue
        merged = [i]
        split: dict = {}   # k -> (its equations taken in, the reductions left at k)

        def eqns_of(k: int) -> list:
            return split[k][0] if k in split else _unit_eqns(units[k])

        indices: set = set()   # (the values of iotas taken in: read through their index map)
        todo = sorted({k for v in made for k in readers.get(v, ()) if k > i})
        seen = set(todo)
        while todo:   # (in program order: a unit's readers all come after it)
            k = heapq.heappop(todo)
            cand = units[k]
            if cand is None or k in merged:
                continue
            theirs, rest = _row_part(cand, shape, m)
            new = {id(v) for e in theirs for v in e.outvars}
            reads = [v for e in theirs for v in e.invars
                     if isinstance(v, Var) and id(v) not in new and id(v) not in made]
            early = _early_units(units, producer, reads, i, made, shape, m)
            if early is None:
                continue
            # (an iota moves in only where the group alone reads it, as before the start: its
            # values cannot leave a row-local cluster, which a generator would decline whole)
            taking = set(merged) | early | {k}
            if any(id(v) in outputs or readers.get(id(v), set()) - taking
                   for p in early if _index_producer(units[p]) for v in units[p].outvars):
                continue
            inside = made | {id(v) for p in early for e in _unit_eqns(units[p]) for v in e.outvars}
            indices |= {id(v) for p in early if _index_producer(units[p]) for v in units[p].outvars}
            if not all(_row_local_eqn(e, shape, m, lambda v: (id(v) not in inside or
                                                             id(v) in indices) and id(v) not in new)
                       for e in theirs):
                continue
            merged.extend(sorted(early))
            made = inside
            merged.append(k)
            if rest:
                split[k] = (theirs, rest)
            made |= new
            for r in {r for v in new for r in readers.get(v, ()) if r > k} - seen:
                seen.add(r)
                heapq.heappush(todo, r)
        # (a scalar producer before the start read by the group alone, -inf converted for a
        # max, or an iota, moves later into it: the group computes it per row from its
        # operands, or per element from its index)
        grown = True
        while grown and len(merged) > 1:
            grown = False
            reads = {producer.get(id(v), -1) for k in merged for e in eqns_of(k)
                     for v in e.invars if isinstance(v, Var) and id(v) not in made}
            for p in sorted(r for r in reads if r >= 0 and r not in merged):
                theirs = None if units[p] is None else \
                    _scalar_producer(units[p]) or _index_producer(units[p])
                new = {id(v) for e in theirs or () for v in e.outvars}
                if theirs and not new & outputs and all(
                        readers.get(v, set()) <= set(merged) for v in new):
                    merged.append(p)
                    made |= new
                    grown = True
        merged.sort()
        eqns = [e for k in merged for e in eqns_of(k)]
        if len(merged) == 1 or not _rereads_rows(eqns, shape):
            continue
        taken = set(merged)
        left = {id(v) for _, rest in split.values() for e in rest for v in e.invars}
        outs = [v for e in eqns for v in e.outvars
                if id(v) in outputs or id(v) in left or readers.get(id(v), set()) - taken]
        # (a split unit's part, as a generator declining the group lowers it: a cluster whose
        # outputs are what the group's other parts, the reductions left or later units read)
        read_later = {id(v) for v in outs} | left | \
            {id(v) for e in eqns for v in e.invars if isinstance(v, Var)}
        parts = [sub_cluster(split[k][0], units[k].shape, read_later) if k in split else units[k]
                 for k in merged]
        units[i] = Cluster(eqns, shape, _inputs_of(eqns), outs, parts, row_axes=m)
        for k in merged:
            if k != i:
                units[k] = _rest_unit(split[k][1], units[k].shape, outputs, readers) \
                    if k in split else None
        for v in (w for e in eqns for w in e.outvars):   # (all made at i now; what they
            producer[id(v)] = i                            # read is read by i)
        for v in units[i].inputs:
            if isinstance(v, Var):
                users = readers.setdefault(id(v), set())
                users -= taken
                users.add(i)
        for k, (_, rest) in split.items():   # (what a unit's reductions left at k read)
            for v in (w for e in rest for w in e.invars if isinstance(w, Var)):
                readers.setdefault(id(v), set()).add(k)
    return [u for u in units if u is not None]
