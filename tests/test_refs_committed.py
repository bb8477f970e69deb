"""Refs made off any mesh are committed, as in JAX 0.10.2: ``new_ref`` commits its value to a
device (the value's own when it is committed, else the default device, where
``default_device`` says), so ``ref.committed`` is True, every read (eager, or a ``jit`` that
reads the ref as an argument or closes over it) is a committed array on that device, writes
keep it committed, and a value committed to another device is refused (JAX's ValueError).

One-device checks run here; those that need a second device run in one child interpreter
with two CPU devices, under plax and (where installed) JAX, answers compared.
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from subprocess_util import two_cpu_device_answers

try:
    import jax
    import jax.numpy as jax_numpy
except ImportError:  # the JAX halves are skipped
    jax = jax_numpy = None

# initial values: (plax maker, JAX maker) of the same kind
_INITS = {
    "uncommitted array": lambda np_: np_.ones(3),
    "host array": lambda np_: np.ones(3, np.float32),
    "Python scalar": lambda np_: 2.0,
    "NumPy scalar": lambda np_: np.float32(2.0),
}


def _described(x) -> tuple:
    return (x.committed, sorted(d.id for d in x.devices()), str(x.dtype))


def _observed(lib, numpy_lib, make) -> dict:
    """What a ref of ``make``'s value says about committedness, through ``lib``."""
    r = lib.new_ref(make(numpy_lib))
    out = {"ref": r.committed, "read": _described(r[...]),
           "sharding": type(r.sharding).__name__,
           "jit argument": _described(lib.jit(lambda q: q[...] + 1)(r)),
           "jit closed over": _described(lib.jit(lambda: r[...] * 2)())}
    if r.shape:
        out["indexed"] = _described(r[0])
    r[...] = numpy_lib.zeros(r.shape)  # an uncommitted value written whole
    out["after write"] = (r.committed, _described(r[...]))
    r[...] = np.full(r.shape, 3.0, np.float32)  # a host value
    r.addupdate(np.ones(r.shape, np.float32))
    out["after addupdate"] = (r.committed, _described(r[...]), float(np.asarray(r[...]).flat[0]))
    out["freeze"] = _described(lib.freeze(r))
    return out


@pytest.mark.parametrize("kind", list(_INITS))
def test_refs_off_any_mesh_are_committed(kind):
    got = _observed(plax, jnp, _INITS[kind])
    one = (True, [0], "float32")
    assert got["ref"] is True and got["read"] == one and got["sharding"] == "SingleDeviceSharding"
    assert got["jit argument"] == got["jit closed over"] == got["freeze"] == one
    assert got["after write"] == (True, one) and got["after addupdate"] == (True, one, 4.0)
    assert got.get("indexed", one) == one
    if jax is not None:
        assert _observed(jax, jax_numpy, _INITS[kind]) == got


def test_the_array_a_ref_is_made_of_stays_uncommitted():
    x = jnp.ones(3)
    r = plax.new_ref(x)
    r[0] = 5.0
    assert (x.committed, r.committed) == (False, True)
    np.testing.assert_array_equal(np.asarray(x), np.ones(3))
    np.testing.assert_array_equal(np.asarray(r[...]), [5.0, 1.0, 1.0])


def _repeated_calls(lib, numpy_lib) -> list:
    """What each of three calls of a ``jit`` closing over a ref gives (the first compiles,
    the later ones take the fast paths: Array arguments, host arguments)."""
    r = lib.new_ref(numpy_lib.ones(3))
    f = lib.jit(lambda x: x + r[...])
    x = numpy_lib.arange(3.0)
    return [[_described(f(x)), _described(f(np.ones(3, np.float32))), _described(f(2.0))]
            for _ in range(3)]


def test_jit_closing_over_a_ref_has_committed_results_on_every_call():
    got = _repeated_calls(plax, jnp)
    assert got == [[(True, [0], "float32")] * 3] * 3
    if jax is not None:
        assert _repeated_calls(jax, jax_numpy) == got


# ------------------------------------------------------------------ two devices, one child

_TWO_DEVICES = r'''
import json, sys
import numpy as np


def answers(lib, jnp):
    d0, d1 = lib.devices()[:2]
    out = {}

    def note(name, f):
        try:
            v = f()
            out[name] = [v.committed, sorted(d.id for d in v.devices())]
        except ValueError as e:
            out[name] = ["ValueError", str(e)]

    on1 = lib.new_ref(lib.device_put(jnp.ones(3), d1))  # committed to d1
    on0 = lib.new_ref(jnp.ones(3))                       # uncommitted: the default device
    y1 = lib.device_put(jnp.ones(3), d1)
    note("read d1", lambda: on1[...])
    note("jit argument d1", lambda: lib.jit(lambda r: r[...] + 1)(on1))
    note("jit closed over d1", lambda: lib.jit(lambda: on1[...] + 1)())
    note("jit closed over d1, argument d0",
         lambda: lib.jit(lambda y: on1[...] + y)(lib.device_put(jnp.ones(3), d0)))
    note("jit closed over refs d1 and d0", lambda: lib.jit(lambda: on1[...] + on0[...])())
    note("jit ref d1 and array d1", lambda: lib.jit(lambda r, y: r[...] + y)(on1, y1))
    note("jit ref d0 and array d1", lambda: lib.jit(lambda r, y: r[...] + y)(on0, y1))
    note("eager ref d0 read and array d1", lambda: on0[...] + y1)
    note("uncommitted written into d1", lambda: (on1.__setitem__(..., jnp.zeros(3)), on1[...])[1])

    def write_other():
        on0[...] = y1
        return on0[...]
    note("d1 value written into d0", write_other)
    with lib.default_device(d1):
        made = lib.new_ref(np.ones(2, np.float32))
        note("host value under default_device d1", lambda: made[...])
        note("its jit under default_device d1", lambda: lib.jit(lambda r: r[...] * 2)(made))
        x = jnp.ones(2)
    note("read outside default_device", lambda: made[...])
    note("uncommitted d1 value", lambda: lib.new_ref(x)[...])
    return out

'''


def test_refs_committed_on_two_devices():
    got = two_cpu_device_answers(_TWO_DEVICES)
    refused = ["ValueError", True]
    plax_got = {k: ["ValueError", "Received incompatible devices" in v[1]]
                if v[0] == "ValueError" else v for k, v in got["plax"].items()}
    assert plax_got == {
        "read d1": [True, [1]], "jit argument d1": [True, [1]],
        "jit closed over d1": [True, [1]], "jit ref d1 and array d1": [True, [1]],
        "jit closed over d1, argument d0": refused, "jit closed over refs d1 and d0": refused,
        "jit ref d0 and array d1": refused, "eager ref d0 read and array d1": refused,
        "uncommitted written into d1": [True, [1]], "d1 value written into d0": refused,
        "host value under default_device d1": [True, [1]],
        "its jit under default_device d1": [True, [1]],
        "read outside default_device": [True, [1]], "uncommitted d1 value": [True, [0]]}
    for k in ("jit closed over d1, argument d0", "jit closed over refs d1 and d0"):
        # JAX's "ARG_SHARDING" for the ref closed over, then what that is
        assert "ARG_SHARDING with device ids [1] on platform CPU" in got["plax"][k][1]
        assert "a ref the function closes over" in got["plax"][k][1].split("\n")[1]
    assert got["plax"]["jit closed over d1, argument d0"][1].startswith(
        "Received incompatible devices for jitted computation. Got argument y of ")
    if "jax" in got:  # the same answers, JAX's messages word for word (plax's first line)
        assert got["jax"] == {k: v[:1] + [v[1].split("\n")[0]] if v[0] == "ValueError" else v
                              for k, v in got["plax"].items()}
