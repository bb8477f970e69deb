"""Plugin discovery: a third-party backend installed with pip, broken plugins, ``python -m plax info``.

The toy backend (tests/plugin_packages/plax_toybackend) is a complete package with its own
pyproject.toml and ``plax.backends`` entry point. It is pip-installed once per session into
a temporary directory, and each check runs in a fresh interpreter with that directory on
PYTHONPATH, so discovery happens exactly as it would for a user. The same package is
registered in-process (``plugins.register_plugin``) under another name and platform for
the checks of which backend and platform are the default.

These tests assert what holds whatever other backends are installed:
tests/test_installed_backend.py runs them with the toy backend installed as well.
"""
from __future__ import annotations

import json
import os
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import plugins
from plax.backend import Backend
from plax.plugins import PlaxPluginWarning, hookimpl

from subprocess_util import last_json, run_python
from toy_backend_site import TOY_PACKAGE, toy_backend_site

# the toy backend as these tests expect it: its own platform "toy", whatever the environment says
TOY_ENV = {"PLAX_TOY_PLATFORM": "toy", "PLAX_TOY_PRIORITY": None}
#: a test whose children get the toy backend installed and set up by TOY_ENV, whatever this
#: process has: tests/test_installed_backend.py's child sessions, which differ from this one
#: only in having the toy backend installed, deselect it (they would rerun the same children)
same_children = pytest.mark.same_with_any_installed_backend


def no_other_accelerator() -> bool:
    """Whether, beside the toy backend, only CPU backends are installed (then "toy" is the only
    accelerator-like platform a child with the toy backend sees)."""
    return all(b.platform == "cpu" or b.name == "toy" for b in plugins.registry().backends.values())


@pytest.fixture(scope="session")
def toy_site() -> Path:
    """A directory where pip installed plax-toybackend (built once per test session, shared
    with tests/test_installed_backend.py and its child sessions)."""
    target = toy_backend_site()
    assert (target / "plax_toybackend" / "backend.py").exists()
    return target


# ------------------------------------------------------------------ a third-party backend

_TOY_CHECKS = """
    import json, sys
    import numpy as np
    import plax
    lazy = "plax_toybackend" not in sys.modules and "plax_numpy" not in sys.modules
    import plax.numpy as jnp

    toy = plax.devices("toy")
    d = toy[0]
    cpu = plax.devices("cpu")[0]
    x = plax.device_put(np.arange(4.0), d)
    y = x * 2.0 + 1.0
    s = jnp.sin(x)
    jitted = plax.jit(lambda a, b: a @ b + 1.0, backend="toy")
    z = jitted(jnp.ones((2, 3)), jnp.ones((3, 2)))
    g = plax.grad(lambda a: (a ** 2).sum())(x)
    back = plax.device_put(y, cpu)
    try:
        x + plax.device_put(jnp.ones(4), cpu)
        mixed = "no error"
    except ValueError as err:
        mixed = str(err)
    with plax.default_device(d):
        fresh = jnp.zeros(3)
    print(json.dumps({
        "lazy": lazy,
        "toy": [repr(t) for t in toy],
        "default": [repr(t) for t in plax.devices()],
        "cpu": [repr(t) for t in plax.devices("cpu")],
        "platform": d.platform, "id": d.id, "kind": d.device_kind, "str": str(d),
        "backend": d.backend.name, "default_backend": plax.default_backend(),
        "x_device": repr(x.device), "x_buffer": type(x._buf).__name__, "committed": x.committed,
        "y": np.asarray(y).tolist(), "y_device": repr(y.device), "y_buffer": type(y._buf).__name__,
        "sin": np.asarray(s).tolist(),
        "z": np.asarray(z).tolist(), "z_device": repr(z.device), "z_buffer": type(z._buf).__name__,
        "grad": np.asarray(g).tolist(), "grad_device": repr(g.device),
        "back_device": repr(back.device), "back_buffer": type(back._buf).__name__,
        "mixed": mixed, "fresh_device": repr(fresh.device),
        "executed": sorted(set(d.backend.executed)),
        "count": plax.device_count("toy"),
    }))
"""


@same_children
def test_pip_installed_backend_is_discovered_and_computes(toy_site):
    out = last_json(run_python(_TOY_CHECKS, toy_site, env=TOY_ENV))
    assert out["lazy"], "import plax must not import any backend"
    assert out["toy"] == ["ToyDevice(id=0)"]
    # A non-CPU platform is preferred over the CPU, as JAX prefers an accelerator.
    assert out["default_backend"] != "cpu"
    if no_other_accelerator():
        assert out["default"] == ["ToyDevice(id=0)"]
        assert out["default_backend"] == "toy"
    assert out["cpu"] == ["CpuDevice(id=0)"]
    assert (out["platform"], out["id"], out["kind"], out["str"]) == ("toy", 0, "toy simulator",
                                                                     "toy:0")
    assert out["backend"] == "toy" and out["count"] == 1
    assert out["x_device"] == out["y_device"] == "ToyDevice(id=0)" and out["committed"]
    assert out["x_buffer"] == out["y_buffer"] == "ToyBuffer"
    np.testing.assert_allclose(out["y"], np.arange(4.0) * 2 + 1)
    np.testing.assert_allclose(out["sin"], np.sin(np.arange(4.0)), rtol=1e-6)
    assert {"mul", "add", "sin"} <= set(out["executed"])
    np.testing.assert_allclose(out["z"], np.full((2, 2), 4.0))
    assert out["z_device"] == "ToyDevice(id=0)" and out["z_buffer"] == "ToyBuffer"
    np.testing.assert_allclose(out["grad"], 2 * np.arange(4.0))
    assert out["grad_device"] == "ToyDevice(id=0)"
    assert out["back_device"] == "CpuDevice(id=0)" and out["back_buffer"] == "ndarray"
    assert "device ids [0] on platform CPU" in out["mixed"]   # (JAX's message)
    assert "device ids [0] on platform TOY" in out["mixed"]
    assert out["fresh_device"] == "ToyDevice(id=0)"


@same_children
def test_info_lists_installed_backend(toy_site):
    proc = run_python("", toy_site, args=["-m", "plax", "info"], env=TOY_ENV)
    text = proc.stdout
    assert "[loaded] toy (plax.backends: plax_toybackend.plugin) backends=['toy']" in text
    assert "[loaded] numpy (plax.backends: plax_numpy.plugin)" in text
    assert "ToyDevice(id=0) platform=toy kind='toy simulator' backends=['toy']" in text
    assert "CpuDevice(id=0) platform=cpu" in text
    if no_other_accelerator():
        assert ("default backend: toy (runs on ToyDevice(id=0) with 'toy'; accelerator platforms "
                "come before cpu)") in text


_EXCLUDED_CHECKS = """
    import json, plax
    out = {}
    for name, fn in [("devices", lambda: plax.devices("toy")),
                     ("backend", lambda: plax.devices(backend="toy")),
                     ("jit", lambda: plax.jit(lambda x: x + 1, backend="toy")(1.0)),
                     ("put", lambda: plax.device_put(1.0, "toy"))]:
        try:
            fn()
            out[name] = "no error"
        except Exception as e:
            out[name] = f"{type(e).__name__}: {e}"
    try:
        out["default"] = [repr(d) for d in plax.devices()]
    except RuntimeError as e:
        out["default"] = f"RuntimeError: {e}"
    print(json.dumps(out))
"""


@same_children
def test_plax_platforms_excludes_installed_backend(toy_site):
    env = {**TOY_ENV, "PLAX_PLATFORMS": "cpu"}
    out = last_json(run_python(_EXCLUDED_CHECKS, toy_site, env=env))
    assert out["default"] == ["CpuDevice(id=0)"]
    # the errors say the backend is installed but excluded by the variable, not "not installed"
    for key, kind in [("devices", "RuntimeError"), ("backend", "RuntimeError"),
                      ("jit", "RuntimeError"), ("put", "ValueError")]:
        message = out[key]
        assert message.startswith(kind + ":"), (key, message)
        assert "'toy'" in message and "installed but excluded by PLAX_PLATFORMS='cpu'" in message, \
            (key, message)
        assert "platforms: ['cpu']" in message, (key, message)
    info = run_python("", toy_site, env=env, args=["-m", "plax", "info"]).stdout
    assert "toy (platform toy excluded by PLAX_PLATFORMS)" in info
    assert "toy: platform=toy excluded by PLAX_PLATFORMS='cpu'" in info
    assert "; set by PLAX_PLATFORMS='cpu')" in info


_SELECTION_CHECKS = """
    import json, plax, plax.numpy as jnp
    out = {}
    try:
        devs = plax.devices()
    except RuntimeError as e:
        print(json.dumps({"error": str(e)}))
        raise SystemExit
    x = jnp.arange(3.0)
    y = plax.jit(lambda a: a * 2)(x)
    toy = plax.devices("toy")[0]  # another platform stays reachable by name
    z = plax.jit(lambda a: a * 2, backend="toy")(x)
    print(json.dumps({
        "devices": [repr(d) for d in devs], "platform": plax.default_backend(),
        "default_device": repr(plax.devices()[0]), "backend": devs[0].backend.name,
        "x": repr(x.device), "y": repr(y.device), "z": repr(z.device),
        "toy_ran": sorted(set(toy.backend.executed)),
    }))
"""


@same_children
@pytest.mark.parametrize("env,expected", [
    ({}, None),  # an accelerator-like platform: the toy's, unless a real one is installed
    ({"PLAX_BACKEND": "numpy"}, {"devices": ["CpuDevice(id=0)"], "platform": "cpu",
                                 "backend": "numpy"}),
    ({"PLAX_BACKEND": "numpy", "PLAX_PLATFORMS": "toy,cpu"},
     {"devices": ["CpuDevice(id=0)"], "platform": "cpu", "backend": "numpy"}),
    ({"PLAX_BACKEND": "toy", "PLAX_PLATFORMS": "cpu,toy"},
     {"devices": ["ToyDevice(id=0)"], "platform": "toy", "backend": "toy"}),
    ({"PLAX_PLATFORMS": "cpu,toy"}, {"devices": ["CpuDevice(id=0)"], "platform": "cpu",
                                     "backend": "<highest-priority cpu backend>"}),
])
def test_plax_backend_picks_default_device_with_another_platform_installed(toy_site, env,
                                                                           expected):
    out = last_json(run_python(_SELECTION_CHECKS, toy_site, env={**TOY_ENV, **env}))
    if expected is None:
        assert out["platform"] != "cpu", out
        expected = ({"devices": ["ToyDevice(id=0)"], "platform": "toy", "backend": "toy"}
                    if no_other_accelerator() else {})
    if expected.get("backend") == "<highest-priority cpu backend>":
        # the child's CPU backends: this process's, less the toy (a platform of its own there)
        cpu = [b for b in plugins.registry().backends.values()
               if b.platform == "cpu" and b.name != "toy"]
        expected = {**expected, "backend": sorted(cpu, key=lambda b: (-b.priority, b.name))[0].name}
    assert {k: out[k] for k in expected} == expected, out
    device = out["devices"][0]
    assert out["default_device"] == out["x"] == out["y"] == device
    assert out["z"] == "ToyDevice(id=0)"  # jit(backend="toy") runs on the toy device
    if expected.get("platform") == "cpu":
        assert out["toy_ran"] == []  # eager work on the CPU never touched the toy backend


@same_children
def test_plax_backend_excluded_by_plax_platforms_says_so(toy_site):
    out = last_json(run_python(_REPORT_DEFAULT, toy_site,
                               env={**TOY_ENV, "PLAX_BACKEND": "toy", "PLAX_PLATFORMS": "cpu"}))
    assert out["error"].startswith("PLAX_BACKEND='toy' names a backend of platform 'toy', which "
                                   "PLAX_PLATFORMS='cpu' excludes"), out


_REPORT_DEFAULT = """
    import json, plax
    try:
        print(json.dumps({"devices": [repr(d) for d in plax.devices()]}))
    except RuntimeError as e:
        print(json.dumps({"error": str(e)}))
"""


_COMMAND_LINES = """
    import contextlib, io, json, runpy, sys
    out = []
    for args in json.loads(sys.argv[1]):
        sys.argv = ["-m", *args]  # runpy sets argv[0] to plax/__main__.py, as python -m does
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                runpy.run_module("plax", run_name="__main__", alter_sys=True)
                status = 0
            except SystemExit as exit:
                status = exit.code
        out.append({"status": status, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()})
    print(json.dumps(out))
"""


def run_plax_commands(*argvs: list[str], site: Path | None = None) -> list[dict]:
    """Runs ``python -m plax ARGS`` for each ARGS of ``argvs``, in order, in one fresh
    interpreter (with ``site`` on its path), as ``python -m`` runs a module (runpy): a fresh
    interpreter for each would cost about a CPU second apiece. The first command loads the
    plugins, and the later ones see the same registry, as the same commands in fresh
    interpreters would.

    Returns:
      One ``{"status": exit status, "stdout": ..., "stderr": ...}`` per command.
    """
    code = textwrap.dedent(_COMMAND_LINES)
    proc = run_python("", *([site] if site else []), args=["-c", code, json.dumps(argvs)])
    return last_json(proc)


# ------------------------------------------------------------------ broken installed plugins

_BROKEN_MODULES = {
    "import_fails.py": "raise ImportError('the toy driver library is missing')\n",
    "hook_raises.py": """
        from plax.plugins import hookimpl

        @hookimpl
        def plax_backends():
            raise ValueError('no license for the accelerator')
    """,
    "devices_raise.py": """
        from plax.backend import Backend
        from plax.plugins import hookimpl

        class DeadBackend(Backend):
            name = 'dead'
            platform = 'dead'

            def devices(self):
                raise OSError('device /dev/dead0 not found')

        @hookimpl
        def plax_backends():
            return [DeadBackend()]
    """,
    "no_hooks.py": "def plax_backend():  # misspelled and undecorated\n    return []\n",
    "plugin_raises.py": """
        from plax.plugins import hookimpl

        @hookimpl
        def plax_plugins():
            raise RuntimeError('transform table clash')
    """,
    "exports_ok.py": """
        from plax.plugins import hookimpl

        def triple(x):
            return 3 * x

        @hookimpl
        def plax_plugins():
            return {"triple": triple}
    """,
}

_BROKEN_ENTRY_POINTS = """\
[plax.backends]
import_fails = plax_broken.import_fails
hook_raises = plax_broken.hook_raises
devices_raise = plax_broken.devices_raise
no_hooks = plax_broken.no_hooks

[plax.plugins]
plugin_raises = plax_broken.plugin_raises
exports_ok = plax_broken.exports_ok
"""


@pytest.fixture(scope="module")
def broken_site(tmp_path_factory) -> Path:
    """An installed distribution (dist-info with entry points, as pip leaves it) whose plugins
    fail in every way a plugin can."""
    site = tmp_path_factory.mktemp("broken_site")
    pkg = site / "plax_broken"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, source in _BROKEN_MODULES.items():
        (pkg / name).write_text(textwrap.dedent(source))
    info = site / "plax_broken-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plax-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(_BROKEN_ENTRY_POINTS)
    return site


_BROKEN_CHECKS = """
    import json, warnings
    import numpy as np
    import plax, plax.numpy as jnp
    from plax.plugins import PlaxPluginWarning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        devs = plax.devices("cpu")
    msgs = [str(w.message) for w in caught if issubclass(w.category, PlaxPluginWarning)]
    files = sorted({w.filename for w in caught if issubclass(w.category, PlaxPluginWarning)})
    value = np.asarray(jnp.arange(3.0) * 2).tolist()
    triple = np.asarray(plax.triple(jnp.ones(2))).tolist()
    try:
        plax.devices("dead")
        err = ""
    except RuntimeError as e:
        err = str(e)
    print(json.dumps({"devices": [repr(d) for d in devs], "warnings": msgs, "value": value,
                      "triple": triple, "err": err, "files": files}))
"""

_EXPECTED_FAILURES = {
    "import_fails": "ImportError: the toy driver library is missing",
    "hook_raises": "ValueError: no license for the accelerator",
    "devices_raise": "backend 'dead': devices() raised: OSError: device /dev/dead0 not found",
    "no_hooks": "implements no plax hook",
    "plugin_raises": "RuntimeError: transform table clash",
}


def test_broken_plugins_only_warn(broken_site):
    out = last_json(run_python(_BROKEN_CHECKS, broken_site))
    assert out["devices"] == ["CpuDevice(id=0)"]
    assert out["value"] == [0.0, 2.0, 4.0]
    assert out["triple"] == [3.0, 3.0]  # a working plax_plugins hook still exports its names
    for name, error in _EXPECTED_FAILURES.items():
        matching = [m for m in out["warnings"] if f"plugin {name!r}" in m]
        assert len(matching) == 1, (name, out["warnings"])
        assert error in matching[0], (error, matching[0])
    assert len(out["warnings"]) == len(_EXPECTED_FAILURES)
    assert out["files"] == ["<string>"]  # the warnings point at the user's code, not plax's
    # An unknown platform's error lists what failed to load, so the user sees why.
    assert "'dead'" in out["err"] and "devices_raise" in out["err"] and "OSError" in out["err"]


@pytest.fixture(scope="module")
def broken_site_info(broken_site) -> dict:
    """What ``python -m plax info``, ``info -v`` and ``info --verbose`` print with the broken
    plugins installed (one interpreter, :func:`run_plax_commands`): flags -> stdout."""
    flags = [(), ("-v",), ("--verbose",)]
    results = run_plax_commands(*(["info", *f] for f in flags), site=broken_site)
    assert [r["status"] for r in results] == [0, 0, 0], results
    return {f: r["stdout"] for f, r in zip(flags, results)}


def test_info_reports_failed_plugins(broken_site_info):
    text = broken_site_info[()]
    lines = text.splitlines()
    for name, error in _EXPECTED_FAILURES.items():
        [line] = [ln for ln in lines if f"] {name} (" in ln]
        assert line.strip().startswith("[failed]") and error in line
    assert any(ln.strip().startswith("[loaded] exports_ok") and "exports=['triple']" in ln
               for ln in lines)
    assert any(ln.strip().startswith("[loaded] numpy") for ln in lines)
    assert "Traceback" not in text  # the short report: one line per plugin


def test_info_verbose_shows_failed_plugins_tracebacks(broken_site_info):
    text = broken_site_info[("-v",)]
    blocks = {}  # plugin name -> the traceback lines printed under it
    current = None
    for line in text.splitlines():
        if line.startswith("  [") and "] " in line:
            current = line.split("] ", 1)[1].split(" (", 1)[0]
            blocks[current] = []
        elif line.startswith("      | ") and current is not None:
            blocks[current].append(line[len("      | "):])
    tb = "\n".join(blocks["import_fails"])
    assert tb.startswith("Traceback (most recent call last):")
    assert "import_fails.py\", line 1" in tb
    assert "raise ImportError('the toy driver library is missing')" in tb
    assert tb.endswith("ImportError: the toy driver library is missing")
    hook_tb = "\n".join(blocks["hook_raises"])
    assert "hook_raises.py" in hook_tb and "in plax_backends" in hook_tb
    assert "raise ValueError('no license for the accelerator')" in hook_tb
    assert "device /dev/dead0 not found" in "\n".join(blocks["devices_raise"])
    assert blocks["no_hooks"] == []  # found by a check, nothing raised: no traceback
    assert blocks["numpy"] == [] and blocks["exports_ok"] == []
    assert broken_site_info[("--verbose",)] == text


# ------------------------------------------------------------------ python -m plax info

def test_info_lists_numpy_backend_and_devices():
    proc = run_python("", args=["-m", "plax", "info"])
    text = proc.stdout
    assert text.startswith(f"plax {plax.__version__}\n")
    assert "[loaded] numpy (plax.backends: plax_numpy.plugin) backends=['numpy']" in text
    assert "  numpy: platform=cpu priority=0" in text
    [cpu_line] = [ln for ln in text.splitlines() if ln.startswith("  CpuDevice(id=0) ")]
    assert cpu_line.startswith("  CpuDevice(id=0) platform=cpu kind='cpu' backends=[")
    assert "'numpy'" in cpu_line
    [default_line] = [ln for ln in text.splitlines() if ln.startswith("default backend: ")]
    default = plax.devices()[0]
    assert default_line.startswith(f"default backend: {default.platform} (runs on {default!r} "
                                   f"with {default.backend.name!r}; ")
    if sorted(plugins.registry().backends) == ["numpy"]:
        assert "numpy: platform=cpu priority=0 (default)" in text
        assert default_line == ("default backend: cpu (runs on CpuDevice(id=0) with 'numpy'; "
                                "no accelerator platform is installed)")


def test_info_with_plax_backend_says_what_chose_the_default():
    proc = run_python("", args=["-m", "plax", "info"], env={"PLAX_BACKEND": "numpy"})
    assert ("default backend: cpu (runs on CpuDevice(id=0) with 'numpy'; set by "
            "PLAX_BACKEND='numpy')") in proc.stdout
    assert "numpy: platform=cpu priority=0 (default)" in proc.stdout


def test_info_usage_error():
    argvs = (["bogus"], [], ["info", "-x"])
    results = run_plax_commands(*argvs)
    assert len(results) == len(argvs), results
    for args, result in zip(argvs, results):
        assert result["status"] == 2, (args, result)
        assert "usage: python -m plax info [-v|--verbose]" in result["stderr"], (args, result)


def test_info_with_bad_environment_exits_nonzero():
    proc = run_python("", args=["-m", "plax", "info"], env={"PLAX_BACKEND": "nope"}, check=False)
    assert proc.returncode == 1
    assert "PLAX_BACKEND='nope'" in proc.stdout and "'numpy'" in proc.stdout


# ------------------------------------------------------------------ plugins registered at run time

class _Recorder(Backend):
    """A CPU backend that records what it runs and otherwise defers to the NumPy backend."""

    name = "recorder"
    platform = "cpu"
    priority = -1  # never the default: only used when asked for

    def __init__(self):
        self.ran: list[str] = []

    @property
    def inner(self):  # looked up at first use: hooks must not query the registry being built
        return plugins.registry().get_backend("numpy")

    def devices(self):
        from plax.device import cpu_devices
        return list(cpu_devices())

    def put(self, host_array, device):
        return host_array

    def to_host(self, buffer):
        return buffer

    def execute(self, primitive, *buffers, **params):
        self.ran.append(primitive.name)
        return self.inner.execute(primitive, *buffers, **params)

    def compile(self, jaxpr, device):
        self.ran.append("compile")
        return self.inner.compile(jaxpr, device)


@pytest.fixture
def manual_plugins():
    """Registers plugins by hand for one test and removes them afterwards."""
    names = []

    def register(plugin, name):
        names.append(plugins.register_plugin(plugin, name=name))

    yield register
    for name in names:
        plugins.unregister_plugin(name)
    assert "recorder" not in plugins.registry().backends


def test_registered_backend_drives_cpu_devices_and_jit(manual_plugins):
    class RecorderPlugin:
        @hookimpl
        def plax_backends(self):
            return [_Recorder()]

    manual_plugins(RecorderPlugin(), "recorder-plugin")
    reg = plugins.registry()
    assert reg.get_backend("recorder").priority == -1
    assert plax.devices("cpu") == plax.devices(backend="recorder")  # one CPU device, two drivers
    assert plax.devices("cpu")[0].backend.name != "recorder"  # a higher priority stays the default
    f = plax.jit(lambda x: x * 2 + 1, backend="recorder")
    np.testing.assert_allclose(np.asarray(f(jnp.arange(3.0))), [1.0, 3.0, 5.0])
    assert reg.get_backend("recorder").ran == ["compile"]
    assert any("recorder" in line for line in plugins.info().splitlines()
               if "[loaded] recorder-plugin" in line)


def test_plax_backend_env_selects_registered_backend(manual_plugins, monkeypatch):
    class RecorderPlugin:
        @hookimpl
        def plax_backends(self):
            return [_Recorder()]

    manual_plugins(RecorderPlugin(), "recorder-plugin")
    monkeypatch.setenv("PLAX_BACKEND", "recorder")
    plugins.reset()
    try:
        backend = plax.devices()[0].backend
        assert backend.name == "recorder"
        y = plax.device_put(np.arange(3.0)) + 1.0
        np.testing.assert_allclose(np.asarray(y), [1.0, 2.0, 3.0])
        assert "add" in backend.ran
    finally:
        monkeypatch.delenv("PLAX_BACKEND")
        plugins.reset()
    assert plax.devices("cpu")[0].backend.name != "recorder"


@pytest.fixture
def fake_accelerator(manual_plugins):
    """The toy backend registered by hand as backend "fake" of a platform "fake" (as a GPU
    backend would be: its own devices and buffers)."""
    sys.path.insert(0, str(TOY_PACKAGE))
    try:
        from plax_toybackend.backend import ToyBackend
    finally:
        sys.path.remove(str(TOY_PACKAGE))

    class FakePlugin:
        @hookimpl
        def plax_backends(self):
            backend = ToyBackend(platform="fake", priority=0)
            backend.name = "fake"
            return [backend]

    manual_plugins(FakePlugin(), "fake-plugin")
    return plugins.registry().get_backend("fake")


def _with_env(monkeypatch, **env):
    for key in ("PLAX_BACKEND", "PLAX_PLATFORMS", "JAX_PLATFORMS"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    plugins.reset()


def test_accelerator_platform_is_the_default(fake_accelerator):
    assert plax.default_backend() != "cpu"  # an accelerator platform is preferred to the CPU
    assert "fake" in plugins.registry().platforms()
    assert plugins.registry().platforms()[-1] == "cpu"
    assert plax.devices("fake")[0].backend.name == "fake"


def test_plax_backend_numpy_forces_the_cpu_with_another_platform_installed(fake_accelerator,
                                                                          monkeypatch):
    try:
        _with_env(monkeypatch, PLAX_BACKEND="numpy")
        cpu = plax.devices("cpu")[0]
        assert plax.devices() == [cpu] and plax.default_backend() == "cpu"
        assert cpu.backend.name == "numpy"
        x = jnp.arange(3.0) * 2
        y = plax.jit(lambda a: a + 1)(x)
        assert x.device == y.device == cpu and type(y._buf) is np.ndarray
        np.testing.assert_allclose(np.asarray(y), [1.0, 3.0, 5.0])
        fake = plax.devices("fake")[0]  # the other platform is still there when asked for
        z = plax.jit(lambda a: a + 1, backend="fake")(x)
        assert z.device == fake and type(z._buf).__name__ == "ToyBuffer"
        assert fake.backend.executed == []  # nothing ran eagerly on it

        _with_env(monkeypatch, PLAX_BACKEND="fake", PLAX_PLATFORMS="cpu,fake")
        assert plax.default_backend() == "fake" and plax.devices() == plax.devices("fake")
        assert jnp.ones(2).device == plax.devices("fake")[0]
    finally:
        _with_env(monkeypatch)


def test_excluded_backend_errors_say_excluded_by_configuration(fake_accelerator, monkeypatch):
    try:
        _with_env(monkeypatch, PLAX_PLATFORMS="cpu")
        assert plax.default_backend() == "cpu"
        excluded = r"installed but excluded by PLAX_PLATFORMS='cpu'"
        with pytest.raises(RuntimeError, match=r"Platform 'fake' \(backends \['fake'\]\) is " + excluded):
            plax.devices("fake")
        with pytest.raises(RuntimeError, match=r"Backend 'fake' \(platform 'fake'\) is " + excluded):
            plax.jit(lambda a: a, backend="fake")(1.0)
        with pytest.raises(RuntimeError, match=r"Backend 'fake' \(platform 'fake'\) is " + excluded):
            plax.devices(backend="fake")
        with pytest.raises(ValueError, match=r"device='fake'.*" + excluded):
            plax.device_put(1.0, "fake")
        assert "  fake: platform=fake excluded by PLAX_PLATFORMS='cpu'" in plugins.info()

        _with_env(monkeypatch, PLAX_PLATFORMS="cpu", PLAX_BACKEND="fake")
        with pytest.raises(RuntimeError, match=r"PLAX_BACKEND='fake' names a backend of platform "
                                               r"'fake', which PLAX_PLATFORMS='cpu' excludes"):
            plax.devices()
    finally:
        _with_env(monkeypatch)
    assert plax.devices("fake")  # back once the variables are gone


@pytest.mark.parametrize("kind", ["hook", "devices", "not_a_backend", "duplicate", "plugins_hook"])
def test_registered_plugin_failures_warn_and_numpy_still_works(manual_plugins, kind):
    class Broken:
        pass

    if kind == "hook":
        def hook(self):
            raise ZeroDivisionError("hook exploded")
        Broken.plax_backends = hookimpl(hook)
        expected = "ZeroDivisionError: hook exploded"
    elif kind == "devices":
        class NoDevices(_Recorder):
            name = "nodevices"

            def devices(self):
                raise RuntimeError("driver crashed")
        Broken.plax_backends = hookimpl(lambda self: [NoDevices()])
        expected = "backend 'nodevices': devices() raised: RuntimeError: driver crashed"
    elif kind == "not_a_backend":
        Broken.plax_backends = hookimpl(lambda self: [object()])
        expected = "is not a Backend"
    elif kind == "duplicate":
        Broken.plax_backends = hookimpl(lambda self: [_Recorder(), _Recorder()])
        expected = "duplicate backend name 'recorder'"
    else:
        def hook(self):
            raise KeyError("no such table")
        Broken.plax_plugins = hookimpl(hook)
        expected = "KeyError: 'no such table'"

    manual_plugins(Broken(), f"broken-{kind}")
    with pytest.warns(PlaxPluginWarning) as caught:
        plugins.registry()
    messages = [str(w.message) for w in caught]
    assert any(f"'broken-{kind}'" in m and expected in m for m in messages), messages
    np.testing.assert_allclose(np.asarray(jnp.arange(3.0) + 1), [1.0, 2.0, 3.0])
    [record] = [r for r in plugins.registry().records if r.name == f"broken-{kind}"]
    assert record.status == "failed" and expected in record.error


def test_register_plugin_name_clash_and_unknown_unregister(manual_plugins):
    class Empty:
        @hookimpl
        def plax_plugins(self):
            return {"plax_test_answer": 42}

    manual_plugins(Empty(), "answer")
    assert plax.plax_test_answer == 42
    with pytest.raises(ValueError, match="'answer' is already registered"):
        plugins.register_plugin(Empty(), name="answer")
    with pytest.raises(KeyError, match="'missing'.*registered: \\['answer'\\]"):
        plugins.unregister_plugin("missing")


def test_unknown_attribute_of_plax_is_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'not_a_plax_thing'"):
        plax.not_a_plax_thing


def test_unknown_backend_name_lists_available():
    with pytest.raises(RuntimeError, match=r"Unknown backend 'nonesuch'.*backends: \[.*'numpy'"):
        plugins.registry().get_backend("nonesuch")
    with pytest.raises(RuntimeError, match=r"'nonesuch'.*backends: \[.*'numpy'"):
        plax.jit(lambda x: x, backend="nonesuch")(1.0)


def test_hook_using_the_registry_while_loading_gets_a_clear_error(manual_plugins):
    class Eager(_Recorder):
        name = "eager"

        def devices(self):
            return plax.devices()  # not allowed: the registry is being built

    class EagerPlugin:
        @hookimpl
        def plax_backends(self):
            return [Eager()]

    manual_plugins(EagerPlugin(), "eager-plugin")
    with pytest.warns(PlaxPluginWarning, match="'eager-plugin'.*used plax devices or backends "
                                               "while plugins were being loaded"):
        plugins.registry()
    assert "eager" not in plugins.registry().backends


def test_warnings_name_the_plugin_at_first_use_only(manual_plugins):
    class Raising:
        @hookimpl
        def plax_backends(self):
            raise ValueError("once")

    manual_plugins(Raising(), "raising")
    with pytest.warns(PlaxPluginWarning, match="'raising'.*ValueError: once"):
        plax.devices()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaxPluginWarning)
        plax.devices()  # the registry is built once: no second warning


@pytest.mark.parametrize("first_use", ["devices", "array", "jit"])
def test_plugin_warning_points_at_the_users_line(manual_plugins, first_use):
    class Raising:
        @hookimpl
        def plax_backends(self):
            raise ValueError("broken on purpose")

    manual_plugins(Raising(), "raising")
    use = {"devices": plax.devices, "array": lambda: jnp.arange(3.0) + 1,
           "jit": lambda: plax.jit(lambda x: x * 2)(np.ones(2))}[first_use]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        use()
    [w] = [w for w in caught if issubclass(w.category, PlaxPluginWarning)]
    assert w.filename == __file__, (w.filename, w.lineno)


def test_failed_plugin_keeps_its_traceback(manual_plugins):
    class Raising:
        @hookimpl
        def plax_backends(self):
            raise ValueError("broken on purpose")

    manual_plugins(Raising(), "raising")
    with pytest.warns(PlaxPluginWarning):
        plugins.registry()
    [record] = [r for r in plugins.registry().records if r.name == "raising"]
    assert record.error == "ValueError: broken on purpose"
    assert record.traceback.startswith("Traceback (most recent call last):")
    assert 'raise ValueError("broken on purpose")' in record.traceback
    assert os.path.basename(__file__) in record.traceback
    assert record.traceback.rstrip().endswith("ValueError: broken on purpose")
    verbose = plugins.info(verbose=True).splitlines()
    assert "      | Traceback (most recent call last):" in verbose
    assert any(ln.startswith("      | ") and 'raise ValueError("broken on purpose")' in ln
               for ln in verbose)
    assert "Traceback" not in plugins.info()
