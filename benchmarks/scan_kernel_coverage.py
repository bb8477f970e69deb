"""Which realistic scans the CuPy backend runs as one persistent kernel (``plax_scan``) and
which keep the host loop, and why.

    PYTHONPATH=$PYTHONPATH:backends python benchmarks/scan_kernel_coverage.py [--run] [--gpu]

Each workload is jitted for the CuPy backend on tests/cupy's simulated GPU (``fake_cupy``);
the table has a row per ``scan`` of its compiled program (a ``grad`` has two: the forward one
keeping residuals and the reverse one): ``kernel`` where it became a ``plax_scan`` kernel,
else ``host loop`` and the reason ``Compiled.as_text()`` gives. ``--run`` also runs each
workload and compares it with the NumPy backend (the "max err" column; slower: the simulated
kernels are built with g++). ``--gpu``: on the real GPU instead (with ``--run``, the kernels'
values there). No timings: on a GPU the kernel saves ~2 us per body kernel and step (issue 24).
"""
from __future__ import annotations

import argparse
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import simulated_gpu  # noqa: E402


def workloads() -> list:
    """``(name, fn, args)`` of each surveyed scan."""
    import plax
    import plax.numpy as jnp
    from plax import lax

    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.normal(size=s).astype(np.float32)  # noqa: E731
    W, h0, xs = f32(16, 16) * 0.3, f32(16), f32(10, 16)

    def rnn(W, h0, xs):
        return lax.scan(lambda c, x: (jnp.tanh(c @ W + x), c), h0, xs)

    def rnn_loss(W, h0, xs):
        h, hs = rnn(W, h0, xs)
        return (h * h).sum() + (hs * 0.5).sum()

    def fori_read(x):
        return lax.fori_loop(0, x.shape[0], lambda i, acc: acc * 0.9 + x[i] * x[i], 0.0)

    def fori_set(x):
        return lax.fori_loop(1, x.shape[0], lambda i, y: y.at[i].set(y[i - 1] * 0.5 + x[i]), x)

    def fori_dynamic(x):
        return lax.fori_loop(0, 6, lambda i, acc: acc + lax.dynamic_slice(x, (i,), (4,)).sum(), 0.0)

    def cumsum(x):
        return lax.scan(lambda c, v: (c + v, c + v), jnp.zeros(x.shape[1:], x.dtype), x)[1]

    def cumprod(x):
        return lax.scan(lambda c, v: (c * v, c * v), jnp.ones(x.shape[1:], x.dtype), x)[1]

    H, D = 8, 8
    Wl, bl = f32(D + H, 4 * H) * 0.3, f32(4 * H) * 0.1

    def lstm(Wl, bl, xs):
        def cell(c, x):
            h, s = c
            z = jnp.concatenate([x, h]) @ Wl + bl
            i, f, g, o = jnp.split(z, 4)
            s = jax_sigmoid(f) * s + jax_sigmoid(i) * jnp.tanh(g)
            h = jax_sigmoid(o) * jnp.tanh(s)
            return (h, s), h
        return lax.scan(cell, (jnp.zeros(H), jnp.zeros(H)), xs)[1].sum()

    jax_sigmoid = plax.nn.sigmoid
    Wg = f32(D + H, 3 * H) * 0.3

    def gru(Wg, xs):
        def cell(h, x):
            zr = jax_sigmoid(jnp.concatenate([x, h]) @ Wg[:, :2 * H])
            z, r = zr[:H], zr[H:]
            n = jnp.tanh(jnp.concatenate([x, r * h]) @ Wg[:, 2 * H:])
            h = (1 - z) * n + z * h
            return h, h
        return lax.scan(cell, jnp.zeros(H), xs)[1].sum()

    def ode(y0, k):
        f = lambda y: -k * y + jnp.sin(y)  # noqa: E731
        return lax.fori_loop(0, 20, lambda i, y: y + 0.05 * f(y), y0)

    def rk4(y0, k):
        f = lambda y: jnp.stack([y[1], -k * y[0]])  # noqa: E731

        def step(y, _):
            h = 0.05
            k1 = f(y); k2 = f(y + h / 2 * k1); k3 = f(y + h / 2 * k2); k4 = f(y + h * k3)  # noqa: E702
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            return y, y[0]
        return lax.scan(step, y0, None, length=20)

    def selects(x):
        def body(c, v):
            c = jnp.where(v > 0, c + v, c * 0.5)
            c = lax.clamp(-2.0, c, 2.0)
            which = (jnp.abs(v) * 2).astype(jnp.int32) % 3
            c = lax.select_n(which, c, -c, c * 0.25)
            return c, c.sum()
        return lax.scan(body, jnp.zeros(x.shape[1:]), x)

    def argmax(x):
        def body(c, v):
            m = c + v
            return m * 0.5, (jnp.argmax(m), jnp.max(m), jnp.argmin(m, axis=0))
        return lax.scan(body, jnp.zeros(x.shape[1:]), x)

    def prefix(x):  # a Hillis-Steele prefix sum of each row, written with pads and slices
        def body(c, v):
            s = v
            for k in (1, 2, 4, 8):
                s = s + jnp.pad(s, (k, 0))[:s.shape[0]]
            return c + s[-1], s
        return lax.scan(body, 0.0, x)

    def pytree(x):
        def body(c, v):
            return {"h": jnp.tanh(c["h"] + v), "n": c["n"] + 1, "m": jnp.maximum(c["m"], v)}, c["h"]
        return lax.scan(body, {"h": jnp.zeros(16), "n": jnp.int32(0), "m": jnp.full(16, -1e9)}, x)

    def unrolled(W, h0, xs):
        return lax.scan(lambda c, x: (jnp.tanh(c @ W + x), c), h0, xs, unroll=2)

    def take(x, idx):
        return lax.scan(lambda c, i: (c + jnp.take(x, i, axis=0), c.sum()), jnp.zeros(x.shape[1]), idx)

    def take_along(x, idx):
        return lax.scan(lambda c, i: (c + jnp.take_along_axis(x, i[:, None], axis=1)[:, 0], c.sum()),
                        jnp.zeros(x.shape[0]), idx)

    def cumsum_body(x):
        return lax.scan(lambda c, v: (c + jnp.cumsum(v), c.sum()), jnp.zeros(x.shape[1]), x)

    def int_dot(m, x):
        return lax.scan(lambda c, v: ((c @ m + v) % 7, c.sum()), jnp.zeros(4, jnp.int32), x)

    def bool_dot(m, x):
        return lax.scan(lambda c, v: (c ^ (m @ (v > 0)), c), jnp.zeros(4, bool), x)

    def vmap_take(tab, idx):   # a gather with batching dims
        return lax.scan(lambda c, i: (c + plax.vmap(lambda r, j: r[j])(tab, i), None),
                        jnp.zeros(tab.shape[0]), idx)[0]

    def point_updates(x, idx):   # x.at[i, j].add(1.0): a scatter of a reshaped literal
        return lax.scan(lambda c, i: (c.at[i[0], i[1]].add(1.0) * 0.9, c[i[1], i[0]]), x, idx)

    def switch_body(x):
        return lax.scan(lambda c, v: (lax.switch(jnp.argmax(v), [lambda a: a + 1, lambda a: a * 2,
                                                                  jnp.sin], c), None), jnp.ones(3), x)[0]

    def cond_body(x):
        return lax.scan(lambda c, v: (lax.cond(v.sum() > 0, lambda c: c * 2.0, lambda c: c - 1.0, c) + v,
                                      None), jnp.zeros(x.shape[1]), x)[0]

    def sort_body(x):
        return lax.scan(lambda c, v: (jnp.sort(c + v), c[0]), jnp.zeros(x.shape[1]), x)

    def logsumexp_body(x):
        return lax.scan(lambda c, v: (lax.cumlogsumexp(c + v), None), jnp.zeros(x.shape[1]), x)[0]

    def argsort_body(x):   # sort of two operands (the keys and an iota), descending
        return lax.scan(lambda c, v: (c + v[jnp.argsort(v, descending=True)], None),
                        jnp.zeros(x.shape[1]), x)[0]

    def keys_body(x, y):   # two keys, a third operand carried along
        return lax.scan(lambda c, v: (lax.sort((v[0], v[1], c), num_keys=2)[2] * 0.5 + v[1], None),
                        jnp.zeros(x.shape[1]), (x, y))[0]

    def iota_body(x):
        return lax.scan(lambda c, v: (c + jnp.arange(4.0) * v, None), jnp.zeros(4), x)[0]

    sx, ix = f32(10, 16), np.array([3, 1, 0, 2, 7, 5], np.int32)
    rows = np.array([[0, 5, 2, 7], [1, -1, 3, 2]], np.int32)   # (indices 7 and -1: out of bounds)
    cp = (rng.uniform(0.5, 1.5, size=(10, 4))).astype(np.float32)
    grad = plax.grad
    cases = [
        ("rnn tanh", rnn, (W, h0, xs)),
        ("grad rnn", grad(rnn_loss, argnums=(0, 1)), (W, h0, xs)),
        ("vmap rnn (batch of h0)", plax.vmap(rnn, in_axes=(None, 0, None)), (W, f32(3, 16), xs)),
        ("jvp rnn", lambda W, h, x: plax.jvp(lambda h: rnn(W, h, x)[0], (h,), (h,)), (W, h0, xs)),
        ("unroll=2 rnn", unrolled, (W, h0, xs)),
        ("fori x[i]", fori_read, (f32(12),)),
        ("grad fori x[i]", grad(fori_read), (f32(12),)),
        ("fori x.at[i].set", fori_set, (f32(12),)),
        ("grad fori x.at[i].set", grad(lambda x: fori_set(x).sum()), (f32(12),)),
        ("fori dynamic_slice", fori_dynamic, (f32(12),)),
        ("grad fori dynamic_slice", grad(fori_dynamic), (f32(12),)),
        ("cumsum as scan", cumsum, (sx,)),
        ("cumprod as scan", cumprod, (cp,)),
        ("grad cumprod", grad(lambda x: cumprod(x).sum()), (cp,)),
        ("lstm", lstm, (Wl, bl, f32(10, D))),
        ("grad lstm", grad(lstm, argnums=(0, 1)), (Wl, bl, f32(10, D))),
        ("gru", gru, (Wg, f32(10, D))),
        ("grad gru", grad(gru), (Wg, f32(10, D))),
        ("euler ode", ode, (f32(8), np.float32(0.7))),
        ("grad euler ode", grad(lambda y, k: ode(y, k).sum(), argnums=1), (f32(8), np.float32(0.7))),
        ("rk4", rk4, (f32(2), np.float32(2.0))),
        ("grad rk4", grad(lambda y, k: rk4(y, k)[1].sum(), argnums=1), (f32(2), np.float32(2.0))),
        ("where/clamp/select_n", selects, (sx,)),
        ("grad where/clamp/select_n", grad(lambda x: selects(x)[1].sum()), (sx,)),
        ("argmax/max/argmin", argmax, (f32(10, 4, 5),)),
        ("prefix sum (pad+slice)", prefix, (sx,)),
        ("grad prefix sum", grad(lambda x: prefix(x)[1].sum()), (sx,)),
        ("pytree carry", pytree, (sx,)),
        ("take x[i] (gather)", take, (f32(8, 4), ix)),
        ("grad take x[i]", grad(lambda x, i: take(x, i)[0].sum()), (f32(8, 4), ix)),
        ("take_along_axis", take_along, (f32(4, 8), np.array([[1, 2, 0, 7]] * 5, np.int32))),
        ("cumsum in body", cumsum_body, (sx,)),
        ("int32 dot_general", int_dot, (np.arange(16, dtype=np.int32).reshape(4, 4) % 3,
                                        np.arange(24, dtype=np.int32).reshape(6, 4))),
        ("bool dot_general", bool_dot, (f32(4, 4) > 0, f32(6, 4))),
        ("vmap take (batching dims)", vmap_take, (f32(4, 6), rows)),
        ("grad vmap take", grad(lambda t, i: vmap_take(t, i).sum()), (f32(4, 6), rows)),
        ("x.at[i, j].add(1.0)", point_updates,
         (f32(4, 4), np.array([[0, 1], [3, 3], [2, 9], [-1, 0]], np.int32))),
        ("lax.switch by argmax", switch_body, (f32(6, 5),)),
        ("grad lax.switch", grad(lambda x: switch_body(x).sum()), (f32(6, 5),)),
        ("lax.cond in body", cond_body, (sx,)),
        ("sort in body", sort_body, (sx,)),
        ("grad sort in body", grad(lambda x: sort_body(x)[0].sum()), (sx,)),
        ("vmap sort in body", plax.vmap(sort_body), (f32(3, 10, 16),)),
        ("argsort descending", argsort_body, (sx,)),
        ("sort: two keys", keys_body, (np.round(sx), f32(10, 16))),
        ("sort past the cap", sort_body, (f32(2, 2048),)),
        ("cumlogsumexp in body", logsumexp_body, (sx,)),
        ("grad cumlogsumexp", grad(lambda x: logsumexp_body(x).sum()), (sx,)),
        ("vmap cumlogsumexp", plax.vmap(logsumexp_body), (f32(3, 10, 16),)),
        ("rnn 1024 wide", rnn, (f32(1024, 1024) * 0.03, f32(1024), f32(4, 1024))),
        ("iota in body", iota_body, (np.arange(5, dtype=np.float32),)),
    ]
    return cases


def planned(fn, args) -> list:
    """``(form, reason)`` of each ``scan`` of ``fn``'s jaxpr (nested ones too), planned by
    :func:`plax_cupy.scan_kernel.plan_scan` without compiling anything (what :func:`survey`
    reports through ``jit``, at a fraction of the cost: tests/cupy's check of this table)."""
    import plax
    from plax.core.jaxpr import sub_jaxprs
    from plax_cupy import codegen, scan_kernel
    found = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "scan":
                try:
                    scan_kernel.plan_scan(eqn.params)
                    found.append(("kernel", ""))
                except codegen.Unsupported as why:
                    found.append(("host loop", str(why)))
            for sub in sub_jaxprs(eqn.params):
                walk(sub)
    walk(plax.make_jaxpr(fn)(*args).jaxpr)
    return found


def survey(run: bool = False) -> list:
    """``(workload, scan #, 'kernel' or 'host loop', reason, max err)`` rows."""
    import plax
    rows = []
    gpu = plax.devices("gpu")[0]
    for name, fn, args in workloads():
        f = plax.jit(fn, backend="cupy")
        dev = plax.tree_util.tree_map(lambda a: plax.device_put(a, gpu), args)
        try:
            text = f.lower(*dev).compile().as_text()
        except Exception as err:  # (a survey: report, do not stop)
            rows.append((name, "-", "error", f"{type(err).__name__}: {err}"[:90], ""))
            continue
        kernels = text.count("void plax_scan(")
        loops = re.findall(r"// scan of \d+ steps kept as a host loop: (.*)", text)
        err = ""
        if run:
            got = plax.tree_util.tree_leaves(f(*dev))
            want = plax.tree_util.tree_leaves(plax.jit(fn, backend="numpy")(*args))
            err = max((float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64))))
                       if np.size(w) else 0.0) for g, w in zip(got, want))
            err = f"{err:.1e}"
        for k in range(kernels):
            rows.append((name, str(k + 1), "kernel", "", err))
        for k, why in enumerate(loops):
            rows.append((name, str(kernels + k + 1), "host loop", why[:90], err))
        if not kernels and not loops:
            rows.append((name, "-", "no scan", "", err))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="store_true", help="also run each and compare with NumPy")
    ap.add_argument("--gpu", action="store_true", help="on the real GPU, not the simulated one")
    opts = ap.parse_args(argv)
    if not opts.gpu:
        simulated_gpu.install()
    import warnings
    warnings.simplefilter("ignore")
    rows = survey(opts.run)
    head = ("workload", "scan", "form", "why the host loop", "max err")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(5)]
    print(" | ".join(h.ljust(w) for h, w in zip(head, widths)))
    print("-|-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths)))
    n_kernel = sum(r[2] == "kernel" for r in rows)
    print(f"\n{n_kernel} of {sum(r[2] in ('kernel', 'host loop') for r in rows)} scans are one kernel")
    return 0


if __name__ == "__main__":
    sys.exit(main())
