"""Sub-jaxprs compile with the backend and on the device of the program holding them.

``cond``, ``while``, ``scan`` (directly, or inside ``checkpoint``, custom_jvp/custom_vjp
functions and nested ``jit`` calls) hold bodies. ``jit(f, backend=B)`` must compile every
body with ``B`` for the program's device, whatever the default backend or platform is, and
an eager call compiles them with the device's backend (:mod:`plax.lowering.bodies`). Each
check watches ``Backend.compile`` (:class:`subjaxpr_cases.CompileLog`) and compares the
values with an eager run on the CPU. The cases are in tests/subjaxpr_cases.py.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import plax

from subjaxpr_cases import check_all, check_eager
from subprocess_util import last_json, run_python

TESTS = Path(__file__).resolve().parent
HAVE_NUMBA = importlib.util.find_spec("numba") is not None
needs_numba = pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed")


def _assert_all_on(report: dict, backend: str, device: str | None = None) -> None:
    for name, r in report.items():
        assert r["values_match"], (name, r)
        assert r["compiled_by"] == [backend], (name, r)
        assert r["compiles"] >= 2, (name, "no body was compiled: the case holds none", r)
        if device is not None:
            assert r["devices"] == [device], (name, r)


@pytest.mark.parametrize("backend", ["numpy", pytest.param("numba", marks=needs_numba)])
def test_jit_compiles_every_body_with_its_backend(backend):
    _assert_all_on(check_all(backend), backend, "CpuDevice(id=0)")


def test_eager_bodies_compile_with_the_default_backend():
    with plax.default_device(plax.devices("cpu")[0]):
        want = plax.devices("cpu")[0].backend.name
        report = check_eager()
    for name, backends in report.items():
        assert backends == [want], (name, backends)


_OTHER_DEFAULT = """
    import json, sys
    sys.path.insert(0, {tests!r})
    import plax
    from subjaxpr_cases import check_all, check_eager
    print(json.dumps({{"default": plax.devices()[0].backend.name,
                      "numba": check_all("numba"),
                      "cpu1": check_all(None, device=plax.devices()[1]),
                      "eager": check_eager()}}))
"""


@needs_numba
def test_bodies_follow_the_program_not_the_default_backend():
    """NumPy is the default (PLAX_BACKEND): ``jit(backend="numba")`` compiles its bodies with
    Numba; a program placed on cpu:1 compiles them for cpu:1."""
    out = last_json(run_python(_OTHER_DEFAULT.format(tests=str(TESTS)), timeout=600,
                               env={"PLAX_BACKEND": "numpy", "PLAX_NUM_CPU_DEVICES": "2"}))
    assert out["default"] == "numpy"
    _assert_all_on(out["numba"], "numba", "CpuDevice(id=0)")
    _assert_all_on(out["cpu1"], "numpy", "CpuDevice(id=1)")
    for name, backends in out["eager"].items():
        assert backends == ["numpy"], (name, backends)


_TOY_DEFAULT = """
    import json, sys
    sys.path[:0] = [{tests!r}, {toy!r}]
    import plax
    from plax import plugins
    import plax_toybackend.plugin
    plugins.register_plugin(plax_toybackend.plugin, name="toy_by_hand")
    from subjaxpr_cases import check_all, check_eager
    print(json.dumps({{"default": repr(plax.devices()[0]),
                      "numpy": check_all("numpy"),
                      "toy": check_all(None),
                      "eager": check_eager()}}))
"""


def test_bodies_on_a_third_party_default_platform():
    """The toy backend (a platform of its own, boxed buffers) is the default: its programs'
    bodies compile with it (rows, stacks and decisions through its own kernels and
    ``to_host``), ``jit(backend="numpy")``'s with NumPy."""
    toy = TESTS / "plugin_packages" / "plax_toybackend"
    out = last_json(run_python(_TOY_DEFAULT.format(tests=str(TESTS), toy=str(toy)), timeout=300,
                               env={"PLAX_TOY_PLATFORM": "toy", "PLAX_TOY_PRIORITY": None,
                                    "PLAX_TOY_COMPILES": None}))
    assert out["default"] == "ToyDevice(id=0)"
    _assert_all_on(out["numpy"], "numpy", "CpuDevice(id=0)")
    _assert_all_on(out["toy"], "toy", "ToyDevice(id=0)")
    for name, backends in out["eager"].items():
        assert backends == ["toy"], (name, backends)


_FAKE_GPU = """
    import json, sys
    sys.path[:0] = [{tests!r}, {cupy_tests!r}]
    import fake_cupy_plugin  # the simulated GPU, registered as the default platform
    import numpy as np
    import plax
    from plax import plugins
    from plax.lowering import reference_backend
    from subjaxpr_cases import check_all
    reg = plugins.registry()
    cupy_backend = reg.backends["cupy"]
    # the GPU backend first, as entry points may list it, after it has used the reference
    # kernels (it keeps their table in an attribute of its own)
    plax.numpy.cumsum(plax.numpy.ones(3))
    reg.backends = {{"cupy": cupy_backend, **{{k: v for k, v in reg.backends.items()
                                             if k != "cupy"}}}}
    print(json.dumps({{"default": repr(plax.devices()[0]),
                      "reference": reference_backend().name,
                      "numpy": check_all("numpy")}}))
"""


def test_bodies_of_a_cpu_program_stay_off_the_simulated_gpu():
    """With the simulated GPU as the default platform, ``jit(f, backend="numpy")`` compiles
    every body with NumPy on the CPU (issue 24: they went to the CuPy backend)."""
    out = last_json(run_python(_FAKE_GPU.format(tests=str(TESTS), cupy_tests=str(TESTS / "cupy")),
                               TESTS.parent / "backends", timeout=300))
    assert out["default"] == "CudaDevice(id=0)"
    assert out["reference"] == "numpy"
    _assert_all_on(out["numpy"], "numpy", "CpuDevice(id=0)")


def test_a_plugin_primitive_holding_a_body_runs_it_on_the_program_backend():
    """``register_body_kernel`` is the general seam: a new primitive holding a jaxpr runs its
    body with the backend and device of the program (compiled and eager)."""
    from plax.core.primitive import Primitive
    from plax.lowering import register_body_kernel
    from subjaxpr_cases import CompileLog
    twice_p = Primitive("test_twice")
    twice_p.def_abstract_eval(lambda x, *, body: body.out_avals[0])
    register_body_kernel(twice_p, lambda runner, x, *, body: runner.run(body, *runner.run(body, x))[0])
    body = plax.make_jaxpr(lambda x: x * 3.0)(1.0)
    for backend in ["numpy"] + (["numba"] if HAVE_NUMBA else []):
        with CompileLog() as log:
            out = plax.jit(lambda x: twice_p.bind(x, body=body) + 1.0, backend=backend)(2.0)
        assert float(out) == 19.0
        assert log.backends() == {backend} and len(log.calls) == 2
    body = plax.make_jaxpr(lambda x: x * 3.0)(1.0)  # a new body: not compiled yet
    with CompileLog() as log:
        assert float(twice_p.bind(plax.numpy.float32(2.0), body=body)) == 18.0
    assert log.backends() == {plax.devices()[0].backend.name}
