"""A ``scan`` with a small body as one persistent kernel (``plax_cupy.scan_kernel``).

On the simulated GPU (the generated kernel built for the host, one thread per block):

* the tanh RNN ``scan(lambda c, x: (tanh(c @ W + x), c), h0, xs)`` is one launch per call with
  CUDA graphs off (the host loop launches kernels every step), values equal to the NumPy
  backend's; its gradient's two scans (the forward one with residuals and the reverse one)
  take the kernel too;
* a body of many primitives (dot_general, broadcast_in_dim, transpose, slice, dynamic_slice,
  select_n, convert_element_type, iota, reductions), a pytree carry of float32, int32 and bool,
  ``reverse=True``; ``xs=None`` on float16 and bfloat16; an eager ``scan``;
* ``dynamic_slice``/``dynamic_update_slice`` at starts of uint64, uint32, int8 and int64
  (2**63 and more, negative, past the end) clamped as the NumPy backend clamps them;
* a body the kernel declines (a value over ``scan_kernel.MAX_ELEMENTS``, a nested ``scan``)
  keeps the host loop, and ``as_text()`` says why; the host loop still replays as one CUDA
  graph.
* pad (negative, interior), concatenate, stack, split, gather (``x[i]``, ``take`` with fill
  and clip, ``take_along_axis``), scatter (``.at[i].set/add/max``, out-of-bounds updates
  dropped or clipped), argmax/argmin, cumsum/cumprod/cummax/cumlogsumexp, sort (several keys
  and operands, descending, argsort), a bool contraction, ``cond`` and ``switch`` in one
  kernel, equal to the NumPy backend; the gradient's two scans kernels too; on int32 and
  bfloat16; benchmarks/scan_kernel_coverage.py's scans planned as its table says.

Without the simulation, NVRTC compiles the kernels' source (with ``-G``'s checks).
:func:`test_on_the_simulated_gpu` runs this file again in a child process with
``-p fake_cupy_plugin``; the simulated tests skip here.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from gpu_env import requires_nvrtc
from test_simulated_streams import SIMULATED, on_simulated_gpu, run_file_on_simulated_gpu


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    run_file_on_simulated_gpu(__file__, skipped=3)


def _rnn(W, h0, xs):
    import plax.numpy as jnp
    from plax import lax
    return lax.scan(lambda c, x: (jnp.tanh(c @ W + x), c), h0, xs)


def _rnn_loss(W, h0, xs):
    h, hs = _rnn(W, h0, xs)
    return (h * h).sum() + (hs * 0.5).sum()


def _many(consts, carry, xs):
    """A body of many primitives, a pytree carry (float32 matrix row, int32 counter, bool)."""
    import plax.numpy as jnp
    from plax import lax
    M, table = consts

    def body(c, x):
        v, n, flag = c
        k = M.shape[0]
        m = jnp.broadcast_to(v[:, None], (k, k)) + M.T           # broadcast_in_dim, transpose
        r = m.sum(axis=0) / float(k) + jnp.max(m, axis=1)[::-1] * 0.1  # reductions, rev... slice
        w = lax.dynamic_slice(table, (n % 3,), (k,))              # dynamic_slice, rem
        r = jnp.where(flag, r + w, r - w) + jnp.arange(k, dtype=jnp.float32) * x[0]
        r = r + (x[1:3] @ M[1:3]).astype(jnp.float32) * 0.01       # slice, dot_general, convert
        return (jnp.tanh(r), n + x.astype(jnp.int32)[0] + 1, ~flag), (r.sum(), n)
    return lax.scan(body, carry, xs, reverse=True)


def _many_args(k=4, steps=9, seed=1):
    """Operands of :func:`_many`: a row of ``k`` (at least 3) elements, ``steps`` steps."""
    rng = np.random.default_rng(seed)
    M = rng.normal(size=(k, k)).astype(np.float32)
    table = rng.normal(size=(k + 4,)).astype(np.float32)
    carry = (rng.normal(size=k).astype(np.float32), np.int32(2), np.bool_(True))
    xs = (rng.normal(size=(steps, k)) * 2).astype(np.float32)
    return (M, table), carry, xs


def _scans(fn, *args) -> list:
    """The parameters of every ``scan`` equation of ``fn``'s jaxpr (nested ones too)."""
    import plax
    from plax.core.jaxpr import sub_jaxprs
    found = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "scan":
                found.append(eqn.params)
            for sub in sub_jaxprs(eqn.params):
                walk(sub)
    walk(plax.make_jaxpr(fn)(*args).jaxpr)
    return found


def _put(tree):
    import plax
    gpu = plax.devices("gpu")[0]
    return plax.tree_util.tree_map(lambda a: plax.device_put(a, gpu), tree)


def _text(f, *args):
    return f.lower(*args).compile().as_text()


def _close(got, want, rtol=1e-5, atol=1e-6):
    import plax
    for g, w in zip(plax.tree_util.tree_leaves(got), plax.tree_util.tree_leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)


def _rnn_args(steps=12):
    rng = np.random.default_rng(0)
    return ((rng.normal(size=(64, 64)) * 0.2).astype(np.float32), np.zeros(64, np.float32),
            rng.normal(size=(steps, 64)).astype(np.float32))


@on_simulated_gpu
def test_rnn_is_one_launch_and_matches_numpy(monkeypatch):
    import plax
    import plax_cupy
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    args = _rnn_args()
    dev = _put(args)
    f = plax.jit(_rnn, backend="cupy")
    want = plax.jit(_rnn, backend="numpy")(*args)
    _close(f(*dev), want)
    with plax_cupy.count() as one:
        out = f(*dev)
    assert one.launches == 1 and one.host_fallbacks == 0
    _close(out, want)
    text = _text(f, *dev)
    assert "plax_scan" in text and "host loop" not in text
    # the host loop, for comparison, launches kernels every step
    monkeypatch.setenv("PLAX_CUPY_SCAN_KERNEL", "0")
    loop = plax.jit(lambda *a: _rnn(*a), backend="cupy")
    _close(loop(*dev), want)
    with plax_cupy.count() as many:
        loop(*dev)
    assert many.launches >= 12
    assert "kept as a host loop: disabled" in _text(loop, *dev)


@on_simulated_gpu
def test_a_declined_scan_still_replays_as_one_graph(monkeypatch):
    """The host loop (here forced by PLAX_CUPY_SCAN_KERNEL=0) is what a declined body gets:
    captured whole on the second call, one launch from the third."""
    import plax
    import plax_cupy
    monkeypatch.setenv("PLAX_CUPY_SCAN_KERNEL", "0")
    args = _rnn_args(4)
    dev = _put(args)
    f = plax.jit(lambda *a: _rnn(*a), backend="cupy")
    for _ in range(2):
        f(*dev)
    with plax_cupy.count() as c:
        out = f(*dev)
    assert c.launches == 1
    _close(out, plax.jit(_rnn, backend="numpy")(*args))


@on_simulated_gpu
def test_rnn_gradient_takes_the_kernel(monkeypatch):
    import plax
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    args = _rnn_args(6)
    g = plax.jit(plax.grad(_rnn_loss, argnums=(0, 1)), backend="cupy")
    _close(g(*_put(args)), plax.jit(plax.grad(_rnn_loss, argnums=(0, 1)), backend="numpy")(*args),
           rtol=2e-5, atol=2e-5)
    text = _text(g, *_put(args))
    assert text.count("void plax_scan(") == 2 and "host loop" not in text


@on_simulated_gpu
def test_body_of_many_primitives_reverse_and_pytree_carry(monkeypatch):
    import plax
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    args = _many_args()
    f = plax.jit(_many, backend="cupy")
    _close(f(*_put(args)), plax.jit(_many, backend="numpy")(*args))
    text = _text(f, *_put(args))
    assert "void plax_scan(" in text and "host loop" not in text


@on_simulated_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_xs_none_on_half_types(dtype):
    import plax
    import plax.numpy as jnp
    from plax import lax

    def f(c):
        return lax.scan(lambda c, _: (jnp.tanh(c * 0.75 + 0.5), c.sum()), c, None, length=7)
    c = np.linspace(-2, 2, 16).astype(plax.numpy.dtype(dtype))
    g = plax.jit(f, backend="cupy")
    _close(g(_put(c)), plax.jit(f, backend="numpy")(c), rtol=2e-2, atol=2e-2)
    assert "void plax_scan(" in _text(g, _put(c))


@on_simulated_gpu
def test_eager_scan_is_one_launch():
    import plax
    import plax_cupy
    args = _put(_rnn_args(5))
    want = plax.jit(_rnn, backend="numpy")(*_rnn_args(5))
    _close(_rnn(*args), want)
    with plax_cupy.count() as c:
        out = _rnn(*args)
    assert c.launches == 1
    _close(out, want)


@on_simulated_gpu
def test_declined_bodies_keep_the_host_loop_and_say_why(monkeypatch):
    import plax
    from plax import lax
    from plax_cupy import scan_kernel
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    big = scan_kernel.MAX_ELEMENTS + 16

    def wide(c):
        return lax.scan(lambda c, _: (c * 0.5 + 1.0, None), c, None, length=3)[0]

    def nested(c):
        inner = lambda c, _: (c * 0.5 + 1.0, None)  # noqa: E731
        return lax.scan(lambda c, _: (lax.scan(inner, c, None, length=2)[0], None), c, None,
                        length=3)[0]

    for fn, x, reason in ((wide, np.ones(big, np.float32), f"a body value of {big} elements"),
                          (nested, np.ones(8, np.float32), "scan in the scan body")):
        g = plax.jit(fn, backend="cupy")
        _close(g(_put(x)), plax.jit(fn, backend="numpy")(x))
        assert f"kept as a host loop: {reason}" in _text(g, _put(x))
    # the nested scan's inner scan takes the kernel itself, once a step of the outer host loop
    import fake_cupy
    before = len(fake_cupy.LAUNCHES)
    plax.jit(nested, backend="cupy")(_put(np.ones(8, np.float32)))
    assert [name for name, *_ in fake_cupy.LAUNCHES[before:]].count("plax_scan") == 3


def _forms(consts, carry, xs):
    """A body of the forms the kernel took in stop 41 (pad, concatenate, stack, split,
    gather, scatter, argmax/argmin, cumulative ops, a bool contraction, cond and switch), their
    modes and out-of-bounds indices, and stop 42's (sort along either axis, descending, argsort;
    cumlogsumexp, reverse and along a leading axis)."""
    import plax.numpy as jnp
    from plax import lax
    table, idx = consts          # (6, 5) float32; int32 (4,) holding out-of-bounds entries

    def body(c, x):
        v, n = c
        i = n % 6
        a = lax.pad(v, 0.5, [(-1, 2, 1)])                              # (10,)
        b = jnp.concatenate([v[::-1], x, a[:3]])                       # (13,)
        s = jnp.stack([v, x * 2.0], axis=1)                            # (5, 2)
        p, q = jnp.split(b, [4])                                       # (4,), (9,)
        m = table * x
        am, amin = jnp.argmax(m, axis=0), jnp.argmin(m, axis=1)
        g = (table[i] + jnp.take(table[:, 0], idx, mode="fill", fill_value=-1.0).sum()
             + jnp.take(table[0], idx, mode="clip")[1]
             + jnp.take_along_axis(table, am[None, :], axis=0)[0])
        u = (v.at[idx].add(x[:4], mode="drop") + v.at[i % 5].set(x[0]) * 0.5
             + v.at[idx].max(x[:4], mode="clip") * 0.25 + v.at[n % 5].add(1.0) * 0.1)
        cs = jnp.cumsum(s, axis=0)[:, 1] + lax.cumprod(x * 0.1 + 1.0, reverse=True)
        hits = (table > 0.5) @ (x > 0)                                 # bool dot_general
        v = jnp.tanh(u + g * 0.1 + cs * 0.1 + p.sum() * 0.01 + q[4:] * 0.1 + hits[1:] * 0.2)
        v = lax.cond(n % 2 == 0, lambda w: w * 1.5, lambda w: jnp.sin(w) + x, v)   # cond
        v = lax.switch(n % 3, [lambda w: w, lambda w: -w[::-1], lambda w: w * x], v)
        srt = jnp.sort(m, axis=0)[1:3].sum(axis=0) + jnp.sort(b, descending=True)[:5]  # sort
        srt = srt + jnp.sort(s, axis=1)[:, 1] - jnp.sort(v[:, None], axis=1)[:, 0]  # (2 and 1 a row)
        v = v + srt * 0.05 + lax.cumlogsumexp(x, reverse=True) * 0.01               # logsumexp
        return (v, n + 1), (a, lax.cummax(b), amin, jnp.argsort(x), lax.cumlogsumexp(s, axis=0))
    return lax.scan(body, carry, xs)


def _forms_loss(table, v0, xs):
    idx = np.array([1, 7, 4, -2], np.int32)
    (v, _), (a, cm, _, _, ls) = _forms((table, idx), (v0, np.int32(1)), xs)
    return (v * v).sum() + (a * cm[:, :10]).sum() + (ls * ls).sum()


def _forms_args(steps=5):
    rng = np.random.default_rng(3)
    table = rng.normal(size=(6, 5)).astype(np.float32)
    idx = np.array([1, 7, 4, -2], np.int32)
    carry = (rng.normal(size=5).astype(np.float32), np.int32(1))
    return (table, idx), carry, rng.normal(size=(steps, 5)).astype(np.float32)

def _typed(table, c0, xs):
    """pad (interior, negative high), concatenate, stack, gather (take), argmax/argmin,
    scatter-max and scatter-add (an index out of bounds dropped), a reverse cumsum, sorts (one
    key, two keys and a carried operand, a descending argsort), on the dtype of the operands."""
    import plax.numpy as jnp
    from plax import lax

    def body(c, x):
        a = lax.pad(c, c[0], [(1, -2, 1)])                              # (10,)
        g = jnp.take(table, jnp.argmax(x) % 4, axis=0)                  # (6,)
        s = c.at[jnp.argmin(x)].max(x[0]).at[np.array([0, 9, 2])].add(x[:3], mode="drop")
        new = s + g + lax.cumsum(x, reverse=True) - jnp.concatenate([a[:3], a[7:]])
        order = lax.sort((x, g, c), num_keys=2)                          # two keys, a third carried
        return new, (jnp.stack([a[:6], g, jnp.sort(c)[::-1], *order]), jnp.argsort(x, descending=True))
    return lax.scan(body, c0, xs)


def _typed_args(dtype, steps=4):
    """Small integers (exact in bfloat16 through the steps)."""
    import plax
    rng = np.random.default_rng(5)
    d = plax.numpy.dtype(dtype)
    return (rng.integers(-3, 4, size=(4, 6)).astype(d), rng.integers(-3, 4, size=6).astype(d),
            rng.integers(-3, 4, size=(steps, 6)).astype(d))


@on_simulated_gpu
def test_pad_concatenate_gather_scatter_argmax_cumulative_take_the_kernel(monkeypatch):
    """One launch a call (CUDA graphs off), values equal to the NumPy backend's, out-of-bounds
    gather (fill, clip) and scatter (drop, clip) indices included."""
    import plax
    import plax_cupy
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    args = _forms_args()
    f = plax.jit(_forms, backend="cupy")
    want = plax.jit(_forms, backend="numpy")(*args)
    _close(f(*_put(args)), want)
    with plax_cupy.count() as c:
        out = f(*_put(args))
    assert c.launches == 1 and c.host_fallbacks == 0
    _close(out, want)
    text = _text(f, *_put(args))
    assert "void plax_scan(" in text and "host loop" not in text


@on_simulated_gpu
def test_gradient_of_those_forms_takes_the_kernel(monkeypatch):
    """The gradient's two scans (pads from the slices' transposes, scatter-adds from the
    gathers', empty values from cumprod's) are kernels, values close to the NumPy backend's."""
    import plax
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    (table, _), (v0, _), xs = _forms_args()
    g = plax.jit(plax.grad(_forms_loss, argnums=(0, 1, 2)), backend="cupy")
    dev = _put((table, v0, xs))
    _close(g(*dev), plax.jit(plax.grad(_forms_loss, argnums=(0, 1, 2)), backend="numpy")(table, v0, xs),
           rtol=2e-5, atol=2e-5)
    text = _text(g, *dev)
    assert text.count("void plax_scan(") == 2 and "host loop" not in text


@on_simulated_gpu
@pytest.mark.parametrize("dtype", ["int32", "bfloat16"])
def test_those_forms_on_integer_and_half_types(monkeypatch, dtype):
    import plax
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    args = _typed_args(dtype)
    f = plax.jit(_typed, backend="cupy")
    got = plax.tree_util.tree_leaves(f(*_put(args)))
    want = plax.tree_util.tree_leaves(plax.jit(_typed, backend="numpy")(*args))
    for g, w in zip(got, want, strict=True):   # (small integers: exact in every dtype here)
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g, np.float64), np.asarray(w, np.float64))
    text = _text(f, *_put(args))
    assert "void plax_scan(" in text and "host loop" not in text


def _complex_extremes(c0, xs):
    """JAX's complex max/min in a scan body: a reduction, cummax reverse and cummin forward,
    a scatter-max with repeated targets, an elementwise min (ties of signed zeros, NaN in
    either part)."""
    from plax import lax

    def body(c, x):
        top = lax.reduce_max(x, (0,))
        s = c.at[np.array([0, 2, 0, 1, 2, 0])].max(x)
        return lax.min(s, x[::2]), (top, lax.cummax(x, reverse=True), lax.cummin(x), s)
    return lax.scan(body, c0, xs)


@on_simulated_gpu
def test_complex_max_min_in_the_kernel_fold_as_jax_bit_for_bit(monkeypatch):
    import plax
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    nan = np.nan
    parts = np.array([complex(0.0, 0.0), complex(-0.0, 0.0), complex(0.0, -0.0), complex(nan, 0),
                      complex(0, nan), complex(1, 0), complex(1, -0.0), complex(-1, 2)],
                     np.complex64)
    rng = np.random.default_rng(5)
    xs = parts[rng.integers(0, len(parts), (4, 6))]
    c0 = parts[rng.integers(0, len(parts), 3)]
    f = plax.jit(_complex_extremes, backend="cupy")
    got = plax.tree_util.tree_leaves(f(*_put((c0, xs))))
    want = plax.tree_util.tree_leaves(plax.jit(_complex_extremes, backend="numpy")(c0, xs))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint32), np.asarray(w).view(np.uint32))
    text = _text(f, *_put((c0, xs)))
    assert "void plax_scan(" in text and "host loop" not in text


def _overlapping_windows(c0, xs):
    """scatter and scatter-add of two windows overlapping at element 1, the updates' window
    axis first (so their order in memory is not the order the index vectors come in)."""
    from plax import lax
    dn = lax.ScatterDimensionNumbers(update_window_dims=(0,), inserted_window_dims=(),
                                     scatter_dims_to_operand_dims=(0,))
    idx = np.array([[0], [1]], np.int32)

    def body(c, x):
        upd = x.reshape(2, 2)   # (window, index vector)
        return lax.scatter(c, idx, upd, dn), lax.scatter_add(c, idx, upd, dn)
    return lax.scan(body, c0, xs)


@on_simulated_gpu
def test_scatter_folds_updates_in_the_reference_order(monkeypatch):
    """Of two updates of one element, the later index vector's wins under ``scatter``, as on
    the NumPy backend, whatever the updates' layout."""
    import plax
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    args = (np.zeros(5, np.float32), np.arange(1, 13, dtype=np.float32).reshape(3, 4))
    f = plax.jit(_overlapping_windows, backend="cupy")
    got = plax.tree_util.tree_leaves(f(*_put(args)))
    want = plax.tree_util.tree_leaves(plax.jit(_overlapping_windows, backend="numpy")(*args))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert "void plax_scan(" in _text(f, *_put(args))


#: start rows (two axes) of each integer type: past the top, 2**63 and more, negative, in range
_STARTS = {"uint64": [(2**63, 0), (2**64 - 1, 2**63 + 5), (1, 2**64 - 1), (3, 1), (0, 100)],
           "uint32": [(2**31, 0), (2**32 - 1, 1), (1, 2**31 + 1), (3, 2), (0, 100)],
           "int8": [(-128, 127), (-1, 2), (127, -100), (3, 1), (0, 100)],
           "int64": [(-2**63, 2**63 - 1), (-1, 2), (2**62, -2**62), (3, 1), (0, 100)]}


def _dynamic(table, xs):
    """A body taking ``dynamic_slice`` (negative starts wrapped first) and
    ``dynamic_update_slice`` (negative ones left to the primitive's clamp) of a (5, 7) carry
    at the starts of each integer type, windows of (2, 3): the starts' top is (3, 4)."""
    from plax import lax

    def body(c, starts):
        table, count = c
        ys = []
        for k, s in enumerate(starts):
            ys.append(lax.dynamic_slice(table, (s[0], s[1]), (2, 3)))
            update = lax.full((2, 3), count * 10.0 + k, table.dtype)
            table = lax.dynamic_update_slice(table, update, (s[0], s[1]),
                                             allow_negative_indices=False)
        return (table, count + 1.0), ys
    return lax.scan(body, (table, np.float32(0)), xs)


def _dynamic_args():
    return (np.arange(35, dtype=np.float32).reshape(5, 7),
            [np.array(v, dtype=np.dtype(name)) for name, v in _STARTS.items()])


@on_simulated_gpu
def test_dynamic_starts_of_every_integer_type_clamp_as_numpy(monkeypatch):
    """Unsigned starts of 2**63 and more clamp to the top (a plain ``long long`` cast wrapped
    them negative, to 0), in the one kernel."""
    import plax
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    with plax.config.override("jax_enable_x64", True):   # (else uint64 and int64 narrow)
        args = _dynamic_args()
        f = plax.jit(_dynamic, backend="cupy")
        np.testing.assert_equal(plax.tree_util.tree_map(np.asarray, f(*_put(args))),
                                plax.tree_util.tree_map(np.asarray, plax.jit(_dynamic, backend="numpy")(*args)))
        text = _text(f, *_put(args))
    assert "void plax_scan(" in text and "host loop" not in text


@requires_nvrtc
def test_kernel_sources_compile_with_nvrtc():
    import plax
    from plax_cupy import nvrtc, scan_kernel

    scans = _scans
    bodies = (scans(_rnn, *_rnn_args()) + scans(plax.grad(_rnn_loss), *_rnn_args())
              + scans(_many, *_many_args()))
    for dtype in ("float16", "bfloat16"):
        from plax import lax
        bodies += scans(lambda c: lax.scan(lambda c, _: (plax.numpy.tanh(c * 0.5), c.sum()), c, None,
                                           length=3), np.ones(8, plax.numpy.dtype(dtype)))
    with plax.config.override("jax_enable_x64", True):
        bodies += scans(_dynamic, *_dynamic_args())
    (table, _), (v0, _), xs = _forms_args()
    bodies += scans(_forms, *_forms_args()) + scans(plax.grad(_forms_loss, argnums=(0, 1, 2)), table, v0, xs)
    for dtype in ("int32", "bfloat16", "float16", "int8"):
        bodies += scans(_typed, *_typed_args(dtype))
    assert len(bodies) == 14
    for params in bodies:
        plan = scan_kernel.plan_scan(params)
        nvrtc.compile_ptx(plan.source, "scan.cu", options=nvrtc.NVRTC_CHECK_OPTIONS)


@pytest.mark.skipif(SIMULATED, reason="plans only: once, outside the simulated GPU's child")
def test_coverage_survey_takes_the_kernel_where_it_says():
    """benchmarks/scan_kernel_coverage.py's scans (planned, not compiled): every one a kernel
    but the two it declines on purpose (a sort past scan_kernel.MAX_SORT, an RNN over the
    multiply-add cap), each for its reason."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    import scan_kernel_coverage
    rows = [(name, *row) for name, fn, args in scan_kernel_coverage.workloads()
            for row in scan_kernel_coverage.planned(fn, args)]
    declined = {name: why for name, form, why in rows if form != "kernel"}
    assert declined == {"sort past the cap": "sort of 2048 elements along its axis (the kernel sorts at most 1024)",
                        "rnn 1024 wide": "1050624 multiply-adds a step (the kernel takes at most 1048576)"}
    assert sum(form == "kernel" for _, form, _ in rows) >= 65
