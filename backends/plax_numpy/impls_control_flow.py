"""Kernels of the control-flow primitives (cond, while, scan) over host buffers.

They are the core's host loops (:mod:`plax.lowering.bodies`) with the bodies compiled by
the reference backend on the first CPU device: what ``backend.execute`` and any backend
reusing this table on host arrays get. Eager dispatch and compiled programs do not use
them: they bind the loops to the backend and device actually running the equation (the
NumPy backend's emitter declines these primitives for that reason).
"""
from __future__ import annotations

from plax import lax
from plax.lowering.bodies import host_kernel
from plax_numpy.registry import IMPLS

for _prim in (lax.cond_p, lax.while_p, lax.scan_p):
    IMPLS[_prim] = host_kernel(_prim)
