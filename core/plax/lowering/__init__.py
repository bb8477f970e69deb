"""What every compiling backend shares: liveness, host literals, fusion clusters, the emitter
interface, jaxpr rewrites before lowering, and the driver that turns a jaxpr into a program with per-equation fallback.

A backend implements an :class:`Emitter` and calls :func:`lower` from its ``compile``; see
docs/plugin_guide.md. The submodules load on first use of a name (``import plax`` only needs
:mod:`plax.lowering.fusion`, where primitives declare their fusion kinds).
"""
from __future__ import annotations

import importlib

_WHERE = {
    "Emitter": "emitter", "Step": "emitter", "fresh_result": "emitter",
    "returns_fresh": "emitter", "updates_in_place": "emitter", "takes_out": "emitter",
    "update_target": "emitter",
    "PlaxFallbackWarning": "fallback", "reference_backend": "fallback",
    "reference_kernel": "fallback",
    "BROADCAST": "fusion", "ELEMENTWISE": "fusion", "REDUCTION": "fusion", "INDEX": "fusion",
    "ARG_REDUCTION": "fusion", "CUMULATIVE": "fusion", "STRUCTURAL": "fusion",
    "Cluster": "fusion", "FusionOptions": "fusion", "HorizontalGroup": "fusion",
    "horizontal_groups": "fusion",
    "find_clusters": "fusion", "fusion_kind": "fusion", "fusible_primitives": "fusion", "order_for_fusion": "fusion",
    "inserts_unit_axes": "fusion", "integer_exponent": "fusion",
    "register_fusible": "fusion", "sub_cluster": "fusion",
    "dead_after": "liveness", "last_uses": "liveness", "reads_before_updates": "liveness",
    "literal_value": "literals",
    "numpy_errors_off": "host",
    "explicit_broadcasts": "simplify", "fold_transposed_products": "simplify",
    "fold_scalar_constants": "simplify",
    "BodyRunner": "bodies", "body_kernel": "bodies", "body_step": "bodies",
    "host_kernel": "bodies", "register_body_kernel": "bodies", "runner_for": "bodies",
    "call_body": "calls", "spliced_calls": "calls", "lower": "program", "fusion_units": "program", "register_call_primitive": "calls",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'plax.lowering' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"plax.lowering.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
