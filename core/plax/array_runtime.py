"""What the runtime holds and waits for: :func:`live_arrays`, :func:`copy_to_host_async`
and :func:`effects_barrier` (JAX's top-level ``jax.live_arrays``, ``jax.copy_to_host_async``
and ``jax.effects_barrier``).

plax keeps no registry of arrays (creating one would cost every eager operation):
:func:`live_arrays` asks Python's garbage collector, which already tracks every Array, so the
eager path pays nothing and only the (rare, diagnostic) call itself walks the heap.
"""
from __future__ import annotations

import gc
from typing import Any

from plax.array import Array


def live_arrays(platform: str | None = None) -> list[Array]:
    """The arrays alive in this process and not deleted, optionally only those on devices
    of one platform.

    Args:
      platform: ``"cpu"``, ``"gpu"``, ... or a backend name; None for the default platform,
        as ``jax.live_arrays``.

    Returns:
      A list of :class:`plax.Array` (internal constants plax keeps alive included).

    Raises:
      RuntimeError: no installed backend has that platform (as :func:`plax.devices`).

    Example:
      >>> x = jnp.arange(3.0)
      >>> any(a is x for a in plax.live_arrays())
      True
    """
    from plax.device import devices
    wanted = set(devices(platform))  # validates the name with plax.devices' error
    found = []
    for obj in gc.get_objects():
        # (by the object's own type: isinstance would ask a weakref.proxy for its __class__,
        # which raises ReferenceError once its referent is gone)
        if issubclass(type(obj), Array) and not obj.is_deleted() and obj.devices() <= wanted:
            found.append(obj)
    return found


def copy_to_host_async(x: Any) -> Any:
    """Starts copying each array leaf of ``x`` to the host (``Array.copy_to_host_async``);
    leaves that are not arrays are left alone.

    plax's backends copy to the host when the value is read, so this only prepares what a
    backend can prepare; ``x`` is returned unchanged either way, as in JAX.

    Args:
      x: a pytree, usually with arrays at some leaves.

    Returns:
      ``x`` itself.

    Example:
      >>> y = plax.copy_to_host_async({"a": jnp.ones(2)})
      >>> y["a"].tolist()
      [1.0, 1.0]
    """
    from plax.tree_util import tree_leaves
    for leaf in tree_leaves(x):
        start = getattr(leaf, "copy_to_host_async", None) if isinstance(leaf, Array) else None
        if start is not None:
            start()
    return x


def effects_barrier() -> None:
    """Waits until the side effects (``debug.print``, ``debug.callback``, ``io_callback``)
    of the functions already called have run.

    plax runs a program's host callbacks in program order while the call executes, before it
    returns, so every earlier effect has already run and there is nothing to wait for; the
    function exists so that JAX code calling it runs unchanged.

    Example:
      >>> plax.jit(lambda x: plax.debug.print("x={}", x))(1)
      x=1
      >>> plax.effects_barrier()
    """


__all__ = ["live_arrays", "copy_to_host_async", "effects_barrier"]
