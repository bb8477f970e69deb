"""Every primitive's conformance spec, by family, and the parametrisations built from them."""
from __future__ import annotations

import pytest

from . import spec_dot, spec_elementwise, spec_indexing, spec_random, spec_reductions, spec_shape
from . import spec_callbacks
from . import spec_fft
from . import spec_convolution
from . import spec_top_k
from . import spec_precision
from . import spec_control_flow
from . import spec_linalg
from . import spec_special
from . import spec_fma
from .harness import Spec, needs_x64

FAMILIES: dict[str, list[Spec]] = {
    "elementwise": spec_elementwise.SPECS,
    "shape": spec_shape.SPECS,
    "indexing": spec_indexing.SPECS,
    "reductions": spec_reductions.SPECS,
    "dot": spec_dot.SPECS,
    "random": spec_random.SPECS,
    "callbacks": spec_callbacks.SPECS,
    "fft": spec_fft.SPECS,
    "convolution": spec_convolution.SPECS,
    "windows": spec_convolution.WINDOW_SPECS,
    "top_k": spec_top_k.SPECS,
    "precision": spec_precision.SPECS,
    "control_flow": spec_control_flow.SPECS,
    "linalg": spec_linalg.SPECS,
    "special": spec_special.SPECS,
    "fma": spec_fma.SPECS,
}

ALL_SPECS: list[Spec] = [s for family in FAMILIES.values() for s in family]
BY_PRIMITIVE = {s.prim: s for s in ALL_SPECS}


def value_params(specs: list[Spec]) -> list:
    """``(spec, dtype)`` pairs, marked ``x64`` when the case needs 64-bit types."""
    out = []
    for s in specs:
        for d in s.dtypes:
            marks = [pytest.mark.x64] if (s.x64 or needs_x64(d)) else []
            out.append(pytest.param(s, d, id=f"{s.name}-{d}", marks=marks))
    return out


def spec_params(specs: list[Spec], which: str) -> list:
    """Specs to run one transform check on: ``grad`` (differentiable), ``zero`` (declared
    non-differentiable) or ``vmap`` (anything with operands)."""
    keep = {
        "grad": lambda s: s.grads is not None,
        "zero": lambda s: s.nondiff and not s.no_operands,
        "vmap": lambda s: not s.no_operands,
    }[which]
    return [pytest.param(s, id=s.name, marks=[pytest.mark.x64] if s.x64 else [])
            for s in specs if keep(s)]


def linearization_params(specs: list[Spec]) -> list:
    """``(spec, dtype)`` for the JVP/VJP consistency check: differentiable specs, in float32
    and complex64 where accepted."""
    return [pytest.param(s, d, id=f"{s.name}-{d}") for s in specs if s.grads is not None
            for d in ("float32", "complex64") if d in s.dtypes]
