"""Import cost of plax beside JAX's: CPU and wall time of ``import plax`` in fresh interpreters.

    python benchmarks/import_time.py

Prints the best of several fresh-interpreter imports (bytecode cached, as for an installed
package), for plax and for jax when it is installed. Run it with plax installed
(``pip install -e .``). ``import plax`` loads no backend and uses no device, so none is named.
"""
from __future__ import annotations

import json
import subprocess
import sys

_CODE = """
import json, time
wall, cpu = time.perf_counter(), time.process_time()
import {module}
print(json.dumps([time.perf_counter() - wall, time.process_time() - cpu]))
"""


def measure(module: str, runs: int = 7) -> tuple[float, float] | None:
    samples = []
    for _ in range(runs + 1):  # the first run writes the bytecode cache
        proc = subprocess.run([sys.executable, "-c", _CODE.format(module=module)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            return None
        samples.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    samples = samples[1:]
    return min(s[0] for s in samples), min(s[1] for s in samples)


def main() -> None:
    print("import only: no backend is loaded and no device is used")
    print(f"{'module':<8} {'wall (ms)':>10} {'cpu (ms)':>10}")
    for module in ("numpy", "plax", "jax"):
        result = measure(module)
        if result is None:
            print(f"{module:<8} {'not installed':>21}")
            continue
        wall, cpu = result
        print(f"{module:<8} {wall * 1e3:>10.1f} {cpu * 1e3:>10.1f}")


if __name__ == "__main__":
    main()
