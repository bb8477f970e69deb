"""The samplers' fused multiply-add: ``a * b + c`` rounded once, as XLA's contraction of
``x * y + z`` into one hardware FMA rounds it, so that plax's samplers give JAX's bits (e.g.
``uniform(minval=..., maxval=...)``).

It is the internal primitive :data:`plax.lax.fused_multiply_add.fma_p`: each backend computes
it exactly with its own FMA (or, on NumPy, an exact emulation), and its derivative is that of
``a * b + c``.
"""
from __future__ import annotations

from plax.lax.fused_multiply_add import fma

__all__ = ["fma"]
