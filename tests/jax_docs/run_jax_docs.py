"""Runs JAX's own MyST documentation pages with JAX and with ``import jax`` resolved to plax,
and prints, per page, how many code cells print the same thing.

    python tests/jax_docs/run_jax_docs.py [--repo GIT_DIR --rev REV | --tree DIR] [PAGE.md ...]
        [--show N] [--timeout S] [--json OUT]

The pages are read from a JAX checkout (``--tree``, a work tree whose ``docs/`` holds them) or
from a git repository at a revision (``--repo``/``--rev``, default: the mirror
``/work/.mirror/jax-ml+jax/repo`` at ``jax-v0.10.2``); nothing of JAX's documentation is copied
into this repository. Without pages, :data:`DEFAULT_PAGES` are run.

Each page's ``{code-cell}`` blocks (on a plain MyST page: its ``python`` blocks, a doctest
block's prompts one cell each) run in order, in one fresh interpreter per side: once as
written with JAX, once with every ``jax`` / ``jax.*`` import answered by ``plax`` /
``plax.*`` (a ``sys.meta_path`` finder, so ``import jax.numpy as jnp`` and ``from
jax.experimental.shard_map import shard_map`` both reach plax). A cell's output is what it
writes to stdout and stderr plus, as a notebook shows it, the ``repr`` of a final expression
that is not ``None``; an exception ends the cell (not the page) and prints as
``TypeName: first line of the message``. IPython magics are reduced to what they run
(``%timeit f(x)`` runs ``f(x)`` once, quietly; ``!shell`` lines are dropped). Hexadecimal
addresses are masked before comparing. Cells whose output depends on the clock (timings)
differ on both sides alike and are counted as differing.

The table has, per page: the number of cells, the cells whose outputs are equal, and the
first differing cell with both outputs (``--show N`` prints the first N differing cells).
Both sides run on CPU (``JAX_PLATFORMS=cpu``, ``PLAX_PLATFORMS=cpu``); pages that ask for
several CPU devices ask for them themselves (``jax_num_cpu_devices`` or ``XLA_FLAGS``), and
plax honours both.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_MIRROR = "/work/.mirror/jax-ml+jax/repo"
DEFAULT_REV = "jax-v0.10.2"
DEFAULT_PAGES = (
    "docs/key-concepts.md", "docs/jit-compilation.md", "docs/automatic-vectorization.md",
    "docs/automatic-differentiation.md", "docs/random-numbers.md", "docs/pytrees.md",
    "docs/stateful-computations.md", "docs/control-flow.md", "docs/debugging.md",
    "docs/external-callbacks.md",
    "docs/gradient-checkpointing.md", "docs/jaxpr.md", "docs/array_refs.md",
    "docs/notebooks/shard_map.md", "docs/parallel.md", "docs/notebooks/thinking_in_jax.md",
    "docs/notebooks/autodiff_remat.md", "docs/debugging/flags.md",
    "docs/tracing.md",
    # the advanced autodiff guides, the gotchas and the debugging/AOT pages (plain MyST
    # pages run their python blocks as doctests, see python_blocks)
    "docs/notebooks/autodiff_cookbook.md", "docs/notebooks/Common_Gotchas_in_JAX.md",
    "docs/notebooks/Custom_derivative_rules_for_Python_code.md",
    "docs/notebooks/convolutions.md", "docs/notebooks/vmapped_log_probs.md",
    "docs/jacobian-vector-products.md", "docs/higher-order.md", "docs/custom_pytrees.md",
    "docs/complex-differentiation.md", "docs/default_dtypes.md", "docs/aot.md",
    "docs/debugging/print_breakpoint.md", "docs/debugging/checkify_guide.md",
    "docs/notebooks/host-offloading.md", "docs/internals/constants.md",
)

_CELL_START = re.compile(r"^```\{code-cell\}[^\n]*\n", re.M)

# The child: reads the cells (JSON) from argv[2], runs them, prints one JSON list of outputs.
_CHILD = r'''
import ast, contextlib, importlib, importlib.abc, importlib.util, io, json, re, signal, sys

side, cells_path, cell_timeout = sys.argv[1], sys.argv[2], int(sys.argv[3])

if side == "plax":
    class _Alias(importlib.abc.Loader):
        def __init__(self, target):
            self.target = target
        def create_module(self, spec):
            return None
        def exec_module(self, module):
            sys.modules[module.__name__] = self.target

    class _JaxIsPlax(importlib.abc.MetaPathFinder):
        """``import jax[.x]`` answered by ``plax[.x]`` (the module object itself)."""
        def find_spec(self, fullname, path=None, target=None):
            if fullname != "jax" and not fullname.startswith("jax."):
                return None
            return importlib.util.spec_from_loader(
                fullname, _Alias(importlib.import_module("plax" + fullname[3:])))

    sys.meta_path.insert(0, _JaxIsPlax())


def _strip_magics(src):
    out = []
    for line in src.splitlines():
        s = line.strip()
        if s.startswith("%%"):
            continue
        if s.startswith("%timeit") or s.startswith("%time "):
            stmt = re.sub(r"^%timeit(\s+-\S+(\s+\d+)?)*|^%time", "", s).strip()
            indent = line[:len(line) - len(line.lstrip())]
            out.append(indent + "with contextlib.redirect_stdout(io.StringIO()): " + stmt)
            continue
        if s.startswith("%") or s.startswith("!"):
            out.append(line[:len(line) - len(line.lstrip())] + "pass")
            continue
        out.append(line)
    return "\n".join(out)


class _CellTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise _CellTimeout(f"cell ran longer than {cell_timeout} s")


signal.signal(signal.SIGALRM, _alarm)
namespace = {"__name__": "__main__", "contextlib": contextlib, "io": io}
outputs = []
for src in json.load(open(cells_path)):
    buf = io.StringIO()
    signal.alarm(cell_timeout)
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            tree = ast.parse(_strip_magics(src))
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, "<cell>", "exec"), namespace)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
                if value is not None:
                    print(repr(value))
    except BaseException as e:  # the cell's own failure is its output
        if isinstance(e, KeyboardInterrupt):
            raise
        msg = str(e).strip().splitlines()
        buf.write(f"{type(e).__name__}: {msg[0] if msg else ''}\n")
    finally:
        signal.alarm(0)
    outputs.append(buf.getvalue())
sys.stdout.write("\n" + json.dumps(outputs) + "\n")
'''


def read_page(page: str, repo: str | None, rev: str, tree: str | None) -> str:
    """The text of ``page`` from the work tree ``tree`` or from ``repo`` at ``rev``."""
    if tree:
        return (Path(tree) / page).read_text()
    return subprocess.run(["git", "-C", repo, "show", f"{rev}:{page}"], check=True,
                          capture_output=True, text=True).stdout


def code_cells(text: str) -> list[str]:
    """The sources of the ``{code-cell}`` blocks of a MyST page, in order (their ``:option:``
    header lines and a ``---``-fenced option block removed). A page without such blocks (a
    plain MyST page) gives its fenced ``python`` blocks instead (see :func:`python_blocks`),
    after a first cell importing what JAX's doctests find in their namespace (``jax``, ``np``,
    ``jnp``, ``lax``)."""
    if not _CELL_START.search(text):
        blocks = python_blocks(text)
        return [_DOCTEST_NAMESPACE] + blocks if blocks else []
    cells = []
    for m in _CELL_START.finditer(text):
        end = text.index("\n```", m.end() - 1)
        lines = text[m.end():end].splitlines()
        if lines and lines[0].strip() == "---":  # a YAML option block
            close = lines.index("---", 1) if "---" in lines[1:] else 0
            lines = lines[close + 1:]
        while lines and re.match(r"^:\w[\w-]*:", lines[0]):
            lines = lines[1:]
        cells.append("\n".join(lines))
    return cells


# What JAX's conftest.py puts in every doctest's namespace (its pages' examples rely on it).
_DOCTEST_NAMESPACE = "import jax\nimport numpy as np\nimport jax.numpy as jnp\nfrom jax import lax"

_PY_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```", re.M | re.S)


def python_blocks(text: str) -> list[str]:
    """The cells of a plain MyST page: each fenced ``python`` block is one cell, except a
    doctest block (``>>>`` prompts), where each prompt's statement (with its ``...``
    continuation lines) is its own cell, so that each shown value is compared, as JAX's
    doctests check them. The expected output written in the page is dropped (both sides'
    actual outputs are compared), and so are statements marked ``doctest: +SKIP``."""
    cells = []
    for m in _PY_BLOCK.finditer(text):
        body = m.group(1)
        if not re.search(r"^\s*>>>", body, re.M):
            cells.append(body.rstrip("\n"))
            continue
        stmt: list[str] | None = None
        for line in body.splitlines() + [""]:
            s = line.lstrip()
            if s.startswith("... ") or s == "...":
                if stmt is not None:
                    stmt.append(s[4:])
                continue
            if stmt is not None and "doctest: +SKIP" not in "\n".join(stmt):
                cells.append("\n".join(stmt))
            stmt = [s[4:]] if s.startswith(">>> ") or s == ">>>" else None
    return [c for c in cells
            if any(ln.strip() and not ln.lstrip().startswith("#") for ln in c.splitlines())]


def run_side(side: str, cells: list[str], timeout: float, cell_timeout: int) -> list[str]:
    """Runs ``cells`` in one fresh interpreter under ``side`` (``"jax"`` or ``"plax"``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAX_", "JAX_"))}
    env.update(JAX_PLATFORMS="cpu", PLAX_PLATFORMS="cpu", PYTHONHASHSEED="0",
               PYTHONPATH=os.pathsep.join([str(REPO / "core"), str(REPO / "backends"),
                                           env.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cells.json"
        path.write_text(json.dumps(cells))
        try:
            proc = subprocess.run([sys.executable, "-c", _CHILD, side, str(path),
                                   str(cell_timeout)], capture_output=True, text=True, env=env,
                                  timeout=timeout, cwd=tmp, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return [f"(page timed out after {timeout} s)"] * len(cells)
    try:
        outs = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (proc.stdout + proc.stderr)[-600:]
        return [f"(interpreter died: rc={proc.returncode})\n{tail}"] * len(cells)
    return outs


def normalise(out: str) -> str:
    """What is compared of an output: addresses masked, trailing spaces dropped."""
    out = re.sub(r"0x[0-9a-fA-F]{6,}", "0x?", out)
    return "\n".join(line.rstrip() for line in out.strip().splitlines())


def compare_page(page: str, cells: list[str], jax_out: list[str], plax_out: list[str]) -> dict:
    """One row of the table: counts and the differing cells' indices."""
    differ = [i for i in range(len(cells)) if normalise(jax_out[i]) != normalise(plax_out[i])]
    return {"page": page, "cells": len(cells), "equal": len(cells) - len(differ),
            "differ": differ}


def _indent(text: str, width: int = 1500) -> str:
    text = text if len(text) <= width else text[:width] + " ..."
    return "\n".join("      | " + line for line in (text.rstrip() or "(no output)").splitlines())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="*", default=list(DEFAULT_PAGES))
    ap.add_argument("--repo", default=DEFAULT_MIRROR, help="a git repository of JAX")
    ap.add_argument("--rev", default=DEFAULT_REV, help="the revision of --repo to read")
    ap.add_argument("--tree", help="a JAX work tree (instead of --repo/--rev)")
    ap.add_argument("--show", type=int, default=1, help="differing cells shown per page")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per page and side")
    ap.add_argument("--cell-timeout", type=int, default=120, help="seconds per cell")
    ap.add_argument("--json", help="write the rows and outputs to this file")
    args = ap.parse_args(argv)

    rows, record = [], {}
    for page in args.pages:
        cells = code_cells(read_page(page, args.repo, args.rev, args.tree))
        jax_out = run_side("jax", cells, args.timeout, args.cell_timeout)
        plax_out = run_side("plax", cells, args.timeout, args.cell_timeout)
        row = compare_page(page, cells, jax_out, plax_out)
        rows.append(row)
        record[page] = {**row, "sources": cells, "jax": jax_out, "plax": plax_out}
        print(f"{page}: {row['equal']}/{row['cells']} cells print the same", flush=True)
        for i in row["differ"][:args.show]:
            print(f"  cell {i + 1}:\n{_indent(cells[i], 600)}\n    JAX:\n{_indent(jax_out[i])}"
                  f"\n    plax:\n{_indent(plax_out[i])}", flush=True)

    width = max(len(r["page"]) for r in rows)
    print(f"\n{'page':<{width}}  cells  equal  first differing")
    for r in rows:
        first = str(r["differ"][0] + 1) if r["differ"] else "-"
        print(f"{r['page']:<{width}}  {r['cells']:>5}  {r['equal']:>5}  {first}")
    total, equal = sum(r["cells"] for r in rows), sum(r["equal"] for r in rows)
    print(f"{'total':<{width}}  {total:>5}  {equal:>5}")
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
