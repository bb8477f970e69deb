"""The mesh a ``jit`` was traced under, recorded on its equation (JAX 0.10's ``ctx_mesh``).

``make_jaxpr`` prints a ``jit`` equation traced while a mesh is set (:func:`plax.set_mesh`)
with ``ctx_mesh=Mesh('X': 2, 'Y': 4, axis_types=(Explicit, Explicit))``, as JAX does; with
no mesh set the parameter is absent, so programs that never set one are unchanged.
"""
from __future__ import annotations

from typing import Any


class ContextMesh:
    """The (abstract) mesh current when a call was traced: compared and hashed as its
    :class:`~plax.sharding.AbstractMesh`, printed as JAX prints ``ctx_mesh``."""

    __slots__ = ("abstract_mesh", "_text")

    def __init__(self, mesh):
        self.abstract_mesh = mesh.abstract_mesh
        self._text = str(mesh)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ContextMesh) and other.abstract_mesh == self.abstract_mesh

    def __hash__(self) -> int:
        return hash(self.abstract_mesh)

    def __str__(self) -> str:
        return self._text

    __repr__ = __str__


def context_mesh_params() -> dict:
    """``{"ctx_mesh": ContextMesh}`` while a mesh is set, else ``{}``: the parameter a
    ``jit`` equation records.

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     context_mesh_params()
      {'ctx_mesh': Mesh('x': 1, axis_types=(Explicit,))}
    """
    from plax.sharding import get_mesh
    mesh = get_mesh()
    return {} if mesh is None else {"ctx_mesh": ContextMesh(mesh)}
