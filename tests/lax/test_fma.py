"""The internal fused multiply-add primitive (``plax.lax.fused_multiply_add``): its abstract
evaluation and rules, the NumPy reference kernel's exactness on float64 values whose
intermediate results overflow or underflow (the rational fallback), and its fused form in
the Numba backend's kernels. The conformance kit (``spec_fma``) checks every backend's bits
on the edge cases."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
from plax import numpy as jnp
from plax.lax.fused_multiply_add import fma, fma_p
from plax.testing.conformance.spec_fma import fma_reference


def _bits(x):
    x = np.asarray(x)
    return x.view(f"u{x.dtype.itemsize}")


def test_abstract_eval_refuses_complex_mixed_dtypes_and_bad_shapes():
    one = jnp.float32(1)
    with pytest.raises(TypeError, match="fma does not accept dtype complex64"):
        fma(jnp.complex64(1), jnp.complex64(1), jnp.complex64(1))
    with pytest.raises(TypeError, match="same dtypes"):
        fma(one, one, jnp.float16(1))
    with pytest.raises(TypeError, match="fma does not accept dtype int32"):
        fma(jnp.int32(1), jnp.int32(1), jnp.int32(1))
    with pytest.raises(TypeError):
        fma(jnp.ones(3), jnp.ones(4), jnp.ones(3))


def test_staged_as_one_equation_with_the_broadcast_shape():
    jaxpr = plax.make_jaxpr(fma)(jnp.ones((2, 1)), 2.0, jnp.ones((1, 3))).jaxpr
    assert [e.primitive for e in jaxpr.eqns] == [fma_p]
    assert jaxpr.outvars[0].aval.shape == (2, 3)


def test_derivatives_are_those_of_a_times_b_plus_c():
    a, b, c = np.float32(1.5), jnp.arange(3.0), np.float32(-2.0)
    grads = plax.grad(lambda *xs: jnp.sum(fma(*xs)), argnums=(0, 1, 2))(a, b, c)
    np.testing.assert_array_equal(grads[0], np.sum(np.arange(3.0)))
    np.testing.assert_array_equal(grads[1], np.full(3, 1.5))
    np.testing.assert_array_equal(grads[2], 3.0)  # the rank-0 addend, summed over the result
    # linear in (a, c) for a known b: the transpose rule
    ct = plax.linear_transpose(lambda x: fma(x, 3.0, x), 1.0)(1.0)
    np.testing.assert_array_equal(ct[0], 4.0)


def test_vmap_matches_a_loop():
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((4, 3)).astype(np.float32) for _ in range(3))
    out = plax.vmap(fma, in_axes=(0, None, 1))(a, b[0], c.T)
    loop = np.stack([np.asarray(fma(a[i], b[0], c.T[:, i])) for i in range(4)])
    np.testing.assert_array_equal(_bits(out), _bits(loop))


def _float64_extremes(rng, n):
    """float64 triples whose error-free transformations would overflow or underflow: huge
    factors with a cancelling addend, tiny products near the subnormals."""
    mant = lambda: 1 + rng.integers(0, 2**52, n) / 2**52
    a = np.ldexp(mant(), rng.integers(-560, 560, n))
    b = np.ldexp(mant(), rng.integers(-560, 560, n))
    with np.errstate(all="ignore"):
        c = np.where(rng.random(n) < 0.5, -(a * b) * (1 + rng.standard_normal(n) * 2.0**-30),
                     np.ldexp(mant(), rng.integers(-1074, 1023, n)))
    c = np.where(np.isfinite(c), c, np.finfo(np.float64).max)
    return a, b, c


def test_reference_kernel_is_exact_on_float64_extremes():
    import plax_numpy
    kernel = plax_numpy.impls()[fma_p]
    a, b, c = _float64_extremes(np.random.default_rng(1), 300)
    out = np.asarray(kernel(a, b, c))
    want = np.array([fma_reference(x, y, z, np.dtype(np.float64)) for x, y, z in zip(a, b, c)])
    assert np.array_equal(_bits(out), _bits(want))


def test_numba_fuses_fma_with_the_reference_bits():
    pytest.importorskip("numba")
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal(64).astype(np.float32) for _ in range(2))
    c = (-(a.astype(np.float64) * b) * (1 + rng.standard_normal(64) * 2.0**-20)).astype(np.float32)
    f = lambda a, b, c: jnp.abs(fma(a, b, c))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to the reference kernel would warn
        out = plax.jit(f, backend="numba")(a, b, c)
    want = np.array([abs(fma_reference(float(x), float(y), float(z), np.dtype(np.float32)))
                     for x, y, z in zip(a, b, c)], np.float32)
    assert np.array_equal(_bits(out), _bits(want))


def test_reference_kernel_in_chunks_with_broadcast_operands():
    import plax_numpy
    from plax_numpy.impls_fma import _CHUNK
    kernel = plax_numpy.impls()[fma_p]
    rng = np.random.default_rng(3)
    rows = (2 * _CHUNK + 3) // 4 + 1                  # more elements than two chunks
    a = rng.standard_normal((rows, 4)).astype(np.float32)
    b = rng.standard_normal((1, 4)).astype(np.float32)  # broadcast along the rows
    c = (-(a.astype(np.float64) * b) * (1 + rng.standard_normal((rows, 4)) * 2.0**-20))
    out = np.asarray(kernel(a, b, c.astype(np.float32)))
    assert out.shape == (rows, 4) and out.dtype == np.float32
    picks = rng.integers(0, out.size, 200)
    i, j = np.unravel_index(picks, out.shape)
    want = [fma_reference(float(a[r, k]), float(b[0, k]), float(np.float32(c[r, k])),
                          np.dtype(np.float32)) for r, k in zip(i, j)]
    assert np.array_equal(_bits(out[i, j]), _bits(np.array(want, np.float32)))
