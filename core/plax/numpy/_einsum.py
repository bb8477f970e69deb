"""einsum: parsed into unary steps (diagonals, sums) and pairwise dot_general contractions."""
from __future__ import annotations

import string

from plax import lax
from plax.core.trace import get_aval
from plax.numpy.util import check_arraylike, promote_dtypes


def _parse(subscripts: str, shapes):
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        lhs, out = subscripts.split("->")
        explicit = True
    else:
        lhs, out, explicit = subscripts, None, False
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum: {len(terms)} operand subscripts for {len(shapes)} operands")
    used = set(c for c in subscripts if c.isalpha())
    free = [c for c in string.ascii_letters if c not in used]
    ell_rank = 0
    for t, s in zip(terms, shapes):
        if "..." in t:
            ell_rank = max(ell_rank, len(s) - (len(t) - 3))
    ell = "".join(free[:ell_rank])
    expanded = []
    for t, s in zip(terms, shapes):
        if "..." in t:
            n = len(s) - (len(t) - 3)
            t = t.replace("...", ell[ell_rank - n:] if n else "")
        if len(t) != len(s):
            raise ValueError(f"einsum: subscripts {t!r} do not match operand of rank {len(s)}")
        expanded.append(t)
    if explicit:
        out = out.replace("...", ell)
    else:
        counts = {}
        for t in expanded:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return expanded, out


def _diagonal_and_sum(x, term: str, keep: set):
    """Takes diagonals of repeated letters in ``term`` and sums letters not in ``keep``."""
    from plax.numpy.shape_ops import diagonal
    while True:
        dup = next((c for c in term if term.count(c) > 1), None)
        if dup is None:
            break
        i = term.index(dup)
        j = term.index(dup, i + 1)
        x = diagonal(x, 0, i, j)  # removes axes i, j; appends the diagonal last
        term = term[:i] + term[i + 1:j] + term[j + 1:] + dup
    drop = tuple(k for k, c in enumerate(term) if c not in keep)
    if drop:
        x = lax.reduce_sum(x, drop)
        term = "".join(c for c in term if c in keep)
    return x, term


def einsum(subscripts: str, *operands, precision=None, preferred_element_type=None):
    check_arraylike("einsum", *operands)
    ops = promote_dtypes(*operands)
    terms, out = _parse(subscripts, [get_aval(o).shape for o in ops])
    sizes = {}
    for t, o in zip(terms, ops):
        for c, d in zip(t, get_aval(o).shape):
            if c not in sizes or sizes[c] == 1:
                sizes[c] = d
            elif d != 1 and d != sizes[c]:
                raise ValueError(f"einsum: size of label {c!r} differs between operands "
                                 f"({sizes[c]} vs {d}) in {subscripts!r}")
    pairs = list(zip(ops, terms))
    # letters needed later: in the output or in any operand not yet combined
    x, tx = pairs[0]
    rest = pairs[1:]
    needed = set(out) | {c for _, t in rest for c in t}
    x, tx = _diagonal_and_sum(x, tx, needed | set())
    for y, ty in rest:
        rest = rest[1:]
        later = set(out) | {c for _, t in rest for c in t}
        y, ty = _diagonal_and_sum(y, ty, later | set(tx))
        x, tx = _contract(x, tx, y, ty, later, sizes, precision, preferred_element_type)
    x, tx = _diagonal_and_sum(x, tx, set(out))
    if sorted(tx) != sorted(out):
        # letters of the output missing from operands can only be size-1 broadcasts
        raise ValueError(f"einsum: output subscript letters {out!r} not found in operands")
    perm = tuple(tx.index(c) for c in out)
    return lax.transpose(x, perm)


def _contract(x, tx, y, ty, later, sizes, precision, pet):
    """dot_general of two terms: shared letters needed later are batch axes, others contracted."""
    from plax.numpy.util import broadcast_to
    shared = [c for c in tx if c in ty]
    # broadcast size-1 axes of shared letters so dot_general sees equal sizes
    for c in shared:
        n = sizes[c]
        if get_aval(x).shape[tx.index(c)] != n:
            shp = list(get_aval(x).shape)
            shp[tx.index(c)] = n
            x = broadcast_to(x, tuple(shp))
        if get_aval(y).shape[ty.index(c)] != n:
            shp = list(get_aval(y).shape)
            shp[ty.index(c)] = n
            y = broadcast_to(y, tuple(shp))
    batch = [c for c in shared if c in later]
    contract = [c for c in shared if c not in later]
    dn = ((tuple(tx.index(c) for c in contract), tuple(ty.index(c) for c in contract)),
          (tuple(tx.index(c) for c in batch), tuple(ty.index(c) for c in batch)))
    # JAX's einsum asks for the operands' type when none is given (as its jaxprs show)
    out = lax.dot_general(x, y, dn, precision, get_aval(x).dtype if pet is None else pet)
    term = "".join(batch) + "".join(c for c in tx if c not in shared) + \
        "".join(c for c in ty if c not in shared)
    return out, term
