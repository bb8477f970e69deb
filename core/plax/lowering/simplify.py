"""Rewrites of a jaxpr that every compiling backend may apply before lowering.

Reverse mode writes the gradient of a matrix product as a ``dot_general`` followed by a
``transpose`` (the transpose rule of ``dot_general`` puts the free dimensions back in the
primal's order). Run as written, the transpose is a strided view that the next kernel either
copies or reads column by column; XLA folds the pair into one product. So does
:func:`fold_transposed_products`, with the identity ``(A B)^T = B^T A^T``: a product of the
swapped operands has the transposed layout, at no extra cost.

An elementwise primitive broadcasts operands of size 1 along an axis (``add a:f32[3,2]
c:f32[1,2]``, as ``vmap`` stages it, and as JAX does). A fusing generator reads each operand of
a cluster at the loop's index, so :func:`explicit_broadcasts` writes such reads as the
``broadcast_in_dim`` they are: inside a cluster that is an index map (no memory), and every
generator's existing broadcast path serves them.

The transposes of size-1 broadcasts sum a cotangent over axes of size 1 (``reduce_sum[axes=(0,)]
x:f32[1,2048]``, as JAX stages the gradient of ``x @ w + b``); XLA turns such a reduction into
a reshape, and so does :func:`unit_reductions`: a reshape is a view, where a reduction is a
kernel (a launch on a GPU).
"""
from __future__ import annotations

import numpy as np

from plax.core.jaxpr import Jaxpr, JaxprEqn, Literal, Var
from plax.core.shaped_array import ShapedArray


def fold_transposed_products(jaxpr: Jaxpr, min_elements: int = 0) -> Jaxpr:
    """``jaxpr`` with each ``transpose[(1, 0)]`` of a matrix product folded into the product.

    A 2-D ``dot_general`` without batch dimensions whose only reader is a transpose with
    permutation ``(1, 0)`` becomes one ``dot_general`` of the swapped operands (contracting
    dimensions swapped too), writing the transpose's output directly. Other equations, and
    sub-jaxprs, are left as they are.

    Args:
      jaxpr: the program to rewrite (not modified).
      min_elements: fold only products with at least this many output elements (for small
        products a BLAS may prefer the written operand order to the saved transpose).

    Returns:
      ``jaxpr`` itself when there is nothing to fold, else a new :class:`Jaxpr` with the same
      inputs and outputs.

    Example:
      >>> f = lambda x, y: (x @ y).T
      >>> j = plax.make_jaxpr(f)(jnp.ones((2, 3)), jnp.ones((3, 4))).jaxpr
      >>> [e.primitive.name for e in fold_transposed_products(j).eqns]
      ['dot_general']
    """
    readers: dict = {}
    for eqn in jaxpr.eqns:
        for v in eqn.invars:
            if isinstance(v, Var):
                readers[v] = readers.get(v, 0) + 1
    for v in jaxpr.outvars:
        if isinstance(v, Var):
            readers[v] = readers.get(v, 0) + 1

    products = {eqn.outvars[0]: i for i, eqn in enumerate(jaxpr.eqns) if _plain_matrix_product(eqn)}
    folded: dict[int, JaxprEqn] = {}   # product's index -> its replacement
    dropped: set[int] = set()          # the transposes folded away
    for i, eqn in enumerate(jaxpr.eqns):
        if eqn.primitive.name != "transpose" or tuple(eqn.params["permutation"]) != (1, 0):
            continue
        (x,) = eqn.invars
        j = products.get(x) if isinstance(x, Var) else None
        if j is None or readers.get(x) != 1 or _size(x.aval.shape) < min_elements:
            continue
        folded[j] = _swapped(jaxpr.eqns[j], eqn.outvars[0])
        dropped.add(i)
    if not folded:
        return jaxpr
    eqns = [folded.get(i, eqn) for i, eqn in enumerate(jaxpr.eqns) if i not in dropped]
    return Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, eqns)


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _plain_matrix_product(eqn: JaxprEqn) -> bool:
    if eqn.primitive.name != "dot_general":
        return False
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars
    return (not lb and not rb and len(lc) == 1 and len(rc) == 1
            and len(lhs.aval.shape) == 2 and len(rhs.aval.shape) == 2)


def _swapped(product: JaxprEqn, out: Var) -> JaxprEqn:
    (lc, rc), batch = product.params["dimension_numbers"]
    params = dict(product.params, dimension_numbers=((tuple(rc), tuple(lc)), batch))
    precision = params.get("precision")
    if isinstance(precision, tuple) and len(precision) == 2:
        params["precision"] = precision[::-1]
    lhs, rhs = product.invars
    return JaxprEqn(product.primitive, [rhs, lhs], [out], params)


def _broadcasts_size_one(operand_shape: tuple, shape: tuple) -> bool:
    # an operand of the result's rank read with size 1 where the result is wider (not a
    # shape-changing "elementwise" equation such as bitcast_convert_type to a wider dtype)
    return (len(operand_shape) == len(shape) and tuple(operand_shape) != tuple(shape)
            and all(a == b or a == 1 for a, b in zip(operand_shape, shape)))


def explicit_broadcasts(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` with every size-1 broadcast inside an elementwise equation made explicit.

    An operand of an ``ELEMENTWISE`` equation (see :mod:`plax.lowering.fusion`) of rank > 0
    whose shape differs from the result's (it has size 1 where the result does not) is first
    broadcast to the result's shape by a ``broadcast_in_dim`` equation, which the equation
    then reads; rank-0 operands are left as they are. An operand that is itself a
    ``broadcast_in_dim`` (``vmap`` stages ``c:f32[1,3] = broadcast_in_dim b`` per use of an
    unbatched ``b``) is broadcast from *its* operand instead, and dropped when nothing else
    reads it: the chain then stays one cluster of the result's shape. Sub-jaxprs are left as
    they are (a backend lowers each with this same pass).

    Args:
      jaxpr: the program to rewrite (not modified).

    Returns:
      ``jaxpr`` itself when no elementwise equation broadcasts a size-1 axis, else a new
      :class:`Jaxpr` with the same inputs and outputs.

    Example:
      >>> f = plax.vmap(lambda x, y: x + y, in_axes=(0, None))
      >>> j = plax.make_jaxpr(f)(jnp.ones((3, 2)), jnp.ones(2)).jaxpr
      >>> [str(e.outvars[0].aval) for e in explicit_broadcasts(j).eqns]
      ['float32[3,2]', 'float32[3,2]']
    """
    from plax.lowering.fusion import ELEMENTWISE, fusion_kind
    broadcast_in_dim_p = _broadcast_in_dim_p()
    eqns: list | None = None
    broadcasts: dict = {}   # a broadcast_in_dim's output -> its equation
    bypassed: set = set()   # broadcast equations an explicit broadcast now reads past
    for i, eqn in enumerate(jaxpr.eqns):
        if eqn.primitive is broadcast_in_dim_p:
            broadcasts[eqn.outvars[0]] = eqn
        shape = tuple(eqn.outvars[0].aval.shape) if eqn.outvars else ()
        if (not shape or fusion_kind(eqn.primitive) != ELEMENTWISE
                or not any(_broadcasts_size_one(v.aval.shape, shape) for v in eqn.invars)):
            if eqns is not None:
                eqns.append(eqn)
            continue
        if eqns is None:
            eqns = list(jaxpr.eqns[:i])
        invars = []
        for v in eqn.invars:
            if _broadcasts_size_one(v.aval.shape, shape):
                source, params = v, {"broadcast_dimensions": tuple(range(len(shape)))}
                inner = broadcasts.get(v) if isinstance(v, Var) else None
                if inner is not None:  # compose: same axes, sizes 1 broadcast further
                    source, params = inner.invars[0], dict(inner.params)
                    bypassed.add(id(inner))
                wide = Var(ShapedArray(shape, v.aval.dtype, v.aval.weak_type))
                eqns.append(JaxprEqn(broadcast_in_dim_p, [source], [wide],
                                     {**params, "shape": shape}))
                v = wide
            invars.append(v)
        eqns.append(JaxprEqn(eqn.primitive, invars, eqn.outvars, eqn.params))
    if eqns is None:
        return jaxpr
    if bypassed:  # drop the bypassed broadcasts nothing reads any more
        read = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
        read.update(id(v) for e in eqns for v in e.invars if isinstance(v, Var))
        eqns = [e for e in eqns if id(e) not in bypassed or id(e.outvars[0]) in read]
    return Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, eqns)


#: the reductions whose value over a size-1 axis is the element itself
_UNIT_REDUCTIONS = ("reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and",
                    "reduce_or", "reduce_xor")


def unit_reductions(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` with each reduction over axes of size 1 only written as a ``reshape``.

    ``reduce_sum``/``prod``/``max``/``min``/``and``/``or``/``xor`` whose ``axes`` all have size 1
    in the operand (and whose result has the operand's dtype) drop those axes without combining
    anything, which is what a ``reshape`` to the result's shape does. Sub-jaxprs are left as
    they are (a backend lowers each with this same pass).

    Args:
      jaxpr: the program to rewrite (not modified).

    Returns:
      ``jaxpr`` itself when there is no such reduction, else a new :class:`Jaxpr` with the same
      inputs and outputs.

    Example:
      >>> j = plax.make_jaxpr(lambda b: b.sum(axis=0))(jnp.ones((1, 4))).jaxpr
      >>> [e.primitive.name for e in unit_reductions(j).eqns]
      ['reshape']
    """
    eqns = None
    for i, eqn in enumerate(jaxpr.eqns):
        unit = (eqn.primitive.name in _UNIT_REDUCTIONS and len(eqn.invars) == 1
                and len(eqn.outvars) == 1 and eqn.invars[0].aval.dtype == eqn.outvars[0].aval.dtype
                and all(eqn.invars[0].aval.shape[a] == 1 for a in eqn.params["axes"]))
        if not unit:
            if eqns is not None:
                eqns.append(eqn)
            continue
        if eqns is None:
            eqns = list(jaxpr.eqns[:i])
        out = eqn.outvars[0]
        eqns.append(JaxprEqn(_reshape_p(), list(eqn.invars), [out],
                             {"new_sizes": tuple(out.aval.shape), "dimensions": None}))
    if eqns is None:
        return jaxpr
    return Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, eqns)


def _pure(eqn: JaxprEqn) -> bool:
    # a fusible primitive (elementwise, broadcast, reduction, ...) or a reshape: a function of
    # its operands alone, with no sub-jaxpr and no effect
    from plax.lowering.fusion import fusion_kind
    return ((eqn.primitive is _reshape_p() or fusion_kind(eqn.primitive, True, True, True))
            and not any(isinstance(v, (Jaxpr,)) or hasattr(v, "jaxpr") for v in eqn.params.values()))


def _atom_key(atom, rename: dict):
    if isinstance(atom, Var):
        return id(rename.get(atom, atom))
    if getattr(atom.val, "size", 1) != 1:  # (an array's repr elides its middle)
        return id(atom)
    return ("literal", repr(atom.val), str(atom.aval.dtype))


def _params_key(params: dict):
    return tuple((k, id(v) if getattr(v, "size", 1) != 1 and hasattr(v, "dtype") else repr(v))
                 for k, v in sorted(params.items()))


def _renamed(eqn: JaxprEqn, rename: dict) -> JaxprEqn:
    if not rename or not any(isinstance(v, Var) and v in rename for v in eqn.invars):
        return eqn
    return JaxprEqn(eqn.primitive, [rename.get(v, v) if isinstance(v, Var) else v
                                    for v in eqn.invars], eqn.outvars, eqn.params)


def _substituted(jaxpr: Jaxpr, replace) -> Jaxpr:
    """``jaxpr`` with each equation for which ``replace(eqn, rename)`` gives ``{outvar: atom}``
    dropped and its readers reading those atoms instead (``eqn`` with the earlier
    replacements applied, ``rename`` them all; None keeps the equation). ``jaxpr`` itself
    when nothing is replaced."""
    rename: dict = {}
    eqns: list = []
    for eqn in jaxpr.eqns:
        eqn = _renamed(eqn, rename)
        new = replace(eqn, rename)
        if new is None:
            eqns.append(eqn)
        else:
            rename.update(new)
    if not rename:
        return jaxpr
    return Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, eqns)


def _finish(jaxpr: Jaxpr, eqns: list) -> Jaxpr:
    """``jaxpr`` with ``eqns``, less the equations nothing reads any more (the reshapes and
    broadcasts a rewrite bypassed): :func:`plax.core.passes.dce`'s pass."""
    from plax.core.passes import dce
    return dce(Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, eqns))


def common_subexpressions(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` with each pure equation that repeats an earlier one (same primitive,
    parameters and operands) dropped, its readers reading the earlier one's results.

    ``jnp.max(x, axis=1, keepdims=True)`` written twice, as the log-sum-exp of a softmax
    loss is, stages two identical reductions; their gradients stage a third. XLA computes
    each once, and so does a backend lowering this: one kernel (a launch on a GPU) less per
    repeat. Only fusible primitives and reshapes are merged (functions of their operands
    alone); an equation whose result is one of the jaxpr's outputs is kept (a later repeat of
    it reads its results). Sub-jaxprs are left as they are.

    Args:
      jaxpr: the program to rewrite (not modified).

    Returns:
      ``jaxpr`` itself when nothing repeats, else a new :class:`Jaxpr` with the same inputs
      and outputs.

    Example:
      >>> f = lambda x: x.max(axis=1) + x.max(axis=1)
      >>> j = plax.make_jaxpr(f)(jnp.ones((2, 3))).jaxpr
      >>> [e.primitive.name for e in common_subexpressions(j).eqns]
      ['reduce_max', 'add']
    """
    outputs = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
    seen: dict = {}

    def earlier(eqn, rename):
        if not _pure(eqn):
            return None
        key = (eqn.primitive, tuple(_atom_key(v, rename) for v in eqn.invars),
               _params_key(eqn.params))
        first = seen.setdefault(key, eqn)
        # (an equation computing an output is kept, but a later repeat reads its results)
        if first is eqn or any(id(v) in outputs for v in eqn.outvars):
            return None
        return dict(zip(eqn.outvars, first.outvars))
    return _substituted(jaxpr, earlier)


def fold_scalar_constants(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` with each scalar elementwise equation of literals alone computed now.

    ``grad`` of a mean stages ``neg 1.0`` and ``div -1.0 128.0`` (the cotangent's seed over
    the count); as written, each is a step of the program at every call (a kernel launch on
    a GPU) that computes the same number. XLA folds such constants when it compiles, and so
    does this pass: an equation of an elementwise primitive whose operands are all literals
    and whose one result is a scalar runs once, on the reference backend's kernel, and its
    readers read the result as a literal. Results that are the jaxpr's outputs keep their
    equation. Sub-jaxprs are left as they are (a backend lowers each with this same pass).

    Args:
      jaxpr: the program to rewrite (not modified).

    Returns:
      ``jaxpr`` itself when nothing folds, else a new :class:`Jaxpr` with the same inputs
      and outputs.

    Example:
      >>> j = plax.make_jaxpr(plax.grad(lambda x: jnp.mean(x * x)))(jnp.ones(4)).jaxpr
      >>> [e.primitive.name for e in j.eqns[2:5]]  # the loss (unread), the seed 1/4, its broadcast
      ['div', 'div', 'broadcast_in_dim']
      >>> folded = fold_scalar_constants(j)
      >>> [e.primitive.name for e in folded.eqns[2:4]], folded.eqns[3].invars[0].val
      (['div', 'broadcast_in_dim'], np.float32(0.25))
    """
    from plax.lowering.fallback import reference_kernel
    from plax.lowering.fusion import ELEMENTWISE, fusion_kind
    from plax.lowering.literals import literal_value
    outputs = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}

    def folded(eqn, rename):
        out = eqn.outvars[0] if len(eqn.outvars) == 1 else None
        foldable = (out is not None and eqn.invars and out.aval.shape == ()
                    and id(out) not in outputs and not eqn.primitive.multiple_results
                    and all(isinstance(v, Literal) for v in eqn.invars)
                    and fusion_kind(eqn.primitive) == ELEMENTWISE)
        kernel = reference_kernel(eqn.primitive) if foldable else None
        if kernel is None:
            return None
        with np.errstate(all="ignore"):
            value = kernel(*[literal_value(v) for v in eqn.invars], **eqn.params)
        return {out: Literal(np.asarray(value, out.aval.dtype)[()], out.aval)}
    return _substituted(jaxpr, folded)


def _unit_axes_only(a: tuple, b: tuple) -> bool:
    # shapes that differ only by axes of size 1 (a reshape between them is a view)
    return tuple(d for d in a if d != 1) == tuple(d for d in b if d != 1)


def sink_unit_reshapes(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` with elementwise equations computed before the reshapes that only add or drop
    axes of size 1 (``keepdims``), so that they fuse with their neighbours of the smaller
    shape.

    ``jnp.log(jnp.sum(e, axis=1, keepdims=True))`` stages ``reshape`` from ``f32[64]`` to
    ``f32[64,1]`` and ``log`` on the ``[64,1]`` value, a shape of its own: a kernel of its own
    beside the ``[64]`` equations around it. An elementwise equation whose operands (other
    than scalars) are all such reshapes of values of one shape is computed on those values,
    and its result reshaped to the equation's shape; a reshape of a reshape is one reshape (or
    none, where it restores the shape). The values are the same; reshapes are views. Sub-jaxprs
    are left as they are.

    Args:
      jaxpr: the program to rewrite (not modified).

    Returns:
      ``jaxpr`` itself when there is nothing to move, else a new :class:`Jaxpr` with the same
      inputs and outputs.

    Example:
      >>> f = lambda x: jnp.log(x.sum(axis=1, keepdims=True)) + x.max(axis=1, keepdims=True)
      >>> j = unit_reductions(plax.make_jaxpr(f)(jnp.ones((2, 3))).jaxpr)
      >>> [(e.primitive.name, e.outvars[0].aval.shape) for e in sink_unit_reshapes(j).eqns]
      [('reduce_sum', (2,)), ('log', (2,)), ('reduce_max', (2,)), ('add', (2,)), ('reshape', (2, 1))]
    """
    from plax.lowering.fusion import ELEMENTWISE, fusion_kind
    reshape_p = _reshape_p()
    outputs = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
    source: dict = {}   # a unit reshape's output -> the value it reshapes
    rename: dict = {}
    eqns: list = []
    changed = False
    for eqn in jaxpr.eqns:
        eqn = _renamed(eqn, rename)
        out = eqn.outvars[0] if len(eqn.outvars) == 1 else None
        if (eqn.primitive is reshape_p and eqn.params.get("dimensions") is None
                and isinstance(eqn.invars[0], Var)
                and _unit_axes_only(eqn.invars[0].aval.shape, out.aval.shape)):
            src = source.get(eqn.invars[0], eqn.invars[0])
            if src is not eqn.invars[0]:  # a reshape of a reshape: one reshape of the source
                changed = True
                if src.aval.shape == out.aval.shape and id(out) not in outputs:
                    rename[out] = src
                    continue
                eqn = JaxprEqn(reshape_p, [src], [out], eqn.params)
            source[out] = src
            eqns.append(eqn)
            continue
        if out is not None and fusion_kind(eqn.primitive) == ELEMENTWISE and out.aval.shape:
            wide = [v for v in eqn.invars if v.aval.shape]
            srcs = [source.get(v) if isinstance(v, Var) else None for v in wide]
            if (srcs and all(s is not None for s in srcs)
                    and len({s.aval.shape for s in srcs}) == 1
                    and all(v.aval.shape == out.aval.shape for v in wide)):
                shape = srcs[0].aval.shape
                args = [source.get(v, v) if isinstance(v, Var) and v.aval.shape else v
                        for v in eqn.invars]
                narrow = Var(ShapedArray(shape, out.aval.dtype, out.aval.weak_type))
                eqns.append(JaxprEqn(eqn.primitive, args, [narrow], eqn.params))
                eqns.append(JaxprEqn(reshape_p, [narrow], [out],
                                     {"new_sizes": tuple(out.aval.shape), "dimensions": None}))
                source[out] = narrow
                changed = True
                continue
        eqns.append(eqn)
    if not changed:
        return jaxpr
    return _finish(jaxpr, eqns)


#: elementwise primitives cheap enough to compute at every element of a broadcast of their
#: result rather than as a kernel of their own (one arithmetic instruction or so)
CHEAP_ELEMENTWISE = ("add", "add_any", "sub", "mul", "div", "neg", "max", "min", "abs", "sign",
                     "convert_element_type", "select_n", "eq", "ne", "lt", "le", "gt", "ge",
                     "and", "or", "not", "xor")

#: how many cheap equations deep :func:`hoist_broadcasts` moves one broadcast
_HOIST_DEPTH = 4


def hoist_broadcasts(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` with each ``broadcast_in_dim`` of a cheap elementwise result moved onto that
    equation's operands, so the equation is computed inside the broadcast's reader.

    The gradient of a softmax loss divides two ``f32[64]`` row values and broadcasts the
    quotient to ``f32[64,10]``: the division alone is a kernel (a launch on a GPU) between the
    two ``[64,10]`` ones. Where an elementwise equation of :data:`CHEAP_ELEMENTWISE` has no
    reader but one broadcast (and is not an output), the broadcast is applied to its operands
    instead (scalars stay scalars) and the equation computes the broadcast's result, in the
    reader's cluster; the same values, the operation repeated per broadcast element. A
    quotient of sums of products is moved through up to four such equations. Sub-jaxprs are
    left as they are.

    Args:
      jaxpr: the program to rewrite (not modified).

    Returns:
      ``jaxpr`` itself when no broadcast reads a cheap single-use result, else a new
      :class:`Jaxpr` with the same inputs and outputs.

    Example:
      >>> f = lambda a, b, c: c * jnp.broadcast_to((a / b)[:, None], (3, 4))
      >>> j = plax.make_jaxpr(f)(jnp.ones(3), jnp.ones(3), jnp.ones((3, 4))).jaxpr
      >>> j = hoist_broadcasts(compose_broadcasts(j))  # (the two broadcasts as one first)
      >>> [(e.primitive.name, e.outvars[0].aval.shape) for e in j.eqns]
      [('broadcast_in_dim', (3, 4)), ('broadcast_in_dim', (3, 4)), ('div', (3, 4)), ('mul', (3, 4))]
    """
    from plax.lowering.fusion import ELEMENTWISE, fusion_kind
    broadcast_in_dim_p = _broadcast_in_dim_p()
    reads: dict = {}
    for e in jaxpr.eqns:
        for v in e.invars:
            if isinstance(v, Var):
                reads[id(v)] = reads.get(id(v), 0) + 1
    for v in jaxpr.outvars:
        if isinstance(v, Var):
            reads[id(v)] = reads.get(id(v), 0) + 2  # never moved
    producer = {id(e.outvars[0]): e for e in jaxpr.eqns if len(e.outvars) == 1}

    def movable(v) -> JaxprEqn | None:
        e = producer.get(id(v)) if isinstance(v, Var) else None
        if (e is None or e.primitive.name not in CHEAP_ELEMENTWISE or reads.get(id(v)) != 1
                or fusion_kind(e.primitive) != ELEMENTWISE or not v.aval.shape):
            return None
        if any(a.aval.shape and a.aval.shape != v.aval.shape for a in e.invars):
            return None  # (a size-1 broadcast inside it: left to explicit_broadcasts)
        return e

    def broadcast(v, out: Var, params: dict, depth: int, eqns: list) -> None:
        e = movable(v) if depth < _HOIST_DEPTH else None
        if e is None:
            eqns.append(JaxprEqn(broadcast_in_dim_p, [v], [out], params))
            return
        args = []
        for a in e.invars:
            if a.aval.shape:
                wide = Var(ShapedArray(out.aval.shape, a.aval.dtype, a.aval.weak_type))
                broadcast(a, wide, params, depth + 1, eqns)
                a = wide
            args.append(a)
        eqns.append(JaxprEqn(e.primitive, args, [out], e.params))

    eqns: list = []
    changed = False
    for eqn in jaxpr.eqns:
        if eqn.primitive is broadcast_in_dim_p and movable(eqn.invars[0]) is not None:
            broadcast(eqn.invars[0], eqn.outvars[0], eqn.params, 0, eqns)
            changed = True
            continue
        eqns.append(eqn)
    if not changed:
        return jaxpr
    return _finish(jaxpr, eqns)


def compose_broadcasts(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` with each ``broadcast_in_dim`` of a ``broadcast_in_dim`` written as one
    broadcast of the first one's operand (dropped when nothing else reads it).

    The gradient of ``jnp.mean`` broadcasts a scalar to ``f32[64]`` and that to ``f32[64,10]``:
    the first is a lone equation (a kernel writing 64 copies), the second an index map inside
    the cluster that reads it. Composed, the cluster reads the scalar itself. Sub-jaxprs are
    left as they are.

    Args:
      jaxpr: the program to rewrite (not modified).

    Returns:
      ``jaxpr`` itself when no broadcast reads another, else a new :class:`Jaxpr` with the
      same inputs and outputs.

    Example:
      >>> f = lambda s: jnp.broadcast_to(jnp.broadcast_to(s, (3,))[:, None], (3, 4))
      >>> j = unit_reductions(plax.make_jaxpr(f)(1.0).jaxpr)
      >>> [e.params["broadcast_dimensions"] for e in compose_broadcasts(j).eqns
      ...  if e.primitive.name == "broadcast_in_dim"]
      [()]
    """
    broadcast_in_dim_p = _broadcast_in_dim_p()
    made: dict = {}  # a broadcast's output -> (its operand, its broadcast_dimensions)
    eqns: list = []
    changed = False
    for eqn in jaxpr.eqns:
        if eqn.primitive is broadcast_in_dim_p and isinstance(eqn.invars[0], Var):
            dims = tuple(eqn.params["broadcast_dimensions"])
            inner = made.get(eqn.invars[0])
            if inner is not None:  # operand axis i -> middle axis d -> this one's dims[d]
                operand, inner_dims = inner
                dims = tuple(dims[d] for d in inner_dims)
                eqn = JaxprEqn(broadcast_in_dim_p, [operand], eqn.outvars,
                               {**eqn.params, "broadcast_dimensions": dims})
                changed = True
            made[eqn.outvars[0]] = (eqn.invars[0], dims)
        eqns.append(eqn)
    if not changed:
        return jaxpr
    return _finish(jaxpr, eqns)


def _reshape_p():
    from plax.lax.shape import reshape_p
    return reshape_p


def _broadcast_in_dim_p():
    from plax.lax.shape import broadcast_in_dim_p
    return broadcast_in_dim_p
