"""Every primitive of plax.lax is covered: it has a conformance spec, a JVP rule (a zero one
when declared non-differentiable, which is checked here), a batching rule, and an
implementation in the backend under test; and its abstract eval rejects every dtype its spec
does not list, naming that dtype."""
from __future__ import annotations

import numpy as np
import pytest

from plax import lax
from plax.backend import UnsupportedPrimitiveError
from plax.core import registry
from plax.core.primitive import Primitive
from plax.core.shaped_array import ShapedArray

from .harness import ALL, check_zero_tangent, dt
from .specs import ALL_SPECS, BY_PRIMITIVE, spec_params


def lax_primitives() -> list[Primitive]:
    """Every Primitive object exported by plax.lax (aliases counted once).

    ``dir(lax)`` lists the names of the families that load on first use (``vars(lax)`` holds
    them only once loaded); ``getattr`` loads them."""
    values = (getattr(lax, name) for name in dir(lax))
    found = {id(v): v for v in values if isinstance(v, Primitive)}
    return sorted(found.values(), key=lambda p: p.name)


def test_lax_exports_the_primitives_we_expect():
    # guards the enumeration itself: if it found nothing, the checks below would pass vacuously
    names = {p.name for p in lax_primitives()}
    assert {"add", "gather", "scatter-add", "sort", "dot_general", "iota"} <= names
    # and the families that load on first use
    assert {"cond", "while", "scan", "pure_callback", "fft", "conv_general_dilated",
            "reduce_window_sum", "top_k", "reduce_precision", "cumlogsumexp", "cholesky"} <= names
    assert len(names) >= 100


def test_every_primitive_has_a_spec():
    missing = [p.name for p in lax_primitives() if p not in BY_PRIMITIVE]
    assert not missing, f"primitives without a conformance spec in plax.testing.conformance: {missing}"


def test_no_spec_for_a_primitive_outside_lax():
    exported = set(lax_primitives())
    stray = [s.name for s in ALL_SPECS if s.prim not in exported]
    assert not stray, f"specs of primitives plax.lax does not export: {stray}"


def test_every_primitive_has_a_jvp_rule():
    missing = [p.name for p in lax_primitives()
               if not registry.has_rule("jvp", p) and not BY_PRIMITIVE[p].no_jvp]
    assert not missing, f"primitives without a 'jvp' rule: {missing}"


@pytest.mark.parametrize("spec", [pytest.param(s, id=s.name) for s in ALL_SPECS if s.no_jvp])
def test_primitive_without_derivative_says_so(spec, backend_name):
    """A primitive declared without a derivative (as in JAX) has no jvp rule, and
    differentiating through it raises NotImplementedError naming it and the transform."""
    import plax
    from .harness import bind, to_arrays
    assert not registry.has_rule("jvp", spec.prim)
    case = spec.cases(dt(spec.vmap_dtype))[0]
    args = to_arrays(case.operands())
    with pytest.raises(NotImplementedError, match=f"{spec.prim.name}.*jvp"):
        plax.jvp(bind(spec.prim, case.params), args, args)


def test_every_primitive_is_differentiable_or_declared_not():
    undecided = [s.name for s in ALL_SPECS
                 if (s.grads is not None) + s.nondiff + s.no_jvp != 1]
    assert not undecided, (f"specs must give grad cases, or declare nondiff=True, or declare "
                           f"no_jvp=True (exactly one): {undecided}")


def test_every_primitive_has_a_batch_rule():
    missing = [p.name for p in lax_primitives()
               if not registry.has_rule("batch", p) and not BY_PRIMITIVE[p].no_operands]
    assert not missing, f"primitives without a 'batch' rule: {missing}"


def test_backend_implements_every_primitive(backend):
    device = backend.devices()[0]
    missing = []
    for prim in lax_primitives():
        spec = BY_PRIMITIVE[prim]
        case = spec.cases(dt(spec.vmap_dtype))[0]
        bufs = [backend.put(np.asarray(a), device) for a in case.operands()]
        try:
            backend.execute(prim, *bufs, **case.params)
        except UnsupportedPrimitiveError:
            missing.append(prim.name)
    assert not missing, f"backend {backend.name!r} does not implement: {missing}"


@pytest.mark.parametrize("spec", spec_params(ALL_SPECS, "zero"))
def test_zero_tangent(spec, backend_name):
    check_zero_tangent(spec, backend_name)


def _rejection_params():
    out = []
    for s in ALL_SPECS:
        if s.no_operands:
            continue
        for d in ALL:
            if d not in s.dtypes:
                out.append(pytest.param(s, d, id=f"{s.name}-{d}"))
    return out


@pytest.mark.parametrize("spec,bad", _rejection_params())
def test_rejects_unaccepted_dtype(spec, bad):
    """Operands of a dtype the spec does not list get a TypeError naming that dtype (so a spec
    lists exactly the dtypes its primitive accepts)."""
    good = dt(spec.vmap_dtype)
    case = spec.cases(good)[0]
    avals = [ShapedArray(np.shape(a), dt(bad) if np.asarray(a).dtype == good else np.asarray(a).dtype)
             for a in case.operands()]
    with pytest.raises(TypeError, match=dt(bad).name):
        spec.prim.abstract_eval(*avals, **case.params)


def test_iota_rejects_bool():
    with pytest.raises(TypeError, match="bool"):
        lax.iota_p.abstract_eval(dtype=np.dtype(bool), shape=(3,), dimension=0)
    with pytest.raises(TypeError, match="bool"):
        lax.iota(np.bool_, 3)
