"""Sharding rules of the linear-algebra primitives (JAX 0.10's explicit sharding).

A factorization or solve works on whole matrices: the last two dimensions of each operand
must be unsplit (JAX's :class:`~plax.sharding_types.ShardingTypeError` otherwise, naming the
operand), and the leading (batch) dimensions, split alike on every operand, give every
result its leading dimensions. ``triangular_solve`` is JAX's finer rule: only the
dimension each operand contracts over must be unsplit, and the result takes the other one.
"""
from __future__ import annotations

from plax.sharding_types import ShardingTypeError, dims_spec, register_sharding_rule


def _batch(in_dims: list, name: str, core: int = 2) -> tuple:
    """The operands' common batch dims; JAX's errors for a split matrix dimension or
    batch dimensions split differently."""
    batches = []
    for i, dims in enumerate(in_dims):
        if any(dims[len(dims) - core:]):
            raise ShardingTypeError(f"Input {i} to {name} must be unsharded on non-batch "
                                    f"dimensions, but got {dims_spec(dims)!r}.")
        batches.append(dims[:len(dims) - core])
    if any(b != batches[0] for b in batches[1:]):
        raise ShardingTypeError(f"All inputs to {name} must have the same batch sharding, "
                                f"but got {[dims_spec(b) for b in batches]!r}.")
    return batches[0]


def _factorization(prim, in_dims, in_avals, params):
    batch = _batch(in_dims, prim.name)
    # every result has the operands' batch dimensions first, then whole matrix dimensions
    ranks = [len(a.shape) for a in prim.abstract_eval(*in_avals, **params)] \
        if prim.multiple_results else [len(prim.abstract_eval(*in_avals, **params).shape)]
    outs = [batch + ((),) * (r - len(batch)) for r in ranks]
    return outs if prim.multiple_results else outs[0]


for _name in ("cholesky", "lu", "qr", "eigh", "svd", "eig"):
    register_sharding_rule(_name)(_factorization)


@register_sharding_rule("triangular_solve")
def _triangular_solve(prim, in_dims, in_avals, params):
    a, b = in_dims
    left, trans = bool(params["left_side"]), bool(params["transpose_a"])
    if a[:-2] != b[:-2]:
        raise ShardingTypeError("All inputs to triangular_solve must have the same batch "
                                f"sharding, but got {dims_spec(a[:-2])!r} and "
                                f"{dims_spec(b[:-2])!r}.")
    # a's dimension contracted with b: its last unless left_side xor transpose_a picks
    # the first of the two
    a_contract = a[-2:][int(left ^ trans)]
    if a_contract:
        raise ShardingTypeError(
            "triangular solve input `a` must be unsharded on the contracting axis, but got "
            f"{dims_spec(a)!r} with left_side={left} and transpose_a={trans}.")
    if b[-2:][int(not left)]:
        raise ShardingTypeError(
            "triangular solve input `b` must be unsharded on the contracting axis, but got "
            f"{dims_spec(b)!r} with left_side={left} and transpose_a={trans}.")
    am, bm = a[-2:], b[-2:]
    rows_cols = (am[int(trans)], bm[1]) if left else (bm[0], am[int(not trans)])
    return a[:-2] + rows_cols
