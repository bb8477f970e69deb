"""Rotations in 3-D: ``Rotation`` (unit quaternions, scalar last, in any leading shape) and
``Slerp`` (spherical linear interpolation), as ``jax.scipy.spatial.transform``.

Both are NamedTuples of arrays, so they pass through ``jit``, ``vmap`` and ``grad``. Euler
angles are recovered by Bernardes and Viollet's direct quaternion method (PLOS ONE 17, 2022),
which treats all 12 axis sequences alike and handles gimbal lock.
"""
from __future__ import annotations

import math
import typing
from typing import Any, NamedTuple, Optional


from plax import numpy as jnp

Array = Any

__all__ = ["Rotation", "Slerp"]

_AXES = {"x": 0, "y": 1, "z": 2}


def _norm(v: Array) -> Array:
    return jnp.sqrt(jnp.sum(v * v, axis=-1))


def _normalize(q: Array) -> Array:
    return q / _norm(q)[..., None]


def _compose(p: Array, q: Array) -> Array:
    """The quaternion product ``p q`` (rotation ``q`` first, then ``p``), scalar last."""
    pv, pw = p[..., :3], p[..., 3:]
    qv, qw = q[..., :3], q[..., 3:]
    v = pw * qv + qw * pv + jnp.cross(pv, qv)
    w = pw * qw - jnp.sum(pv * qv, axis=-1, keepdims=True)
    return jnp.concatenate([v, w], axis=-1)


def _canonical(q: Array) -> Array:
    """``q`` or ``-q`` (the same rotation), whichever has ``w >= 0`` (ties broken by the first
    nonzero of x, y, z being positive, as SciPy)."""
    x, y, z, w = (q[..., i] for i in range(4))
    flip = (w < 0) | ((w == 0) & ((x < 0) | ((x == 0) & ((y < 0) | ((y == 0) & (z < 0))))))
    return jnp.where(flip[..., None], -q, q)


def _elementary(axis: int, angle: Array) -> Array:
    """The quaternion of a rotation by ``angle`` about a coordinate axis."""
    half = angle / 2
    parts = [jnp.zeros_like(half)] * 3
    parts[axis] = jnp.sin(half)
    return jnp.stack(parts + [jnp.cos(half)], axis=-1)


def _parse_seq(seq: str) -> tuple[list[int], bool]:
    """``(axes, extrinsic)`` of an Euler sequence: lowercase extrinsic, uppercase intrinsic."""
    if not isinstance(seq, str) or not 1 <= len(seq) <= 3:
        raise ValueError(f"Expected axis specification to be a string of up to 3 characters, "
                         f"got {seq!r}")
    if not (seq.islower() or seq.isupper()) or any(c.lower() not in _AXES for c in seq):
        raise ValueError(f"Expected axes from 'xyz' (extrinsic) or 'XYZ' (intrinsic), got "
                         f"{seq!r}")
    if any(a == b for a, b in zip(seq, seq[1:])):
        raise ValueError(f"Expected consecutive axes to be different, got {seq!r}")
    return [_AXES[c.lower()] for c in seq], seq.islower()


class Rotation(NamedTuple):
    """A rotation (or a stack of them) in 3-D, stored as unit quaternions ``quat``
    (``(..., 4)``, scalar last), as :obj:`scipy.spatial.transform.Rotation`.

    Example:
      >>> from plax.scipy.spatial.transform import Rotation
      >>> r = Rotation.from_rotvec(jnp.array([0.0, 0.0, jnp.pi / 2]))
      >>> jnp.round(r.apply(jnp.array([1.0, 0.0, 0.0])), 6)
      Array([0., 1., 0.], dtype=float32)
    """
    quat: Array

    # -------------------------------------------------------------- constructors

    @classmethod
    def from_quat(cls, quat: Array) -> "Rotation":
        """From quaternions ``(..., 4)`` (scalar last), normalised."""
        quat = jnp.asarray(quat)
        if quat.shape[-1:] != (4,):
            raise ValueError(f"Expected `quat` to have shape (..., 4), got {quat.shape}")
        if not jnp.issubdtype(quat.dtype, jnp.inexact):
            quat = quat.astype(jnp.result_type(float))
        return cls(_normalize(quat))

    @classmethod
    def from_rotvec(cls, rotvec: Array, degrees: bool = False) -> "Rotation":
        """From rotation vectors ``(..., 3)`` (axis times angle)."""
        rotvec = jnp.asarray(rotvec)
        if not jnp.issubdtype(rotvec.dtype, jnp.inexact):
            rotvec = rotvec.astype(jnp.result_type(float))
        if degrees:
            rotvec = jnp.deg2rad(rotvec)
        angle = _norm(rotvec)
        a2 = angle * angle
        small = angle <= 1e-3
        safe = jnp.where(small, jnp.ones_like(angle), angle)
        # sin(angle/2) / angle, by its Taylor series near 0
        scale = jnp.where(small, 0.5 - a2 / 48 + a2 * a2 / 3840, jnp.sin(safe / 2) / safe)
        return cls(jnp.concatenate([scale[..., None] * rotvec, jnp.cos(angle / 2)[..., None]],
                                   axis=-1))

    @classmethod
    def from_mrp(cls, mrp: Array) -> "Rotation":
        """From modified Rodrigues parameters ``(..., 3)`` (``axis tan(angle / 4)``)."""
        mrp = jnp.asarray(mrp)
        if not jnp.issubdtype(mrp.dtype, jnp.inexact):
            mrp = mrp.astype(jnp.result_type(float))
        n2 = jnp.sum(mrp * mrp, axis=-1, keepdims=True)
        return cls(jnp.concatenate([2 * mrp, 1 - n2], axis=-1) / (1 + n2))

    @classmethod
    def from_matrix(cls, matrix: Array) -> "Rotation":
        """From rotation matrices ``(..., 3, 3)``, by the largest of the four quaternion
        components' squares (numerically stable; nearly orthogonal input is tolerated)."""
        m = jnp.asarray(matrix)
        if not jnp.issubdtype(m.dtype, jnp.inexact):
            m = m.astype(jnp.result_type(float))
        if m.shape[-2:] != (3, 3):
            raise ValueError(f"Expected `matrix` to have shape (..., 3, 3), got {m.shape}")
        diag = jnp.stack([m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]], axis=-1)
        trace = jnp.sum(diag, axis=-1)
        choice = jnp.argmax(jnp.concatenate([diag, trace[..., None]], axis=-1), axis=-1)
        candidates = []
        for i in range(3):
            j, k = (i + 1) % 3, (i + 2) % 3
            q = [None] * 4
            q[i] = 1 - trace + 2 * m[..., i, i]
            q[j] = m[..., j, i] + m[..., i, j]
            q[k] = m[..., k, i] + m[..., i, k]
            q[3] = m[..., k, j] - m[..., j, k]
            candidates.append(jnp.stack(q, axis=-1))
        candidates.append(jnp.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                                     m[..., 1, 0] - m[..., 0, 1], 1 + trace], axis=-1))
        stacked = jnp.stack(candidates, axis=-2)
        q = jnp.take_along_axis(stacked, choice[..., None, None], axis=-2)[..., 0, :]
        return cls(_normalize(q))

    @classmethod
    def from_euler(cls, seq: str, angles: Array, degrees: bool = False) -> "Rotation":
        """From Euler angles about the axes of ``seq``: lowercase ``"xyz"`` for rotations about
        the fixed (extrinsic) axes, uppercase ``"XYZ"`` for the rotating (intrinsic) ones.

        Raises:
          ValueError: for a malformed sequence or angles of the wrong length.
        """
        axes, extrinsic = _parse_seq(seq)
        angles = jnp.asarray(angles)
        if not jnp.issubdtype(angles.dtype, jnp.inexact):
            angles = angles.astype(jnp.result_type(float))
        if len(axes) == 1 and (angles.ndim == 0 or angles.shape[-1] != 1):
            angles = angles[..., None]
        if angles.shape[-1] != len(axes):
            raise ValueError(f"Expected angles to have shape (..., {len(axes)}), got "
                             f"{angles.shape}")
        if degrees:
            angles = jnp.deg2rad(angles)
        q = _elementary(axes[0], angles[..., 0])
        for n in range(1, len(axes)):
            step = _elementary(axes[n], angles[..., n])
            q = _compose(step, q) if extrinsic else _compose(q, step)
        return cls(q)

    @classmethod
    def identity(cls, num: Optional[int] = None, dtype: Any = float) -> "Rotation":
        """The identity rotation (``num`` of them, or a single one)."""
        q = jnp.zeros((4,) if num is None else (num, 4), dtype=dtype)
        return cls(q.at[..., 3].set(1))

    @classmethod
    def random(cls, random_key: Array, num: Optional[int] = None) -> "Rotation":
        """Uniformly distributed rotations (normalised Gaussian quaternions)."""
        from plax import random
        return cls.from_quat(random.normal(random_key, (4,) if num is None else (num, 4)))

    @classmethod
    def concatenate(cls, rotations: typing.Sequence["Rotation"]) -> "Rotation":
        """One stack of the given rotations (single ones count as stacks of one)."""
        return cls(jnp.concatenate([jnp.atleast_2d(r.quat) for r in rotations]))

    # -------------------------------------------------------------- conversions

    def as_quat(self, canonical: bool = False, scalar_first: bool = False) -> Array:
        """The quaternions (``canonical``: with ``w >= 0``; ``scalar_first``: ``w`` first)."""
        q = _canonical(self.quat) if canonical else self.quat
        return jnp.roll(q, 1, axis=-1) if scalar_first else q

    def as_matrix(self) -> Array:
        """The rotation matrices ``(..., 3, 3)``."""
        x, y, z, w = (self.quat[..., i] for i in range(4))
        rows = [[w * w + x * x - y * y - z * z, 2 * (x * y - z * w), 2 * (x * z + y * w)],
                [2 * (x * y + z * w), w * w - x * x + y * y - z * z, 2 * (y * z - x * w)],
                [2 * (x * z - y * w), 2 * (y * z + x * w), w * w - x * x - y * y + z * z]]
        return jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)

    def as_rotvec(self, degrees: bool = False) -> Array:
        """The rotation vectors ``(..., 3)``, angles in ``[0, pi]``."""
        q = _canonical(self.quat)
        v, w = q[..., :3], q[..., 3]
        angle = 2 * jnp.arctan2(_norm(v), w)
        a2 = angle * angle
        small = angle <= 1e-3
        safe = jnp.where(small, jnp.ones_like(angle), angle)
        # angle / sin(angle/2), by its Taylor series near 0
        scale = jnp.where(small, 2 + a2 / 12 + 7 * a2 * a2 / 2880, safe / jnp.sin(safe / 2))
        rotvec = scale[..., None] * v
        return jnp.rad2deg(rotvec) if degrees else rotvec

    def as_mrp(self) -> Array:
        """The modified Rodrigues parameters ``(..., 3)`` (of the canonical quaternion)."""
        q = _canonical(self.quat)
        return q[..., :3] / (1 + q[..., 3:])

    def as_euler(self, seq: str, degrees: bool = False) -> Array:
        """Euler angles ``(..., 3)`` for the 3-axis sequence ``seq`` (see :meth:`from_euler`):
        the first and third in ``[-pi, pi]``, the middle one in ``[0, pi]`` (symmetric
        sequences such as ``"zxz"``) or ``[-pi/2, pi/2]``. At gimbal lock the third angle is 0.

        Raises:
          ValueError: for a sequence that is not three axes.
        """
        axes, extrinsic = _parse_seq(seq)
        if len(axes) != 3:
            raise ValueError(f"Expected 3 axes, got {seq!r}")
        if not extrinsic:
            axes = axes[::-1]        # intrinsic angles are the extrinsic ones, reversed
        i, j, k = axes
        symmetric = i == k
        if symmetric:
            k = 3 - i - j            # the third, unused axis
        sign = (i - j) * (j - k) * (k - i) // 2   # the permutation's parity (+1 or -1)
        q = self.quat
        qi, qj, qk, qw = q[..., i], q[..., j], q[..., k], q[..., 3]
        if symmetric:
            a, b, c, d = qw, qi, qj, qk * sign
        else:
            # rotate the frame by 45 degrees about j so the sequence becomes symmetric
            a, b, c, d = qw - qj, qi + qk * sign, qj + qw, qk * sign - qi
        middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
        half_sum = jnp.arctan2(b, a)
        half_diff = jnp.arctan2(d, c)
        eps = 1e-7
        at_zero = jnp.abs(middle) <= eps
        at_pi = jnp.abs(middle - math.pi) <= eps
        locked = at_zero | at_pi
        # gimbal lock: only the sum (or difference) is defined; the third angle is set to 0
        locked_first = jnp.where(at_zero, 2 * half_sum,
                                 2 * half_diff * (-1 if extrinsic else 1))
        first = jnp.where(locked, locked_first, half_sum - half_diff)
        third = jnp.where(locked, jnp.zeros_like(first), half_sum + half_diff)
        if not extrinsic:
            first, third = third, first
            first = jnp.where(locked, locked_first, first)
            third = jnp.where(locked, jnp.zeros_like(third), third)
        # the third of the extrinsic order carries the parity sign
        if not symmetric:
            if extrinsic:
                third = third * sign
            else:
                first = jnp.where(locked, first, first * sign)
            middle = middle - math.pi / 2
        angles = jnp.stack([first, middle, third], axis=-1)
        angles = (angles + math.pi) % (2 * math.pi) - math.pi
        return jnp.rad2deg(angles) if degrees else angles

    # -------------------------------------------------------------- operations

    def apply(self, vectors: Array, inverse: bool = False) -> Array:
        """The rotated vectors ``(..., 3)`` (by the inverse rotation with ``inverse``)."""
        m = self.as_matrix()
        if inverse:
            m = jnp.swapaxes(m, -1, -2)
        return jnp.einsum("...ij,...j->...i", m, jnp.asarray(vectors))

    def inv(self) -> "Rotation":
        """The inverse rotation(s)."""
        return Rotation(self.quat * jnp.asarray([-1, -1, -1, 1], dtype=self.quat.dtype))

    def magnitude(self) -> Array:
        """The rotation angle(s), in ``[0, pi]``."""
        q = _canonical(self.quat)
        return 2 * jnp.arctan2(_norm(q[..., :3]), q[..., 3])

    def mean(self, weights: Optional[Array] = None) -> "Rotation":
        """The (weighted) mean rotation: the principal eigenvector of ``sum w q q^T``
        (Markley et al., 2007)."""
        q = jnp.atleast_2d(self.quat)
        w = jnp.ones(q.shape[0], q.dtype) if weights is None else jnp.asarray(weights, q.dtype)
        k = jnp.einsum("n,ni,nj->ij", w, q, q)
        _, vecs = jnp.linalg.eigh(k)
        return Rotation(vecs[:, -1])

    def __mul__(self, other: "Rotation") -> "Rotation":
        """Composition: ``(self * other).apply(v) == self.apply(other.apply(v))``."""
        return Rotation(_compose(self.quat, other.quat))

    def __getitem__(self, index) -> "Rotation":
        if self.single:
            raise TypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[index])

    def __len__(self) -> int:
        if self.single:
            raise TypeError("Single rotation has no len().")
        return self.quat.shape[0]

    @property
    def single(self) -> bool:
        """Whether this is one rotation (not a stack)."""
        return self.quat.ndim == 1


class Slerp(NamedTuple):
    """Spherical linear interpolation between rotations at increasing ``times``, as
    :obj:`scipy.spatial.transform.Slerp` (build it with :meth:`Slerp.init`).

    Example:
      >>> from plax.scipy.spatial.transform import Rotation, Slerp
      >>> rots = Rotation.from_euler("z", jnp.array([[0.0], [90.0]]), degrees=True)
      >>> s = Slerp.init(jnp.array([0.0, 1.0]), rots)
      >>> jnp.round(s(jnp.array([0.5])).as_euler("zyx", degrees=True)[:, 0], 3)  # about z
      Array([45.], dtype=float32)
    """
    times: Array
    timedelta: Array
    rotations: Rotation
    rotvecs: Array

    @classmethod
    def init(cls, times: Array, rotations: Rotation) -> "Slerp":
        """The interpolator through ``rotations`` (a stack of at least two) at ``times``."""
        if rotations.single:
            raise ValueError("`rotations` must be a sequence of rotations.")
        times = jnp.asarray(times)
        if times.ndim != 1 or times.shape[0] != len(rotations):
            raise ValueError(f"Expected times of shape ({len(rotations)},), got {times.shape}")
        if times.shape[0] < 2:
            raise ValueError("`rotations` must contain at least 2 rotations.")
        timedelta = jnp.diff(times)
        steps = Rotation(rotations.quat[:-1]).inv() * Rotation(rotations.quat[1:])
        return cls(times, timedelta, rotations, steps.as_rotvec())

    def __call__(self, times: Array) -> Rotation:
        """The interpolated rotations at ``times`` (within the interpolator's range)."""
        t = jnp.asarray(times)
        flat = jnp.atleast_1d(t)
        idx = jnp.clip(jnp.searchsorted(self.times, flat, side="left") - 1, 0,
                       self.times.shape[0] - 2)
        alpha = (flat - self.times[idx]) / self.timedelta[idx]
        base = Rotation(self.rotations.quat[idx])
        out = base * Rotation.from_rotvec(self.rotvecs[idx] * alpha[:, None])
        return Rotation(out.quat.reshape(t.shape + (4,)))
