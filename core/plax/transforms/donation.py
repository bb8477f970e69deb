"""Buffer donation for ``jit(..., donate_argnums=/donate_argnames=)``, as JAX does it on CPU.

XLA aliases a donated input to an output of the same shape and dtype; JAX then marks that
input deleted (using it raises ``RuntimeError``) and warns about donated inputs no output
could take. plax's kernels allocate their outputs, so no memory is reused, but the
observable contract is JAX's: the same arguments are deleted and the same warning given.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

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

    A single-device argument aliases an output of its shape and dtype; a sharded one (several
    devices, or a NamedSharding) an output of its shape, dtype and sharding, as XLA aliases
    each device's shard (the warning then names the shard's type, as JAX's does).

    Args:
      leaves: the flattened dynamic arguments of the call.
      donated: per leaf, whether its argument is donated.
      outputs: the call's results (a pytree).
      sharded_only: ``pmap``'s rule: single-device arguments are copied to the devices
        first, so only already-sharded ones can be donated (the others silently stay).
    """
    from plax import tree_util
    outs = [o for o in tree_util.tree_leaves(outputs) if isinstance(o, Array)]
    taken = [False] * len(outs)
    out_ids = {id(o) for o in outs}
    unusable, done = [], set()
    for leaf, flag in zip(leaves, donated):
        if not flag or not isinstance(leaf, Array) or id(leaf) in done:
            continue
        sharded = _is_sharded(leaf)
        if sharded_only and not sharded:
            continue
        k = _alias_for(leaf, sharded, outs, taken)
        # an output that is the argument itself is never deleted under the caller
        if k is not None and id(leaf) not in out_ids and (sharded or type(leaf) is Array):
            taken[k] = True
            done.add(id(leaf))
            if sharded:
                leaf.delete()
            else:
                mark_deleted(leaf)
        else:
            unusable.append(_shard_type(leaf) if sharded else long_type(leaf.aval))
    _warn_unusable(unusable, stacklevel=5)


def _is_sharded(leaf: Array) -> bool:
    return type(leaf) is not Array and hasattr(leaf, "_pieces")


def _alias_for(leaf: Array, sharded: bool, outs: list, taken: list) -> int | None:
    """The first output not yet taken that ``leaf``'s buffer could become."""
    key = (leaf.aval.shape, leaf.aval.dtype)
    for k, o in enumerate(outs):
        if taken[k] or (o.aval.shape, o.aval.dtype) != key:
            continue
        if not sharded or (_is_sharded(o) and o.sharding == leaf.sharding):
            return k
    return None


def _shard_type(leaf: Array) -> str:
    """``float32[2]``: the type of one shard of a sharded array (JAX names donated sharded
    arrays it cannot alias by their shards)."""
    shape = leaf.sharding.shard_shape(leaf.aval.shape)
    return f"{leaf.aval.dtype.name}[{','.join(str(d) for d in shape)}]"


def _warn_unusable(types: list[str], stacklevel: int) -> None:
    if types:
        warnings.warn("Some donated buffers were not usable: " + ", ".join(types) + ".\n"
                      "See an explanation at "
                      "https://docs.jax.dev/en/latest/faq.html#buffer-donation.",
                      stacklevel=stacklevel)
