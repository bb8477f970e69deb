"""The conformance harness: what a primitive spec is, and the generic checks run on every spec.

A :class:`Spec` describes one primitive: the dtypes it accepts, how to build its
operands and parameters (a list of :class:`Case` per dtype), a NumPy reference
computed in float64/complex128 (or exact Python integers), and how it is
differentiated. The test modules parametrise the checks below over the specs; each runs on
every device of the backend under test (which the kit's conftest pins as the executor of eager
work, see ``conftest.pinned_backend``):

* :func:`check_values`: ``backend.execute`` on the backend's own buffers, eager dispatch on
  operands ``plax.device_put`` to the device, and ``jit(..., backend=...)``, each against the
  reference, with the output dtype and shape equal to the primitive's abstract eval and the
  results fetched back with ``plax.device_get``;
* :func:`check_grads_of`: ``check_grads`` (order 2, fwd and rev) against finite differences,
  or a zero tangent for primitives declared non-differentiable;
* :func:`check_vmap`: ``vmap`` over batch axes 0, 1 and -1 (some operands unbatched)
  against a Python loop, eagerly and under ``jit``.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
from typing import Any, Callable, Sequence

import numpy as np

import plax
from plax import dtypes
from plax.core.passes import identity_condition
from plax.core.primitive import Primitive
from plax.core.shaped_array import ShapedArray
from plax.core.trace import get_aval

# ------------------------------------------------------------------ dtypes

BOOL = ("bool",)
SINT = ("int8", "int16", "int32", "int64")
UINT = ("uint8", "uint16", "uint32", "uint64")
INT = SINT + UINT
FLOAT = ("float16", "bfloat16", "float32", "float64")
COMPLEX = ("complex64", "complex128")
INEXACT = FLOAT + COMPLEX
NUM = INT + FLOAT + COMPLEX
ORDERED = BOOL + INT + FLOAT
ALL = BOOL + NUM
BOOL_OR_INT = BOOL + INT

WIDE = frozenset({"int64", "uint64", "float64", "complex128"})


def dt(name: str | np.dtype) -> np.dtype:
    """The NumPy dtype of a name (``"bfloat16"`` included)."""
    if isinstance(name, np.dtype):
        return name
    return dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def needs_x64(*names) -> bool:
    """Whether any of the dtypes is a 64-bit one (needs ``jax_enable_x64``)."""
    return any(dt(n).name in WIDE for n in names)


def is_inexact(d) -> bool:
    return dtypes.is_inexact(dt(d))


# Set by the kit's conftest under --plax-conformance-quick: fewer random examples.
QUICK = False


def examples(n: int) -> int:
    """How many random examples a hypothesis test draws: ``n``, or a few in quick mode."""
    return max(4, n // 6) if QUICK else n


# Relative (and, scaled by the reference's magnitude, absolute) tolerance per output dtype.
TOL = {
    "float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-11,
    "complex64": 1e-5, "complex128": 1e-11,
}


@functools.lru_cache(maxsize=None)
def jax_answers() -> dict:
    """Real JAX's recorded answers (``jax_answers.json``, written by ``record_jax_answers.py``)."""
    from importlib import resources
    return json.loads(resources.files(__package__).joinpath("jax_answers.json").read_text())


# ------------------------------------------------------------------ random operands

def rand(rng: np.random.Generator, shape, dtype, lo: float = -3.0, hi: float = 3.0) -> np.ndarray:
    """Random values of ``dtype`` in ``[lo, hi)`` (real and imaginary parts for complex)."""
    d = dt(dtype)
    shape = tuple(shape)
    if d == np.bool_:
        return rng.random(shape) < 0.5
    if d.kind in "iu":
        info = np.iinfo(d)
        a, b = max(math.floor(lo), int(info.min)), min(math.ceil(hi), int(info.max))
        return rng.integers(a, b, size=shape, endpoint=True, dtype=np.int64).astype(d) if b <= 2**62 \
            else rng.integers(a, b, size=shape, endpoint=True, dtype=np.uint64).astype(d)
    if d.kind == "c":
        return (rng.uniform(lo, hi, shape) + 1j * rng.uniform(lo, hi, shape)).astype(d)
    return np.asarray(rng.uniform(lo, hi, shape)).astype(d)


def rand_bits(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Values of an integer (or bool) dtype drawn from its whole range, extremes included."""
    d = dt(dtype)
    shape = tuple(shape)
    if d == np.bool_:
        return rng.random(shape) < 0.5
    raw = rng.integers(0, 256, size=shape + (d.itemsize,), dtype=np.uint8)
    out = np.ascontiguousarray(raw).view(d).reshape(shape)
    flat = out.reshape(-1)
    info = np.iinfo(d)
    extremes = [info.min, info.max, 0, 1]
    if d.kind == "i":
        extremes.append(-1)
    for k, v in enumerate(extremes[:flat.size]):
        flat[k] = v
    return out


def rand_distinct(rng: np.random.Generator, shape, dtype, lo=-3.0, hi=3.0) -> np.ndarray:
    """Random floats whose entries are pairwise at least ``(hi - lo) / (4 n)`` apart (no ties)."""
    n = math.prod(shape)
    grid = np.linspace(lo, hi, max(2 * n, 2))
    pick = rng.permutation(len(grid))[:n]
    return grid[pick].reshape(shape).astype(dt(dtype))


def f64(x) -> np.ndarray:
    """``x`` widened for a reference computation: float64 / complex128 (ints and bools kept)."""
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    if dtypes.is_float(x.dtype):
        return x.astype(np.float64)
    return x


def zero_ordered_max(x, y) -> np.ndarray:
    """Elementwise maximum in XLA's order (IEEE 754-2019 ``maximum``): NaN propagates and
    ``-0.0 < +0.0``, so two zeros give ``-0.0`` only when both are ``-0.0``. A reference for
    max-like primitives, whose results the kit compares bit for bit where they are exact."""
    x, y = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(y, np.float64))
    both_zero = (x == 0) & (y == 0)
    with np.errstate(invalid="ignore"):
        return np.where(both_zero, np.where(np.signbit(x) & np.signbit(y), -0.0, 0.0),
                        np.maximum(x, y))


def zero_ordered_min(x, y) -> np.ndarray:
    """Elementwise minimum in XLA's order: NaN propagates, two zeros give ``-0.0`` when
    either is ``-0.0`` (see :func:`zero_ordered_max`)."""
    return -zero_ordered_max(-np.asarray(x, np.float64), -np.asarray(y, np.float64))


def zero_ordered_gt(a, b) -> bool:
    """``a > b`` for two real Python scalars in XLA's order of zeros (``-0.0 < +0.0``)."""
    if a == b == 0 and isinstance(a, float) and isinstance(b, float):
        return math.copysign(1.0, a) > math.copysign(1.0, b)
    return a > b


def pyints(x) -> np.ndarray:
    """An object array of Python ints (exact integer reference arithmetic)."""
    return np.vectorize(int, otypes=[object])(np.asarray(x)) if np.size(x) else \
        np.zeros(np.shape(x), object)


def wrap(values, dtype) -> np.ndarray:
    """Python ints reduced modulo 2**bits into ``dtype`` (two's complement wrap-around)."""
    d = dt(dtype)
    v = np.asarray(values, dtype=object)
    if d == np.bool_:
        return (v != 0).astype(bool)
    bits = 8 * d.itemsize
    def one(x):
        x = int(x) % (1 << bits)
        if d.kind == "i" and x >= 1 << (bits - 1):
            x -= 1 << bits
        return x
    if v.size == 0:
        return np.zeros(v.shape, d)
    return np.vectorize(one, otypes=[object])(v).astype(d)


def as_dtype(ref, dtype) -> np.ndarray:
    """A float64/complex128 reference rounded to ``dtype`` (complex to real keeps the real part)."""
    d = dt(dtype)
    ref = np.asarray(ref)
    if ref.dtype.kind == "c" and d.kind != "c":
        ref = ref.real
    return ref.astype(d)


# ------------------------------------------------------------------ specs

@dataclasses.dataclass
class Case:
    """One call of a primitive: parameters, an operand sampler and the reference.

    Attributes:
      params: the primitive's parameters.
      sample: ``sample(rng) -> list of operands`` (NumPy arrays); called again with other
        seeds to build vmap batches, so it must keep shapes fixed.
      ref: ``ref(*operands) -> expected`` (an array, or a list for multi-output primitives),
        computed in float64/complex128 or exact integers.
      label: shown in failure messages.
      tol: tolerance override (a multiple of ``TOL`` by output dtype when a float).
      exact_bits: compare outputs bit for bit (NaNs of any payload match each other, unless
        ``"strict"``).
      vmap: whether the vmap check uses this case.
      grad_operands: the operands the linearization check differentiates (default: every
        inexact one).
      gauge: for outputs defined only up to a phase (eigen- and singular vectors):
        ``gauge(actual_outputs, expected_outputs) -> actual_outputs`` brought to the expected
        phases (:mod:`plax.testing.conformance.phases`), applied before every comparison of
        this case's results (values and vmap).
    """

    params: dict
    sample: Callable[[np.random.Generator], list]
    ref: Callable[..., Any]
    label: str = ""
    tol_scale: float = 1.0
    exact_bits: bool | str = False
    vmap: bool = True
    grad_operands: tuple | None = None
    gauge: Callable[[list, list], list] | None = None

    def operands(self, seed: int = 0) -> list:
        return [np.asarray(a) for a in self.sample(np.random.default_rng(seed))]


@dataclasses.dataclass
class GradCase:
    """A differentiable function of float arguments that binds the primitive.

    ``fun(*args)`` is checked with ``check_grads(order=2, modes=modes)`` (forward and
    reverse unless ``modes`` says otherwise).
    """

    fun: Callable
    args: tuple
    x64: bool = False
    eps: float | None = None
    atol: float | None = None
    label: str = ""
    order: int = 2
    modes: tuple = ("fwd", "rev")  # ("fwd",) for forward-only primitives (while)


@dataclasses.dataclass
class Spec:
    """The conformance description of one primitive.

    Attributes:
      prim: the primitive.
      dtypes: every dtype it accepts (the operand dtype the cases are built for).
      cases: ``cases(dtype) -> [Case]``: the shapes and parameters to check for one dtype.
      grads: ``grads() -> [GradCase]`` for differentiable primitives.
      nondiff: the primitive is piecewise constant (or integer-valued): its JVP is zero.
      vmap_dtype: the dtype whose cases are used for the vmap and jit-of-transform checks.
      x64: the cases need 64-bit types whatever the dtype (e.g. conversions to every dtype).
      no_operands: the primitive takes no operands (iota): nothing to batch or differentiate.
      no_jvp: the primitive has no derivative rule, as in JAX (random_gamma_grad):
        differentiating through it raises NotImplementedError naming it.
    """

    prim: Primitive
    dtypes: tuple
    cases: Callable[[np.dtype], list]
    grads: Callable[[], list] | None = None
    nondiff: bool = False
    vmap_dtype: str | None = None
    x64: bool = False
    no_operands: bool = False
    no_jvp: bool = False

    def __post_init__(self):
        if self.vmap_dtype is None:  # float32 if accepted, else the first usual type that is
            self.vmap_dtype = next(d for d in ("float32", "int32", "complex64", "uint8", "bool")
                                   if d in self.dtypes)
        assert self.vmap_dtype in self.dtypes, (self.prim, self.vmap_dtype)

    @property
    def name(self) -> str:
        return self.prim.name

    def __repr__(self) -> str:
        return self.prim.name


def bind(prim: Primitive, params: dict) -> Callable:
    """``f(*operands) = prim.bind(*operands, **params)`` as a plain function (for transforms)."""
    def f(*args):
        out = prim.bind(*args, **params)
        return list(out) if prim.multiple_results else out
    f.__name__ = f"bind_{prim.name.replace('-', '_')}"
    return f


# ------------------------------------------------------------------ comparisons

def _out_list(prim, out) -> list:
    return list(out) if prim.multiple_results else [out]


def assert_same(actual, expected, dtype, *, tol_scale: float = 1.0,
                exact_bits: bool | str = False,
                what: str = "") -> None:
    """``actual`` (of ``dtype``) equals ``expected``: within the dtype's tolerance for inexact
    dtypes (NaN and inf positions must agree), exactly otherwise."""
    d = dt(dtype)
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != expected {expected.shape}"
    if exact_bits:  # bit for bit (so -0.0 differs from 0.0), except that any NaN matches NaN
        expected = expected.astype(d)
        if dtypes.is_inexact(d) and exact_bits != "strict":
            nan_a, nan_e = np.isnan(actual), np.isnan(expected)
            np.testing.assert_array_equal(nan_a, nan_e, err_msg=f"{what}: NaN positions differ")
            actual, expected = np.where(nan_a, 0, actual), np.where(nan_e, 0, expected)
        a = np.ascontiguousarray(actual).view(np.uint8)
        e = np.ascontiguousarray(expected).view(np.uint8)
        np.testing.assert_array_equal(a, e, err_msg=f"{what}: bits differ")
        return
    if dtypes.is_inexact(d):
        wide = np.complex128 if d.kind == "c" else np.float64
        a = actual.astype(wide)
        e = expected.astype(wide)
        tol = TOL[d.name] * tol_scale
        finite = np.isfinite(e)
        scale = max(1.0, float(np.max(np.abs(e[finite])))) if finite.any() else 1.0
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol * scale, equal_nan=True,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected.astype(d), err_msg=what)


def expected_avals(prim: Primitive, operands: Sequence[np.ndarray], params: dict) -> list:
    avals = [ShapedArray(np.shape(a), np.asarray(a).dtype) for a in operands]
    out = prim.abstract_eval(*avals, **params)
    return list(out) if prim.multiple_results else [out]


def check_result(prim, case: Case, operands, outs, avals, how: str) -> None:
    """The outputs of one execution have the abstract eval's dtypes and shapes and match
    the reference."""
    expected = case.ref(*operands)
    expected = list(expected) if prim.multiple_results else [expected]
    assert len(outs) == len(avals) == len(expected), (
        f"{prim.name} {how} [{case.label}]: {len(outs)} outputs, abstract eval says {len(avals)}")
    hosts = [np.asarray(o) for o in outs]
    for k, (host, aval) in enumerate(zip(hosts, avals)):
        what = f"{prim.name} {how} [{case.label}] output {k}"
        assert host.dtype == aval.dtype, (
            f"{what}: backend returned dtype {host.dtype}, abstract eval says {aval.dtype}")
        assert host.shape == aval.shape, (
            f"{what}: backend returned shape {host.shape}, abstract eval says {aval.shape}")
    if case.gauge is not None:
        hosts = case.gauge(hosts, [np.asarray(e) for e in expected])
    for k, (host, aval, e) in enumerate(zip(hosts, avals, expected)):
        assert_same(host, e, aval.dtype, tol_scale=case.tol_scale, exact_bits=case.exact_bits,
                    what=f"{prim.name} {how} [{case.label}] output {k}")


def to_arrays(operands, device=None) -> list:
    """plax Arrays (not weakly typed) holding ``operands``, uncommitted, on ``device`` (default:
    the default device)."""
    from plax.array import from_host
    return [from_host(np.asarray(a), dtype=np.asarray(a).dtype, device=device) for a in operands]


def devices_of(backend_name: str) -> list:
    """Every device the backend reports (the registry's device objects, by id)."""
    devices = plax.devices(backend=backend_name)
    assert devices, f"backend {backend_name!r} reports no devices"
    return devices


def put_committed(operands, device) -> list:
    """``plax.device_put`` of each operand to ``device`` (a transfer from the host), checked:
    committed to that device, with the operand's shape and (canonical: 32-bit unless x64)
    dtype."""
    arrays = [plax.device_put(np.asarray(a), device) for a in operands]
    for a, x in zip(arrays, operands):
        x = np.asarray(x)
        assert a.devices() == {device}, f"device_put to {device!r} gave an array on {a.devices()}"
        assert (a.shape, a.dtype) == (x.shape, dtypes.canonicalize_dtype(x.dtype)), (
            f"device_put of {x.dtype}{list(x.shape)} gave {a.dtype}{list(a.shape)}")
    return arrays


def fetch(arrays, device, what: str) -> list:
    """The host values of ``arrays`` (``plax.device_get``, a transfer to the host), after
    checking that each was computed on ``device``."""
    for a in arrays:
        assert isinstance(a, plax.Array), f"{what}: returned {type(a).__name__}, not an Array"
        assert a.devices() == {device}, f"{what}: result on {a.devices()}, operands on {device!r}"
    return [np.asarray(h) for h in plax.device_get(list(arrays))]


def on_each_device(backend_name: str, check: Callable[[], None]) -> None:
    """Runs ``check()`` once per device of the backend, with that device as the default device
    (so the operands it builds, and the eager work on them, live there)."""
    devices = devices_of(backend_name)
    for device in devices:
        with plax.default_device(device):
            try:
                check()
            except AssertionError as err:
                if len(devices) == 1:
                    raise
                raise AssertionError(f"on {device!r}: {err}") from None


def answered_by_core(prim: Primitive, operands: Sequence, params: dict) -> bool:
    """Whether the core answers ``prim`` on ``operands`` itself, handing no backend the case
    (:func:`plax.core.passes.register_value_identity`: a scatter into an empty operand).

    Example::

      answered_by_core(lax.scatter_add_p, [np.zeros((0,)), idx, upd], params)   # True
    """
    when = identity_condition(prim)
    return when is not None and bool(when([get_aval(a) for a in operands], params))


def check_values(spec: Spec, dtype: str, backend, backend_name: str) -> None:
    """Every case of ``spec`` for ``dtype``, on every device of the backend, against the
    reference and the abstract eval, three ways: straight through ``backend.execute`` on
    buffers from ``backend.put``; by eager dispatch on operands ``plax.device_put`` to the
    device (results fetched with ``plax.device_get``); and through ``jit(...,
    backend=backend_name)`` on those operands."""
    prim = spec.prim
    cases = spec.cases(dt(dtype))
    assert cases, f"{prim.name}: no cases for {dtype}"
    for device in devices_of(backend_name):
        on = f" on {device!r}"
        for case in cases:
            operands = case.operands()
            avals = expected_avals(prim, operands, case.params)
            # eager, straight through the backend (but for a case the core answers itself,
            # which no backend is handed: plax.core.passes.register_value_identity)
            if not answered_by_core(prim, operands, case.params):
                bufs = [backend.put(np.asarray(a), device) for a in operands]
                out = backend.execute(prim, *bufs, **case.params)
                outs = [np.asarray(backend.to_host(b)) for b in _out_list(prim, out)]
                check_result(prim, case, operands, outs, avals, "backend.execute" + on)
            # eager dispatch, operands transferred to the device and results back (the device
            # is also the default device, where primitives without operands run)
            f = bind(prim, case.params)
            arrays = put_committed(operands, device)
            with plax.default_device(device):
                out = _out_list(prim, f(*arrays))
            outs = fetch(out, device, f"{prim.name} eager{on}")
            check_result(prim, case, operands, outs, avals, "eager" + on)
            # jit through the backend
            with plax.default_device(device):
                out = _out_list(prim, plax.jit(f, backend=backend_name)(*arrays))
            for a, aval in zip(out, avals):
                assert (a.shape, a.dtype) == (aval.shape, aval.dtype), (
                    f"{prim.name} jit{on} [{case.label}]: Array {a.aval} != abstract eval {aval}")
            outs = fetch(out, device, f"{prim.name} jit{on}")
            check_result(prim, case, operands, outs, avals, "jit" + on)


# ------------------------------------------------------------------ gradients

def check_grads_of(spec: Spec, backend_name: str) -> None:
    """``check_grads`` of every grad case of ``spec`` (order 2, forward and reverse), on every
    device of the backend."""
    on_each_device(backend_name, lambda: _check_grads_here(spec))


def _check_grads_here(spec: Spec) -> None:
    from plax.test_util import check_grads
    cases = spec.grads()
    assert cases, f"{spec.name}: differentiable but no grad cases"
    for g in cases:
        with plax.config.override("enable_x64", g.x64 or plax.config.read("enable_x64")):
            args = tuple(to_arrays(g.args))
            try:
                check_grads(g.fun, args, order=g.order, modes=g.modes, atol=g.atol,
                            eps=g.eps)
            except AssertionError as err:
                raise AssertionError(f"{spec.name} [{g.label}]: {err}") from None


def tangent_for(rng, x):
    x = np.asarray(x)
    if dtypes.is_inexact(x.dtype):
        return rand(rng, x.shape, x.dtype)
    return np.zeros(x.shape, dtypes.float0)


def check_zero_tangent(spec: Spec, backend_name: str) -> None:
    """A non-differentiable primitive's JVP is zero: float zeros for inexact outputs, float0
    zeros for integer and boolean outputs, whatever the input tangents (on every device)."""
    on_each_device(backend_name, lambda: _check_zero_tangent_here(spec))


def _check_zero_tangent_here(spec: Spec) -> None:
    prim = spec.prim
    rng = np.random.default_rng(0)
    for case in spec.cases(dt(spec.vmap_dtype)):
        operands = case.operands()
        primals = to_arrays(operands)
        tangents = [tangent_for(rng, a) for a in operands]
        tangents = [t if t.dtype == dtypes.float0 else to_arrays([t])[0] for t in tangents]
        out, t_out = plax.jvp(bind(prim, case.params), primals, tangents)
        for o, t in zip(_out_list(prim, out), _out_list(prim, t_out)):
            t = np.asarray(t)
            assert t.shape == o.shape, f"{prim.name}: tangent shape {t.shape} != {o.shape}"
            if dtypes.is_inexact(o.dtype):
                assert t.dtype == o.dtype, f"{prim.name}: tangent dtype {t.dtype} != {o.dtype}"
                assert not np.any(t.astype(np.complex128)), f"{prim.name}: nonzero tangent {t}"
            else:
                assert t.dtype == dtypes.float0, (
                    f"{prim.name}: tangent of a {o.dtype} output must be float0, got {t.dtype}")


# ------------------------------------------------------------------ vmap

BATCH = 3


def in_axes_configs(ranks: Sequence[int]) -> list[tuple]:
    """Batch-axis assignments to try: all operands at 0, at 1, at -1, each operand alone
    (others unbatched), and mixed 0/-1."""
    n = len(ranks)
    configs = [(0,) * n, (-1,) * n]
    if all(r >= 1 for r in ranks):
        configs.append((1,) * n)
    if n > 1:
        for i in range(n):
            configs.append(tuple(0 if j == i else None for j in range(n)))
            configs.append(tuple(-1 if j == i else None for j in range(n)))
        configs.append(tuple(-1 if j % 2 else 0 for j in range(n)))
    out = []
    for c in configs:
        if c not in out:
            out.append(c)
    return out


def batched_operands(case: Case, axes: Sequence[int | None]) -> tuple[list, list[list]]:
    """(operands with batch axes inserted, per-example operand lists)."""
    samples = [case.operands(seed) for seed in range(1, BATCH + 1)]
    base = samples[0]
    examples = [[s[i] if ax is not None else base[i] for i, ax in enumerate(axes)]
                for s in samples]
    stacked = []
    for i, ax in enumerate(axes):
        if ax is None:
            stacked.append(base[i])
        else:
            stacked.append(np.stack([s[i] for s in samples], axis=ax))
    return stacked, examples


def loop_reference(f, examples) -> list:
    """The per-example results stacked on axis 0 (the reference for vmap)."""
    results = [f(*to_arrays(ex)) for ex in examples]
    results = [r if isinstance(r, list) else [r] for r in results]
    return [np.stack([np.asarray(r[k]) for r in results]) for k in range(len(results[0]))]


def check_vmap(spec: Spec, backend_name: str, *, with_jit: bool = True) -> None:
    """``vmap`` of every case of the vmap dtype over every in_axes configuration, against a
    loop, eagerly, and under ``jit(..., backend=backend_name)`` over a sample of the
    configurations (:func:`_jitted_configs`), on every device."""
    on_each_device(backend_name, lambda: _check_vmap_here(spec, backend_name, with_jit))


def _jitted_configs(configs: list[tuple], case_index: int) -> set[tuple]:
    """The in_axes configurations checked under ``jit`` for the ``case_index``-th case: all
    at 0, plus one more that rotates over the cases. Every configuration is checked eagerly
    (that is where the batching rules live); under ``jit`` each one is a distinct compiled
    program (one kernel per layout on a compiling backend, ~0.3 s each on Numba), so the
    compiled check samples the layouts across the cases rather than repeating all of them
    for every case."""
    return {configs[0], configs[1 + case_index % (len(configs) - 1)] if len(configs) > 1
            else configs[0]}


def _check_vmap_here(spec: Spec, backend_name: str, with_jit: bool) -> None:
    prim = spec.prim
    for index, case in enumerate(c for c in spec.cases(dt(spec.vmap_dtype)) if c.vmap):
        f = bind(prim, case.params)
        ranks = [np.ndim(a) for a in case.operands()]
        configs = in_axes_configs(ranks)
        jitted = _jitted_configs(configs, index)
        for axes in configs:
            stacked, examples = batched_operands(case, axes)
            expected = loop_reference(f, examples)
            vf = plax.vmap(f, in_axes=axes)
            what = f"{prim.name} vmap in_axes={axes} [{case.label}]"
            got = vf(*to_arrays(stacked))
            got = got if isinstance(got, list) else [got]
            _compare_batched(got, expected, what, case)
            if with_jit and axes in jitted:
                got = plax.jit(vf, backend=backend_name)(*to_arrays(stacked))
                got = got if isinstance(got, list) else [got]
                _compare_batched(got, expected, "jit of " + what, case)


def _compare_batched(got, expected, what, case: Case) -> None:
    assert len(got) == len(expected), f"{what}: {len(got)} outputs vs {len(expected)}"
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype, f"{what}: dtype {g.dtype} != {e.dtype}"
    hosts = [np.asarray(g) for g in got]
    if case.gauge is not None:  # (a batched solver's phases may differ from a single one's)
        hosts = case.gauge(hosts, expected)
    for g, e in zip(hosts, expected):
        assert_same(g, e, e.dtype, tol_scale=max(case.tol_scale, 4.0),
                    exact_bits=case.exact_bits, what=what)


# ------------------------------------------------------------------ linearization consistency

def _real_inner(a, b) -> float:
    """``Re sum(a * conj(b))`` in complex128 (float0 and empty arrays contribute 0)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == dtypes.float0 or b.dtype == dtypes.float0 or a.size == 0:
        return 0.0
    return float(np.sum(a.astype(np.complex128) * np.conj(b.astype(np.complex128))).real)


def check_linearization(spec: Spec, dtype: str, backend_name: str) -> None:
    """:func:`_check_linearization_here` on every device of the backend."""
    on_each_device(backend_name, lambda: _check_linearization_here(spec, dtype))


def _check_linearization_here(spec: Spec, dtype: str = "float32") -> None:
    """For every case of ``spec`` (every shape and parameter set, 0-d and empty included), the
    JVP and the VJP are transposes of each other: ``Re sum(jvp(t) * conj(ct)) ==
    Re sum(t * vjp(conj(ct)))`` (JAX's convention), with tangent and cotangent shapes and
    dtypes equal to the primals'. No finite differences are involved, so ties and kinks do not
    matter; cases with non-finite values are skipped."""
    prim = spec.prim
    rng = np.random.default_rng(0)
    for case in spec.cases(dt(dtype)):
        operands = case.operands()
        if any(dtypes.is_inexact(a.dtype) and not np.all(np.isfinite(a)) for a in operands):
            continue
        diff = [i for i, a in enumerate(operands) if dtypes.is_inexact(a.dtype)
                and (case.grad_operands is None or i in case.grad_operands)]
        if not diff:
            continue

        def f(*xs, operands=operands, diff=diff, case=case):
            full = list(to_arrays(operands))
            for i, x in zip(diff, xs):
                full[i] = x
            return bind(prim, case.params)(*full)

        primals = to_arrays([operands[i] for i in diff])
        tangents = [rand(rng, np.shape(operands[i]), operands[i].dtype) for i in diff]
        out, t_out = plax.jvp(f, primals, to_arrays(tangents))
        outs, t_outs = _out_list(prim, out), _out_list(prim, t_out)
        if any(not np.all(np.isfinite(np.asarray(o))) for o in outs
               if dtypes.is_inexact(np.asarray(o).dtype)):
            continue
        what = f"{prim.name} [{case.label}]"
        for o, t in zip(outs, t_outs):
            want = o.dtype if dtypes.is_inexact(o.dtype) else dtypes.float0
            assert (np.shape(t), np.asarray(t).dtype) == (o.shape, want), (
                f"{what}: tangent {np.asarray(t).dtype}{list(np.shape(t))} for output {o.aval}")
        cts = [rand(rng, o.shape, o.dtype) if dtypes.is_inexact(o.dtype)
               else np.zeros(o.shape, dtypes.float0) for o in outs]
        conj_cts = [c if c.dtype == dtypes.float0 else to_arrays([np.conj(c)])[0] for c in cts]
        _, f_vjp = plax.vjp(f, *primals)
        pulled = f_vjp(conj_cts if prim.multiple_results else conj_cts[0])
        for p, x in zip(pulled, primals):
            assert (np.shape(p), np.asarray(p).dtype) == (x.shape, x.dtype), (
                f"{what}: cotangent {np.asarray(p).dtype}{list(np.shape(p))} for input {x.aval}")
        lhs = sum(_real_inner(t, np.conj(np.asarray(p))) for t, p in zip(tangents, pulled))
        rhs = sum(_real_inner(t, c) for t, c in zip(t_outs, cts))
        scale = max(1.0, abs(lhs), abs(rhs))
        assert abs(lhs - rhs) <= 1e-4 * scale, (
            f"{what}: JVP and VJP disagree: Re<t, vjp(ct)> = {lhs}, Re<jvp(t), ct> = {rhs}")
