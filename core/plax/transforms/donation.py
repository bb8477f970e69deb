"""Buffer donation for ``jit(..., donate_argnums=/donate_argnames=)``, as JAX does it on CPU.

XLA aliases a donated input to an output of the same shape and dtype; JAX then marks that
input deleted (using it raises ``RuntimeError``) and warns about donated inputs no output
could take. plax's kernels allocate their outputs, so no memory is reused, but the
observable contract is JAX's: the same arguments are deleted and the same warning given.
"""
from __future__ import annotations

import warnings
from typing import Any

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

    def __repr__(self) -> str:
        return f"<deleted Array {long_type(self.aval)}>"

    __str__ = __repr__


def donate(leaves: list, donated: list[bool], outputs: Any) -> None:
    """Deletes each donated Array some output of its shape and dtype could alias (each
    output at most once, in argument order) and warns, as JAX does, about the rest."""
    from plax import tree_util
    free: dict = {}
    for o in tree_util.tree_leaves(outputs):
        if isinstance(o, Array):
            key = (o.aval.shape, o.aval.dtype)
            free[key] = free.get(key, 0) + 1
    out_ids = {id(o) for o in tree_util.tree_leaves(outputs)}
    unusable, done = [], set()
    for leaf, flag in zip(leaves, donated):
        if not flag or not isinstance(leaf, Array) or id(leaf) in done:
            continue
        key = (leaf.aval.shape, leaf.aval.dtype)
        # only plain single-device arrays are marked (sharded ones keep their buffers); an
        # output that is the argument itself is never deleted under the caller
        if free.get(key, 0) and type(leaf) is Array and id(leaf) not in out_ids:
            free[key] -= 1
            done.add(id(leaf))
            leaf.__class__ = _DeletedArray
        else:
            unusable.append(long_type(leaf.aval))
    if unusable:
        warnings.warn("Some donated buffers were not usable: " + ", ".join(unusable) + ".\n"
                      "See an explanation at "
                      "https://docs.jax.dev/en/latest/faq.html#buffer-donation.", stacklevel=4)
