"""``python benchmarks/gpu_tune.py --simulated`` runs its three tables on the simulated GPU at
two small shapes each (the times mean nothing there). The ``rows`` table's switches change the
plans: softmax is one launch with registers held and with rows re-read (``ROW_REGISTER_ELEMENTS
= 0``: no value held), and the split plan's reductions and elementwise kernel with the
row-local fusion off (``ROW_LOCAL_MAX_ELEMENTS = 0``); the script asserts this itself and the
test reads it off the table too. About 3 CPU-s (a few kernels built for the host)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from test_simulated_streams import REPO, SIMULATED, child_env


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_tune_script_runs_every_table_and_its_switches_change_the_plans():
    done = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "gpu_tune.py"),
                           "--simulated"], capture_output=True, text=True, env=child_env(),
                          cwd=REPO, timeout=600)
    out = done.stdout
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rows: softmax and layer norm" in out and "conv 3x3" in out and "row sums" in out, out
    assert out.index("rows: ") < out.index("conv 3x3") < out.index("row sums"), out  # rows first
    rows = [ln for ln in out.splitlines() if ln.startswith("softmax ")]
    assert [int(ln.split()[3]) for ln in rows] == [10, 100], out   # a lane group, a block a row
    for line in rows:
        # held, re-read, split, jax, then launches (held/re-read/split) and values held
        m = re.search(r"\s(\d+)/(\d+)/(\d+)\s+(\d+)\s", line)
        assert m, line
        held, reread, split, kept = map(int, m.groups())
        assert (held, reread) == (1, 1) and split >= 3 and kept >= 1, line
        assert re.search(r"\s(held|re-read|split): (fastest|\S+ [\d.]+x faster)$", line), line
