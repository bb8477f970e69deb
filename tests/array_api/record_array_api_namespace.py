"""Records the Array API standard 2023.12 namespace into ``array_api_2023_12.json``.

Source: ``array-api-strict`` from PyPI (a recording-only dependency, never one of plax's):
``pip install array-api-strict`` and run ``python tests/array_api/record_array_api_namespace.py``.
Its functions carry the standard's signatures; names it gates behind a later API
version (2024.12, 2025.12) are left out. Where array-api-strict's signature differs
from the standard's 2023.12 stubs (data-apis/array-api, src/array_api_stubs/_2023_12),
``CORRECTIONS`` below writes the standard's signature instead. The committed JSON lets
``test_namespace.py`` run without array-api-strict.
"""
from __future__ import annotations

import inspect
import json
import math
import pathlib

API_VERSION = "2023.12"

# array-api-strict's own helpers, not part of the standard
STRICT_ONLY = {"ArrayAPIStrictFlags", "Device", "__version__", "get_array_api_strict_flags",
               "set_array_api_strict_flags", "reset_array_api_strict_flags"}
CONSTANTS = ("e", "inf", "nan", "newaxis", "pi")

P, K, O = "positional_only", "keyword_only", "positional_or_keyword"
_REQ = object()
# name -> the 2023.12 stub's parameters, where array-api-strict 2.6 differs from it
CORRECTIONS = {
    # stub: expand_dims(x, /, *, axis=0); strict: (x, /, axis)
    "expand_dims": [("x", P, _REQ), ("axis", K, 0)],
    # stub defaults are None; strict uses its own "undefined" sentinel
    "astype": [("x", P, _REQ), ("dtype", P, _REQ), ("copy", K, True), ("device", K, None)],
    "from_dlpack": [("x", P, _REQ), ("device", K, None), ("copy", K, None)],
    # ``dtype=`` was added in 2024.12
    "fft.fftfreq": [("n", P, _REQ), ("d", K, 1.0), ("device", K, None)],
    "fft.rfftfreq": [("n", P, _REQ), ("d", K, 1.0), ("device", K, None)],
}

_KINDS = {inspect.Parameter.POSITIONAL_ONLY: P, inspect.Parameter.KEYWORD_ONLY: K,
          inspect.Parameter.POSITIONAL_OR_KEYWORD: O,
          inspect.Parameter.VAR_POSITIONAL: "var_positional",
          inspect.Parameter.VAR_KEYWORD: "var_keyword"}


def _param(name, kind, default):
    out = {"name": name, "kind": kind}
    if default is not _REQ:
        out["default"] = default
    return out


def _signature(fn) -> list:
    params = []
    for p in inspect.signature(fn).parameters.values():
        default = _REQ if p.default is inspect.Parameter.empty else p.default
        if default is not _REQ and not isinstance(default, (type(None), bool, int, float, str)):
            raise TypeError(f"{fn.__name__}: default {default!r} of {p.name} is not JSON")
        params.append(_param(p.name, _KINDS[p.kind], default))
    return params


def _introduced(fn) -> str:
    """The API version an array-api-strict function is gated behind (``""`` if none)."""
    versions = []
    while fn is not None:
        try:
            nonlocals = inspect.getclosurevars(fn).nonlocals
        except (TypeError, ValueError):
            nonlocals = {}
        if isinstance(nonlocals.get("version"), str):
            versions.append(nonlocals["version"])
        fn = getattr(fn, "__wrapped__", None)
    return max(versions, default="")


def _functions(module, names, prefix=""):
    out, later = {}, []
    for name in sorted(names):
        fn = getattr(module, name)
        if _introduced(fn) > API_VERSION:
            later.append(prefix + name)
            continue
        key = prefix + name
        out[name] = ([_param(*c) for c in CORRECTIONS[key]] if key in CORRECTIONS
                     else _signature(fn))
    return out, later


def record() -> dict:
    import array_api_strict as xp
    xp.set_array_api_strict_flags(api_version=API_VERSION)
    assert xp.__array_api_version__ == API_VERSION
    top = [n for n in xp.__all__ if n not in STRICT_ONLY and n not in CONSTANTS
           and n not in ("linalg", "fft", "__array_api_version__", "__array_namespace_info__")]
    dtypes = sorted(n for n in top if isinstance(getattr(xp, n), xp._dtypes.DType))
    funcs = [n for n in top if n not in dtypes]
    functions, later = _functions(xp, funcs)
    linalg, later_l = _functions(xp.linalg, xp.linalg.__all__, "linalg.")
    fft, later_f = _functions(xp.fft, xp.fft.__all__, "fft.")

    def const(v):
        return None if v is None else (repr(v) if not math.isfinite(v) else v)

    info = xp.__array_namespace_info__()
    methods = {m: _signature(getattr(type(info), m))[1:]  # drop ``self``
               for m in ("capabilities", "default_device", "default_dtypes", "dtypes", "devices")}
    return {
        "api_version": API_VERSION,
        "source": f"array-api-strict {xp.__version__} with api_version={API_VERSION!r}, "
                  "corrected to the standard's 2023.12 stubs where noted in the recorder",
        "left_out_later_versions": sorted(later + later_l + later_f),
        "constants": {n: const(getattr(xp, n)) for n in CONSTANTS},
        "dtypes": dtypes,
        "functions": functions,
        "linalg": linalg,
        "fft": fft,
        "inspection": {
            "methods": methods,
            "capabilities_keys": sorted(info.capabilities()),
            "default_dtypes_keys": sorted(info.default_dtypes()),
            "dtypes_kinds": ["bool", "signed integer", "unsigned integer", "integral",
                             "real floating", "complex floating", "numeric"],
        },
    }


if __name__ == "__main__":
    path = pathlib.Path(__file__).with_name("array_api_2023_12.json")
    path.write_text(json.dumps(record(), indent=1) + "\n")
    print(f"wrote {path}")
