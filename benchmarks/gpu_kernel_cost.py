"""The arithmetic per output element of plax's generated CUDA kernels, without a GPU.

    PYTHONPATH=$PYTHONPATH:backends python benchmarks/gpu_kernel_cost.py [--n 4096]

Each workload (``random.normal``, ``random.uniform``, ``random.bernoulli``, selu, one MLP
training step at small widths, an embedding lookup) is compiled under ``jit`` on the simulated GPU
(``tests/cupy/fake_cupy.py``, in a child process), and each kernel it plans
(``codegen.plan_cluster``/``plan_group``/``plan_equation``) is compiled by the real NVRTC with the device options to PTX for ``sm_90`` and assembled by ``ptxas``
(when on the PATH) for its registers and machine-code size.

For each kernel the table gives the PTX instructions of one iteration of its grid-stride loop
(one output element) by kind: integer and logic (``int``), float (``flt``, not counting
``fma``), fused multiply-adds (``fma``), special functions and IEEE division and square root
(``sfu``: ``.approx`` instructions, ``sqrt``, ``div`` on floats, which ``ptxas`` expands into
several), loads and stores (``mem``), moves and conversions (``mov``), branches (``br``) and
kernel-argument reads (``arg``: ``ld.param``, which the machine code folds into operands from
its constant bank, so ``path`` leaves them out).
Where the loop body branches, ``path`` gives the instructions of its shortest and longest
path (an element takes one of them; a warp whose elements disagree runs both), and the kind
columns count the shortest. ``regs`` and ``sass`` (static machine instructions, 16 bytes
each) are ``ptxas``'s for the whole kernel. ``--n`` sets the element count: below
``codegen.VECTOR_MIN_ELEMENTS`` (65536) the kernels have only the scalar loop, the one counted
here (the vector path unrolls the same per-element code ``per_thread`` times, and its
shortest path skips the guarded chunks: read its longest). A reduction kernel's row is of its
longest innermost loop: the accumulation of one element (``plax_elem`` inlined), or a step
of the block's tree where that is longer.
``--no-branches`` plans every ``select_n`` as an expression, as the generator did before it
computed only the selected case (``codegen._branch_selects``): run both to compare.
``--no-arg-fusion`` keeps ``argmax``/``argmin`` out of clusters (``CupyEmitter.
fuses_arg_reductions`` off), as before they fused: the cluster, then the row kernel
(``kernels_rows``), whose row counts the per-element loop of its ``_block`` function (the
kernel calls it, ``__noinline__``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

import simulated_gpu  # (this folder is on sys.path when run as a script)

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ("int", "flt", "fma", "sfu", "mem", "mov", "br", "arg")


# ---------------------------------------------------------------- the kernels of a program

def planned_kernels(workload: str, n: int, branches: bool = True,
                    arg_fusion: bool = True) -> list[dict]:
    """The generated kernels that compiling ``workload`` under ``jit`` plans on the simulated
    GPU: ``{"entry", "n", "primitives", "source"}`` each, in planning order. Planned in a
    child process (the simulated CuPy replaces NVRTC there; this process keeps the real one).
    ``branches=False`` plans every ``select_n`` as an expression (``codegen._branch_selects``
    off), as before it existed; ``arg_fusion=False`` keeps argmax/argmin apart (their row
    kernels are rows too)."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", workload, "--n", str(n)]
                         + ([] if branches else ["--no-branches"])
                         + ([] if arg_fusion else ["--no-arg-fusion"]),
                         capture_output=True, text=True, env=os.environ)
    if out.returncode:
        raise RuntimeError(f"planning {workload} failed:\n{out.stderr}")
    return json.loads(out.stdout.splitlines()[-1])


def _child(workload: str, n: int, branches: bool, arg_fusion: bool = True) -> None:
    """Runs ``workload`` once on the simulated GPU, printing its planned kernels as JSON."""
    os.environ["PLAX_CUDA_GRAPHS"] = "0"
    simulated_gpu.install(sm_count=132)
    import plax
    from plax_cupy import codegen, kernels_rows
    from plax_cupy.emitter import CupyEmitter
    if not branches:
        codegen.LAZY_SELECT_MIN_EQUATIONS = 1 << 30
    rows_launched: list = []
    if not arg_fusion:
        CupyEmitter.fuses_arg_reductions = False

        def launch(source, name, jobs, *args, _original=kernels_rows._launch):
            rows_launched.append({"entry": [name + "_block"], "n": int(jobs), "primitives": [name],
                                  "source": kernels_rows._module_text(codegen.PREAMBLE, source)})
            return _original(source, name, jobs, *args)
        kernels_rows._launch = launch
    plans: list = []
    for name in ("plan_cluster", "plan_group", "plan_equation"):
        def recording(*args, _original=getattr(codegen, name), **kw):
            plan = _original(*args, **kw)
            plans.append(plan)
            return plan
        setattr(codegen, name, recording)
    fn, args = WORKLOADS[workload](n)
    plax.block_until_ready(plax.jit(fn)(*args))
    rows = [{"entry": list(p.entry), "n": int(p.n),
             "primitives": list(getattr(p, "primitives", ["(group)"])), "source": p.source}
            for p in plans]
    print(json.dumps(rows + rows_launched))


# ---------------------------------------------------------------- PTX analysis

def _kind(op: str) -> str:
    """The kind (:data:`KINDS`) of the PTX instruction ``op`` (its dotted opcode)."""
    base = op.split(".")[0]
    if base in ("bra", "ret", "exit", "call", "brx"):
        return "br"
    if op.startswith("ld.param"):   # a kernel argument: an operand of the machine code
        return "arg"
    if base in ("ld", "st", "atom", "red", "prefetch"):
        return "mem"
    if base in ("mov", "cvt", "cvta", "bar"):
        return "mov"
    floating = re.search(r"\.(f16|bf16|f32|f64)\b", op) is not None
    if ".approx" in op or base in ("ex2", "lg2", "sin", "cos", "rsqrt", "rcp", "tanh") \
            or (floating and base in ("sqrt", "div")):
        return "sfu"
    if floating and base in ("fma", "mad"):
        return "fma"
    if floating and base != "selp":
        return "flt"
    return "int"


def parse_ptx(ptx: str, entry: str) -> list[dict]:
    """The basic blocks of kernel ``entry`` in ``ptx``: each ``{"label", "ops", "succ"}``
    (``succ`` the indices of its successors)."""
    start = re.search(rf"\.entry\s+{re.escape(entry)}\s*\(", ptx) or \
        re.search(rf"\.func\s+(?:\([^)]*\)\s*)?\w*{re.escape(entry)}\w*\s*\(", ptx)  # (a device function)
    if start is None:
        raise ValueError(f"no kernel {entry} in the PTX")
    text = ptx[start.end():]
    text = text[text.index("{") + 1:]
    blocks: list[dict] = [{"label": None, "ops": [], "jumps": [], "falls": True}]
    for raw in text.splitlines():
        line = raw.split("//")[0].strip()
        if not line or line.startswith(".") or line in ("{", "}"):
            if line == "}" and raw.startswith("}"):
                break
            continue
        if line.endswith(":"):
            blocks.append({"label": line[:-1], "ops": [], "jumps": [], "falls": True})
            continue
        guarded = line.startswith("@")
        tokens = line.split()
        op = tokens[1] if guarded else tokens[0]
        blocks[-1]["ops"].append(op)
        base = op.split(".")[0]
        if base == "bra":
            target = tokens[-1].rstrip(";")
            blocks[-1]["jumps"].append(target)
            blocks[-1]["falls"] = guarded
            blocks.append({"label": None, "ops": [], "jumps": [], "falls": True})
        elif base in ("ret", "exit") and not guarded:
            blocks[-1]["falls"] = False
            blocks.append({"label": None, "ops": [], "jumps": [], "falls": True})
    index = {b["label"]: k for k, b in enumerate(blocks) if b["label"]}
    for k, b in enumerate(blocks):
        b["succ"] = [index[t] for t in b["jumps"]] + ([k + 1] if b["falls"] and k + 1 < len(blocks) else [])
    return blocks


def loop_paths(blocks: list[dict], innermost: bool = False) -> tuple[list[str], list[str]]:
    """The opcodes of the shortest and longest path through one iteration of the kernel's
    grid-stride loop: of its loops (a back edge's target to its source, back edges dropped)
    the one with the longest path (the compiler may add copies of the loop for cases decided
    at launch, such as a shift by the width or more, whose bodies are shorter), or the whole
    kernel where it has no loop. ``innermost``: of the loops holding no other loop."""
    back = [(k, s) for k, b in enumerate(blocks) for s in b["succ"] if s <= k]
    spans = [(s, k) for k, s in back] or [(0, len(blocks) - 1)]
    if innermost:
        spans = [(h, t) for h, t in spans
                 if not any(h <= h2 and t2 <= t and (h2, t2) != (h, t) for h2, t2 in spans)]
    return max((_paths(blocks, head, latch) for head, latch in spans), key=lambda p: len(p[1]))


def _paths(blocks: list[dict], head: int, latch: int) -> tuple[list[str], list[str]]:
    """The shortest and longest opcode paths from block ``head`` to block ``latch``."""
    best: dict[int, tuple[list[str], list[str]]] = {}
    for k in range(latch, head - 1, -1):
        ops = blocks[k]["ops"]
        nexts = [best[s] for s in blocks[k]["succ"] if k < s <= latch and s in best]
        if k == latch or not nexts:
            best[k] = (ops, ops)
            continue
        shortest = min((n[0] for n in nexts), key=len)
        longest = max((n[1] for n in nexts), key=len)
        best[k] = (ops + shortest, ops + longest)
    return best[head]


def by_kind(ops: list[str]) -> dict[str, int]:
    counts = dict.fromkeys(KINDS, 0)
    for op in ops:
        counts[_kind(op)] += 1
    return counts


def _ptxas(ptx: str) -> tuple[int | None, int | None]:
    """``(registers, machine instructions)`` of the PTX's first kernel for sm_90 by ``ptxas``,
    or Nones without it."""
    if shutil.which("ptxas") is None:
        return None, None
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        run = subprocess.run(["ptxas", "-arch=sm_90", "-v", src, "-o", out],
                             capture_output=True, text=True)
        if run.returncode:
            return None, None
        regs = [int(m) for m in re.findall(r"Used (\d+) registers", run.stderr)]
        with open(out, "rb") as f:
            elf = f.read()
    return (max(regs) if regs else None), _text_bytes(elf) // 16


def _text_bytes(elf: bytes) -> int:
    """The bytes of the ``.text.*`` sections of an ELF64 cubin (its kernels' machine code)."""
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", elf, shoff + k * shentsize) for k in range(shnum)]
    names_at = sections[shstrndx][4]
    total = 0
    for name_off, _, _, _, _, size in sections:
        name = elf[names_at + name_off:elf.index(b"\0", names_at + name_off)].decode()
        if name.startswith(".text."):
            total += size
    return total


def kernel_cost(plan: dict) -> dict:
    """The cost row of one generated kernel (:func:`planned_kernels`' row; see the module's
    docstring)."""
    from plax_cupy import nvrtc
    ptx = nvrtc.compile_ptx(plan["source"], options=("-arch=compute_90",) + nvrtc.DEVICE_OPTIONS,
                            allow_warnings=True)
    entry = [e for e in plan["entry"] if re.search(rf"\.(entry\s+|func\s+\w*){e}", ptx)][0]
    reduces = entry == "plax_reduce" or entry.endswith("_block")
    shortest, longest = loop_paths(parse_ptx(ptx, entry), innermost=reduces)
    regs, sass = _ptxas(ptx)
    counted = [sum(1 for op in path if _kind(op) != "arg") for path in (shortest, longest)]
    return {"kernel": f"{entry} n={plan['n']}", "ops": " ".join(plan["primitives"])[:60],
            "short": counted[0], "long": counted[1], **by_kind(shortest),
            "regs": regs, "sass": sass}


# ---------------------------------------------------------------- workloads

def _sampler(name: str, partitionable: bool = True):
    """The workload of ``plax.random.<name>`` (``bernoulli`` with p = 0.3) of ``n`` values,
    in the given ``jax_threefry_partitionable`` mode (set while the sampler is traced, the
    process's own restored after)."""
    def build(n: int) -> tuple:
        import plax
        from plax import random
        sample = getattr(random, name)
        extra = (0.3,) if name == "bernoulli" else ()

        def fn(k):
            with plax.threefry_partitionable(partitionable):
                return sample(k, *extra, (n,))
        return fn, (random.PRNGKey(0),)
    return build


def _selu(n: int) -> tuple:
    from plax import numpy as jnp
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)

    def selu(v):
        return 1.0507 * jnp.where(v > 0, v, 1.6733 * jnp.exp(v) - 1.6733)
    return selu, (x,)


def _mlp_step(n: int) -> tuple:
    """The MLP step of benchmarks/gpu.py (SGD on a softmax cross-entropy), at small widths:
    its kernels' per-element code does not depend on the sizes (nor on ``n``)."""
    from plax import grad, nn, numpy as jnp
    rng = np.random.default_rng(0)
    rng.standard_normal(n)   # (the generator's state of before, when selu's data came first)
    sizes = (64, 32, 32, 10)
    params = [((rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32), np.zeros(o, np.float32))
              for i, o in zip(sizes[:-1], sizes[1:])]
    images = rng.standard_normal((16, sizes[0])).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 16)]

    def loss(params, images, labels):
        h = images
        for w, b in params[:-1]:
            h = nn.relu(h @ w + b)
        w, b = params[-1]
        return -jnp.mean(jnp.sum(nn.log_softmax(h @ w + b) * labels, axis=1))

    def step(params, images, labels):
        grads = grad(loss)(params, images, labels)
        return [(w - 0.01 * dw, b - 0.01 * db) for (w, b), (dw, db) in zip(params, grads)]
    return step, (params, images, labels)


def _categorical(n: int) -> tuple:
    """``random.categorical`` of ``n / 64`` rows of 64 logits (argmax of logits plus Gumbel
    noise along the last axis)."""
    from plax import random
    logits = np.random.default_rng(1).standard_normal((max(n // 64, 1), 64)).astype(np.float32)
    return (lambda k, l: random.categorical(k, l)), (random.PRNGKey(0), logits)


def _affine_argmax(n: int) -> tuple:
    """``argmax(x * w + b, axis=-1)`` over ``n / 64`` rows of 64."""
    from plax import numpy as jnp
    rng = np.random.default_rng(2)
    x = rng.standard_normal((max(n // 64, 1), 64)).astype(np.float32)
    w, b = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    return (lambda x, w, b: jnp.argmax(x * w + b, axis=-1)), (x, w, b)


def _embedding(n: int) -> tuple:
    """An embedding lookup scaled (``jnp.take(table, ids, axis=0) * scale``, the ids' negative
    values normalized, out-of-range rows NaN): ``n`` output elements, rows of 64; one kernel
    with the gather fused into it (structural fusion)."""
    from plax import numpy as jnp
    rng = np.random.default_rng(0)
    table = rng.standard_normal((1000, 64)).astype(np.float32)
    ids = rng.integers(-1000, 1000, max(n // 64, 1)).astype(np.int32)
    return (lambda t, i: jnp.take(t, i, axis=0) * 0.125), (table, ids)


#: ``{name: build(n) -> (fn, args)}``: the programs whose kernels are counted, each built only
#: in the child process that plans it
WORKLOADS = {
    "random.normal f32": _sampler("normal"),
    "random.uniform f32": _sampler("uniform"),
    "random.bernoulli": _sampler("bernoulli"),
    "random.normal f32, original": _sampler("normal", partitionable=False),
    "random.uniform f32, original": _sampler("uniform", partitionable=False),
    "selu f32": _selu,
    "MLP step 64-32-32-10 b16": _mlp_step,
    "random.categorical (n/64, 64)": _categorical,
    "argmax(x * w + b) (n/64, 64)": _affine_argmax,
    "embedding take * scale f32": _embedding,
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--no-branches", action="store_true",
                        help="every select_n as an expression (the kernels before codegen._branch_selects)")
    parser.add_argument("--no-arg-fusion", action="store_true",
                        help="argmax/argmin apart from clusters (the two kernels before they fused)")
    parser.add_argument("--only", help="the workloads whose names contain this")
    opts = parser.parse_args(argv)
    if opts.child:
        _child(opts.child, opts.n, not opts.no_branches, not opts.no_arg_fusion)
        return 0
    cols = ("path", *KINDS, "regs", "sass")
    print(f"{'workload / kernel':44s} " + " ".join(f"{c:>7s}" for c in cols))
    for name in WORKLOADS:
        if opts.only and opts.only not in name:
            continue
        print(name)
        for plan in planned_kernels(name, opts.n, not opts.no_branches, not opts.no_arg_fusion):
            row = kernel_cost(plan)
            path = f"{row['short']}" if row["short"] == row["long"] else f"{row['short']}-{row['long']}"
            vals = [path] + [str(row[k]) for k in KINDS] + [str(row["regs"]), str(row["sass"])]
            print(f"  {row['kernel'][:42]:42s} " + " ".join(f"{v:>7s}" for v in vals)
                  + f"   {row['ops']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
