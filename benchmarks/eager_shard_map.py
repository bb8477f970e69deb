"""Per-call cost of an eager ``shard_map`` (called with arrays, outside ``jit``): its body
runs op by op on each device, as JAX 0.10 runs it. plax (the plax-pmap plugin) beside JAX,
each in its own child interpreter with 4 CPU devices, in one run.

    python benchmarks/eager_shard_map.py [--devices 4] [--size 4096] [--repeat 20]

The body is five ``sin(x) * 2 + 1`` steps then a ``psum`` over the mesh axis, on a float32
vector of ``--size`` elements split over the devices. Times are the best of ``--repeat``
runs of up to 10 calls (milliseconds per call, outputs waited for); plax/JAX below 1 means plax is
faster. The input already lives on the devices.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def _measure(lib: str, ndev: int, size: int, repeat: int) -> dict:
    if lib == "jax":
        import jax
        jax.config.update("jax_num_cpu_devices", ndev)
    else:
        import plax as jax
    jnp, P = jax.numpy, jax.P
    mesh = jax.make_mesh((ndev,), ("i",))

    def body(b):
        for _ in range(5):
            b = jnp.sin(b) * 2 + 1
        return jax.lax.psum(b, "i")

    f = jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P())
    x = jax.device_put(jnp.arange(size, dtype=jnp.float32) / size,
                       jax.NamedSharding(mesh, P("i")))
    jax.block_until_ready(f(x))
    t0 = time.perf_counter()
    jax.block_until_ready(f(x))
    # up to 10 calls a run (fewer where one call is slow), so a run takes about 0.2 s
    number = max(1, min(10, int(0.2 / (time.perf_counter() - t0))))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            out = f(x)
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - t0) / number)
    return {"eager_shard_map": best}


def _child(lib: str, args) -> dict:
    env = dict(os.environ)
    if lib == "plax":
        env["PLAX_NUM_CPU_DEVICES"] = str(args.devices)
        env["PLAX_PLATFORMS"] = "cpu"
    else:
        env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib, "--devices",
           str(args.devices), "--size", str(args.size), "--repeat", str(args.repeat)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{lib} worker failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--worker", choices=["plax", "jax"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(_measure(args.worker, args.devices, args.size, args.repeat)))
        return
    p = _child("plax", args)
    try:
        j = _child("jax", args)
    except RuntimeError as err:  # JAX is optional
        print(f"(JAX not timed: {str(err).splitlines()[0]})")
        j = None
    label = (f"eager shard_map, {args.devices} devices, {args.size} float32, "
             "5x sin*2+1 + psum")
    print(f"{'case':60s} {'plax ms':>9s} {'JAX ms':>9s} {'plax/JAX':>9s}")
    tp = p["eager_shard_map"]
    tj = j["eager_shard_map"] if j else None
    print(f"{label:60s} {tp * 1e3:9.3f} "
          + (f"{tj * 1e3:9.3f} {tp / tj:9.2f}" if tj else f"{'-':>9s} {'-':>9s}"))


if __name__ == "__main__":
    main()
