"""The rest of JAX 0.10's ahead-of-time surface: ``in_avals``, ``out_avals``, ``fun_name``,
``donate_argnums``, ``compiler_ir`` on the traced/lowered stage; ``in_tree``, ``out_tree``,
``input_shardings``, ``output_shardings``, ``memory_analysis``, ``runtime_executable`` and
``Compiled.call`` on the compiled one; beside JAX where it is installed."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
from plax import numpy as jnp, stages


def _f(x, y, *, z):
    return {"a": 2 * x + y, "b": z.sum()}


def _args(m):
    return (m.numpy.ones(3), m.numpy.ones(3)), {"z": m.numpy.ones((2, 2))}


def _summary(m):
    args, kwargs = _args(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX-CPU: "Some donated buffers were not usable"
        traced = m.jit(_f, donate_argnums=1).trace(*args, **kwargs)
        compiled = traced.lower().compile()
    short = lambda tree: m.tree_util.tree_map(  # noqa: E731
        lambda a: f"{a.dtype.name}{list(a.shape)}", tree)
    device = str(m.devices()[0])
    shard = lambda tree: m.tree_util.tree_map(  # noqa: E731
        lambda s: (type(s).__name__, str(next(iter(s.device_set)))), tree)
    return (short(traced.in_avals), short(traced.out_avals), traced.fun_name,
            traced.donate_argnums, str(compiled.in_tree), str(compiled.out_tree),
            short(compiled.in_avals), compiled.donate_argnums, shard(compiled.input_shardings),
            shard(compiled.output_shardings), device,
            compiled.memory_analysis().argument_size_in_bytes,
            compiled.memory_analysis().alias_size_in_bytes)


def test_stages_surface():
    (avals, out_avals, name, donated, in_tree, out_tree, c_avals, c_donated, ins, outs, device,
     argument, alias) = _summary(plax)
    assert avals == (("float32[3]", "float32[3]"), {"z": "float32[2, 2]"}) == c_avals
    assert out_avals == {"a": "float32[3]", "b": "float32[]"} and name == "_f"
    assert donated == c_donated == (1,)
    assert in_tree == "PyTreeDef(((*, *), {'z': *}))" and out_tree == "PyTreeDef({'a': *, 'b': *})"
    assert ins == ((("SingleDeviceSharding", device),) * 2, {"z": ("SingleDeviceSharding", device)})
    assert outs == {"a": ("SingleDeviceSharding", device), "b": ("SingleDeviceSharding", device)}
    assert argument == 40 and alias == 12  # x, y, z; y donated into a


def test_beside_jax():
    jax = pytest.importorskip("jax", reason="JAX is not installed: nothing to compare with")
    ours, theirs = _summary(plax), _summary(jax)
    # (the device's name differs between the libraries only where the platforms do)
    assert ours[:10] == theirs[:10] and ours[11:] == theirs[11:]


def test_memory_analysis_counts_lifetimes():
    def g(x):
        a = jnp.sin(x)
        b = jnp.cos(a)
        return (a * b).sum()

    stats = plax.jit(g).lower(jnp.ones(1000)).compile().memory_analysis()
    assert isinstance(stats, stages.CompiledMemoryStats)
    assert (stats.argument_size_in_bytes, stats.output_size_in_bytes) == (4000, 4)
    assert stats.temp_size_in_bytes == 12000  # a, b and a * b alive at the multiply
    assert stats.peak_memory_in_bytes == 16000 and stats.generated_code_size_in_bytes > 0
    assert stats.alias_size_in_bytes == 0 and stats.host_temp_size_in_bytes == 0
    chain = plax.jit(lambda x: jnp.exp(jnp.sin(jnp.cos(x)))).lower(jnp.ones(250)).compile()
    assert chain.memory_analysis().temp_size_in_bytes == 2000  # two values at once, at most


def test_compiler_ir_call_and_runtime_executable():
    lowered = plax.jit(jnp.sin).lower(jnp.ones(2))
    ir = lowered.compiler_ir()
    assert ir is lowered.compiler_ir("jaxpr") and ir.eqns[0].primitive.name == "sin"
    with pytest.raises(ValueError, match="no stablehlo IR"):
        lowered.compiler_ir("stablehlo")
    with pytest.raises(ValueError, match="unknown dialect"):
        lowered.compiler_ir("llvm")
    compiled = lowered.compile()
    np.testing.assert_allclose(stages.Compiled.call(compiled, jnp.ones(2)), np.sin(np.ones(2)),
                               rtol=1e-6)
    assert callable(compiled.runtime_executable())
    assert compiled.runtime_executable() is compiled.runtime_executable()  # compiled once


def test_shardings_follow_in_and_out_shardings():
    with plax.set_mesh(plax.make_mesh((1,), ("x",))):
        f = plax.jit(lambda u: u * 2, in_shardings=plax.P("x"), out_shardings=plax.P("x"))
        compiled = f.lower(jnp.ones(4)).compile()
        (given,), kwargs = compiled.input_shardings
        for s in (given, compiled.output_shardings):
            assert type(s).__name__ == "NamedSharding" and s.spec == plax.P("x")
        assert kwargs == {}
