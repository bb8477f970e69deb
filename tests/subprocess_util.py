"""Running plax in a fresh interpreter, for tests of import-time and environment behaviour.

The child sees this checkout's ``core`` and ``backends`` first on PYTHONPATH (the transform
plugins under ``plugins/`` are separate distributions, reached through their installs),
none of the parent's ``PLAX_*`` configuration variables unless given (the toy backend's own
``PLAX_TOY_*`` settings pass through: they describe what is installed, not how plax is
configured), and a shared bytecode cache (so each child does not recompile plax from
source, which would dominate the tests' runtime).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYCACHE = Path(tempfile.gettempdir()) / f"plax-test-pycache-{os.getuid() if hasattr(os, 'getuid') else 0}"


def child_env(*extra_path: Path, env: dict | None = None) -> dict:
    """The environment of a child interpreter (see the module docstring)."""
    path = [str(p) for p in extra_path] + [str(REPO / d) for d in ("core", "backends")]
    dropped = ("JAX_PLATFORMS", "JAX_ENABLE_X64", "PYTHONDONTWRITEBYTECODE")
    out = {k: v for k, v in os.environ.items()
           if (not k.startswith("PLAX_") or k.startswith("PLAX_TOY_")) and k not in dropped}
    out["PYTHONPATH"] = os.pathsep.join(path + [os.environ.get("PYTHONPATH", "")])
    out["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    for k, v in (env or {}).items():  # a value of None removes the variable
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def run_python(code: str = "", *extra_path: Path, env: dict | None = None, args=None,
               check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs ``code`` (or ``python *args``) in a fresh interpreter and returns the result.

    Raises:
      AssertionError: with the child's output, if ``check`` and it exited non-zero.
    """
    cmd = [sys.executable] + (list(args) if args is not None else ["-c", textwrap.dedent(code)])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=child_env(*extra_path, env=env))
    if check and proc.returncode != 0:
        raise AssertionError(f"child failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def last_json(proc: subprocess.CompletedProcess):
    """The JSON value the child printed on its last line of output."""
    return json.loads(proc.stdout.strip().splitlines()[-1])


_ANSWERS_TAIL = r'''

import plax
result = {"plax": answers(plax, plax.numpy)}
try:
    import jax
except ImportError:
    jax = None
if jax is not None:
    jax.config.update("jax_num_cpu_devices", 2)
    result["jax"] = answers(jax, jax.numpy)
print(json.dumps(result))
'''


def two_cpu_device_answers(code: str) -> dict:
    """Runs ``code`` -- which defines ``answers(lib, jnp)`` returning a JSON-able dict, and
    imports ``json`` -- in one child interpreter with two CPU devices, under plax and (where
    installed) JAX.

    Returns:
      ``{"plax": ..., "jax": ...}`` (no ``"jax"`` without JAX).
    """
    return last_json(run_python(env={"PLAX_NUM_CPU_DEVICES": "2", "PLAX_PLATFORMS": "cpu",
                                     "JAX_PLATFORMS": "cpu"},
                                args=["-c", code + _ANSWERS_TAIL]))
