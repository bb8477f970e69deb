"""Multi-device speed: a data-parallel MLP step on 2 CPU devices vs 1, psum of 1M float32
over 2 devices, and the per-call cost of a small pmap (a pmean of a 6-leaf pytree); plax (the plax-pmap plugin, ``PLAX_NUM_CPU_DEVICES=2``) beside JAX
(``XLA_FLAGS=--xla_force_host_platform_device_count=2``), in one run.

    python benchmarks/multi_device.py [--sizes 784,512,512,10] [--batch 256]

Each library runs in its own child interpreter (device counts are fixed at start-up). The
MLP step is ``pmap(value_and_grad + pmean + SGD)`` over the global batch split in 2 slices,
against the same pmap over 1 device with the whole batch. The loop row is a ``fori_loop``
whose body holds a ``pmean``: plax runs it as one-thread vmap within a process (and, on the
row below it, on the device threads, as it must across processes). Times are the best of
several repeats (milliseconds per call, outputs waited for); the ratio plax/JAX below 1
means plax is faster. The inputs already live on the devices (transfers are not timed).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def _measure(lib: str, sizes: list[int], batch: int, repeat: int) -> dict:
    if lib == "plax":
        import plax as jax
        import plax.numpy as jnp
        from plax import lax
    else:
        import jax
        import jax.numpy as jnp
        from jax import lax
    import numpy as np

    devs = jax.devices()
    assert len(devs) >= 2, devs
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((m, n)).astype(np.float32) * np.float32(np.sqrt(2 / m)),
               np.zeros(n, np.float32)) for m, n in zip(sizes[:-1], sizes[1:])]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)]

    def loss(ps, x, y):
        for w, b in ps[:-1]:
            x = jnp.maximum(x @ w + b, 0.0)
        w, b = ps[-1]
        z = x @ w + b
        z = z - jnp.max(z, axis=1, keepdims=True)
        logp = z - jnp.log(jnp.sum(jnp.exp(z), axis=1, keepdims=True))
        return -jnp.mean(jnp.sum(logp * y, axis=1))

    def step(ps, x, y):
        l, g = jax.value_and_grad(loss)(ps, x, y)
        g = lax.pmean(g, "i")
        return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(ps, g)], l

    def timed(fn, *args, number=3):
        out = fn(*args)  # compile and warm up
        jax.block_until_ready(out)
        out = fn(*args)
        jax.block_until_ready(out)
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                out = fn(*args)
            jax.block_until_ready(out)
            best = min(best, (time.perf_counter() - t0) / number)
        return best

    result = {}
    for k in (1, 2):
        use = devs[:k]
        f = jax.pmap(step, axis_name="i", devices=use)
        put = jax.pmap(lambda a: a, devices=use)  # place the stacked inputs on the devices
        ps = put(jax.tree_util.tree_map(lambda a: np.broadcast_to(a, (k,) + a.shape).copy(),
                                        params))
        xs = put(x.reshape(k, batch // k, -1))
        ys = put(y.reshape(k, batch // k, -1))
        result[f"mlp_{k}"] = timed(f, ps, xs, ys)
    # a loop whose body holds a collective: 50 steps of a product, tanh and pmean
    w = rng.standard_normal((256, 256)).astype(np.float32) * np.float32(0.05)

    def loop(c):
        return lax.fori_loop(0, 50, lambda i, c: c - 0.01 * lax.pmean(jnp.tanh(c @ w), "i"), c)

    cs = jax.pmap(lambda a: a, devices=devs[:2])(
        rng.standard_normal((2, 64, 256)).astype(np.float32))
    result["loop"] = timed(jax.pmap(loop, axis_name="i", devices=devs[:2]), cs)
    if lib == "plax":  # the same run by the device threads instead of one-thread vmap
        os.environ["PLAX_PMAP_THREADED_CONTROL_FLOW"] = "1"
        result["loop_threads"] = timed(jax.pmap(loop, axis_name="i", devices=devs[:2]), cs)
        del os.environ["PLAX_PMAP_THREADED_CONTROL_FLOW"]
    big = jax.pmap(lambda a: a, devices=devs[:2])(
        rng.standard_normal((2, 1 << 20)).astype(np.float32))
    psum = jax.pmap(lambda a: lax.psum(a, "i"), axis_name="i", devices=devs[:2])
    result["psum"] = timed(psum, big, number=10)
    # per-call cost of a small pmap: a pmean of a 6-leaf pytree (a small model's gradients)
    small = jax.pmap(lambda a: a, devices=devs[:2])(
        [rng.standard_normal((2, 8, 8)).astype(np.float32) for _ in range(6)])
    tree_mean = jax.pmap(lambda t: lax.pmean(t, "i"), axis_name="i", devices=devs[:2])
    result["tree_pmean"] = timed(tree_mean, small, number=20)
    return result


def _child(lib: str, args) -> dict:
    env = dict(os.environ)
    if lib == "plax":
        env["PLAX_NUM_CPU_DEVICES"] = "2"
        env.setdefault("PLAX_NUMBA_SYNC", "1")  # steady state: compile before timing
    else:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()
        env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib, "--sizes", args.sizes,
           "--batch", str(args.batch), "--repeat", str(args.repeat)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{lib} worker failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="784,512,512,10")
    ap.add_argument("--batch", type=int, default=256, help="global batch")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--worker", choices=["plax", "jax"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.worker:
        print(json.dumps(_measure(args.worker, sizes, args.batch, args.repeat)))
        return
    p = _child("plax", args)
    try:
        j = _child("jax", args)
    except RuntimeError as err:  # JAX is optional
        print(f"(JAX not timed: {str(err).splitlines()[0]})")
        j = None
    net = "-".join(map(str, sizes))
    rows = [(f"MLP {net} step, batch {args.batch}, 1 device", "mlp_1"),
            (f"MLP {net} step, batch {args.batch}, 2 devices", "mlp_2"),
            ("psum of 1M float32 over 2 devices", "psum"),
            ("pmean of 6 leaves of 8x8 float32, 2 devices", "tree_pmean"),
            ("50-step fori_loop with pmean, 2 devices", "loop")]
    print(f"{'case':48s} {'plax ms':>9s} {'JAX ms':>9s} {'plax/JAX':>9s}")
    for label, key in rows:
        tj = j[key] if j else None
        print(f"{label:48s} {p[key] * 1e3:9.3f} "
              + (f"{tj * 1e3:9.3f} {p[key] / tj:9.2f}" if tj else f"{'-':>9s} {'-':>9s}"))
    print(f"{'  (the same, on the device threads)':48s} {p['loop_threads'] * 1e3:9.3f} "
          + (f"{j['loop'] * 1e3:9.3f} {p['loop_threads'] / j['loop']:9.2f}" if j else ""))
    sp = p["mlp_1"] / p["mlp_2"]
    line = f"2-device speed-up of the MLP step: plax {sp:.2f}x"
    if j:
        line += f", JAX {j['mlp_1'] / j['mlp_2']:.2f}x"
    print(line)


if __name__ == "__main__":
    main()
