"""What every compiling backend shares: liveness, host literals, fusion clusters, the emitter
interface, and the driver that turns a jaxpr into a program with per-equation fallback.

A backend implements an :class:`Emitter` and calls :func:`lower` from its ``compile``; see
docs/plugin_guide.md.
"""
from plax.lowering.emitter import Emitter, Step
from plax.lowering.fallback import PlaxFallbackWarning, reference_backend, reference_kernel
from plax.lowering.fusion import (BROADCAST, ELEMENTWISE, REDUCTION, Cluster, find_clusters,
                                  fusion_kind, register_fusible)
from plax.lowering.liveness import dead_after, last_uses
from plax.lowering.literals import literal_value
from plax.lowering.program import call_body, lower, register_call_primitive

__all__ = ["Emitter", "Step", "PlaxFallbackWarning", "reference_backend", "reference_kernel",
           "BROADCAST", "ELEMENTWISE", "REDUCTION", "Cluster", "find_clusters", "fusion_kind",
           "register_fusible", "dead_after", "last_uses", "literal_value", "call_body", "lower",
           "register_call_primitive"]
