"""The dtype-promotion tables compared between plax and JAX: every operand pair (all supported
dtypes as arrays, weakly typed arrays, Python scalars) for ``promote_types``, ``result_type``,
and the dtype and weak type of ``x + y``, ``x / y`` and scalar-on-either-side operators, in
both x64 modes. ``tables(lib)`` builds them for plax or for JAX (``lib`` is the module);
record_jax_promotion.py stores JAX's in jax_promotion_table.json, which tests/test_dtypes.py
checks plax against (and, when JAX is installed, checks to be current)."""
from __future__ import annotations

import itertools
import json
import pathlib
import warnings

import ml_dtypes
import numpy as np

RECORDING = pathlib.Path(__file__).with_name("jax_promotion_table.json")

DTYPE_NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "bfloat16", "float16", "float32", "float64", "complex64", "complex128"]
PY_SCALARS = [True, 3, 2.5, 1 + 2j]


def _dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def operands() -> list[tuple[str, tuple]]:
    """(label, spec): strong arrays of each dtype, weakly typed arrays, Python scalars."""
    out = [(f"{name}[]", ("strong", name)) for name in DTYPE_NAMES]
    out += [(f"weak {type(v).__name__}[]", ("weak", v)) for v in (3, 2.5, 1 + 2j)]
    out += [(f"py {type(v).__name__}", ("py", v)) for v in PY_SCALARS]
    return out


def make(spec, np_module):
    kind, v = spec
    if kind == "strong":
        return np_module.asarray(np.ones(2, _dtype(v)))
    if kind == "weak":
        return np_module.asarray(v)  # an array made from a Python scalar is weakly typed
    return v


def _set_x64(lib, on: bool) -> None:
    lib.config.update("jax_enable_x64", on)


def _abstract(lib, fn, *args):
    """dtype and weak type of ``fn(*args)``: traced only (``eval_shape``) for JAX."""
    if lib.__name__ == "jax":
        out = lib.eval_shape(fn, *args)
    else:
        out = fn(*args)
    return [str(np.dtype(out.dtype)), bool(out.weak_type)]


def tables(lib) -> dict:
    """The promotion tables of ``lib`` (plax or jax) in both x64 modes."""
    np_module = lib.numpy
    ops = operands()
    pairs = [(a, b) for a, b in itertools.product(ops, ops)
             if not (a[1][0] == "py" and b[1][0] == "py")]
    old = lib.config.read("jax_enable_x64")
    result: dict = {}
    try:
        for x64 in (False, True):
            _set_x64(lib, x64)
            t: dict = {"promote_types": {}, "result_type": {}, "add": {}, "true_divide": {},
                       "scalar_ops": {}, "canonicalize": {}, "python_scalars": {}}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # JAX warns about 64-bit dtypes under x32
                for a, b in itertools.product(DTYPE_NAMES, DTYPE_NAMES):
                    t["promote_types"][f"{a},{b}"] = str(np_module.promote_types(_dtype(a), _dtype(b)))
                for (la, sa), (lb, sb) in itertools.product(ops, ops):
                    t["result_type"][f"{la},{lb}"] = str(np_module.result_type(
                        make(sa, np_module), make(sb, np_module)))
                for op in ("add", "true_divide"):
                    fn = getattr(np_module, op)
                    for (la, sa), (lb, sb) in pairs:
                        t[op][f"{la},{lb}"] = _abstract(lib, fn, make(sa, np_module),
                                                        make(sb, np_module))
                for name in DTYPE_NAMES:
                    x = np_module.asarray(np.ones(2, _dtype(name)))
                    for v in PY_SCALARS[1:]:
                        for label, fn in (("x*s", lambda x, v=v: x * v), ("s*x", lambda x, v=v: v * x),
                                          ("x-s", lambda x, v=v: x - v)):
                            t["scalar_ops"][f"{name},{v!r},{label}"] = _abstract(lib, fn, x)
                    t["canonicalize"][name] = str(np_module.asarray(np.ones(1, _dtype(name))).dtype)
                for v in (1, 1.0, 1j, True):
                    t["python_scalars"][type(v).__name__] = str(np_module.asarray(v).dtype)
            result["x64" if x64 else "x32"] = t
    finally:
        _set_x64(lib, old)
    return result


def load_recording() -> dict:
    return json.loads(RECORDING.read_text())
