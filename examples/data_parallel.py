"""Data-parallel training of an MLP with ``pmap`` and with ``shard_map``.

Each device computes the gradient of the loss on its slice of the global batch; the
gradients are averaged across devices and every device applies the same update, so the
parameters stay identical on all devices. The pmap version averages the gradients with
``lax.pmean``; the shard_map version differentiates the mean of the devices' losses, whose
gradient with respect to the replicated parameters is the average already (shard_map types
values by the mesh axes they vary over, as JAX does). Both versions are checked against
ordinary single-device training on the whole batch: they agree to float32 rounding.

Run with several CPU devices (the plax-pmap plugin must be installed). As JAX's docs do, the
script asks for them with ``jax.config.update("jax_num_cpu_devices", 8)`` before any device is
used (``--devices N`` changes the count; ``PLAX_NUM_CPU_DEVICES`` or ``XLA_FLAGS=
--xla_force_host_platform_device_count=N`` in the environment take precedence)::

    python examples/data_parallel.py
    python examples/data_parallel.py --devices 4 --steps 5 --sizes 784,512,512,10

The default network is 784-128-128-10 with a global batch of 256 (the full 784-512-512-10
network of the issue is ``--sizes 784,512,512,10``; it takes longer to compile and run).
The data are synthetic (a fixed random teacher network labels random inputs).

Several processes (``pip install -e "plugins/plax_pmap[mpi]"``)::

    mpiexec -n 2 python examples/data_parallel.py

Each process joins the run with ``plax.distributed.initialize()``, maps its own slices of the
batch over its local devices, and the gradients are averaged over every process's devices;
each process prints its parameters' checksum, which must be identical. The shard_map
version runs over a mesh of every process's devices: each process passes the global batch,
its devices compute their blocks, and the collectives cross processes.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import plax
import plax.numpy as jnp
from plax import lax, random
from plax.sharding import NamedSharding, PartitionSpec as P


def init_params(key, sizes):
    params = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        key, k = random.split(key)
        params.append((random.normal(k, (m, n)) * np.float32(np.sqrt(2.0 / m)),
                       jnp.zeros((n,), jnp.float32)))
    return params


def predict(params, x):
    for w, b in params[:-1]:
        x = jnp.maximum(x @ w + b, 0.0)
    w, b = params[-1]
    return x @ w + b


def loss(params, x, y):
    logits = predict(params, x)
    logp = logits - plax.nn.logsumexp(logits, axis=1, keepdims=True)
    return -jnp.mean(jnp.sum(logp * y, axis=1))


def sgd(params, grads, lr):
    return plax.tree.map(lambda p, g: p - lr * g, params, grads)


def make_data(key, n, sizes):
    kx, kt = random.split(key)
    x = random.normal(kx, (n, sizes[0]))
    teacher = init_params(kt, sizes)
    labels = jnp.argmax(predict(teacher, x), axis=1)
    return x, jax_one_hot(labels, sizes[-1])


def jax_one_hot(labels, k):
    return (labels[:, None] == jnp.arange(k)[None, :]).astype(jnp.float32)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=256, help="global batch size")
    ap.add_argument("--sizes", default="784,128,128,10")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--devices", type=int, default=8, help="CPU devices (jax_num_cpu_devices)")
    args = ap.parse_args(argv)
    if not os.environ.get("PLAX_NUM_CPU_DEVICES") and \
            "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        plax.config.update("jax_num_cpu_devices", args.devices)  # before any device is used
    plax.distributed.initialize()  # joins the processes under mpiexec; else a no-op
    pi, pc = plax.process_index(), plax.process_count()
    sizes = [int(s) for s in args.sizes.split(",")]
    n = plax.device_count()  # over all processes
    nl = plax.local_device_count()
    if args.batch % n:
        print(f"the global batch {args.batch} must be divisible by the {n} devices")
        return 2
    lr = np.float32(args.lr)
    params0 = init_params(random.PRNGKey(0), sizes)
    x, y = make_data(random.PRNGKey(1), args.batch, sizes)

    # 1. single device, whole batch
    @plax.jit
    def step(params, x, y):
        l, g = plax.value_and_grad(loss)(params, x, y)
        return sgd(params, g, lr), l

    p_single = params0
    for _ in range(args.steps):
        p_single, l_single = step(p_single, x, y)

    # 2. pmap: parameters replicated (a leading device axis), batch split in n slices
    @plax.pmap(axis_name="batch")
    def pstep(params, x, y):
        l, g = plax.value_and_grad(loss)(params, x, y)
        g = lax.pmean(g, "batch")
        return sgd(params, g, lr), lax.pmean(l, "batch")

    p_pmap = plax.tree.map(lambda a: jnp.broadcast_to(a, (nl,) + a.shape), params0)
    # this process's slices of the batch (all of them in a single process)
    xs = x.reshape((n, args.batch // n) + x.shape[1:])[pi * nl:(pi + 1) * nl]
    ys = y.reshape((n, args.batch // n) + y.shape[1:])[pi * nl:(pi + 1) * nl]
    for _ in range(args.steps):
        p_pmap, l_pmap = pstep(p_pmap, xs, ys)

    # 3. shard_map over a one-axis mesh of every process's devices: the batch split along
    # "data", parameters replicated (each process passes the global batch and receives the
    # whole result)
    mesh = plax.make_mesh((n,), ("data",))

    def local_step(params, x, y):
        # differentiate the global loss, the mean of the devices' losses: shard_map types
        # each value by the mesh axes it varies over (as JAX does), so the gradient with
        # respect to the replicated parameters is summed over the devices already: the
        # mean gradient, equal on every device
        l, g = plax.value_and_grad(lambda p: lax.pmean(loss(p, x, y), "data"))(params)
        return sgd(params, g, lr), l

    sstep = plax.shard_map(local_step, mesh=mesh, in_specs=(P(), P("data"), P("data")),
                           out_specs=(P(), P()))
    xd = plax.device_put(x, NamedSharding(mesh, P("data")))
    yd = plax.device_put(y, NamedSharding(mesh, P("data")))
    p_shard = params0
    for _ in range(args.steps):
        p_shard, l_shard = sstep(p_shard, xd, yd)

    return _report(args, sizes, n, pi, pc, p_single, l_single, p_pmap, l_pmap, nl,
                   p_shard, l_shard)


def _report(args, sizes, n, pi, pc, p_single, l_single, p_pmap, l_pmap, nl, p_shard,
            l_shard) -> int:
    worst = 0.0
    for a, b, c in zip(plax.tree.leaves(p_single), plax.tree.leaves(p_pmap),
                       plax.tree.leaves(p_shard)):
        a = np.asarray(a, np.float64)
        scale = np.abs(a).max() + 1e-6
        for i in range(nl):
            worst = max(worst, np.abs(np.asarray(b[i], np.float64) - a).max() / scale)
        worst = max(worst, np.abs(np.asarray(c, np.float64) - a).max() / scale)
    tag = f"[process {pi} of {pc}] " if pc > 1 else ""
    print(f"{tag}devices: {n}  network: {'-'.join(map(str, sizes))}  global batch: "
          f"{args.batch}  steps: {args.steps}")
    print(f"{tag}loss  single device: {float(l_single):.6f}  pmap: {float(l_pmap[0]):.6f}  "
          f"shard_map: {float(l_shard):.6f}")
    print(f"{tag}largest parameter difference from single-device training (relative): "
          f"{worst:.2e}")
    checksum = sum(float(np.abs(np.asarray(b[0], np.float64)).sum())
                   for b in plax.tree.leaves(p_pmap))
    print(f"{tag}pmap parameter checksum: {checksum:.12e}")
    ok = worst < 1e-4
    print(tag + ("parameters agree to float32 rounding" if ok else "MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
