"""Devices: listing and selecting them, placing arrays, committed semantics, environment variables.

Multi-device behaviour runs in child interpreters started with ``PLAX_NUM_CPU_DEVICES=4``
(the device count is fixed when plax first builds its CPU devices).

These tests assert what holds whatever other backends are installed (a second CPU backend,
or one of another platform): tests/test_installed_backend.py runs them with such a backend.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import plugins
from plax.device import CpuDevice, Device
from subprocess_util import last_json, run_python


def cpu_default_backend() -> str:
    """The name of the backend that runs CPU work when no variable chooses (highest priority)."""
    cpu = [b for b in plugins.registry().backends.values() if b.platform == "cpu"]
    return sorted(cpu, key=lambda b: (-b.priority, b.name))[0].name


def only_numpy_installed() -> bool:
    return sorted(plugins.registry().backends) == ["numpy"]


# ------------------------------------------------------------------ listing

def test_cpu_device_and_numpy_backend():
    cpu = plax.devices("cpu")
    assert cpu == [CpuDevice(0)]
    [d] = cpu
    assert (d.platform, d.id, d.device_kind, d.process_index) == ("cpu", 0, "cpu", 0)
    assert repr(d) == "CpuDevice(id=0)" and str(d) == "cpu:0"
    assert d.backend.platform == "cpu" and d.backend.name == cpu_default_backend()
    assert "numpy" in plugins.registry().backends
    assert plax.devices(backend="numpy") == cpu
    assert plax.devices("numpy") == cpu  # a backend name works where a platform is expected
    assert plax.device_count("cpu") == 1
    assert plax.process_index() == 0 and plax.process_count() == 1


def test_default_devices_agree():
    devs = plax.devices()
    assert devs and plax.local_devices() == devs
    assert plax.device_count() == plax.local_device_count() == len(devs)
    assert plax.default_backend() == devs[0].platform
    assert len({d.platform for d in devs}) == 1
    # the default platform: an accelerator platform when one is installed, else the CPU
    platforms = plugins.registry().platforms()
    assert plax.default_backend() == platforms[0]
    assert (platforms[0] == "cpu") == (platforms == ["cpu"])
    if only_numpy_installed():
        assert devs == [CpuDevice(0)] and devs[0].backend.name == "numpy"


def test_device_matches_jax_naming():
    jax = pytest.importorskip("jax")
    ours, theirs = plax.devices("cpu")[0], jax.devices("cpu")[0]
    assert (repr(ours), str(ours), ours.platform, ours.device_kind, ours.id) == (
        repr(theirs), str(theirs), theirs.platform, theirs.device_kind, theirs.id)
    if plax.devices()[0].platform == "cpu":  # JAX here has only its CPU
        assert plax.default_backend() == jax.default_backend()


def test_device_equality_and_hash():
    assert CpuDevice(0) == plax.devices("cpu")[0]
    assert CpuDevice(0) != CpuDevice(1)
    assert Device(0, platform="other") != CpuDevice(0)
    assert len({CpuDevice(0), CpuDevice(0), CpuDevice(1)}) == 2


@pytest.mark.parametrize("name", ["gpu", "cuda", "tpu"])
def test_unavailable_platform_lists_what_is_available(name):
    if plugins._platform_alias(name) in plugins.registry().platforms():
        pytest.skip(f"a backend for {name!r} is installed")
    with pytest.raises(RuntimeError, match=rf"'{name}': no installed backend.*platforms: \[.*'cpu'.*"
                                           r"backends: \[.*'numpy'"):
        plax.devices(name)


def test_unknown_backend_lists_available_backends():
    with pytest.raises(RuntimeError, match=r"Unknown backend 'nope'.*platforms: \[.*'cpu'.*\].*"
                                           r"backends: \[.*'numpy'.*\]"):
        plax.devices(backend="nope")
    with pytest.raises(RuntimeError, match="'nope'"):
        plax.device_count("nope")


# ------------------------------------------------------------------ placing arrays

def test_device_put_pytree():
    d = plax.devices()[0]
    tree = {"w": np.ones((2, 2), np.float32), "b": [1.5, 2, True], "none": None,
            "arr": jnp.arange(3)}
    out = plax.device_put(tree, d)
    assert set(out) == set(tree) and out["none"] is None
    leaves = [out["w"], *out["b"], out["arr"]]
    assert all(isinstance(x, plax.Array) and x.device == d and x.committed for x in leaves)
    assert [x.dtype for x in out["b"]] == [np.float32, np.int32, np.bool_]
    assert [x.weak_type for x in out["b"]] == [True, True, False]  # Python scalars are weak
    np.testing.assert_array_equal(np.asarray(out["w"]), np.ones((2, 2)))


def test_device_put_matches_jax_types():
    jax = pytest.importorskip("jax")
    values = [1.5, 2, True, 1j, np.float64(2.0), np.arange(3), np.ones(2, np.float16)]
    for v in values:
        assert repr(plax.device_put(v)) == repr(jax.device_put(v)), v


def test_device_put_copies_numpy_input():
    host = np.arange(3.0)
    x = plax.device_put(host)
    host[0] = 100.0
    assert float(x[0]) == 0.0


def test_device_put_committed_flag():
    x = jnp.ones(3)
    assert not x.committed
    assert plax.device_put(x) is x  # no device: the array stays as it is
    y = plax.device_put(x, plax.devices()[0])
    assert y.committed and y.device == x.device
    assert plax.device_put(y) is y
    assert plax.device_put(y, plax.devices()[0]) is y
    z = plax.device_put(x, "cpu")
    assert z.committed and z.device == CpuDevice(0)


def test_device_put_bad_input():
    with pytest.raises(TypeError, match="object.*not a valid plax array type"):
        plax.device_put(object())


_BAD_DEVICES = [7, 3.5, object(), "nonesuch", "tpu"]


@pytest.mark.parametrize("bad", _BAD_DEVICES, ids=["int", "float", "object", "unknown", "tpu"])
def test_device_put_bad_device_is_value_error_naming_it(bad):
    if bad == "tpu" and "tpu" in plugins.registry().platforms():
        pytest.skip("a TPU backend is installed")
    with pytest.raises(ValueError, match=r"plax\.device_put got device=") as caught:
        plax.device_put(1.0, bad)
    assert repr(bad) in str(caught.value)
    if isinstance(bad, str):  # says what is available
        assert "'cpu'" in str(caught.value) and "'numpy'" in str(caught.value)


def test_device_put_bad_device_matches_jax_error_class():
    jax = pytest.importorskip("jax")
    for bad in (7, object(), "nonesuch"):
        with pytest.raises(ValueError):
            jax.device_put(np.ones(2), bad)
        with pytest.raises(ValueError):
            plax.device_put(np.ones(2), bad)


def test_device_get():
    tree = {"a": jnp.arange(3), "b": (jnp.ones(()), 2.5, "label")}
    host = plax.device_get(tree)
    assert isinstance(host["a"], np.ndarray) and host["a"].dtype == np.int32
    np.testing.assert_array_equal(host["a"], [0, 1, 2])
    assert isinstance(host["b"][0], np.ndarray) and host["b"][0].shape == ()
    assert host["b"][1:] == (2.5, "label")  # non-array leaves pass through


# ------------------------------------------------------------------ default device

def test_default_device_context():
    d = plax.devices()[0]
    with plax.default_device(d):
        x = jnp.zeros(2)
    assert x.device == d and not x.committed  # placed by default, not committed
    with plax.default_device("cpu"):
        assert jnp.ones(1).device == CpuDevice(0)
    with plax.default_device(None):  # no change
        assert jnp.ones(1).device == d


def test_default_device_bad_argument():
    # JAX raises ValueError for a default_device that is neither a Device nor a name
    with pytest.raises(ValueError, match="Device .*or a platform name, got 7"):
        with plax.default_device(7):
            pass
    with pytest.raises(RuntimeError, match="'tpu'"):
        with plax.default_device("tpu"):
            pass


# ------------------------------------------------------------------ several CPU devices

_MULTI = """
    import json, threading
    import numpy as np
    import plax, plax.numpy as jnp
    devs = plax.devices()
    d1, d2, d3 = devs[1], devs[2], devs[3]
    out = {"devices": [repr(d) for d in devs], "count": plax.device_count(),
           "local": plax.local_device_count(), "strs": [str(d) for d in devs]}
    x = plax.device_put(jnp.arange(3.0), d1)
    u = jnp.ones(3)
    out["x"] = [repr(x.device), x.committed]
    out["x_plus_1"] = [repr((x + 1).device), (x + 1).committed]
    out["x_plus_u"] = [repr((x + u).device), (x + u).committed, np.asarray(x + u).tolist()]
    out["u_plus_u"] = [repr((u + u).device), (u + u).committed]
    out["sum"] = repr(jnp.sum(x).device)
    y = plax.device_put(jnp.ones(3), d2)
    for name, fn in [("eager", lambda: x + y), ("jit", lambda: plax.jit(jnp.add)(x, y))]:
        try:
            fn()
            out[name + "_mixed"] = "no error"
        except ValueError as err:
            out[name + "_mixed"] = str(err)
    out["jit_on_d1"] = repr(plax.jit(lambda a: a * 2)(x).device)
    out["jit_device"] = repr(plax.jit(lambda a: a * 2, device=d3)(u).device)
    moved = plax.device_put(x, d2)
    out["moved"] = [repr(moved.device), moved.committed, np.asarray(moved + y).tolist()]
    with plax.default_device(d3):
        inner = jnp.zeros(2)
        with plax.default_device(d2):
            innermost = jnp.zeros(2)
        after = jnp.zeros(2)
        seen = []
        t = threading.Thread(target=lambda: seen.append(repr(jnp.zeros(1).device)))
        t.start(); t.join()
    out["contexts"] = [repr(inner.device), repr(innermost.device), repr(after.device),
                       repr(jnp.zeros(2).device), inner.committed]
    out["other_thread"] = seen[0]
    tree = plax.device_put({"a": np.ones(2), "b": [1.0]}, d3)
    out["tree"] = sorted({repr(leaf.device) for leaf in plax.tree_util.tree_leaves(tree)})
    out["backends"] = sorted({d.backend.name for d in devs})
    print(json.dumps(out))
"""


def test_multiple_cpu_devices_and_committed_semantics():
    # PLAX_PLATFORMS=cpu: the CPU is the default platform even if another one is installed
    out = last_json(run_python(_MULTI, env={"PLAX_NUM_CPU_DEVICES": "4", "PLAX_PLATFORMS": "cpu"}))
    assert out["devices"] == [f"CpuDevice(id={i})" for i in range(4)]
    assert out["strs"] == [f"cpu:{i}" for i in range(4)]
    assert out["count"] == out["local"] == 4
    assert out["x"] == ["CpuDevice(id=1)", True]
    # Results of committed operands stay on (and committed to) their device ...
    assert out["x_plus_1"] == ["CpuDevice(id=1)", True]
    assert out["x_plus_u"] == ["CpuDevice(id=1)", True, [1.0, 2.0, 3.0]]
    assert out["sum"] == "CpuDevice(id=1)"
    # ... uncommitted operands follow the default device.
    assert out["u_plus_u"] == ["CpuDevice(id=0)", False]
    for key in ("eager_mixed", "jit_mixed"):
        assert "incompatible devices" in out[key], out[key]
        assert "device ids [1] on platform CPU" in out[key], out[key]   # (JAX's message)
        assert "device ids [2] on platform CPU" in out[key], out[key]
    assert out["jit_on_d1"] == "CpuDevice(id=1)"
    assert out["jit_device"] == "CpuDevice(id=3)"
    assert out["moved"] == ["CpuDevice(id=2)", True, [1.0, 2.0, 3.0]]
    assert out["contexts"] == ["CpuDevice(id=3)", "CpuDevice(id=2)", "CpuDevice(id=3)",
                               "CpuDevice(id=0)", False]
    assert out["other_thread"] == "CpuDevice(id=0)"  # the context is per thread
    assert out["tree"] == ["CpuDevice(id=3)"]
    assert out["backends"] == [cpu_default_backend()]  # one backend drives every CPU device


# ------------------------------------------------------------------ environment variables

_REPORT = """
    import json, plax
    try:
        devs = plax.devices()
        out = {"devices": [repr(d) for d in devs], "backend": devs[0].backend.name,
               "platform": plax.default_backend()}
    except Exception as err:
        out = {"error": type(err).__name__, "message": str(err)}
    print(json.dumps(out))
"""


@pytest.mark.parametrize("env,expected,backend", [
    ({"PLAX_PLATFORMS": "cpu"}, ["CpuDevice(id=0)"], None),
    ({"JAX_PLATFORMS": "cpu"}, ["CpuDevice(id=0)"], None),
    ({"PLAX_BACKEND": "numpy"}, ["CpuDevice(id=0)"], "numpy"),  # forces the reference backend
    ({"PLAX_BACKEND": "numpy", "PLAX_NUM_CPU_DEVICES": "2"}, ["CpuDevice(id=0)", "CpuDevice(id=1)"],
     "numpy"),
    ({"PLAX_NUM_CPU_DEVICES": "2", "PLAX_PLATFORMS": "cpu"}, ["CpuDevice(id=0)", "CpuDevice(id=1)"],
     None),
])
def test_environment_selection(env, expected, backend):
    out = last_json(run_python(_REPORT, env=env))
    assert out == {"devices": expected, "backend": backend or cpu_default_backend(),
                   "platform": "cpu"}


@pytest.mark.parametrize("env,error,fragments", [
    ({"PLAX_NUM_CPU_DEVICES": "0"}, "RuntimeError", ["PLAX_NUM_CPU_DEVICES", "got 0"]),
    # (a word, PLAX_NUM_CPU_DEVICES=four, is refused at import: test_config_env_options.py)
    ({"PLAX_PLATFORMS": "tpu"}, "RuntimeError", ["PLAX_PLATFORMS='tpu'", "['tpu']", "'cpu'"]),
    ({"PLAX_PLATFORMS": "gpu,cpu"}, "RuntimeError", ["['gpu']"]),
    ({"JAX_PLATFORMS": "tpu"}, "RuntimeError", ["JAX_PLATFORMS='tpu'", "['tpu']"]),
    ({"PLAX_BACKEND": "nmupy-typo"}, "RuntimeError", ["PLAX_BACKEND='nmupy-typo'",
                                                      "names no installed backend", "'numpy'"]),
    ({"PLAX_BACKEND": "cpu"}, "RuntimeError", ["PLAX_BACKEND='cpu' names a platform",
                                               "PLAX_PLATFORMS=cpu", "'numpy'"]),
])
def test_bad_environment_values_give_clear_errors(env, error, fragments):
    for platform in ("gpu", "tpu"):
        if platform in str(env) and platform in plugins.registry().platforms():
            pytest.skip(f"a backend for {platform!r} is installed")
    out = last_json(run_python(_REPORT, env=env))
    assert out["error"] == error, out
    for fragment in fragments:
        assert fragment in out["message"], (fragment, out["message"])


_COUNT_VARIABLES = ("PLAX_NUM_CPU_DEVICES", "JAX_NUM_CPU_DEVICES", "XLA_FLAGS")
_XLA = "--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count="


def _count_environment(monkeypatch, env: dict, option: int = -1) -> None:
    """``env`` as the only device-count settings, and ``jax_num_cpu_devices`` at ``option``
    (set in the option table directly: update() is refused once this process has devices)."""
    for name in _COUNT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setitem(plax.config._values, "num_cpu_devices", option)


@pytest.mark.parametrize("env,option,expected", [
    ({}, -1, 1),
    ({"PLAX_NUM_CPU_DEVICES": " 3"}, -1, 3),
    ({"PLAX_NUM_CPU_DEVICES": "", "JAX_NUM_CPU_DEVICES": "2"}, -1, 2),  # empty: unset
    ({"PLAX_NUM_CPU_DEVICES": "3", "JAX_NUM_CPU_DEVICES": "2"}, -1, 3),
    ({"PLAX_NUM_CPU_DEVICES": "2", "XLA_FLAGS": _XLA + "4"}, -1, 2),    # JAX: the option wins
    ({"XLA_FLAGS": _XLA + "4"}, -1, 4),
    # as in JAX, a negative count is no count: the next source decides
    ({"PLAX_NUM_CPU_DEVICES": "-1", "XLA_FLAGS": _XLA + "4"}, -1, 4),
    ({"JAX_NUM_CPU_DEVICES": "-3"}, -1, 1),
    ({"PLAX_NUM_CPU_DEVICES": "3"}, 2, 2),                            # config.update wins
    ({"PLAX_NUM_CPU_DEVICES": "3"}, -2, 3),
])
def test_cpu_device_count_sources(monkeypatch, env, option, expected):
    from plax.device import cpu_device_count
    _count_environment(monkeypatch, env, option)
    assert cpu_device_count() == expected


@pytest.mark.parametrize("env,option,fragments", [
    # JAX: a word (or an empty value) is a ValueError, zero fails when its CPU client starts
    ({"PLAX_NUM_CPU_DEVICES": "four"}, -1, ["PLAX_NUM_CPU_DEVICES", "'four'"]),
    ({"JAX_NUM_CPU_DEVICES": "2.5"}, -1, ["JAX_NUM_CPU_DEVICES", "'2.5'"]),
    ({"PLAX_NUM_CPU_DEVICES": "0"}, -1, ["PLAX_NUM_CPU_DEVICES", "got 0"]),
    ({"PLAX_NUM_CPU_DEVICES": "0", "XLA_FLAGS": _XLA + "2"}, -1, ["PLAX_NUM_CPU_DEVICES"]),
    ({}, 0, ["jax_num_cpu_devices", "got 0"]),
    # XLA aborts on a word and fails on a count below 1
    ({"XLA_FLAGS": _XLA + "0"}, -1, ["--xla_force_host_platform_device_count", "'0'"]),
    ({"XLA_FLAGS": _XLA + "-2"}, -1, ["--xla_force_host_platform_device_count", "'-2'"]),
    ({"XLA_FLAGS": _XLA + "many"}, -1, ["--xla_force_host_platform_device_count", "'many'"]),
])
def test_cpu_device_count_bad_values_name_their_source(monkeypatch, env, option, fragments):
    from plax.device import cpu_device_count
    _count_environment(monkeypatch, env, option)
    with pytest.raises(ValueError) as info:
        cpu_device_count()
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


# ------------------------------------------------------------------ thread safety of the default

def test_default_device_is_thread_local():
    d = plax.devices()[0]
    seen = []
    barrier = threading.Barrier(2)

    def worker():
        barrier.wait()
        seen.append(plax.devices()[0] is d and jnp.ones(1).device == d)

    with plax.default_device(d):
        t = threading.Thread(target=worker)
        t.start()
        barrier.wait()
        t.join()
    assert seen == [True]
