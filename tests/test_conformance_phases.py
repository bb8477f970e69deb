"""The conformance kit compares eigen- and singular vectors (and QR's ``q``) up to a phase per
vector (``plax.testing.conformance.phases``): another valid phase passes, a wrong vector, or
phases that break the decomposition, still fail."""
from __future__ import annotations

import numpy as np
import pytest

from plax.testing.conformance.harness import assert_same
from plax.testing.conformance.phases import eig_gauge, eigh_gauge, qr_gauge, svd_gauge

RNG = np.random.default_rng(7)


def _unit_factors(shape, complex_):
    """Unit factors, none of them 1 (signs for real: -1 on the first vector of each)."""
    t = RNG.uniform(0.3, 6.0, shape)
    signs = np.where(RNG.random(shape) < 0.5, -1.0, 1.0)
    signs[..., 0] = -1.0
    return np.exp(1j * t) if complex_ else signs


def _matrix(shape, complex_):
    a = RNG.standard_normal(shape)
    return a + 1j * RNG.standard_normal(shape) if complex_ else a


def _same(actual: list, expected: list) -> None:
    for a, e in zip(actual, expected):
        assert_same(a, e, np.asarray(e).dtype, tol_scale=10)


def _differs(actual: list, expected: list) -> None:
    with pytest.raises(AssertionError):
        _same(actual, expected)


@pytest.mark.parametrize("complex_", [False, True])
def test_eigh_vectors_compare_up_to_a_phase_each(complex_):
    a = _matrix((2, 4, 4), complex_)
    h = a + np.conj(np.swapaxes(a, -1, -2))
    w, v = np.linalg.eigh(h)
    expected = [v, w]
    turned = v * _unit_factors((2, 1, 4), complex_)
    _differs([turned, w], expected)  # as they come: the phases differ
    _same(eigh_gauge([turned, w], expected), expected)
    swapped = turned[..., [1, 0, 2, 3]]  # vectors of other eigenvalues
    _differs(eigh_gauge([swapped, w], expected), expected)
    mixed = turned.copy()  # a unit vector, but not the eigenvector
    mixed[..., 2] = (turned[..., 2] + 0.1 * turned[..., 3]) / np.sqrt(1.01)
    _differs(eigh_gauge([mixed, w], expected), expected)


@pytest.mark.parametrize("shape,full", [((5, 3), True), ((3, 5), True), ((4, 4), False),
                                        ((2, 5, 2), False)])
@pytest.mark.parametrize("complex_", [False, True])
def test_svd_vectors_compare_up_to_one_phase_per_pair(shape, full, complex_):
    a = _matrix(shape, complex_)
    u, s, vh = np.linalg.svd(a, full_matrices=full)
    expected = [s, u, vh]
    k = s.shape[-1]
    p = _unit_factors(shape[:-2] + (1, k), complex_)
    u2, vh2 = u.copy(), vh.copy()
    u2[..., :k] *= p
    vh2[..., :k, :] *= np.swapaxes(np.conj(p), -1, -2)
    m, n = shape[-2:]
    if full and m - k > 1:  # another basis of u's free columns
        g = np.linalg.qr(_matrix((m - k, m - k), complex_))[0]
        u2[..., k:] = u2[..., k:] @ g
    if full and n - k > 1:  # another basis of vh's free rows
        g = np.linalg.qr(_matrix((n - k, n - k), complex_))[0]
        vh2[..., k:, :] = g @ vh2[..., k:, :]
    _differs([s, u2, vh2], expected)
    _same(svd_gauge([s, u2, vh2], expected), expected)
    # u turned but vh not: no longer a decomposition of a (u @ diag(s) @ vh != a)
    _differs(svd_gauge([s, u2, vh], expected), expected)
    if full and m - k > 1:  # free columns outside their subspace
        wrong = u2.copy()
        wrong[..., k] = u2[..., 0]
        _differs(svd_gauge([s, wrong, vh2], expected), expected)


@pytest.mark.parametrize("shape,full", [((5, 3), False), ((5, 3), True), ((3, 5), False)])
@pytest.mark.parametrize("complex_", [False, True])
def test_qr_compares_up_to_a_phase_per_column_of_q_and_row_of_r(shape, full, complex_):
    a = _matrix(shape, complex_)
    q, r = np.linalg.qr(a, mode="complete" if full else "reduced")
    expected = [q, r]
    k = min(shape)
    p = _unit_factors((1, k), complex_)
    q2, r2 = q.copy(), r.copy()
    q2[:, :k] *= p
    r2[:k, :] *= np.conj(p).T
    _differs([q2, r2], expected)
    _same(qr_gauge([q2, r2], expected), expected)
    _differs(qr_gauge([q2, r], expected), expected)  # q @ r != a


def test_eig_left_and_right_vectors_have_phases_of_their_own():
    a = np.triu(_matrix((3, 3), True)) + np.diag([1.0, 4.0, 9.0])
    import scipy.linalg
    w, vl, vr = scipy.linalg.eig(a, left=True, right=True)
    expected = [w, vl, vr]
    got = [w, vl * _unit_factors((1, 3), True), vr * _unit_factors((1, 3), True)]
    _differs(got, expected)
    _same(eig_gauge(got, expected), expected)
    _differs(eig_gauge([w, vl, vr[:, [0, 2, 1]]], expected), expected)
