"""``jit(f, backend=...)`` and ``jit(f, device=...)`` keep their placement under every transform.

The jit equation carries ``backend``/``device`` (:mod:`plax.transforms.call`), so ``vmap``,
``grad``, ``jvp`` and an enclosing ``jit`` of a pinned function run its body where it asked
to. Which backend compiled a body is watched through ``Backend.compile``
(:class:`subjaxpr_cases.CompileLog`); values are checked against NumPy float64. Devices need
several CPU devices, so those checks run in a child interpreter (``PLAX_NUM_CPU_DEVICES=2``);
where JAX is installed, the same cases run under JAX (``jax_num_cpu_devices``) and must give
the same devices and the same errors.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import plax
from plax import numpy as jnp

from subjaxpr_cases import CompileLog
from subprocess_util import last_json, run_python

TESTS = Path(__file__).resolve().parent
HAVE_NUMBA = importlib.util.find_spec("numba") is not None

X = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
F_REF = 2.0 * np.sin(X)      # f(x) = 2 sin x
DF_REF = 2.0 * np.cos(X)     # its derivative, elementwise

# name -> (transform of the pinned function f, its NumPy float64 reference)
TRANSFORMS = {
    "vmap": (lambda f: plax.vmap(f), F_REF),
    "grad": (lambda f: plax.grad(lambda x: f(x).sum()), DF_REF),
    "jvp": (lambda f: lambda x: plax.jvp(f, (x,), (jnp.ones_like(x),))[1], DF_REF),
    "vjp": (lambda f: lambda x: plax.vjp(f, x)[1](jnp.ones_like(x))[0], DF_REF),
    "nested_jit": (lambda f: plax.jit(lambda x: f(x) + 1.0), F_REF + 1.0),
    "vmap_of_grad": (lambda f: plax.vmap(plax.grad(lambda x: f(x).sum())), DF_REF),
    "jit_of_vmap": (lambda f: plax.jit(plax.vmap(f)), F_REF),
}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("backend", ["numpy", pytest.param(
    "numba", marks=pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed"))])
def test_pinned_backend_runs_the_body_under_transforms(backend, transform):
    make, want = TRANSFORMS[transform]
    # a fresh function: its bodies are traced and compiled inside the log
    f = plax.jit(lambda x: jnp.sin(x) * 2.0, backend=backend)
    with CompileLog() as log:
        out = make(f)(jnp.asarray(X, jnp.float32))
    np.testing.assert_allclose(np.asarray(out, np.float64), want, rtol=1e-6, atol=1e-6)
    # the pinned body (and every body derived from it) compiled with ``backend``; an
    # enclosing jit of the default backend compiles its own program too
    pinned = [b for b, _ in log.calls if b == backend]
    assert pinned, log.calls
    default = plax.devices("cpu")[0].backend.name
    if transform in ("nested_jit", "jit_of_vmap"):
        assert log.backends() <= {backend, default}, log.calls
    else:
        assert log.backends() == {backend}, log.calls


def test_the_jit_equation_carries_its_placement():
    f = plax.jit(lambda x: x * 2.0, backend="numpy")
    for jaxpr in (plax.make_jaxpr(plax.vmap(f))(jnp.ones((2, 3))),
                  plax.make_jaxpr(plax.grad(lambda x: f(x).sum()))(jnp.ones(3))):
        calls = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "jit"]
        assert calls and all(e.params["backend"] == "numpy" for e in calls), str(jaxpr)
    plain = plax.make_jaxpr(plax.vmap(plax.jit(lambda x: x * 2.0)))(jnp.ones((2, 3)))
    assert "backend" not in plain.jaxpr.eqns[0].params  # an unpinned jit prints as before


def test_an_unknown_backend_is_a_clear_error_under_vmap():
    f = plax.jit(lambda x: x * 2.0, backend="no_such_backend")
    with pytest.raises(RuntimeError, match="no_such_backend"):
        plax.vmap(f)(jnp.ones((2, 3)))


# The device cases, run by plax and (where installed) by JAX in a child interpreter with two
# CPU devices. Each records the result's device ids, or the exception's type name.
_DEVICE_CASES = """
    import json, sys
    sys.path.insert(0, {tests!r})
    import {module} as jax
    from {module} import numpy as jnp
    if {module!r} == "jax":
        jax.config.update("jax_num_cpu_devices", 2)
    import warnings
    warnings.simplefilter("ignore", DeprecationWarning)  # JAX: device= on jit is deprecated
    cpu0, cpu1 = jax.devices("cpu")[:2]

    def pinned():
        return jax.jit(lambda x: jnp.sin(x) * 2.0, device=cpu1)

    x = jnp.ones((2, 3))
    x0 = jax.device_put(jnp.ones((2, 3)), cpu0)  # committed to cpu:0
    cases = {{
        "call": lambda: pinned()(x),
        "call_committed_elsewhere": lambda: pinned()(x0),
        "vmap": lambda: jax.vmap(pinned())(x),
        "grad": lambda: jax.grad(lambda x: pinned()(x).sum())(x),
        "jvp": lambda: jax.jvp(pinned(), (x,), (x,))[1],
        "nested_jit": lambda: jax.jit(lambda x: pinned()(x) + 1.0)(x),
        "jit_of_vmap": lambda: jax.jit(jax.vmap(pinned()))(x),
        "nested_committed_elsewhere": lambda: jax.jit(lambda x: pinned()(x) + 1.0)(x0),
        "nested_in_jit_on_cpu0": lambda: jax.jit(lambda x: pinned()(x) + 1.0,
                                                 device=cpu0)(x),
    }}
    out = {{}}
    for name, run in cases.items():
        try:
            r = run()
            out[name] = sorted(d.id for d in r.devices())
        except Exception as err:
            out[name] = type(err).__name__
    print(json.dumps(out))
"""

_EXPECTED_DEVICES = {
    "call": [1], "call_committed_elsewhere": [1], "vmap": [1], "grad": [1], "jvp": [1],
    "nested_jit": [1], "jit_of_vmap": [1],
    # a program holding a call pinned to cpu:1 runs on cpu:1: asked to run on cpu:0 it fails
    "nested_committed_elsewhere": "ValueError", "nested_in_jit_on_cpu0": "ValueError",
}


def _device_cases(module: str) -> dict:
    code = _DEVICE_CASES.format(tests=str(TESTS), module=module)
    return last_json(run_python(code, env={"PLAX_NUM_CPU_DEVICES": "2",
                                           "PLAX_PLATFORMS": "cpu", "JAX_PLATFORMS": "cpu"}))


def test_pinned_device_under_transforms():
    assert _device_cases("plax") == _EXPECTED_DEVICES


def test_expected_devices_are_jaxs():
    pytest.importorskip("jax")
    assert _device_cases("jax") == _EXPECTED_DEVICES


_FAKE_GPU = """
    import json, sys
    sys.path[:0] = [{tests!r}, {cupy_tests!r}]
    import fake_cupy_plugin  # the simulated GPU, registered as the default platform
    import numpy as np
    import plax
    from plax import numpy as jnp, plugins
    from subjaxpr_cases import CompileLog
    reg = plugins.registry()
    cupy_backend = reg.backends["cupy"]
    plax.numpy.cumsum(plax.numpy.ones(3))  # (as test_subjaxpr_backend: GPU backend first)
    reg.backends = {{"cupy": cupy_backend, **{{k: v for k, v in reg.backends.items()
                                             if k != "cupy"}}}}
    x = jnp.ones((2, 3))
    out = {{"default": repr(plax.devices()[0])}}
    for name, make in [("nested", lambda f: plax.jit(lambda x: f(x) + 1.0)),
                       ("nested_grad", lambda f: plax.jit(plax.grad(lambda x: f(x).sum()))),
                       ("vmap", lambda f: plax.vmap(f))]:
        f = plax.jit(lambda x: jnp.sin(x) * 2.0, backend="numpy")
        with CompileLog() as log:
            values = [np.asarray(make(f)(x), np.float64).tolist() for _ in range(2)]
        out[name] = {{"values": values, "compiled": sorted(set(log.calls)),
                      "devices": sorted(map(repr, make(f)(x).devices()))}}
    print(json.dumps(out))
"""


@pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="cupy is not installed")
def test_call_pinned_to_the_cpu_inside_a_simulated_gpu_program():
    """A GPU program holding ``jit(f, backend="numpy")`` runs f's body with NumPy on the CPU
    (the GPU emitter must not take the call: it has no kernel for it), called twice (the
    second call replays the compiled program)."""
    code = _FAKE_GPU.format(tests=str(TESTS), cupy_tests=str(TESTS / "cupy"))
    out = last_json(run_python(code, TESTS.parent / "backends", timeout=300))
    assert out.pop("default") == "CudaDevice(id=0)"
    x = np.ones((2, 3))
    want = {"nested": 2.0 * np.sin(x) + 1.0, "nested_grad": 2.0 * np.cos(x),
            "vmap": 2.0 * np.sin(x)}
    for name, r in out.items():
        for v in r["values"]:
            np.testing.assert_allclose(v, want[name], rtol=1e-6, err_msg=name)
        assert ["numpy", "CpuDevice(id=0)"] in r["compiled"], (name, r)
        if name == "vmap":  # eager: the pinned call alone, on the CPU
            assert r["compiled"] == [["numpy", "CpuDevice(id=0)"]] and \
                r["devices"] == ["CpuDevice(id=0)"], r
        else:  # the enclosing program on the simulated GPU, the call on the CPU
            assert r["compiled"] == [["cupy", "CudaDevice(id=0)"], ["numpy", "CpuDevice(id=0)"]]
            assert r["devices"] == ["CudaDevice(id=0)"], r
