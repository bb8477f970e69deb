"""``import plax`` loads no backend or heavy library: plugins are discovered on first use.

Its speed is measured by benchmarks/import_time.py (beside JAX), not asserted here."""
from __future__ import annotations

import ast

from subprocess_util import REPO, last_json, run_python

# Heavy or optional libraries that ``import plax`` must not load.
_FORBIDDEN = ["numba", "cupy", "scipy", "pluggy", "plax_numpy", "plax_numba", "plax_cupy",
              "jax", "importlib.metadata", "plax.random", "plax.plugins"]
# The primitive families (and the modules over them) that load on first use of one of their names.
# (plax.lax.fft, top_k and cumlogsumexp are small and stay eager: each exports a function named
# like its module.)
_LAZY_FAMILIES = ["plax.lax.control_flow", "plax.lax.callbacks",
                  "plax.lax.convolution", "plax.lax.windows",
                  "plax.lax.precision", "plax.lax.linalg",
                  "plax.numpy.fft", "plax.numpy.linalg", "plax.scipy", "plax.scipy.linalg",
                  "plax.numpy.statistics", "plax.numpy.histograms", "plax.numpy.polynomial",
                  "plax.numpy.calculus", "plax.numpy.math_extras", "plax.numpy.window_functions",
                  "plax.numpy.sets", "plax.numpy.index_tricks", "plax.numpy.manipulation",
                  "plax.numpy.bits", "plax.numpy.vectorization", "plax.numpy.host_io",
                  "plax.numpy.printing", "plax.nn"]


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


def test_import_plax_loads_no_lazy_primitive_family():
    """The heavier lax families, jnp.fft/jnp.linalg and plax.scipy load on first use: neither
    ``import plax`` nor the NumPy backend's first op loads them. The backend loads a family's
    kernels when a lookup of one of its primitives misses; ``plax_numpy.impls()`` is whole."""
    code = f"""
        import json, sys
        import numpy as np
        import plax
        from plax import lax
        from plax.core.primitive import Primitive
        after_import = [m for m in {_LAZY_FAMILIES!r} if m in sys.modules]
        from plax_numpy.backend import NumpyBackend  # this backend alone, whatever else is installed
        backend = NumpyBackend()
        backend.execute(lax.add_p, np.ones(3, np.float32), np.ones(3, np.float32))
        after_op = [m for m in {_LAZY_FAMILIES!r} + ["plax_numpy.impls_control_flow"]
                    if m in sys.modules]
        cond_kernel = backend.eager_impl(lax.cond_p) is not None  # loads control flow's kernels
        after_cond = [m for m in ("plax_numpy.impls_control_flow", "plax_numpy.impls_linalg",
                                  "plax.lax.linalg") if m in sys.modules]
        import plax_numpy
        table = plax_numpy.impls()
        prims = [getattr(lax, n) for n in dir(lax)]
        missing = sorted(p.name for p in prims if isinstance(p, Primitive)
                         and not dict.__contains__(table, p))
        print(json.dumps([after_import, after_op, cond_kernel, after_cond, missing]))
    """
    assert last_json(run_python(code)) == [[], [], True, ["plax_numpy.impls_control_flow"], []]


def test_lazy_names_load_on_first_use():
    """Every name of the lazily loaded families works as before: by attribute, by ``from``
    import, in ``dir``, and the functions named like their modules (``lax.fft``) stay functions
    after jnp.fft, which imports their family, has been used. plax.nn loads on first use."""
    code = """
        import json, sys
        import plax
        from plax import lax, numpy as jnp
        out = {"nn_after_import": "plax.nn" in sys.modules}
        out["dir"] = all(n in dir(lax) for n in ("cond", "scan", "linalg", "cholesky_p", "fft",
                                                 "conv_general_dilated", "top_k_p"))
        out["dir_jnp"] = "fft" in dir(jnp) and "linalg" in dir(jnp)
        out["dir_plax"] = "pure_callback" in dir(plax)
        out["nothing_loaded"] = "plax.numpy.fft" not in sys.modules
        jnp.fft.fft(jnp.ones(4))  # loads plax.numpy.fft on first use
        out["fft_kinds"] = [type(lax.fft).__name__, type(lax.top_k).__name__,
                            type(lax.cumlogsumexp).__name__, type(lax.linalg).__name__]
        from plax.lax import scan, cholesky_p
        from plax.numpy import linalg
        import plax.scipy
        out["names"] = [scan.__name__, cholesky_p.name, linalg.__name__,
                        plax.scipy.linalg.__name__, plax.pure_callback.__name__]
        out["cond"] = float(lax.cond(True, lambda x: x + 1, lambda x: x - 1, jnp.float32(1)))
        out["solve"] = jnp.linalg.solve(jnp.eye(2), jnp.ones(2)).tolist()
        out["missing"] = not hasattr(lax, "no_such_name")
        plax.nn.relu
        out["nn_after_use"] = "plax.nn" in sys.modules
        print(json.dumps(out))
    """
    assert last_json(run_python(code)) == {
        "nn_after_import": False, "nn_after_use": True,
        "dir": True, "dir_jnp": True, "dir_plax": True, "nothing_loaded": True,
        "fft_kinds": ["function", "function", "function", "module"],
        "names": ["scan", "cholesky", "plax.numpy.linalg", "plax.scipy.linalg", "pure_callback"],
        "cond": 2.0, "solve": [1.0, 1.0], "missing": True}


def test_core_never_imports_numba_or_cupy():
    offenders = []
    for path in sorted((REPO / "core" / "plax").rglob("*.py")):
        text = path.read_text()
        # an import of one of these names spells "numba" or "cupy": only those files are
        # parsed (parsing all ~300 core modules took ~3 CPU s for the same answer)
        if "numba" not in text and "cupy" not in text:
            continue
        tree = ast.parse(text, filename=str(path))
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
