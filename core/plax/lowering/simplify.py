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

from plax.core.jaxpr import Jaxpr, JaxprEqn, Var
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


def _reshape_p():
    from plax.lax.shape import reshape_p
    return reshape_p


def _broadcast_in_dim_p():
    from plax.lax.shape import broadcast_in_dim_p
    return broadcast_in_dim_p
