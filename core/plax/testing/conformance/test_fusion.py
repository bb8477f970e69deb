"""Random multi-equation programs, jitted whole: what a fusing compiler must get right.

Each example is a random straight-line program (hypothesis draws it) over a few inputs of
dtypes float32, int32 and bool and shapes ``()``, ``(n,)``, ``(m, 1)`` and ``(m, n)``:
elementwise chains with broadcasting (a row broadcast into a matrix, a column, 0-d operands,
Python scalar literals), comparisons, logical operations, ``where``, casts, and reductions at
the end and in the middle (their results broadcast back into later operations). Operands are
picked among all earlier values, so some values die at once, some are reused many times, and
some are outputs that later operations still read (what liveness analysis must handle); an
output may be an input, or appear twice.

The program runs ``jit(..., backend=NAME)`` as a whole, on operands ``plax.device_put`` to each
device of the backend, and eagerly (op by op, on the pinned backend); both are compared with a
NumPy interpreter of the same program that computes floats in float64 (ints wrap as int32).
Floats whose float32 computation is exact (tracked through the program: grid inputs, casts,
sums and products that stay representable) must match bit for bit -- those are also the only
floats compared with ``<``, ``==``..., so no comparison flips on rounding; the others must
agree within a tolerance scaled by the largest intermediate value they depend on.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import plax
import plax.numpy as jnp

from .harness import TOL, devices_of, examples, fetch, put_committed

F32, I32, BOOL = "float32", "int32", "bool"
RANK = {BOOL: 0, I32: 1, F32: 2}
SHAPES = ("s", "r", "c", "f")  # (), (n,), (m, 1), (m, n)
EXACT_LIMIT = 2.0 ** 24        # float32 integers (scaled by 2**frac) are exact below this
INT_WRAP = 2.0 ** 31


@dataclasses.dataclass(frozen=True)
class Value:
    """What the generator knows of a value: dtype, shape kind, a bound on its magnitude and,
    for floats, ``frac`` when float32 computes it exactly (a multiple of ``2**-frac``)."""

    dtype: str
    shape: str
    bound: float
    frac: int | None = None

    @property
    def exact(self) -> bool:
        if self.dtype != F32:
            return True
        return self.frac is not None and self.bound * 2.0 ** self.frac < EXACT_LIMIT


@dataclasses.dataclass
class Program:
    """Inputs ``(dtype, shape kind)``, equations (tuples naming earlier value indices), and the
    indices of the outputs. Values ``0..len(inputs)-1`` are the inputs."""

    m: int
    n: int
    inputs: list
    nodes: list = dataclasses.field(default_factory=list)
    values: list = dataclasses.field(default_factory=list)
    outputs: list = dataclasses.field(default_factory=list)

    def shape(self, kind: str) -> tuple:
        return {"s": (), "r": (self.n,), "c": (self.m, 1), "f": (self.m, self.n)}[kind]

    def __repr__(self) -> str:  # what hypothesis prints for a failing example
        lines = [f"Program(m={self.m}, n={self.n})"]
        for i, (dtype, kind) in enumerate(self.inputs):
            lines.append(f"  v{i} = input {dtype}{list(self.shape(kind))}")
        for j, node in enumerate(self.nodes):
            refs = _REFS[node[0]]
            args = [f"v{a}" if k in refs else repr(a) for k, a in enumerate(node) if k > 0]
            lines.append(f"  v{len(self.inputs) + j} = {node[0]}({', '.join(args)})")
        lines.append(f"  return {', '.join(f'v{i}' for i in self.outputs)}")
        return "\n".join(lines)


# Positions of value indices in each kind of equation tuple.
_REFS = {"unary": (2,), "binary": (2, 3), "compare": (2, 3), "logic": (2, 3), "literal": (2,),
         "where": (1, 2, 3), "cast": (2,), "reduce": (3,)}


def _broadcast(a: str, b: str) -> str:
    kinds = {a, b} - {"s"}
    if not kinds:
        return "s"
    if len(kinds) == 1:
        return kinds.pop()
    return "f"  # a row with a column, or anything with a matrix


def _promote(*dtypes: str) -> str:
    return max(dtypes, key=RANK.__getitem__)


def _as_float(v: Value) -> Value:
    """``v`` converted to float32 (for promotion): exactness of ints below 2**24 kept."""
    if v.dtype == F32:
        return v
    return Value(F32, v.shape, v.bound, 0 if v.bound < EXACT_LIMIT else None)


# ------------------------------------------------------------------ generating programs

FLOAT_LITERALS = (-2.0, -0.5, 0.5, 1.5, 2.0, 3.0)
INT_LITERALS = (-3, -1, 1, 2, 7)
REDUCE_AXES = {"f": ("all", 0, 1), "r": ("all",), "c": ("all",)}
REDUCED_KIND = {("f", 0): "r", ("f", 1): "c"}


@st.composite
def programs(draw) -> Program:
    m, n = draw(st.sampled_from([(2, 3), (3, 1), (1, 4), (4, 4), (5, 7), (16, 33)]))
    prog = Program(m, n, [])
    for _ in range(draw(st.integers(2, 4))):
        dtype = draw(st.sampled_from([F32, F32, I32, BOOL]))
        kind = draw(st.sampled_from(SHAPES))
        prog.inputs.append((dtype, kind))
        bound = {F32: 3.0, I32: 5.0, BOOL: 1.0}[dtype]
        prog.values.append(Value(dtype, kind, bound, 2 if dtype == F32 else None))

    def pick(ok=lambda v: True):
        """An earlier value satisfying ``ok``, recent ones preferred (chains), else None."""
        idx = [i for i, v in enumerate(prog.values) if ok(v)]
        if not idx:
            return None
        if draw(st.booleans()):
            return idx[-1] if len(idx) == 1 else draw(st.sampled_from(idx[-2:]))
        return draw(st.sampled_from(idx))

    for _ in range(draw(st.integers(3, 12))):
        family = draw(st.sampled_from(["unary", "binary", "binary", "literal", "compare",
                                       "logic", "where", "cast", "reduce"]))
        node = _make_node(draw, prog, family, pick) or _make_node(draw, prog, "unary", pick)
        prog.nodes.append(node[0])
        prog.values.append(node[1])
    total = len(prog.values)
    outs = [total - 1]
    if draw(st.booleans()):  # a final reduction of the last value
        last = prog.values[-1]
        if last.shape != "s":
            node = _reduce(draw, prog, total - 1, last)
            if node is not None:
                prog.nodes.append(node[0])
                prog.values.append(node[1])
                outs = [total]
    outs += draw(st.lists(st.integers(0, len(prog.values) - 1), max_size=2))
    prog.outputs = outs
    return prog


def _unary(draw, i, v):
    if v.dtype == BOOL:
        return ("unary", "logical_not", i), v
    names = ["negative", "abs"]
    if v.dtype == F32:
        names += ["tanh", "sin"] + (["exp"] if v.bound <= 4 else [])
    name = draw(st.sampled_from(names))
    if name in ("negative", "abs"):
        return ("unary", name, i), v
    bound = math.exp(v.bound) if name == "exp" else 1.0
    return ("unary", name, i), Value(F32, v.shape, bound)


def _arith(name: str, a: Value, b: Value, dtype: str) -> Value | None:
    """The result of arithmetic ``name`` on ``a`` and ``b`` promoted to ``dtype``, or None if
    a float product could overflow float32's useful range."""
    shape = _broadcast(a.shape, b.shape)
    if dtype == I32:
        bound = {"add": a.bound + b.bound, "subtract": a.bound + b.bound,
                 "multiply": a.bound * b.bound}.get(name, max(a.bound, b.bound))
        return Value(I32, shape, min(bound, INT_WRAP))
    a, b = _as_float(a), _as_float(b)
    if name == "multiply":
        bound = a.bound * b.bound
        if bound > 1e6:
            return None
    elif name in ("add", "subtract"):
        bound = a.bound + b.bound
    else:
        bound = max(a.bound, b.bound)
    frac = None
    if a.frac is not None and b.frac is not None:
        frac = a.frac + b.frac if name == "multiply" else max(a.frac, b.frac)
    return Value(F32, shape, bound, frac)


def _reduce(draw, prog, i, v):
    if v.shape == "s":
        return None
    axis = draw(st.sampled_from(REDUCE_AXES[v.shape]))
    kind = REDUCED_KIND.get((v.shape, axis), "s")
    if v.dtype == BOOL:
        return ("reduce", draw(st.sampled_from(["any", "all"])), axis, i), Value(BOOL, kind, 1.0)
    name = draw(st.sampled_from(["sum", "sum", "max", "min"]))
    if name != "sum":
        return ("reduce", name, axis, i), dataclasses.replace(v, shape=kind)
    return ("reduce", "sum", axis, i), _sum_value(prog, v, kind)


def _sum_value(prog: Program, v: Value, kind: str) -> Value:
    bound = v.bound * prog.m * prog.n  # at most m * n terms
    if v.dtype == I32:
        return Value(I32, kind, min(bound, INT_WRAP))
    return Value(F32, kind, bound, v.frac)


def _make_node(draw, prog: Program, family: str, pick):
    vals = prog.values
    if family == "unary":
        i = pick()
        return _unary(draw, i, vals[i])
    if family == "binary":
        i = pick(lambda v: v.dtype != BOOL)
        if i is None:
            return None
        j = pick()
        name = draw(st.sampled_from(["add", "subtract", "multiply", "maximum", "minimum"]))
        out = _arith(name, vals[i], vals[j], _promote(vals[i].dtype, vals[j].dtype))
        if out is None:
            return None
        a, b = (i, j) if draw(st.booleans()) else (j, i)
        return ("binary", name, a, b), out
    if family == "literal":
        i = pick(lambda v: v.dtype != BOOL)
        if i is None:
            return None
        v = vals[i]
        name = draw(st.sampled_from(["add", "subtract", "multiply", "maximum"]))
        if v.dtype == F32:
            lit = draw(st.sampled_from(FLOAT_LITERALS))
            lv = Value(F32, "s", abs(lit), 1)
        else:
            lit = draw(st.sampled_from(INT_LITERALS))
            lv = Value(I32, "s", abs(lit))
        out = _arith(name, v, lv, v.dtype)
        if out is None:
            return None
        return ("literal", name, i, lit, draw(st.booleans())), out
    if family == "compare":
        i = pick(lambda v: v.exact)
        if i is None:
            return None
        j = pick(lambda v: v.exact and (v.dtype == BOOL) == (vals[i].dtype == BOOL))
        dtype = _promote(vals[i].dtype, vals[j].dtype)
        if dtype == F32 and not (_as_float(vals[i]).exact and _as_float(vals[j]).exact):
            return None  # an int too large for float32 to hold exactly
        name = draw(st.sampled_from(["less", "less_equal", "greater", "equal", "not_equal"]))
        return ("compare", name, i, j), Value(BOOL, _broadcast(vals[i].shape, vals[j].shape), 1.0)
    if family == "logic":
        i, j = pick(lambda v: v.dtype == BOOL), pick(lambda v: v.dtype == BOOL)
        if i is None or j is None:
            return None
        name = draw(st.sampled_from(["logical_and", "logical_or", "logical_xor"]))
        return ("logic", name, i, j), Value(BOOL, _broadcast(vals[i].shape, vals[j].shape), 1.0)
    if family == "where":
        c = pick(lambda v: v.dtype == BOOL)
        if c is None:
            return None
        i, j = pick(), pick()
        a, b = vals[i], vals[j]
        dtype = _promote(a.dtype, b.dtype)
        shape = _broadcast(vals[c].shape, _broadcast(a.shape, b.shape))
        if dtype == F32:
            a, b = _as_float(a), _as_float(b)
            frac = None if a.frac is None or b.frac is None else max(a.frac, b.frac)
            out = Value(F32, shape, max(a.bound, b.bound), frac)
        else:
            out = Value(dtype, shape, max(a.bound, b.bound))
        return ("where", c, i, j), out
    if family == "cast":
        i = pick(lambda v: v.dtype != F32)
        if i is None:
            return None
        v = vals[i]
        target = F32 if v.dtype == I32 else draw(st.sampled_from([I32, F32]))
        out = _as_float(v) if target == F32 else Value(I32, v.shape, 1.0)
        return ("cast", target, i), out
    if family == "reduce":
        i = pick(lambda v: v.shape != "s")
        return None if i is None else _reduce(draw, prog, i, vals[i])
    raise AssertionError(family)


# ------------------------------------------------------------------ running programs

def _operands(prog: Program, seed: int) -> list:
    """Host inputs: floats on a grid of quarters in [-3, 3], ints in [-5, 5], random bools."""
    rng = np.random.default_rng(seed)
    out = []
    for dtype, kind in prog.inputs:
        shape = prog.shape(kind)
        if dtype == F32:
            out.append((rng.integers(-12, 13, size=shape) / 4).astype(np.float32))
        elif dtype == I32:
            out.append(rng.integers(-5, 6, size=shape).astype(np.int32))
        else:
            out.append(rng.random(shape) < 0.5)
    return out


def run_plax(prog: Program, args) -> tuple:
    """The program on plax arrays (eagerly, or traced under jit)."""
    env = list(args)
    for node in prog.nodes:
        op = node[0]
        if op == "unary":
            out = getattr(jnp, node[1])(env[node[2]])
        elif op in ("binary", "compare", "logic"):
            out = getattr(jnp, node[1])(env[node[2]], env[node[3]])
        elif op == "literal":
            _, name, i, lit, left = node
            f = getattr(jnp, name)
            out = f(lit, env[i]) if left else f(env[i], lit)
        elif op == "where":
            out = jnp.where(env[node[1]], env[node[2]], env[node[3]])
        elif op == "cast":
            out = env[node[2]].astype(node[1])
        else:  # reduce
            _, name, axis, i = node
            f = getattr(jnp, name)
            out = f(env[i]) if axis == "all" else f(env[i], axis=axis, keepdims=axis == 1)
        env.append(out)
    return tuple(env[i] for i in prog.outputs)


_REF_DTYPE = {F32: np.float64, I32: np.int32, BOOL: np.bool_}


def run_reference(prog: Program, operands) -> tuple[list, list]:
    """The program in NumPy: floats in float64, int32 wrapping, bools. Returns the outputs and,
    per output, the largest magnitude among the values it depends on (the error scale)."""
    env = [np.asarray(x).astype(_REF_DTYPE[d]) for x, (d, _) in zip(operands, prog.inputs)]
    scale = [float(np.max(np.abs(x.astype(np.float64)), initial=0.0)) for x in env]
    vals = prog.values
    with np.errstate(all="ignore"):
        for k, node in enumerate(prog.nodes):
            want = vals[len(prog.inputs) + k].dtype
            op = node[0]
            if op == "unary":
                reads = [node[2]]
                f = {"negative": np.negative, "abs": np.abs, "tanh": np.tanh, "sin": np.sin,
                     "exp": np.exp, "logical_not": np.logical_not}[node[1]]
                out = f(env[node[2]])
            elif op == "binary":
                reads = [node[2], node[3]]
                a, b = (env[i].astype(_REF_DTYPE[want]) for i in reads)
                out = getattr(np, node[1])(a, b)
            elif op == "literal":
                _, name, i, lit, left = node
                reads = [i]
                a, lit = env[i], np.asarray(lit, env[i].dtype)
                out = getattr(np, name)(lit, a) if left else getattr(np, name)(a, lit)
            elif op == "compare":
                reads = [node[2], node[3]]
                common = _REF_DTYPE[_promote(vals[node[2]].dtype, vals[node[3]].dtype)]
                a, b = (env[i].astype(common) for i in reads)
                out = getattr(np, node[1])(a, b)
            elif op == "logic":
                reads = [node[2], node[3]]
                out = getattr(np, node[1])(env[node[2]], env[node[3]])
            elif op == "where":
                reads = [node[1], node[2], node[3]]
                out = np.where(env[node[1]], env[node[2]].astype(_REF_DTYPE[want]),
                               env[node[3]].astype(_REF_DTYPE[want]))
            elif op == "cast":
                reads = [node[2]]
                out = env[node[2]]
            else:
                _, name, axis, i = node
                reads = [i]
                kw = {} if axis == "all" else {"axis": axis, "keepdims": axis == 1}
                if name == "sum" and want == I32:
                    kw["dtype"] = np.int32
                out = getattr(np, name)(env[i], **kw)
            out = np.asarray(out).astype(_REF_DTYPE[want])
            env.append(out)
            mag = float(np.max(np.abs(out.astype(np.float64)), initial=0.0))
            scale.append(max([mag] + [scale[i] for i in reads]))
    return [env[i] for i in prog.outputs], [scale[i] for i in prog.outputs]


def _compare(got, want, value: Value, scale: float, what: str) -> None:
    got = np.asarray(got)
    assert got.dtype == np.dtype(value.dtype), f"{what}: dtype {got.dtype}, expected {value.dtype}"
    assert got.shape == np.shape(want), f"{what}: shape {got.shape}, expected {np.shape(want)}"
    if value.exact:  # ints, bools, and floats float32 computes exactly: bit for bit
        np.testing.assert_array_equal(got, np.asarray(want).astype(got.dtype), err_msg=what)
        return
    tol = 4 * TOL[F32]
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64), rtol=tol,
                               atol=tol * max(1.0, scale), err_msg=what)


def check_program(prog: Program, seed: int, backend_name: str) -> None:
    """``prog`` jitted whole and run eagerly, on every device, against the NumPy reference and
    against each other."""
    operands = _operands(prog, seed)
    expected, scales = run_reference(prog, operands)
    out_values = [prog.values[i] for i in prog.outputs]
    jitted = plax.jit(lambda *args: run_plax(prog, args), backend=backend_name)
    for device in devices_of(backend_name):
        args = put_committed(operands, device)
        got_jit = fetch(jitted(*args), device, f"jit on {device!r}")
        got_eager = fetch(run_plax(prog, args), device, f"eager on {device!r}")
        for k, (j, e, want, v, s) in enumerate(zip(got_jit, got_eager, expected, out_values,
                                                    scales)):
            what = f"output {k} (v{prog.outputs[k]}) on {device!r}"
            _compare(j, want, v, s, "jit " + what + " vs NumPy")
            _compare(e, want, v, s, "eager " + what + " vs NumPy")
            _compare(j, e, v, s, "jit " + what + " vs eager")


SETTINGS = settings(max_examples=examples(60), deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@SETTINGS
@given(prog=programs(), seed=st.integers(0, 2 ** 16))
def test_random_program_jitted_whole(prog, seed, backend_name):
    check_program(prog, seed, backend_name)


def _fixed(m, n, inputs, nodes, outputs) -> Program:
    """A hand-written program (values are recomputed by replaying the generator's rules)."""
    prog = Program(m, n, list(inputs), list(nodes), [], list(outputs))
    bound = {F32: 3.0, I32: 5.0, BOOL: 1.0}
    prog.values = [Value(d, k, bound[d], 2 if d == F32 else None) for d, k in inputs]
    for node in nodes:
        prog.values.append(_replay(prog, node))
    return prog


def _replay(prog: Program, node) -> Value:
    vals = prog.values
    op = node[0]
    if op == "unary":
        v = vals[node[2]]
        if node[1] in ("negative", "abs", "logical_not"):
            return v
        return Value(F32, v.shape, math.exp(v.bound) if node[1] == "exp" else 1.0)
    if op == "binary":
        a, b = vals[node[2]], vals[node[3]]
        return _arith(node[1], a, b, _promote(a.dtype, b.dtype))
    if op in ("compare", "logic"):
        return Value(BOOL, _broadcast(vals[node[2]].shape, vals[node[3]].shape), 1.0)
    if op == "where":
        c, a, b = vals[node[1]], vals[node[2]], vals[node[3]]
        dtype = _promote(a.dtype, b.dtype)
        frac = None
        if dtype == F32:
            a, b = _as_float(a), _as_float(b)
            frac = None if a.frac is None or b.frac is None else max(a.frac, b.frac)
        return Value(dtype, _broadcast(c.shape, _broadcast(a.shape, b.shape)),
                     max(a.bound, b.bound), frac)
    if op == "reduce":
        _, name, axis, i = node
        v = vals[i]
        kind = REDUCED_KIND.get((v.shape, axis), "s")
        if v.dtype == BOOL:
            return Value(BOOL, kind, 1.0)
        return _sum_value(prog, v, kind) if name == "sum" else dataclasses.replace(v, shape=kind)
    raise AssertionError(op)


# Shapes of work a compiler's liveness and fusion passes must get right, written out.
FIXED = {
    # an input returned as is, twice, beside a value computed from it
    "input passed through": _fixed(3, 4, [(F32, "f")], [("unary", "tanh", 0)], [0, 1, 0]),
    # a value that is an output and is read again afterwards
    "output read later": _fixed(2, 5, [(F32, "f"), (F32, "r")],
                                [("binary", "add", 0, 1), ("unary", "sin", 2),
                                 ("binary", "multiply", 2, 3)], [2, 4]),
    # a reduction in the middle broadcast back into the matrix (a softmax-like pattern)
    "reduction in the middle": _fixed(4, 7, [(F32, "f")],
                                      [("reduce", "max", 1, 0), ("binary", "subtract", 0, 1),
                                       ("unary", "exp", 2), ("reduce", "sum", 1, 3),
                                       ("unary", "tanh", 4), ("binary", "multiply", 3, 5)],
                                      [6]),
    # a value that dies at once, and one read by every later equation
    "dead and hot values": _fixed(16, 33, [(I32, "f"), (I32, "s"), (BOOL, "c")],
                                  [("unary", "negative", 0), ("binary", "add", 0, 1),
                                   ("binary", "maximum", 0, 4), ("compare", "less", 0, 1),
                                   ("logic", "logical_and", 6, 2), ("where", 7, 0, 5),
                                   ("reduce", "sum", 0, 8)], [9, 7]),
}


@pytest.mark.parametrize("name", list(FIXED))
def test_fixed_program(name, backend_name):
    check_program(FIXED[name], 0, backend_name)
