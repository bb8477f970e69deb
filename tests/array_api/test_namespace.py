"""plax.numpy against the Array API standard 2023.12 namespace (names, signatures, inspection,
array object protocol). The standard is recorded in ``array_api_2023_12.json`` by
``record_array_api_namespace.py``; CI needs neither array-api-strict nor JAX.

The standard's special-case tables for elementwise functions (real and complex operands) and
its type-promotion table are checked value by value in ``test_special_cases.py``,
``test_special_cases_complex.py`` and ``test_type_promotion.py``.
"""
from __future__ import annotations

import inspect
import json
import math
import pathlib

import numpy as np
import pytest

import plax
from plax import numpy as jnp

SPEC = json.loads(pathlib.Path(__file__).with_name("array_api_2023_12.json").read_text())
SECTIONS = {"functions": "", "linalg": "linalg.", "fft": "fft."}

# Where JAX deviates from the standard on purpose, plax keeps JAX's behaviour.
# "section.name[.param]" -> one-line reason (each checked against JAX's own behaviour).
EXCLUSIONS = {
    # --- JAX's deliberate deviations
    "functions.expand_dims.axis": "JAX keeps NumPy's signature: axis has no default",
    "functions.astype.copy": "JAX's default is copy=False: arrays are immutable, so a copy is moot",
    "info.default_device": "JAX returns None: arrays are uncommitted until placed",
    "info.devices": "JAX lists None (uncommitted) before the devices",
    "info.capabilities": "JAX reports no boolean indexing / data-dependent shapes (not under jit)",
}

# Defaults that differ in spelling only: None means the standard's default, as in JAX.
SAME_AS_STANDARD = {
    "functions.arange.step": None, "functions.std.correction": None,
    "functions.var.correction": None,
    **{f"fft.{n}.norm": None for n in ("fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn",
                                       "irfftn", "hfft", "ihfft")},
}


def _module(section):
    return {"functions": jnp, "linalg": jnp.linalg, "fft": jnp.fft}[section]


FUNCTIONS = [(s, n) for s in SECTIONS for n in SPEC[s]]


class _Arg:
    """A distinct placeholder per parameter, to see where ``bind`` puts it."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<{self.name}>"


def test_recorded_standard():
    assert SPEC["api_version"] == "2023.12"
    assert len(SPEC["functions"]) == 127 and len(SPEC["linalg"]) == 23
    assert len(SPEC["fft"]) == 14 and len(SPEC["dtypes"]) == 13
    assert set(SPEC["constants"]) == {"e", "inf", "nan", "newaxis", "pi"}


@pytest.mark.parametrize("section,name", FUNCTIONS, ids=[SECTIONS[s] + n for s, n in FUNCTIONS])
def test_signature(section, name):
    fn = getattr(_module(section), name, None)
    assert fn is not None, f"jnp.{SECTIONS[section]}{name} is missing"
    sig = inspect.signature(fn)
    params = SPEC[section][name]
    key = f"{section}.{name}"
    # extra parameters of plax (as JAX has) must be optional
    named = {p["name"] for p in params}
    npos = sum(p["kind"] == "positional_only" for p in params)
    for i, q in enumerate(sig.parameters.values()):
        if i >= npos and q.name not in named and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD):
            assert q.default is not q.empty, f"{key}: extra parameter {q.name} is required"
    # every call the standard allows binds, each argument to the parameter of the same name
    for variant in ("all", "required", "keywords"):
        args, kwargs, expect = [], {}, {}
        for p in params:
            a = _Arg(p["name"])
            kind, optional = p["kind"], "default" in p
            if variant == "required" and optional and f"{key}.{p['name']}" not in EXCLUSIONS:
                continue
            if kind == "var_positional":
                args += [a, _Arg(p["name"] + "2")]
            elif kind == "positional_only" or (kind == "positional_or_keyword" and variant == "all"):
                args.append(a)
                if kind == "positional_or_keyword":
                    expect[p["name"]] = a
            else:
                kwargs[p["name"]] = expect[p["name"]] = a
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            pytest.fail(f"{key}{sig}: cannot be called as the standard allows "
                        f"({variant}: {args}, {kwargs}): {e}")
        for pname, a in expect.items():
            assert bound.arguments.get(pname) is a, f"{key}{sig}: {pname} does not bind by name"


@pytest.mark.parametrize("section,name", FUNCTIONS, ids=[SECTIONS[s] + n for s, n in FUNCTIONS])
def test_optional_parameters_and_defaults(section, name):
    sig = inspect.signature(getattr(_module(section), name))
    for p in SPEC[section][name]:
        key = f"{section}.{name}.{p['name']}"
        if "default" not in p or p["kind"] == "positional_only" or key in EXCLUSIONS:
            continue
        q = sig.parameters[p["name"]]
        assert q.default is not q.empty, f"{key}: the standard makes it optional"
        want = SAME_AS_STANDARD.get(key, p["default"])
        assert q.default == want and type(q.default) is type(want), (key, q.default, want)


def test_optional_defaults_table_is_current():
    # each SAME_AS_STANDARD/EXCLUSIONS entry names a real recorded parameter
    for key in list(SAME_AS_STANDARD) + [k for k in EXCLUSIONS if k.startswith(tuple(SECTIONS))]:
        section, name, pname = key.split(".")
        assert pname in {p["name"] for p in SPEC[section][name]}, key


def test_excluded_defaults_behave_as_jax():
    x = jnp.ones((2,))
    with pytest.raises(TypeError):
        jnp.expand_dims(x)  # JAX: axis is required
    assert jnp.expand_dims(x, axis=0).shape == (1, 2)
    assert inspect.signature(jnp.astype).parameters["copy"].default is False


def test_constants():
    c = SPEC["constants"]
    assert jnp.e == c["e"] == math.e and jnp.pi == c["pi"] == math.pi
    assert jnp.inf == float(c["inf"]) and math.isnan(jnp.nan) and c["nan"] == "nan"
    assert jnp.newaxis is None and c["newaxis"] is None


@pytest.mark.parametrize("name", SPEC["dtypes"])
def test_dtype(name):
    dt = getattr(jnp, name)
    assert np.dtype(dt) == np.dtype(name)
    assert jnp.isdtype(np.dtype(name), "numeric") == (name != "bool")


def test_array_api_version():
    # 2024.12, as JAX 0.10 declares; the 2023.12 namespace recorded in SPEC is a subset of it.
    assert jnp.__array_api_version__ == "2024.12"
    assert jnp.ones(2).__array_namespace__(api_version="2024.12") is jnp
    with pytest.raises(ValueError, match="2023.12"):
        jnp.ones(2).__array_namespace__(api_version="2023.12")


def test_namespace_info():
    info = jnp.__array_namespace_info__()
    spec = SPEC["inspection"]
    for method, params in spec["methods"].items():
        sig = inspect.signature(getattr(info, method))
        sig.bind(**{p["name"]: None for p in params})
    caps = info.capabilities()
    assert set(spec["capabilities_keys"]) <= set(caps)
    assert all(isinstance(caps[k], bool) for k in spec["capabilities_keys"])
    assert caps["boolean indexing"] is False and caps["data-dependent shapes"] is False  # as JAX
    devices = info.devices()
    assert isinstance(devices, list) and devices[0] is None  # as JAX
    assert all(d in plax.devices() for d in devices[1:]) and len(devices) > 1
    assert info.default_device() is None  # as JAX
    defaults = info.default_dtypes()
    assert sorted(defaults) == spec["default_dtypes_keys"]
    assert defaults == info.default_dtypes(device=devices[1])
    bits = 64 if plax.config.read("jax_enable_x64") else 32
    assert defaults["real floating"] == np.dtype(f"float{bits}")
    assert defaults["complex floating"] == np.dtype(f"complex{2 * bits}")
    assert defaults["integral"] == defaults["indexing"] == np.dtype(f"int{bits}")
    all_dtypes = info.dtypes()
    assert set(all_dtypes) <= set(SPEC["dtypes"])
    assert {"bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float32",
            "complex64"} <= set(all_dtypes)
    assert all(v == np.dtype(k) for k, v in all_dtypes.items())
    for kind in spec["dtypes_kinds"]:
        sub = info.dtypes(kind=kind, device=devices[1])
        assert sub and set(sub) <= set(all_dtypes)
        assert all(jnp.isdtype(v, kind) for v in sub.values()), kind
    both = info.dtypes(kind=("bool", "real floating"))
    assert set(both) == set(info.dtypes(kind="bool")) | set(info.dtypes(kind="real floating"))
    with pytest.raises(KeyError):
        info.dtypes(kind="no such kind")  # as JAX


def test_array_namespace_and_device():
    x = jnp.arange(3.0)
    assert x.__array_namespace__() is jnp
    info = jnp.__array_namespace_info__()
    assert x.device in info.devices()
    d = plax.devices()[0]
    y = x.to_device(d)
    assert y.device == d and np.array_equal(np.asarray(y), np.asarray(x))
    with pytest.raises(NotImplementedError):
        x.to_device(d, stream=1)  # as JAX
    z = jnp.asarray([1.0, 2.0], device=d)
    assert z.device == d and z.committed
    assert plax.jit(lambda v: v.to_device(d) * 2)(x).tolist() == [0.0, 2.0, 4.0]


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint32", "int32", "float32", "complex64"])
def test_dlpack_round_trip(dtype):
    host = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    x = jnp.from_dlpack(host)
    assert x.dtype == host.dtype and np.array_equal(np.asarray(x), host)
    assert x.__dlpack_device__() == host.__dlpack_device__() == (1, 0)
    back = np.from_dlpack(x)
    assert back.dtype == host.dtype and np.array_equal(back, host)
    assert np.array_equal(np.asarray(jnp.from_dlpack(x)), host)
    jnp.from_dlpack(host, device=plax.devices()[0], copy=True)
    with pytest.raises(TypeError):
        jnp.from_dlpack([1, 2])


@pytest.mark.parametrize("version", ["2021.12", "2022.12", "2023.12", "2025.12", "1999.1"])
def test_array_namespace_rejects_other_versions(version):
    # Only the declared version, as JAX (which accepts "2024.12" alone).
    x = jnp.ones(2)
    assert x.__array_namespace__(api_version="2024.12") is jnp
    assert x.__array_namespace__() is jnp
    with pytest.raises(ValueError, match=f"api_version='{version}' is not available"):
        x.__array_namespace__(api_version=version)
