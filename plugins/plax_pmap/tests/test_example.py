"""examples/data_parallel.py trains with pmap and with shard_map on 2 CPU devices and agrees
with single-device training to float32 rounding (it exits non-zero otherwise)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_data_parallel_example_agrees_with_single_device():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAX_")}
    env.update(PLAX_NUM_CPU_DEVICES="2", PLAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "data_parallel.py"),
                           "--steps", "3", "--sizes", "64,32,10", "--batch", "32"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "agree to float32 rounding" in proc.stdout


def test_data_parallel_example_asks_for_its_devices_the_jax_way():
    # no PLAX_NUM_CPU_DEVICES: the script's jax.config.update("jax_num_cpu_devices", N) gives them
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAX_") and k != "XLA_FLAGS"}
    env.update(PLAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "data_parallel.py"),
                           "--devices", "4", "--steps", "1", "--sizes", "16,8,4", "--batch", "16"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("devices: 4 "), proc.stdout
    assert "agree to float32 rounding" in proc.stdout
