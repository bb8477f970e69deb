"""The smaller APIs JAX 0.10's docs use (issue 25, item 4): ``ShapeDtypeStruct.like``,
``jax.typeof`` printing (typed keys included), every ``checkpoint_policies`` policy, and
``jax.debug.breakpoint`` (non-interactive "record" backend, and the prompt driven by a
scripted stdin). Checked beside JAX where it is installed.
"""
from __future__ import annotations

import io

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import debugger
from plax.ad_checkpoint import checkpoint_name

try:
    import jax
    import jax.numpy as jax_numpy
except ImportError:  # the JAX halves of the tests are skipped
    jax = jax_numpy = None


def _libs():
    out = [(plax, jnp)]
    if jax is not None:
        out.append((jax, jax_numpy))
    return out


def test_shape_dtype_struct_like():
    for lib, m in _libs():
        assert repr(lib.ShapeDtypeStruct.like(m.ones((2, 3)))) == \
            "ShapeDtypeStruct(shape=(2, 3), dtype=float32)"
        assert repr(lib.ShapeDtypeStruct.like(1.0)) == \
            "ShapeDtypeStruct(shape=(), dtype=float32, weak_type=True)"
        s = lib.ShapeDtypeStruct((4,), np.int32)
        assert lib.ShapeDtypeStruct.like(s) == s
    assert plax.eval_shape(lambda x: x * 2, plax.ShapeDtypeStruct.like(jnp.ones(3))).shape == (3,)


TYPEOF_CASES = [
    (lambda j, m: m.ones((8, 4)), "float32[8,4]"),
    (lambda j, m: 1.0, "~float32[]"),
    (lambda j, m: m.arange(3), "int32[3]"),
    (lambda j, m: j.random.key(0), "key<fry>[]"),
    (lambda j, m: j.random.split(j.random.key(0), 3), "key<fry>[3]"),
    (lambda j, m: j.random.PRNGKey(0), "uint32[2]"),
]


@pytest.mark.parametrize("case", range(len(TYPEOF_CASES)))
def test_typeof_prints_as_jax(case):
    make, want = TYPEOF_CASES[case]
    for lib, m in _libs():
        assert str(lib.typeof(make(lib, m))) == want


def test_typeof_of_a_key_under_jit():
    seen = []
    plax.jit(lambda k: seen.append(str(plax.typeof(k))) or k)(plax.random.key(0))
    assert seen == ["key<fry>[]"]


def test_checkpoint_policies_are_jax_s():
    ours = {n for n in dir(plax.checkpoint_policies) if not n.startswith("_")}
    if jax is not None:
        assert ours == {n for n in dir(jax.checkpoint_policies) if not n.startswith("_")}
    assert {"save_and_offload_only_these_names", "offload_dot_with_no_batch_dims"} <= ours


def test_save_and_offload_only_these_names():
    def f(x):
        a = checkpoint_name(jnp.sin(x), "a")
        b = checkpoint_name(jnp.cos(a), "b")
        c = checkpoint_name(jnp.sin(b), "c")
        return jnp.sum(c * a)
    policy = plax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=["a"], names_which_can_be_offloaded=["b"],
        offload_src="device", offload_dst="pinned_host")
    out = plax.grad(plax.checkpoint(f, policy=policy))(jnp.ones(3))
    np.testing.assert_allclose(np.asarray(out), np.asarray(plax.grad(f)(jnp.ones(3))),
                               rtol=1e-6)
    saved = plax.ad_checkpoint.saved_residuals(plax.checkpoint(f, policy=policy), jnp.ones(3))
    names = [why for _, why in saved]
    # 'b' is offloaded: listed, as JAX lists it, as the copy to host memory it saves
    assert any("'a'" in w for w in names) and "output of device_put from " in names
    assert not any("'b'" in w or "'c'" in w for w in names)
    with pytest.raises(ValueError, match="intersection"):
        plax.checkpoint_policies.save_and_offload_only_these_names(
            names_which_can_be_saved=["a"], names_which_can_be_offloaded=["a"],
            offload_src="device", offload_dst="pinned_host")


def _f_with_breakpoint(x):
    y = jnp.sin(x)
    plax.debug.breakpoint(backend="record")
    return y * 2


def test_breakpoint_records_run_time_values_under_jit_and_vmap():
    del debugger.records[:]
    plax.jit(_f_with_breakpoint)(0.5)
    plax.jit(_f_with_breakpoint)(1.0)  # cached program: stops again, with the new values
    assert [float(r.locals["y"]) for r in debugger.records] == \
        pytest.approx([np.sin(0.5), np.sin(1.0)], rel=1e-6)
    assert debugger.records[0].function == "_f_with_breakpoint"
    del debugger.records[:]
    plax.vmap(_f_with_breakpoint)(jnp.arange(3.0))  # once per batch member
    assert [float(r.locals["x"]) for r in debugger.records] == [0.0, 1.0, 2.0]


def test_breakpoint_default_backend_from_environment(monkeypatch):
    monkeypatch.setenv("PLAX_DEBUG_BREAKPOINT", "record")
    del debugger.records[:]

    def g(x):
        z = x + 1
        plax.debug.breakpoint()
        return z
    g(jnp.ones(2))
    assert debugger.records[-1].locals["z"].tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        plax.debug.breakpoint(backend="nope")


def test_breakpoint_prompt_evaluates_in_the_frame():
    del debugger.records[:]
    plax.jit(_f_with_breakpoint)(0.0)
    out = io.StringIO()
    debugger._Prompt(list(debugger.records), stdin=io.StringIO("p y\np x + 1\nc\n"),
                     stdout=out).cmdloop()
    text = out.getvalue()
    assert "_f_with_breakpoint()" in text
    assert "Array(0., dtype=float32" in text and "Array(1., dtype=float32" in text


@pytest.mark.skipif(jax is None, reason="JAX is not installed: no signature to compare")
def test_breakpoint_signature_is_jax_s():
    import inspect
    ours = inspect.signature(plax.debug.breakpoint).parameters
    theirs = inspect.signature(jax.debug.breakpoint).parameters
    assert list(ours) == list(theirs)
