"""Structural fusion through ``pad``, ``rev`` and ``transpose`` on the simulated GPU (run by
test_kernels_b_simulated.py): each program below is one kernel per call with CUDA graphs off
(it launched two to four: the value, a copy or pad kernel, the reader), its values equal to
the NumPy backend's bit for bit (exact arithmetic only: additions), every padding config
(negative low/high crops, interior padding), ranks 0 to 4, zero-size operands and results."""
from __future__ import annotations

import numpy as np
import pytest

from test_kernels_a_simulated import on_a_gpu

pytestmark = on_a_gpu


def _launches_and_value(f, *args):
    """``(launches, result)`` of the second jitted call of ``f`` on the GPU (graphs off)."""
    import plax
    import plax_cupy
    gpu = plax.devices("gpu")[0]
    g = plax.jit(f)
    dev = [plax.device_put(a, gpu) for a in args]
    g(*dev)
    with plax_cupy.count() as c:
        got = np.asarray(g(*dev))
    assert c.host_fallbacks == 0, c
    return c.launches, got


def test_the_issue_programs_are_one_kernel(monkeypatch):
    import plax
    from plax import numpy as jnp
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    y = rng.standard_normal((5, 3)).astype(np.float32)
    programs = {"pad": lambda x, y: jnp.pad(jnp.exp(x), ((1, 2), (0, 3))) * 2,
                "flip": lambda x, y: jnp.flip(jnp.tanh(x)) + x,
                "transpose": lambda x, y: (x * 2).T + y}
    for name, f in programs.items():
        launches, got = _launches_and_value(f, x, y)
        want = np.asarray(plax.jit(f, backend="numpy")(x, y))
        assert launches == 1, (name, launches)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6, err_msg=name)


#: (dtype, operand shape, padding config, rev axes, permutation): one program each, ranks 1-4
_CASES = [
    ("float32", (7,), ((2, 3, 1),), (0,), (0,)),
    ("int8", (3, 4), ((-1, 2, 0), (2, -3, 2)), (1,), (1, 0)),
    ("uint32", (2, 3, 4), ((1, 0, 0), (0, 1, 1), (-2, -1, 0)), (0, 2), (2, 0, 1)),
    ("bool", (2, 1, 3, 2), ((0, 1, 0), (1, 1, 0), (-1, 1, 1), (0, 0, 0)), (1, 3), (3, 1, 0, 2)),
    ("float16", (4, 3), ((0, 0, 2), (-1, 0, 0)), (0, 1), (1, 0)),
    ("bfloat16", (5,), ((-2, -2, 0),), (0,), (0,)),
    ("float64", (2, 3), ((1, -1, 3), (0, 2, 0)), (), (1, 0)),
    ("int64", (3, 2), ((0, 0, 0), (1, 1, 0)), (0,), (0, 1)),
    ("complex64", (2, 3), ((1, 1, 1), (-1, 0, 0)), (1,), (1, 0)),
    ("complex128", (2, 2, 2), ((0, 1, 1), (1, 0, 0), (0, 0, 0)), (0, 1, 2), (1, 2, 0)),
    ("int16", (2, 2, 1, 3), ((0, 0, 0), (0, 0, 0), (2, 2, 0), (0, -1, 0)), (), (0, 2, 1, 3)),
    ("uint64", (3,), ((0, 2, 0),), (), (0,)),
    ("uint8", (2, 3, 2), ((1, 0, 1), (0, 0, 0), (0, 1, 0)), (2,), (0, 2, 1)),
    ("int32", (3, 4), ((2, 2, 1), (-1, -1, 1)), (0, 1), (1, 0)),
    ("uint16", (0, 3), ((2, 1, 0), (0, 0, 1)), (0,), (1, 0)),   # a zero-size operand: all padding
    ("float32", (4, 3), ((-2, -2, 0), (0, 0, 0)), (1,), (1, 0)),  # a zero-size result
]


def _program(pad_config, rev_axes, perm):
    from plax import lax

    def f(x, fill, y):
        padded = lax.pad(x + x, fill, pad_config)
        flipped = lax.rev(padded, rev_axes) if rev_axes else padded
        return lax.transpose(flipped, perm) + y
    return f


@pytest.mark.parametrize("dtype, shape, pad_config, rev_axes, perm", _CASES,
                         ids=[f"{c[0]}-{len(c[1])}d-{k}" for k, c in enumerate(_CASES)])
def test_pad_rev_transpose_read_through_equal_numpy_bit_for_bit(dtype, shape, pad_config,
                                                                  rev_axes, perm, monkeypatch):
    import plax
    from plax import numpy as jnp
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    dt = jnp.dtype(dtype)
    rng = np.random.default_rng(len(shape))
    if dt == np.bool_:
        x = rng.random(shape) < 0.5
    elif dt.kind == "c":
        x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    else:
        x = (rng.standard_normal(shape) * 20).astype(dt)
    fill = np.asarray(True if dt == np.bool_ else 3, dt)
    f = _program(pad_config, rev_axes, perm)
    out_shape = jnp.shape(plax.eval_shape(f, x, fill, np.asarray(fill)))
    y = np.asarray(rng.random(out_shape) < 0.5 if dt == np.bool_ else
                   (rng.standard_normal(out_shape) * 20).astype(dt))
    launches, got = _launches_and_value(f, x, fill, y)
    want = np.asarray(plax.jit(f, backend="numpy")(x, fill, y))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8) if got.size else got,
                                  want.view(np.uint8) if want.size else want)
    assert launches == (1 if got.size else 0) or (0 in shape and launches <= 1), launches


def test_rank_0_and_crops_only(monkeypatch):
    """A rank-0 pad (no axes) and a pure crop (negative low and high: no branch) on the GPU."""
    import plax
    from plax import lax
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    x = np.arange(20, dtype=np.int32).reshape(4, 5)

    def crop(x):
        return lax.pad(x * 3, np.int32(0), ((-1, -1, 0), (-2, 0, 0))) + 1

    def scalar(s):
        return lax.pad(s * 3, np.int32(9), ()) + 1

    for f, a in ((crop, x), (scalar, np.int32(4))):
        launches, got = _launches_and_value(f, a)
        np.testing.assert_array_equal(got, np.asarray(plax.jit(f, backend="numpy")(a)))
        assert launches == 1, (f.__name__, launches)


@pytest.mark.parametrize("index_dtype", ["int32", "uint8", "uint64", "uint32", "int8", "int64"])
def test_dynamic_slice_read_through_is_one_kernel(index_dtype, monkeypatch):
    """The starts are device scalars read in the kernel and clamped as the primitive does (a
    negative start wrapped by ``lax.dynamic_slice`` first, out-of-range ones clamped, each
    type's lowest and highest values, an unsigned one above 2^63 not wrapping); it launched 3 (unsigned) to 9 (signed: the wrap's
    scalar kernels) kernels."""
    import plax
    from plax import lax
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    x = np.arange(105, dtype=np.float32).reshape(3, 5, 7)

    def f(x, i, j, k):
        return lax.dynamic_slice(x * 2.0, (i, j, k), (2, 5, 3)) + 1.0

    dt = np.dtype(index_dtype)
    starts = [(1, 0, 2), (2, 3, 6), (0, 1, 100)]
    if dt.kind == "i":
        starts.append((-1, -2, -100))
        starts.append((np.iinfo(dt).min, np.iinfo(dt).max, np.iinfo(dt).min))
    if dt.kind == "u" and dt.itemsize >= 4:   # (the top half of the range)
        starts.append((2**(8 * dt.itemsize - 1), 0, 2**(8 * dt.itemsize) - 1))
    if dt == np.uint64:
        starts.append((2**63 + 5, 0, 2**64 - 1))
    saved = plax.config.read("jax_enable_x64")
    plax.config.update("jax_enable_x64", dt.itemsize == 8)   # (else uint64 is narrowed)
    try:
        for start in starts:
            args = (x,) + tuple(np.asarray(s).astype(dt) for s in start)
            launches, got = _launches_and_value(f, *args)
            np.testing.assert_array_equal(got, np.asarray(plax.jit(f, backend="numpy")(*args)),
                                          err_msg=str(start))
            assert launches == 1, (start, launches)
    finally:
        plax.config.update("jax_enable_x64", saved)


def test_a_chain_of_shifted_concatenations_is_declined_not_exponential(monkeypatch):
    """Each ``concatenate`` branch recomputes what the code before it has not, so this chain
    doubles the generated source a step: a few steps stay one kernel; twelve would take minutes
    to generate, and are declined (``MAX_READ_NAMES``) and lowered as their parts instead."""
    import plax
    from plax import numpy as jnp
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")

    def chain(steps):
        def f(x):
            for _ in range(steps):
                x = jnp.concatenate([jnp.sin(x)[1:], x[:1]])
            return x
        return f

    x = np.linspace(0.0, 1.0, 16, dtype=np.float32)
    for steps, fused in ((3, True), (12, False)):
        launches, got = _launches_and_value(chain(steps), x)
        want = np.asarray(plax.jit(chain(steps), backend="numpy")(x))
        assert (launches == 1) == fused, (steps, launches)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6, err_msg=str(steps))
