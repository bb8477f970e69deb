"""What is left of JAX's surface: the public names of JAX 0.10.2's user-facing modules
(recorded in ``jax_surface.json`` by ``record_jax_surface.py``, so CI needs no JAX) that plax
does not have must each be listed, with a reason, in docs/design_decisions.md under
:data:`HEADING`; a listed name plax now has must be removed from that list.

The test prints the names still missing (``pytest -s``).
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import pathlib
import re
import warnings

import pytest

import plax

HERE = pathlib.Path(__file__).parent
RECORD = json.loads((HERE / "jax_surface.json").read_text())
DECISIONS = HERE.parent / "docs" / "design_decisions.md"
HEADING = "## JAX 0.10.2 names plax does not have"
_LINE = re.compile(r"^- `(jax(?:\.[a-z_]+)*)\.([A-Za-z_][A-Za-z0-9_]*)`: (\S.*)$")


def _listed() -> dict[str, str]:
    """``{"jax.lax.after_all": reason}`` from the section under HEADING."""
    text = DECISIONS.read_text()
    assert HEADING in text, f"docs/design_decisions.md has no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    out = {}
    for line in section.splitlines():
        m = _LINE.match(line)
        if m:
            out[f"{m.group(1)}.{m.group(2)}"] = m.group(3)
    return out


def _has(module, name: str) -> bool:
    """Whether ``module`` has ``name``, a submodule not yet imported included (so the answer
    does not depend on which tests ran first)."""
    if hasattr(module, name):
        return True
    return importlib.util.find_spec(f"{module.__name__}.{name}") is not None \
        if hasattr(module, "__path__") else False


def _missing() -> list[str]:
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated aliases warn when touched
        for module, names in RECORD["namespaces"].items():
            mod = importlib.import_module("plax" + module[len("jax"):])
            out += [f"{module}.{n}" for n in names if not _has(mod, n)]
    return out


def test_every_jax_module_has_a_plax_module():
    for module in RECORD["namespaces"]:
        importlib.import_module("plax" + module[len("jax"):])


def test_missing_names_are_listed_with_a_reason():
    missing = _missing()
    listed = _listed()
    print(f"\n{len(missing)} JAX {RECORD['jax_version']} names plax does not have:")
    for name in missing:
        print(f"  {name}: {listed.get(name, 'NOT LISTED')}")
    unlisted = [n for n in missing if n not in listed]
    assert not unlisted, (f"JAX names plax lacks, not listed under {HEADING!r} in "
                          f"docs/design_decisions.md with a reason: {unlisted}")


def test_listed_names_are_still_missing():
    missing = set(_missing())
    stale = sorted(n for n in _listed() if n not in missing)
    assert not stale, (f"plax now has these names: remove their lines under {HEADING!r} in "
                       f"docs/design_decisions.md: {stale}")


def test_the_record_covers_the_modules_the_docs_use():
    modules = set(RECORD["namespaces"])
    for name in ("jax", "jax.numpy", "jax.lax", "jax.random", "jax.nn", "jax.scipy.special",
                 "jax.sharding", "jax.debug", "jax.experimental", "jax.tree", "jax.tree_util"):
        assert name in modules
    assert "jax_num_cpu_devices" not in RECORD["namespaces"]["jax"]  # names, not options
    assert plax.config.values.keys()  # options are recorded apart (config_jax_options.py)


def test_record_is_current_with_installed_jax():
    jax = pytest.importorskip("jax", reason="JAX is not installed: the record stands as is")
    if jax.__version__ != RECORD["jax_version"]:
        pytest.skip(f"JAX {jax.__version__} installed, the record is of {RECORD['jax_version']}")
    for module, names in RECORD["namespaces"].items():
        mod = importlib.import_module(module)
        current = sorted(n for n in dir(mod) if not n.startswith("_"))
        assert set(names) <= set(current), module
