"""Buffer donation where JAX 0.10.2's runtime decides (issue 25): a donated buffer the call
also reads, AOT calls, deleted arrays, sharded arrays and pmap. The answers JAX gives are
written here (recorded from JAX 0.10.2 on CPU) and compared with JAX itself where it is
installed."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
from plax.errors import JaxRuntimeError
from subprocess_util import last_json, run_python

USE_AFTER_DONATE = ("INVALID_ARGUMENT: Attempt to use a buffer that was previously donated in "
                    "the same call to Execute() (flattened argument {j}, replica 0, partition "
                    "0, first use: {i}). Toy example for this bug: `f(donate(a), a)`.")
DONATE_USED = ("INVALID_ARGUMENT: Attempt to donate a buffer which is also used by the same "
               "call to Execute() (flattened argument {j}, replica 0, partition 0, first use: "
               "{i}). Toy example for this bug: `f(a, donate(a))`.")
NOT_USABLE = ("Some donated buffers were not usable: {}.\nSee an explanation at "
              "https://docs.jax.dev/en/latest/faq.html#buffer-donation.")

#: (function, jit options, argument positions that are one array, JAX 0.10.2's answer:
#:  (exception message or None, warnings, whether the array is deleted))
REUSE_CASES = {
    "donate_first": (lambda a, b: a + b, dict(donate_argnums=0), 2,
                     (USE_AFTER_DONATE.format(j=1, i=0), [], False)),
    "donate_second": (lambda a, b: a + b, dict(donate_argnums=1), 2,
                      (DONATE_USED.format(j=1, i=0), [], False)),
    "donate_both": (lambda a, b: a + b, dict(donate_argnums=(0, 1)), 2,
                    (USE_AFTER_DONATE.format(j=1, i=0), [NOT_USABLE.format("float32[3]")],
                     False)),
    "not_usable": (lambda a, b: (a + b).sum(), dict(donate_argnums=0), 2,
                   (None, [NOT_USABLE.format("float32[3]")], False)),
    "third_argument": (lambda c, a, b: a + b + c, dict(donate_argnums=1), 3,
                       (USE_AFTER_DONATE.format(j=2, i=1), [], False)),
}


def _reuse(jax, name, aot=False):
    fn, kw, nargs, _ = REUSE_CASES[name]
    a = jax.numpy.ones(3)
    args = (jax.numpy.ones(3), a, a) if nargs == 3 else (a, a)
    f = jax.jit(fn, **kw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            (f.lower(*args).compile() if aot else f)(*args)
            error = None
        except Exception as e:  # noqa: BLE001 -- the error is the answer
            error = (type(e).__name__, str(e))
    texts = [str(w.message) for w in caught if "donated" in str(w.message)]
    return error, texts, a.is_deleted()


@pytest.mark.parametrize("name", sorted(REUSE_CASES))
def test_donated_buffer_read_by_the_same_call(name):
    message, texts, deleted = REUSE_CASES[name][3]
    error, got_texts, got_deleted = _reuse(plax, name)
    assert error == (None if message is None else ("JaxRuntimeError", message))
    assert got_texts == texts and got_deleted == deleted


def test_donated_buffer_read_by_the_same_aot_call():
    error, _, deleted = _reuse(plax, "donate_first", aot=True)
    assert error == ("JaxRuntimeError", USE_AFTER_DONATE.format(j=1, i=0)) and not deleted
    assert issubclass(JaxRuntimeError, RuntimeError)  # as jax.errors.JaxRuntimeError


@pytest.mark.parametrize("name", sorted(REUSE_CASES))
def test_donated_buffer_read_by_the_same_call_beside_jax(name):
    jax = pytest.importorskip("jax", reason="compares with JAX itself")
    assert _reuse(plax, name) == _reuse(jax, name)


def _deleted_uses(jax):
    """What JAX's arrays do after donation (jit, AOT) and delete()."""
    out = {}
    f = jax.jit(lambda x: x * 2, donate_argnums=0)
    x = jax.numpy.ones(3)
    compiled = f.lower(x).compile()
    compiled(x)
    out["aot_deletes"] = x.is_deleted()
    for what, use in [("aot_again", lambda: compiled(x)), ("jit_again", lambda: f(x)),
                      ("add", lambda: x + 1), ("repr", lambda: repr(x)),
                      ("asarray", lambda: np.asarray(x))]:
        try:
            use()
            out[what] = None
        except Exception as e:  # noqa: BLE001 -- the error is the answer
            out[what] = [type(e).__name__, str(e)]
    y = jax.numpy.ones(3)
    y.delete()
    try:
        y * 2
    except Exception as e:  # noqa: BLE001
        out["after_delete"] = [type(e).__name__, str(e)]
    return out


DELETED_USES = {
    "aot_deletes": True,
    "aot_again": ["ValueError", "INVALID_ARGUMENT: Invalid buffer passed to Execute() as "
                  "argument 0 to replica 0: INVALID_ARGUMENT: Buffer has been deleted or "
                  "donated."],
    "jit_again": ["RuntimeError", "Array has been deleted with shape=float32[3]."],
    "add": ["RuntimeError", "Array has been deleted with shape=float32[3]."],
    "repr": ["RuntimeError", "Array has been deleted with shape=float32[3]."],
    "asarray": ["RuntimeError", "Array has been deleted with shape=float32[3]."],
    "after_delete": ["RuntimeError", "Array has been deleted with shape=float32[3]."],
}


def test_deleted_arrays_raise_as_jax():
    assert _deleted_uses(plax) == DELETED_USES


def test_deleted_arrays_raise_beside_jax():
    jax = pytest.importorskip("jax", reason="compares with JAX itself")
    assert _deleted_uses(plax) == _deleted_uses(jax)


_MULTI_DEVICE = """
import json, sys, warnings
if sys.argv[1] == "jax":
    import jax
else:
    import plax as jax
jax.config.update("jax_num_cpu_devices", 4)
jnp, P, NS = jax.numpy, jax.sharding.PartitionSpec, jax.sharding.NamedSharding
mesh = jax.make_mesh((4,), ("i",))
double = jax.jit(lambda x: x * 2, donate_argnums=0)
out = {}
def call(name, fn, arg):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn(arg)
    out[name] = [arg.is_deleted(), [str(w.message).splitlines()[0] for w in caught]]
    if arg.is_deleted():
        try:
            arg + 1
        except Exception as e:
            out[name].append([type(e).__name__, str(e)])
call("sharded", double, jax.device_put(jnp.arange(8.0), NS(mesh, P("i"))))
call("replicated", double, jax.device_put(jnp.arange(8.0), NS(mesh, P())))
call("sharded_aot", lambda a: double.lower(a).compile()(a),
     jax.device_put(jnp.arange(8.0), NS(mesh, P("i"))))
p = jax.pmap(lambda x: x * 2, donate_argnums=0)
call("pmap_host_array", p, jnp.ones((4, 3)))
call("pmap_result", p, p(jnp.ones((4, 3))))
print(json.dumps(out))
"""

MULTI_DEVICE = {
    "sharded": [True, [], ["RuntimeError", "Array has been deleted with shape=float32[8@i]."]],
    "replicated": [True, [], ["RuntimeError", "Array has been deleted with shape=float32[8]."]],
    "sharded_aot": [True, [], ["RuntimeError",
                               "Array has been deleted with shape=float32[8@i]."]],
    "pmap_host_array": [False, []],
    "pmap_result": [True, [], ["RuntimeError", "Array has been deleted with shape=float32[4,3]."]],
}


def test_sharded_and_pmap_donation_as_jax():
    got = last_json(run_python(args=["-c", _MULTI_DEVICE, "plax"], timeout=240))
    assert got == MULTI_DEVICE


def test_sharded_and_pmap_donation_beside_jax():
    pytest.importorskip("jax", reason="compares with JAX itself")
    got = last_json(run_python(args=["-c", _MULTI_DEVICE, "jax"], timeout=240))
    assert got == MULTI_DEVICE
