"""Launches per jitted call of programs that end in elementwise work on a reduction's result
(an *epilogue*), on the simulated GPU with CUDA graphs off (``PLAX_CUDA_GRAPHS=0``), so that
each kernel is seen: the accuracy of a classifier, softmax and log-softmax, layer norm,
``x / norm(x)``, a halved mean squared error, a cross-entropy, forward and where relevant
under ``grad``, and ``grad`` of a per-example cross-entropy of a linear model under ``vmap``.

    PYTHONPATH=$PYTHONPATH:tests/cupy python benchmarks/gpu_epilogues.py [--clusters]

For each program it prints the launches of one call (generated kernels and library calls
alike), the generated kernels among them (``plax_reduce`` / ``plax_elementwise`` / others),
and, with ``--clusters``, each kernel's fused primitives. The simulated GPU runs the kernels,
so each result is checked against the NumPy backend (float32 within 1e-5 relative).
The times mean nothing here; launches are what an epilogue fused into its reduction saves
(docs/gpu.md, "Reductions and what reads them"), and what a row-local cluster saves where the
rows are read again after their reduction (softmax, layer norm: "Row-local clusters";
``plax_rows`` kernels count under "other").
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import simulated_gpu  # (this folder is on sys.path when run as a script)


def programs(jnp, jax):
    """``[(label, fn, args)]``: the surveyed programs on small float32 operands (the launch
    counts do not depend on the sizes)."""
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((64, 10)).astype(np.float32)
    labels = rng.integers(0, 10, 64).astype(np.int32)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    y = rng.standard_normal((64, 32)).astype(np.float32)
    v = rng.standard_normal(1000).astype(np.float32)

    def accuracy(logits, labels):
        return jnp.mean(jnp.argmax(logits, -1) == labels)

    def softmax(x):
        return jax.nn.softmax(x, axis=-1)

    def log_softmax(x):
        return jax.nn.log_softmax(x, axis=-1)

    def layer_norm(x):
        mean = jnp.mean(x, -1, keepdims=True)
        var = jnp.mean((x - mean) ** 2, -1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5)

    def normalize(v):
        return v / jnp.linalg.norm(v)

    def half_mse(pred, y):
        return jnp.mean((pred - y) ** 2) * 0.5

    def xent(x, labels):
        logp = jax.nn.log_softmax(x, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=-1))

    def per_example_grad(pick):
        """``grad`` of the mean of a per-example softmax cross-entropy of a linear model
        under ``vmap(loss, in_axes=(None, 0, 0))``, the label picked by ``pick``."""
        def loss(params, x, y):
            w, b = params
            return -pick(jax.nn.log_softmax(x @ w + b), y)
        return jax.grad(lambda p, x, y: jnp.mean(jax.vmap(loss, in_axes=(None, 0, 0))(p, x, y)))

    params = (rng.standard_normal((32, 10)).astype(np.float32),
              rng.standard_normal(10).astype(np.float32))

    labels2 = np.stack([labels, (labels + 3) % 10], 1)

    def xent_labels(x, labels):
        logp = jax.nn.log_softmax(x, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, labels, axis=-1))

    def row_sums_scaled(x):
        return jnp.sum(x, 0) * 0.25 + 1.0

    def col_max_shift(x):
        return jnp.exp(jnp.max(x, 1) - 1.0)

    return [
        ("accuracy mean(argmax(l,-1)==y)", accuracy, (logits, labels)),
        ("softmax(x, -1)", softmax, (x,)),
        ("log_softmax(x, -1)", log_softmax, (x,)),
        ("layer norm (x-m)/sqrt(v+eps)", layer_norm, (x,)),
        ("x / norm(x)", normalize, (v,)),
        ("mean((p-y)**2) * 0.5", half_mse, (x, y)),
        ("sum(x, 0) * 0.25 + 1", row_sums_scaled, (x,)),
        ("exp(max(x, 1) - 1)", col_max_shift, (x,)),
        ("xent(log_softmax)", xent, (x, labels)),
        ("grad mean((p-y)**2)*0.5", jax.grad(half_mse), (x, y)),
        ("grad sum(softmax(x)**2)", jax.grad(lambda x: jnp.sum(softmax(x) ** 2)), (x,)),
        ("grad sum(layer norm * y)", jax.grad(lambda x, y: jnp.sum(layer_norm(x) * y)), (x, y)),
        ("grad xent(log_softmax)", jax.grad(xent), (x, labels)),
        # two labels a row (top-2, multi-label): a loop over the labels in the row's kernel
        ("xent take 2 labels a row", xent_labels, (x, labels2)),
        ("grad xent take 2 labels a row", jax.grad(xent_labels), (x, labels2)),
        # per-example losses under vmap, then grad of the mean: the two products and the
        # bias gradient's column sums apart from the row-local kernel
        ("grad vmap xent linear logp[y]", per_example_grad(lambda logp, y: logp[y]),
         (params, x, labels)),
        ("grad vmap xent linear take", per_example_grad(
            lambda logp, y: jnp.take_along_axis(logp, y[None], -1)[0]), (params, x, labels)),
        ("grad vmap xent linear one_hot", per_example_grad(
            lambda logp, y: jnp.sum(logp * jax.nn.one_hot(y, 10))), (params, x, labels)),
    ]


def _recorded_names(fake_cupy) -> list:
    """Wraps the simulated kernels' launch so that each records its kernel's name."""
    names: list = []
    original = fake_cupy._Function.__call__

    def call(self, *args, **kw):
        names.append(self.name)
        return original(self, *args, **kw)

    fake_cupy._Function.__call__ = call
    return names


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", action="store_true",
                        help="print each generated kernel's fused primitives")
    opts = parser.parse_args(argv)
    os.environ["PLAX_CUDA_GRAPHS"] = "0"
    fake_cupy = simulated_gpu.install()
    import plax
    import plax_cupy
    from plax import numpy as jnp
    gpu = plax.devices("gpu")[0]
    names = _recorded_names(fake_cupy)
    print(f"{'program':34s} {'launches':>8s} {'reduce':>6s} {'elemw':>5s} {'other':>5s}")
    total = 0
    for label, fn, args in programs(jnp, plax):
        want = plax.jit(fn, backend="numpy")(*args)
        on_gpu = [plax.device_put(a, gpu) for a in args]   # (a pytree of arrays too)
        call = plax.jit(fn, backend="cupy")
        got = plax.block_until_ready(call(*on_gpu))
        for g, w in zip(plax.tree_util.tree_leaves(got), plax.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6,
                                       err_msg=label)
        names.clear()
        with plax_cupy.count() as c:
            plax.block_until_ready(call(*on_gpu))
        reduce_ = sum(n == "plax_reduce" for n in names)
        elemw = sum(n == "plax_elementwise" for n in names)
        total += c.launches
        print(f"{label:34s} {c.launches:8d} {reduce_:6d} {elemw:5d} "
              f"{c.launches - reduce_ - elemw:5d}")
        if opts.clusters:
            text = call.lower(*on_gpu).compile().as_text()
            for line in text.splitlines():
                if line.startswith("// cluster:"):
                    print("    " + line[3:])
    print(f"{'total':34s} {total:8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
