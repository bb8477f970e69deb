"""Whole jaxprs as one ``numba.njit`` function: native control flow and whole-program kernels.

:func:`plan_program` writes a module whose ``kernel`` computes a complete jaxpr without
returning to Python: fusion clusters become loop kernels of :mod:`plax_numba.codegen`, each
the ``kernel`` of a module of its own keyed by its source, which every program holding it
shares (compiled once per process, kept in numba's disk cache: :func:`_kernel_modules`), and
every other equation becomes a few lines of array code inside ``kernel``:

* ``reshape``/``squeeze``/``expand_dims`` as views, ``transpose``/``rev``/``slice`` as
  contiguous copies, ``dynamic_slice``/``dynamic_update_slice`` with XLA's clamped starts,
  ``concatenate``, ``stack``, ``unstack``, ``split``, ``pad`` (no interior padding), ``iota``;
* ``dot_general`` as a batched product of ``(batch, m, k)`` by ``(batch, k, n)``: BLAS
  (``np.dot``) for float products of at least :data:`BLAS_MIN`
  multiply-adds, the loops of :mod:`plax_numba.arrays` below that and for integers; float
  matrix-vector products up to :data:`MATVEC_MAX` whose matrix is at hand in ``(k, m)``
  layout (contracted on its first axis, or a loop invariant whose transpose is hoisted
  before the loop) run the inlined ``matvec_t`` (``k``-order sums, vectorised over the
  outputs), into a buffer allocated once per loop when the product does not outlive an
  iteration;
* ``cond``/``switch`` as ``if``/``elif`` on the clamped index, ``while`` as a ``while``
  loop (a batched one whose elements run independently, as ``vmap`` and the rejection
  samplers stage it, as a loop over its active elements only, in blocks:
  :mod:`plax_numba.active_blocks`), ``scan`` (``fori_loop`` lowers to it) as a ``for``
  loop reading ``xs[i]`` in place and storing into preallocated ``ys`` (``reverse`` honoured; ``unroll=k`` puts ``k`` copies
  of the body in each iteration, at most :data:`UNROLL_MAX`, then the remaining steps one by
  one: the same values), their bodies inlined, nested to any depth;
  ``jit`` and ``checkpoint`` calls inlined.

Inside a loop nothing is allocated per step where it can be avoided: a fusion cluster's
kernel writes its array outputs into buffers passed to it (``codegen.plan_cluster(...,
into=True)``), and those buffers, like products' outputs, are allocated once before the loop
when no value of the step outlives it (:func:`_leave_loop`); an array carry whose new value
is such a buffer trades buffers with it at the end of the step (``c, b = b, c``, see
:func:`_update_carry`), so a carry costs two buffers for the whole loop. Outer products
(``dot_general`` contracting only axes of size 1, as reverse mode writes the gradient of a
matrix-vector product) become multiplies that fuse with the accumulation around them
(:func:`outer_products_as_multiplies`), and bodies are ordered for fusion.

Values are C-contiguous arrays or, for rank 0, numba scalars of the exact dtype (loop
carries are cast on every assignment, so numba's types never widen). float16 and bfloat16
(:data:`codegen.LOW_FLOATS`) arrays are held as their uint16 bit patterns, and their rank-0
values as float32 scalars (each exactly a float32): every operation on them computes in
float32 and rounds once to the narrow format, as the cluster kernels do, so a loop's carry is
rounded at each step exactly where the NumPy backend rounds it (:func:`_bits`,
:func:`_value` convert at the boundaries: a cluster kernel's scalar operands and results,
stores into and loads from arrays).

What it cannot express raises :class:`Unsupported` naming the primitive (see
:data:`NOT_NATIVE` for the documented list); the caller then keeps the per-equation path.
The results equal the NumPy backend's except for the documented last-bit differences of the
fused kernels (float32 ``exp``/``tanh``/``logistic`` polynomials, float64 accumulation of
reductions) and of small ``dot_general`` products (summation order, see
:mod:`plax_numba.arrays`).
"""
from __future__ import annotations

import math
import re

import numpy as np

from plax import lax
from plax.core.passes import inline_param
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var
from plax.core.shaped_array import ShapedArray
from plax.lowering import (ARG_REDUCTION, BROADCAST, CUMULATIVE, ELEMENTWISE, REDUCTION, Cluster,
                           call_body, explicit_broadcasts, find_clusters, fusion_kind,
                           order_for_fusion, reads_before_updates)
from plax.lowering.calls import spliced_calls as _spliced_calls
from plax.lowering.literals import literal_value

from plax_numba import cache, codegen, codegen_split, wholegen_indexing
from plax_numba.codegen import Unsupported, _cast, _t, constant
from plax_numba.kernels import product_madds

# (plax_numba.arrays, the helpers the generated code calls, is not imported here: it imports
# numba, which planning a program at its first call must not pay for)

#: float products with at least this many multiply-adds per batch element go to BLAS (a BLAS
#: call costs ~0.1-0.3 us from numba; the loops of :mod:`plax_numba.arrays` are not
#: vectorised: numba's index wrap-around checks keep LLVM from combining the loads, ~1.2 us
#: for a 64x64 matrix-vector)
BLAS_MIN = 256

#: float matrix-vector products of at most this many multiply-adds whose matrix is available
#: in ``(k, m)`` layout (contracted along its first axis, or a loop invariant whose transpose
#: is hoisted before the loop) run :func:`plax_numba.arrays.matvec_t` inline instead of BLAS:
#: a gemv call from numba costs ~0.2 us, the inlined loop ~0.15 us for 64x64 (znver4)
MATVEC_MAX = 64 * 64

#: what a native loop or whole-program kernel does not compile: a body using one of these
#: keeps the per-equation path (a Python loop calling the compiled body), with one warning
NOT_NATIVE = ("float16/bfloat16 scatter-add/mul and gathers filling out-of-bounds windows",
              "floating scatter-min/max", "gather/scatter with uint64 indices",
              "sort", "float16/bfloat16 argmax/argmin/cummax/cummin",
              "random_bits", "fft", "linalg", "conv_general_dilated",
              "reduce_precision", "complex dtypes", "float16/bfloat16 dot_general",
              "callbacks")

#: host callbacks: a body calling one asks for a host round trip at each step, so the Python
#: loop around it is the program as written -- kept without a warning (JAX gives none; the
#: warning printed inside JAX's own debugging page, around ``jax.debug.breakpoint`` in a
#: ``cond``)
HOST_CALLBACKS = frozenset({"debug_callback", "io_callback", "pure_callback"})


class WholePlan:
    """What :func:`plan_program` produces.

    Attributes:
      source: the kernels and ``kernel(...)`` (module text without the header).
      wrapper: Python source of ``step(*inputs)``; it reads ``_ready``, ``_entry`` (the
        compiled entry point), ``_interp`` (the path to take until then) and the constants.
      arg_types: per kernel argument (constants first), ``("rarray", dtype, ndim)`` or
        ``("scalar", dtype)``, and last ``("int",)`` for ``unit`` (always 1: loops multiply
        their kernels' extents by it, see :meth:`_Gen.cluster`).
      wrapper_globals: the constants and output dtypes the wrapper reads.
      primitives: the names of the primitives, for messages.
      jaxpr: the program (set by :func:`plan_program`; the first tier,
        :mod:`plax_numba.llvm_tier_loops`, is planned from it).
    """

    def __init__(self, source, wrapper, arg_types, wrapper_globals, primitives):
        self.source, self.wrapper, self.arg_types = source, wrapper, arg_types
        self.wrapper_globals, self.primitives = wrapper_globals, primitives


def _shape(shape) -> str:
    shape = tuple(int(d) for d in shape)
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _rank(atom) -> int:
    return len(atom.aval.shape)


_LOW = codegen.LOW_FLOATS


def _st(dtype) -> str:
    """The element type of an array of ``dtype`` in the kernel (uint16 bits for float16/
    bfloat16)."""
    return codegen._storage(np.dtype(dtype))


def _bits(expr: str, dtype) -> str:
    """A rank-0 value of ``dtype`` as an array element or a cluster kernel's scalar operand:
    float16/bfloat16 values (float32 locals) as their uint16 bits, others as they are."""
    dtype = np.dtype(dtype)
    return f"{_LOW[dtype]}_bits({expr})" if dtype in _LOW else expr


def _value(expr: str, dtype) -> str:
    """The inverse of :func:`_bits`: an array element or a cluster kernel's scalar result of
    ``dtype`` as the kernel's rank-0 value."""
    dtype = np.dtype(dtype)
    return f"{_LOW[dtype]}_value({expr})" if dtype in _LOW else expr


#: a call of :mod:`plax_numba.scalar`'s float16/bfloat16 conversions in generated source
_USES_LOW = re.compile(r"\b(?:round_b?f16|b?f16_(?:bits|value))\(")


def _supported(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype in codegen.DTYPES or dtype in _LOW


class _Gen:
    def __init__(self):
        self.count = 0
        #: cluster kernel source -> (its name here, its primitives): each is a module of its
        #: own (:func:`_kernel_modules`)
        self.kernels: dict[str, tuple[str, list]] = {}
        self.consts: list[np.ndarray] = []
        self.primitives: list[str] = []
        self.flat: dict[str, str] = {}      # value -> a rank-1 view of it already bound
        self.hoisted: dict[str, str] = {}   # loop-invariant matrix -> its (k, m) transpose
        self.pure: set[str] = set()         # names whose line goes if they are unused
        self.scalars: set[str] = set()      # names of rank-0 values (never views of arrays)
        self.buffers: list | None = None    # in a loop body: matrix-vector outputs
        #: concatenates read only by slices (not computed: each slice copies from the
        #: parts, :func:`_slice`): the name standing for one -> (parts, their avals, axis)
        self.concats: dict[str, tuple] = {}
        self.sliced_concats: set = set()      # the ids of those concatenate equations

    def fresh(self, prefix: str = "v") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    # ------------------------------------------------------------ atoms and constants
    def const(self, value, aval=None) -> str:
        value = value._host_value() if hasattr(value, "_host_value") else value
        value = np.asarray(value, None if aval is None else aval.dtype)
        if not _supported(value.dtype):
            raise Unsupported(f"a constant of dtype {value.dtype}")
        if value.ndim == 0:
            return constant(value, value.dtype)
        name = f"kc{len(self.consts)}"
        value = np.ascontiguousarray(value)
        self.consts.append(value.view(np.uint16) if value.dtype in _LOW else value)
        return name

    def atom(self, env: dict, a) -> str:
        if isinstance(a, Literal):
            return self.const(literal_value(a))
        return env[a]

    @staticmethod
    def cast(expr: str, aval) -> str:
        if aval.shape:
            return expr
        dtype = np.dtype(aval.dtype)
        return f"bool({expr})" if dtype == np.bool_ else _cast(expr, dtype)

    # ------------------------------------------------------------ jaxprs
    def jaxpr(self, jaxpr: Jaxpr, ins: list, lines: list, ind: str, consts=()) -> list:
        """Emits ``jaxpr`` with its inputs bound to the expressions ``ins`` (and its constvars
        to ``consts``); returns its outputs' expressions."""
        for v in list(jaxpr.invars) + list(jaxpr.constvars):
            if not _supported(v.aval.dtype):
                raise Unsupported(f"a value of dtype {np.dtype(v.aval.dtype)}")
        env = dict(zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, ins))
        # (the clusters of the per-cluster program, codegen.FUSES: threefry2x32 hashed in one
        # pass, iota from the index, argmax/argmin and the cumulative ops after their producers)
        # (and size-1 broadcasts of elementwise operands as the broadcast_in_dim they are)
        # (and reads of an update's operand before it, so a carry may be updated in place)
        jaxpr = reads_before_updates(
            explicit_broadcasts(outer_products_as_multiplies(_spliced_calls(jaxpr))))
        self.sliced_concats |= _sliced_concatenates(jaxpr)  # (ids: bodies' too)
        for unit in find_clusters(order_for_fusion(jaxpr, codegen.FUSES), codegen.FUSES):
            if isinstance(unit, Cluster):
                self.cluster(unit, env, lines, ind)
                outs = unit.outputs
            else:
                self.equation(unit, env, lines, ind)
                outs = unit.outvars
            self.scalars.update(env[v] for v in outs if not v.aval.shape and v in env)
        return [self.atom(env, v) for v in jaxpr.outvars]

    def cluster(self, cluster: Cluster, env: dict, lines: list, ind: str) -> None:
        if not cluster.outputs:
            return  # dead code (e.g. broadcasts a loop body no longer reads): nothing to run
        if _unit_axes_only(cluster):
            # views, not a copying kernel: a key split's (n, k) words reshaped to (n, k, 1)
            # for its concatenate were a full copy of both words at every split
            for e in cluster.eqns:
                env[e.outvars[0]] = _reshape(self, e, [self.atom(env, e.invars[0])], lines,
                                             ind)[0]
            return
        if any(codegen.reference_only(e) for e in cluster.eqns):
            for eqns, part in codegen_split.split_cluster(cluster):
                if len(eqns) > 1:
                    self.cluster(part, env, lines, ind)
                else:
                    self.equation(eqns[0], env, lines, ind)
            return
        # in a loop body the kernel writes its array outputs into buffers allocated here,
        # which :func:`_leave_loop` moves before the loop when no value outlives a step
        into = self.buffers is not None
        plan = codegen.plan_cluster(cluster, into=into)
        self.primitives += plan.primitives
        name, _ = self.kernels.setdefault(plan.source,
                                          (f"k{len(self.kernels)}", plan.primitives))
        given = plan.given if into else []
        bufs = []
        for j in given:
            v = cluster.outputs[j]
            buf = env[v] = self.fresh()
            lines.append(f"{ind}{buf} = np.empty({_shape(v.aval.shape)}, {_st(v.aval.dtype)})")
            self.buffers.append(buf)
            bufs.append(buf)
        # in a loop, the extents of a loop nest are run-time values (the kernel's argument
        # ``unit``, 1): extents LLVM knows let it unroll a short inner loop fully into
        # scalar code it cannot vectorise (the operands may alias); a 64x16 outer-product
        # accumulation took 3x longer per step that way. A single loop keeps its constant
        # extent (16 elements: one vector, no remainder loop)
        opaque = into and len(cluster.shape) >= 2
        extents = [f"{int(n)} * unit" if opaque else str(int(n)) for n in cluster.shape]
        args = ([self.atom(env, a) if a.aval.shape else _bits(self.atom(env, a), a.aval.dtype)
                 for a in cluster.inputs] + bufs + extents)
        res = self.fresh("r")
        lines.append(f"{ind}{res} = {name}({', '.join(args)})")
        k = 0
        for j, v in enumerate(cluster.outputs):
            if j in given:
                continue
            out = env[v] = self.fresh()
            at = f"{res}[{k}]"
            lines.append(f"{ind}{out} = {at if v.aval.shape else _value(at, v.aval.dtype)}")
            k += 1

    def equation(self, eqn: JaxprEqn, env: dict, lines: list, ind: str) -> None:
        prim = eqn.primitive
        for v in list(eqn.invars) + list(eqn.outvars):
            if not _supported(v.aval.dtype):
                raise Unsupported(f"{prim.name} on {np.dtype(v.aval.dtype)}")
        body = call_body(eqn)
        if body is None and eqn.params.get(inline_param(eqn)) is not None:
            # custom_jvp_call/custom_vjp_call/linear_call inside a loop body (the program's
            # own are inlined before lowering, plax.core.passes.inline_calls): the primal body
            body = eqn.params[inline_param(eqn)]
            body = body if isinstance(body, ClosedJaxpr) else ClosedJaxpr(body, [])
        if body is not None:
            ins = [self.atom(env, v) for v in eqn.invars]
            consts = [self.const(c, v.aval) for c, v in zip(body.consts, body.jaxpr.constvars)]
            outs = self.jaxpr(body.jaxpr, ins, lines, ind, consts)
            env.update(zip(eqn.outvars, outs))
            return
        # (iota as before: a lone one is a handler's array, not a cluster of its own)
        kind = fusion_kind(prim, False, codegen.FUSES.arg_reductions, codegen.FUSES.cumulative)
        if kind is not None and (len(eqn.outvars) == 1 and not prim.multiple_results
                                 or kind == ELEMENTWISE):
            self.lone_fusible(eqn, kind, env, lines, ind)
            return
        if prim is lax.concatenate_p and id(eqn) in self.sliced_concats:
            # (read only by slices: each copies its part of the parts, _slice)
            name = env[eqn.outvars[0]] = self.fresh("cc")
            self.concats[name] = ([self.atom(env, v) for v in eqn.invars],
                                  [v.aval for v in eqn.invars], int(eqn.params["dimension"]))
            self.primitives.append(prim.name)
            return
        handler = _HANDLERS.get(prim)
        if handler is None:
            raise Unsupported(prim.name)
        self.primitives.append(prim.name)
        ins = [self.atom(env, v) for v in eqn.invars]
        outs = handler(self, eqn, ins, lines, ind)
        env.update(zip(eqn.outvars, outs))

    def lone_fusible(self, eqn, kind, env, lines, ind) -> None:
        if codegen.reference_only(eqn):
            self.numpy_call(eqn, env, lines, ind)
            return
        out = eqn.outvars[0]
        if kind in (ARG_REDUCTION, CUMULATIVE):
            from plax_numba import codegen_scan
            if codegen_scan.own_kernel(eqn):  # (float16/bfloat16: a kernel of its own)
                raise Unsupported(f"{eqn.primitive.name} on {np.dtype(out.aval.dtype)}")
        if kind in (REDUCTION, ARG_REDUCTION, CUMULATIVE):
            shape = tuple(eqn.invars[0].aval.shape)
        else:
            shape = tuple(out.aval.shape)
            if kind == ELEMENTWISE and (
                    any(tuple(v.aval.shape) not in (shape, ()) for v in eqn.invars)
                    or (shape and not any(tuple(v.aval.shape) == shape for v in eqn.invars))):
                raise Unsupported(f"{eqn.primitive.name} of a scalar to shape {shape}")
        if not shape and kind != BROADCAST:  # a scalar operation: one line
            self.primitives.append(eqn.primitive.name)
            args = [self.atom(env, v) for v in eqn.invars]
            if len(eqn.outvars) > 1:  # threefry2x32 of scalars: one tuple
                names = [self.fresh() for _ in eqn.outvars]
                env.update(zip(eqn.outvars, names))
                lines.append(f"{ind}{', '.join(names)} = {codegen.multi_result(eqn, args)}")
                return
            name = env[out] = self.fresh()
            # (a reduction of a scalar, over no axes, is its operand: vmap leaves one in the
            # predicate of a batched while whose batch was a single element)
            value = args[0] if kind == REDUCTION else codegen.elementwise(eqn, args)
            lines.append(f"{ind}{name} = {self.cast(value, out.aval)}")
            return
        inputs = list({id(v): v for v in eqn.invars}.values())  # each operand once, in order
        self.cluster(Cluster([eqn], shape, inputs, list(eqn.outvars)), env, lines, ind)

    def numpy_call(self, eqn, env, lines, ind) -> None:
        """A reference-only equation (:func:`codegen.reference_only`: ``log1p``) as a call of
        NumPy's own loop from the kernel (:mod:`plax_numba.numpy_calls`), so a native loop
        holding a sampler gives the NumPy backend's bits."""
        x, out = eqn.invars[0], eqn.outvars[0]
        dtype = np.dtype(out.aval.dtype)
        if eqn.primitive is not lax.log1p_p or dtype not in (np.float32, np.float64):
            raise Unsupported(f"{eqn.primitive.name} on {dtype} (kept on NumPy's kernel)")
        self.primitives.append(eqn.primitive.name)
        bits = dtype.itemsize * 8
        arg = self.atom(env, x)
        name = env[out] = self.fresh()
        if not out.aval.shape:
            lines.append(f"{ind}{name} = log1p_scalar_f{bits}({arg})")
            return
        if _rank(x) == 1:
            lines.append(f"{ind}{name} = log1p_f{bits}({arg})")
        else:  # (flat in, flat out: views of C-contiguous values)
            lines.append(f"{ind}{name} = log1p_f{bits}({arg}.ravel())"
                         f".reshape({_shape(out.aval.shape)})")


def _sliced_concatenates(jaxpr: Jaxpr) -> set:
    """The ``id`` of each ``concatenate`` equation of ``jaxpr`` whose value is read only by
    ``slice`` equations with stride 1 along the concatenated axis (not returned): those
    slices copy from its parts (:func:`_slice_of_concatenate`), and it is never built."""
    readers: dict = {}
    for e in jaxpr.eqns:
        for v in e.invars:
            if isinstance(v, Var):
                readers.setdefault(v, []).append(e)
    returned = {v for v in jaxpr.outvars if isinstance(v, Var)}
    found = set()
    for e in jaxpr.eqns:
        if e.primitive is not lax.concatenate_p or len(e.invars) < 2:
            continue
        out, axis = e.outvars[0], int(e.params["dimension"])
        reads = readers.get(out, [])
        if out in returned or not reads:
            continue
        if all(r.primitive is lax.slice_p and r.invars[0] is out
               and int((r.params.get("strides") or (1,) * (axis + 1))[axis]) == 1
               for r in reads):
            found.add(id(e))
    return found


def _inserts_unit_axes(eqn) -> bool:
    """Whether ``eqn`` is a ``broadcast_in_dim`` of an array that only inserts axes of size
    1 (the same elements in the same order: a reshape)."""
    if eqn.primitive is not lax.broadcast_in_dim_p or eqn.params.get("sharding") is not None:
        return False
    x, out = eqn.invars[0], eqn.outvars[0]
    if isinstance(x, Literal) or not x.aval.shape:
        return False
    dims = [int(d) for d in eqn.params["broadcast_dimensions"]]
    oshape, ishape = tuple(out.aval.shape), tuple(x.aval.shape)
    return (dims == sorted(set(dims)) and len(dims) == len(ishape)
            and all(oshape[d] == n for d, n in zip(dims, ishape))
            and all(oshape[d] == 1 for d in range(len(oshape)) if d not in dims))


def _unit_axes_only(cluster: Cluster) -> bool:
    """Whether every equation of ``cluster`` is a :func:`_inserts_unit_axes` broadcast of a
    value from outside the cluster: the cluster is views of its inputs."""
    made = {id(e.outvars[0]) for e in cluster.eqns}
    return all(_inserts_unit_axes(e) and id(e.invars[0]) not in made for e in cluster.eqns)


# ---------------------------------------------------------------- rewrites

def outer_products_as_multiplies(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` with each ``dot_general`` that contracts only axes of size 1 (an outer
    product, as reverse mode writes the gradient of a matrix-vector product) and has no
    batch axes written as ``reshape`` + ``broadcast_in_dim`` + ``mul``: the same values (one
    rounded product per element, as BLAS's), but fusible with their neighbours (a weight
    gradient's accumulation ``g + outer(u, v)`` becomes one loop writing ``g``'s new
    buffer, without the product's temporary or a BLAS call per step). Sub-jaxprs are
    rewritten when they are generated.

    Args:
      jaxpr: the jaxpr (not modified).

    Returns:
      ``jaxpr`` itself when it has no such product, else a new jaxpr with the same inputs
      and outputs.

    Example:
      >>> j = plax.make_jaxpr(lambda u, v: u[:, None] @ v[None, :])(jnp.ones(3),
      ...                                                           jnp.ones(2)).jaxpr
      >>> [e.primitive.name for e in outer_products_as_multiplies(j).eqns][2:]
      ['reshape', 'reshape', 'broadcast_in_dim', 'broadcast_in_dim', 'mul']
    """
    if not any(_is_outer_product(e) for e in jaxpr.eqns):
        return jaxpr
    eqns: list = []
    for e in jaxpr.eqns:
        if not _is_outer_product(e):
            eqns.append(e)
            continue
        (lc, rc), _ = e.params["dimension_numbers"]
        out = e.outvars[0]
        dtype = out.aval.dtype
        operands, parts, offset = [], [], 0
        for x, contracted in zip(e.invars, (lc, rc)):
            free = tuple(n for d, n in enumerate(x.aval.shape) if d not in contracted)
            if free != tuple(x.aval.shape):  # (the reshapes first: the rest is one chain)
                y = Var(ShapedArray(free, dtype))
                eqns.append(JaxprEqn(lax.reshape_p, [x], [y], {"new_sizes": free}))
                x = y
            operands.append((x, tuple(range(offset, offset + len(free)))))
            offset += len(free)
        for x, dims in operands:
            b = Var(ShapedArray(out.aval.shape, dtype))
            eqns.append(JaxprEqn(lax.broadcast_in_dim_p, [x], [b],
                                 {"shape": tuple(out.aval.shape), "broadcast_dimensions": dims}))
            parts.append(b)
        eqns.append(JaxprEqn(lax.mul_p, parts, [out], {}))
    return Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, eqns)


def _is_outer_product(eqn) -> bool:
    if eqn.primitive is not lax.dot_general_p:
        return False
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars
    dtypes = {np.dtype(v.aval.dtype) for v in (lhs, rhs, eqn.outvars[0])}
    return (not lb and not rb and len(dtypes) == 1 and dtypes.pop().kind in "fiu"
            and all(lhs.aval.shape[d] == 1 for d in lc)
            and all(rhs.aval.shape[d] == 1 for d in rc))


# ---------------------------------------------------------------- per-primitive handlers

def _reshape(gen, eqn, ins, lines, ind):
    x, out = ins[0], eqn.outvars[0]
    perm = eqn.params.get("dimensions") if eqn.primitive is lax.reshape_p else None
    if perm is not None and out.aval.shape:
        # JAX's transposition folded into the reshape: a contiguous transposed copy, viewed
        name = gen.fresh()
        t = _transposed(gen, x, eqn.invars[0].aval, perm, lines, ind)
        lines.append(f"{ind}{name} = {t}.reshape({_shape(out.aval.shape)})")
        return [name]
    oshape, ishape = tuple(out.aval.shape), tuple(eqn.invars[0].aval.shape)
    if oshape == ishape:
        return [x]
    alias = x if len(ishape) == 1 else gen.flat.get(x)
    if len(oshape) == 1 and alias is not None:
        return [alias]  # (numba's reshape is a C call: ~12 ns a step in a loop)
    name = gen.fresh()
    if oshape and ishape:
        gen.pure.add(name)
        if alias is not None:
            gen.flat[name] = alias
    if not oshape:
        expr = _value(f"{x}.ravel()[0]", out.aval.dtype)
    elif not ishape:
        expr = f"np.full({_shape(oshape)}, {_bits(x, out.aval.dtype)}, {_st(out.aval.dtype)})"
    else:
        expr = f"{x}.reshape({_shape(oshape)})"
    lines.append(f"{ind}{name} = {expr}")
    return [name]


def _transpose(gen, eqn, ins, lines, ind):
    perm = tuple(eqn.params["permutation"])
    if perm == tuple(range(len(perm))):
        return [ins[0]]
    shape = eqn.invars[0].aval.shape
    moved = [d for d in perm if shape[d] != 1]
    if moved == sorted(moved):  # only axes of size 1 move: the same memory order, a view
        return _reshape(gen, eqn, ins, lines, ind)
    return [_transposed(gen, ins[0], eqn.invars[0].aval, perm, lines, ind)]


def _transposed(gen, x: str, aval, perm, lines: list, ind: str) -> str:
    """The name of a C-contiguous copy of ``x`` (of ``aval``) transposed by ``perm``.

    Not ``np.ascontiguousarray(x.transpose(perm))``: numba's ``transpose`` with axes compiles
    a helper whose shape check formats its error message, which compiles about 50 of numba's
    unicode functions with every program holding one (~1.5 CPU seconds a process). A matrix
    is transposed by ``.T`` (no helper); higher ranks are copied by loops."""
    name = gen.fresh()
    perm = [int(d) for d in perm]
    if len(perm) == 2:
        lines.append(f"{ind}{name} = np.ascontiguousarray({x}.T)")
        return name
    if not x.isidentifier():  # (an expression would be evaluated per element)
        lines.append(f"{ind}{name} = np.ascontiguousarray({x}.transpose({_shape(perm)}))")
        return name
    shape = [int(aval.shape[d]) for d in perm]
    lines.append(f"{ind}{name} = np.empty({_shape(shape)}, {_st(aval.dtype)})")
    idx = [gen.fresh("j") for _ in shape]
    for d, (n, i) in enumerate(zip(shape, idx)):
        lines.append(f"{ind}{'    ' * d}for {i} in range({n}):")
    src = [idx[perm.index(d)] for d in range(len(perm))]
    lines.append(f"{ind}{'    ' * len(shape)}{name}[{_index(idx)}] = {x}[{_index(src)}]")
    return name


def _index(parts) -> str:
    return ", ".join(parts) if len(parts) != 1 else parts[0] + ","


def _copy_block(gen, dst: str, dst_starts: list, src: str, src_starts: list, shape,
                lines: list, ind: str) -> None:
    """Copies a block of ``shape`` elements of the array ``src`` (from ``src_starts``, per
    dimension ``(start, step)``) into the array ``dst`` (from ``dst_starts``), as loops.

    Not as numba's slice assignment (``dst[a:b] = src[c:d]``): that checks at run time that
    the two shapes agree, and its error message's string formatting is compiled with every
    program holding one (about 90 helper compiles of numba's unicode functions, ~3 CPU
    seconds a process), while the shapes here are static. A start is an int or the name of
    a local (a clamped dynamic start)."""
    idx = [gen.fresh("j") for _ in shape]
    for d, (n, i) in enumerate(zip(shape, idx)):
        lines.append(f"{ind}{'    ' * d}for {i} in range({int(n)}):")
    to = [i if s == 0 else f"{s} + {i}" for s, i in zip(dst_starts, idx)]
    at = [(i if step == 1 else f"{step} * {i}") if s == 0 else
          (f"{s} + {i}" if step == 1 else f"{s} + {step} * {i}")
          for (s, step), i in zip(src_starts, idx)]
    lines.append(f"{ind}{'    ' * len(shape)}{dst}[{_index(to)}] = {src}[{_index(at)}]")


def _rev(gen, eqn, ins, lines, ind):
    dims = set(eqn.params["dimensions"])
    rank = _rank(eqn.invars[0])
    if not dims or not rank:
        return [ins[0]]
    parts = ["::-1" if d in dims else ":" for d in range(rank)]
    name = gen.fresh()
    lines.append(f"{ind}{name} = np.ascontiguousarray({ins[0]}[{_index(parts)}])")
    return [name]


def _slice(gen, eqn, ins, lines, ind):
    p = eqn.params
    strides = p.get("strides") or (1,) * len(p["start_indices"])
    parts = [f"{int(a)}:{int(b)}:{int(s)}" for a, b, s in
             zip(p["start_indices"], p["limit_indices"], strides)]
    out = eqn.outvars[0]
    if ins[0] in gen.concats:
        return [_slice_of_concatenate(gen, eqn, ins[0], lines, ind)]
    name = gen.fresh()
    if gen.buffers is not None and out.aval.shape:
        # in a loop body: a copy into a buffer that _leave_loop moves before the loop
        # when no value of the step outlives it (np.ascontiguousarray allocates per step)
        lines.append(f"{ind}{name} = np.empty({_shape(out.aval.shape)}, {_st(out.aval.dtype)})")
        _copy_block(gen, name, [0] * len(parts), ins[0],
                    [(int(a), int(s)) for a, s in zip(p["start_indices"], strides)],
                    out.aval.shape, lines, ind)
        gen.buffers.append(name)
        return [name]
    lines.append(f"{ind}{name} = np.ascontiguousarray({ins[0]}[{_index(parts)}])")
    return [name]


def _slice_of_concatenate(gen, eqn, concat: str, lines, ind) -> str:
    """A slice (strides 1 along the concatenated axis) of a concatenate that is not computed
    (:func:`_sliced_concatenates`): each part's share copied straight into the slice's
    buffer. A key split's ``(n, k, 2)`` grid is a concatenate of its two hashed words, read
    by ``k`` slices: ``k`` copies of ``2n`` words instead of a ``2kn``-word concatenate and
    the slices' ``k`` copies of it."""
    p = eqn.params
    parts, avals, axis = gen.concats[concat]
    starts, limits = p["start_indices"], p["limit_indices"]
    strides = p.get("strides") or (1,) * len(starts)
    out = eqn.outvars[0]
    name = gen.fresh()
    lines.append(f"{ind}{name} = np.empty({_shape(out.aval.shape)}, {_st(out.aval.dtype)})")
    if gen.buffers is not None:
        gen.buffers.append(name)
    lo, hi, offset = int(starts[axis]), int(limits[axis]), 0
    for part, aval in zip(parts, avals):
        size = int(aval.shape[axis])
        a, b = max(lo, offset), min(hi, offset + size)
        if a < b:
            src = [(a - offset, 1) if d == axis else (int(s), int(st))
                   for d, (s, st) in enumerate(zip(starts, strides))]
            dst = [a - lo if d == axis else 0 for d in range(len(starts))]
            block = [b - a if d == axis else n for d, n in enumerate(out.aval.shape)]
            _copy_block(gen, name, dst, part, src, block, lines, ind)
        offset += size
    return name


def _starts(gen, shape, sizes, idx, lines, ind) -> list:
    """Clamped start indices (XLA: the slice is moved inside the operand)."""
    starts = []
    for dim, size, i in zip(shape, sizes, idx):
        s = gen.fresh("s")
        lines.append(f"{ind}{s} = min(max(np.int64({i}), 0), {int(dim) - int(size)})")
        starts.append((s, int(size)))
    return starts


def _dynamic_slice(gen, eqn, ins, lines, ind):
    shape = eqn.invars[0].aval.shape
    if not shape:
        return [ins[0]]
    starts = _starts(gen, shape, eqn.params["slice_sizes"], ins[1:], lines, ind)
    parts = [f"{s}:{s} + {n}" for s, n in starts]
    name = gen.fresh()
    lines.append(f"{ind}{name} = np.ascontiguousarray({ins[0]}[{_index(parts)}])")
    return [name]


def _dynamic_update_slice(gen, eqn, ins, lines, ind):
    shape = eqn.invars[0].aval.shape
    if not shape:
        return [ins[1]]
    starts = _starts(gen, shape, eqn.invars[1].aval.shape, ins[2:], lines, ind)
    name = gen.fresh()
    lines.append(f"{ind}{name} = {ins[0]}.copy(){UPDATE}")
    _copy_block(gen, name, [s for s, _ in starts], ins[1], [(0, 1)] * len(starts),
                [n for _, n in starts], lines, ind)
    return [name]


def _concatenate(gen, eqn, ins, lines, ind):
    if len(ins) == 1:
        return [ins[0]]
    name = gen.fresh()
    lines.append(f"{ind}{name} = np.concatenate(({', '.join(ins)},), "
                 f"axis={int(eqn.params['dimension'])})")
    return [name]


def _stack(gen, eqn, ins, lines, ind):
    name = gen.fresh()
    lines.append(f"{ind}{name} = np.stack(({', '.join(ins)},), axis={int(eqn.params['axis'])})")
    return [name]


def _unstack(gen, eqn, ins, lines, ind):
    axis = int(eqn.params["axis"])
    names = []
    for i in range(len(eqn.outvars)):
        name = gen.fresh()
        lines.append(f"{ind}{name} = np.ascontiguousarray({ins[0]}[{':, ' * axis}{i}])")
        names.append(name)
    return names


def _split(gen, eqn, ins, lines, ind):
    axis, start, names = int(eqn.params["axis"]), 0, []
    for size in eqn.params["sizes"]:
        name = gen.fresh()
        lines.append(f"{ind}{name} = np.ascontiguousarray("
                     f"{ins[0]}[{':, ' * axis}{start}:{start + int(size)}])")
        names.append(name)
        start += int(size)
    return names


def _pad(gen, eqn, ins, lines, ind):
    config = eqn.params["padding_config"]
    if any(int(i) != 0 or int(lo) < 0 or int(hi) < 0 for lo, hi, i in config):
        raise Unsupported("pad with interior or negative padding")
    out = eqn.outvars[0]
    name = gen.fresh()
    lines.append(f"{ind}{name} = np.full({_shape(out.aval.shape)}, "
                 f"{_bits(ins[1], out.aval.dtype)}, {_st(out.aval.dtype)})")
    if not out.aval.shape:
        return [ins[0]]
    _copy_block(gen, name, [int(lo) for lo, _, _ in config], ins[0],
                [(0, 1)] * len(config), eqn.invars[0].aval.shape, lines, ind)
    return [name]


def _iota(gen, eqn, ins, lines, ind):
    out = eqn.outvars[0]
    shape, dim = tuple(out.aval.shape), int(eqn.params["dimension"])
    dtype = np.dtype(out.aval.dtype)
    name = gen.fresh()
    lines.append(f"{ind}{name} = np.empty({_shape(shape)}, {_st(dtype)})")
    idx = [gen.fresh("j") for _ in shape]
    for d, (n, i) in enumerate(zip(shape, idx)):
        lines.append(f"{ind}{'    ' * d}for {i} in range({int(n)}):")
    value = (f"({idx[dim]} != 0)" if dtype == np.bool_
             else _bits(f"{_t(dtype)}(np.float32({idx[dim]}))", dtype) if dtype in _LOW
             else f"{_t(dtype)}({idx[dim]})")
    lines.append(f"{ind}{'    ' * len(shape)}{name}[{_index(idx)}] = {value}")
    return [name]


def _as3(gen, x: str, aval, perm: list, shape3: tuple, lines, ind) -> str:
    """``x`` transposed by ``perm`` and reshaped to ``shape3``, C-contiguous."""
    name = gen.fresh()
    if not aval.shape:
        lines.append(f"{ind}{name} = np.full((1, 1, 1), {x}, {_t(aval.dtype)})")
    elif perm == list(range(len(perm))):
        lines.append(f"{ind}{name} = {x}.reshape({_shape(shape3)})")
    else:
        t = _transposed(gen, x, aval, perm, lines, ind)
        lines.append(f"{ind}{name} = {t}.reshape({_shape(shape3)})")
    return name


def _dot_general(gen, eqn, ins, lines, ind):
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars
    out = eqn.outvars[0]
    dtype = np.dtype(out.aval.dtype)
    if np.dtype(lhs.aval.dtype) != dtype or np.dtype(rhs.aval.dtype) != dtype:
        raise Unsupported("dot_general with mixed dtypes")
    if dtype in _LOW:
        raise Unsupported(f"dot_general on {dtype}")
    ls, rs = tuple(lhs.aval.shape), tuple(rhs.aval.shape)
    squeezed = _squeezed_product(gen, eqn, ins, lines, ind)
    if squeezed is not None:
        return squeezed
    lf = [d for d in range(len(ls)) if d not in lc and d not in lb]
    rf = [d for d in range(len(rs)) if d not in rc and d not in rb]
    nb = math.prod(ls[d] for d in lb)
    m = math.prod(ls[d] for d in lf)
    k = math.prod(ls[d] for d in lc)
    n = math.prod(rs[d] for d in rf)
    oshape = tuple(out.aval.shape)
    if dtype.kind == "f" and not lb and 0 < m * k * n <= MATVEC_MAX:
        res = _matvec(gen, eqn, ins, lines, ind)
        if res is not None:
            return res
    name = gen.fresh()
    if dtype.kind == "f" and m * n * k >= BLAS_MIN and not lb and len(ls) <= 2 \
            and len(rs) == 2 and ls:
        # one BLAS call on (possibly transposed) views: numba passes the transpose flags
        a = ins[0] if len(ls) == 1 or list(lf) + list(lc) == [0, 1] else f"{ins[0]}.T"
        b = ins[1] if len(rs) == 1 or list(rc) + list(rf) == [0, 1] else f"{ins[1]}.T"
        if len(ls) == 1 and len(rs) == 1:
            lines.append(f"{ind}{name} = {_t(dtype)}(np.dot({a}, {b}))")
            return [name]
        if n == 1 and b == ins[1] and len(ls) == 2:  # matrix-vector: BLAS's gemv, not gemm
            b = f"{ins[1]}.reshape(({k},))"
        elif m == 1 and a == ins[0] and len(ls) == 2:
            a = f"{ins[0]}.reshape(({k},))"
        expr = f"np.dot({a}, {b})"
        lines.append(f"{ind}{name} = {expr}.reshape({_shape(oshape)})" if oshape
                     else f"{ind}{name} = {expr}.ravel()[0]")
        return [name]
    a3 = _as3(gen, ins[0], lhs.aval, list(lb) + lf + list(lc), (nb, m, k), lines, ind)
    b3 = _as3(gen, ins[1], rhs.aval, list(rb) + list(rc) + rf, (nb, k, n), lines, ind)
    o3 = gen.fresh()
    lines.append(f"{ind}{o3} = np.empty({_shape((nb, m, n))}, {_t(dtype)})")
    if gen.buffers is not None:
        gen.buffers.append(o3)
    if dtype == np.bool_:
        lines.append(f"{ind}dot_bool({a3}, {b3}, {o3})")
    elif dtype.kind == "f" and m * n * k >= BLAS_MIN:
        fn = "dot_blas_mv" if n == 1 else "dot_blas"
        lines.append(f"{ind}{fn}({a3}, {b3}, {o3})")
    else:
        lines.append(f"{ind}dot_loops({a3}, {b3}, {o3}, {constant(0, dtype)})")
    if oshape:
        lines.append(f"{ind}{name} = {o3}.reshape({_shape(oshape)})")
    else:
        lines.append(f"{ind}{name} = {o3}[0, 0, 0]")
    return [name]


def _squeezed_product(gen, eqn, ins, lines, ind):
    """A product without batch axes whose operands become matrices (or vectors) once their
    free axes of size 1 are dropped (``vmap`` writes ``w @ h`` over a batch of vectors as
    ``(m, k)`` by ``(b, k, 1)``): the same product on views without those axes, then a view
    of the result in the written shape; so it reaches BLAS (or the matrix-vector loop) on
    views instead of transposed copies. None for other products."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars
    if lb or rb or max(len(lhs.aval.shape), len(rhs.aval.shape)) <= 2:
        return None
    views, numbers = [], []
    for x, aval, contract in ((ins[0], lhs.aval, lc), (ins[1], rhs.aval, rc)):
        shape = tuple(aval.shape)
        keep = [d for d, n in enumerate(shape) if n != 1 or d in contract]
        if len(keep) > 2:
            return None
        new_shape = tuple(shape[d] for d in keep)
        numbers.append(tuple(keep.index(d) for d in contract))
        if new_shape == shape:
            views.append((x, aval))
            continue
        name = gen.fresh()
        lines.append(f"{ind}{name} = {x}.reshape({_shape(new_shape)})")
        gen.pure.add(name)
        views.append((name, ShapedArray(new_shape, aval.dtype)))
    if all(v[0] in ins for v in views):
        return None  # nothing dropped
    out = eqn.outvars[0]
    free = [n for x, c in ((lhs, lc), (rhs, rc)) for d, n in enumerate(x.aval.shape)
            if d not in c and n != 1]
    inner_out = Var(ShapedArray(tuple(free), out.aval.dtype))
    inner = JaxprEqn(lax.dot_general_p, [Var(a) for _, a in views], [inner_out],
                     dict(eqn.params, dimension_numbers=((numbers[0], numbers[1]), ((), ()))))
    [res] = _dot_general(gen, inner, [v for v, _ in views], lines, ind)
    if tuple(free) == tuple(out.aval.shape):
        return [res]
    return _reshape(gen, JaxprEqn(lax.reshape_p, [inner_out], [out],
                                  {"new_sizes": tuple(out.aval.shape)}), [res], lines, ind)


def _vector(gen, x: str, shape: tuple) -> str:
    """A rank-1 view of the vector ``x`` of ``shape`` (``(k,)``, ``(k, 1)`` or ``(1, k)``)."""
    if len(shape) == 1:
        return x
    if x in gen.flat:
        return gen.flat[x]
    return f"{x}[0]" if shape[0] == 1 else f"{x}[:, 0]"


def _matvec(gen, eqn, ins, lines, ind):
    """A float matrix-vector product through the inlined :func:`plax_numba.arrays.matvec_t`
    when its matrix is at hand in ``(k, m)`` layout; ``None`` otherwise."""
    (lc, rc), _ = eqn.params["dimension_numbers"]
    ls, rs = tuple(eqn.invars[0].aval.shape), tuple(eqn.invars[1].aval.shape)
    if len(lc) != 1:
        return None
    if len(ls) == 2 and len(rs) in (1, 2) and math.prod(rs) == rs[rc[0]]:
        mat, mshape, cdim, vec, vshape = ins[0], ls, lc[0], ins[1], rs    # matrix @ vector
    elif len(rs) == 2 and len(ls) in (1, 2) and math.prod(ls) == ls[lc[0]]:
        mat, mshape, cdim, vec, vshape = ins[1], rs, rc[0], ins[0], ls    # vector @ matrix
    else:
        return None
    k, mm = mshape[cdim], mshape[1 - cdim]
    if cdim == 0:
        wt = mat
    elif mat in gen.hoisted:
        wt = gen.hoisted[mat]
    else:
        return None  # a transposed copy at every call costs more than the BLAS call saves
    out = eqn.outvars[0]
    oshape = tuple(out.aval.shape)
    o = gen.fresh()
    lines.append(f"{ind}{o} = np.empty(({mm},), {_t(out.aval.dtype)})")
    if gen.buffers is not None:
        gen.buffers.append(o)
    lines.append(f"{ind}matvec_t({wt}, {_vector(gen, vec, vshape)}, {o}, {k}, {mm})")
    if len(oshape) == 1:
        return [o]
    name = gen.fresh()
    lines.append(f"{ind}{name} = {o}.reshape({_shape(oshape)})")
    gen.pure.add(name)
    gen.flat[name] = o
    return [name]


def _hoist(gen, consts: list, avals: list, lines: list, ind: str) -> dict:
    """Binds the ``(k, m)`` transpose of each loop-invariant float matrix small enough for
    :func:`_matvec` before the loop (dropped by :func:`_drop_unused` where no product uses
    it); returns the previous ``gen.hoisted`` to restore after the loop's body."""
    saved = dict(gen.hoisted)
    for x, aval in zip(consts, avals):
        if len(aval.shape) == 2 and np.dtype(aval.dtype).kind == "f" \
                and 0 < math.prod(aval.shape) <= MATVEC_MAX and x not in gen.hoisted:
            t = gen.fresh("wt")
            lines.append(f"{ind}{t} = np.ascontiguousarray({x}.T)")
            gen.pure.add(t)
            gen.hoisted[x] = t
    return saved


_CONSUMES = None


def _consumed_only(name: str, body: list, depth: int = 0) -> bool:
    """Whether every read of ``name`` in ``body`` consumes it within the iteration (a cluster
    kernel's or a product's operand, a store into ``ys``, a view read the same way): then
    its buffer may be reused by the next iteration."""
    import re
    global _CONSUMES
    if _CONSUMES is None:
        # (a transpose that reaches np.ascontiguousarray changes the memory order: a copy)
        _CONSUMES = re.compile(r"^\s*(r\d+ = k\d+\(|matvec_t\(|dot_\w+\(|ys\d+\[i\d+(, j\d+)?\] = "
                               r"|yr\d+\[j\d+\] = "  # (a ys row's store, _scan_loop)
                               r"|v\d+ = np\.ascontiguousarray\(v\d+\.T\)"
                               r"|v\d+ = (np\.\w+\()?np\.dot\("  # (np.dot: a new array)
                               r"|v\d+\[[^=]*\] = )")  # (a copy into a slice's buffer, _slice)
    word = re.compile(rf"\b{name}\b")
    for line in body:
        if not word.search(line):
            continue
        text = line.strip()
        head = text.split(" = ", 1)[0] if " = " in text else ""
        if head == name:  # its binding (the allocation, or the view of the buffer)
            continue
        if head.startswith(f"{name}[") and " = " in text:  # a copy into it (_slice)
            continue
        if text.endswith("# swap"):  # a buffer trade at the end of a step (_update_carry)
            continue
        if _CONSUMES.match(line) and not word.search(head):
            continue
        view = re.fullmatch(rf"(v\d+) = {name}\.reshape\(\([\d, ]*\)\)", text)
        if view and depth < 4 and _consumed_only(view.group(1), body, depth + 1):
            continue
        return False
    return True


def _init_carry(gen, names: list, exprs: list, avals: list, lines: list, ind: str) -> list:
    """Binds each carry to its initial value, one line each (the sources are outer values,
    never another carry); returns the lines' indices, for :func:`_update_carry`."""
    at = []
    for n, e, a in zip(names, exprs, avals):
        if not a.shape:
            gen.scalars.add(n)
        at.append(len(lines))
        lines.append(f"{ind}{n} = {gen.cast(e, a)}")
    return at


UPDATE = wholegen_indexing.UPDATE

#: lines whose value is a new array, never a view of their operands
_FRESH = re.compile(r"^\s*\w+ = (k\d+\(|np\.empty\(|(np\.\w+\()?np\.dot\(|.*\.copy\(\)(  # update)?$)")


def _views(name: str, body: list, scalars: set) -> set:
    """``name`` and every name ``body`` binds from it, transitively, that may share its memory:
    any binding that reads it, except those of a new array (:data:`_FRESH`) or of a rank-0
    value (``scalars``)."""
    held, word = {name}, re.compile(r"\b[a-z]+\d+\b")
    for line in body:
        text = line.strip()
        if " = " not in text or _FRESH.match(text):
            continue
        head, rhs = text.split(" = ", 1)
        targets = [t.strip() for t in head.split(",") if t.strip()]
        if not all(re.fullmatch(r"[a-z]+\d+", t) for t in targets):
            continue   # (a store into an element or a slice: a copy)
        if held & set(word.findall(rhs)):
            held.update(t for t in targets if t not in scalars)
    return held


def _update_chain(name: str, expr: str, lines: list, start: int) -> list | None:
    """The updates (:data:`UPDATE`) that make ``expr`` from carry ``name`` in the loop body
    after ``lines[start]``, each writing into a copy of the one before (``x.at[i].set(a)
    .at[j].set(b)``): ``[(line index, operand)]``, the last first; None where ``expr`` is
    not made so."""
    links, value = [], expr
    while True:
        made = re.compile(rf"{re.escape(value)} = (\w+)\.copy\(\){re.escape(UPDATE)}")
        found = [(j, m.group(1)) for j in range(start + 1, len(lines))
                 for m in [made.fullmatch(lines[j].strip())] if m]
        if len(found) != 1:
            return None
        links.append(found[0])
        value = found[0][1]
        if value == name:
            return links


def _update_in_place(gen, names: list, exprs: list, avals: list, lines: list, start: int,
                     init_at: list, skip: set) -> None:
    """Drops the operand copies of the updates (:data:`UPDATE`) that make an array carry's
    new value from its old one (:func:`_update_chain`), where nothing reads an update's
    operand, or a view of it, after the update: the step then writes into the carry's buffer
    (``x.at[i].set(v)``, ``dynamic_update_slice`` in a ``fori_loop``) instead of copying the
    whole carry, as XLA updates a loop's buffers in place. Such a carry starts as a copy of
    its initial value (``lines[init_at[k]]``), which may be read elsewhere."""
    for k, (name, expr, aval) in enumerate(zip(names, exprs, avals)):
        if k in skip or not aval.shape or expr == name or exprs.count(expr) != 1:
            continue
        links = _update_chain(name, expr, lines, start)
        if links is None:
            continue
        others = [e for m, e in enumerate(exprs) if m != k]
        if _views(expr, lines[links[0][0] + 1:], gen.scalars) & set(others):
            continue   # (another carry's new value shares the new buffer)
        for line, operand in links:
            old = _views(operand, lines[start + 1:line], gen.scalars)
            word = re.compile(r"\b(" + "|".join(sorted(old)) + r")\b")
            if any(word.search(t) for t in lines[line + 1:] + others):
                break
        else:
            for line, operand in links:
                lines[line] = lines[line].replace(f"{operand}.copy()", operand)
            if not lines[init_at[k]].endswith(".copy()"):
                lines[init_at[k]] += ".copy()"


def _update_carry(gen, names: list, exprs: list, avals: list, lines: list, start: int,
                  init_at: list, ind: str) -> None:
    """The carries' update at the end of a loop body (the loop header at ``lines[start]``).

    An array carry whose new value is a buffer of this loop (a cluster kernel's or a
    product's output) trades buffers with it (``c, b = b, c``) when neither the buffer nor
    the carry's previous value is read by reference elsewhere (:func:`_consumed_only`): the
    two buffers, allocated once, alternate and nothing is allocated per step. Such a carry
    starts as a copy of its initial value (``lines[init_at[k]]``, it will be written). The
    other carries are assigned by reference, all at once."""
    body = lines[start + 1:]
    swap = {k for k, (n, e, a) in enumerate(zip(names, exprs, avals))
            if a.shape and e in (gen.buffers or ()) and e != n
            and sum(x == e for x in exprs) == 1}
    while True:
        rest = [k for k in range(len(names)) if k not in swap]
        ref = (f"{ind}{', '.join(names[k] for k in rest)}, = "
               f"({''.join(gen.cast(exprs[k], avals[k]) + ', ' for k in rest)})") if rest else ""
        drop = {k for k in swap
                if not _consumed_only(exprs[k], body + [ref])
                or not _consumed_only(names[k], body + [ref])}
        if not drop:
            break
        swap -= drop
    _update_in_place(gen, names, exprs, avals, lines, start, init_at, swap)
    if ref:
        lines.append(ref)
    for k in sorted(swap):
        lines.append(f"{ind}{names[k]}, {exprs[k]} = {exprs[k]}, {names[k]}  # swap")
        if not lines[init_at[k]].endswith(".copy()"):  # (once: an unrolled body swaps again)
            lines[init_at[k]] += ".copy()"


def _enter_loop(gen) -> tuple:
    saved, gen.buffers = gen.buffers, []
    return saved


def _leave_loop(gen, saved, lines: list, start: int, ind: str) -> None:
    """Moves the allocations of the loop body's matrix-vector outputs that do not outlive
    an iteration (:func:`_consumed_only`) before the loop (``lines[start]``): one buffer
    for all iterations instead of an allocation (~14 ns) per step."""
    buffers, gen.buffers = gen.buffers, saved
    body = lines[start + 1:]
    for o in buffers:
        if not _consumed_only(o, body):
            continue
        for j in range(start + 1, len(lines)):
            if lines[j].strip().startswith(f"{o} = np.empty("):
                line = lines.pop(j)
                lines.insert(start, ind + line.strip())
                start += 1
                body = lines[start + 1:]
                break


def _drop_unused(lines: list, pure: set) -> list:
    """``lines`` without the bindings of names in ``pure`` that nothing reads."""
    import re
    while True:
        text = "\n".join(lines)
        counts: dict = {}
        for tok in re.findall(r"\b[a-z]+\d+\b", text):
            counts[tok] = counts.get(tok, 0) + 1
        keep = []
        for line in lines:
            head = line.lstrip().split(" = ", 1)[0]
            if head in pure and counts.get(head, 0) == 1:
                continue
            keep.append(line)
        if len(keep) == len(lines):
            return lines
        lines = keep


def _copy(gen, eqn, ins, lines, ind):
    return [ins[0]]


def _assign(gen, names: list, exprs: list, avals: list, lines: list, ind: str) -> None:
    """``names = exprs`` at once (a carry may be another's previous value), cast."""
    if not names:
        return
    rhs = ", ".join(gen.cast(e, a) for e, a in zip(exprs, avals))
    lines.append(f"{ind}{', '.join(names)}, = ({rhs},)")


def _closed_consts(gen, closed) -> list:
    return [gen.const(c, v.aval) for c, v in zip(closed.consts, closed.jaxpr.constvars)]


def _cond(gen, eqn, ins, lines, ind):
    branches = eqn.params["branches"]
    avals = [v.aval for v in eqn.outvars]
    outs = [gen.fresh() for _ in eqn.outvars]
    ops = ins[1:]
    if len(branches) == 1:
        res = gen.jaxpr(branches[0].jaxpr, ops, lines, ind, _closed_consts(gen, branches[0]))
        _assign(gen, outs, res, avals, lines, ind)
        return outs
    idx = gen.fresh("b")
    lines.append(f"{ind}{idx} = min(max(np.int64({ins[0]}), 0), {len(branches) - 1})")
    for b, branch in enumerate(branches):
        if b == 0:
            lines.append(f"{ind}if {idx} == 0:")
        elif b < len(branches) - 1:
            lines.append(f"{ind}elif {idx} == {b}:")
        else:
            lines.append(f"{ind}else:")
        inner = ind + "    "
        res = gen.jaxpr(branch.jaxpr, ops, lines, inner, _closed_consts(gen, branch))
        _assign(gen, outs, res, avals, lines, inner)
        lines.append(f"{inner}pass")
    return outs


def _while(gen, eqn, ins, lines, ind):
    from plax_numba import active_blocks
    form = active_blocks.form_for(eqn)
    if form is not None:  # (elements that run independently: only the active ones, in blocks)
        return active_blocks.blocks_while(gen, eqn, form, ins, lines, ind)
    p = eqn.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cj, bj = p["cond_jaxpr"], p["body_jaxpr"]
    avals = [v.aval for v in eqn.outvars]
    carry = [gen.fresh("c") for _ in eqn.outvars]
    init_at = _init_carry(gen, carry, ins[nc + nb:], avals, lines, ind)
    saved = _hoist(gen, ins[:nc + nb], [v.aval for v in eqn.invars[:nc + nb]], lines, ind)
    start, outer = len(lines), _enter_loop(gen)
    lines.append(f"{ind}while True:")
    inner = ind + "    "
    pred = gen.jaxpr(cj.jaxpr, ins[:nc] + carry, lines, inner, _closed_consts(gen, cj))[0]
    lines.append(f"{inner}if not {pred}:")
    lines.append(f"{inner}    break")
    new = gen.jaxpr(bj.jaxpr, ins[nc:nc + nb] + carry, lines, inner, _closed_consts(gen, bj))
    _update_carry(gen, carry, new, avals, lines, start, init_at, inner)
    gen.hoisted = saved
    _leave_loop(gen, outer, lines, start, ind)
    return carry


#: the most copies of a scan's body one iteration of its native loop holds (``unroll=``;
#: ``unroll=True`` asks for the whole length): the values are the same whatever the count, and
#: a longer body only grows the kernel's source and its compilation
UNROLL_MAX = 16


def scan_unroll(unroll, length: int) -> int:
    """How many copies of the body one iteration of a scan's native loop runs: ``unroll``
    (``True``: all ``length`` steps, ``False``: 1) clipped to ``[1, min(length, UNROLL_MAX)]``."""
    if unroll is True:
        copies = length
    elif unroll is False or unroll is None:
        copies = 1
    else:
        copies = int(unroll)
    return max(1, min(copies, length, UNROLL_MAX))


def _scan(gen, eqn, ins, lines, ind):
    p = eqn.params
    body, length = p["jaxpr"], int(p["length"])
    nc, ncarry = p["num_consts"], p["num_carry"]
    avals = [v.aval for v in eqn.outvars]
    carry = [gen.fresh("c") for _ in range(ncarry)]
    init_at = _init_carry(gen, carry, ins[nc:nc + ncarry], avals[:ncarry], lines, ind)
    # the stacked outputs: an array row of any rank is stored as a flat row of a
    # ``(length, size)`` buffer (see :func:`_scan_loop`), given its shape after the loop
    ys, shaped = [], []
    for a in body.out_avals[ncarry:]:
        y = gen.fresh("ys")
        row = (math.prod(a.shape),) if a.shape else ()
        lines.append(f"{ind}{y} = np.empty({_shape((length,) + row)}, {_st(a.dtype)})")
        ys.append(y)
        shaped.append((y, (length,) + tuple(a.shape)) if len(a.shape) >= 2 else (y, None))
    saved = _hoist(gen, ins[:nc], [v.aval for v in eqn.invars[:nc]], lines, ind)
    # ``unroll`` copies of the body per iteration (each its own carry update), then the
    # remaining ``length % unroll`` steps one per iteration
    copies = scan_unroll(p.get("unroll", 1), length)
    full = length // copies
    _scan_loop(gen, eqn, ins, carry, ys, init_at, lines, ind, f"range({full})", copies)
    if full * copies < length:
        _scan_loop(gen, eqn, ins, carry, ys, init_at, lines, ind,
                   f"range({full * copies}, {length})", 1)
    gen.hoisted = saved
    outs = []
    for y, shape in shaped:
        if shape is not None:
            name = gen.fresh()
            lines.append(f"{ind}{name} = {y}.reshape({_shape(shape)})")
            y = name
        outs.append(y)
    return carry + outs


def _scan_loop(gen, eqn, ins, carry, ys, init_at, lines, ind, steps: str, copies: int):
    """One ``for`` loop of a scan over ``steps`` (a ``range`` expression), each iteration
    running ``copies`` consecutive steps (step ``it * copies + k``)."""
    p = eqn.params
    body, length, reverse = p["jaxpr"], int(p["length"]), p["reverse"]
    nc, ncarry = p["num_consts"], p["num_carry"]
    avals = [v.aval for v in eqn.outvars]
    it = gen.fresh("it")
    start, outer = len(lines), _enter_loop(gen)
    lines.append(f"{ind}for {it} in {steps}:")
    inner = ind + "    "
    for k in range(copies):
        i = gen.fresh("i")
        step = it if copies == 1 else f"{it} * {copies} + {k}"
        lines.append(f"{inner}{i} = {length - 1} - ({step})" if reverse else f"{inner}{i} = {step}")
        xs = []
        for x, v in zip(ins[nc + ncarry:], eqn.invars[nc + ncarry:]):
            name = gen.fresh("x")
            row = f"{x}[{i}]"
            lines.append(f"{inner}{name} = {row if _rank(v) > 1 else _value(row, v.aval.dtype)}")
            xs.append(name)
        res = gen.jaxpr(body.jaxpr, ins[:nc] + carry + xs, lines, inner,
                        _closed_consts(gen, body))
        for y, r, a in zip(ys, res[ncarry:], body.out_avals[ncarry:]):
            if not a.shape:
                lines.append(f"{inner}{y}[{i}] = {_bits(r, a.dtype)}")
                continue
            # an array row copied by a loop (numba's slice assignment costs more), flat, into
            # the row's view, over a run-time extent: LLVM then vectorises the copy behind a
            # run-time overlap check, where a constant extent is unrolled into scalar stores
            # it cannot combine (ys and the row may alias, as far as it knows): 10000 steps
            # of 16 floats, ~3.7 -> ~1.6 ns a step
            size = math.prod(a.shape)
            src = r if len(a.shape) == 1 else gen.flat.get(r)
            if src is None:  # (values are C-contiguous: a view)
                src = gen.fresh()
                lines.append(f"{inner}{src} = {r}.reshape(({size},))")
            j, row = gen.fresh("j"), gen.fresh("yr")
            lines.append(f"{inner}{row} = {y}[{i}]")
            lines.append(f"{inner}for {j} in range({size} * unit):")
            lines.append(f"{inner}    {row}[{j}] = {src}[{j}]")
        _update_carry(gen, carry, res[:ncarry], avals[:ncarry], lines, start, init_at, inner)
    _leave_loop(gen, outer, lines, start, ind)


_HANDLERS = {
    lax.reshape_p: _reshape, lax.squeeze_p: _reshape, lax.expand_dims_p: _reshape,
    lax.transpose_p: _transpose, lax.rev_p: _rev, lax.slice_p: _slice,
    lax.dynamic_slice_p: _dynamic_slice, lax.dynamic_update_slice_p: _dynamic_update_slice,
    lax.concatenate_p: _concatenate, lax.stack_p: _stack,
    lax.unstack_p: _unstack, lax.split_p: _split, lax.pad_p: _pad, lax.iota_p: _iota,
    lax.dot_general_p: _dot_general, lax.cond_p: _cond, lax.while_p: _while,
    lax.scan_p: _scan,
}
_HANDLERS.update(wholegen_indexing.HANDLERS)
for _name in ("copy_p", "copy_p_"):
    if hasattr(lax, _name):
        _HANDLERS[getattr(lax, _name)] = _copy


CONTROL_FLOW = (lax.cond_p, lax.while_p, lax.scan_p)


# ---------------------------------------------------------------- the program

def plan_program(jaxpr: Jaxpr) -> WholePlan:
    """The whole-program kernel of a constvar-free ``jaxpr`` (inputs in order).

    Raises:
      Unsupported: something the generator does not express (the message names it).
    """
    gen = _Gen()
    params = [f"a{i}" for i in range(len(jaxpr.invars))]
    lines: list[str] = []
    outs = gen.jaxpr(jaxpr, params, lines, "    ")
    out_avals = [v.aval for v in jaxpr.outvars]
    # every output is its own value (a scalar cast to its dtype)
    rets = [gen.cast(o, a) for o, a in zip(outs, out_avals)]
    const_names = [f"kc{i}" for i in range(len(gen.consts))]
    head = ["@njit(**_OPTIONS)", f"def kernel({', '.join(const_names + params + ['unit'])}):"]
    lines.append(f"    return ({''.join(r + ', ' for r in rets)})")
    lines = _drop_unused(lines, gen.pure)
    source = "\n".join(head + lines) + "\n"
    if _USES_LOW.search(source):  # (float16/bfloat16 values: their conversions)
        source = codegen._LOW_IMPORT + source
    source = _kernel_modules(gen.kernels) + source

    arg_types: list = []
    call: list[str] = []
    wrapper_globals: dict = {}
    for i, c in enumerate(gen.consts):
        c.setflags(write=False)
        wrapper_globals[f"_K{i}"] = c
        call.append(f"_K{i}")
        arg_types.append(("rarray", c.dtype, c.ndim))
    wrapper_globals.update(_U16=np.uint16, _F32=np.float32)
    for p, v in zip(params, jaxpr.invars):
        dtype = np.dtype(v.aval.dtype)
        low = dtype in _LOW  # arrays as their bits, scalars as float32 values (exact)
        if v.aval.shape:
            call.append(f"_asc({p}).view(_U16)" if low else f"_asc({p})")
            arg_types.append(("rarray", np.dtype(np.uint16) if low else dtype,
                              len(v.aval.shape)))
        else:
            call.append(f"_F32({p}[()])" if low else f"{p}[()]")
            arg_types.append(("scalar", np.dtype(np.float32) if low else dtype))
    call.append("1")  # unit
    arg_types.append(("int",))
    results = []
    for j, a in enumerate(out_avals):
        if a.shape and np.dtype(a.dtype) in _LOW:  # uint16 bits, viewed as the format
            wrapper_globals[f"_D{j}"] = np.dtype(a.dtype)
            results.append(f"r[{j}].view(_D{j})")
        elif a.shape:
            results.append(f"r[{j}]")
        else:
            wrapper_globals[f"_T{j}"] = np.dtype(a.dtype).type
            results.append(f"_T{j}(r[{j}])")
    wrapper = "\n".join([
        f"def step({', '.join(params)}):",
        "    if _ready:",
        f"        r = _entry({', '.join(call)})",
        f"        return [{', '.join(results)}]",
        f"    return _interp({', '.join(params)})",
    ]) + "\n"
    plan = WholePlan(source, wrapper, arg_types, wrapper_globals, gen.primitives)
    plan.jaxpr = jaxpr  # (the first tier, plax_numba.llvm_tier_loops, plans from it)
    return plan


def _kernel_modules(kernels: dict) -> str:
    """The lines binding the program's cluster kernels (``kernels``: source -> (name,
    primitives)), each the ``kernel`` of a module of its own, keyed by its source
    (:func:`plax_numba.cache.load_kernel`, which writes and imports it once per process).

    Programs holding the same cluster kernel share its dispatcher, so numba compiles it once
    per process for each argument type and keeps it in its disk cache like any kernel; each
    program's compilation only links its code (numba links a callee's code into its caller's
    LLVM module and optimises them together, inlining it as it did when the kernels were
    functions of the program's module). The module text is written into the program's
    source, so the program's module is complete by itself: a compile worker or a later
    process importing it needs nothing else on disk.
    """
    if not kernels:
        return ""
    lines = ["from plax_numba.cache import load_kernel\n"]
    for src, (name, primitives) in kernels.items():
        text = cache.module_source(src, primitives)
        # (read as it runs, one line per line, wherever it needs no escapes)
        literal = (f"'''{text}'''" if "'''" not in text and "\\" not in text
                   and not text.endswith("'") else repr(text))
        lines.append(f"{name} = load_kernel({literal})\n")
    return "\n".join(lines) + "\n"


def equation_jaxpr(eqn: JaxprEqn) -> Jaxpr:
    """A jaxpr computing ``eqn`` alone, one input per operand position (literals included:
    they are passed at run time, so equal loops differing in constants share a kernel).
    Positions holding the same variable hold the same input (twice): a batched ``while``
    passes its constants to both cond and body, and whether the body recomputes the cond's
    predicate from the same values is what :mod:`plax_numba.active_blocks` asks."""
    same: dict = {}
    invars = [same.setdefault(id(v), Var(v.aval)) if isinstance(v, Var) else Var(v.aval)
              for v in eqn.invars]
    return Jaxpr([], invars, list(eqn.outvars),
                 [JaxprEqn(eqn.primitive, invars, list(eqn.outvars), eqn.params)])


def program_size(jaxpr: Jaxpr) -> tuple[int, int]:
    """``(equations, largest value's element count)`` of ``jaxpr``, sub-jaxprs included."""
    count, largest = 0, 0

    def walk(j):
        nonlocal count, largest
        for v in list(j.invars) + list(j.outvars):
            if not isinstance(v, Literal):
                largest = max(largest, math.prod(v.aval.shape))
        for e in j.eqns:
            count += 1
            for v in e.outvars:
                largest = max(largest, math.prod(v.aval.shape))
            for sub in _subjaxprs(e):
                walk(sub)
    walk(jaxpr)
    return count, largest


def body_largest(eqn: JaxprEqn) -> int:
    """The largest value's element count in the bodies of ``eqn`` (a ``cond``, ``while`` or
    ``scan``; 0 for an equation without bodies): a while loop's carries, a scan's per-step
    slices and carries, what the bodies compute from them."""
    return max((program_size(sub)[1] for sub in _subjaxprs(eqn)), default=0)


def largest_product(jaxpr: Jaxpr) -> int:
    """The most multiply-adds of one ``dot_general`` in ``jaxpr``, sub-jaxprs included."""
    largest = 0
    for e in jaxpr.eqns:
        if e.primitive is lax.dot_general_p:
            largest = max(largest, product_madds(e))
        for sub in _subjaxprs(e):
            largest = max(largest, largest_product(sub))
    return largest


def dispatch_steps(jaxpr: Jaxpr) -> tuple[int, bool]:
    """``(steps, has_dot)``: how many steps the per-cluster program of ``jaxpr`` dispatches
    (clusters and lone equations as :func:`plax.lowering.fusion_units` forms them for the
    Numba emitter, a call's body counted in place, control flow as its bodies' steps plus
    two: it runs them many times), and whether one is a ``dot_general``."""
    from plax.lowering import fusion_units
    from plax_numba.emitter import NumbaEmitter
    steps, has_dot = 0, False
    # the units the lowering itself offers the emitter (its rewrites and fusion options),
    # calls spliced as the driver splices the ones the emitter declines
    for unit in fusion_units(_spliced_calls(jaxpr), NumbaEmitter):
        if isinstance(unit, Cluster):
            steps += 1
            continue
        has_dot |= unit.primitive is lax.dot_general_p
        subs = _subjaxprs(unit)
        for sub in subs:
            n, d = dispatch_steps(sub)
            steps, has_dot = steps + n, has_dot or d
        steps += 2 if unit.primitive in CONTROL_FLOW else (0 if subs else 1)
    return steps, has_dot


def _subjaxprs(eqn):
    body = call_body(eqn)
    if body is not None:
        return [body.jaxpr]
    p = eqn.params
    if eqn.primitive is lax.cond_p:
        return [b.jaxpr for b in p["branches"]]
    if eqn.primitive is lax.while_p:
        return [p["cond_jaxpr"].jaxpr, p["body_jaxpr"].jaxpr]
    if eqn.primitive is lax.scan_p:
        return [p["jaxpr"].jaxpr]
    return []
