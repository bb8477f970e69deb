"""``lax.ragged_all_to_all``: the ragged version of ``all_to_all`` (JAX 0.10.2's semantics).

Each member sends slices of the leading axis of its ``operand`` (``input_offsets[i]``,
``send_sizes[i]``) to member ``i // (K // n)`` of its group (``K`` offsets, ``n`` members), where
they are written at ``output_offsets[i]`` (an offset on the *receiver*) into a copy of the
receiver's ``output``; the receiver's ``recv_sizes[j]`` says how many rows of its ``j``-th
incoming slice (``j // (K // n)`` the sender) it writes.

A composition, not a primitive of its own (JAX's ``ragged_all_to_all_p`` is absent from
plax, listed in docs/design_decisions.md): every member gathers the group's operands and
offsets (``all_gather``) and picks its rows with one ``take`` and one ``where``. That reuses
the collectives' JVP, transpose and batching rules and the device runtime's exchange, so
``grad``, ``jit`` and ``vmap(axis_name=...)`` work, and with the devices' shared host memory the
extra traffic of gathering whole operands is a copy; a primitive would need its own runtime
exchange and rules for the same values. (XLA:CPU cannot run JAX's primitive at all: its
``ragged-all-to-all`` opcode is GPU/TPU only.)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax_pmap.collectives import _gathered, _group_size, _groups
from plax_pmap.axes import as_axes

__all__ = ["ragged_all_to_all"]

_INDEX_ARGS = ("input_offsets", "send_sizes", "output_offsets", "recv_sizes")


def _check(operand, output, index_args: dict, n: int) -> int:
    """JAX's checks (and the ones XLA would make later, said here): returns ``K``."""
    for name, v in index_args.items():
        if not np.issubdtype(v.dtype, np.integer):
            raise ValueError(f"ragged_all_to_all {name} must be integer type, got {v.dtype}.")
        if v.ndim != 1 or v.shape[0] < 1:
            raise ValueError(f"ragged_all_to_all {name} must be rank 1 with positive dimension "
                             f"size, but got shape {tuple(v.shape)}")
    lengths = {name: v.shape[0] for name, v in index_args.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"ragged_all_to_all: input_offsets, send_sizes, output_offsets and "
                         f"recv_sizes must have the same length, got {lengths}")
    k = lengths["input_offsets"]
    if k % n:
        raise ValueError(f"ragged_all_to_all: the offsets and sizes have length {k}, which "
                         f"must be a multiple of the number of members taking part, {n}")
    if operand.ndim < 1 or output.ndim < 1:
        raise ValueError("ragged_all_to_all: operand and output need a leading (ragged) axis, "
                         f"got shapes {tuple(operand.shape)} and {tuple(output.shape)}")
    if operand.shape[1:] != output.shape[1:]:
        raise ValueError(f"ragged_all_to_all: operand {tuple(operand.shape)} and output "
                         f"{tuple(output.shape)} must agree past their leading axis")
    if operand.dtype != output.dtype:
        raise TypeError(f"ragged_all_to_all: operand ({operand.dtype}) and output "
                        f"({output.dtype}) must have the same dtype")
    return k


def ragged_all_to_all(operand: Any, output: Any, input_offsets: Any, send_sizes: Any,
                      output_offsets: Any, recv_sizes: Any, *, axis_name,
                      axis_index_groups=None) -> Any:
    """Ragged ``all_to_all`` (JAX's ``lax.ragged_all_to_all``): ``output`` with the slices
    the group's members send to this member written into it.

    Member ``s`` sends ``operand[input_offsets[i]:input_offsets[i] + send_sizes[i]]`` to
    member ``i // (K // n)``, which writes it at ``output_offsets[i]`` (an offset on the
    receiver). A receiver writes ``recv_sizes[j]`` rows of its ``j``-th incoming slice (from
    member ``j // (K // n)``); ``send_sizes`` and ``recv_sizes`` should agree
    (``send_sizes == all_to_all(recv_sizes, axis_name, 0, 0, tiled=True)``). Rows nobody
    writes keep ``output``'s values; where slices overlap the later one wins.

    Args:
      operand: ``[N, ...]`` the concatenated (possibly padded) slices to send.
      output: ``[M, ...]`` what the result starts from (same dtype and trailing shape).
      input_offsets, send_sizes, output_offsets, recv_sizes: ``[K]`` integers, ``K`` a
        multiple of the number of members ``n``.
      axis_name: the name (or tuple of names) of the mapped axis.
      axis_index_groups: None, or groups of axis positions of equal size covering each
        position once; members exchange within their group (numbered by place in it).

    Returns:
      ``[M, ...]``, ``output`` updated with the received slices.

    Raises:
      ValueError: non-integer or non-1-D offsets/sizes, lengths that differ or are not a
        multiple of ``n``, operand and output shapes that disagree past the leading axis.
      TypeError: operand and output of different dtypes.
      NameError: an unbound axis name.

    Example (two members, as in JAX's docstring):
      >>> f = lambda *a: plax.lax.ragged_all_to_all(*a, axis_name="i")
      >>> plax.vmap(f, axis_name="i")(
      ...     jnp.array([[1., 2., 2.], [3., 4., 0.]]), jnp.zeros((2, 4)),
      ...     jnp.array([[0, 1], [0, 1]]), jnp.array([[1, 2], [1, 1]]),
      ...     jnp.array([[0, 0], [1, 2]]), jnp.array([[1, 1], [2, 1]]))
      Array([[1., 3., 0., 0.],
             [2., 2., 4., 0.]], dtype=float32)
    """
    axes = as_axes(axis_name)
    groups = _groups(axis_index_groups, axes, "ragged_all_to_all")
    n = _group_size(axes, groups)  # NameError for an unbound name
    operand, output = jnp.asarray(operand), jnp.asarray(output)
    index_args = {name: jnp.asarray(v) for name, v in zip(
        _INDEX_ARGS, (input_offsets, send_sizes, output_offsets, recv_sizes))}
    k = _check(operand, output, index_args, n)
    per = k // n
    i32 = lambda v: lax.convert_element_type(v, np.int32)
    operands, rank = _gathered(operand, axes, groups)                 # [n, N, ...]
    starts = _gathered(i32(index_args["input_offsets"]), axes, groups)[0]   # [n, K]
    offsets = _gathered(i32(index_args["output_offsets"]), axes, groups)[0]
    # the slices addressed to me: columns rank*per .. rank*per+per-1 of every sender's
    # tables, in the order (sender, j) = my incoming slice number i = sender*per + j
    mine = rank * np.int32(per) + jnp.arange(per, dtype=np.int32)
    starts = jnp.take(starts, mine, axis=1).reshape(k)
    offsets = jnp.take(offsets, mine, axis=1).reshape(k)
    sizes = i32(index_args["recv_sizes"])
    n_in, m_out = operand.shape[0], output.shape[0]
    rows = jnp.arange(m_out, dtype=np.int32)
    covers = (offsets[:, None] <= rows) & (rows < (offsets + sizes)[:, None])   # [K, M]
    written = jnp.any(covers, axis=0)
    # the last slice covering a row writes it (JAX's pseudocode writes them in order)
    last = np.int32(k - 1) - jnp.argmax(covers[::-1], axis=0).astype(np.int32)
    sender = jnp.asarray(np.arange(k, dtype=np.int32) // per)
    source = jnp.clip(starts[last] + rows - offsets[last], 0, max(n_in - 1, 0))
    flat = operands.reshape((n * n_in,) + tuple(operand.shape[1:]))
    values = jnp.take(flat, sender[last] * np.int32(n_in) + source, axis=0)      # [M, ...]
    mask = written.reshape((m_out,) + (1,) * (output.ndim - 1))
    return jnp.where(mask, values, output)
