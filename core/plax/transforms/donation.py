"""Buffer donation for ``jit(..., donate_argnums=/donate_argnames=)``, as JAX does it on CPU.

XLA aliases a donated input to an output of the same shape and dtype; JAX then marks that
input deleted (using it raises ``RuntimeError``) and warns about donated inputs no output
could take. plax's kernels allocate their outputs, so no memory is reused, but the
observable contract is JAX's: the same arguments are deleted and the same warning given.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np

from plax.array import Array


def long_type(aval) -> str:
    """``float32[3,4]``: how JAX names an array in its donation messages."""
    return f"{aval.dtype.name}[{','.join(str(d) for d in aval.shape)}]"


class _DeletedArray(Array):
    """What a donated single-device Array becomes: every read of its buffer raises."""
    __slots__ = ()

    @property
    def _buf(self):
        raise RuntimeError(f"Array has been deleted with shape={long_type(self.aval)}.")

    def is_deleted(self) -> bool:
        return True

    def delete(self) -> None:
        pass
    # (repr and str read the buffer, so they raise as JAX's do)


def mark_deleted(array: Array) -> None:
    """Makes a single-device ``array`` deleted: its buffer is let go, and every later read
    raises JAX's RuntimeError (``Array has been deleted with shape=float32[3].``)."""
    array._buf = None
    array.__class__ = _DeletedArray


def check_no_donated_reuse(leaves: list, donated: list[bool],
                           out_avals: Callable[[], list]) -> None:
    """JAX's runtime error for a call that donates a buffer it also reads: an argument leaf
    given twice (``f(donate(a), a)`` or ``f(a, donate(a))``) where the donation is usable
    (some output of its shape and dtype can take it, in argument order, as XLA aliases).

    Args:
      leaves: the flattened dynamic arguments of the call.
      donated: per leaf, whether its argument is donated.
      out_avals: gives the abstract values of the call's outputs (called only when some
        argument is given twice).

    Raises:
      JaxRuntimeError: naming the flattened argument and its first use, in XLA's words.
    """
    first: dict = {}
    repeated = False
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Array):
            repeated |= first.setdefault(id(leaf), i) != i
    if not repeated:
        return  # the common case: no argument given twice
    usable = _usable(leaves, donated, out_avals())
    for j, leaf in enumerate(leaves):
        i = first.get(id(leaf)) if isinstance(leaf, Array) else None
        if i is None or i == j or not (usable[i] or usable[j]):
            continue
        from plax.errors import JaxRuntimeError
        # JAX warns about the donations no output takes while compiling, before the run fails
        _warn_unusable([long_type(x.aval) for x, flag, ok in zip(leaves, donated, usable)
                        if flag and isinstance(x, Array) and not ok], stacklevel=5)
        where = f"(flattened argument {j}, replica 0, partition 0, first use: {i})"
        if usable[i]:
            raise JaxRuntimeError(
                "INVALID_ARGUMENT: Attempt to use a buffer that was previously donated in the "
                f"same call to Execute() {where}. Toy example for this bug: `f(donate(a), a)`.")
        raise JaxRuntimeError(
            "INVALID_ARGUMENT: Attempt to donate a buffer which is also used by the same call "
            f"to Execute() {where}. Toy example for this bug: `f(a, donate(a))`.")


def _usable(leaves: list, donated: list[bool], out_avals: list) -> list[bool]:
    """Per leaf: whether its donation finds an output of its shape and dtype (each output
    taken once, in argument order; a leaf given twice is donated once)."""
    free: dict = {}
    for a in out_avals:
        key = (a.shape, a.dtype)
        free[key] = free.get(key, 0) + 1
    out, seen = [], set()
    for leaf, flag in zip(leaves, donated):
        ok = bool(flag) and isinstance(leaf, Array) and id(leaf) not in seen
        if ok:
            key = (leaf.aval.shape, leaf.aval.dtype)
            ok = free.get(key, 0) > 0
            if ok:
                free[key] -= 1
                seen.add(id(leaf))
        out.append(ok)
    return out


def donate(leaves: list, donated: list[bool], outputs: Any, *,
           sharded_only: bool = False) -> None:
    """Deletes each donated Array some output could alias (each output at most once, in
    argument order) and warns, as JAX does, about the rest.

    JAX 0.10.2's rule, on each device's buffer (a sharded array's shard, as the call's
    outputs are placed: ``jit(out_shardings=)`` included): a donated argument aliases an
    output whose shard has its shape and dtype; failing that, one whose shard has as many
    elements (JAX hands such a donation to XLA, which reuses the buffer -- deleting the
    argument -- when the byte sizes agree, and otherwise keeps it without a warning).
    Arguments no output matches either way are named in the warning (by their shard's type).

    Args:
      leaves: the flattened dynamic arguments of the call.
      donated: per leaf, whether its argument is donated.
      outputs: the call's results (a pytree).
      sharded_only: ``pmap``'s rule: single-device arguments are copied to the devices
        first, so only already-sharded ones can be donated (the others silently stay).
    """
    from plax import tree_util
    outs = [o for o in tree_util.tree_leaves(outputs) if isinstance(o, Array)]
    out_shards = [_shard_aval(o) for o in outs]
    taken = [False] * len(outs)
    out_ids = {id(o) for o in outs}
    candidates, seen = [], set()
    for leaf, flag in zip(leaves, donated):
        if not flag or not isinstance(leaf, Array) or id(leaf) in seen:
            continue
        seen.add(id(leaf))
        sharded = _is_sharded(leaf)
        if sharded_only and not sharded:
            continue
        # an output that is the argument itself is never deleted under the caller
        deletable = id(leaf) not in out_ids and (sharded or type(leaf) is Array)
        candidates.append((leaf, sharded, _shard_aval(leaf), deletable))
    unmatched = []
    for leaf, sharded, (shape, dtype), deletable in candidates:  # aliases: shape and dtype
        k = _first_free(out_shards, taken, lambda o: o == (shape, dtype)) if deletable \
            else None
        if k is None:
            unmatched.append((leaf, sharded, (shape, dtype), deletable))
            continue
        taken[k] = True
        _delete(leaf, sharded)
    unusable = []
    for leaf, sharded, (shape, dtype), deletable in unmatched:  # XLA's: as many elements
        size = int(np.prod(shape, dtype=np.int64))
        k = _first_free(out_shards, taken,
                        lambda o: int(np.prod(o[0], dtype=np.int64)) == size) \
            if deletable else None
        if k is None:
            unusable.append(_type_name(shape, dtype))
            continue
        taken[k] = True
        if getattr(out_shards[k][1], "itemsize", None) == getattr(dtype, "itemsize", 0):
            _delete(leaf, sharded)
    _warn_unusable(unusable, stacklevel=5)


def _shard_aval(x: Array) -> tuple:
    """(shape, dtype) of the buffer ``x`` holds on each device."""
    if _is_sharded(x):
        return tuple(x.sharding.shard_shape(x.aval.shape)), x.aval.dtype
    return tuple(x.aval.shape), x.aval.dtype


def _first_free(shards: list, taken: list, matches) -> int | None:
    for k, o in enumerate(shards):
        if not taken[k] and matches(o):
            return k
    return None


def _delete(leaf: Array, sharded: bool) -> None:
    if sharded:
        leaf.delete()
    else:
        mark_deleted(leaf)


def _type_name(shape: tuple, dtype) -> str:
    """``float32[4,2]``: how JAX names a donated buffer it could not use."""
    return f"{getattr(dtype, 'name', dtype)}[{','.join(str(d) for d in shape)}]"


def _is_sharded(leaf: Array) -> bool:
    return type(leaf) is not Array and hasattr(leaf, "_pieces")


def _warn_unusable(types: list[str], stacklevel: int) -> None:
    if types:
        warnings.warn("Some donated buffers were not usable: " + ", ".join(types) + ".\n"
                      "See an explanation at "
                      "https://docs.jax.dev/en/latest/faq.html#buffer-donation.",
                      stacklevel=stacklevel)
