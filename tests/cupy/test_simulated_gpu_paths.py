"""Every registered primitive has a GPU path, on every dtype its conformance spec lists.

The paths (``CupyBackend._make_eager``'s order):

* ``control flow``: ``cond``/``while``/``scan`` as host loops over compiled bodies;
* ``generated kernel``: a fusible primitive the code generator plans for that dtype (each case
  of its spec is planned, so parameters that the generator declines are seen);
* ``kernel table (<module>)``: ``plax_cupy.kernels.impls()`` (``host callback`` for the
  callbacks family, the only kernels allowed to run on the host);
* ``cuBLAS`` (``dot_general``) and ``threefry kernel`` (``threefry2x32``), the backend's own.

What has none would run on the host reference kernels (a counted, warned fallback): it fails
here, unless listed in :data:`KNOWN_MISSING` (strict xfail: a primitive that gains its path
must leave the list). Run with ``-s`` to print the table. The checks need the simulated CuPy
(the family modules import CuPy), so :func:`test_on_the_simulated_gpu` runs this file in a
child process with ``-p fake_cupy_plugin``.
"""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from test_simulated_streams import REPO, SIMULATED, child_env, on_simulated_gpu

#: primitive name -> why it has no GPU path yet (remove it when its kernel lands); empty since
#: the complex inverse trigonometric/hyperbolic functions are generated (plax_cupy.special_source)
KNOWN_MISSING: dict[str, str] = {}

CONTROL_FLOW = ("cond", "while", "scan")
OWN = {"dot_general": "cuBLAS", "threefry2x32": "threefry kernel"}


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "fake_cupy_plugin", "-q", "-s",
                           "-p", "no:cacheprovider", "-p", "no:randomly", __file__],
                          capture_output=True, text=True, env=child_env(), cwd=REPO, timeout=600)
    tail = done.stdout[-6000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    # only the launcher itself skips in the child
    assert " passed" in done.stdout and " 1 skipped" in done.stdout, tail


def _specs() -> list:
    from plax.testing.conformance.specs import ALL_SPECS
    return sorted(ALL_SPECS, key=lambda s: s.prim.name)


def _planned(prim, case, dtype) -> bool:
    """Whether the code generator plans ``prim`` on this case's operands and parameters."""
    from plax.core.jaxpr import JaxprEqn, Var
    from plax.core.shaped_array import ShapedArray
    from plax_cupy import codegen
    operands = case.sample(np.random.default_rng(0))
    avals = [ShapedArray(tuple(np.shape(o)), np.asarray(o).dtype) for o in operands]
    out = prim.abstract_eval(*avals, **case.params)
    out = out[0] if isinstance(out, (list, tuple)) else out
    eqn = JaxprEqn(prim, [Var(a) for a in avals], [Var(out)], case.params)
    try:
        codegen.plan_equation(eqn, literal_values=False)
    except codegen.Unsupported:
        return False
    return True


def gpu_paths(spec) -> dict:
    """``{dtype name: path}`` of ``spec``'s primitive (``""`` where it has none)."""
    from plax.lowering import fusion_kind
    from plax_cupy import kernels
    prim, table = spec.prim, kernels.impls()
    fn = table.get(prim)
    listed = ""
    if fn is not None:
        module = getattr(fn, "__module__", "") or ""
        family = module.rsplit(".", 1)[-1]
        listed = "host callback" if family == "kernels_callbacks" else f"kernel table ({family})"
    paths = {}
    for d in spec.dtypes:
        name = np.dtype(d).name if not isinstance(d, str) else d
        if prim.name in CONTROL_FLOW:
            paths[name] = "control flow"
        elif fusion_kind(prim) is not None and not prim.multiple_results:
            cases = spec.cases(np.dtype(d))
            paths[name] = ("generated kernel" if cases and all(_planned(prim, c, np.dtype(d)) for c in cases)
                           else listed)
        else:
            paths[name] = listed or OWN.get(prim.name, "")
    return paths


def _params():
    return [pytest.param(s, id=s.prim.name,
                         marks=[pytest.mark.xfail(strict=True, reason=KNOWN_MISSING[s.prim.name])]
                         if s.prim.name in KNOWN_MISSING else [])
            for s in _specs()]


@on_simulated_gpu
def test_every_lax_primitive_has_a_spec_listed_here():
    from plax.testing.conformance.test_coverage import lax_primitives
    assert {p.name for p in lax_primitives()} <= {s.prim.name for s in _specs()}
    assert set(KNOWN_MISSING) <= {s.prim.name for s in _specs()}


@on_simulated_gpu
@pytest.mark.parametrize("spec", _params() if SIMULATED else [])  # collected in the child only
def test_primitive_has_a_gpu_path(spec):
    paths = gpu_paths(spec)
    kinds = sorted(set(paths.values()) - {""})
    print(f"{spec.prim.name:28s} {', '.join(kinds) or '-'}")
    missing = sorted(d for d, p in paths.items() if not p)
    assert not missing, f"{spec.prim.name!r} has no GPU path on {missing}: it would run on the host"
