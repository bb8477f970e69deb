"""Rewrites of a jaxpr that every compiling backend may apply before lowering.

Reverse mode writes the gradient of a matrix product as a ``dot_general`` followed by a
``transpose`` (the transpose rule of ``dot_general`` puts the free dimensions back in the
primal's order). Run as written, the transpose is a strided view that the next kernel either
copies or reads column by column; XLA folds the pair into one product. So does
:func:`fold_transposed_products`, with the identity ``(A B)^T = B^T A^T``: a product of the
swapped operands has the transposed layout, at no extra cost.
"""
from __future__ import annotations

from plax.core.jaxpr import Jaxpr, JaxprEqn, Var


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
