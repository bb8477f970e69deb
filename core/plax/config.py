"""Run-time options: ``plax.config.update("jax_enable_x64", True)`` and friends, as in JAX.

Every option of JAX 0.10.2 is accepted under its JAX name (and, for plax's own code, without
the ``jax_`` prefix); an unknown name raises ``AttributeError`` as JAX does. Each option starts
from an environment variable (``JAX_ENABLE_X64=1`` or ``PLAX_ENABLE_X64=1``), can be read as an
attribute (``plax.config.jax_enable_x64``), through :meth:`Config.read` or in
:attr:`Config.values`, and can be set inside a ``with`` block (:meth:`Config.override`, and the
context managers ``plax.debug_nans(True)``, ``plax.numpy_rank_promotion("raise")``, ...).
``docs/config.md`` says which options plax honours; the others are stored and do nothing.
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Callable, Iterator

from plax.config_jax_options import JAX_OPTIONS

# Matmul precisions JAX accepts for jax_default_matmul_precision (None: the default).
_MATMUL_PRECISIONS = (
    "default", "high", "highest", "bfloat16", "tensorfloat32", "float32", "ANY_F8_ANY_F8_F32",
    "ANY_F8_ANY_F8_F32_FAST_ACCUM", "ANY_F8_ANY_F8_ANY", "ANY_F8_ANY_F8_ANY_FAST_ACCUM",
    "F16_F16_F16", "F16_F16_F32", "BF16_BF16_BF16", "BF16_BF16_F32", "BF16_BF16_F32_X3",
    "BF16_BF16_F32_X6", "BF16_BF16_F32_X9", "TF32_TF32_F32", "TF32_TF32_F32_X3", "F32_F32_F32",
    "F64_F64_F64")

# Options whose values plax checks as JAX does: name -> (allowed values, None allowed).
_ENUMS: dict[str, tuple[tuple, bool]] = {
    "numpy_rank_promotion": (("allow", "warn", "raise"), False),
    "numpy_dtype_promotion": (("standard", "strict"), False),
    "default_matmul_precision": (_MATMUL_PRECISIONS, True),
    "default_prng_impl": (("threefry2x32", "threefry4x32", "rbg", "unsafe_rbg", "philox2x32",
                           "philox4x32"), False),
    "traceback_filtering": (("off", "tracebackhide", "remove_frames", "quiet_remove_frames",
                             "auto"), False),
    "cpu_collectives_implementation": (("gloo", "mpi", "megascale"), False),
    "error_checking_behavior_divide": (("ignore", "raise"), False),
    "error_checking_behavior_nan": (("ignore", "raise"), False),
    "error_checking_behavior_oob": (("ignore", "raise"), False),
    "logging_level": (("NOTSET", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"), False),
    "memory_fitting_level": (("UNKNOWN", "O0", "O1", "O2", "O3"), False),
    "optimization_level": (("UNKNOWN", "O0", "O1", "O2", "O3"), False),
    "use_magma": (("off", "on", "auto"), False),
    "legacy_prng_key": (("allow", "warn", "error"), False),
    "send_traceback_to_runtime": (("off", "on", "full"), False),
    "array_garbage_collection_guard": (("allow", "log", "fatal"), True),
    **{name: (("allow", "log", "disallow", "log_explicit", "disallow_explicit"), True)
       for name in ("transfer_guard", "transfer_guard_host_to_device",
                    "transfer_guard_device_to_device", "transfer_guard_device_to_host")},
}

# Options JAX reads from the environment as a word of its own, stored as the word (JAX
# keeps jax_explicit_x64_dtypes as an integer enum, set from JAX_EXPLICIT_X64_DTYPES=allow).
_ENV_WORDS = {"explicit_x64_dtypes": ("warn", "error", "allow")}

# Enum options JAX takes in any case, from its variable and from config.update alike
# (JAX_SEND_TRACEBACK_TO_RUNTIME=ON: its enum class looks a word up by its upper-case name);
# the others must be spelt exactly.
_ANY_CASE = frozenset({"send_traceback_to_runtime"})

# Options JAX never reads from the environment (its absl-style flags, set only with
# config.update or a command-line flag): plax ignores JAX_<NAME> / PLAX_<NAME> for them too,
# so a value there neither sets nor breaks anything.
_NOT_FROM_ENV = frozenset({
    "mock_num_gpu_processes", "cross_host_transfer_timeout_seconds",
    "cross_host_transfer_transfer_size", "check_proxy_envs", "cpu_enable_async_dispatch",
    "force_dcn_cross_host_transfers", "sort_devices_by_process_index", "xla_backend",
    "cuda_visible_devices", "rocm_visible_devices", "oneapi_visible_devices",
    "mock_gpu_topology", "cross_host_transfer_socket_address",
    "cross_host_transport_addresses"})

# Variables JAX also reads for an option, after its own (JAX's spelling kept: the option's
# default is read from it).
_MORE_ENV_NAMES = {"export_ignore_forward_compatibility":
                   ("JAX_EXPORT_IGNORE_FORWARD_COMPATIBILIY",)}

# Options whose variable JAX reads in lower case (JAX_PLATFORM_NAME=CPU gives "cpu").
_LOWERED_FROM_ENV = frozenset({"backend_target", "platform_name"})


def _short(name: str) -> str:
    return name[4:] if name.startswith("jax_") else name


# Options plax reads as booleans (from the environment through env_flag).
_BOOLS = frozenset(_short(name) for name, v in JAX_OPTIONS.items() if isinstance(v, bool))

# Options read once, when the devices are first listed: changing them later raises.
_BEFORE_DEVICES = frozenset({"num_cpu_devices"})


# ------------------------------------------------------------------ per-thread values
# JAX's context managers (``with jax.debug_nans(True):``) set an option for the running
# thread only; ``config.update`` sets the global value, which every thread without a
# context of its own sees (a new thread starts from the global values, not its parent's).

class _ThreadOverrides(threading.local):
    def __init__(self) -> None:
        self.values: dict[str, Any] = {}  # short name -> this thread's value


_overrides = _ThreadOverrides()


class _GlobalValues(dict):
    """The option table while no thread has a context active: a plain dict lookup (plax's
    hot paths read ``config._values["enable_x64"]`` directly)."""

    __slots__ = ()


class _ThreadedValues(dict):
    """The same table while some thread has a context active: a lookup sees the running
    thread's context value first. The table object switches between the two classes (same
    layout, so ``__class__`` may be assigned) rather than being replaced, because modules
    hold it; the slower lookup is paid only while a context is active somewhere."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        local = _overrides.values
        if key in local:
            return local[key]
        return dict.__getitem__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        local = _overrides.values
        if key in local:
            return local[key]
        return dict.get(self, key, default)


# JAX's words (jax._src.config.bool_env): a JAX_ variable JAX accepts, plax accepts
_TRUE_WORDS = ("1", "true", "yes", "on", "t", "y")
_FALSE_WORDS = ("0", "false", "no", "off", "f", "n")


def _invalid(name: str, raw: str, expected: str) -> str:
    """What is wrong with the value ``raw`` of environment variable ``name``: names it, the
    value and what is accepted (one wording for every setting plax reads)."""
    return f"invalid value {raw!r} for the environment variable {name}: expected {expected}"


def env_flag(name: str, default: bool) -> bool:
    """The boolean environment variable ``name``, read now: ``1``/``true``/``yes``/``on``
    (or ``t``/``y``) is True and ``0``/``false``/``no``/``off`` (or ``f``/``n``) False, JAX's
    words (any case, spaces around ignored); unset or empty gives ``default``. The one parse
    of plax's and its backends' on/off switches (``PLAX_CUDA_GRAPHS``, ``PLAX_NUMBA_SYNC``,
    ``JAX_ENABLE_X64``, ...).

    Args:
      name: the variable's name.
      default: the value when it is unset or empty.

    Returns:
      The flag.

    Raises:
      ValueError: any other value (as JAX's boolean variables raise), naming the variable
        and the accepted words.

    Example:
      >>> os.environ["PLAX_EXAMPLE_FLAG"] = " Off"
      >>> env_flag("PLAX_EXAMPLE_FLAG", True), env_flag("PLAX_UNSET_EXAMPLE_FLAG", True)
      (False, True)
      >>> del os.environ["PLAX_EXAMPLE_FLAG"]
    """
    raw = os.environ.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if not word:
        return default
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise ValueError(_invalid(name, raw, f"one of {', '.join(_TRUE_WORDS)} (on) or "
                                         f"{', '.join(_FALSE_WORDS)} (off)") + ", or leave it unset")


def env_number(name: str, default: float, *, kind: type = int, minimum: float | None = None,
               maximum: float | None = None, above: float | None = None,
               nan: bool = False, warn: bool = False) -> float:
    """The numeric environment variable ``name``, read now: parsed as ``kind`` (``int`` or
    ``float``; spaces around ignored); unset or empty gives ``default``. The one parse of
    plax's and its backends' numeric settings (``PLAX_NUMBA_WORKERS``,
    ``PLAX_COLLECTIVE_TIMEOUT``, ``JAX_NUM_CPU_DEVICES``, ...), as :func:`env_flag` is of the
    on/off ones and :func:`env_choice` of the named ones.

    Args:
      name: the variable's name.
      default: the value when it is unset or empty (returned as given, not checked).
      kind: ``int`` (decimal digits, an optional sign) or ``float`` (NaN only if ``nan``).
      minimum: the smallest value accepted, if any.
      maximum: the largest value accepted, if any.
      above: a bound the value must exceed, if any (``above=0``: positive).
      nan: a ``float`` may be NaN (``nan``, as JAX's float options take it; no bound then).
      warn: a bad value is named in a warning and gives ``default``, rather than raising:
        for settings read on a background thread, where an exception would read as a
        failure of the work it does (the numba backend's compile thread).

    Returns:
      The value, a ``kind``.

    Raises:
      ValueError: a value that does not parse as ``kind``, or one outside the bounds,
        naming the variable, the value and what is accepted (unless ``warn``).
      TypeError: a ``kind`` other than ``int`` or ``float``.

    Example:
      >>> os.environ["PLAX_EXAMPLE_COUNT"] = " 3"
      >>> env_number("PLAX_EXAMPLE_COUNT", 1), env_number("PLAX_UNSET_EXAMPLE", 0.5, kind=float)
      (3, 0.5)
      >>> env_number("PLAX_EXAMPLE_COUNT", 1, maximum=2)  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      ValueError: invalid value ' 3' for ... PLAX_EXAMPLE_COUNT: expected an integer at most 2, ...
      >>> del os.environ["PLAX_EXAMPLE_COUNT"]
    """
    if kind is not int and kind is not float:
        raise TypeError(f"env_number: kind must be int or float, not {kind!r}")
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = kind(raw.strip())
    except ValueError:
        value = None
    if nan and value is not None and value != value:
        return value
    if (value is not None and value == value  # (unparsable, or NaN: it compares with nothing)
            and (above is None or value > above) and (minimum is None or value >= minimum)
            and (maximum is None or value <= maximum)):
        return value
    bounds = [f"above {above}"] if above is not None else []
    bounds += [f"of at least {minimum}"] if minimum is not None else []
    bounds += [f"at most {maximum}"] if maximum is not None else []
    expected = "an integer" if kind is int else "a number"
    if bounds:
        expected += " " + " and ".join(bounds)
    message = _invalid(name, raw, expected)
    if not warn:
        raise ValueError(message + ", or leave it unset")
    import warnings
    warnings.warn(f"{message}; using {default}", stacklevel=2)
    return default


def _named_choice(word: str, choices: tuple, any_case: bool) -> Any:
    """The one of ``choices`` that ``word`` names: spelt exactly, or (``any_case``, the
    options of :data:`_ANY_CASE`) in any case; None if none. The one rule of an enum
    option's variable (:func:`env_choice`) and of ``config.update`` on it."""
    for choice in choices:
        if word == choice or (any_case and word.lower() == choice.lower()):
            return choice
    return None


def env_choice(name: str, default: Any, choices: tuple[str, ...], *,
               any_case: bool = False) -> Any:
    """The environment variable ``name`` that names one of ``choices``, read now (exactly
    as spelt, as JAX reads most of its enum options, or in any case; spaces around
    ignored); unset or empty gives ``default``.

    Args:
      name: the variable's name.
      default: the value when it is unset or empty.
      choices: the words accepted.
      any_case: a word is recognised in any case (``ON`` for ``on``).

    Returns:
      The word as ``choices`` spell it, or ``default``.

    Raises:
      ValueError: any other value, naming the variable, the value and the choices.

    Example:
      >>> os.environ["PLAX_EXAMPLE_MODE"] = "warn"
      >>> env_choice("PLAX_EXAMPLE_MODE", "allow", ("allow", "warn", "raise"))
      'warn'
      >>> os.environ["PLAX_EXAMPLE_MODE"] = "Warn"
      >>> env_choice("PLAX_EXAMPLE_MODE", "allow", ("allow", "warn", "raise"), any_case=True)
      'warn'
      >>> del os.environ["PLAX_EXAMPLE_MODE"]
    """
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    choice = _named_choice(raw.strip(), choices, any_case)
    if choice is not None:
        return choice
    raise ValueError(_invalid(name, raw, f"one of {', '.join(choices)}") + ", or leave it unset")


# short name -> the name JAX spells it with (``check_vma`` has no prefix)
_JAX_NAME = {_short(n): n for n in JAX_OPTIONS}


def env_names(name: str) -> tuple[str, ...] | None:
    """The environment variables option ``name`` starts from, the first set winning:
    ``PLAX_<NAME>``, then the one JAX reads, the option's JAX name in upper case
    (``JAX_ENABLE_X64``; ``CHECK_VMA`` for ``check_vma``, ``JAX2TF_...`` for the ``jax2tf_``
    options), then any other JAX reads too. None for an option JAX never reads from the
    environment (``jax_cpu_enable_async_dispatch``, ...).

    Example:
      >>> env_names("jax_enable_x64"), env_names("check_vma")
      (('PLAX_ENABLE_X64', 'JAX_ENABLE_X64'), ('PLAX_CHECK_VMA', 'CHECK_VMA'))
      >>> env_names("jax_sort_devices_by_process_index") is None
      True
    """
    short = _short(name)
    if short in _NOT_FROM_ENV:
        return None
    return ("PLAX_" + short.upper(), _JAX_NAME.get(short, name).upper(),
            *_MORE_ENV_NAMES.get(short, ()))


def _from_env(name: str, default: Any) -> Any:
    """The option's starting value: the first of :func:`env_names` that is set.

    A value that is not one the option takes raises ``ValueError`` naming the variable, as
    ``import jax`` does for its variable (every variable is checked, also those not used).
    Unlike JAX, an empty variable counts as unset, as for plax's own settings.
    """
    keys = env_names(name)
    if keys is None:
        return default
    found = []
    for key in keys:
        raw = os.environ.get(key)
        if raw is None or not raw.strip():  # unset or empty: the next variable, else the default
            continue
        if name in _BOOLS:
            found.append(env_flag(key, default))
        elif name in _ENUMS or name in _ENV_WORDS:
            found.append(env_choice(key, default, _ENV_WORDS.get(name) or _ENUMS[name][0],
                                    any_case=name in _ANY_CASE))
        elif isinstance(default, (int, float)):  # (bool is in _BOOLS)
            kind = type(default)
            found.append(env_number(key, default, kind=kind, nan=kind is float))
        else:
            found.append(raw.lower() if name in _LOWERED_FROM_ENV else raw)
    return found[0] if found else default


class Config:
    """The option table. Read an option as an attribute, set it with :meth:`update`.

    Example:
      >>> import plax
      >>> plax.config.update("jax_numpy_rank_promotion", "warn")
      >>> plax.config.jax_numpy_rank_promotion, plax.config.read("numpy_rank_promotion")
      ('warn', 'warn')
      >>> plax.config.update("jax_numpy_rank_promotion", "allow")
    """

    def __init__(self) -> None:
        # Keyed by the short name: plax's hot paths read ``config._values["enable_x64"]``.
        self._values: dict[str, Any] = _GlobalValues()
        self._contexts = 0  # contexts active, over all threads (see _ThreadedValues)
        self._contexts_lock = threading.Lock()
        for name, default in JAX_OPTIONS.items():
            short = _short(name)
            value = _from_env(short, default)  # (a bad value raises now, as in JAX)
            self._values[short] = default if short in _BEFORE_DEVICES else value
        self._listeners: list[Callable[[str, Any], None]] = []
        self._guards: dict[str, Callable[[str], None]] = {}
        self._updated: set[str] = set()  # options set with update(), not from the environment

    @staticmethod
    def _canonical(name: str) -> str:
        return _short(name)

    def _key(self, name: str) -> str:
        key = _short(name) if isinstance(name, str) else name
        if key not in self._values:
            raise AttributeError(f"Unrecognized config option: {name}")
        return key

    def update(self, name: str, value: Any) -> None:
        """Sets option ``name`` (``"jax_enable_x64"``, or ``"enable_x64"``) to ``value``.

        Args:
          name: a JAX 0.10.2 option name.
          value: its new value (booleans are converted with ``bool``).

        Raises:
          AttributeError: for a name JAX does not know.
          ValueError: for a value outside an enumerated option's choices.
          RuntimeError: for ``jax_num_cpu_devices`` once the devices have been listed.

        Example:
          >>> import plax
          >>> plax.config.update("jax_log_compiles", False)
        """
        key = self._key(name)
        value = self._checked(key, value)
        guard = self._guards.get(key)
        if guard is not None:
            guard(key)
        dict.__setitem__(self._values, key, value)
        self._updated.add(key)
        self._notify(key)

    @staticmethod
    def _checked(key: str, value: Any) -> Any:
        if key in _BOOLS:
            return bool(value)
        if key in _ENUMS:
            choices, none_ok = _ENUMS[key]
            if value is None and none_ok:
                return value
            if key in _ANY_CASE and isinstance(value, str):
                # (JAX looks these up by the enum member's name, in any case; every other
                # enum option takes its words exactly as spelt: "ALLOW" is refused)
                value = _named_choice(value, choices, True) or value
            if value not in choices:
                none = "None or " if none_ok else ""
                raise ValueError(f"Invalid value for jax_{key}: new enum value must be "
                                 f"{none}in {list(choices)}, got {value} of type "
                                 f"{type(value)}.")
            return value
        if key == "num_cpu_devices":
            try:
                return int(value)
            except (TypeError, ValueError):
                raise ValueError(f"jax_num_cpu_devices must be an integer, got {value!r}"
                                 ) from None
        return value

    def read(self, name: str) -> Any:
        """The value of option ``name`` (with or without the ``jax_`` prefix).

        Example:
          >>> import plax
          >>> plax.config.read("jax_numpy_rank_promotion")
          'allow'
        """
        return self._values[self._key(name)]

    def was_updated(self, name: str) -> bool:
        """Whether option ``name`` was set with :meth:`update` (rather than only read from the
        environment): such a setting wins over the environment, read again later.

        Example:
          >>> import plax
          >>> plax.config.was_updated("jax_xla_backend")
          False
        """
        return self._key(name) in self._updated

    @property
    def values(self) -> dict[str, Any]:
        """Every option's current value in the running thread, keyed by its JAX name (a new
        dict)."""
        local = _overrides.values
        return {_JAX_NAME[k]: local.get(k, v) for k, v in dict.items(self._values)}

    def has_thread_contexts(self) -> bool:
        """Whether some thread has an option set by a context manager now: caches derived
        from the options (jit's cache key, the dtype-promotion mode) must then be computed
        per thread.

        Example:
          >>> import plax
          >>> with plax.debug_nans(True):
          ...     plax.config.has_thread_contexts()
          True
        """
        return self._contexts > 0

    def on_change(self, listener: Callable[[str, Any], None]) -> None:
        """Registers ``listener(name, value)`` to run whenever an option changes (``name``
        without the ``jax_`` prefix), globally or in a thread (a context manager beginning or
        ending): ``value`` is what the running thread sees. A listener that caches something
        derived from options must not cache it across threads while
        :meth:`has_thread_contexts` is true."""
        self._listeners.append(listener)

    def guard(self, name: str, check: Callable[[str], None]) -> None:
        """Registers ``check(name)``, run before option ``name`` changes; it raises to refuse
        the change (the devices module refuses ``jax_num_cpu_devices`` once devices exist)."""
        self._guards[self._key(name)] = check

    @contextlib.contextmanager
    def override(self, name: str, value: Any) -> Iterator[None]:
        """Sets an option inside a ``with`` block, for the running thread only, as JAX's
        context managers do: other threads keep seeing the global value (and their own
        contexts), and threads started inside the block start from the global value.
        ``update`` inside the block changes the global value; the block's value still wins
        in this thread until it ends.

        Example:
          >>> import plax
          >>> with plax.config.override("jax_numpy_rank_promotion", "raise"):
          ...     plax.config.jax_numpy_rank_promotion
          'raise'
        """
        key = self._key(name)
        value = self._checked(key, value)
        guard = self._guards.get(key)
        if guard is not None:
            guard(key)
        local = _overrides.values
        had, old = key in local, local.get(key)
        with self._contexts_lock:
            self._contexts += 1
            self._values.__class__ = _ThreadedValues
        local[key] = value
        self._notify(key)
        try:
            yield
        finally:
            if had:
                local[key] = old
            else:
                del local[key]
            with self._contexts_lock:
                self._contexts -= 1
                if not self._contexts:
                    self._values.__class__ = _GlobalValues
            self._notify(key)

    def _notify(self, key: str) -> None:
        value = self._values[key]
        for listener in self._listeners:
            listener(key, value)

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values")
        if values is None or name.startswith("__"):
            raise AttributeError(name)
        if name == "x64_enabled":
            return values["enable_x64"]
        key = _short(name)
        if key in values:
            return values[key]
        raise AttributeError(f"'Config' object has no attribute {name!r}")

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(_JAX_NAME.values()))


config = Config()


def _context(name: str, doc: str, default_arg: bool = True):
    """A JAX-style context manager for one option: ``with plax.debug_nans(True): ...``."""
    if default_arg:
        def manager(new_val: Any = True) -> contextlib.AbstractContextManager:
            return config.override(name, new_val)
    else:
        def manager(new_val: Any) -> contextlib.AbstractContextManager:
            return config.override(name, new_val)
    manager.__name__ = manager.__qualname__ = name
    manager.__doc__ = doc
    return manager


enable_x64 = _context("enable_x64", """Context manager that turns 64-bit types on (or off)
    inside its block.

    Example:
      >>> import plax
      >>> with plax.enable_x64():
      ...     plax.numpy.ones(1).dtype
      dtype('float64')
    """)
debug_nans = _context("debug_nans", """Inside the block, an operation (eager, or a ``jit``
    call run again op by op to find it) that produces a NaN raises ``FloatingPointError``.

    Example:
      >>> import plax
      >>> with plax.debug_nans(True):
      ...     plax.numpy.log(-1.0)  # doctest: +SKIP
      FloatingPointError: invalid value (nan) encountered in log
    """)
debug_infs = _context("debug_infs", """As :func:`debug_nans`, for infinities.

    Example:
      >>> import plax
      >>> with plax.debug_infs(True):
      ...     plax.numpy.ones(2) / 0  # doctest: +SKIP
      FloatingPointError: invalid value (inf) encountered in div
    """)
enable_checks = _context("enable_checks", """Inside the block, ``jit`` type-checks every jaxpr
    it traces (slower; for debugging plax itself).

    Example:
      >>> import plax
      >>> with plax.enable_checks(True):
      ...     plax.jit(lambda x: x + 1)(1.0)
      Array(2., dtype=float32, weak_type=True)
    """)
log_compiles = _context("log_compiles", """Inside the block, ``jit`` logs (``logging``,
    level WARNING) each function it traces and compiles, with its argument types.

    Example:
      >>> import plax
      >>> with plax.log_compiles():
      ...     _ = plax.jit(lambda x: x + 1)(1.0)  # doctest: +SKIP
    """)
explain_cache_misses = _context("explain_cache_misses", """Inside the block, ``jit`` logs
    (``logging``, level WARNING) why it traces a function again: which argument's shape,
    dtype, weak type, static value or tree structure changed.

    Example:
      >>> import plax
      >>> with plax.explain_cache_misses():
      ...     _ = plax.jit(lambda x: x + 1)(1.0)  # doctest: +SKIP
    """)
numpy_rank_promotion = _context("numpy_rank_promotion", """Inside the block, NumPy-style
    rank promotion of ``plax.numpy`` operands is ``"allow"``-ed, ``"warn"``-ed about or
    ``"raise"``-s ``ValueError``.

    Example:
      >>> import plax
      >>> with plax.numpy_rank_promotion("raise"):
      ...     plax.numpy.ones(3) + plax.numpy.ones((2, 3))  # doctest: +SKIP
      ValueError: Operands could not be broadcast together for add on shapes (3,) (2, 3) ...
    """, default_arg=False)
numpy_dtype_promotion = _context("numpy_dtype_promotion", """Inside the block, implicit dtype
    promotion is JAX's ``"standard"`` lattice or ``"strict"`` (only Python scalars of a lower
    kind promote; anything else raises ``TypePromotionError``).

    Example:
      >>> import plax
      >>> with plax.numpy_dtype_promotion("strict"):
      ...     (plax.numpy.ones(2) + 1).dtype
      dtype('float32')
    """, default_arg=False)
default_matmul_precision = _context("default_matmul_precision", """Inside the block, the
    precision of matrix products that pass no ``precision=``, recorded in ``dot_general``
    as JAX records it (the CPU backends compute float32 products in float32 whatever is
    asked, as XLA's CPU backend; the CuPy backend selects TF32 or bfloat16 tensor-core math:
    see docs/config.md).

    Example:
      >>> import plax
      >>> with plax.default_matmul_precision("float32"):
      ...     plax.numpy.dot(plax.numpy.ones(2), plax.numpy.ones(2))
      Array(2., dtype=float32)
    """, default_arg=False)
default_prng_impl = _context("default_prng_impl", """Inside the block, the PRNG
    implementation new keys use (plax implements ``"threefry2x32"``).""", default_arg=False)
threefry_partitionable = _context("threefry_partitionable", """Inside the block, threefry
    random bits are generated in JAX's partitionable layout (True, the default) or the older
    one (False).

    Example:
      >>> import plax
      >>> with plax.threefry_partitionable(False):
      ...     int(plax.random.bits(plax.random.key(0), ()))  # doctest: +SKIP
    """)


# JAX's other top-level context managers, one per option (``with jax.transfer_guard("log"):``):
# plax stores the value for the block (docs/config.md says which options do something).
_MORE_CONTEXTS = {
    "enable_custom_prng": "enable_custom_prng", "softmax_custom_jvp": "softmax_custom_jvp",
    "legacy_prng_key": "legacy_prng_key", "debug_key_reuse": "debug_key_reuse",
    "check_tracer_leaks": "check_tracer_leaks", "checking_leaks": "check_tracer_leaks",
    "transfer_guard": "transfer_guard", "transfer_guard_host_to_device":
    "transfer_guard_host_to_device", "transfer_guard_device_to_device":
    "transfer_guard_device_to_device", "transfer_guard_device_to_host":
    "transfer_guard_device_to_host", "no_tracing": "no_tracing", "no_execution": "no_execution",
    "thread_guard": "thread_guard", "allow_f16_reductions": "allow_f16_reductions",
    "array_garbage_collection_guard": "array_garbage_collection_guard",
    "auto_pcast": "auto_pcast", "remove_size_one_mesh_axis_from_type":
    "remove_size_one_mesh_axis_from_type",
    "jax2tf_associative_scan_reductions": "jax2tf_associative_scan_reductions",
}


def context_manager(name: str):
    """The context manager JAX names ``name`` (``"transfer_guard"``), for ``plax.<name>``.

    Example:
      >>> import plax
      >>> with plax.transfer_guard("log"):
      ...     plax.config.jax_transfer_guard
      'log'
    """
    option = _MORE_CONTEXTS[name]
    return _context(option, f"""Sets the option ``jax_{option}`` inside a ``with`` block
    (stored for JAX compatibility; see docs/config.md for what plax does with it).""",
                    default_arg=option not in ("transfer_guard", "transfer_guard_host_to_device",
                                               "transfer_guard_device_to_device",
                                               "transfer_guard_device_to_host",
                                               "array_garbage_collection_guard"))
