"""JAX 0.10.2's smaller top-level names: ``effects_barrier``, ``live_arrays``,
``copy_to_host_async``, and the modules ``stages``, ``memory`` and ``custom_derivatives``;
checked alone and beside JAX where it is installed."""
from __future__ import annotations

import gc
import pickle

import numpy as np
import pytest

import plax
from plax import numpy as jnp


def _jax():
    return pytest.importorskip("jax", reason="JAX is not installed: nothing to compare with")


# ------------------------------------------------------------------ array runtime

def test_effects_barrier_after_effects_have_run():
    seen = []
    plax.jit(lambda x: plax.debug.callback(seen.append, x))(jnp.float32(3.0))
    assert plax.effects_barrier() is None
    assert [float(v) for v in seen] == [3.0]


def test_live_arrays_lists_arrays_alive_and_forgets_deleted_ones():
    x = jnp.arange(5.0) + 1
    y = jnp.ones(2)
    assert any(a is x for a in plax.live_arrays())
    assert any(a is y for a in plax.live_arrays("cpu"))
    y.delete()
    assert not any(a is y for a in plax.live_arrays())
    ident = id(x)
    del x
    gc.collect()
    assert not any(id(a) == ident for a in plax.live_arrays())
    with pytest.raises(RuntimeError, match="Unknown backend or platform 'tpu'"):
        plax.live_arrays("tpu")


def test_live_arrays_skips_a_dead_weak_proxy():
    """A ``weakref.proxy`` whose referent is gone, alive somewhere in the process (the garbage
    collector lists it), is neither an array nor an error: asking it its class raises
    ReferenceError, so the scan must not."""
    import weakref

    class Referent:
        pass

    target = Referent()
    held = [weakref.proxy(target)]
    del target
    gc.collect()
    with pytest.raises(ReferenceError):
        isinstance(held[0], plax.Array)   # (what the scan used to ask)
    x = jnp.arange(3.0) + 1
    assert any(a is x for a in plax.live_arrays())
    assert held   # (the proxy stays alive through the scan)


def test_copy_to_host_async_returns_its_argument():
    tree = {"a": jnp.ones(2), "b": [1.0, "text"], "c": np.zeros(1)}
    assert plax.copy_to_host_async(tree) is tree
    assert plax.copy_to_host_async(jnp.ones(1)).shape == (1,)
    assert jnp.ones(2).copy_to_host_async() is None


# ------------------------------------------------------------------ stages

def test_stages_classes_are_the_aot_path():
    from plax import stages
    f = plax.jit(lambda x: x * 2)
    assert isinstance(f, stages.Wrapped) and not isinstance(jnp.sin, stages.Wrapped)
    traced = f.trace(1.0)
    assert isinstance(traced, stages.Traced)
    lowered = traced.lower()
    assert isinstance(lowered, stages.Lowered)
    compiled = lowered.compile()
    assert isinstance(compiled, stages.Compiled)
    assert float(compiled(3.0)) == 6.0
    info = stages.ArgInfo(plax.typeof(jnp.ones((2, 3))), donated=False)
    assert (info.shape, info.dtype, info.donated) == ((2, 3), np.dtype("float32"), False)
    assert info.as_shape_dtype_struct() == plax.ShapeDtypeStruct((2, 3), jnp.float32)


# ------------------------------------------------------------------ memory

def test_memory_space():
    from plax import memory
    assert [repr(s) for s in memory.Space] == ["MemorySpace.Device", "MemorySpace.Host",
                                               "MemorySpace.Any"]
    assert memory.memory_kind(memory.Space.Host) == "pinned_host"
    assert memory.space_of_kind("pinned_host") is memory.Space.Host
    assert memory.space_of_kind(None) is memory.Space.Device
    with pytest.raises(ValueError, match="names no single memory"):
        memory.memory_kind(memory.Space.Any)
    assert len({memory.Space.Host, memory.Space.Device, memory.Space.Host}) == 2


# ------------------------------------------------------------------ custom_derivatives

def test_custom_derivatives_module():
    from plax import custom_derivatives as cd
    assert cd.custom_jvp is plax.custom_jvp and cd.custom_vjp is plax.custom_vjp
    assert cd.custom_gradient is plax.custom_gradient
    assert cd.closure_convert is plax.closure_convert
    assert cd.custom_jvp_call_p.name == "custom_jvp_call"
    assert cd.custom_vjp_call_p.name == "custom_vjp_call"
    zeros = cd.zero_from_primal({"a": 1.0, "b": jnp.ones((2,), jnp.float16)})
    assert zeros["a"].dtype == np.float32 and float(zeros["a"]) == 0.0
    assert zeros["b"].dtype == np.float16 and zeros["b"].shape == (2,)
    (z,) = cd.zero_from_primal((jnp.ones((2, 3)),), symbolic_zeros=True)
    assert isinstance(z, cd.SymbolicZero) and repr(z) == "SymbolicZero"
    assert (z.shape, z.dtype, z.ndim, z.size) == ((2, 3), np.dtype("float32"), 2, 6)
    assert cd.SymbolicZero.from_primal_value(3).dtype == plax.dtypes.float0
    tree = {"x": cd.CustomVJPPrimal(1.0, True), "y": [cd.CustomVJPPrimal(2, False)]}
    assert cd.custom_vjp_primal_tree_values(tree) == {"x": 1.0, "y": [2]}
    with pytest.raises(TypeError, match="unexpected leaf type"):
        cd.custom_vjp_primal_tree_values({"x": 1.0})
    assert pickle.loads(pickle.dumps(z)).shape == (2, 3)


# ------------------------------------------------------------------ beside JAX

_MODULES = {"stages": None, "custom_batching": None, "custom_derivatives": {"remat_opt_p"}}


@pytest.mark.parametrize("name", sorted(_MODULES))
def test_module_names_beside_jax(name):
    jax = _jax()
    import importlib
    theirs = {n for n in dir(importlib.import_module(f"jax.{name}")) if not n.startswith("_")}
    ours = {n for n in dir(importlib.import_module(f"plax.{name}")) if not n.startswith("_")}
    assert theirs - ours <= (_MODULES[name] or set())  # the rest are listed in the module doc
    del jax


def test_memory_and_runtime_beside_jax():
    jax = _jax()
    assert [repr(s) for s in plax.memory.Space] == [repr(s) for s in jax.memory.Space]
    assert str(plax.memory.Space.Host) == str(jax.memory.Space.Host)
    assert plax.effects_barrier() == jax.effects_barrier()
    x = jax.numpy.ones(2)
    assert jax.copy_to_host_async(x) is x
    assert type(jax.live_arrays()) is type(plax.live_arrays())
    z, jz = (m.custom_derivatives.zero_from_primal((1.0, 2), symbolic_zeros=True)
             for m in (plax, jax))
    assert [(a.shape, str(a.dtype)) for a in z] == [(b.shape, str(b.dtype)) for b in jz]


def _symbolic_zeros_vjp(mod):
    """sin(x) * y with a symbolic_zeros=True rule whose bwd returns a SymbolicZero for y."""
    cd = mod.custom_derivatives

    @mod.custom_vjp
    def f(x, y):
        return mod.numpy.sin(x) * y

    def fwd(x, y):
        assert type(x) is cd.CustomVJPPrimal and x.perturbed in (True, False)
        x, y = cd.custom_vjp_primal_tree_values((x, y))
        return f(x, y), (mod.numpy.cos(x), y)

    def bwd(res, g):
        cos_x, y = res
        return cos_x * g * y, cd.SymbolicZero(mod.typeof(y))

    f.defvjp(fwd, bwd, symbolic_zeros=True)
    return f


def test_symbolic_zeros_rules():
    f = _symbolic_zeros_vjp(plax)
    dx, dy = plax.grad(f, argnums=(0, 1))(0.5, 2.0)
    np.testing.assert_allclose([dx, dy], [np.cos(0.5) * 2.0, 0.0], rtol=1e-6)

    @plax.custom_jvp
    def h(x):
        return jnp.sin(x)

    from plax.custom_derivatives import SymbolicZero
    h.defjvp(lambda p, t: (h(p[0]), SymbolicZero(plax.typeof(p[0]))), symbolic_zeros=True)
    assert float(plax.jvp(h, (1.0,), (1.0,))[1]) == 0.0


def test_symbolic_zeros_rules_beside_jax():
    jax = _jax()
    import jax.custom_derivatives  # noqa: F401
    ours = plax.grad(_symbolic_zeros_vjp(plax), argnums=(0, 1))(0.5, 2.0)
    theirs = jax.grad(_symbolic_zeros_vjp(jax), argnums=(0, 1))(0.5, 2.0)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6)
