"""Helpers shared by the asv benchmarks: every benchmark runs on plax (per backend) and on JAX."""
from __future__ import annotations

import importlib


def frameworks() -> list[str]:
    """``plax:<backend>`` for each installed plax backend, plus ``jax`` (skipped if absent)."""
    import plax
    from plax import plugins
    return [f"plax:{name}" for name in sorted(plugins.registry().backends)] + ["jax"]


def load(framework: str):
    """(module, numpy module, jit with the framework's backend bound) for a framework name."""
    if framework == "jax":
        try:
            jax = importlib.import_module("jax")
        except ImportError:
            raise NotImplementedError("jax is not installed") from None
        import jax.numpy as jnp
        return jax, jnp, jax.jit
    import plax
    import plax.numpy as jnp
    backend = framework.split(":", 1)[1]
    return plax, jnp, lambda f, **kw: plax.jit(f, backend=backend, **kw)
