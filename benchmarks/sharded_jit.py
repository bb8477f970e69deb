"""Speed of ``jit`` of an explicitly sharded program: a 2048x2048 float32 matrix product on 4
CPU devices (a 4-way mesh ``X``) against the same product unsharded, plax beside JAX, in one
run.

    python benchmarks/sharded_jit.py [--size 2048] [--devices 4] [--repeat 5]

Rows: the unsharded product (one device); the rows of ``a`` split over ``X`` (each device
multiplies its block, nothing exchanged); the contracting dimension split on both operands
with ``out_sharding=P()`` (each device's partial product, then summed across the devices);
ten steps of a data-parallel gradient descent in a ``fori_loop`` (the batch's rows split,
the weights replicated: every device runs the loop, the gradient summed inside the body);
a product whose partial sums are kept unreduced (``out_sharding=P(None, None,
unreduced={'X'})``), transposed, then reduced; column sums of an unreduced input (such a
product); and, on a mesh of ``Auto`` axes (no types: the layouts JAX's partitioner
picks), a jitted ``tanh(u @ v)`` with ``u``'s rows split, a jitted product contracting a
split dimension, and an eager ``tanh(x) * 2``.
Each library runs in its own child interpreter (device counts are fixed at start-up);
times are the best of ``--repeat`` calls (milliseconds, outputs waited for); the inputs
already live on the devices.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def _measure(lib: str, n: int, repeat: int) -> dict:
    if lib == "plax":
        import plax as jax
    else:
        import jax
    import numpy as np
    jnp, P = jax.numpy, jax.P
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    ndev = len(jax.devices())
    mesh = jax.make_mesh((ndev,), ("X",))

    def best(fn, *args):
        jax.block_until_ready(fn(*args))  # compile and warm up
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times.append(time.perf_counter() - t0)
        return min(times)

    out = {"devices": ndev}
    out["unsharded"] = best(jax.jit(lambda u, v: u @ v), jnp.asarray(a), jnp.asarray(b))
    with jax.set_mesh(mesh):
        rows = jax.device_put(a, P("X", None))
        whole = jax.device_put(b, P())
        out["rows"] = best(jax.jit(lambda u, v: u @ v), rows, whole)
        cols = jax.device_put(a, P(None, "X"))
        brows = jax.device_put(b, P("X", None))
        out["contracting"] = best(
            jax.jit(lambda u, v: jnp.matmul(u, v, out_sharding=P())), cols, brows)
        # a data-parallel training loop: each step's gradient summed over the devices
        # inside the loop body (every device runs the loop; an all-reduce per step)
        batch = jax.device_put(a[:, :256], P("X", None))
        w0 = jax.device_put(b[:256, :256] / 16, P())

        def loss(w, x):
            return jnp.sum(jnp.tanh(x @ w) ** 2)

        train = jax.jit(lambda w, x: jax.lax.fori_loop(
            0, 10, lambda i, w: w - 1e-4 * jax.grad(loss)(w, x), w))
        out["loop"] = best(train, w0, batch)
        # partial sums kept unreduced (JAX 0.10's P(..., unreduced=...)), reduced at the end
        unreduced = P(None, None, unreduced={"X"})
        out["unreduced_dot"] = best(jax.jit(lambda u, v: jax.reshard(
            jnp.matmul(u, v, out_sharding=unreduced).T, P())), cols, brows)
        partial = jax.jit(lambda u, v: jnp.matmul(u, v, out_sharding=unreduced))(cols, brows)
        out["unreduced_in"] = best(jax.jit(lambda y: jax.reshard(jnp.sum(y, axis=0), P())),
                                   partial)
    # a mesh of Auto axes: the layouts JAX's partitioner picks, no types
    auto = jax.make_mesh((ndev,), ("X",), (jax.sharding.AxisType.Auto,))
    rows = jax.device_put(a, jax.NamedSharding(auto, P("X", None)))
    cols = jax.device_put(a, jax.NamedSharding(auto, P(None, "X")))
    brows = jax.device_put(b, jax.NamedSharding(auto, P("X", None)))
    whole = jax.device_put(b, jax.NamedSharding(auto, P()))
    out["auto_rows"] = best(jax.jit(lambda u, v: jnp.tanh(u @ v)), rows, whole)
    out["auto_contracting"] = best(jax.jit(lambda u, v: u @ v), cols, brows)
    out["auto_eager"] = best(lambda u: jnp.tanh(u) * 2, rows)
    return out


def _child(lib: str, args) -> dict:
    env = dict(os.environ)
    if lib == "plax":
        env["PLAX_NUM_CPU_DEVICES"] = str(args.devices)
        env.setdefault("PLAX_NUMBA_SYNC", "1")  # steady state: compile before timing
    else:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                            f" --xla_force_host_platform_device_count={args.devices}").strip()
        env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib, "--size",
           str(args.size), "--repeat", str(args.repeat)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{lib} worker failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=2048)
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--worker", choices=["plax", "jax"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(_measure(args.worker, args.size, args.repeat)))
        return
    p = _child("plax", args)
    try:
        j = _child("jax", args)
    except RuntimeError as err:  # JAX is optional
        print(f"(JAX not timed: {str(err).splitlines()[0]})")
        j = None
    n, d = args.size, p["devices"]
    rows = [(f"jit {n}x{n} matmul, unsharded (1 device)", "unsharded"),
            (f"jit {n}x{n} matmul, rows split over {d} devices", "rows"),
            (f"jit {n}x{n} matmul, contraction split over {d}, summed", "contracting")]
    rows.append((f"fori_loop: 10 data-parallel steps, {n}x256 batch over {d}", "loop"))
    rows += [(f"matmul kept unreduced over {d}, .T, then reduced", "unreduced_dot"),
             (f"unreduced {n}x{n} input (a product's): column sums, reduced", "unreduced_in"),
             (f"Auto mesh: jit tanh(matmul), rows split over {d}", "auto_rows"),
             (f"Auto mesh: jit matmul, contraction split over {d}", "auto_contracting"),
             (f"Auto mesh: eager tanh(x) * 2, rows split over {d}", "auto_eager")]
    print(f"{'case':56s} {'plax ms':>9s} {'JAX ms':>9s} {'plax/JAX':>9s}")
    for label, key in rows:
        tj = j[key] if j else None
        print(f"{label:56s} {p[key] * 1e3:9.2f} "
              + (f"{tj * 1e3:9.2f} {p[key] / tj:9.2f}" if tj else f"{'-':>9s} {'-':>9s}"))


if __name__ == "__main__":
    main()
