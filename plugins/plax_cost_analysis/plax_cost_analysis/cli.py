"""``python -m plax cost MODULE:FUNC [--shape f32[3,4] ...] [--json]``: the cost of a function.

The core's ``python -m plax`` passes the ``cost`` subcommand to :func:`main`, which this
plugin exports as ``cli.cost``.
"""
from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from typing import Any, Callable

_SHAPE = re.compile(r"^\s*([a-z]+[0-9]*)\s*\[\s*([0-9,\s]*)\]\s*$")
_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
           "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
           "u16": "uint16", "u32": "uint32", "u64": "uint64", "bool": "bool",
           "c64": "complex64", "c128": "complex128"}


def parse_shape(text: str):
    """A ``ShapeDtypeStruct`` from jaxpr-style text.

    Example:
      >>> parse_shape("f32[3,4]")
      ShapeDtypeStruct(shape=(3, 4), dtype=float32)
      >>> parse_shape("i32[]")
      ShapeDtypeStruct(shape=(), dtype=int32)

    Raises:
      ValueError: for text that is not ``DTYPE[DIMS]`` with a known dtype.
    """
    import plax
    from plax import numpy as jnp
    match = _SHAPE.match(text)
    if match is None or match.group(1) not in _DTYPES:
        raise ValueError(f"bad --shape {text!r}: expected DTYPE[DIMS] such as f32[3,4] or "
                         f"i32[] with DTYPE one of {', '.join(_DTYPES)}")
    dims = tuple(int(d) for d in match.group(2).replace(" ", "").split(",") if d)
    return plax.ShapeDtypeStruct(dims, getattr(jnp, _DTYPES[match.group(1)]))


def load_function(spec: str) -> Callable:
    """The function named by ``MODULE:FUNC`` (``FUNC`` may be dotted: ``pkg.mod:Class.method``).

    Raises:
      ValueError: when ``spec`` has no colon, or the module or attribute cannot be found.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected MODULE:FUNC (e.g. mypkg.models:loss), got {spec!r}")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"cannot import module {module_name!r}: {err}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise ValueError(f"{spec} is not callable")
    return obj


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m plax cost",
        description="Print the XLA-style cost (flops, transcendentals, bytes accessed) of "
                    "jit(FUNC) for arguments of the given shapes, without running it.")
    parser.add_argument("function", metavar="MODULE:FUNC", help="the function, e.g. mymod:loss")
    parser.add_argument("--shape", action="append", default=[], metavar="DTYPE[DIMS]",
                        help="one positional argument's type, e.g. f32[3,4] (repeat per argument)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser


def main(argv: list[str]) -> int:
    """Runs ``python -m plax cost``; ``argv`` are the arguments after ``cost``.

    Returns:
      0 on success, 1 when the function cannot be loaded or traced, 2 for bad usage.

    Example:
      $ python -m plax cost mymod:predict --shape f32[128,784] --shape f32[784,10]
      flops                 2,007,040
      ...
    """
    parser = _parser()
    try:
        opts = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits on --help (0) and on bad usage (2)
        return int(exit_.code or 0)
    try:
        args = [parse_shape(s) for s in opts.shape]
    except ValueError as err:
        print(f"python -m plax cost: {err}", file=sys.stderr)
        return 2
    if "" not in sys.path:
        sys.path.insert(0, "")  # MODULE may be a file in the current directory, as with -m
    try:
        fun = load_function(opts.function)
    except ValueError as err:
        print(f"python -m plax cost: {err}", file=sys.stderr)
        return 1
    from plax_cost_analysis import cost_analysis  # (loads the rules)
    try:
        result = cost_analysis(fun, *args)
    except Exception as err:  # noqa: BLE001 -- a user's function failing to trace
        print(f"python -m plax cost: tracing {opts.function} with arguments "
              f"{[s for s in opts.shape]} failed: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    if opts.json:
        print(json.dumps({"function": opts.function, "cost": dict(result),
                          "uncounted": list(result.uncounted)}))
        return 0
    print(format_table(opts.function, opts.shape, result))
    return 0


def format_table(name: str, shapes: list[str], result) -> str:
    """The human-readable report: one line per key, then the primitives counted by bytes only."""
    width = max(len(k) for k in result)
    lines = [f"cost of {name}({', '.join(shapes)}):"]
    for key, value in result.items():
        shown = f"{int(value):,}" if float(value).is_integer() else f"{value:,.1f}"
        lines.append(f"  {key:<{width}}  {shown:>15}")
    if result.uncounted:
        lines.append("  bytes only (no cost rule): " + ", ".join(result.uncounted))
    return "\n".join(lines)
