"""Control-flow primitives holding sub-jaxprs: ``cond`` (with ``switch``), ``while`` (with
``while_loop`` and ``fori_loop``) and ``scan`` (with ``map``)."""
from plax.lax.control_flow.cond import cond, cond_p, switch
from plax.lax.control_flow.loops import fori_loop, while_loop, while_p
from plax.lax.control_flow.scan import map, scan, scan_p

__all__ = ["cond", "cond_p", "switch", "fori_loop", "while_loop", "while_p", "map", "scan",
           "scan_p"]
