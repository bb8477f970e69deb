"""Under a set Explicit mesh, results of operations on an array committed to one device
stay on that device or are placed on the mesh as JAX 0.10.2 places them
(:mod:`plax.sharding_device_typed`): ``sin(c)``, ``jit(sin)(c)``, ``c @ c``, ``c.sum()``
stay; ``c + 1``, ``c + c``, ``concatenate``, ``broadcast_to`` go on the mesh. plax is
checked against JAX's answers recorded in ``device_typed_jax.json``
(``record_device_typed.py``), and against JAX itself where it is installed.
"""
from __future__ import annotations

import pytest

import plax
import plax.numpy as jnp
from device_typed_cases import answers
from jax_records import assert_as_recorded, recorded_answers

_RECORD = recorded_answers("device_typed_jax.json")

#: where plax still differs from JAX 0.10.2: inside a jit JAX's ``dynamic_update_slice``
#: rule refuses an operand typed with no mesh (``c``) and an update typed on the mesh
#: (``jnp.zeros`` under the mesh) with a ShardingTypeError, as plax does eagerly
#: (``lax.dynamic_update_slice``); inside a jit plax's types carry no mesh for such values
#: and the program places the result on the mesh
#: (the second: inside a jit plax writes a static ``.at[]`` box by its dynamic_update_slice
#: shortcut, which keeps a value committed to one device there; JAX's scatter types it on the
#: mesh. A scatter would match but costs every traced static update under an Explicit mesh 4x:
#: sharding_eager.update_typed_as_scatter)
#: (the last two: JAX's ``jnp.concatenate`` converts a host operand with ``asarray``, which
#: places it on the mesh typed ``P(None, None)``, and ``concatenate``'s rule wants every
#: operand typed alike. plax types the values it places on the mesh unsharded, as
#: constants, since it runs a ``jax.numpy`` function as several eager operations whose
#: intermediate values JAX's one ``jit`` types so -- ``sharding_eager._plain_aval``; typing
#: them would refuse ``jnp.where(x > 0, x, 0.0)`` of a split ``x``)
#: (the ``jvp:`` two: values made inside an eager ``jvp`` -- ``jnp.zeros``, and the zero
#: tangent JAX makes for a host update -- are placed on the mesh in JAX, which runs them
#: eagerly; plax makes them while its JVP trace is active, as a traced function's
#: constants, off the mesh. An update placed before the ``jvp`` is refused as JAX refuses
#: it: the check reads the tracers' primal values)
#: (``auto: sin(P('x'))``: over Auto axes JAX's eager results follow XLA's sharding
#: propagation, which keeps ``P('x')`` through ``sin`` but not through ``sum`` or
#: ``a[:, 0]``; plax places every result of such an operand as a replicated value's, ``P()``)
_KNOWN_DIFFERENT = {"jit: dynamic_update_slice(c, on mesh)", "jit: c.at[0].set(c row)",
                    "stack([P('x'), host])", "concatenate([P('x'), host])",
                    "jvp: dynamic_update_slice(c, on mesh)", "jvp: dynamic_update_slice(c, host)",
                    "auto: sin(P('x'))"}


@pytest.fixture(scope="module")
def plax_answers() -> dict:
    return answers(plax, jnp)


def test_placements_as_recorded_from_jax(plax_answers):
    assert_as_recorded(plax_answers, _RECORD, _KNOWN_DIFFERENT)
    # both kinds of answer occur (the table checks a rule, not one constant answer)
    kinds = {v.split()[0] for v in _RECORD.values() if isinstance(v, str)}
    assert {"SingleDeviceSharding", "NamedSharding"} <= kinds


def test_the_record_is_jax_s_answer():
    jax = pytest.importorskip("jax")
    assert answers(jax, jax.numpy) == _RECORD


def test_results_kept_on_the_device_are_replayed_alike(monkeypatch):
    """The mesh fast path (:mod:`plax.transforms.jit_mesh_calls`) replays a signature's
    placement, results kept on a committed argument's device included: the second and
    third calls of one jit place each result as the first (and as JAX's record says)."""
    import numpy as np
    from device_typed_cases import _described
    from plax.transforms import jit_mesh_calls
    count = [0]
    replayed = jit_mesh_calls.replayed
    monkeypatch.setattr(jit_mesh_calls, "replayed",
                        lambda parts, bufs: count.__setitem__(0, count[0] + 1) or
                        replayed(parts, bufs))
    explicit = plax.make_mesh((1,), ("x",), axis_types=(plax.sharding.AxisType.Explicit,))
    c = plax.device_put(jnp.ones((2, 2)), plax.devices()[0])
    host = np.ones((2, 2), np.float32)
    f = plax.jit(lambda a, b: (jnp.sin(b), b + 1, a @ b))
    g = plax.jit(lambda a, i: plax.lax.dynamic_slice(a, (i, 0), (1, 2)))
    with plax.set_mesh(explicit):
        i = jnp.ones((), jnp.int32)
        outs = [(*f(host, c), g(c, i)) for _ in range(3)]
    got = [[_described(v) for v in out] for out in outs]
    for out in outs:  # the values too
        for v, w in zip(out, (np.sin(host), host + 1, host @ host, host[1:])):
            np.testing.assert_allclose(np.asarray(v), w, rtol=1e-6)
    want = _RECORD
    assert got[0] == [*want["jit: (sin(c), c + 1)"], want["jit(host, c): host @ c"],
                      want["jit(c, on mesh): dynamic_slice(c, on mesh)"]]
    assert got[1] == got[2] == got[0]
    assert count[0] == 4  # (two replays of each jit)


@pytest.mark.parametrize("traced", [False, True])
def test_update_sharding_error_names_every_axis_by_type(traced):
    """``dynamic_update_slice``'s ShardingTypeError under a mesh of Auto and Explicit axes
    writes each type's mesh as JAX 0.10.2 does, every axis grouped by its type (the eager
    check of an operand committed to one device and the traced rule of two specs share
    the message)."""
    AT = plax.sharding.AxisType
    mesh = plax.make_mesh((1, 1), ("x", "y"), axis_types=(AT.Auto, AT.Explicit))
    c = plax.device_put(jnp.ones((2, 2)), plax.devices()[0])
    dus = lambda a, b: plax.lax.dynamic_update_slice(a, b, (0, 0))
    head = "dynamic_update_slice operand sharding must be equal to update sharding, got "
    with plax.set_mesh(mesh):
        if traced:  # (JAX 0.10.2's text, recorded)
            a = plax.device_put(jnp.zeros((2, 2)), plax.NamedSharding(mesh, plax.P("y")))
            with pytest.raises(plax.sharding_types.ShardingTypeError) as e:
                plax.jit(dus)(a, jnp.zeros((1, 2)))
            assert str(e.value) == head + (
                "operand sharding float32[2@y,2]({Auto: ('x',), Explicit: ('y',)}) and update "
                "sharding float32[1,2]({Auto: ('x',), Explicit: ('y',)}).")
        else:
            with pytest.raises(plax.sharding_types.ShardingTypeError) as e:
                dus(c, jnp.zeros((1, 2)))
            assert str(e.value) == head + (
                "operand sharding float32[2,2]({}) and update sharding "
                "float32[1,2]({Auto: ('x',), Explicit: ('y',)}).")


def test_static_updates_by_scatter_and_host_results_keep_their_values():
    """Under an Explicit mesh eager ``.at[]`` updates of static bounds are placed on the mesh
    as JAX's scatter (inside a ``jit`` plax's shortcut keeps ``c``'s device: a known
    difference, ``_KNOWN_DIFFERENT``), and
    ``jnp.unique``/``jnp.nonzero`` of concrete values are placed as eager results: the
    values are NumPy's."""
    import numpy as np
    explicit = plax.make_mesh((1,), ("x",), axis_types=(plax.sharding.AxisType.Explicit,))
    h = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = plax.device_put(jnp.asarray(h), plax.devices()[0])
    want = {"set": h.copy(), "add": h.copy(), "min": h.copy(), "box": h.copy()}
    want["set"][0] = h[1]
    want["add"][:, 1:] += 10.0
    want["min"][1, 2] = min(h[1, 2], 1.0)
    want["box"][-1, 1:] *= 3.0
    with plax.set_mesh(explicit):
        got = {"set": c.at[0].set(c[1]), "add": c.at[:, 1:].add(10.0),
               "min": c.at[1, 2].min(1.0), "box": c.at[-1, 1:].multiply(3.0)}
        values = jnp.unique(c % 2.0)
        (where,) = jnp.nonzero(c.reshape(6) > 2.5)
    jitted = plax.jit(lambda a: (a.at[0].set(a[1]), a.at[:, 1:].add(10.0),
                                 a.at[1, 2].min(1.0), a.at[-1, 1:].multiply(3.0)))
    with plax.set_mesh(explicit):
        got.update(zip(("jit set", "jit add", "jit min", "jit box"), jitted(c)))
    for k in ("set", "add", "min", "box"):
        want["jit " + k] = want[k]
    for k, v in got.items():
        np.testing.assert_array_equal(np.asarray(v), want[k], err_msg=k)
        if k.startswith("jit "):
            assert v.committed and v.devices() == c.devices(), k
        else:
            assert v.sharding.spec == plax.P(None, None), k
    np.testing.assert_array_equal(np.asarray(values), np.unique(h % 2.0))
    np.testing.assert_array_equal(np.asarray(where), np.nonzero(h.reshape(6) > 2.5)[0])
    assert values.committed and where.committed


def test_unique_along_an_axis_typed_as_jax():
    """``jnp.unique(x, axis=k)`` under an Explicit mesh, as JAX 0.10.2 types it: ``sort``'s
    ShardingTypeError when axis ``k`` of ``x`` is split, else the values (whole slices of
    ``x``) keep ``x``'s sharding, the index, inverse and counts are unsharded."""
    import numpy as np
    from plax.sharding import AxisType
    from plax.sharding_types import ShardingTypeError
    mesh = plax.make_mesh((1,), ("x",), axis_types=(AxisType.Explicit,))
    h = np.array([[1.0, 2.0, 1.0], [4.0, 5.0, 4.0]], np.float32)
    with plax.set_mesh(mesh):
        rows = plax.device_put(jnp.asarray(h), plax.P("x"))
        for axis in (0, None):
            with pytest.raises(ShardingTypeError, match="sorting dimension=0"):
                jnp.unique(rows, axis=axis)
        got = jnp.unique(rows, axis=1, return_index=True, return_inverse=True,
                         return_counts=True)
    assert [r.sharding.spec for r in got] == [plax.P("x", None)] + [plax.P(None)] * 3
    want = np.unique(h, axis=1, return_index=True, return_inverse=True, return_counts=True)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_value_over_auto_axes_of_size_one_is_taken_as_replicated():
    """Only a spec over Explicit axes of size 1 keeps its placement through eager operations
    (``sin(P('x'))`` gives ``P('x', None)``): over Auto axes the value's type names none, and
    its results are placed as a replicated value's are (JAX 0.10.2's specs: ``P()`` on a
    mesh of Auto axes, ``P(None, ...)`` on one with an Explicit axis), not taken off the
    mesh."""
    from plax.sharding import AxisType
    auto = plax.make_mesh((1,), ("x",), axis_types=(AxisType.Auto,))
    mixed = plax.make_mesh((1, 1), ("x", "y"), axis_types=(AxisType.Explicit, AxisType.Auto))
    with plax.set_mesh(auto):
        a = plax.device_put(jnp.ones((2, 2)), plax.P("x"))
        got = {"sum": a.sum(), "reshape": a.reshape(4), "a[0]": a[0],
               "cond": plax.lax.cond(True, lambda v: v + 1, lambda v: v, a)}
        for k, v in got.items():
            assert v.sharding.spec == plax.P(), k
            assert v.sharding.mesh == auto, k
    with plax.set_mesh(mixed):
        y = plax.device_put(jnp.ones((2, 2)), plax.P("y"))
        x = plax.device_put(jnp.ones((2, 2)), plax.P("x"))
        assert jnp.sin(y).sharding.spec == plax.P(None, None)
        assert (y + 1).sharding.spec == plax.P(None, None)
        assert y.T.sharding.spec == plax.P(None, None)
        assert jnp.concatenate([y, y]).sharding.spec == plax.P(None, None)
        assert jnp.sin(x).sharding.spec == plax.P("x", None)


def test_host_results_of_a_committed_operand_stay_on_its_device():
    """Under a one-device mesh of Auto axes whose device is not the default one,
    ``jnp.unique`` of an array committed there (computed on the host) is committed to that
    device, as JAX 0.10.2's (the default device would hold the host's result)."""
    from subprocess_util import two_cpu_device_answers
    got = two_cpu_device_answers('''
import json
import numpy as np


def answers(lib, jnp):
    d1 = lib.devices()[1]
    mesh = lib.sharding.Mesh(np.array([d1]), ("x",), axis_types=(lib.sharding.AxisType.Auto,))
    c = lib.device_put(jnp.arange(4.0), d1)
    with lib.set_mesh(mesh):
        u = jnp.unique(c)
    return {"unique(c)": [sorted(d.id for d in u.sharding.device_set), u.committed,
                          np.asarray(u).tolist()]}
''')
    assert got["plax"] == {"unique(c)": [[1], True, [0.0, 1.0, 2.0, 3.0]]}
    if "jax" in got:
        assert got["jax"] == got["plax"]
