"""The options' starting values from ``JAX_<NAME>`` / ``PLAX_<NAME>``: a value the option cannot
take is refused when the table is built (at ``import plax``), as ``import jax`` refuses it
(JAX 0.10.2: ``ValueError: Invalid value "abc" for JAX flag jax_num_cpu_devices`` for an int,
float or enum option; plax's message also says what is accepted), and the few options JAX
never reads from the environment are not read from it."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from plax.config import Config


def _option_variable(key: str) -> bool:
    """Whether ``key`` may set an option (CHECK_VMA and JAX2TF_* too)."""
    return key.startswith(("PLAX_", "JAX_", "JAX2TF_")) or key in (
        "CHECK_VMA", "EAGER_CONSTANT_FOLDING")


@pytest.fixture
def env(monkeypatch):
    """Sets variables for one table; clears every option variable first (CI may set some,
    e.g. JAX_PLATFORMS)."""
    for key in list(os.environ):
        if _option_variable(key) and key not in ("PLAX_PLATFORMS", "JAX_PLATFORMS"):
            monkeypatch.delenv(key)
    return monkeypatch.setenv


@pytest.mark.parametrize("key, raw, expected", [
    ("JAX_NUM_CPU_DEVICES", "abc", "expected an integer"),
    ("PLAX_NUM_CPU_DEVICES", "2.0", "expected an integer"),
    ("JAX_CAPTURED_CONSTANTS_WARN_BYTES", "1e3", "expected an integer"),
    ("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "x", "expected a number"),
    ("JAX_NUMPY_RANK_PROMOTION", "RAISE", "expected one of allow, warn, raise"),
    ("JAX_NUMPY_DTYPE_PROMOTION", "bogus", "expected one of standard, strict"),
    ("PLAX_DEFAULT_MATMUL_PRECISION", "HIGHEST", "expected one of default, high, highest"),
    ("JAX_TRANSFER_GUARD", "never", "expected one of allow, log, disallow"),
    ("JAX_EXPLICIT_X64_DTYPES", "1", "expected one of warn, error, allow")])
def test_a_bad_value_is_refused_naming_variable_value_and_choices(env, key, raw, expected):
    env(key, raw)
    with pytest.raises(ValueError, match=f"invalid value {raw!r} for the environment variable "
                                         f"{key}: {expected}"):
        Config()


def test_good_values_are_read(env):
    env("JAX_CAPTURED_CONSTANTS_WARN_BYTES", " 1000 ")
    env("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "2.5")
    env("JAX_NUMPY_RANK_PROMOTION", "raise")
    env("JAX_DEFAULT_MATMUL_PRECISION", "BF16_BF16_F32")
    env("JAX_TRANSFER_GUARD", "log")
    env("JAX_EXPLICIT_X64_DTYPES", "allow")
    env("JAX_NUM_CPU_DEVICES", "3")   # (checked now, read when the devices are listed)
    c = Config()
    assert c.jax_captured_constants_warn_bytes == 1000
    assert c.jax_persistent_cache_min_compile_time_secs == 2.5
    assert (c.jax_numpy_rank_promotion, c.jax_default_matmul_precision, c.jax_transfer_guard,
            c.jax_explicit_x64_dtypes) == ("raise", "BF16_BF16_F32", "log", "allow")
    assert c.jax_num_cpu_devices == -1


def test_both_variables_are_checked_and_plax_s_wins(env):
    env("PLAX_NUMPY_RANK_PROMOTION", "warn")
    env("JAX_NUMPY_RANK_PROMOTION", "raise")
    assert Config().jax_numpy_rank_promotion == "warn"
    env("JAX_NUMPY_RANK_PROMOTION", "loud")   # (import jax would refuse it)
    with pytest.raises(ValueError, match="JAX_NUMPY_RANK_PROMOTION"):
        Config()


def test_empty_is_unset_and_unread_options_stay_unread(env):
    env("JAX_NUM_CPU_DEVICES", "")
    env("JAX_NUMPY_RANK_PROMOTION", " ")
    env("JAX_MOCK_NUM_GPU_PROCESSES", "x")   # JAX never reads these three from the environment
    env("JAX_CROSS_HOST_TRANSFER_TIMEOUT_SECONDS", "x")
    env("PLAX_CROSS_HOST_TRANSFER_TRANSFER_SIZE", "12")
    c = Config()
    assert c.jax_numpy_rank_promotion == "allow" and c.mock_num_gpu_processes == 0
    assert c.jax_cross_host_transfer_timeout_seconds is None
    assert c.jax_cross_host_transfer_transfer_size is None


def test_import_plax_refuses_it():
    """As ``import jax`` does (not later, when the devices are listed)."""
    env = dict(os.environ, JAX_NUM_CPU_DEVICES="abc")
    done = subprocess.run([sys.executable, "-c", "import plax"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0
    assert ("ValueError: invalid value 'abc' for the environment variable JAX_NUM_CPU_DEVICES"
            in done.stderr), done.stderr


def test_the_choices_are_jax_s():
    """plax's table of enumerated options (checked by update() and read from the
    environment) is JAX's: every enum option of JAX, with its values in JAX's order."""
    jax = pytest.importorskip("jax")
    table = sys.modules["plax.config"]._ENUMS
    words = sys.modules["plax.config"]._ENV_WORDS
    for name, (kind, _, meta) in jax.config.meta.items():
        short = name[4:] if name.startswith("jax_") else name
        if kind == "enum":
            assert table[short][0] == tuple(meta["enum_values"]), name
        elif kind == "enum_class":
            values = tuple(str(m.value) if isinstance(m.value, str) else m.name.lower()
                           for m in meta["enum_class"])
            assert (table.get(short) or (words[short],))[0] == values, name


# Settings import jax 0.10.2 accepts, with the value it gives (recorded one by one with
# `JAX_PLATFORMS=cpu VAR=value python -c "import jax; print(jax.config.values[option])"`;
# test_the_accepted_table_is_jax_s checks them against the live JAX): (variable, value,
# option, JAX's value). Each option appears once, so one process can set them all.
ACCEPTED = [
    # its enum reads any case (the other enum options must be spelt exactly: REFUSED)
    ("JAX_SEND_TRACEBACK_TO_RUNTIME", "ON", "jax_send_traceback_to_runtime", "on"),
    ("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "nan",
     "jax_persistent_cache_min_compile_time_secs", float("nan")),
    ("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "+1_000",
     "jax_persistent_cache_min_entry_size_bytes", 1000),
    # options JAX never reads from the environment: a value there is ignored, even a bad one
    ("JAX_CHECK_PROXY_ENVS", "maybe", "jax_check_proxy_envs", True),
    ("JAX_CPU_ENABLE_ASYNC_DISPATCH", "0", "jax_cpu_enable_async_dispatch", True),
    ("JAX_FORCE_DCN_CROSS_HOST_TRANSFERS", "x", "jax_force_dcn_cross_host_transfers", False),
    ("JAX_SORT_DEVICES_BY_PROCESS_INDEX", "0", "jax_sort_devices_by_process_index", True),
    ("JAX_CUDA_VISIBLE_DEVICES", "0", "jax_cuda_visible_devices", "all"),
    ("JAX_XLA_BACKEND", "foo", "jax_xla_backend", ""),
    # options JAX reads under another name (the option's name in upper case)
    ("CHECK_VMA", "1", "check_vma", True),
    ("JAX_EAGER_CONSTANT_FOLDING", "1", "eager_constant_folding", False),   # (not its name)
    ("JAX2TF_ASSOCIATIVE_SCAN_REDUCTIONS", "1", "jax2tf_associative_scan_reductions", True),
    ("JAX2TF_DEFAULT_NATIVE_SERIALIZATION", "off", "jax2tf_default_native_serialization",
     False),
    ("JAX_EXPORT_IGNORE_FORWARD_COMPATIBILIY", "1", "jax_export_ignore_forward_compatibility",
     True),   # (JAX's spelling, read besides JAX_EXPORT_IGNORE_FORWARD_COMPATIBILITY)
    # read in lower case
    ("JAX_BACKEND_TARGET", "LOCAL", "jax_backend_target", "local"),
    ("JAX_PLATFORM_NAME", "CPU", "jax_platform_name", "cpu"),
]

# Settings import jax 0.10.2 refuses (ValueError), recorded as above.
REFUSED = [("JAX_SEND_TRACEBACK_TO_RUNTIME", "bad"), ("JAX_LEGACY_PRNG_KEY", "WARN"),
           ("JAX_USE_MAGMA", "ON"), ("JAX_OPTIMIZATION_LEVEL", "o1"), ("CHECK_VMA", "bad")]


def _same(a, b) -> bool:
    return a == b or (a != a and b != b)   # (NaN is NaN's match)


@pytest.mark.parametrize("key, raw, option, jax_value", ACCEPTED)
def test_a_setting_jax_accepts_is_read_as_jax_reads_it(env, key, raw, option, jax_value):
    env(key, raw)
    value = Config().read(option)
    assert _same(value, jax_value) and type(value) is type(jax_value), (value, jax_value)


@pytest.mark.parametrize("key, raw", REFUSED)
def test_a_setting_jax_refuses_is_refused(env, key, raw):
    env(key, raw)
    with pytest.raises(ValueError, match=f"invalid value {raw!r} for the environment "
                                         f"variable {key}"):
        Config()


def test_the_accepted_table_is_jax_s():
    """ACCEPTED and REFUSED, asked of the live JAX: the accepted settings all at once in one
    process (each option once), each refused one in its own."""
    pytest.importorskip("jax")
    clean = {k: v for k, v in os.environ.items() if not _option_variable(k)}
    clean["JAX_PLATFORMS"] = "cpu"
    options = sorted({option for _, _, option, _ in ACCEPTED})
    script = ("import json, jax; v = jax.config.values; "
              f"print(json.dumps({{n: v[n] if isinstance(v[n], (bool, int, float)) else str(v[n])"
              f" for n in {options!r}}}))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env=dict(clean, **{k: raw for k, raw, _, _ in ACCEPTED}))
    assert done.returncode == 0, done.stderr
    values = json.loads(done.stdout.splitlines()[-1])
    for key, raw, option, jax_value in ACCEPTED:
        assert _same(values[option], jax_value), (key, raw, values[option])
    for key, raw in REFUSED:
        done = subprocess.run([sys.executable, "-c", "import jax"], capture_output=True,
                              text=True, timeout=300, env=dict(clean, **{key: raw}))
        assert done.returncode != 0 and "ValueError" in done.stderr, (key, raw)
