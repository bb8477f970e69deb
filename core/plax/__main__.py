"""``python -m plax info``: what plugins, backends and devices plax found."""
from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """Runs the command line; returns the exit status.

    Args:
      argv: ``sys.argv``; the only command is ``info``.

    Returns:
      0 on success, 1 when the environment selects nothing usable, 2 for bad usage.
    """
    if len(argv) != 2 or argv[1] not in ("info",):
        print("usage: python -m plax info", file=sys.stderr)
        return 2
    import plax
    from plax import plugins
    print(f"plax {plax.__version__}")
    print(plugins.info())
    try:
        print(f"default backend: {plax.default_backend()} "
              f"(runs on {plax.devices()[0]!r} with {plax.devices()[0].backend.name!r})")
    except RuntimeError as err:
        print(f"default backend: none ({err})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
