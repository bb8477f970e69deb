"""``plax.config``: JAX 0.10.2's option names, values and errors, and the options plax honours
(device count, platforms, default device, rank and dtype promotion, NaN/Inf checks, compile
logging and cache-miss explanations), each checked beside JAX where it is installed.

Options read when the devices are first listed run in child interpreters.
"""
from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import dtypes
from subprocess_util import last_json, run_python

try:
    import jax
    import jax.numpy as jax_numpy
except ImportError:  # the JAX halves of the tests are skipped
    jax = jax_numpy = None

needs_jax = pytest.mark.skipif(jax is None, reason="JAX is not installed: no side-by-side check")


@pytest.fixture
def restore_config():
    saved = dict(plax.config._values)
    yield
    for k, v in saved.items():
        if plax.config._values[k] != v and k != "num_cpu_devices":
            plax.config.update(k, v)


# ------------------------------------------------------------------ names, values, errors

def test_unknown_option_raises_attribute_error_as_jax():
    with pytest.raises(AttributeError, match="^Unrecognized config option: jax_bogus$"):
        plax.config.update("jax_bogus", 1)
    with pytest.raises(AttributeError):
        plax.config.jax_bogus
    if jax is not None:
        with pytest.raises(AttributeError, match="^Unrecognized config option: jax_bogus$"):
            jax.config.update("jax_bogus", 1)


def test_options_read_as_attributes_through_read_and_values():
    c = plax.config
    assert c.jax_enable_x64 is c.read("jax_enable_x64") is c.read("enable_x64")
    assert c.values["jax_numpy_rank_promotion"] == c.jax_numpy_rank_promotion == "allow"
    assert c.values["jax_num_cpu_devices"] == -1
    assert "jax_debug_nans" in dir(c)


@needs_jax
def test_every_jax_option_is_accepted_with_jax_defaults():
    assert set(plax.config.values) == set(jax.config.values)
    for name in ("jax_default_matmul_precision", "jax_numpy_dtype_promotion",
                 "jax_traceback_filtering", "jax_default_prng_impl", "jax_log_compiles",
                 "jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs"):
        want = jax.config.values[name]
        assert plax.config.values[name] == getattr(want, "value", want), name


@pytest.mark.parametrize("name,value", [("jax_numpy_rank_promotion", "bogus"),
                                        ("jax_default_matmul_precision", "fastest"),
                                        ("jax_default_prng_impl", "bogus"),
                                        ("jax_traceback_filtering", "bogus")])
def test_enum_values_are_checked_as_jax_checks_them(name, value):
    with pytest.raises(ValueError, match="new enum value must be") as info:
        plax.config.update(name, value)
    if jax is not None:
        with pytest.raises(ValueError) as ref:
            jax.config.update(name, value)
        assert str(info.value).endswith(str(ref.value))  # (plax's names the option first)


def test_accepted_options_without_meaning_are_stored(restore_config):
    for name, value in (("jax_traceback_filtering", "off"), ("jax_compilation_cache_dir", "/x"),
                        ("jax_persistent_cache_min_compile_time_secs", 0.0),
                        ("jax_remat3", False) if "remat3" in plax.config._values else
                        ("jax_enable_checks", False)):
        plax.config.update(name, value)
        assert plax.config.read(name) == value


# ------------------------------------------------------------------ device count and platforms

_COUNT = """
import json, plax
plax.config.update("jax_num_cpu_devices", 4)
devs = plax.devices("cpu")
try:
    plax.config.update("jax_num_cpu_devices", 2)
    err = None
except RuntimeError as e:
    err = str(e)
print(json.dumps([repr(d) for d in devs] + [err]))
"""


def test_num_cpu_devices_before_first_use_and_jax_error_after():
    out = last_json(run_python(_COUNT, env={"PLAX_PLATFORMS": "cpu"}))
    assert out[:4] == [f"CpuDevice(id={i})" for i in range(4)]
    assert out[4].startswith("jax_num_cpu_devices config should be updated before backends "
                             "are initialized")
    if jax is not None:
        ref = last_json(run_python(_COUNT.replace("plax", "jax"), env={"JAX_PLATFORMS": "cpu"}))
        assert ref == out


def test_xla_flags_device_count_as_older_notebooks_set_it():
    code = "import json, plax; print(json.dumps(len(plax.devices('cpu'))))"
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=3", "PLAX_PLATFORMS": "cpu"}
    assert last_json(run_python(code, env=env)) == 3


def test_platforms_option_before_first_use():
    code = """
    import json, plax
    plax.config.update("jax_platforms", "cpu")
    print(json.dumps([plax.default_backend(), plax.config.jax_platforms]))
    """
    assert last_json(run_python(code)) == ["cpu", "cpu"]


def test_default_device_option(restore_config):
    d = plax.devices()[0]
    plax.config.update("jax_default_device", d)
    assert jnp.ones(2).devices() == {d}
    plax.config.update("jax_default_device", d.platform)
    assert jnp.ones(2).devices() == {d}
    plax.config.update("jax_default_device", None)
    assert jnp.ones(2).devices() == {plax.devices()[0]}


# ------------------------------------------------------------------ promotion

def test_rank_promotion_warn_and_raise_with_jax_messages():
    def run(lib, mode):
        with lib.numpy_rank_promotion(mode), warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                lib.numpy.ones(3) + lib.numpy.ones((2, 3))
                lib.numpy.ones(()) + lib.numpy.ones((2, 3))  # scalars promote silently
            except ValueError as e:
                return "raise", str(e)
        return "warn", [str(x.message) for x in w if issubclass(x.category, UserWarning)]
    for mode in ("warn", "raise"):
        got = run(plax, mode)
        assert got[0] == mode and "for add on shapes (3,) (2, 3)" in str(got[1])
        if jax is not None:
            assert got == run(jax, mode)
    assert plax.config.jax_numpy_rank_promotion == "allow"


STRICT_CASES = [
    (lambda m: m.ones(3, m.float32) + m.ones(3, m.float16), "('float16', 'float32')"),
    (lambda m: m.ones(3) + 1, None),
    (lambda m: m.ones(3) + 1.0, None),
    (lambda m: m.ones(3, m.int32) + 1.0, "(\"<class 'float'>\", 'int32')"),
    (lambda m: m.ones(3, m.int32) + m.ones(3, m.int8), "('int32', 'int8')"),
]


@pytest.mark.parametrize("case", range(len(STRICT_CASES)))
def test_strict_dtype_promotion(case):
    call, names = STRICT_CASES[case]
    libs = [(plax, jnp, dtypes.TypePromotionError)]
    if jax is not None:
        libs.append((jax, jax_numpy, jax.dtypes.TypePromotionError))
    for lib, m, error in libs:
        with lib.numpy_dtype_promotion("strict"):
            if names is None:
                assert call(m).dtype == np.float32
            else:
                with pytest.raises(error) as info:
                    call(m)
                if lib is jax:  # JAX lists the dtypes in a set's order: compare plax's only
                    continue
                assert str(info.value) == (
                    f"Input dtypes {names} have no available implicit dtype promotion path "
                    "when jax_numpy_dtype_promotion=strict. Try explicitly casting inputs to "
                    "the desired output type, or set jax_numpy_dtype_promotion=standard.")
    assert (jnp.ones(3, jnp.float32) + jnp.ones(3, jnp.float16)).dtype == np.float32


# ------------------------------------------------------------------ debug_nans / debug_infs

def test_debug_nans_eager_and_under_jit(capsys):
    with plax.debug_nans(True):
        with pytest.raises(FloatingPointError, match=r"^invalid value \(nan\) encountered in log$"):
            jnp.log(-jnp.ones(2))
        with pytest.raises(FloatingPointError, match=r"invalid value \(nan\) encountered in log"):
            plax.jit(lambda x: jnp.sin(jnp.log(x)) * 2)(-jnp.ones(2))
        assert "Calling the de-optimized version" in capsys.readouterr().out
        np.testing.assert_array_equal(np.asarray(jnp.log(jnp.ones(2))), [0.0, 0.0])
    assert np.isnan(np.asarray(jnp.log(-jnp.ones(2)))).all()  # off again: no check
    if jax is not None:
        with jax.debug_nans(True):
            with pytest.raises(FloatingPointError, match=r"invalid value \(nan\) encountered "
                                                         r"in log"):
                jax.jit(lambda x: jax_numpy.sin(jax_numpy.log(x)) * 2)(-jax_numpy.ones(2))


def _notices_and_error(lib, call):
    """How many times the jit notice is printed before ``call`` raises, and the error."""
    import contextlib
    import io
    out = io.StringIO()
    with lib.debug_nans(True), contextlib.redirect_stdout(out):
        with pytest.raises(FloatingPointError) as err:
            call()
    return out.getvalue().count("Calling the de-optimized version."), str(err.value)


def test_debug_nans_prints_the_jit_notice_per_compiled_call_as_jax():
    # JAX's debugging/flags page: an eager operation is a compiled call of its own in JAX, so
    # its NaN prints the notice once; a jit call prints it, reruns op by op, and the eager
    # operation prints it again
    def cases(lib, np_):
        def f(x):
            return np_.log(-3 * np_.square(x))
        return [_notices_and_error(lib, lambda: f(5.0)),
                _notices_and_error(lib, lambda: lib.jit(f)(5.0))]

    expected = [(1, "invalid value (nan) encountered in log"),
                (2, "invalid value (nan) encountered in log")]
    assert cases(plax, jnp) == expected
    if jax is not None:
        assert cases(jax, jax_numpy) == expected


def test_debug_infs():
    with plax.debug_infs(True):
        with pytest.raises(FloatingPointError, match=r"invalid value \(inf\) encountered in div"):
            jnp.ones(2) / 0
        jnp.log(-jnp.ones(2))  # NaNs are not checked by debug_infs alone
    with plax.config.override("jax_debug_infs", True):
        with pytest.raises(FloatingPointError):
            plax.jit(lambda x: x / 0)(jnp.ones(2))


# ------------------------------------------------------------------ logging

def test_log_compiles(caplog):
    f = plax.jit(lambda x: x * 3)
    with caplog.at_level(logging.WARNING, logger="plax.jit"), plax.log_compiles():
        f(jnp.ones(3))
        f(jnp.ones(3))  # cached: nothing more
    text = [r.getMessage() for r in caplog.records]
    assert len(text) == 3
    assert text[0].startswith("Finished tracing + transforming <lambda> for jit in ")
    assert text[1].startswith("Compiling jit(<lambda>) with global shapes and types (f32[3]).")


def test_explain_cache_misses(caplog):
    def f(x, n):
        return x * n
    g = plax.jit(f, static_argnums=1)
    with caplog.at_level(logging.WARNING, logger="plax.jit"), plax.explain_cache_misses():
        g(jnp.ones(3), 2)
        g(jnp.ones(3), 2)
        g(jnp.ones(4), 2)
        g(jnp.ones(4, jnp.int32), 2)
        g(jnp.ones(4, jnp.int32), 3)
        g(1.0, 3)
    text = [r.getMessage() for r in caplog.records]
    assert len(text) == 5
    assert text[0].startswith("TRACING CACHE MISS at ") and "never seen function:" in text[0]
    assert "for f defined at " in text[1]
    assert text[1].endswith("different input types:\n  * at x, now f32[4] and before f32[3]")
    assert "* at x, now i32[4] and before f32[" in text[2]
    assert text[3].endswith("different static arguments:\n  * at n, now 3 and before 2")
    assert text[4].endswith("* at x, now f32[]{weak_type=True} and before i32[4]")


def test_enable_checks_typechecks_traced_jaxprs():
    with plax.enable_checks(True):
        assert float(plax.jit(lambda x: jnp.sin(x) + 1)(0.0)) == 1.0


def test_default_prng_impl_other_than_threefry_is_refused_not_ignored():
    with plax.default_prng_impl("rbg"):
        with pytest.raises(ValueError, match='unrecognized PRNG implementation "rbg"'):
            plax.random.key(0)
    with plax.default_prng_impl("threefry2x32"):
        assert str(plax.typeof(plax.random.key(0))) == "key<fry>[]"


def test_promotion_options_are_part_of_jit_s_cache_key():
    f = plax.jit(lambda x, y: x + y)
    f(jnp.ones(3), jnp.ones((2, 3)))  # traced and cached under "allow"
    with plax.numpy_rank_promotion("raise"):
        with pytest.raises(ValueError, match="jax_numpy_rank_promotion='raise'"):
            f(jnp.ones(3), jnp.ones((2, 3)))
    g = plax.jit(lambda x, y: x + y)
    g(jnp.ones(3, jnp.float16), jnp.ones(3))
    with plax.numpy_dtype_promotion("strict"):
        with pytest.raises(dtypes.TypePromotionError):
            g(jnp.ones(3, jnp.float16), jnp.ones(3))


def test_config_examples_run_on_their_own():
    """``python -m pytest --doctest-modules core/plax/config.py`` passes: each example imports
    what it uses (the suite's docstring runner adds ``plax`` to every module's globals, which
    hid ten examples that failed alone with NameError)."""
    import doctest
    import sys
    module = sys.modules["plax.config"]   # (``plax.config`` the attribute is the option table)
    flags = dict(plax.config._values)
    try:
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=False)
    finally:
        for key, value in flags.items():
            if plax.config.read(key) != value:
                plax.config.update(key, value)
    assert result.attempted >= 19 and result.failed == 0, result
