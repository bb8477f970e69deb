"""``python -m plax info``: what plugins, backends and devices plax found."""
from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] not in ("info",):
        print("usage: python -m plax info", file=sys.stderr)
        return 2
    import plax
    from plax import plugins
    print(f"plax {plax.__version__}")
    print(plugins.info())
    print(f"default backend: {plax.default_backend()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
