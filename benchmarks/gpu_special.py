"""Special functions on the GPU, plax-cupy beside JAX on the same card: time per jitted call and
what one plax call costs (kernels a plain call launches, launches of a call once the program
replays as a CUDA graph, host copies each way, host fallbacks).

    python benchmarks/gpu_special.py [--size N] [--repeat R] [--simulated]

Rows (``N`` elements, default 1e7; each a chain the CuPy backend generates as one kernel):

* complex64 ``asin(z) * acos(z) + atanh(z / 2)`` -- the complex inverse functions;
* float32 ``i0e(x) * 2 - i1e(x) + x * x`` -- the scaled Bessel functions;
* float32 ``digamma(x) + lgamma(x) * erf(x)``;
* float32 ``random_gamma_grad(a, x)``;
* float32 ``igamma(a, x) * 2 + 1``, ``igammac(a, x) - x``, ``igamma_grad_a(a, x) + a``,
  ``zeta(s, q) * q`` (``s`` in [1.5, 6]), ``polygamma(1, x) + x`` and ``betainc(a, b, x / 10)
  + 1`` -- the iterative special functions, each with the generator's own device form, fused
  with the arithmetic around it (before those forms: 3 to 19 launches per call).

Each time is the median over ``--repeat`` runs of enough calls to last about 100 ms, after
warm-up (compilation excluded), synchronised with ``block_until_ready``. Without a GPU the
script says why and exits 0; without JAX's GPU build the JAX column says so. ``--simulated``
runs 1000 elements on tests/cupy's simulated GPU (CI without a GPU: the launch and copy counts
are the point, the times mean nothing; every simulated CuPy operation counts as a launch).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "backends"))  # a checkout without the entry point

import simulated_gpu  # noqa: E402  (this folder is on sys.path when run as a script)


def _median_seconds(call, repeat: int, budget: float = 0.1) -> float:
    """Median seconds per call of ``call`` (which blocks until its result is ready)."""
    call()
    t0 = time.perf_counter()
    call()
    calls = max(1, int(budget / max(time.perf_counter() - t0, 1e-7)))
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        samples.append((time.perf_counter() - t0) / calls)
    return statistics.median(samples)


def workloads(n: int) -> list:
    """``(label, fn(lax, jnp) -> function, operands)`` per row."""
    rng = np.random.default_rng(0)
    z = (rng.uniform(-3, 3, n) + 1j * rng.uniform(-3, 3, n)).astype(np.complex64)
    x = rng.uniform(-20, 20, n).astype(np.float32)
    pos = rng.uniform(0.1, 10, n).astype(np.float32)
    a = rng.uniform(0.5, 5, n).astype(np.float32)
    s = rng.uniform(1.5, 6, n).astype(np.float32)
    return [
        ("complex64 asin*acos+atanh", lambda lax, jnp: (
            lambda z: jnp.arcsin(z) * jnp.arccos(z) + jnp.arctanh(z * 0.5)), (z,)),
        ("float32 i0e*2-i1e+x*x", lambda lax, jnp: (
            lambda x: lax.bessel_i0e(x) * 2 - lax.bessel_i1e(x) + x * x), (x,)),
        ("float32 digamma+lgamma*erf", lambda lax, jnp: (
            lambda x: lax.digamma(x) + lax.lgamma(x) * lax.erf(x)), (pos,)),
        ("float32 random_gamma_grad", lambda lax, jnp: lax.random_gamma_grad, (a, pos)),
        ("float32 igamma*2+1", lambda lax, jnp: (
            lambda a, x: lax.igamma(a, x) * 2 + 1), (a, pos)),
        ("float32 igammac-x", lambda lax, jnp: (lambda a, x: lax.igammac(a, x) - x), (a, pos)),
        ("float32 igamma_grad_a+a", lambda lax, jnp: (
            lambda a, x: lax.igamma_grad_a(a, x) + a), (a, pos)),
        ("float32 zeta(s,q)*q", lambda lax, jnp: (lambda s, q: lax.zeta(s, q) * q), (s, pos)),
        ("float32 polygamma(1,x)+x", lambda lax, jnp: (
            lambda x: lax.polygamma(jnp.ones_like(x), x) + x), (pos,)),
        ("float32 betainc(a,b,x/10)+1", lambda lax, jnp: (
            lambda a, b, x: lax.betainc(a, b, x * 0.1) + 1), (a, a[::-1].copy(), pos)),
    ]


def _jax_gpu():
    try:
        import jax
        return jax.devices("gpu")[0], ""
    except Exception as err:  # noqa: BLE001 - reported in the table
        return None, f"JAX GPU unavailable ({type(err).__name__}: {str(err).splitlines()[0][:80]})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--simulated", action="store_true",
                    help="1000 elements on tests/cupy's simulated GPU (counts, not times)")
    opts = ap.parse_args(argv)
    if opts.simulated:
        simulated_gpu.install()
        opts.size, opts.repeat = 1000, 1
    from plax_cupy.runtime import probe
    gpus, reason = probe()
    if not gpus:
        print(f"benchmarks/gpu_special.py: no GPU to measure on ({reason}); nothing to do.")
        return 0
    import plax
    import plax.numpy as pjnp
    import plax_cupy
    from plax import lax as plax_lax
    from plax import plugins
    if "cupy" not in plugins.registry().backends:
        import plax_cupy.plugin
        plugins.register_plugin(plax_cupy.plugin, name="plax_cupy_bench")
    device = plugins.registry().get_backend("cupy").devices()[0]
    jax_device, jax_note = (None, "simulated GPU: JAX not run") if opts.simulated else _jax_gpu()
    print(f"GPU: {gpus[0].name}; {opts.size} elements" + (f"; note: {jax_note}" if jax_note else ""))
    print(f"{'workload':28s} {'plax-cupy':>12s} {'jax':>12s} {'plax/jax':>9s} "
          f"{'kernels':>7s} {'launches':>8s} {'h2d':>4s} {'d2h':>4s} {'fallbk':>6s}")
    for label, make, operands in workloads(opts.size):
        f = plax.jit(make(plax_lax, pjnp), backend="cupy")
        args = [plax.device_put(o, device) for o in operands]
        with plax_cupy.count() as plain:  # the first call runs plainly: one launch a kernel
            f(*args).block_until_ready()

        def call():
            return f(*args).block_until_ready()
        t_plax = _median_seconds(call, opts.repeat)
        with plax_cupy.count() as c:
            call()
        t_jax = None
        if jax_device is not None:
            import jax
            g = jax.jit(make(jax.lax, jax.numpy))
            jargs = [jax.device_put(o, jax_device) for o in operands]
            t_jax = _median_seconds(lambda: g(*jargs).block_until_ready(), opts.repeat)
        jt = f"{t_jax * 1e3:10.3f}ms" if t_jax else f"{'-':>12s}"
        ratio = f"{t_plax / t_jax:9.2f}" if t_jax else f"{'-':>9s}"
        print(f"{label:28s} {t_plax * 1e3:10.3f}ms {jt} {ratio} {plain.launches:7d} {c.launches:8d} "
              f"{c.host_to_device:4d} {c.device_to_host:4d} {c.host_fallbacks:6d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
