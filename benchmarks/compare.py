"""plax on Numba beside plax on NumPy, JAX and plain NumPy: the Numba backend's workloads in one
table, measured in one run.

    python benchmarks/compare.py [--quick] [--repeat R]

Columns: plax jitted with ``backend="numba"`` (kernels compiled before timing,
``PLAX_NUMBA_SYNC=1``), plax jitted with ``backend="numpy"`` (the reference interpreter), JAX's
``jax.jit`` (skipped, with a note, where JAX is not installed: ``pip install -e ".[bench]"``),
NumPy eager (the same computation written directly in NumPy, gradients by hand; the NumPy
generator's normal sampler for ``random.normal``), the ratio plax-numba / JAX of wall-clock
time (below 1: plax is faster) and the same ratio of process CPU time (every thread: numba's
and XLA's thread pools alike). Each cell is the fastest, over ``--repeat`` batches of calls
lasting about 50 ms, of the time per call, after a warm-up call that compiles; the columns'
batches alternate, so all of a row's columns see the same moments of a shared host
(:func:`fastest_per_call`). "first call" rows time one
call of a freshly defined function (trace, compile, run), median over a few fresh functions,
measured before the steady-state rows (no kernel of it compiled yet), with the Numba backend
in its default tiered mode (a program runs on the reference kernels until it is hot, numba
compiling in the background from its second run on: what a user sees). ``--quick`` shrinks the large workloads and the
repetitions (a smoke test; the sizes are in the row labels). The last rows time the special
functions with scalar forms of the Numba backend's own (``f(x * 0.5) * 2 + 1`` on float32,
one fused loop; benchmarks/special_bench.py prints their errors beside JAX's); ``--tiering``
adds benchmarks/numba_tiering.py's table. See docs/performance.md.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Callable

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # compile before timing (read at compile time)

import numpy as np  # noqa: E402

COLUMNS = ["plax-numba", "plax-numpy", "jax", "numpy"]


# ---------------------------------------------------------------- the workloads, once per library

def _mlp_params(rng, sizes=(784, 512, 512, 10)):
    params = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        params.append(((rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32),
                       np.zeros(n, np.float32)))
    return params


def selu_fn(jnp):
    """SELU written on ``jnp`` (plax's or JAX's NumPy): the bandwidth-bound row of the CPU and
    GPU tables (benchmarks/gpu.py times it on 1e8 elements)."""
    return lambda x: 1.05 * jnp.where(x > 0, x, 1.67 * jnp.exp(x) - 1.67)


def mlp_update(L):
    """One SGD step of a tanh MLP with a softmax cross-entropy loss, written on the jax-like
    library ``L`` (``L.jnp``, ``L.grad``): ``step(params, x, y)`` returns the parameters
    stepped by 0.01 of their gradient. The CPU table's MLP (784-512-512-10, batch 128) and the
    GPU table's (784-2048-2048-10, batch 4096) are this step."""
    jnp = L.jnp

    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jnp.tanh(h @ w + b)
        w, b = params[-1]
        logits = h @ w + b
        logits = logits - jnp.max(logits, axis=1, keepdims=True)
        logp = logits - jnp.log(jnp.sum(jnp.exp(logits), axis=1, keepdims=True))
        return -jnp.mean(jnp.sum(logp * y, axis=1))

    def step(params, x, y):
        grads = L.grad(loss)(params, x, y)
        return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, grads)]
    return step


def make_workloads(quick: bool, special_size: int | None = None, specials: bool = True):
    """``[(label, {library: factory})]``; a factory takes the library's namespace (a jax-like
    ``L``: :class:`_Lib`) and returns ``(fn, args)`` where ``fn(*args)`` computes one call and
    returns its outputs. ``specials=False`` leaves out the special-function rows
    (benchmarks/gpu.py takes the others, with ``L`` on a GPU)."""
    rng = np.random.default_rng(0)
    n_selu = 100_000 if quick else 1_000_000
    n_normal = 100_000 if quick else 10_000_000
    steps = 100 if quick else 1000
    batch = 128
    x_selu = rng.standard_normal(n_selu).astype(np.float32)
    tiny = (np.ones(3, np.float32), np.arange(3, dtype=np.float32))
    linreg = [a.astype(np.float32) for a in (np.zeros((10, 5)), np.zeros(5),
                                            rng.standard_normal((20, 10)),
                                            rng.standard_normal((20, 5)))]
    mlp = _mlp_params(rng)
    images = rng.standard_normal((batch, 784)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    mat = rng.standard_normal((150, 100)).astype(np.float32)
    vecs = rng.standard_normal((10, 100)).astype(np.float32)
    rnn_w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    rnn_u = (rng.standard_normal((64, 16)) / 4).astype(np.float32)
    rnn_b = (rng.standard_normal(64) * 0.1).astype(np.float32)
    rnn_xs = rng.standard_normal((steps, 16)).astype(np.float32)
    rnn_h0 = np.zeros(64, np.float32)
    ema_steps = 1000 if quick else 10_000
    ema_xs = rng.standard_normal((ema_steps, 16)).astype(np.float32)
    tanh_xs = rng.standard_normal((steps, 64)).astype(np.float32)

    # -- written once against a jax-like library L (L.jit, L.jnp, L.lax, L.random, L.grad, L.vmap)
    def selu(L):
        return L.jit(selu_fn(L.jnp)), (L.put(x_selu),)

    def tiny_add(L):
        return L.jit(lambda a, b: a + b), tuple(L.put(a) for a in tiny)

    def linreg_step(L):
        jnp = L.jnp

        def mse(W, b, x, y):
            def sq(x, y):
                d = y - (jnp.dot(x, W) + b)
                return jnp.inner(d, d) / 2.0
            return jnp.mean(L.vmap(sq)(x, y), axis=0)

        def update(W, b, x, y):
            return W - 0.3 * L.grad(mse, 0)(W, b, x, y), b - 0.3 * L.grad(mse, 1)(W, b, x, y)
        return L.jit(update), tuple(L.put(a) for a in linreg)

    def mlp_step(L):
        return L.jit(mlp_update(L)), ([(L.put(w), L.put(b)) for w, b in mlp], L.put(images),
                                      L.put(labels))

    def normal(L):
        return L.jit(lambda k: L.random.normal(k, (n_normal,))), (L.put(L.random.PRNGKey(0)),)

    def vmap_matvec(L):
        m = L.put(mat)
        return L.jit(L.vmap(lambda v: L.jnp.dot(m, v))), (L.put(vecs),)

    def rnn_scan(L):
        jnp = L.jnp

        def rnn(w, u, b, h0, xs):
            def cell(h, x):
                h = jnp.tanh(w @ h + u @ x + b)
                return h, h
            return L.lax.scan(cell, h0, xs)
        return L.jit(rnn), tuple(L.put(a) for a in (rnn_w, rnn_u, rnn_b, rnn_h0, rnn_xs))

    def ema_scan(L):
        jnp = L.jnp
        return L.jit(lambda xs: L.lax.scan(lambda c, x: (0.9 * c + 0.1 * x, c),
                                           jnp.zeros(16, jnp.float32), xs)), (L.put(ema_xs),)

    def tanh_scan(L):
        jnp = L.jnp
        return L.jit(lambda xs: L.lax.scan(lambda c, x: (jnp.tanh(c * 0.9 + x), c),
                                           jnp.zeros(64, jnp.float32), xs)[0]), \
            (L.put(tanh_xs),)

    def rnn_loss(L):
        jnp = L.jnp

        def loss(w, u, b, h0, xs):
            def cell(h, x):
                h = jnp.tanh(w @ h + u @ x + b)
                return h, h
            _, hs = L.lax.scan(cell, h0, xs)
            return jnp.sum(hs * hs)
        return loss

    def rnn_grad(L):
        return L.jit(L.grad(rnn_loss(L), argnums=(0, 1, 2))), \
            tuple(L.put(a) for a in (rnn_w, rnn_u, rnn_b, rnn_h0, rnn_xs))

    # -- the same computations in NumPy, eagerly
    def np_selu(_):
        return (lambda x: np.float32(1.05) * np.where(x > 0, x, np.float32(1.67) * np.exp(x)
                                                      - np.float32(1.67))), (x_selu,)

    def np_tiny(_):
        return (lambda a, b: a + b), tiny

    def np_linreg(_):
        def update(W, b, x, y):
            d = y - (x @ W + b)
            n = np.float32(x.shape[0])
            return W - np.float32(0.3) * (-(x.T @ d) / n), b - np.float32(0.3) * (-d.sum(0) / n)
        return update, tuple(linreg)

    def np_mlp(_):
        def step(params, x, y):
            hs, h = [x], x
            for w, b in params[:-1]:
                h = np.tanh(h @ w + b)
                hs.append(h)
            w, b = params[-1]
            logits = h @ w + b
            logits = logits - logits.max(1, keepdims=True)
            p = np.exp(logits)
            p /= p.sum(1, keepdims=True)
            g = (p - y) / np.float32(x.shape[0])
            new = []
            for i in range(len(params) - 1, -1, -1):
                w, b = params[i]
                gw, gb = hs[i].T @ g, g.sum(0)
                if i:
                    g = (g @ w.T) * (1 - hs[i] * hs[i])
                new.append((w - np.float32(0.01) * gw, b - np.float32(0.01) * gb))
            return new[::-1]
        return step, (mlp, images, labels)

    def np_normal(_):
        gen = np.random.default_rng(0)
        return (lambda: gen.standard_normal(n_normal, dtype=np.float32)), ()

    def np_vmap(_):
        return (lambda v: v @ mat.T), (vecs,)

    def np_rnn(_):
        def rnn(w, u, b, h0, xs):
            h, ys = h0, np.empty((xs.shape[0], h0.shape[0]), np.float32)
            for t in range(xs.shape[0]):
                h = np.tanh(w @ h + u @ xs[t] + b)
                ys[t] = h
            return h, ys
        return rnn, (rnn_w, rnn_u, rnn_b, rnn_h0, rnn_xs)

    def np_ema(_):
        def ema(xs):
            c, ys = np.zeros(16, np.float32), np.empty_like(xs)
            for t in range(xs.shape[0]):
                ys[t] = c
                c = np.float32(0.9) * c + np.float32(0.1) * xs[t]
            return c, ys
        return ema, (ema_xs,)

    def np_tanh(_):
        def run(xs):
            c = np.zeros(64, np.float32)
            for t in range(xs.shape[0]):
                c = np.tanh(c * np.float32(0.9) + xs[t])
            return c
        return run, (tanh_xs,)

    def np_rnn_grad(_):
        def grad(w, u, b, h0, xs):  # backpropagation through time, by hand
            hs, h = [], h0
            for t in range(xs.shape[0]):
                h = np.tanh(w @ h + u @ xs[t] + b)
                hs.append(h)
            gw, gu, gb = np.zeros_like(w), np.zeros_like(u), np.zeros_like(b)
            dh = np.zeros_like(h0)
            for t in range(xs.shape[0] - 1, -1, -1):
                dz = (dh + 2 * hs[t]) * (1 - hs[t] * hs[t])
                gw += np.outer(dz, hs[t - 1] if t else h0)
                gu += np.outer(dz, xs[t])
                gb += dz
                dh = w.T @ dz
            return gw, gu, gb
        return grad, (rnn_w, rnn_u, rnn_b, rnn_h0, rnn_xs)

    def first_call(L):
        # a fresh function object each time: trace, compile and run
        return (lambda *args: L.jit(mlp_update(L))(*args)), mlp_step(L)[1]

    special_rows = special_workloads(quick, special_size) if specials else []

    k = "k" if n_normal < 1_000_000 else "M"
    nn = n_normal // 1000 if k == "k" else n_normal // 1_000_000
    ks = "k" if n_selu < 1_000_000 else "M"
    ns = n_selu // 1000 if ks == "k" else n_selu // 1_000_000
    return [
        (f"selu f32[{ns}{ks}] jit", {"plax": selu, "numpy": np_selu}),
        ("tiny jit call f32[3] add", {"plax": tiny_add, "numpy": np_tiny}),
        ("linreg step (grad, vmap)", {"plax": linreg_step, "numpy": np_linreg}),
        (f"MLP step 784-512-512-10 b{batch}", {"plax": mlp_step, "numpy": np_mlp}),
        (f"random.normal {nn}{k} jit", {"plax": normal, "numpy": np_normal}),
        ("MLP step first call", {"plax": first_call, "first": True}),
        ("jit(vmap(apply_matrix))", {"plax": vmap_matvec, "numpy": np_vmap}),
        (f"scan tanh RNN {steps}x64", {"plax": rnn_scan, "numpy": np_rnn}),
        (f"scan 0.9c+0.1x {ema_steps}x16", {"plax": ema_scan, "numpy": np_ema}),
        (f"scan tanh(0.9c+x) {steps}x64 [0]", {"plax": tanh_scan, "numpy": np_tanh}),
        (f"grad of scan tanh RNN {steps}x64", {"plax": rnn_grad, "numpy": np_rnn_grad}),
    ] + special_rows


#: float32 functions with scalar forms of the Numba backend's own, timed as
#: ``f(x * 0.5) * 2 + 1`` (one fused loop): lax name -> (NumPy/SciPy eager function, the
#: inputs' range). benchmarks/special_bench.py's functions are added to these (with their
#: error columns there).
SPECIAL = {"tanh": (np.tanh, (-5.0, 5.0)), "log1p": (np.log1p, (-0.9, 10.0)),
           "erf_inv": ("erfinv", (-0.99, 0.99)), "lgamma": ("gammaln", (0.1, 20.0))}


def special_functions() -> dict:
    """:data:`SPECIAL` and benchmarks/special_bench.py's functions: name -> (eager function or
    its scipy.special name, the inputs' range) for one-operand functions, name -> (eager
    function, ``inputs(rng, n)``) for the iterative ones of several operands."""
    table = dict(SPECIAL)
    try:
        import sys
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from special_bench import ITERATIVE, UNARY
    except ImportError:  # SciPy missing: the rows of SPECIAL that need no SciPy
        return {k: v for k, v in table.items() if callable(v[0])}
    for name, (ref, timing, _sweep) in UNARY.items():
        table.setdefault(name, (ref, timing))
    for name, (inputs, ref) in ITERATIVE.items():
        table.setdefault(name, (ref, inputs))
    return table


def special_workloads(quick: bool, size: int | None = None) -> list:
    """The special-function rows: ``f(x * 0.5, rest...) * 2 + 1`` on float32 (``size``
    elements: by default 1M, 100k with ``--quick``), one fused loop on plax-numba, XLA's on
    JAX, SciPy's ufunc for NumPy."""
    n = size or (100_000 if quick else 1_000_000)
    rng = np.random.default_rng(1)
    rows = []
    for name, (ref, domain) in special_functions().items():
        if callable(domain):   # several operands: their generator
            args = tuple(a.astype(np.float32) for a in domain(rng, n))
        else:
            args = (rng.uniform(*domain, n).astype(np.float32),)

        def plax_side(L, name=name, args=args):
            f = getattr(L.lax, name)
            return (L.jit(lambda v, *rest: f(v * 0.5, *rest) * 2.0 + 1.0),
                    tuple(L.put(a) for a in args))

        def numpy_side(_, ref=ref, args=args):
            if isinstance(ref, str):
                import scipy.special
                ref = getattr(scipy.special, ref)
            half, two, one = np.float32(0.5), np.float32(2), np.float32(1)
            return (lambda v, *rest: ref(v * half, *rest) * two + one), args
        label = (f"{name} f32[{n // 1_000_000}M] f(x/2)*2+1" if n % 1_000_000 == 0
                 else f"{name} f32[{n // 1000}k] f(x/2)*2+1")
        rows.append((label, {"plax": plax_side, "numpy": numpy_side}))
    return rows


# ---------------------------------------------------------------- the libraries

class _Lib:
    """A jax-like namespace: jit (bound to a backend for plax), jnp, lax, random, grad, vmap,
    put (host array -> the library's array) and block (wait for outputs)."""

    def __init__(self, module, jit, put, block):
        self.jnp, self.lax, self.random = module.numpy, module.lax, module.random
        self.grad, self.vmap = module.grad, module.vmap
        self.jit, self.put, self.block = jit, put, block


def libraries() -> tuple[dict, list[str]]:
    import plax
    libs, notes = {}, []
    backends = plax.plugins.registry().backends

    def plax_lib(name):
        return _Lib(plax, lambda f: plax.jit(f, backend=name), plax.numpy.asarray,
                    plax.block_until_ready)
    for column, name in (("plax-numba", "numba"), ("plax-numpy", "numpy")):
        if name in backends:
            libs[column] = plax_lib(name)
        else:
            notes.append(f"{column}: backend {name!r} not installed")
    try:
        import jax
        libs["jax"] = _Lib(jax, jax.jit, jax.numpy.asarray, jax.block_until_ready)
        notes.append(f"jax {jax.__version__} on {jax.devices()[0]}")
    except ImportError:
        notes.append("jax: not installed, its column is skipped (pip install -e \".[bench]\")")
    return libs, notes


# ---------------------------------------------------------------- timing

def fastest_per_call(calls: dict[str, Callable[[], object]], repeat: int,
                     target: float) -> dict[str, tuple[float, float]]:
    """``{name: (wall, cpu)}``: for each zero-argument function of ``calls``, its seconds per
    call, wall-clock and process CPU time, each the fastest over ``repeat`` batches of calls
    lasting about ``target`` seconds, the functions' batches alternating.

    Every function is called once before timing (it compiles there: ``PLAX_NUMBA_SYNC=1``
    for plax, the first ``jax.jit`` call for JAX), so no batch holds a compilation.
    Alternating batches let every column see the same moments of a shared host, and the
    fastest batch is the least disturbed one: on a loaded host, medians of consecutive runs
    measure the other jobs more than the program. CPU time (``time.process_time``: every
    thread of this process) is what a call costs whatever the load and however many threads
    it spreads over (numba's and XLA's threads alike); wall time is what the caller waits.
    A batch's CPU time is read once per batch, not per call: the kernel accounts the time
    of a thread still running on another core only when it stops or at a tick.

    Example:
      >>> best = fastest_per_call({"sum": lambda: sum(range(100))}, 3, 0.001)
      >>> best["sum"][0] > 0
      True
    """
    sizes = {}
    for name, call in calls.items():
        call()   # warm-up (compilation)
        t0 = time.perf_counter()
        call()
        sizes[name] = max(1, int(target / max(time.perf_counter() - t0, 1e-7)))
    best = {name: (float("inf"), float("inf")) for name in calls}
    for _ in range(repeat):
        for name, call in calls.items():
            n = sizes[name]
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(n):
                call()
            wall, cpu = (time.perf_counter() - w0) / n, (time.process_time() - c0) / n
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    return best


def median_first_call(make: Callable[[], Callable[[], object]], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        fn = make()
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def fmt(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def measure(quick: bool, repeat: int, match: list[str] | None = None,
            special_size: int | None = None,
            columns: list[str] | None = None) -> tuple[list[list[str]], list[str], dict]:
    """The table's rows, the notes on missing libraries, and each row's times in seconds
    (label -> column -> ``(wall, cpu)`` or None; a first-call row's cpu is None); only the
    rows whose label starts with one of ``match``, and only the ``columns``, where given (the
    others are left empty)."""
    libs, notes = libraries()
    target = 0.01 if quick else 0.05
    workloads = [w for w in make_workloads(quick, special_size)
                 if not match or any(w[0].startswith(m) for m in match)]
    # "first call" rows before the steady-state ones: those compile their kernels
    # synchronously, and a fresh function whose clusters this process already compiled uses
    # them at once, which is not what a user's first call does (it runs the reference
    # kernels while nothing is compiled yet)
    order = sorted(range(len(workloads)), key=lambda i: not workloads[i][1].get("first"))
    rows: list = [None] * len(workloads)
    raw: dict = {}
    for index in order:
        label, impls = workloads[index]
        times: dict[str, tuple | None] = {c: None for c in COLUMNS}
        calls = {}
        for column in COLUMNS:
            if columns and column not in columns:
                continue
            if column == "numpy":
                factory = impls.get("numpy")
                if factory is not None:
                    fn, args = factory(None)
                    calls[column] = (lambda fn=fn, args=args: fn(*args))
                continue
            lib = libs.get(column)
            if lib is None:
                continue
            fn, args = impls["plax"](lib)
            if impls.get("first"):
                old = os.environ.pop("PLAX_NUMBA_SYNC", None)  # the default: tiered
                try:
                    times[column] = (median_first_call(
                        lambda: (lambda: lib.block(fn(*args))), max(1, min(repeat, 3))), None)
                finally:
                    if old is not None:
                        os.environ["PLAX_NUMBA_SYNC"] = old
            else:
                calls[column] = (lambda lib=lib, fn=fn, args=args: lib.block(fn(*args)))
        times.update(fastest_per_call(calls, repeat, target))
        numba_t, jax_t = times.get("plax-numba"), times.get("jax")
        wall = f"{numba_t[0] / jax_t[0]:.2f}" if numba_t and jax_t else "-"
        cpu = (f"{numba_t[1] / jax_t[1]:.2f}" if numba_t and jax_t and numba_t[1]
               and jax_t[1] else "-")
        rows[index] = [label] + [fmt(times[c] and times[c][0]) for c in COLUMNS] + [wall, cpu]
        raw[label] = times
    return rows, notes, raw


def mlp_products_floor(repeat: int, quick: bool, batch: int = 128) -> float:
    """Seconds per MLP step spent in its matrix products alone, in NumPy (the BLAS plax calls):
    the three of the forward pass, and the five of the backward pass (two per layer but the
    first, whose input needs no gradient). No implementation of the step can take less with
    this BLAS; the MLP row's ratio is bounded below by this time over JAX's."""
    rng = np.random.default_rng(1)
    sizes = (784, 512, 512, 10)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    ws = [rng.standard_normal((m, n)).astype(np.float32) for m, n in zip(sizes[:-1], sizes[1:])]
    hs = [x] + [rng.standard_normal((batch, n)).astype(np.float32) for n in sizes[1:-1]]
    gs = [rng.standard_normal((batch, n)).astype(np.float32) for n in sizes[1:]]

    def products():
        for h, w in zip(hs, ws):
            h @ w
        for i, (h, w, g) in enumerate(zip(hs, ws, gs)):
            h.T @ g
            if i:
                g @ w.T

    return fastest_per_call({"products": products}, repeat,
                            0.01 if quick else 0.05)["products"][0]


def table(rows: list[list[str]]) -> str:
    header = ["workload", "plax-numba", "plax-numpy", "JAX", "NumPy eager", "numba / JAX",
              "CPU numba / JAX"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * 6) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few repetitions (a smoke test)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timing runs per cell (default 15, 3 with --quick)")
    parser.add_argument("--match", default=None,
                        help="comma-separated label prefixes: only those rows "
                             "(e.g. 'selu,log1p,grad of scan')")
    parser.add_argument("--special-size", type=int, default=None,
                        help="elements of the special-function rows (default 1M, 100k "
                             "with --quick; issue 26's goals are on 10M)")
    parser.add_argument("--columns", default=None,
                        help="comma-separated columns to time (e.g. 'plax-numba'; default "
                             f"all: {', '.join(COLUMNS)})")
    parser.add_argument("--tiering", action="store_true",
                        help="also print the tiered-compilation table (benchmarks/"
                             "numba_tiering.py: pauses, time to the fast path with and "
                             "without the LLVM first tier, warm starts, the GIL held by "
                             "plax's own loading and linking)")
    args = parser.parse_args(argv)
    repeat = args.repeat or (3 if args.quick else 15)
    rows, notes, raw = measure(args.quick, repeat, args.match and args.match.split(","),
                               args.special_size, args.columns and args.columns.split(","))
    import plax
    for name, backend in sorted(plax.plugins.registry().backends.items()):
        info = getattr(backend, "info", lambda: {})() or {}
        print(f"plax backend {name!r}" + "".join(f", {k} {v}" for k, v in info.items()
                                                  if k != "kernel cache"))
    print(f"{os.cpu_count()} CPU cores")
    for note in notes:
        print(note)
    print(f"fastest of {repeat} alternating batches per cell, wall-clock; the last column "
          f"compares process CPU time (every thread){' (--quick sizes)' if args.quick else ''}"
          f"; load average {os.getloadavg()[0]:.1f}")
    print(table(rows))
    jax_step = next((t["jax"] for label, t in raw.items() if label.startswith("MLP step 784")),
                    None)
    floor = mlp_products_floor(repeat, args.quick)
    print(f"the MLP step's 8 matrix products alone, in NumPy: {fmt(floor)}"
          + (f" ({floor / jax_step[0]:.2f} of JAX's whole step)" if jax_step else ""))
    if args.tiering:  # each of its measurements runs in fresh processes of its own
        import numba_tiering
        print("\ntiered compilation (benchmarks/numba_tiering.py):")
        numba_tiering.main(["--workloads", "selu"] if args.quick else [])
    else:
        print("\ntiered compilation (pauses of the main thread while kernels compile, time to "
              "the fast path, warm starts, GIL held by plax's loading and linking): --tiering "
              "adds its table (fresh processes, a few minutes), or run "
              "benchmarks/numba_tiering.py")


if __name__ == "__main__":
    main()
