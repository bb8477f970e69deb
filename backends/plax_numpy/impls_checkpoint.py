"""``name`` (from ``checkpoint_name``): the identity on the value it tags."""
from __future__ import annotations

from plax.transforms.checkpoint import name_p
from plax_numpy.registry import impl


@impl(name_p)
def name(x, *, name):
    return x
