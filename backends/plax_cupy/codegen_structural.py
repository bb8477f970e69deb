"""Values of a fusion cluster computed at the index their reader needs (structural fusion).

A cluster that absorbed the units feeding it through ``slice``, ``concatenate``, ``reshape``,
``squeeze``, ``pad``, ``rev``, ``transpose``, ``dynamic_slice`` or ``gather``
(:func:`plax.lowering.find_clusters` with ``structural=True``) holds equations
of several shapes. ``plax_elem(i)`` computes the cluster's own values at the loop's index
``i``; a structural equation's operand is computed where the element reads it:

* ``reshape``, ``squeeze``: the same flat (C-order) index;
* ``slice``: each coordinate ``start + c * stride``;
* ``concatenate``: the piece the element's coordinate along the axis falls in, at that
  coordinate minus the piece's offset (an ``if``/``else`` chain computing only that piece);
  where the pieces are the results of one multi-result equation (the original threefry
  layout's two hashed words) the equation is computed once, at the piece-local index, and
  the element takes the word of its piece (no branch, one hash);
* ``gather``: the operand element that the element's index vector (read, or computed by
  fused producers, at its batch position) and window coordinates pick, its start clamped, or
  out of bounds (``FILL_OR_DROP``) the fill value (:mod:`plax_cupy.gather_index`, the index
  arithmetic gather's own kernel uses too);
* ``broadcast_in_dim``, ``iota``, elementwise equations and cluster inputs: as in the loop,
  at the mapped index.

:class:`StructuralReads` writes the C++ lines; :func:`plax_cupy.codegen.plan_cluster` asks it
for each structural equation whose value the loop needs at ``i``.
"""
from __future__ import annotations

import re

import numpy as np

from plax import lax
from plax.core.jaxpr import Literal
from plax.lax.slicing import GatherScatterMode, gather_fill_value
from plax.lowering import BROADCAST, ELEMENTWISE, INDEX, STRUCTURAL, fusion_kind
from plax.lowering.fusion import KEEPS_ORDER

from plax_cupy import codegen as _cg
from plax_cupy.gather_index import gather_read

#: the longest chain of equations one read computes (each computing its operands at its mapped
#: index, a Python call deeper): a longer one (a thousand transposes between elementwise steps)
#: is declined, and the driver lowers the units the cluster was made of (``Cluster.parts``)
#: rather than the generator overflowing Python's stack
MAX_READ_DEPTH = 200

#: the most values the reads of one cluster may name: a branch (a concatenation's piece, a pad's
#: operand) computes again what the code before it has not, so a chain of concatenations of
#: shifted values (``x = concatenate([sin(x)[1:], x[:1]])``, repeated) doubles the source at each
#: step; past this the cluster is declined and lowered as its parts, as past MAX_READ_DEPTH
MAX_READ_NAMES = 4096


def is_structural(eqn, produced: set, shape: tuple) -> bool:
    """Whether ``eqn`` of a cluster over ``shape`` is computed through index maps rather than
    at the loop's index: a structural equation, a broadcast of a non-scalar value the cluster
    computes, or an equation whose results have another shape than the loop's (and not a
    reduction's).

    Args:
      eqn: the equation.
      produced: ids of the values the cluster's equations define.
      shape: the cluster's iteration shape.
    """
    kind = fusion_kind(eqn.primitive, structural=True)
    if kind == STRUCTURAL:
        return True
    if kind == BROADCAST:
        op = eqn.invars[0]
        return id(op) in produced and bool(op.aval.shape) and tuple(op.aval.shape) != shape
    if fusion_kind(eqn.primitive) not in (ELEMENTWISE, BROADCAST) and \
            fusion_kind(eqn.primitive, index=True) != INDEX:
        return False
    return any(tuple(v.aval.shape) not in (shape, ()) for v in eqn.outvars)


def coordinates(idx: str, shape) -> list[str]:
    """C expressions of the coordinates of the flat (C-order) index ``idx`` (an element of
    ``shape``, so the leading coordinate needs no ``%``) in ``shape``.

    Example:
      >>> coordinates("i", (4, 3))
      ['((i) / 3LL)', '((i) % 3LL)']
    """
    strides = _cg._strides(shape)
    if len(shape) == 1:
        return [f"({idx})"]
    return [f"(({idx}) / {s}LL)" if k == 0 else f"(({idx}) % {d}LL)" if s == 1 else
            f"(({idx}) / {s}LL % {d}LL)" for k, (s, d) in enumerate(zip(strides, shape))]


def _flat(coords: list[str], shape) -> str:
    """The flat index of ``coords`` in ``shape`` (C order)."""
    strides = _cg._strides(shape)
    terms = [c if s == 1 else f"{c} * {s}LL" for c, s, d in zip(coords, strides, shape) if d != 1]
    return " + ".join(terms) or "0LL"


def pad_map(coords: list[str], op_shape, padding_config, name=lambda expr: expr) -> tuple:
    """``pad``'s index map: where the result element at ``coords`` reads its operand.

    Along each axis ``t = c - low`` is an operand element's position where ``t >= 0``,
    ``t % (interior + 1) == 0`` and ``t / (interior + 1)`` is within the operand (negative
    ``low``/``high`` crop); elsewhere the element is the padding value. Conditions that hold
    for every coordinate of the result are left out.

    Args:
      coords: C expressions of the result element's coordinates.
      op_shape: the operand's shape.
      padding_config: the equation's ``(low, high, interior)`` per axis.
      name: gives a C expression a name (a local the caller declares) where it is used more
        than once; by default the expression itself.

    Returns:
      ``(condition, flat)``: the parenthesized C condition under which the element is the
      operand's (None: always) and the operand element's flat (C-order) index there.

    Example:
      >>> pad_map(["c0"], (4,), [(1, 0, 1)])
      ('((c0 - 1LL) >= 0LL && (c0 - 1LL) % 2LL == 0LL && ((c0 - 1LL) / 2LL) < 4LL)', '((c0 - 1LL) / 2LL)')
    """
    conditions, mapped = [], []
    for c, n, (lo, hi, interior) in zip(coords, op_shape, padding_config):
        step = int(interior) + 1
        t = c if lo == 0 else name(f"({c} - {int(lo)}LL)")
        if lo > 0:   # (lo <= 0: t >= 0 for every result coordinate)
            conditions.append(f"{t} >= 0LL")
        if step > 1:
            conditions.append(f"{t} % {step}LL == 0LL")
            t = f"({t} / {step}LL)"
        if hi > 0 or step > 1:   # (else t < n for every coordinate)
            conditions.append(f"{t} < {n}LL")
        mapped.append(t)
    return (f"({' && '.join(conditions)})" if conditions else None), _flat(mapped, op_shape)


def concatenate_map(coords: list[str], shapes, dimension: int) -> list[tuple[int, int, str]]:
    """``concatenate``'s index map: which operand the result element at ``coords`` reads, and
    where. Operands of no elements along ``dimension`` are skipped; the element is operand
    ``k``'s where ``coords[dimension]`` is below its ``end`` and at least the previous one's.

    Args:
      coords: C expressions of the result element's coordinates (the one along
        ``dimension`` named: it is read once a piece).
      shapes: the operands' shapes.
      dimension: the axis the operands are joined along.

    Returns:
      ``(k, end, flat)`` for each operand ``k`` of elements, in order: the coordinate where it
      ends and the flat (C-order) index of the element in it.

    Example:
      >>> concatenate_map(["c0", "c1"], [(2, 3), (2, 0), (2, 4)], 1)
      [(0, 3, 'c0 * 3LL + c1'), (2, 7, 'c0 * 4LL + (c1 - 3LL)')]
    """
    pieces, at = [], 0
    for k, shape in enumerate(shapes):
        extent = int(shape[dimension])
        if extent:
            local = list(coords)
            local[dimension] = f"({coords[dimension]} - {at}LL)" if at else coords[dimension]
            pieces.append((k, at + extent, _flat(local, tuple(shape))))
        at += extent
    return pieces


def _keeps_flat(eqn) -> bool:
    """Whether ``eqn`` hands each element its operand's element at the same flat index."""
    name = eqn.primitive.name
    if name in KEEPS_ORDER:
        return eqn.params.get("dimensions") is None or name == "squeeze"
    if name == "broadcast_in_dim":
        dims = list(eqn.params["broadcast_dimensions"])
        op = tuple(eqn.invars[0].aval.shape)
        out = tuple(eqn.params["shape"])
        return dims == sorted(dims) and all(op[j] == out[d] for j, d in enumerate(dims)) and \
            all(out[k] == 1 for k in range(len(out)) if k not in dims)
    return False


class StructuralReads:
    """Writes the C++ computing a cluster's values at index expressions (module docstring).

    Args:
      shape: the cluster's iteration shape.
      eqns: the cluster's equations.
      by_atom: ``id(atom) -> KernelInput`` of the cluster's inputs.
      locals_: ``id(var) -> local`` of the values the loop computed at ``i`` so far.
      load: the loop's operand load at ``i`` (``plan_cluster``'s ``load``).
    """

    def __init__(self, shape, eqns, by_atom: dict, locals_: dict, load):
        self.shape, self.by_atom, self.locals_, self.load = tuple(shape), by_atom, locals_, load
        self.producer = {id(v): (e, r) for e in eqns for r, v in enumerate(e.outvars)}
        self.count = 0
        self.depth = 0   # (equations being computed for one read, each awaiting the next)

    @staticmethod
    def pruned(body: list, marks: list, load_lines: set) -> list:
        """``plax_elem``'s lines without the constants of structural reads nothing reads (an
        index computed for an operand that turned out to be a scalar, a literal or a value at
        hand): NVRTC warns of each. ``marks`` (where each equation's lines start) and
        ``load_lines`` (indices of operand loads) are updated in place."""
        declared = re.compile(r"^\s*const [\w ]+? ([srv]\d+) = ")
        while True:
            text = "\n".join(body)
            drop = {j for j, line in enumerate(body) if (m := declared.match(line))
                    and len(re.findall(rf"\b{m.group(1)}\b", text)) == 1}
            if not drop:
                return body
            kept = [j for j in range(len(body)) if j not in drop]
            moved = {j: n for n, j in enumerate(kept)}
            marks[:] = [sum(1 for j in kept if j < m) for m in marks]
            loads = {moved[j] for j in load_lines if j in moved}
            load_lines.clear()
            load_lines.update(loads)
            body = [body[j] for j in kept]

    def _fresh(self, prefix: str = "s") -> str:
        self.count += 1
        if self.count > MAX_READ_NAMES:
            raise _cg.Unsupported(f"structural reads name more than {MAX_READ_NAMES} values")
        return f"{prefix}{self.count}"

    def value(self, atom, idx: str, lines: list, memo: dict) -> str:
        """The C expression of ``atom`` at flat index ``idx`` (``"i"``: the loop's), its
        computation appended to ``lines``; ``memo`` holds what ``lines`` computed so far."""
        shape = tuple(atom.aval.shape)
        if not shape:
            idx = "0LL"
        key = (id(atom), idx)
        if key in memo:
            return memo[key]
        if ((idx == "i" and shape == self.shape) or not shape) and id(atom) in self.locals_:
            return self.locals_[id(atom)]
        if isinstance(atom, Literal) or id(atom) not in self.producer:
            expr = self._input(atom, idx, shape, lines)
        else:
            eqn, r = self.producer[id(atom)]
            self.depth += 1
            if self.depth > MAX_READ_DEPTH:
                raise _cg.Unsupported(f"structural reads nested more than {MAX_READ_DEPTH} deep")
            try:
                expr = self._computed(eqn, r, idx, shape, lines, memo)
            finally:
                self.depth -= 1
        memo[key] = expr
        return expr

    def _input(self, atom, idx: str, shape, lines: list) -> str:
        inp = self.by_atom.get(id(atom))
        if inp is None:
            raise _cg.Unsupported(f"operand {atom} is not readable in the loop")
        if inp.kind == "literal":
            return inp.name
        if idx == "i" and shape == self.shape:
            return self.load(atom)
        local = self._fresh("r")
        lines.append(f"const {_cg.value_ctype(inp.dtype)} {local} = "
                     f"{_cg.load_expr(f'{inp.name}[{idx}]', inp.dtype)};")
        return local

    def _computed(self, eqn, r: int, idx: str, shape, lines: list, memo: dict) -> str:
        prim = eqn.primitive
        out = eqn.outvars[r]
        dout = np.dtype(out.aval.dtype)
        name = prim.name
        if prim is lax.threefry2x32_p:
            return self._multi(eqn, idx, lines, memo)[r]
        if _keeps_flat(eqn):
            return self.value(eqn.invars[0], idx, lines, memo)
        if name in ("reshape", "squeeze"):
            raise _cg.Unsupported(f"{name} with a transposition")
        if name == "slice":
            op_shape = tuple(eqn.invars[0].aval.shape)
            starts = eqn.params["start_indices"]
            steps = eqn.params.get("strides") or (1,) * len(op_shape)
            coords = [c if (s0 == 0 and st == 1) else f"({s0}LL + {c} * {st}LL)"
                      for c, s0, st in zip(coordinates(idx, shape), starts, steps)]
            return self.value(eqn.invars[0], self._index(_flat(coords, op_shape), lines, memo), lines, memo)
        if name == "concatenate":
            return self._concatenate(eqn, idx, shape, lines, memo)
        if name in ("transpose", "rev"):
            op_shape = tuple(eqn.invars[0].aval.shape)
            coords = coordinates(idx, shape)
            if name == "transpose":   # (output axis d is operand axis permutation[d])
                mapped = [""] * len(op_shape)
                for d, axis in enumerate(eqn.params["permutation"]):
                    mapped[int(axis)] = coords[d]
            else:
                flipped = {int(d) for d in eqn.params["dimensions"]}
                mapped = [f"({n - 1}LL - {c})" if d in flipped and n > 1 else c
                          for d, (c, n) in enumerate(zip(coords, op_shape))]
            return self.value(eqn.invars[0], self._index(_flat(mapped, op_shape), lines, memo), lines, memo)
        if name == "pad":
            return self._pad(eqn, idx, shape, lines, memo)
        if name == "gather":
            return self._gather(eqn, idx, shape, lines, memo)
        if name == "dynamic_slice":
            op_shape = tuple(eqn.invars[0].aval.shape)
            mapped = [f"({self._start(v, n - k, lines, memo)} + {c})"
                      for c, v, n, k in zip(coordinates(idx, shape), eqn.invars[1:], op_shape, shape)]
            return self.value(eqn.invars[0], self._index(_flat(mapped, op_shape), lines, memo), lines, memo)
        kind = fusion_kind(prim, index=True)
        local = self._fresh("v")
        if kind == INDEX:
            position = coordinates(idx, shape)[int(eqn.params["dimension"])]
            if dout.kind == "c":
                part = _cg._part_ctype(dout)
                expr = f"plax_cplx<{part}>(({part}){position}, ({part})0)"
            else:
                expr = f"(({_cg.value_ctype(dout)}){position})"
        elif kind == BROADCAST:
            op = eqn.invars[0]
            op_shape = tuple(op.aval.shape)
            if not op_shape:
                expr = self.value(op, "0LL", lines, memo)
            else:
                coords = coordinates(idx, shape)
                dims = eqn.params["broadcast_dimensions"]
                mapped = [coords[d] if op_shape[j] != 1 else "0LL" for j, d in enumerate(dims)]
                expr = self.value(op, self._index(_flat(mapped, op_shape), lines, memo), lines, memo)
        elif kind == ELEMENTWISE and len(eqn.outvars) == 1:
            args = [self.value(v, idx if v.aval.shape else "0LL", lines, memo) for v in eqn.invars]
            expr = _cg.elementwise_expr(eqn, args)
        else:
            raise _cg.Unsupported(f"{name} inside a structural read")
        lines.append(f"const {_cg.value_ctype(dout)} {local} = {expr};")
        return local

    def _index(self, expr: str, lines: list, memo: dict | None = None) -> str:
        """``expr`` as a named index (a local), so memo keys stay short and equal indices share
        (one local per expression where ``memo`` holds what ``lines`` computed: a value read at
        an index spelled twice, through two broadcasts, is computed once)."""
        if re.fullmatch(r"[A-Za-z_]\w*|\d+LL", expr):
            return expr
        key = ("index", expr)
        if memo is None:
            memo = {}
        if key not in memo:
            memo[key] = self._fresh("s")
            lines.append(f"const long long {memo[key]} = {expr};")
        return memo[key]

    def _multi(self, eqn, idx: str, lines: list, memo: dict) -> tuple:
        """Every result of the multi-result ``eqn`` (``threefry2x32``) at ``idx``, computed once."""
        key = (id(eqn), idx)
        if key not in memo:
            args = [self.value(v, idx if v.aval.shape else "0LL", lines, memo) for v in eqn.invars]
            words = tuple(self._fresh("w") for _ in eqn.outvars)
            lines.append(f"unsigned int {', '.join(words)};")
            lines.append(f"plax_threefry_elem({', '.join(args)}, {', '.join('&' + w for w in words)});")
            memo[key] = words
        return memo[key]

    def _concatenate(self, eqn, idx: str, shape, lines: list, memo: dict) -> str:
        dim = int(eqn.params["dimension"])
        coords = coordinates(idx, shape)
        c = self._index(coords[dim], lines, memo)
        named = list(coords)
        named[dim] = c
        reads = concatenate_map(named, [tuple(v.aval.shape) for v in eqn.invars], dim)
        pieces = [eqn.invars[k] for k, _, _ in reads]
        offsets = [0] + [end for _, end, _ in reads[:-1]]
        words = self._words_of_one_equation(pieces)
        if words is not None:   # one evaluation at the piece-local index, its piece's word
            source, results = words
            p = self._fresh("p")
            lines.append(f"const int {p} = {' + '.join(f'({c} >= {o}LL)' for o in offsets[1:]) or '0'};")
            shift = "0LL"
            for k in range(1, len(offsets)):
                shift = f"({p} == {k} ? {offsets[k]}LL : {shift})"
            local_coords = list(coords)
            local_coords[dim] = f"({c} - {shift})"
            local_idx = self._index(_flat(local_coords, tuple(pieces[0].aval.shape)), lines, memo)
            ws = self._multi(source, local_idx, lines, memo)
            expr = ws[results[-1]]
            for k in range(len(results) - 2, -1, -1):
                expr = f"({p} == {k} ? {ws[results[k]]} : {expr})"
            return expr
        dout = np.dtype(eqn.outvars[0].aval.dtype)
        local = self._fresh("v")
        lines.append(f"{_cg.value_ctype(dout)} {local};")
        for n, (k, end, flat) in enumerate(reads):
            branch: list = []
            inner = dict(memo)   # (what a branch computes is not visible after it)
            expr = self.value(eqn.invars[k], self._index(flat, branch, inner), branch, inner)
            branch.append(f"{local} = {expr};")
            if n == len(reads) - 1:
                head = "} else {" if n else "{"
            else:
                head = f"{'} else ' if n else ''}if ({c} < {end}LL) {{"
            lines.append(head)
            lines.extend("  " + line for line in branch)
        lines.append("}")
        return local

    def _start(self, index, hi: int, lines: list, memo: dict) -> str:
        """A ``dynamic_slice`` start (the scalar ``index``, of any integer type) clamped to
        ``[0, hi]`` as the primitive does (:func:`plax_cupy.codegen.clamped_start`)."""
        if hi == 0:
            return "0LL"
        key = ("start", id(index), hi)
        if key not in memo:
            v = self.value(index, "0LL", lines, memo)
            memo[key] = self._index(_cg.clamped_start(v, index.aval.dtype, hi), lines)
        return memo[key]

    def _pad(self, eqn, idx: str, shape, lines: list, memo: dict) -> str:
        """``pad``'s element at ``idx``: along each axis ``t = c - low`` is an operand element's
        position where ``t >= 0``, ``t % (interior + 1) == 0`` and ``t / (interior + 1)`` is
        within the operand (negative ``low``/``high`` crop); the operand is read only there
        (a branch: no load outside its bounds), else the padding value."""
        op, fill = eqn.invars
        op_shape = tuple(op.aval.shape)
        dout = np.dtype(eqn.outvars[0].aval.dtype)
        pad_value = self.value(fill, "0LL", lines, memo)
        if 0 in op_shape:
            return pad_value   # (nothing of the operand is left: every element is padding)
        # (no condition: a crop, every element is the operand's)
        condition, flat = pad_map(coordinates(idx, shape), op_shape, eqn.params["padding_config"],
                                  lambda expr: self._index(expr, lines, memo))
        return self._read_where(op, flat, condition, pad_value, dout, lines, memo)

    def _gather(self, eqn, idx: str, shape, lines: list, memo: dict) -> str:
        """``gather``'s element at ``idx``: the operand element its index vector (read or
        computed at the element's batch position) and window coordinates pick
        (:func:`plax_cupy.gather_index.gather_read`, the index arithmetic of gather's own
        kernel); under ``FILL_OR_DROP`` the operand is read only where the window fits (a
        branch), else the fill value."""
        op, indices = eqn.invars
        op_shape = tuple(op.aval.shape)
        dout = np.dtype(eqn.outvars[0].aval.dtype)
        p = eqn.params
        fill = p["mode"] == GatherScatterMode.FILL_OR_DROP
        coords = [self._index(c, lines, memo) for c in coordinates(idx, shape)]
        off, inside = gather_read(
            lines, coords, op_shape, tuple(indices.aval.shape), indices.aval.dtype,
            dimension_numbers=p["dimension_numbers"], slice_sizes=p["slice_sizes"],
            index_value=lambda flat: self.value(indices, self._index(flat, lines, memo), lines, memo),
            fresh=self._fresh, bounds=fill)
        fill_value = None if inside is None else \
            _cg.c_literal(gather_fill_value(dout, p["fill_value"]), dout)
        return self._read_where(op, off, inside, fill_value, dout, lines, memo)

    def _read_where(self, op, flat: str, condition: str | None, otherwise: str | None, dtype,
                    lines: list, memo: dict) -> str:
        """``op``'s element at the flat index ``flat`` where the parenthesized C ``condition``
        holds, else ``otherwise`` (a C expression of ``dtype``): the operand is read in a
        branch (no load outside its bounds), and what the branch computes stays in it (its
        locals are not visible after it, so a copy of ``memo`` records them). Where
        ``condition`` is None, read unguarded."""
        if condition is None:
            return self.value(op, self._index(flat, lines, memo), lines, memo)
        local = self._fresh("v")
        branch: list = []
        inner = dict(memo)
        expr = self.value(op, self._index(flat, branch, inner), branch, inner)
        lines.append(f"{_cg.value_ctype(dtype)} {local} = {otherwise};")
        lines.append(f"if {condition} {{")
        lines.extend("  " + line for line in branch + [f"{local} = {expr};"])
        lines.append("}")
        return local

    def _words_of_one_equation(self, pieces):
        """``(equation, result index per piece)`` where every piece is a distinct result of one
        ``threefry2x32`` equation (the multi-result equation the generator computes), each of
        the same shape, reached through flat-index-keeping
        equations only; else None."""
        if len(pieces) < 2:
            return None
        source, results = None, []
        for v in pieces:
            if tuple(v.aval.shape) != tuple(pieces[0].aval.shape):
                return None
            while id(v) in self.producer and _keeps_flat(self.producer[id(v)][0]):
                v = self.producer[id(v)][0].invars[0]
            if id(v) not in self.producer:
                return None
            eqn, r = self.producer[id(v)]
            if eqn.primitive is not lax.threefry2x32_p or (source is not None and eqn is not source) \
                    or r in results:
                return None   # (threefry2x32: the multi-result equation the generator computes)
            source = eqn
            results.append(r)
        if len({tuple(o.aval.shape) for o in source.outvars}) != 1:
            return None
        return source, results
