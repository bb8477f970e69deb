"""Run-time flags: ``plax.config.update("jax_enable_x64", True)`` and friends.

Every flag can be set with or without the ``jax_`` prefix, and starts from an
environment variable (``JAX_ENABLE_X64=1`` or ``PLAX_ENABLE_X64=1``), so code
written for JAX configures plax unchanged.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterator


def _env_bool(name: str, default: bool) -> bool:
    for key in ("PLAX_" + name.upper(), "JAX_" + name.upper()):
        raw = os.environ.get(key)
        if raw is not None:
            return raw.strip().lower() in ("1", "true", "yes", "on")
    return default


class Config:
    """The flag table. Read a flag as an attribute, set it with :meth:`update`.

    Example:
      >>> import plax
      >>> plax.config.update("jax_enable_x64", True)
      >>> plax.config.x64_enabled
      True
    """

    _defaults: dict[str, bool] = {
        "enable_x64": False,
        "threefry_partitionable": True,
        "disable_jit": False,
        "debug_nans": False,
        "debug_infs": False,
    }

    def __init__(self) -> None:
        self._values = {k: _env_bool(k, v) for k, v in self._defaults.items()}
        self._listeners: list[Callable[[str, Any], None]] = []

    @staticmethod
    def _canonical(name: str) -> str:
        return name[4:] if name.startswith("jax_") else name

    def update(self, name: str, value: Any) -> None:
        """Sets flag ``name`` (``"jax_enable_x64"`` or ``"enable_x64"``) to ``value``.

        Raises:
          AttributeError: for a flag plax does not know.
        """
        key = self._canonical(name)
        if key not in self._values:
            known = ", ".join(sorted("jax_" + k for k in self._values))
            raise AttributeError(f"Unrecognized config option: {name!r}. Known options: {known}.")
        self._values[key] = bool(value)
        for listener in self._listeners:
            listener(key, bool(value))

    def read(self, name: str) -> bool:
        """Returns the value of flag ``name`` (with or without the ``jax_`` prefix)."""
        return self._values[self._canonical(name)]

    def on_change(self, listener: Callable[[str, Any], None]) -> None:
        """Registers ``listener(name, value)`` to run whenever a flag changes."""
        self._listeners.append(listener)

    @contextlib.contextmanager
    def override(self, name: str, value: Any) -> Iterator[None]:
        """Sets a flag inside a ``with`` block and restores it afterwards."""
        old = self.read(name)
        self.update(name, value)
        try:
            yield
        finally:
            self.update(name, old)

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values")
        if values is None:
            raise AttributeError(name)
        if name == "x64_enabled":
            return values["enable_x64"]
        key = self._canonical(name)
        if key in values:
            return values[key]
        raise AttributeError(f"Unrecognized config option: {name!r}")


config = Config()


def enable_x64(new_val: bool = True) -> contextlib.AbstractContextManager:
    """Context manager that turns 64-bit types on (or off) inside its block."""
    return config.override("enable_x64", new_val)
