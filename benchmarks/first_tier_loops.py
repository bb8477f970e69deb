"""The loops' first tier (``plax_numba.llvm_tier_loops``) beside numba's whole-program kernel,
on the scans of issue 26: one call of each kernel, same process, same arguments.

    python benchmarks/first_tier_loops.py [--repeat N] [--match TEXT] [--ir TEXT]

Each cell is the best of ``--repeat`` batches (process CPU time per call: the host is shared,
and the best batch is the one the scheduler disturbed least). Before timing, the two kernels'
outputs are compared bit for bit (the first tier is built to give numba's kernel's bits).
``--ir TEXT`` prints the optimised IR of the matching program's first tier (is the step loop
vectorised? are there run-time checks per step?). Nothing here is asserted.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")
# the first tier's tests' helpers: each loop program's kernels as its step calls them
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "numba"))
from llvm_tier_util import assert_same_bits, kernel_args, loop_program, numba_entry  # noqa: E402


def _programs():
    import plax
    import plax.numpy as jnp
    from plax import lax
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    u = (rng.standard_normal((64, 16)) / 4).astype(np.float32)
    b = (rng.standard_normal(64) * 0.1).astype(np.float32)
    h0 = np.zeros(64, np.float32)
    xs = rng.standard_normal((1000, 16)).astype(np.float32)
    ema_xs = rng.standard_normal((10000, 16)).astype(np.float32)
    tanh_xs = rng.standard_normal((1000, 64)).astype(np.float32)

    def rnn(w, u, b, h0, xs):
        def cell(h, x):
            h = jnp.tanh(w @ h + u @ x + b)
            return h, h
        return lax.scan(cell, h0, xs)

    def loss(w, u, b, h0, xs):
        return jnp.sum(rnn(w, u, b, h0, xs)[1] ** 2)

    return [
        ("scan tanh RNN 1000x64", rnn, (w, u, b, h0, xs), 0),
        ("scan 0.9c+0.1x 10000x16",
         lambda xs: lax.scan(lambda c, x: (0.9 * c + 0.1 * x, c), jnp.zeros(16, jnp.float32),
                             xs), (ema_xs,), 0),
        ("scan tanh(0.9c+x) 1000x64",
         lambda xs: lax.scan(lambda c, x: (jnp.tanh(c * 0.9 + x), c),
                             jnp.zeros(64, jnp.float32), xs)[0], (tanh_xs,), 0),
        # the transposed scan of the backward pass: the jaxpr's last loop
        ("grad of the RNN: its backward scan", plax.grad(loss, argnums=(0, 1, 2)),
         (w, u, b, h0, xs), -1),
    ]


def best_per_call(call, repeat: int) -> float:
    """The best process CPU time per call over ``repeat`` batches of ~20 ms."""
    call()
    t0 = time.process_time()
    call()
    n = max(1, int(0.02 / max(time.process_time() - t0, 1e-6)))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(n):
            call()
        best = min(best, (time.process_time() - t0) / n)
    return best


def same_bits(mine, theirs) -> bool:
    try:
        assert_same_bits(mine, theirs)
    except AssertionError:
        return False
    return True


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--match", default="")
    parser.add_argument("--ir", default=None, help="print the optimised IR of this program")
    args = parser.parse_args(argv)
    from plax_numba import llvm_tier, llvm_tier_loops
    print("| program | first tier (us) | numba's kernel (us) | first / numba | same bits |")
    print("|---|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as cache_dir:
        for label, fn, fargs, which in _programs():
            if args.match not in label:
                continue
            program, plan, values = loop_program(fn, *fargs, which=which)
            first = llvm_tier_loops.plan(program, plan)
            if first is None:
                print(f"| {label} | declined: {llvm_tier.declined} | | | |")
                continue
            if args.ir is not None and args.ir in label:
                _print_optimised(first)
            ours = llvm_tier.build(first, plan.primitives, "<benchmark>")
            theirs = numba_entry(plan, cache_dir)
            kargs = kernel_args(plan, program, values)
            same = same_bits(ours(*kargs), theirs(*kargs))
            t_ours = best_per_call(lambda: ours(*kargs), args.repeat)
            t_theirs = best_per_call(lambda: theirs(*kargs), args.repeat)
            print(f"| {label} | {t_ours * 1e6:.1f} | {t_theirs * 1e6:.1f} | "
                  f"{t_ours / t_theirs:.2f} | {'yes' if same else 'NO'} |", flush=True)


def _print_optimised(first) -> None:
    """The first tier's module after LLVM's passes (as ``native_loader.link_ir`` runs them)."""
    from plax_numba import native_loader
    native_loader.prepare()
    llvm, target, (triple, cpu, features) = native_loader._ready
    module = llvm.parse_assembly(first.ir)
    machine = target.create_target_machine(cpu=cpu, features=features, opt=2,
                                           codemodel="jitdefault", jit=True)
    module.triple, module.data_layout = triple, str(machine.target_data)
    tuning = llvm.create_pipeline_tuning_options(speed_level=2)
    tuning.loop_vectorization = tuning.slp_vectorization = True
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)
    print(str(module), file=sys.stderr)


if __name__ == "__main__":
    main()
