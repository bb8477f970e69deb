"""The kernel cache's key: a kernel compiled before a helper it calls changed is never loaded
after the change, from the same cache directory (two checkouts sharing ``XDG_CACHE_HOME``, or
an upgrade keeping it).

numba's disk cache keys a kernel by its own source file (path and modification time), not by
the modules it calls into, so the key of a generated kernel's file
(:func:`plax_numba.cache.source_path`) hashes the helpers' sources
(:func:`plax_numba.cache.key_sources`): the modules the kernels import, followed through their
module-level imports.
"""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys

import plax_numba
from plax_numba import cache

_PACKAGE = os.path.dirname(os.path.abspath(plax_numba.__file__))

# a jitted sign (numba kernel calling plax_numba.scalar.fsign) from the package copy in argv[1]
_PROGRAM = """
import sys
sys.path.insert(0, sys.argv[1])
import plax_numba
assert plax_numba.__file__.startswith(sys.argv[1]), plax_numba.__file__
import numpy as np
import plax
import plax.numpy as jnp
f = plax.jit(lambda x: jnp.sign(x) * 2.0, backend="numba")
print(np.asarray(f(np.array([-2.0, 0.0, 3.0], np.float32))).tolist())
"""


def _run(copy, cache_dir) -> list:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAX_")}
    env.update(PLAX_NUMBA_CACHE_DIR=str(cache_dir), PLAX_NUMBA_SYNC="1",
               PLAX_NUMBA_WORKERS="0", PLAX_NUMBA_FIRST_TIER="0")
    proc = subprocess.run([sys.executable, "-c", _PROGRAM, str(copy)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return ast.literal_eval(proc.stdout.strip().splitlines()[-1])


def _edit(path, old: str, new: str) -> None:
    with open(path) as f:
        text = f.read()
    assert text.count(old) == 1, old
    with open(path, "w") as f:
        f.write(text.replace(old, new))


def _checkout(root, one: str):
    """A copy of the package (a checkout of its own) whose ``fsign`` returns the constant
    ``ONE`` of a module ``scalar.py`` imports, set to ``one``."""
    package = root / "plax_numba"
    shutil.copytree(_PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "_probe.py").write_text(f"ONE = {one}\n")
    scalar = package / "scalar.py"
    _edit(scalar, "from numba import njit\n",
          "from numba import njit\nfrom plax_numba._probe import ONE as _PROBE_ONE\n")
    _edit(scalar, "    if x > 0:\n        return 1.0\n", "    if x > 0:\n        return _PROBE_ONE\n")
    return root


def test_checkouts_sharing_a_cache_never_load_each_others_stale_kernels(tmp_path):
    """Three checkouts, one kernel cache directory (as two worktrees sharing
    ``XDG_CACHE_HOME``): the same kernel text, compiled against helpers that differ in a
    module ``scalar.py`` imports, then in ``scalar.py`` itself, is compiled for each and
    computes with that checkout's helper (before the key followed the helpers' imports, the
    second checkout loaded the first one's kernel: 2.0 for 3.0)."""
    kernels = tmp_path / "kernels"
    assert _run(_checkout(tmp_path / "a", "1.0"), kernels) == [-2.0, 0.0, 2.0]
    b = _checkout(tmp_path / "b", "1.5")   # only the module scalar.py imports differs
    assert _run(b, kernels) == [-2.0, 0.0, 3.0]
    c = _checkout(tmp_path / "c", "1.5")   # scalar.py itself differs
    _edit(c / "plax_numba" / "scalar.py", "    if x < 0:\n        return -1.0\n",
          "    if x < 0:\n        return -1.25\n")
    assert _run(c, kernels) == [-2.5, 0.0, 3.0]
    assert len([n for n in os.listdir(kernels) if n.endswith(".py")]) == 3


def test_key_covers_the_modules_the_compiled_helpers_read():
    # the constants of the special functions' series and threefry's rotations (plax core,
    # imported by the helpers), threefry's module, and the native artifacts' entry point
    names = {os.path.relpath(p, os.path.dirname(os.path.dirname(p))).replace(os.sep, "/")
             for p in cache.key_sources()}
    assert {"lax/special_series.py", "lax/bessel_series.py", "lax/random_bits.py",
            "plax_numba/threefry.py", "plax_numba/native_emit.py",
            "plax_numba/scalar.py"} <= names, names
    assert not any(n.endswith("__init__.py") for n in names), names


def test_add_any_kernels_are_adds_kernels():
    # the cache keys on the module's text, docstring included: add_any's kernels (the add of
    # tangents, the same code) are add's files, not a second compilation of each
    kernel = "@njit(**_OPTIONS)\ndef kernel(a0, a1, o0, n):\n    pass\n"
    add = cache.module_source(kernel, ["broadcast_in_dim", "add"])
    assert cache.module_source(kernel, ["broadcast_in_dim", "add_any"]) == add
    assert cache.source_path(add) == cache.source_path(
        cache.module_source(kernel, ["broadcast_in_dim", "add_any", "add"]))
    assert cache.module_source(kernel, ["broadcast_in_dim", "sub"]) != add
