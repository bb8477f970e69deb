"""Plugin discovery on pluggy: backends and transforms arrive through entry points.

Two entry-point groups are read on first use (never at ``import plax``):

* ``plax.backends`` -- modules implementing ``plax_backends() -> list[Backend]``;
* ``plax.plugins`` -- modules implementing ``plax_plugins() -> dict | None``: they
  register primitives, rules or whole transforms, and may return
  ``{public_name: object}`` to expose as ``plax.<public_name>`` (how ``pmap``
  arrives). A dotted name exposes an attribute of a plax subpackage:
  ``{"experimental.jet": module}`` makes ``plax.experimental.jet`` (an attribute, and an
  importable module when the value is a module; see :func:`lookup`).

A plugin that fails to import, or whose hook raises, is reported with a
:class:`PlaxPluginWarning` naming it and its error (the warning points at the user's
line that first needed the plugins); the others still load. ``python -m plax info``
prints what was found, and ``python -m plax info -v`` each failed plugin's traceback.

Which backend runs what (see docs/plugins_and_devices.md): the default platform is an
accelerator platform when one is present, else the CPU; ``PLAX_PLATFORMS`` (or
``JAX_PLATFORMS``) restricts and orders platforms; ``PLAX_BACKEND=name`` makes that
backend the default executor and its platform the default platform; among backends of
one platform the highest ``priority`` wins.

Example of a third-party backend package (its ``pyproject.toml``)::

    [project.entry-points."plax.backends"]
    mybackend = "plax_mybackend.plugin"

and ``plax_mybackend/plugin.py``::

    from plax.plugins import hookimpl

    @hookimpl
    def plax_backends():
        return [MyBackend()]
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
import threading
import traceback
import types
import warnings
from dataclasses import dataclass, field
from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("plax")
hookimpl = pluggy.HookimplMarker("plax")

BACKEND_GROUP = "plax.backends"
PLUGIN_GROUP = "plax.plugins"


class PlaxPluginWarning(RuntimeWarning):
    """A plugin failed to load or to initialise; plax goes on without it."""


class HookSpecs:
    """The hooks a plax plugin may implement."""

    @hookspec
    def plax_backends(self):
        """Return a list of :class:`plax.backend.Backend` objects."""

    @hookspec
    def plax_plugins(self):
        """Register primitives, rules or transforms; optionally return ``{name: object}`` to
        expose as attributes of the ``plax`` module."""


@dataclass
class PluginRecord:
    """What discovery found for one plugin: where it came from and whether it works."""

    name: str
    group: str
    source: str
    status: str = "loaded"          # "loaded" or "failed"
    error: str = ""                 # "Type: message" of the failure, or a description
    traceback: str = ""             # the failure's formatted traceback, where there was one
    backends: list = field(default_factory=list)
    exports: list = field(default_factory=list)


class Registry:
    """The loaded plugins, backends and devices. Build it with :func:`registry`.

    The configuration (``PLAX_BACKEND``, ``PLAX_PLATFORMS``) is read once, when the
    registry is built; :func:`reset` rereads it.
    """

    def __init__(self) -> None:
        self.records: list[PluginRecord] = []
        self.backends: dict[str, Any] = {}
        self.exports: dict[str, Any] = {}
        self.platform_devices: dict[str, list] = {}
        self.backend_devices: dict[str, list] = {}  # backend name -> its devices, by id
        self.excluded: dict[str, str] = {}  # backend name -> platform, left out by PLAX_PLATFORMS
        self.environment_error: str = ""    # a bad PLAX_BACKEND / PLAX_PLATFORMS, or ""
        self.forced_backend: str = os.environ.get("PLAX_BACKEND") or ""
        self.platform_order: list[str] = _platform_order()
        self.platforms_setting: str = _platforms_setting()  # "PLAX_PLATFORMS='cpu'" or ""

    # ---- queries

    def backends_for_platform(self, platform: str) -> list:
        """Backends of ``platform``, default (PLAX_BACKEND, else highest priority) first."""
        found = [b for b in self.backends.values() if b.platform == platform]
        forced = self.forced_backend
        return sorted(found, key=lambda b: (b.name != forced, -b.priority, b.name))

    def platforms(self) -> list[str]:
        """Platforms with devices, default first: the PLAX_BACKEND backend's platform, then
        the PLAX_PLATFORMS order, else accelerator platforms before the CPU."""
        plats = [p for p, devs in self.platform_devices.items() if devs]
        if self.platform_order:
            plats = [p for p in self.platform_order if p in plats]
        else:
            plats = sorted(plats, key=lambda p: (p == "cpu", p))
        forced = self.backends.get(self.forced_backend)
        if forced is not None and forced.platform in plats:
            plats.remove(forced.platform)
            plats.insert(0, forced.platform)
        return plats

    def default_devices(self) -> list:
        """The devices ``plax.devices()`` lists: the PLAX_BACKEND backend's devices, else the
        default platform's.

        Raises:
          RuntimeError: nothing is available, saying what configuration excluded or failed.
        """
        self.check_environment()
        forced = self.backends.get(self.forced_backend)
        if forced is not None and self.backend_devices.get(forced.name):
            return list(self.backend_devices[forced.name])
        plats = self.platforms()
        if not plats:
            raise RuntimeError(("No plax backend is available. " + self._exclusion_summary()
                                + self._failure_summary()).strip())
        return list(self.platform_devices[plats[0]])

    def devices_of(self, backend) -> list:
        """The devices ``backend`` drives (the registry's device objects), ordered by id."""
        devs = self.backend_devices.get(backend.name)
        if devs is None:
            devs = sorted(backend.devices(), key=lambda d: d.id)
        return list(devs)

    def get_backend(self, name: str):
        """A backend by name (``"numpy"``) or by platform (``"cpu"``: that platform's default).

        Raises:
          RuntimeError: saying whether configuration (PLAX_PLATFORMS) excluded it, and listing
            the available backends and platforms.
        """
        self.check_environment()
        if name in self.backends:
            return self.backends[name]
        canonical = _platform_alias(name)
        ranked = self.backends_for_platform(canonical)
        if ranked and canonical in self.platform_devices:
            return ranked[0]
        raise RuntimeError(self.unavailable(name, "backend"))

    def unavailable(self, name: str, kind: str = "platform") -> str:
        """Why ``name`` cannot be used: excluded by configuration (PLAX_PLATFORMS), or not
        installed (with the plugins that failed to load).

        Args:
          name: what the user asked for.
          kind: ``"platform"`` (a platform or backend name was asked for; platforms win) or
            ``"backend"`` (a backend name, or a platform standing for its default backend).
        """
        canonical = _platform_alias(name)
        available = (f"Available platforms: {self.platforms() or 'none'}; available backends: "
                     f"{sorted(self.backends) or 'none'}.")
        setting = self.platforms_setting
        on_platform = sorted(b for b, p in self.excluded.items() if _platform_alias(p) == canonical)
        excluded_platform = (f"Platform {name!r} (backends {on_platform}) is installed but "
                             f"excluded by {setting}; add it to the variable or unset it. "
                             f"{available}") if on_platform else ""
        excluded_backend = (f"Backend {name!r} (platform {self.excluded[name]!r}) is installed "
                            f"but excluded by {setting}; add its platform to the variable or "
                            f"unset it. {available}") if name in self.excluded else ""
        for message in ((excluded_platform, excluded_backend) if kind == "platform" else
                        (excluded_backend, excluded_platform)):
            if message:
                return message
        what = "Unknown backend or platform" if kind == "platform" else "Unknown backend"
        return (f"{what} {name!r}: no installed backend has that name or platform. {available} "
                + self._failure_summary()).strip()

    def check_environment(self) -> None:
        """Raises RuntimeError if PLAX_BACKEND or PLAX_PLATFORMS names something unavailable."""
        if self.environment_error:
            raise RuntimeError(self.environment_error)

    def default_reason(self) -> str:
        """What chose the default platform, for reports: a variable, or the default order."""
        if self.forced_backend in self.backends:
            return f"set by PLAX_BACKEND={self.forced_backend!r}"
        if self.platform_order:
            return f"set by {self.platforms_setting}"
        plats = self.platforms()
        if plats and plats[0] != "cpu":
            return "accelerator platforms come before cpu"
        return "no accelerator platform is installed"

    def _exclusion_summary(self) -> str:
        if not self.excluded:
            return ""
        left_out = ", ".join(f"{n} (platform {p})" for n, p in sorted(self.excluded.items()))
        return f"{self.platforms_setting} excludes the installed backends {left_out}. "

    def _failure_summary(self) -> str:
        failed = [f"{r.name} ({r.error})" for r in self.records if r.status != "loaded"]
        return ("Plugins that failed to load: " + "; ".join(failed) + ".") if failed else ""


_lock = threading.RLock()
_registry: Registry | None = None
_manual: list[tuple[str, Any]] = []
_loading: list[str] = []  # the plugin being loaded while discovery runs (guards re-entry)


def _platform_alias(name: str) -> str:
    return {"cuda": "gpu", "rocm": "gpu", "host": "cpu"}.get(name.lower(), name.lower())


def _platforms_configured() -> tuple[str, str]:
    """``(setting, value)``: what restricts the platforms, as ``NAME='value'`` for messages
    (``PLAX_PLATFORMS``/``JAX_PLATFORMS`` in the environment, or
    ``jax.config.update("jax_platforms", ...)`` made before the plugins loaded), or
    ``("", "")``."""
    from plax.config import config
    if config.was_updated("platforms"):  # jax.config.update wins over the environment
        value = config.read("platforms") or ""
        return (f"jax_platforms={value!r}", value) if value else ("", "")
    for var in ("PLAX_PLATFORMS", "JAX_PLATFORMS"):
        if os.environ.get(var):
            return f"{var}={os.environ[var]!r}", os.environ[var]
    return "", ""


def _platform_order() -> list[str]:
    raw = _platforms_configured()[1]
    return [_platform_alias(p.strip()) for p in raw.split(",") if p.strip()]


def _platforms_setting() -> str:
    """The setting that restricts the platforms, as ``NAME='value'`` (for messages), or ""."""
    return _platforms_configured()[0]


# Warnings point at the first frame outside this package: the user's line that first needed
# the plugins, not the plax internals that happened to load them.
_PACKAGE_PREFIX = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _external_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued by the caller of this function point at
    the first frame outside the plax package (for Pythons without ``skip_file_prefixes``).

    Counts as ``warnings.warn`` does: the caller is level 1, and frames of the import
    machinery are passed over without being counted."""
    frame = sys._getframe(1)  # the function that will call warnings.warn: level 1
    level = 1
    while True:
        frame = frame.f_back
        while frame is not None and "importlib" in frame.f_code.co_filename and \
                "_bootstrap" in frame.f_code.co_filename:
            frame = frame.f_back
        if frame is None:
            return level  # plax all the way up (python -m plax): the outermost plax frame
        level += 1
        if not os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_PREFIX):
            return level


def _warn_user(message: str) -> None:
    """Issues a PlaxPluginWarning attributed to the first frame outside plax."""
    if sys.version_info >= (3, 12):
        warnings.warn(message, PlaxPluginWarning, skip_file_prefixes=(_PACKAGE_PREFIX,))
    else:
        warnings.warn(message, PlaxPluginWarning, stacklevel=_external_stacklevel())


def _warn(record: PluginRecord) -> None:
    _warn_user(f"plax: {record.group} plugin {record.name!r} ({record.source}) failed: "
               f"{record.error}. plax continues without it.")


def _fail(record: PluginRecord, error: str, err: BaseException | None = None) -> None:
    """Marks ``record`` failed with ``error`` (keeping ``err``'s traceback) and warns once."""
    record.status, record.error = "failed", error
    if err is not None:
        record.traceback = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    _warn(record)


# Names under ``plax`` that first-party plugin packages provide, with the distribution to
# install and its entry-point name. Only messages use this table: when a name is missing,
# the error says which package brings it (a third party's names resolve the same way, but
# plax cannot know what to suggest for them).
KNOWN_PROVIDERS: dict[str, tuple[str, str]] = {
    "experimental.checkify": ("plax-checkify", "checkify"),
    "experimental.cost_analysis": ("plax-cost-analysis", "cost_analysis"),
    "cli.cost": ("plax-cost-analysis", "cost_analysis"),
    "experimental.jet": ("plax-jet", "jet"),
    **{name: ("plax-pmap", "pmap") for name in (
        "pmap", "shard_map", "experimental.shard_map",
        *(f"lax.{n}" for n in ("psum", "pmean", "pmax", "pmin", "all_gather", "all_to_all",
                               "ppermute", "pshuffle", "psum_scatter", "axis_index",
                               "axis_size", "pbroadcast", "pvary")),
        *(f"lax.{n}_p" for n in ("psum", "pmax", "pmin", "all_gather", "all_to_all",
                                 "ppermute", "psum_scatter", "reduce_scatter", "axis_index")))},
}


def lookup(qualname: str) -> Any:
    """The object a plugin exports as ``plax.<qualname>`` (e.g. ``"experimental.jet"``).

    Loads the plugins if they are not loaded yet.

    Raises:
      AttributeError: no installed plugin exports the name; for a name of a first-party
        plugin (:data:`KNOWN_PROVIDERS`) the message says which package to install, or why
        the installed plugin failed to load.

    Example:
      >>> plax.plugins.lookup("experimental.jet").jet
      <function jet at ...>
    """
    exports = registry().exports
    if qualname in exports:
        return exports[qualname]
    raise AttributeError(missing_message(qualname))


def missing_message(qualname: str) -> str:
    """Why ``plax.<qualname>`` is not available: which package to install, or why it failed."""
    namespace, _, attr = qualname.rpartition(".")
    owner = f"plax.{namespace}" if namespace else "plax"
    known = KNOWN_PROVIDERS.get(qualname)
    if known is None:
        return f"module {owner!r} has no attribute {attr!r}"
    dist, ep_name = known
    failed = [r for r in registry().records if r.name == ep_name and r.status != "loaded"]
    if failed:
        return (f"plax.{qualname} is provided by the plugin package {dist!r}, which is installed "
                f"but failed to load: {failed[0].error}. Run `python -m plax info -v` for the "
                "traceback.")
    folder = dist.replace("-", "_")
    return (f"plax.{qualname} is provided by the plugin package {dist!r}, which is not "
            f"installed. Install it with `pip install {dist}` (from a plax checkout: "
            f"`pip install -e plugins/{folder}`).")


def module_getattr(namespace: str):
    """A module ``__getattr__`` for the plax subpackage ``plax.<namespace>`` that resolves
    names through the plugins' exports (``"<namespace>.<name>"``), with :func:`lookup`'s
    messages.

    Example (in ``plax/experimental/__init__.py``)::

        __getattr__ = plugins.module_getattr("experimental")
    """
    def __getattr__(name: str) -> Any:
        if name.startswith("__"):  # dunder probes (copy, pickle, doctest) never load plugins
            raise AttributeError(f"module 'plax.{namespace}' has no attribute {name!r}")
        return lookup(f"{namespace}.{name}")

    return __getattr__


def exported_names(namespace: str) -> list[str]:
    """The names plugins export under ``plax.<namespace>`` (for ``__dir__``), without loading
    plugins that are not loaded yet."""
    reg = _registry
    prefix = namespace + "."
    names = {k[len(prefix):] for k in (reg.exports if reg else ()) if k.startswith(prefix)}
    return sorted(n for n in names if "." not in n)


class _AliasLoader(importlib.abc.Loader):
    """Makes ``import plax.<qualname>`` return the module a plugin exported under that name
    (the plugin's own module object: its ``__name__`` and ``__spec__`` stay its own)."""

    def __init__(self, target: types.ModuleType) -> None:
        self.target = target

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        # the import system returns whatever sys.modules holds under the name afterwards
        sys.modules[module.__name__] = self.target


class _PluginModuleFinder(importlib.abc.MetaPathFinder):
    """Resolves ``import plax.a.b`` to a module a plugin exports as ``"a.b"``; for a missing
    first-party plugin module it raises ModuleNotFoundError saying what to install.

    It sits at the end of ``sys.meta_path``: plax's own modules are always found first."""

    def find_spec(self, fullname: str, path=None, target=None):
        if not fullname.startswith("plax.") or _loading:
            return None
        qualname = fullname[len("plax."):]
        obj = registry().exports.get(qualname)
        if isinstance(obj, types.ModuleType):
            return importlib.util.spec_from_loader(fullname, _AliasLoader(obj))
        if obj is None and qualname in KNOWN_PROVIDERS:
            # ``name`` is the plugin's distribution (not ``fullname``), so that a
            # ``from plax.experimental import jet`` shows this message instead of Python's
            # generic "cannot import name".
            raise ModuleNotFoundError(missing_message(qualname),
                                      name=KNOWN_PROVIDERS[qualname][0])
        return None


def install_module_finder() -> None:
    """Makes modules that plugins export importable as ``plax.<dotted name>`` (idempotent)."""
    if not any(isinstance(f, _PluginModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_PluginModuleFinder())


def _entry_points(group: str):
    from importlib.metadata import entry_points
    return list(entry_points(group=group))


def register_plugin(plugin: Any, name: str | None = None) -> str:
    """Registers a plugin object (a module or an object with hook methods) by hand.

    Useful in tests and notebooks; installed packages use entry points instead.
    The registry is rebuilt on next use.

    Args:
      plugin: a module or object whose ``plax_backends`` / ``plax_plugins`` attributes are
        decorated with :data:`hookimpl`.
      name: the name reports use (default: the module's ``__name__``).

    Returns:
      The name it was registered under (for :func:`unregister_plugin`).

    Raises:
      ValueError: if a plugin of that name is already registered by hand.

    Example:
      >>> class MyPlugin:
      ...     @hookimpl
      ...     def plax_backends(self):
      ...         return [MyBackend()]
      >>> plax.plugins.register_plugin(MyPlugin(), name="mine")
      'mine'
      >>> plax.plugins.unregister_plugin("mine")
    """
    name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
    with _lock:
        if any(n == name for n, _ in _manual):
            raise ValueError(f"A plugin named {name!r} is already registered; pass another name "
                             "or call unregister_plugin first.")
        _manual.append((name, plugin))
        reset()
    return name


def unregister_plugin(name: str) -> None:
    """Removes a plugin added with :func:`register_plugin`; the registry is rebuilt on next use.

    Raises:
      KeyError: naming the plugin and those registered by hand, if it is not one of them.
    """
    with _lock:
        for i, (n, _) in enumerate(_manual):
            if n == name:
                del _manual[i]
                reset()
                return
    raise KeyError(f"No plugin named {name!r} was registered by hand; registered: "
                   f"{[n for n, _ in _manual]}")


def reset() -> None:
    """Forgets the loaded registry so the next use rediscovers plugins (tests use this)."""
    global _registry
    with _lock:
        old, _registry = _registry, None
        known = [d for devs in old.platform_devices.values() for d in devs] if old else []
        from plax.device import _invalidate_caches
        _invalidate_caches(known)


def registry() -> Registry:
    """The plugin registry, discovering and loading plugins on first call."""
    reg = _registry
    if reg is not None:
        return reg
    with _lock:
        if _registry is None:
            if _loading:
                raise RuntimeError(
                    f"A plax plugin ({_loading[-1]}) used plax devices or backends while plugins "
                    "were being loaded. Hooks must only construct and return their objects; "
                    "look up other backends lazily, at first use.")
            _loading.append("?")
            try:
                _load()
            finally:
                _loading.clear()
        return _registry


def _load() -> None:
    global _registry
    reg = Registry()
    pm = pluggy.PluginManager("plax")
    pm.add_hookspecs(HookSpecs)
    records: dict[str, PluginRecord] = {}

    candidates = []
    for group in (BACKEND_GROUP, PLUGIN_GROUP):
        try:
            eps = _entry_points(group)
        except Exception as err:  # a broken installation must not take plax down
            _warn_user(f"plax: could not read entry points of {group}: {err}")
            eps = []
        for ep in eps:
            candidates.append((ep.name, group, ep.value, ep.load))
    for name, obj in _manual:
        candidates.append((name, "manual", repr(obj), lambda obj=obj: obj))

    for name, group, source, load in candidates:
        _loading[-1] = f"{group} plugin {name!r}"
        record = PluginRecord(name, group, source)
        reg.records.append(record)
        try:
            plugin = load()
            pm.register(plugin, name=f"{group}:{name}")
        except Exception as err:
            _fail(record, f"{type(err).__name__}: {err}", err)
            continue
        records[f"{group}:{name}"] = record
        if not pm.get_hookcallers(plugin):
            _fail(record, "implements no plax hook (expected a function plax_backends or "
                          "plax_plugins decorated with plax.plugins.hookimpl)")

    # Each hook implementation is called on its own, so one that raises cannot stop the others.
    for impl in pm.hook.plax_backends.get_hookimpls():
        record = records[impl.plugin_name]
        _loading[-1] = f"{record.group} plugin {record.name!r}"
        try:
            backends = list(impl.function() or [])
        except Exception as err:
            _fail(record, f"{type(err).__name__}: {err}", err)
            continue
        for backend in backends:
            step = "is not a Backend"
            try:
                _check_backend_object(backend)
                step = "devices() raised"
                devs = list(backend.devices())
            except Exception as err:
                _fail(record, f"backend {getattr(backend, 'name', backend)!r}: {step}: "
                              f"{type(err).__name__}: {err}", err)
                continue
            if backend.name in reg.backends or backend.name in reg.excluded:
                _fail(record, f"duplicate backend name {backend.name!r}")
                continue
            allowed = reg.platform_order
            if allowed and _platform_alias(backend.platform) not in allowed:
                record.backends.append(f"{backend.name} (platform {backend.platform} excluded by "
                                       f"{reg.platforms_setting.split('=')[0]})")
                reg.excluded[backend.name] = backend.platform
                continue
            reg.backends[backend.name] = backend
            record.backends.append(backend.name)
            known = reg.platform_devices.setdefault(backend.platform, [])
            mine = []
            for d in devs:
                if d in known:
                    d = known[known.index(d)]  # one object per device, whoever listed it first
                else:
                    known.append(d)
                mine.append(d)
            reg.backend_devices[backend.name] = sorted(mine, key=lambda d: d.id)
    for impl in pm.hook.plax_plugins.get_hookimpls():
        record = records[impl.plugin_name]
        _loading[-1] = f"{record.group} plugin {record.name!r}"
        try:
            exported = impl.function() or {}
            reg.exports.update(exported)
            record.exports.extend(exported)
        except Exception as err:
            _fail(record, f"{type(err).__name__}: {err}", err)
    for devs in reg.platform_devices.values():
        devs.sort(key=lambda d: d.id)
    reg.environment_error = _environment_error(reg)
    _registry = reg


def _check_backend_object(backend: Any) -> None:
    missing = [a for a in ("name", "platform", "priority", "devices", "put", "to_host", "execute",
                           "compile") if not hasattr(backend, a)]
    if missing:
        raise TypeError(f"{backend!r} is not a plax Backend: it lacks {missing} (subclass "
                        "plax.backend.Backend)")


def _environment_error(reg: Registry) -> str:
    """What is wrong with PLAX_BACKEND / PLAX_PLATFORMS given what was found ("" if nothing)."""
    problems = []
    try:
        from plax.device import cpu_devices
        cpu_devices()
    except ValueError as err:  # a bad PLAX_NUM_CPU_DEVICES
        problems.append(str(err) + ".")
    forced = reg.forced_backend
    if forced and forced not in reg.backends:
        available = f"available backends: {sorted(reg.backends) or 'none'}."
        if forced in reg.excluded:
            problems.append(f"PLAX_BACKEND={forced!r} names a backend of platform "
                            f"{reg.excluded[forced]!r}, which {reg.platforms_setting} excludes; "
                            + available)
        elif _platform_alias(forced) in reg.platform_devices or \
                _platform_alias(forced) in reg.excluded.values():
            problems.append(f"PLAX_BACKEND={forced!r} names a platform, not a backend (choose "
                            f"platforms with PLAX_PLATFORMS={forced}); " + available)
        else:
            problems.append(f"PLAX_BACKEND={forced!r} names no installed backend; " + available)
    missing = [p for p in reg.platform_order if not reg.platform_devices.get(p)]
    if missing:
        found = sorted({b.platform for b in reg.backends.values()} | set(reg.excluded.values()))
        problems.append(f"{reg.platforms_setting} requests platform(s) {missing} for which no "
                        f"backend with devices is installed; installed platforms: {found or 'none'}.")
    if not problems:
        return ""
    return (" ".join(problems) + " Fix or unset the environment variable. "
            + reg._failure_summary()).strip()


def info(verbose: bool = False) -> str:
    """A report of discovered plugins, their status, backends and devices (``python -m plax info``).

    Args:
      verbose: also print the traceback of each plugin that failed (``python -m plax info -v``).
    """
    reg = registry()
    lines = ["plax plugins:"]
    for r in reg.records:
        extra = f" backends={r.backends}" if r.backends else ""
        extra += f" exports={r.exports}" if r.exports else ""
        err = f"  error: {r.error}" if r.error else ""
        lines.append(f"  [{r.status}] {r.name} ({r.group}: {r.source}){extra}{err}")
        if verbose and r.traceback:
            lines.extend("      | " + ln for ln in r.traceback.rstrip("\n").splitlines())
    if reg.environment_error:
        lines.append(f"environment error: {reg.environment_error}")
    lines.append("backends:")
    for b in sorted(reg.backends.values(), key=lambda b: (b.platform, -b.priority)):
        default = " (default)" if reg.backends_for_platform(b.platform)[0] is b else ""
        lines.append(f"  {b.name}: platform={b.platform} priority={b.priority}{default}")
    for name, platform in sorted(reg.excluded.items()):
        lines.append(f"  {name}: platform={platform} excluded by {reg.platforms_setting}")
    lines.append("devices:")
    for p in reg.platforms():
        drivers = [b.name for b in reg.backends_for_platform(p)]
        for d in reg.platform_devices[p]:
            lines.append(f"  {d!r} platform={p} kind={d.device_kind!r} backends={drivers}")
    return "\n".join(lines)


install_module_finder()
