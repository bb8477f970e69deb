"""Memory spaces (``jax.memory``): where on a device an array's buffer lives.

:class:`Space` names them as JAX 0.10 does. plax's CPU backends have one memory (host memory,
which is also the device's), so ``Space.Device`` and ``Space.Host`` are the same place there;
:func:`memory_kind` and :func:`space_of_kind` translate to and from the memory-kind strings
of shardings (``"device"``, ``"pinned_host"``).

Example:
  >>> from plax import memory
  >>> memory.Space.Host
  MemorySpace.Host
  >>> memory.memory_kind(memory.Space.Host)
  'pinned_host'
"""
from __future__ import annotations

import enum


class Space(enum.Enum):
    """A memory space: ``Device`` (the accelerator's memory), ``Host`` (pinned host memory)
    or ``Any`` (either: a type that does not constrain it).

    Example:
      >>> list(Space)
      [MemorySpace.Device, MemorySpace.Host, MemorySpace.Any]
    """

    Device = enum.auto()
    Host = enum.auto()
    Any = enum.auto()

    def __repr__(self) -> str:
        return f"MemorySpace.{self.name}"

    __str__ = __repr__
    # Identity hashing, as JAX's (Enum hashes the member's name otherwise).
    __hash__ = object.__hash__


Space.__name__ = Space.__qualname__ = "MemorySpace"  # as JAX prints the class

_KIND_OF_SPACE = {Space.Device: "device", Space.Host: "pinned_host"}


def memory_kind(space: Space) -> str:
    """The memory-kind string of a memory space (``Sharding.memory_kind``'s vocabulary).

    Args:
      space: ``Space.Device`` or ``Space.Host``.

    Returns:
      ``"device"`` or ``"pinned_host"``.

    Raises:
      ValueError: ``space`` is ``Space.Any`` (no one kind) or not a Space.

    Example:
      >>> memory_kind(Space.Device)
      'device'
    """
    try:
        return _KIND_OF_SPACE[space]
    except (KeyError, TypeError):
        raise ValueError(f"memory_kind: {space!r} names no single memory; give "
                         "Space.Device or Space.Host") from None


def space_of_kind(kind: str | None) -> Space:
    """The memory space of a memory-kind string: ``"pinned_host"`` is ``Space.Host``, any
    other kind (``"device"``, ``"unpinned_host"``, None) ``Space.Device``, as in JAX.

    Example:
      >>> space_of_kind("pinned_host")
      MemorySpace.Host
    """
    return Space.Host if kind == "pinned_host" else Space.Device


#: the memory kinds a device addresses (JAX-CPU's and JAX-GPU's three; plax's CPU backends
#: hold all three in the one host memory)
ADDRESSABLE_KINDS = ("device", "pinned_host", "unpinned_host")


def check_memory_kind(kind: str | None, device) -> str:
    """``kind`` normalised for ``device`` (None is the device's default, ``"device"``).

    Args:
      kind: a memory-kind string or None.
      device: the plax Device that is to hold the memory.

    Returns:
      The memory kind.

    Raises:
      ValueError: a kind the device does not address (JAX's message).

    Example:
      >>> check_memory_kind(None, plax.devices()[0])
      'device'
    """
    if kind is None:
        return "device"
    if kind not in ADDRESSABLE_KINDS:
        platform = getattr(device, "platform", "cpu")
        raise ValueError(f"Could not find memory addressable by device {platform}. Device "
                         f"{platform} can address the following memory kinds: "
                         f"{', '.join(ADDRESSABLE_KINDS)}. Got memory kind: {kind}")
    return kind


__all__ = ["ADDRESSABLE_KINDS", "Space", "check_memory_kind", "memory_kind", "space_of_kind"]
