"""``plax.debug``: printing and callbacks that run when a program runs, not when it is traced.

Under ``jit`` they print once per call (never at trace time, and a cached program prints
again each time it runs); under ``vmap`` once per batch member, in order; under ``grad``
they see the primal values.
"""
from __future__ import annotations

import builtins
import re
import string
from typing import Any, Callable

import numpy as np

from plax.debugger import breakpoint  # noqa: A004 (JAX's name)
from plax.lax.callbacks import debug_callback as _debug_callback

__all__ = ["breakpoint", "callback", "log", "print", "visualize_array_sharding",
           "visualize_sharding", "inspect_array_sharding"]


def callback(callback: Callable[..., Any] | None = None, *args: Any, ordered: bool = False,
             partitioned: bool = False, **kwargs: Any) -> Callable[..., None] | None:
    """Calls ``callback(*args, **kwargs)`` on the host each time the program runs.

    The array leaves of ``args`` and ``kwargs`` reach ``callback`` as plax Arrays with their
    run-time values; other leaves (strings, ...) as they were given. What ``callback``
    returns is ignored. The call survives ``jit`` (it is an effectful primitive that
    dead-code elimination keeps), runs once per batch member under ``vmap`` and sees primal
    values under differentiation.

    As in JAX, the options may come first: ``callback(ordered=True)(fn, *args)``.

    Args:
      callback: the host function (None: return a function taking it and its arguments).
      *args: its positional arguments (pytrees).
      **kwargs: its keyword arguments (pytrees).
      ordered: keep the calls in program order (plax runs callbacks in program order
        anyway). A program run on several devices refuses it, as JAX does.
      partitioned: in a ``jit`` of explicitly sharded arguments, call ``callback`` on each
        device with that device's blocks of the operands (its local shards), as JAX does,
        instead of once on the whole (gathered) operands. Outside such a program it changes
        nothing: one call on the whole values.

    Returns:
      None; with ``callback`` left out, the function that makes the call.

    Raises:
      TypeError: ``callback`` is not callable, or the two-call form's first call is given
        arguments other than the options.
      ValueError: (when the program runs) ``ordered=True`` in a program run on more than one
        device.

    Example:
      >>> seen = []
      >>> _ = plax.jit(lambda x: plax.debug.callback(seen.append, x * 2) or x)(1.0)
      >>> seen
      [Array(2., dtype=float32)]
    """
    if callback is None:
        if args or kwargs:
            raise TypeError("debug_callback received unexpected arguments in the two-call "
                            f"form: {args=} {kwargs=}")

        def with_options(fn: Callable[..., Any], *a: Any, **k: Any) -> None:
            _debug_callback(fn, *a, ordered=ordered, partitioned=partitioned, **k)
        return with_options
    _debug_callback(callback, *args, ordered=ordered, partitioned=partitioned, **kwargs)
    return None


class _FormatChecker(string.Formatter):
    """Checks a debug print's template against its arguments when it is traced, as JAX does:
    a missing field raises KeyError/IndexError, an argument the template never uses raises
    ValueError (often an f-string passed by mistake). Nothing is formatted: only each field's
    argument is looked up, not its attributes or items, so no array work is staged."""

    def get_field(self, field_name, args, kwargs):
        first = re.match(r"[^.\[]*", field_name).group(0)  # the argument, before .attr or [i]
        key = int(first) if first.isdigit() else first
        return self.get_value(key, args, kwargs), key

    def format_field(self, value, format_spec):
        return ""

    def check_unused_args(self, used_args, args, kwargs):
        unused_args = [a for i, a in enumerate(args) if i not in used_args]
        unused_kwargs = [k for k in kwargs if k not in used_args]
        if unused_args:
            raise ValueError(f"Unused positional arguments to `jax.debug.print`: {unused_args}")
        if unused_kwargs:
            raise ValueError(f"Unused keyword arguments to `jax.debug.print`: {unused_kwargs}. "
                             "You may be passing an f-string (i.e, `f\"{x}\"`) into "
                             "`jax.debug.print` and instead should pass in a regular string.")


def _check_format(fmt: str, args: tuple, kwargs: dict) -> None:
    """JAX's trace-time check of a debug print's template (see :class:`_FormatChecker`), made
    as JAX makes it for every template: one without replacement fields (``"loss"``) given an
    argument raises too, rather than printing without it."""
    _FormatChecker().format(fmt, *args, **kwargs)


def _has_placeholders(fmt: str) -> bool:
    """Whether a debug print formats its template, as JAX 0.10 decides it: by the template's
    first piece only. ``"{x} and {y}"`` and ``"x: {}"`` start with (or lead up to) a field;
    ``"loss"``, ``""`` and ``"{{}} {}"`` (its first piece is the literal ``"{"``) do not, and
    such a template is printed as it is, followed by the arguments."""
    first = next(iter(string.Formatter().parse(fmt)), None) if fmt else None
    return first is not None and first[1] is not None


def _formatter(fmt: str, options: dict, name: str) -> Callable[..., str]:
    """The run-time message of a debug print or log: ``fmt.format(*args, **kwargs)`` under
    NumPy's print options of trace time when the template has placeholders (see
    :func:`_has_placeholders`), else, as JAX prints it, the template and the ``str`` of each
    positional argument joined by spaces. ``name``: ``"print"`` or ``"log"``, for its error."""
    if _has_placeholders(fmt):
        def message(*a, **k):
            with np.printoptions(**options):
                return fmt.format(*a, **k)
        return message

    def unformatted(*a, **k):
        if k:  # JAX stages such a call too and fails when it runs (its callback asserts)
            raise ValueError(f"`jax.debug.{name}` of the template {fmt!r}, whose first piece "
                             "is not a replacement field, prints its positional arguments "
                             f"after it and takes no keyword arguments; got {sorted(k)}: pass "
                             "them positionally, or begin the template with a field")
        return " ".join((fmt, *(str(v) for v in a)))
    return unformatted


def print(fmt: str, *args: Any, ordered: bool = False, partitioned: bool = False,
          skip_format_check: bool = False, **kwargs: Any) -> None:
    """Prints ``fmt.format(*args, **kwargs)`` with the run-time values of the arrays.

    Arrays print as JAX prints them (``str`` of an Array is NumPy's, so ``{}`` of a vector
    gives ``[0. 1. 2.]`` and a format spec such as ``{:.2f}`` applies to scalars), with
    NumPy's print options as they were when the function was traced. As in JAX, a template
    whose first piece is not a replacement field (``"loss"``, ``"{{}} {}"``) is not
    formatted: it prints as written, followed by the positional arguments, space-separated
    (so only ``skip_format_check=True`` lets such a call have arguments, unless the template
    has fields later).

    Args:
      fmt: a ``str.format`` template.
      *args: the positional values to format (pytrees of arrays and other values).
      **kwargs: the keyword values to format.
      ordered: keep the prints in program order.
      partitioned: in a ``jit`` of explicitly sharded arguments, print each device's local
        shards instead of the gathered values (as :func:`callback`'s ``partitioned``).
      skip_format_check: do not check ``fmt`` against the arguments when tracing (JAX's
        check: a missing field raises KeyError/IndexError, an unused argument ValueError).

    Example:
      >>> _ = plax.jit(lambda x: plax.debug.print("x = {x}", x=x) or x)(1.0)
      x = 1.0
    """
    if not isinstance(fmt, str):
        raise TypeError(f"debug.print fmt must be a string, got {type(fmt).__name__}")
    if not skip_format_check:
        _check_format(fmt, args, kwargs)
    options = np.get_printoptions()
    message = _formatter(fmt, options, "print")

    def _print(*a, **k):
        builtins.print(message(*a, **k))

    _print.__name__ = "debug_print"
    _print.printed_as = _debug_print_equation(fmt, options)
    _debug_callback(_print, *args, ordered=ordered, partitioned=partitioned, **kwargs)


def _debug_print_equation(fmt: str, options: dict, record: Any = None) -> Callable:
    """How a :func:`print` (or :func:`log`, whose ``record`` is the log record it fills in)
    staged into a jaxpr prints: JAX 0.10's ``debug_print`` equation with its parameters (the
    format, whether it has a replacement field first, the tree of ``(args, kwargs)``, the
    log record, the static leaves by position, and NumPy's print options)."""
    has_placeholders = _has_placeholders(fmt)

    def printed_as(cb: Any, params: dict) -> tuple[str, dict]:
        static_args = tuple((i, s[0]) for i, s in enumerate(cb.static) if s is not None)
        return "debug_print", {
            "fmt": fmt, "has_placeholders": has_placeholders, "in_tree": cb.in_tree,
            "logging_record": record, "np_printoptions": tuple(options.items()),
            "ordered": params["ordered"], "partitioned": cb.partitioned,
            "static_args": static_args}

    return printed_as


#: the logger :func:`log` writes to: JAX's name for it, which users' logging configurations
#: (levels, filters, handlers) select
LOG_LOGGER = "jax._src.debugging"


def log(fmt: str, *args: Any, ordered: bool = False, partitioned: bool = False,
        skip_format_check: bool = False, **kwargs: Any) -> None:
    """As :func:`print`, through the ``logging`` module: each time the program runs, an INFO
    record of the ``"jax._src.debugging"`` logger (the name JAX's ``jax.debug.log`` logs
    under, so a logging configuration written for JAX applies) whose message is
    ``fmt.format(*args, **kwargs)`` and whose source location is the line that called ``log``.

    Args:
      fmt: a ``str.format`` template.
      *args: the positional values to format (pytrees of arrays and other values).
      **kwargs: the keyword values to format.
      ordered: keep the records in program order.
      partitioned, skip_format_check: as for :func:`print`.

    Example:
      >>> import logging
      >>> plax.debug.log("x = {}", jnp.arange(2.0))  # an INFO record of "jax._src.debugging"
    """
    import logging
    import sys
    if not isinstance(fmt, str):
        raise TypeError(f"debug.log fmt must be a string, got {type(fmt).__name__}")
    if not skip_format_check:
        _check_format(fmt, args, kwargs)
    options = np.get_printoptions()
    message = _formatter(fmt, options, "log")
    import copy
    caller = sys._getframe(1)
    logger = logging.getLogger(LOG_LOGGER)
    # As JAX: the record (source location of the call) is made once, when the call is traced,
    # and each run hands a copy of it with the formatted message to the logger. It is also
    # what the staged ``debug_print`` equation shows as ``logging_record``.
    record = logger.makeRecord(logger.name, logging.INFO, caller.f_code.co_filename,
                               caller.f_lineno, "", (), None, func=caller.f_code.co_name)

    def _log(*a, **k):
        if not logger.isEnabledFor(logging.INFO):
            return
        filled = copy.copy(record)
        filled.msg = message(*a, **k)
        logger.handle(filled)

    _log.__name__ = "debug_log"
    _log.printed_as = _debug_print_equation(fmt, options, record)
    _debug_callback(_log, *args, ordered=ordered, partitioned=partitioned, **kwargs)


def visualize_array_sharding(arr: Any, *, use_color: bool = False, scale: float = 1.0,
                             min_width: int = 9, max_width: int = 80, color_map=None) -> None:
    """Prints which device holds which block of a rank-1 or rank-2 array, as the table JAX
    0.10 prints (one cell per block, sized by the block, naming the devices that hold it;
    see :mod:`plax.sharding_visualize`).

    Args:
      arr: a plax Array.
      use_color: accepted for JAX compatibility (plax prints the table JAX prints on a
        terminal without colours).
      scale: the table's height in units of 10 lines.
      min_width, max_width: the bounds of a cell's width, in columns.
      color_map: as for :func:`visualize_sharding` (JAX forwards these keywords to it).

    Example:
      >>> plax.debug.visualize_array_sharding(jnp.ones(4))
      ┌───────┐
      │ CPU 0 │
      └───────┘
    """
    visualize_sharding(np.shape(arr), arr.sharding, use_color=use_color, scale=scale,
                       min_width=min_width, max_width=max_width, color_map=color_map)


def visualize_sharding(shape, sharding, *, use_color: bool = False, scale: float = 1.0,
                       min_width: int = 9, max_width: int = 80, color_map=None) -> None:
    """Prints the table of :func:`visualize_array_sharding` for an array of ``shape`` placed
    by ``sharding`` (``color_map`` is accepted for JAX compatibility)."""
    from plax.sharding_visualize import sharding_table
    builtins.print(sharding_table(shape, sharding, scale=scale, min_width=min_width,
                                  max_width=max_width))


def inspect_array_sharding(value: Any, *, callback) -> None:
    """Calls ``callback`` with the sharding of each array of the pytree ``value`` (JAX's
    ``jax.debug.inspect_array_sharding``).

    Eagerly the callback gets each array's ``.sharding``. Under a trace it gets the
    explicit sharding of the traced value's type, when it has one, at trace time (JAX calls
    it when the program is lowered, with the sharding its partitioner chose; plax's ``jit``
    does not choose any other), and is not called for a value without one.

    Args:
      value: an array, or a pytree of arrays.
      callback: ``callback(sharding)``, called once per array.

    Returns:
      None.

    Example:
      >>> plax.debug.inspect_array_sharding(jnp.ones(2), callback=builtins.print)
      SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)
    """
    from plax import tree_util
    from plax.core.trace import Tracer
    for leaf in tree_util.tree_leaves(value):
        if isinstance(leaf, Tracer):
            sharding = getattr(leaf.aval, "sharding", None)
            if sharding is not None:
                callback(sharding)
        else:
            callback(leaf.sharding)
