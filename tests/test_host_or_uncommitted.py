"""One predicate decides "a host value or an uncommitted Array" for every operand under a set
mesh (:func:`plax.array.host_or_uncommitted`): which ``jit`` arguments are placed on an
Explicit mesh and typed ``P()``, which operands ``computed_as_one`` keeps ``P()``, and which
operands the committed-device check skips. Each kind of object is asked once here, and the
three users are checked to agree, beside JAX where it is installed.
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.array import host_or_uncommitted
from plax.sharding import AxisType
from plax.sharding_eager import check_committed_devices

try:
    import jax
except ImportError:  # the JAX halves are skipped
    jax = None


class _Wrapped:
    """An object with ``__jax_array__`` (JAX 0.10 refuses it as an operand)."""

    def __array__(self, dtype=None, copy=None):
        return np.ones(2, np.float32)

    def __jax_array__(self):
        return plax.numpy.ones(2)


# kind -> (maker given the library and its numpy, whether it is a host value or uncommitted)
_KINDS = {
    "Python float": (lambda lib, jnp_: 1.5, True),
    "Python int": (lambda lib, jnp_: 2, True),
    "Python bool": (lambda lib, jnp_: True, True),
    "Python complex": (lambda lib, jnp_: 1 + 2j, True),
    "NumPy scalar": (lambda lib, jnp_: np.float32(2.0), True),
    "NumPy array": (lambda lib, jnp_: np.ones(2, np.float32), True),
    "bfloat16 NumPy array": (lambda lib, jnp_: np.ones(2, jnp_.bfloat16), True),
    "uncommitted Array": (lambda lib, jnp_: jnp_.ones(2), True),
    "committed Array": (lambda lib, jnp_: lib.device_put(jnp_.ones(2), lib.devices()[0]),
                        False),
    "ref": (lambda lib, jnp_: lib.new_ref(jnp_.ones(2)), False),
}


@pytest.mark.parametrize("kind", list(_KINDS))
def test_each_kind_of_operand(kind):
    make, want = _KINDS[kind]
    assert host_or_uncommitted(make(plax, jnp)) is want


def test_other_objects_are_neither():
    with plax.set_mesh(plax.make_mesh((1,), ("x",))):
        placed = jnp.ones(2) + 1   # over the mesh
    seen = []
    plax.jit(lambda v: seen.append(host_or_uncommitted(v)) or v)(jnp.ones(2))  # a tracer
    assert seen == [False]
    for x in (placed, "text", _Wrapped(), None):
        assert host_or_uncommitted(x) is False


def _spec(x) -> str | None:
    """The spec of ``x``'s sharding (None for one that has none: on one device)."""
    spec = getattr(x.sharding, "spec", None)
    return None if spec is None else str(spec)


def _placement(lib, jnp_, x) -> tuple:
    """How the three users treat ``x`` under one-device meshes: a ``jit`` call's result
    spec under an Explicit axis (``P()`` for an operand typed short), ``matmul``'s (one
    ``jit`` in JAX, ``computed_as_one`` in plax), and whether an eager result stays on the
    device (the committed-device check keeps it there) under an Auto axis."""
    explicit = lib.make_mesh((1,), ("x",))
    auto = lib.make_mesh((1,), ("x",), axis_types=(lib.sharding.AxisType.Auto,))
    with lib.set_mesh(explicit):
        spec = _spec(lib.jit(lambda v: jnp_.sin(v[...] if hasattr(v, "addupdate") else v))(x))
        value = x[...] if hasattr(x, "addupdate") else x
        mat = _spec(jnp_.matmul(np.ones((2, 2), np.float32), value)) if np.ndim(value) else None
    with lib.set_mesh(auto):
        value = x[...] if hasattr(x, "addupdate") else x
        kept = type(jnp_.sin(value).sharding).__name__
    return spec, mat, kept


@pytest.mark.parametrize("kind", list(_KINDS))
def test_the_three_users_agree(kind):
    make, short = _KINDS[kind]
    x = make(plax, jnp)
    spec, mat, kept = _placement(plax, jnp, x)
    assert spec == ("P()" if short else None)  # (None: on one device, no spec)
    assert mat in ((None, "P()") if short else (None,))
    assert (kept == "SingleDeviceSharding") is (not short)
    mesh = plax.make_mesh((1,), ("x",), axis_types=(AxisType.Auto,))
    assert check_committed_devices([x], mesh, str) is (not short)
    if jax is not None:
        # (under an Explicit mesh the results of a committed one-device operand follow each
        # primitive's rule -- sin and matmul keep it on its device: plax.sharding_device_typed)
        assert _placement(jax, jax.numpy, make(jax, jax.numpy)) == (spec, mat, kept)


_REFUSING = {"jnp.sin": lambda lib, w: lib.numpy.sin(w),
             "jnp.add": lambda lib, w: lib.numpy.add(w, 1.0),
             "jit": lambda lib, w: lib.jit(lambda v: v * 2)(w),
             "lax.add": lambda lib, w: lib.lax.add(w, lib.numpy.ones(2))}


@pytest.mark.parametrize("where", list(_REFUSING))
def test_objects_with_jax_array_are_refused_as_operands_as_jax(where):
    """JAX 0.10 no longer converts an object with ``__jax_array__`` given as an operand:
    a ValueError saying what to do, in a ``jax.numpy`` function, a ``jit`` call, a
    primitive."""
    with pytest.raises(ValueError, match=r"__jax_array__\(\) during abstractification") as got:
        _REFUSING[where](plax, _Wrapped())
    if jax is not None:
        class Wrapped:
            def __jax_array__(self):
                return jax.numpy.ones(2)

        with pytest.raises(ValueError) as want:
            _REFUSING[where](jax, Wrapped())
        assert str(got.value) == str(want.value)
