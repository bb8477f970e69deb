"""Signature coverage against JAX: every parameter that a public JAX function takes (as
recorded in ``jax_signatures.json`` by ``record_jax_signatures.py``, so CI needs no JAX) is
accepted by plax's function of the same name, the same way: a positional-or-keyword
parameter under JAX's name at JAX's position, a keyword-only one under JAX's name, ``*args``
and ``**kwargs`` where JAX has them. Accepted differences are listed below, one reason each;
a difference that closes must leave the list (``test_accepted_differences_are_not_stale``).
"""
from __future__ import annotations

import importlib
import inspect
import json
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE))
from record_jax_signatures import signature_params  # noqa: E402

RECORD = json.loads((HERE / "jax_signatures.json").read_text())
NAMESPACES = list(RECORD["namespaces"])

NOT_DONE = "not done yet"
# "namespace.function" -> {JAX parameter plax does not take as JAX does: why}
ACCEPTED: dict[str, dict[str, str]] = {
    ".devices": {"backend": "plax's first parameter is `platform` (what JAX's positional backend "
                            "names); backend= is the second, taking a platform or an executor"},
    "numpy.set_printoptions": {"**kwargs": "JAX forwards **kwargs to NumPy's; plax names each of "
                                           "NumPy's parameters, so unknown ones fail early"},
    "lax.all_gather": {"to": NOT_DONE + " (in the plax_pmap plugin, outside this change)"},
    "lax.scan": {"_split_transpose": "a private, experimental JAX flag (leading underscore)"},
    "debug.print": {"_use_logging": "a private JAX flag (leading underscore)"},
    "debug.log": {"_use_logging": "a private JAX flag (leading underscore)"},
    "debug.visualize_array_sharding": {"**kwargs": "JAX forwards them to visualize_sharding; "
                                                   "plax names those keywords (color_map...)"},
}

_KINDS = {inspect.Parameter.POSITIONAL_ONLY: "pos", inspect.Parameter.POSITIONAL_OR_KEYWORD: "any",
          inspect.Parameter.VAR_POSITIONAL: "var", inspect.Parameter.KEYWORD_ONLY: "kw",
          inspect.Parameter.VAR_KEYWORD: "varkw"}


def _resolve(fn):
    """The function whose signature counts: a plugin's lazy stub stands for its target."""
    lazy = getattr(fn, "__wrapped_lazily__", None)
    if lazy is not None:
        module, name = lazy
        return getattr(importlib.import_module(module), name)
    return fn


def signature_gaps(jax_text: str, fn) -> list[str]:
    """The JAX parameters (from a recorded parameter list) that ``fn`` does not accept as JAX
    does; ``*args`` and ``**kwargs`` are named with their stars."""
    mine = [(p.name, _KINDS[p.kind]) for p in inspect.signature(_resolve(fn)).parameters.values()]
    kinds = {k for _, k in mine}
    n_positional = sum(k in ("pos", "any") for _, k in mine)
    where = {n: (i, k) for i, (n, k) in enumerate(mine)}
    gaps = []
    for i, (name, kind) in enumerate(signature_params(jax_text)):
        if kind == "pos":          # any name will do; the position must be accepted
            ok = i < n_positional or "var" in kinds
        elif kind == "any":        # by keyword under JAX's name, and positionally at its place
            ok = where.get(name) == (i, "any")
        elif kind == "kw":
            ok = name in where and where[name][1] in ("any", "kw")
        elif kind == "var":        # JAX's *args (its ufuncs' operands): positions accepted
            ok = "var" in kinds or n_positional > i
        else:
            ok = "varkw" in kinds
        if not ok:
            gaps.append({"var": "*", "varkw": "**"}.get(kind, "") + name)
    return gaps


def _functions(namespace):
    module = importlib.import_module("plax" + ("." + namespace if namespace else ""))
    for name, text in RECORD["namespaces"][namespace].items():
        fn = getattr(module, name, None)   # a missing name is test_name_coverage's business
        if fn is not None and callable(fn) and not isinstance(fn, type):
            yield f"{namespace}.{name}", text, fn


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_plax_takes_jax_parameters(namespace):
    problems = {}
    for key, text, fn in _functions(namespace):
        gaps = [g for g in signature_gaps(text, fn) if g not in ACCEPTED.get(key, {})]
        if gaps:
            problems[key] = gaps
    assert not problems, (f"plax lacks these parameters of JAX's functions (add them with "
                          f"their meaning, or list them in ACCEPTED with a reason): {problems}")


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_accepted_differences_are_not_stale(namespace):
    stale = {}
    for key, text, fn in _functions(namespace):
        listed = ACCEPTED.get(key, {})
        closed = set(listed) - set(signature_gaps(text, fn))
        if closed:
            stale[key] = sorted(closed)
    assert not stale, f"these differences are closed; remove them from ACCEPTED: {stale}"


def test_accepted_differences_are_well_formed():
    known = {f"{ns}.{name}" for ns in NAMESPACES for name in RECORD["namespaces"][ns]}
    for key, params in ACCEPTED.items():
        assert key in known, f"{key} is not a recorded JAX function"
        for param, why in params.items():
            assert why.strip(), f"{key}({param}) needs a reason"


def test_record_matches_installed_jax():
    """Where the recorded JAX version is installed, the record is current."""
    jax = pytest.importorskip("jax")
    if jax.__version__ != RECORD["jax_version"]:
        pytest.skip(f"record is of JAX {RECORD['jax_version']}, installed {jax.__version__}")
    from record_jax_signatures import record
    assert record() == RECORD
