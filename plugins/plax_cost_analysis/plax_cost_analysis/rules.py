"""The cost rules of plax's primitives, modelled on XLA's HLO cost analysis.

Each rule is ``rule(in_avals, out_avals, **params) -> cost dict``. The counts follow what
``jax.jit(f).lower(x).cost_analysis()`` reports on CPU with JAX 0.10.2 (measured, not
copied): one flop per output element of an elementwise operation, transcendentals counted
apart, each equation's operands read and results written once. Primitives that JAX lowers to
several HLO operations (``logistic``, ``erf_inv``, ``lgamma``, ...) get the flops and
transcendentals per element that XLA counts for that expansion (:data:`COMPOSITE`).
"""
from __future__ import annotations

import math
import sys

import numpy as np

from plax.core import Primitive, register_rule

from plax_cost_analysis import costs
from plax_cost_analysis.analysis import TRANSFORM, jaxpr_cost, recursive

# One flop per output element (integer, boolean and comparison operations included).
ONE_FLOP = (
    "add", "add_any", "sub", "mul", "div", "rem", "neg", "abs", "sign", "floor", "ceil",
    "round", "max", "min", "and", "or", "not", "xor", "eq", "ne", "lt", "le", "gt", "ge",
    "select_n", "clamp", "convert_element_type", "bitcast_convert_type", "shift_left",
    "shift_right_arithmetic", "shift_right_logical", "population_count", "clz", "is_finite",
    "real", "imag", "conj", "complex", "reduce_precision", "copy", "square", "mulhi",
)
# One transcendental per output element, no flops.
ONE_TRANSCENDENTAL = (
    "exp", "log", "sin", "cos", "tan", "tanh", "sqrt", "rsqrt", "cbrt", "erf", "expm1",
    "log1p", "atan", "atan2", "pow",
)
# (flops, transcendentals) per output element of primitives JAX expands into several HLO
# operations before XLA counts them (JAX 0.10.2 on CPU, float32).
COMPOSITE = {
    "exp2": (1, 1), "logistic": (3, 1), "erfc": (62, 1), "erf_inv": (37, 2), "asin": (5, 2),
    "acos": (3, 2), "sinh": (10, 3), "cosh": (3, 2), "asinh": (11, 3), "acosh": (8, 4),
    "atanh": (6, 2), "lgamma": (53, 4), "digamma": (73, 3), "bessel_i0e": (83, 1),
    "bessel_i1e": (83, 1), "nextafter": (24, 0), "igamma": (183, 6), "igammac": (183, 6),
    "zeta": (122, 11), "polygamma": (262, 19),
    "fma": (2, 0),  # plax's fused multiply-add: the mul and add XLA counts before fusing them
}
# No computation: bytes read and written only.
DATA_MOVEMENT = (
    "reshape", "broadcast_in_dim", "squeeze", "expand_dims", "slice", "concatenate", "stack",
    "unstack", "split", "pad", "rev", "iota", "top_k",
    "new_ref", "freeze", "get", "swap",  # refs (plax.state): reads and writes of a ref's buffer
)
# Free: XLA does not count them (a layout change, or nothing at all).
FREE = ("transpose", "stop_gradient", "name", "optimization_barrier",
        "sharding_constraint")  # (a layout annotation: no work on one device)
REDUCTIONS = ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and",
              "reduce_or", "reduce_xor")
CUMULATIVE = ("cumsum", "cumprod", "cummax", "cummin")
WINDOW_REDUCTIONS = ("reduce_window_sum", "reduce_window_max", "reduce_window_min")
SCATTERS = ("scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max")
# Flops XLA counts per reduced element of argmax/argmin (a variadic reduce over values and
# indices whose comparator takes nine operations).
ARG_REDUCTION_FLOPS = 9


def all_primitives() -> dict[str, list[Primitive]]:
    """plax's primitives by name: every :class:`~plax.core.Primitive` defined in a module of
    the ``plax`` package (``plax.lax``, the transforms, and any other loaded one)."""
    _import_primitive_modules()
    found: dict[str, list[Primitive]] = {}
    for name, module in sys.modules.copy().items():
        # a plugin's module aliased under plax.experimental keeps its own __name__: skip it,
        # so the set does not depend on which plugins happen to be loaded
        real = getattr(module, "__name__", None) if module is not None else None
        if real is None or not (real == "plax" or real.startswith("plax.")):
            continue
        for value in vars(module).copy().values():
            if isinstance(value, Primitive):
                same = found.setdefault(value.name, [])
                if value not in same:
                    same.append(value)
    return found


def _import_primitive_modules() -> None:
    """Imports every module of ``plax.lax`` and ``plax.transforms`` (some load lazily, on first
    use), so that all of plax's primitives exist."""
    import importlib
    import pkgutil

    import plax.lax
    import plax.sharding_auto  # noqa: F401 - defines sharding_constraint
    import plax.transforms
    for package in (plax.lax, plax.transforms):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(info.name)


_PRIMITIVES = all_primitives()


def _register(names, rule) -> None:
    for name in names:
        for prim in _PRIMITIVES.get(name, ()):
            register_rule(TRANSFORM, prim)(rule)


# ------------------------------------------------------------------ elementwise

def elementwise(in_avals, out_avals, flops_per_element=1, transcendentals_per_element=0):
    """An elementwise equation: bytes of operands and result, compute per output element.

    An operand smaller than the result (a scalar literal) is broadcast first, as XLA's
    program does: its bytes are read once, and a result-sized copy is written and read.
    """
    out = out_avals[0]
    n, full = costs.size(out), costs.nbytes(out)
    reads, written = [], 0.0
    for a in in_avals:
        if tuple(a.shape) != tuple(out.shape):
            reads.append(costs.nbytes(a) + full)   # read by the broadcast, then by the op
            written += full                         # the broadcast's result
        else:
            reads.append(costs.nbytes(a))
    written += sum(costs.nbytes(a) for a in out_avals)
    cost = costs.memory(in_avals, out_avals, operand_bytes=reads, out_bytes=written)
    return costs.with_compute(cost, n * flops_per_element, n * transcendentals_per_element)


def _per_element(flops, transcendentals):
    def rule(in_avals, out_avals, **params):
        return elementwise(in_avals, out_avals, flops, transcendentals)
    return rule


_register(ONE_FLOP, _per_element(1, 0))
_register(ONE_TRANSCENDENTAL, _per_element(0, 1))
for _name, (_f, _t) in COMPOSITE.items():
    _register([_name], _per_element(_f, _t))


def _integer_pow(in_avals, out_avals, *, y, **params):
    # repeated squaring: one multiply per bit below the top one and per extra set bit, and a
    # division for a negative power
    k = abs(int(y))
    muls = (k.bit_length() - 1 + bin(k).count("1") - 1) if k else 0
    if k <= 1 and y >= 0:
        return costs.memory(in_avals, out_avals) if k == 0 else {}
    return elementwise(in_avals, out_avals, muls + (1 if y < 0 else 0), 0)


_register(["integer_pow"], _integer_pow)


# ------------------------------------------------------------------ data movement

def _memory_only(in_avals, out_avals, **params):
    return costs.memory(in_avals, out_avals)


def _free(in_avals, out_avals, **params):
    return {}


_register(DATA_MOVEMENT, _memory_only)
_register(FREE, _free)


def _gather(in_avals, out_avals, **params):
    # only the gathered elements are read: as many as are written
    out = sum(costs.nbytes(a) for a in out_avals)
    return costs.memory(in_avals, out_avals, operand_bytes=[out, costs.nbytes(in_avals[1])])


def _dynamic_slice(in_avals, out_avals, **params):
    out = costs.nbytes(out_avals[0])
    return costs.memory(in_avals, out_avals,
                        operand_bytes=[out] + [costs.nbytes(a) for a in in_avals[1:]])


def _dynamic_update_slice(in_avals, out_avals, **params):
    update = costs.nbytes(in_avals[1])
    return costs.memory(in_avals, out_avals,
                        operand_bytes=[update] + [costs.nbytes(a) for a in in_avals[1:]],
                        out_bytes=update)


def _scatter(in_avals, out_avals, **params):
    # the updated elements are read and written; one flop each to combine (none to overwrite)
    operand, indices, updates = in_avals[:3]
    moved = costs.nbytes(updates)
    cost = costs.memory(in_avals, out_avals, operand_bytes=[moved, costs.nbytes(indices), moved],
                        out_bytes=moved)
    return cost


def _combining_scatter(in_avals, out_avals, **params):
    return costs.with_compute(_scatter(in_avals, out_avals), costs.size(in_avals[2]))


_register(["gather"], _gather)
_register(["dynamic_slice"], _dynamic_slice)
_register(["dynamic_update_slice"], _dynamic_update_slice)
_register(["scatter"], _scatter)
_register([s for s in SCATTERS if s != "scatter"], _combining_scatter)


# ------------------------------------------------------------------ reductions

def _with_init(in_avals, out_avals):
    """Bytes of a reduction: XLA's reduce also reads an initial value (a scalar)."""
    reads = [costs.nbytes(a) for a in in_avals]
    init = float(np.dtype(in_avals[0].dtype).itemsize) if in_avals else 0.0
    return costs.memory(in_avals, out_avals, operand_bytes=reads + [init])


def _reduction(in_avals, out_avals, **params):
    combined = costs.size(in_avals[0]) - costs.size(out_avals[0])
    return costs.with_compute(_with_init(in_avals, out_avals), combined)


def _arg_reduction(in_avals, out_avals, **params):
    combined = costs.size(in_avals[0]) - costs.size(out_avals[0])
    return costs.with_compute(_with_init(in_avals, out_avals), combined * ARG_REDUCTION_FLOPS)


def _cumulative(flops, transcendentals):
    # XLA's CPU program is a reduce_window over the whole axis: (length - 1) combinations per
    # output element
    def rule(in_avals, out_avals, *, axis, **params):
        steps = costs.size(out_avals[0]) * max(in_avals[0].shape[axis] - 1, 0)
        return costs.with_compute(_with_init(in_avals, out_avals), steps * flops,
                                  steps * transcendentals)
    return rule


def _window_reduction(in_avals, out_avals, *, window_dimensions, **params):
    steps = costs.size(out_avals[0]) * max(int(np.prod(window_dimensions)) - 1, 0)
    return costs.with_compute(_with_init(in_avals, out_avals), steps)


_register(REDUCTIONS, _reduction)
_register(["argmax", "argmin"], _arg_reduction)
_register(CUMULATIVE, _cumulative(1, 0))
_register(["cumlogsumexp"], _cumulative(8, 2))
_register(WINDOW_REDUCTIONS, _window_reduction)


def _sort(in_avals, out_avals, **params):
    n = costs.size(in_avals[0])
    flops = n * math.ceil(math.log2(n)) if n > 1 else 0
    return costs.with_compute(costs.memory(in_avals, out_avals), flops)


_register(["sort"], _sort)


# ------------------------------------------------------------------ contractions

def _dot_general(in_avals, out_avals, *, dimension_numbers, **params):
    (lhs_contract, _), _ = dimension_numbers
    k = int(np.prod([in_avals[0].shape[d] for d in lhs_contract], dtype=np.int64))
    return costs.with_compute(costs.memory(in_avals, out_avals),
                              2 * costs.size(out_avals[0]) * k)


def _valid_taps(in_size, out_size, window, stride, pad_low, lhs_dilation, rhs_dilation) -> int:
    """The (output position, kernel position) pairs of one spatial axis whose input position
    is a real element (not padding, nor a hole of the input's dilation)."""
    dilated = (in_size - 1) * lhs_dilation + 1 if in_size else 0
    count = 0
    for o in range(out_size):
        for k in range(window):
            pos = o * stride + k * rhs_dilation - pad_low
            if 0 <= pos < dilated and pos % lhs_dilation == 0:
                count += 1
    return count


def _conv(in_avals, out_avals, *, window_strides, padding, lhs_dilation, rhs_dilation,
          dimension_numbers, **params):
    lhs, rhs = in_avals[0].shape, in_avals[1].shape
    out = out_avals[0].shape
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    taps = 1
    for i, (ld, rd, od) in enumerate(zip(lhs_spec[2:], rhs_spec[2:], out_spec[2:])):
        taps *= _valid_taps(lhs[ld], out[od], rhs[rd], window_strides[i], padding[i][0],
                            lhs_dilation[i], rhs_dilation[i])
    flops = 2 * out[out_spec[0]] * out[out_spec[1]] * rhs[rhs_spec[1]] * taps
    return costs.with_compute(costs.memory(in_avals, out_avals), flops)


def _fft(in_avals, out_avals, *, fft_lengths, **params):
    # XLA: 8 flops per input element per halving of each transformed axis
    per_element = 8 * int(np.prod([int(math.log2(n)) if n > 0 else 0 for n in fft_lengths]))
    return costs.with_compute(costs.memory(in_avals, out_avals),
                              costs.size(in_avals[0]) * per_element)


_register(["dot_general"], _dot_general)
_register(["conv_general_dilated"], _conv)
_register(["fft"], _fft)


# ------------------------------------------------------------------ calls and control flow

@recursive
def _call(in_avals, out_avals, *, _uncounted=None, **params):
    # the body: jit/checkpoint/custom rules' "jaxpr" or "call_jaxpr", custom_vmap's "call",
    # linear_call's "callee" (its function, not the transpose a backward pass would run)
    body = params.get("jaxpr", params.get("call_jaxpr", params.get("call",
                                                                  params.get("callee"))))
    return jaxpr_cost(body, _uncounted)


@recursive
def _scan(in_avals, out_avals, *, jaxpr, length, _uncounted=None, **params):
    # the body runs `length` times (XLA's analysis of the while loop counts it once)
    return costs.scale(jaxpr_cost(jaxpr, _uncounted), length)


@recursive
def _while(in_avals, out_avals, *, cond_jaxpr, body_jaxpr, _uncounted=None, **params):
    # the trip count is unknown before running: one test and one iteration, as XLA counts
    return costs.add(jaxpr_cost(cond_jaxpr, _uncounted), jaxpr_cost(body_jaxpr, _uncounted))


@recursive
def _cond(in_avals, out_avals, *, branches, _uncounted=None, **params):
    # only one branch runs: the most expensive one, key by key, as XLA counts
    return costs.maximum(jaxpr_cost(b, _uncounted) for b in branches)


_register(["jit", "checkpoint", "custom_jvp_call", "custom_vjp_call", "linear_call",
           "custom_vmap_call"], _call)
_register(["scan"], _scan)
_register(["while"], _while)
_register(["cond"], _cond)


def bytes_only_primitives() -> list[str]:
    """The names of plax's primitives that have no cost rule: their equations count the bytes
    they read and write, and no flops or transcendentals.

    Example:
      >>> "threefry2x32" in bytes_only_primitives()
      True
    """
    from plax.core import rule_table
    table = rule_table(TRANSFORM)
    return sorted(name for name, prims in all_primitives().items()
                  if not any(p in table for p in prims))
