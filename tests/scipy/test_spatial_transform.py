"""plax.scipy.spatial.transform (Rotation, Slerp) against SciPy's in float64."""
import itertools
import warnings

import numpy as np
import pytest
from scipy.spatial.transform import Rotation as SR
from scipy.spatial.transform import Slerp as SS

import plax
import plax.numpy as jnp
from plax import random
from plax.scipy.spatial.transform import Rotation, Slerp
from plax.test_util import check_grads

R = np.random.default_rng(14)
Q = R.standard_normal((30, 4))
Q[0] = [0, 0, 0, 1]                      # identity
Q[1] = [0, 0, np.sin(0.5), np.cos(0.5)]
Q[2] = [1, 0, 0, 0]                      # a half turn: w = 0
SEQS = ["".join(t) for t in itertools.product("xyz", repeat=3) if t[0] != t[1] and t[1] != t[2]]


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


def _close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), b, rtol=tol, atol=tol)


def _same_angles(a, b, tol=1e-10):
    """Equal as angles: -pi and pi are the same."""
    d = (np.asarray(a) - b + np.pi) % (2 * np.pi) - np.pi
    np.testing.assert_allclose(d, 0 * d, atol=tol)


def test_conversions():
    s, p = SR.from_quat(Q), Rotation.from_quat(Q)
    _close(p.as_quat(), s.as_quat())
    _close(p.as_quat(canonical=True), s.as_quat(canonical=True))
    _close(p.as_quat(scalar_first=True), s.as_quat(scalar_first=True))
    _close(p.as_matrix(), s.as_matrix())
    _close(p.as_rotvec(), s.as_rotvec())
    _close(p.as_rotvec(degrees=True), s.as_rotvec(degrees=True), 1e-10)
    _close(p.as_mrp(), s.as_mrp())
    _close(p.magnitude(), s.magnitude())
    _close(Rotation.from_matrix(s.as_matrix()).as_matrix(), s.as_matrix())
    _close(Rotation.from_rotvec(s.as_rotvec()).as_matrix(), s.as_matrix())
    _close(Rotation.from_rotvec(np.full(3, 1e-5)).as_quat(), SR.from_rotvec(np.full(3, 1e-5)).as_quat())
    _close(Rotation.from_mrp(s.as_mrp()).as_matrix(), s.as_matrix())
    _close(Rotation.from_rotvec([90.0, 0, 0], degrees=True).as_matrix(),
           SR.from_rotvec([90.0, 0, 0], degrees=True).as_matrix())
    assert Rotation.from_quat(Q[0]).single and len(p) == 30
    _close(p[3:5].as_quat(), s[3:5].as_quat())


@pytest.mark.parametrize("seq", SEQS + [s.upper() for s in SEQS])
def test_euler(seq):
    s, p = SR.from_quat(Q), Rotation.from_quat(Q)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # SciPy warns about the half turn's gimbal lock
        want = s.as_euler(seq)
    _same_angles(p.as_euler(seq), want)
    angles = R.uniform(-3, 3, (6, 3))
    _close(Rotation.from_euler(seq, angles).as_matrix(), SR.from_euler(seq, angles).as_matrix())
    _close(Rotation.from_euler(seq, np.rad2deg(angles), degrees=True).as_matrix(),
           SR.from_euler(seq, angles).as_matrix(), 1e-10)


def test_gimbal_lock_and_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seq, ang in [("zyx", [[0.3, np.pi / 2, 0.2], [0.1, -np.pi / 2, 0.4]]),
                         ("ZXZ", [[0.3, 0.0, 0.2]])]:
            g = SR.from_euler(seq, ang)
            _same_angles(Rotation.from_quat(g.as_quat()).as_euler(seq), g.as_euler(seq), 1e-9)
    _close(Rotation.from_euler("z", 0.5).as_matrix(), SR.from_euler("z", 0.5).as_matrix())
    with pytest.raises(ValueError):
        Rotation.from_euler("xxy", [0.1, 0.2, 0.3])
    with pytest.raises(ValueError):
        Rotation.from_euler("xYz", [0.1, 0.2, 0.3])
    with pytest.raises(ValueError):
        Rotation.from_quat(np.ones(3))


def test_operations():
    s, p = SR.from_quat(Q), Rotation.from_quat(Q)
    v = R.standard_normal((30, 3))
    _close(p.apply(v), s.apply(v))
    _close(p.apply(v, inverse=True), s.apply(v, inverse=True))
    _close(p.apply(v[0]), s.apply(v[0]))
    _close((p * p.inv()[::-1]).as_matrix(), (s * s.inv()[::-1]).as_matrix())
    _close(p.mean().as_matrix(), s.mean().as_matrix(), 1e-10)
    w = R.uniform(0, 1, 30)
    _close(p.mean(w).as_matrix(), s.mean(w).as_matrix(), 1e-10)
    _close(Rotation.concatenate([p[:2], Rotation.from_quat(Q[5])]).as_quat(),
           SR.concatenate([s[:2], SR.from_quat(Q[5])]).as_quat())
    _close(Rotation.identity(3).as_matrix(), SR.identity(3).as_matrix())
    r = Rotation.random(random.PRNGKey(0), 100)
    _close(jnp.linalg.norm(r.quat, axis=-1), np.ones(100))
    # differentiable and jittable
    check_grads(lambda a: Rotation.from_rotvec(a).apply(jnp.array([1.0, 2.0, 3.0])),
                (np.array([0.3, -0.2, 0.5]),), order=1)
    _same_angles(plax.jit(lambda q: Rotation.from_quat(q).as_euler("xyz"))(Q), s.as_euler("xyz"))


def test_slerp():
    s, p = SR.from_quat(Q[:4]), Rotation.from_quat(Q[:4])
    times = np.array([0.0, 1.0, 2.5, 4.0])
    query = np.array([0.0, 0.3, 1.0, 2.0, 3.9, 4.0])
    _close(Slerp.init(times, p)(query).as_matrix(), SS(times, s)(query).as_matrix())
    with pytest.raises(ValueError):
        Slerp.init(times, Rotation.from_quat(Q[0]))
