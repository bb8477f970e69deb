"""Records JAX's dtype-promotion tables (see promotion_tables.py) into jax_promotion_table.json.

    python tests/record_jax_promotion.py      # needs real JAX (CPU is enough)
"""
from __future__ import annotations

import json

import jax

from promotion_tables import RECORDING, tables


def main() -> None:
    data = {"jax_version": jax.__version__, "tables": tables(jax)}
    RECORDING.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    print(f"recorded JAX {jax.__version__}'s promotion tables in {RECORDING}")


if __name__ == "__main__":
    main()
