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
    flags = {a for a in args[1:]}
    if not args or args[0] != "info" or not flags <= {"-v", "--verbose"}:
        print(USAGE, file=sys.stderr)
        return 2
    import plax
    from plax import plugins
    print(f"plax {plax.__version__}")
    print(plugins.info(verbose=bool(flags)))
    try:
        device = plax.devices()[0]
        reason = plugins.registry().default_reason()
        print(f"default backend: {plax.default_backend()} "
              f"(runs on {device!r} with {device.backend.name!r}; {reason})")
    except RuntimeError as err:
        print(f"default backend: none ({err})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
