"""plax.scipy.sparse: the iterative solvers of ``jax.scipy.sparse.linalg`` (``cg``, ``bicgstab``,
``gmres``)."""
from plax.scipy.sparse import linalg

__all__ = ["linalg"]
