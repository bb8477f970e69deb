"""plax.scipy.spatial: rotations (``plax.scipy.spatial.transform.Rotation`` and ``Slerp``)."""
from plax.scipy.spatial import transform

__all__ = ["transform"]
