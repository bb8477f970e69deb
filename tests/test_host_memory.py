"""plax.host_memory: freed host memory is kept for reuse once plax compiles a program, so a
program's buffers do not fault fresh pages on every call (glibc only)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

_CHILD = r"""
import os, resource, sys
import numpy as np
if sys.argv[1] == "plax":
    import plax
    plax.jit(lambda x: x + 1)(np.ones(3, np.float32))  # the first compile applies the policy
    from plax import host_memory
    assert host_memory.keep_freed_memory() is True
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def one_call():                               # a program's buffers: 8 x 2 MiB, then freed
    bufs = [np.ones(1 << 19, np.float32) for _ in range(8)]
    del bufs
for _ in range(3):                            # warm: the heap reaches its steady state
    one_call()
before = faults()
for _ in range(20):
    one_call()
print((faults() - before) / 20)
"""


def _faults_per_round(mode: str) -> float:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                        "PLAX_KEEP_FREED_MEMORY")}
    out = subprocess.run([sys.executable, "-c", _CHILD, mode], env=env, check=True,
                         capture_output=True, text=True, timeout=120).stdout
    return float(out.strip().splitlines()[-1])


glibc = (sys.platform.startswith("linux")
         and (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"))


@pytest.mark.skipif(not glibc, reason="the policy applies to glibc's malloc only")
def test_freed_buffers_are_reused_without_page_faults():
    # 4096 pages are made per round; glibc's defaults trim them and map them afresh
    assert _faults_per_round("numpy") > 1000
    assert _faults_per_round("plax") < 100


def test_the_policy_can_be_declined(monkeypatch):
    from plax import host_memory
    monkeypatch.setattr(host_memory, "_state", {"decided": False, "applied": False})
    monkeypatch.setenv("PLAX_KEEP_FREED_MEMORY", "0")
    assert host_memory.keep_freed_memory() is False
    monkeypatch.setattr(host_memory, "_state", {"decided": False, "applied": False})
    monkeypatch.delenv("PLAX_KEEP_FREED_MEMORY")
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1000000")  # the user's own setting wins
    assert host_memory.keep_freed_memory() is False
