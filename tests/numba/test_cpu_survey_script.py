"""benchmarks/cpu_survey.py runs and prints its table (the timings are not checked): two of
its programs, on the reference tier (no numba kernel compiled), JAX's column where JAX is
installed."""
from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from subprocess_util import REPO, run_python  # noqa: E402


def test_survey_prints_its_table():
    proc = run_python(args=[str(REPO / "benchmarks" / "cpu_survey.py"), "--quick",
                            "--repeat", "1", "--match", "top_k,one_hot"],
                      env={"PLAX_NUMBA_SYNC": "0", "PLAX_NUMBA_COMPILE_AFTER": str(1 << 62)},
                      timeout=300)
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert rows[0] == "| program | plax-numba | JAX | numba / JAX | CPU numba / JAX |"
    assert [r.split(" | ")[0] for r in rows[1:]] == ["| top_k 8 of 512x1024",
                                                      "| one_hot 4096x1000"]
    for row in rows[1:]:
        plax_cell = row.split(" | ")[1]
        assert plax_cell.endswith(("µs", "ms", " s")), row
