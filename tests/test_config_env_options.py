"""The options' starting values from ``JAX_<NAME>`` / ``PLAX_<NAME>``: a value the option cannot
take is refused when the table is built (at ``import plax``), as ``import jax`` refuses it
(JAX 0.10.2: ``ValueError: Invalid value "abc" for JAX flag jax_num_cpu_devices`` for an int,
float or enum option; plax's message also says what is accepted), and the few options JAX
never reads from the environment are not read from it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from plax.config import Config


@pytest.fixture
def env(monkeypatch):
    """Sets variables for one table; clears every PLAX_/JAX_ option variable first (CI may
    set some, e.g. JAX_PLATFORMS)."""
    for key in list(os.environ):
        if key.startswith(("PLAX_", "JAX_")) and key not in ("PLAX_PLATFORMS", "JAX_PLATFORMS"):
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
