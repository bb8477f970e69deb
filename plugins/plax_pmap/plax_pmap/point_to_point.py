"""``lax.psend`` / ``lax.precv``: JAX 0.10.2's point-to-point collectives, for the pairs plax
can run soundly -- a ``precv`` given the token of the ``psend`` it matches.

In JAX a ``psend`` on the sources and a ``precv`` on the destinations of the same
``(source, destination)`` pairs are XLA Send/Recv instructions, matched by the order in which
the devices post them; the token is only an ordering handle (``precv`` may take
``lax.create_token()``, and JAX's pipelining guide receives, at the end of one loop
iteration, what the other device sends at the start of the next). plax's pmap/shard_map
runs a program under ``jit`` (and any program with collectives inside ``scan``/``while``) as
one ``vmap`` in which every member moves in lockstep: a receive whose data another member
sends *later* in the program cannot be expressed there (nothing has produced it when the
receiving member reaches it), and the device threads, where it could be (a queue per pair),
run only eager, loop-free programs. So plax pairs them through the token instead: the token
``psend`` returns carries the sent values (:class:`SendToken`, a pytree, so it passes through
``jit``, ``optimization_barrier`` and loops), and ``precv`` takes them from it. Every
pair whose token reaches its ``precv`` -- JAX's ``precv(psend(x, ...), ...)`` pattern --
gives JAX's values in every formulation (threads, vmap, under ``jit``, ``grad``);
anything else (a token of another psend, of another axis or permutation, or no token) is a
clear error, never silently wrong. plax has no ``lax.create_token`` (docs/design_decisions.md).

Values: destination ``d`` of a pair ``(s, d)`` receives source ``s``'s ``x``; a member that
no pair names as destination receives zeros (as ``ppermute``, which a send is computed with).
"""
from __future__ import annotations

from typing import Any, Hashable, Sequence

import numpy as np

from plax import tree_util
from plax_pmap.axes import as_axes

__all__ = ["SendToken", "psend", "precv"]


@tree_util.register_pytree_node_class
class SendToken:
    """What :func:`psend` returns for one array: the ordering token of JAX's ``psend``,
    which in plax also carries the values on their way (see the module docstring). Pass it
    to the matching :func:`precv`.

    Attributes:
      axes: the axis names of the send.
      perm: its ``(source, destination)`` pairs.
    """

    __slots__ = ("_data", "axes", "perm")

    def __init__(self, data: Any, axes: tuple, perm: tuple):
        self._data, self.axes, self.perm = data, axes, perm

    def tree_flatten(self):
        return (self._data,), (self.axes, self.perm)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children[0], *aux)

    def __repr__(self) -> str:
        name = self.axes if len(self.axes) > 1 else self.axes[0]
        return f"SendToken(axis_name={name!r}, perm={list(self.perm)})"


def _pairs(perm) -> tuple:
    try:
        return tuple((int(s), int(d)) for s, d in perm)
    except (TypeError, ValueError):
        raise ValueError(f"perm must be a list of (source, destination) pairs of ints, got "
                         f"{perm!r}") from None


def psend(x: Any, axis_name: Hashable | Sequence[Hashable],
          perm: Sequence[tuple[int, int]]) -> Any:
    """Sends ``x`` from source to destination for each ``(source, destination)`` pair of
    ``perm`` (JAX's ``lax.psend``, an analogue of XLA's Send); returns the token(s) for the
    matching :func:`precv`.

    Args:
      x: a pytree of arrays.
      axis_name: the name (or tuple of names) of the mapped axis.
      perm: ``(source, destination)`` pairs of axis positions, no source or destination
        twice.

    Returns:
      ``x``'s structure, each leaf a :class:`SendToken`.

    Raises:
      ValueError: a repeated or out-of-range position in ``perm``.
      NameError: an unbound axis name.

    Example:
      >>> def f(x):
      ...     token = plax.lax.psend(x, "i", [(0, 1)])
      ...     return plax.lax.precv(token, plax.ShapeDtypeStruct(x.shape, x.dtype), "i",
      ...                           [(0, 1)])
      >>> plax.vmap(f, axis_name="i")(jnp.array([1.0, 2.0]))
      Array([0., 1.], dtype=float32)
    """
    from plax_pmap.collectives import ppermute
    axes = as_axes(axis_name)
    pairs = _pairs(perm)
    return tree_util.tree_map(lambda leaf: SendToken(ppermute(leaf, axes, pairs), axes, pairs),
                              x)


def precv(token: SendToken, out_shape: Any, axis_name: Hashable | Sequence[Hashable],
          perm: Sequence[tuple[int, int]]) -> Any:
    """Receives, on each destination of ``perm``, what its source sent with the matching
    :func:`psend` (JAX's ``lax.precv``, an analogue of XLA's Recv); members that are no
    destination get zeros.

    Args:
      token: the token the matching ``psend`` returned (see the module docstring for why
        plax needs that one).
      out_shape: a ``ShapeDtypeStruct`` (or array) with the result's shape and dtype.
      axis_name: the psend's axis name(s).
      perm: the psend's ``(source, destination)`` pairs.

    Returns:
      An array of ``out_shape``'s shape and dtype.

    Raises:
      TypeError: ``token`` is not a psend's token (e.g. a pipeline receiving what a later
        psend sends, which plax cannot run: use ``ppermute``), or ``out_shape`` is not the
        sent value's shape and dtype.
      ValueError: ``axis_name`` or ``perm`` differ from the psend's.
    """
    axes = as_axes(axis_name)
    pairs = _pairs(perm)
    if not isinstance(token, SendToken):
        raise TypeError(
            f"precv: plax pairs a precv with its psend through the token, so token must be "
            f"the SendToken that psend returned, got {type(token).__name__}. A precv whose "
            "data a psend sends later in the program (or another psend than the one whose "
            "token it has) is not supported: plax runs jit(shard_map) in lockstep over the "
            "members; use lax.ppermute for such exchanges")
    if token.axes != axes or token.perm != pairs:
        raise ValueError(f"precv over axis {axis_name!r} with perm {list(pairs)} does not "
                         f"match its psend's axis {token.axes if len(token.axes) > 1 else token.axes[0]!r} "
                         f"and perm {list(token.perm)}: a send and its receive name the same "
                         "pairs")
    data = token._data
    shape, dtype = tuple(getattr(out_shape, "shape", ())), getattr(out_shape, "dtype", None)
    if dtype is None or shape != tuple(data.shape) or np.dtype(dtype) != data.dtype:
        raise TypeError(f"precv: out_shape {shape}/{dtype} is not the shape and dtype the "
                        f"matching psend sent, {tuple(data.shape)}/{data.dtype}")
    return data
