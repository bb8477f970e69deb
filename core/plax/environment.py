"""``jax.print_environment_info`` and ``jax.process_indices``: what a bug report needs to
say about the installation, and the indices of the processes of a run."""
from __future__ import annotations

import os
import platform
import sys


def print_environment_info(return_string: bool = False) -> str | None:
    """The versions of plax, its backends and plugins, NumPy and Python, the devices and the
    platform, with the ``PLAX_``/``JAX_``/``XLA_`` environment variables set (JAX's report,
    with plax's packages in place of jaxlib).

    Args:
      return_string: return the text instead of printing it.

    Returns:
      The text when ``return_string`` is True, else None (it is printed).

    Example:
      >>> "numpy:" in jax.print_environment_info(return_string=True)
      True
    """
    import numpy as np

    import plax
    from plax import plugins
    versions = [f"plax:   {plax.__version__}"]
    for dist in sorted(_plugin_distributions(plugins)):
        versions.append(f"{dist[0]}: {dist[1]}")
    dev = plax.devices()[0]
    info = "\n".join(versions + [
        f"numpy:  {np.__version__}",
        "python: " + sys.version.replace("\n", " "),
        f"device info: {dev.device_kind}-{plax.device_count()}, "
        f"{plax.local_device_count()} local devices",
        f"process_count: {plax.process_count()}",
        f"platform: {platform.uname()}"])
    for key, value in os.environ.items():
        if key.startswith(("PLAX_", "JAX_", "XLA_")):
            info += f"\n{key}={value}"
    if return_string:
        return info
    print(info)
    return None


def _plugin_distributions(plugins) -> list[tuple[str, str]]:
    """``(distribution, version)`` of each installed plax backend or plugin package."""
    from importlib import metadata
    seen = {}
    for group in ("plax.backends", "plax.plugins"):
        for ep in metadata.entry_points(group=group):
            dist = getattr(ep, "dist", None)
            if dist is not None and dist.name != "plax":
                seen[dist.name] = dist.version
    return list(seen.items())


def process_indices(backend: str | None = None) -> list[int]:
    """The indices of the processes of this run: ``list(range(process_count()))``.

    Args:
      backend: accepted as in JAX (every plax backend sees the same processes).

    Returns:
      The process indices, in order.

    Example:
      >>> jax.process_indices()
      [0]
    """
    from plax.device import process_count
    return list(range(process_count()))
