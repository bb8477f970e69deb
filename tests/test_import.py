"""``import plax`` loads no backend or heavy library: plugins are discovered on first use.

Its speed is measured by benchmarks/import_time.py (beside JAX), not asserted here."""
from __future__ import annotations

import ast

from subprocess_util import REPO, last_json, run_python

# Heavy or optional libraries that ``import plax`` must not load.
_FORBIDDEN = ["numba", "cupy", "scipy", "pluggy", "plax_numpy", "plax_numba", "plax_cupy",
              "jax", "importlib.metadata", "plax.random", "plax.plugins"]


def test_import_plax_loads_no_backend_or_heavy_library():
    code = f"""
        import json, sys
        import plax
        after_import = [m for m in {_FORBIDDEN!r} if m in sys.modules]
        plax.devices()
        after_use = sorted(m for m in ("pluggy", "plax_numpy", "plax.plugins", "scipy", "numba",
                                       "cupy") if m in sys.modules)
        print(json.dumps([after_import, after_use]))
    """
    after_import, after_use = last_json(run_python(code))
    assert after_import == []
    # First use discovers plugins: pluggy and the NumPy backend load then, and nothing heavier.
    assert after_use == ["plax.plugins", "plax_numpy", "pluggy"]


def test_core_never_imports_numba_or_cupy():
    offenders = []
    for path in sorted((REPO / "core" / "plax").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                if name.split(".")[0] in ("numba", "cupy", "plax_numba", "plax_cupy"):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno} imports {name}")
    assert not offenders, offenders
