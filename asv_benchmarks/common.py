"""Helpers shared by the asv benchmarks: every benchmark runs on plax (once per installed
backend) and on JAX, as values of one ``framework`` parameter, so the dashboard draws them as
series of one graph.

The workloads of the Numba table come from ``benchmarks/compare.py`` (one definition for the
table in docs/performance.md and for the dashboard). asv always takes the benchmarks from the
working tree, whichever commit of plax it installed, so they must only use API that the
benchmarked commits have.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# steady-state timings: the Numba backend compiles a cluster before its first call instead of
# interpreting while a background compile runs (read when plax compiles, so set it first)
os.environ.setdefault("PLAX_NUMBA_SYNC", "1")


def frameworks() -> list[str]:
    """``plax:<backend>`` for each installed plax backend, plus ``jax`` (skipped if absent)."""
    from plax import plugins
    return [f"plax:{name}" for name in sorted(plugins.registry().backends)] + ["jax"]


def load(framework: str):
    """(module, numpy module, jit with the framework's backend bound) for a framework name.

    Raises:
      NotImplementedError: JAX is not installed (asv then reports the benchmark as skipped).
    """
    if framework == "jax":
        jax = _import_jax()
        import jax.numpy as jnp
        return jax, jnp, jax.jit
    import plax
    import plax.numpy as jnp
    backend = framework.split(":", 1)[1]
    return plax, jnp, lambda f, **kw: plax.jit(f, backend=backend, **kw)


def _import_jax():
    try:
        return importlib.import_module("jax")
    except ImportError:
        raise NotImplementedError("jax is not installed") from None


def _compare():
    # benchmarks/ is a folder of scripts, not a package: load compare.py by its path
    module = sys.modules.get("_plax_bench_compare")
    if module is None:
        path = os.path.join(REPO, "benchmarks", "compare.py")
        spec = importlib.util.spec_from_file_location("_plax_bench_compare", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return module


def library(framework: str):
    """compare.py's jax-like namespace (jit bound to the backend, jnp, lax, random, grad,
    vmap, put, block) for a framework name."""
    compare = _compare()
    if framework == "jax":
        jax = _import_jax()
        return compare._Lib(jax, jax.jit, jax.numpy.asarray, jax.block_until_ready)
    import plax
    backend = framework.split(":", 1)[1]
    return compare._Lib(plax, lambda f: plax.jit(f, backend=backend), plax.numpy.asarray,
                        plax.block_until_ready)


def workload(prefix: str):
    """The factories of the table row whose label starts with ``prefix`` (full sizes)."""
    for label, impls in _compare().make_workloads(quick=False):
        if label.startswith(prefix):
            return impls
    raise KeyError(prefix)


def peak_rss_of(code: str, env: dict | None = None) -> int:
    """Peak resident set size, in bytes, of a fresh interpreter that runs ``code``.

    A fresh process, because asv forks its benchmarks from one that has already imported
    everything: the fork's own peak would start at its parent's.
    """
    probe = code + "\nimport resource\nprint(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600)
    if proc.returncode != 0:
        if "No module named 'jax'" in proc.stderr:
            raise NotImplementedError("jax is not installed")
        raise RuntimeError(proc.stderr[-2000:])
    return int(proc.stdout.split()[-1]) * 1024  # Linux reports kilobytes
