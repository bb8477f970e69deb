"""The Numba backend's steps marked ``fresh_result`` (see :class:`plax.lowering.Step`): a
fused cluster's step allocates its results on every tier (the compiled kernel, and the
reference kernels that run until it is compiled, which copy a result that could be an
operand's memory), and a per-primitive step on a kernel marked fresh lets its operand's
buffer take a later result in place while its own result lives."""
from __future__ import annotations

import numpy as np

import plax
from plax import numpy as jnp
from plax import plugins
from plax.core.jaxpr import Literal
from plax.lowering import Cluster, fusion_units, literal_value, lower

from numba_vs_numpy import broadcasting_program


def _emitter(compile_kernels: bool):
    from plax_numba.emitter import NumbaEmitter
    return NumbaEmitter(plugins.registry().backends["numba"], plax.devices("cpu")[0],
                        compile_kernels=compile_kernels)


def _cluster_results(f, *args, compile_kernels: bool) -> list:
    """``(step, operands, results)`` of each cluster of ``f``'s program whose operands are
    ``f``'s arguments (and literals)."""
    jaxpr = plax.make_jaxpr(f)(*args).jaxpr
    emitter = _emitter(compile_kernels)
    values = dict(zip(jaxpr.invars, args))
    runs = []
    for unit in fusion_units(jaxpr, emitter):
        if isinstance(unit, Cluster) and all(isinstance(v, Literal) or v in values
                                             for v in unit.inputs):
            step = emitter.emit_cluster(unit)
            operands = [literal_value(v) if isinstance(v, Literal) else values[v]
                        for v in unit.inputs]
            runs.append((step, operands, step.fn(*operands)))
    assert runs
    return runs


def _assert_fresh(runs) -> None:
    for step, operands, results in runs:
        assert step.fresh_result
        for r in results:
            assert not any(np.shares_memory(r, x) for x in operands)
            assert np.ndim(r) == 0 or r.flags.writeable


def test_a_cluster_on_the_reference_kernels_copies_a_view_of_its_operand():
    # broadcast_in_dim's reference kernel is a read-only view of x: the cluster's output copies
    x = np.arange(4, dtype=np.float32)
    f = lambda x: (jnp.broadcast_to(x, (3, 4)), jnp.broadcast_to(x, (3, 4)) * 2.0)  # noqa: E731
    runs = _cluster_results(f, x, compile_kernels=False)
    _assert_fresh(runs)
    (_, _, (b, y)), = runs
    np.testing.assert_array_equal(b, np.broadcast_to(x, (3, 4)))
    np.testing.assert_array_equal(y, np.broadcast_to(x, (3, 4)) * 2)


def test_a_compiled_cluster_allocates_its_results():
    # (test_numba_backend.test_broadcasting_and_scalars's program: its kernel is compiled there)
    f, args = broadcasting_program()
    row = args[2]
    runs = _cluster_results(f, *args, compile_kernels=True)
    _assert_fresh(runs)
    denominators = [r for _, _, results in runs for r in results if np.size(r) == 4]
    assert any(np.allclose(np.ravel(r), 1 + row * row, rtol=1e-6) for r in denominators)


def test_a_fresh_kernel_step_lets_its_operand_take_a_result_in_place():
    # v2 = x @ w; fft(v2) is a per-primitive step on the NumPy kernel, marked fresh: v2's
    # buffer takes cos(v2) while the transform's result is still to be read
    def f(x, w):
        a = x @ w
        r = jnp.fft.rfft(a).real[..., :2]
        c = jnp.cos(a)
        return r * 2.0 + c[:, :2]

    x = np.linspace(-1, 1, 16).reshape(4, 4).astype(np.float32)
    backend = plugins.registry().backends["numba"]
    fn = lower(plax.make_jaxpr(f)(x, x).jaxpr, _emitter(False), backend, plax.devices("cpu")[0])
    lines = [line.strip() for line in fn.__plax_source__.splitlines()]
    assert "v3 = _f1(v2)" in lines and any("(v2, out=v2)" in line for line in lines), lines
    a = x.astype(np.float64) @ x
    want = np.fft.rfft(a).real[:, :2] * 2 + np.cos(a)[:, :2]
    np.testing.assert_allclose(np.asarray(fn(x, x)[0]), want, rtol=1e-5, atol=1e-5)
