"""``python -m plax info [-v]``: what plugins, backends and devices plax found."""
from __future__ import annotations

import sys

USAGE = "usage: python -m plax info [-v|--verbose]"


def main(argv: list[str]) -> int:
    """Runs the command line; returns the exit status.

    Args:
      argv: ``sys.argv``; the only command is ``info``, whose ``-v`` (``--verbose``) adds the
        traceback of every plugin that failed to load.

    Returns:
      0 on success, 1 when the environment selects nothing usable, 2 for bad usage.
    """
    args = argv[1:]
    if args and args[0] != "info" and not args[0].startswith("-"):
        return run_plugin_command(args[0], args[1:])
    flags = {a for a in args[1:]}
    if not args or args[0] != "info" or not flags <= {"-v", "--verbose"}:
        print(USAGE, file=sys.stderr)
        return 2
    import plax
    from plax import plugins
    print(f"plax {plax.__version__}")
    print(plugins.info(verbose=bool(flags)))
    for line in backend_info_lines(plugins.registry()):
        print(line)
    try:
        device = plax.devices()[0]
        reason = plugins.registry().default_reason()
        print(f"default backend: {plax.default_backend()} "
              f"(runs on {device!r} with {device.backend.name!r}; {reason})")
    except RuntimeError as err:
        print(f"default backend: none ({err})")
        return 1
    return 0


def backend_info_lines(registry) -> list[str]:
    """One line per backend that describes itself through ``Backend.info()`` (a dict of
    label -> value: the Numba backend reports its Numba version, threading layer and thread
    count); a backend whose ``info`` fails is reported, not fatal."""
    lines = []
    for name in sorted(registry.backends):
        info = getattr(registry.backends[name], "info", None)
        if not callable(info):
            continue
        try:
            facts = info()
        except Exception as err:  # noqa: BLE001 - info is for people; never fatal
            lines.append(f"backend {name}: info() failed: {type(err).__name__}: {err}")
            continue
        if facts:
            lines.append(f"backend {name}: " + ", ".join(f"{k} {v}" for k, v in facts.items()))
    return lines


def run_plugin_command(name: str, args: list[str]) -> int:
    """Runs ``python -m plax NAME ARGS...`` where a plugin provides the command: its hook
    exports a callable ``cli.NAME`` (``{"cli.cost": main}``), called with the remaining
    arguments and returning the exit status.

    Returns:
      The command's exit status; 2, with a message saying which package provides the
      command (or which are available), when no plugin provides it.
    """
    from plax import plugins
    try:
        command = plugins.lookup(f"cli.{name}")
    except AttributeError as err:
        known = sorted(k[len("cli."):] for k in plugins.registry().exports if k.startswith("cli."))
        message = str(err) if f"cli.{name}" in plugins.KNOWN_PROVIDERS else \
            f"unknown command {name!r}"
        print(f"{USAGE}\n{message}. Commands: {', '.join(['info'] + known)}.", file=sys.stderr)
        return 2
    return int(command(list(args)) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
