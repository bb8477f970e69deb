"""Arguments a ``jit`` program does not read, as JAX 0.10.2 treats them (``keep_unused=False``,
the default): their devices and committedness do not count, so one committed to another
device than the arguments the function reads is no error, and the results are committed only
when an argument the function reads is (``plax.transforms.jit_unread``).

One-device checks run here; the two-device ones in one child interpreter with two CPU
devices, under plax and (where installed) JAX, answers compared.
"""
from __future__ import annotations

import numpy as np

import plax
import plax.numpy as jnp
from plax.transforms.jit_unread import unread_inputs
from subprocess_util import run_python, two_cpu_device_answers


def test_unread_inputs_after_dead_code_elimination():
    """An input read only by equations whose results are dropped is unread too."""
    closed = plax.make_jaxpr(lambda x, y, z: (x + 1, (y * 2) * 0)[0] + z.shape[0])(
        1.0, np.ones(2, np.float32), np.ones(3, np.float32))
    assert sorted(unread_inputs(closed)) == [1, 2]
    assert unread_inputs(plax.make_jaxpr(lambda x, y: (x, y))(1.0, 2.0)) == frozenset()


def test_results_committed_only_by_arguments_read():
    """On one device: a committed argument the function does not read leaves the results
    uncommitted, on the fast paths (Arrays; a host value) as on the first call."""
    u, c = jnp.ones(3), plax.device_put(jnp.ones(3), plax.devices()[0])
    first = plax.jit(lambda x, y: x + 1)
    assert [first(u, c).committed for _ in range(3)] == [False] * 3
    assert [first(c, u).committed for _ in range(3)] == [True] * 3
    second = plax.jit(lambda x, y: y * 2)
    host = np.ones(3, np.float32)
    assert [second(c, host).committed for _ in range(3)] == [False] * 3
    assert [second(host, c).committed for _ in range(3)] == [True] * 3
    kept = plax.jit(lambda x, y: x + 1, keep_unused=True)
    assert kept(u, c).committed


_TWO_DEVICES = r'''
import json


def answers(lib, jnp):
    d0, d1 = lib.devices()[:2]
    a0 = lib.device_put(jnp.ones(3), d0)
    a1 = lib.device_put(jnp.ones(3), d1)
    u = jnp.ones(3)
    cases = {
        "unread d1, read d0": lambda: lib.jit(lambda x, y: x + 1)(a0, a1),
        "unread d0, read d1": lambda: lib.jit(lambda x, y: y + 1)(a0, a1),
        "both read": lambda: lib.jit(lambda x, y: x + y)(a0, a1),
        "unread d1, read uncommitted": lambda: lib.jit(lambda x, y: x + 1)(u, a1),
        "only argument unread": lambda: lib.jit(lambda y: jnp.ones(2))(a1),
        "only its shape read": lambda: lib.jit(lambda x, y: x + y.shape[0])(a0, a1),
        "returned as is": lambda: lib.jit(lambda x, y: (x + 1, y))(a0, a1)[0],
        "unread in a pytree": lambda: lib.jit(lambda t: t[0] * 2)((a0, a1)),
        "keep_unused": lambda: lib.jit(lambda x, y: x + 1, keep_unused=True)(a0, a1),
    }
    out = {}
    for name, f in cases.items():
        try:
            got = [f() for _ in range(2)]  # the second call: the fast paths
            out[name] = [[v.committed, sorted(d.id for d in v.devices())] for v in got]
        except ValueError as e:
            out[name] = ["ValueError", str(e)]
    return out

'''


def test_unread_arguments_on_two_devices():
    got = two_cpu_device_answers(_TWO_DEVICES)
    refused = ["ValueError", True]
    plax_got = {k: ["ValueError", "Received incompatible devices" in v[1]]
                if v[0] == "ValueError" else v for k, v in got["plax"].items()}
    on = lambda committed, device: [[committed, [device]]] * 2  # noqa: E731
    assert plax_got == {
        "unread d1, read d0": on(True, 0), "unread d0, read d1": on(True, 1),
        "both read": refused, "unread d1, read uncommitted": on(False, 0),
        "only argument unread": on(False, 0), "only its shape read": on(True, 0),
        "returned as is": refused, "unread in a pytree": on(True, 0), "keep_unused": refused}
    if "jax" in got:  # the same answers, JAX's messages word for word
        assert got["jax"] == got["plax"]


def test_unread_committed_argument_compiles_once():
    """A call whose only committed argument is unread is compiled once, for the device it
    runs on (the unread leaves are asked of the trace before compiling for theirs)."""
    proc = run_python(r'''
import plax, plax.numpy as jnp
a1 = plax.device_put(jnp.ones(3), plax.devices()[1])
f = plax.jit(lambda x, y: x + 1)
got = [f(jnp.ones(3), a1) for _ in range(2)]
print([(g.committed, [d.id for d in g.devices()]) for g in got], f._cache_size())
''', env={"PLAX_NUM_CPU_DEVICES": "2", "PLAX_PLATFORMS": "cpu"})
    assert proc.stdout.split()[-1] == "1", proc.stdout
    assert "[(False, [0]), (False, [0])]" in proc.stdout
