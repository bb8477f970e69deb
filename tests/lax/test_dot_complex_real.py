"""dot_general of complex operands with a real (or integer) ``preferred_element_type``.

JAX 0.10.2 accepts it and keeps the real part of the complex product; its JVP is the real
part of the tangent product and its transpose converts the (real) cotangent product back
to the operand's complex type. Recorded values below were printed by JAX 0.10.2.
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax

DN = (((1,), (0,)), ((), ()))
A = np.array([[1 + 2j, 3 - 1j]], np.complex64)
B = np.array([[2 - 1j], [1 + 1j]], np.complex64)


def _dot(pet):
    return lambda a, b: lax.dot_general(a, b, DN, preferred_element_type=pet)


@pytest.mark.parametrize("pet, want", [(np.float32, np.float32), (np.int32, np.int32)])
def test_real_part_of_the_complex_product(pet, want):
    rng = np.random.default_rng(0)
    a = (rng.normal(size=(3, 4)) + 1j * rng.normal(size=(3, 4))).astype(np.complex64)
    b = (rng.normal(size=(4, 2)) + 1j * rng.normal(size=(4, 2))).astype(np.complex64)
    a, b = a * 4, b * 4
    ref = (a.astype(np.complex128) @ b.astype(np.complex128)).real
    for f in (_dot(pet), plax.jit(_dot(pet))):
        out = f(a, b)
        assert out.dtype == want
        if want == np.float32:
            np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-4)
        else:  # truncated toward zero, as a complex -> int conversion of the real part
            np.testing.assert_array_equal(np.asarray(out)[np.abs(ref - np.round(ref)) > 1e-3],
                                          np.trunc(ref)[np.abs(ref - np.round(ref)) > 1e-3])


def test_recorded_jax_values_jvp_and_vjp():
    f = _dot(np.float32)
    assert np.asarray(f(A, B)).tolist() == [[8.0]]  # Re((1+2j)(2-1j) + (3-1j)(1+1j)) = Re(8+5j)
    p, t = plax.jvp(f, (A, B), (A, B))
    assert t.dtype == np.float32 and np.asarray(t).tolist() == [[16.0]]
    p, pull = plax.vjp(f, A, B)
    ca, cb = pull(np.ones((1, 1), np.float32))
    assert ca.dtype == cb.dtype == np.complex64
    np.testing.assert_array_equal(np.asarray(ca), [[2 + 0j, 1 + 0j]])  # as JAX: Re(b)
    np.testing.assert_array_equal(np.asarray(cb), [[1 + 0j], [3 + 0j]])  # Re(a)
    text = str(plax.make_jaxpr(f)(A, B))
    assert "c:f32[1,1] = dot_general" in text and "preferred_element_type=float32" in text


@pytest.mark.parametrize("pet", [np.float16, np.bool_])
def test_narrower_than_the_real_part_raises_as_jax(pet):
    with pytest.raises(TypeError, match="`preferred_element_type` must not be narrower than "
                       f"the original type, got preferred_element_type of {np.dtype(pet).name} "
                       "for result type of complex64"):
        _dot(pet)(A, B)


def test_beside_jax():
    jax = pytest.importorskip("jax")
    f_jax = lambda a, b: jax.lax.dot_general(a, b, DN, preferred_element_type=np.float32)  # noqa: E731
    f = _dot(np.float32)
    np.testing.assert_array_equal(np.asarray(f(A, B)), np.asarray(f_jax(A, B)))
    _, t = plax.jvp(f, (A, B), (B.T, A.T))
    _, tj = jax.jvp(f_jax, (A, B), (B.T, A.T))
    np.testing.assert_allclose(np.asarray(t), np.asarray(tj), rtol=1e-6)
    ct = np.array([[2.5]], np.float32)
    got = plax.vjp(f, A, B)[1](ct)
    want = jax.vjp(f_jax, A, B)[1](ct)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
    for pet in (np.float16, np.bool_):
        with pytest.raises(TypeError) as plax_err:
            _dot(pet)(A, B)
        with pytest.raises(TypeError) as jax_err:
            jax.lax.dot_general(A, B, DN, preferred_element_type=pet)
        assert str(plax_err.value) == str(jax_err.value)
