"""``plax.experimental``: APIs JAX keeps under ``jax.experimental``.

``io_callback`` is part of the core. Other names arrive from plugin packages, resolved
through the plugin registry on first use (see docs/plugin_guide.md, "Writing a transform
plugin"): ``plax.experimental.checkify`` (package ``plax-checkify``) and
``plax.experimental.jet`` (package ``plax-jet``). Both ``from plax.experimental import jet``
and ``import plax.experimental.jet`` work once the package is installed; without it they
raise an error naming the package to install. ``plax.experimental.multihost_utils`` is the
core's own (host-side helpers for runs over several processes).
"""
from __future__ import annotations

from typing import Any, Callable

from plax import plugins as _plugins
from plax.lax import callbacks as _callbacks

__all__ = ["io_callback"]

# names that plugins export as "experimental.<name>" (plax.plugins.lookup)
_plugin_getattr = _plugins.module_getattr("experimental")
_SUBMODULES = ("multihost_utils",)  # the core's own, imported on first use


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    return _plugin_getattr(name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBMODULES)
                  | set(_plugins.exported_names("experimental")))


def io_callback(callback: Callable, result_shape_dtypes: Any, *args: Any, sharding: Any = None,
                ordered: bool = False, **kwargs: Any) -> Any:
    """Calls an impure Python function on the host each time the program runs.

    Unlike :func:`plax.pure_callback`, the call is effectful: it is never dropped when its
    results are unused. ``ordered=True`` keeps it in program order with the other ordered
    effects, and then it cannot be ``vmap``-ed (``ValueError``); unordered, ``vmap`` calls it
    once per batch member. It has no derivative (``ValueError`` under ``jvp``/``grad``).

    Args:
      callback: the host function; it receives plax Arrays.
      result_shape_dtypes: a pytree of :class:`plax.ShapeDtypeStruct` (None: no results).
      *args: its positional arguments (pytrees of arrays).
      **kwargs: its keyword arguments (pytrees of arrays).
      sharding: accepted for compatibility; plax runs the callback on the host.
      ordered: whether the call is ordered.

    Returns:
      The callback's results, as a pytree of Arrays shaped like ``result_shape_dtypes``.

    Example:
      >>> log = []
      >>> plax.jit(lambda x: io_callback(lambda v: log.append(v) or v, x, x))(1.0)
      Array(1., dtype=float32)
    """
    return _callbacks.io_callback(callback, result_shape_dtypes, *args, sharding=sharding,
                                  ordered=ordered, **kwargs)
