"""A batched ``while`` whose elements run independently, as a loop over the active elements
only, a block at a time (the native-loop form :mod:`plax_numba.wholegen` gives such a loop).

As staged (``vmap`` of a ``while_loop``, the rejection samplers), the loop runs its body over
the whole batch every round, keeping finished elements with ``select_n``: ``random.gamma``
of 10**6 samples runs 4 rounds of its proposal over all 10**6 elements (and 8 rounds of the
normal draw nested in it) for about 1.02 proposals an element. Where
:func:`plax.lowering.batched_while.per_element_while` finds that each element's values are
those of its own loop, the kernel keeps a list of the active elements' indices instead, and
each round

* copies the rows of up to :data:`BLOCK` active elements (carries, and the constants
  aligned with the batch) into block buffers (a short last block repeats its last element:
  the same values, computed twice, stored once),
* runs the body, then the per-element predicate, resized to the block
  (:meth:`~plax.lowering.batched_while.PerElementWhile.resized`: the same equations),
* stores the new rows back and keeps the indices whose predicate still holds.

The first round takes every element (an element whose predicate is false comes out of the
body unchanged: that is the loop's form). Each element runs exactly the rounds of its own
loop, so the values (bits) are those of the loop as written; the work is the rounds each
element needs, in blocks small enough to stay in cache.
"""
from __future__ import annotations

import math

from plax.config import env_number

#: elements per block (``PLAX_NUMBA_WHILE_BLOCK``): large enough that a block's kernels
#: run vectorised with little per-call cost, small enough that a block's values stay in
#: the cache and that a last round's few active elements cost little
BLOCK = env_number("PLAX_NUMBA_WHILE_BLOCK", 1024)

#: batches of fewer elements keep the loop as written (a round over the whole batch)
MIN_SIZE = env_number("PLAX_NUMBA_WHILE_BLOCKS_MIN", 4 * BLOCK)

#: how many loops each form was generated for, by form (tests read it)
generated = {"blocks": 0}


def form_for(eqn):
    """The :class:`~plax.lowering.batched_while.PerElementWhile` of ``eqn`` when its loop is
    to run over active elements in blocks (a batch of at least :data:`MIN_SIZE`), else
    None."""
    from plax.lowering.batched_while import per_element_while
    if eqn.params["cond_nconsts"] + eqn.params["body_nconsts"] + 1 > len(eqn.invars):
        return None
    carries = eqn.invars[eqn.params["cond_nconsts"] + eqn.params["body_nconsts"]:]
    if not carries[0].aval.shape or int(carries[0].aval.shape[0]) < max(MIN_SIZE, 2 * BLOCK):
        return None
    return per_element_while(eqn)


def blocks_while(gen, eqn, form, ins: list, lines: list, ind: str) -> list:
    """Writes the loop of ``eqn`` (its operands' expressions ``ins``) over its active
    elements in blocks (see the module docstring); returns the final carries' names."""
    from plax_numba import wholegen as wg
    p = eqn.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    size, k = form.size, BLOCK
    pred, body = form.resized(k)
    generated["blocks"] += 1
    lines.append(f"{ind}# the while loop over its active elements, {k} at a time")

    def rows_view(name: str, aval, n: int, at: str = ind) -> str:
        """A ``(n, row)`` view of the C-contiguous array ``name`` (itself at rank 1), bound
        at indentation ``at``."""
        if len(aval.shape) == 1:
            return name
        view = gen.fresh("v")
        lines.append(f"{at}{view} = {name}.reshape(({n}, {math.prod(aval.shape[1:])}))")
        return view

    # the carries: writable copies of the initial values, updated row by row
    carries, carry_rows = [], []
    for x, v in zip(ins[nc + nb:], eqn.invars[nc + nb:]):
        c = gen.fresh("v")
        lines.append(f"{ind}{c} = {x}.copy()")
        carries.append(c)
        carry_rows.append(rows_view(c, v.aval, size))
    # a block buffer for each value read by rows: the carries, the aligned constants
    gathered, block_in, const_blocks = [], [], {}
    for j, (x, v) in enumerate(zip(ins, eqn.invars)):
        aligned = j >= nc + nb or form.aligned_consts[j]
        if not aligned:
            block_in.append(x)
            continue
        if j < nc + nb and x in const_blocks:  # (a batched loop passes cond and body both)
            block_in.append(const_blocks[x])
            continue
        blk = gen.fresh("v")
        shape = (k,) + tuple(v.aval.shape[1:])
        lines.append(f"{ind}{blk} = np.empty({wg._shape(shape)}, {wg._st(v.aval.dtype)})")
        block_in.append(blk)
        if j < nc + nb:
            const_blocks[x] = blk
        src = carry_rows[j - nc - nb] if j >= nc + nb else rows_view(x, v.aval, size)
        gathered.append((src, rows_view(blk, v.aval, k), v.aval))
    active, spare, n = gen.fresh("ia"), gen.fresh("ib"), gen.fresh("na")
    lines.append(f"{ind}{active} = np.arange({size})")
    lines.append(f"{ind}{spare} = np.empty({size}, np.int64)")
    lines.append(f"{ind}{n} = {size}")
    start, outer = len(lines), wg._enter_loop(gen)
    lines.append(f"{ind}while {n} > 0:")
    i1, i2, i3 = ind + "    ", ind + "        ", ind + "            "
    kept, s, nl, j, e = (gen.fresh(x) for x in ("m", "s", "nl", "j", "e"))
    lines.append(f"{i1}{kept} = 0")
    lines.append(f"{i1}for {s} in range(0, {n}, {k}):")
    lines.append(f"{i2}{nl} = min({k}, {n} - {s})")
    lines.append(f"{i2}for {j} in range({k}):")
    lines.append(f"{i3}{e} = {active}[{s} + min({j}, {nl} - 1)]")
    for src, dst, aval in gathered:
        _copy_row(gen, dst, j, src, e, aval, lines, i3)
    consts = block_in[:nc + nb]
    blk_carries = block_in[nc + nb:]
    new = gen.jaxpr(body.jaxpr, consts[nc:] + blk_carries, lines, i2,
                    wg._closed_consts(gen, body))
    [q] = gen.jaxpr(pred.jaxpr, consts[:nc] + new, lines, i2, wg._closed_consts(gen, pred))
    new_rows = [rows_view(x, v.aval, k, i2) for x, v in zip(new, eqn.invars[nc + nb:])]
    lines.append(f"{i2}for {j} in range({nl}):")
    lines.append(f"{i3}{e} = {active}[{s} + {j}]")
    for dst, src, v in zip(carry_rows, new_rows, eqn.invars[nc + nb:]):
        _copy_row(gen, dst, e, src, j, v.aval, lines, i3)
    lines.append(f"{i3}if {q}[{j}]:")
    lines.append(f"{i3}    {spare}[{kept}] = {e}")
    lines.append(f"{i3}    {kept} += 1")
    lines.append(f"{i1}{active}, {spare} = {spare}, {active}")
    lines.append(f"{i1}{n} = {kept}")
    wg._leave_loop(gen, outer, lines, start, ind)
    return carries


def _copy_row(gen, dst: str, at: str, src: str, frm: str, aval, lines: list, ind: str) -> None:
    """``dst[at] = src[frm]``: an element (rank-1 values) or a row of a ``(n, row)`` view, as
    a loop (numba's slice assignment compiles its shape check's message formatting)."""
    if len(aval.shape) == 1:
        lines.append(f"{ind}{dst}[{at}] = {src}[{frm}]")
        return
    r = gen.fresh("j")
    lines.append(f"{ind}for {r} in range({math.prod(aval.shape[1:])}):")
    lines.append(f"{ind}    {dst}[{at}, {r}] = {src}[{frm}, {r}]")
