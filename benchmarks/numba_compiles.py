"""How many numba compilations a command makes, of which kernels, and its CPU time, from an
empty kernel cache.

    python benchmarks/numba_compiles.py [--keep-cache] -- PYTHON_ARGS...

For example, the compiled subset of the composition matrix::

    python benchmarks/numba_compiles.py -- -m pytest -q \\
        tests/transforms/test_composition.py -k test_composition_compiled

runs ``python PYTHON_ARGS...`` with a ``sitecustomize`` module that wraps numba's
``Dispatcher.compile`` in every Python process the command starts (compile workers included:
they inherit ``PYTHONPATH``), recording each call that adds an overload: compiled, or loaded
from numba's disk cache. The table counts them by kernel: generated kernels compiled at the
top (programs, per-cluster kernels), generated kernels compiled as another's callee (the cluster
kernels of whole programs and native loops), plax_numba's fixed functions, numba's own
implementations, others; with the CPU seconds spent inside those calls (a callee's time is
also inside its caller's). The last line is the command's CPU time (user + sys, its processes
waited for). ``XDG_CACHE_HOME`` points at a fresh temporary directory (removed afterwards) and
``PLAX_NUMBA_CACHE_DIR`` is unset, unless ``--keep-cache``. See docs/performance.md.
"""
from __future__ import annotations

import argparse
import collections
import os
import resource
import shutil
import subprocess
import sys
import tempfile

#: the module every process of the command imports at start-up (``site``'s hook)
_SITECUSTOMIZE = '''
import os, sys, threading, time
_OUT = os.environ.get("PLAX_COUNT_COMPILES_FILE")
_depth = threading.local()


def _patch(module):
    real = module.Dispatcher.compile

    def compile(self, sig):
        before = len(self.overloads)
        try:
            misses = sum(self.stats.cache_misses.values())
        except Exception:
            misses = None
        depth = getattr(_depth, "d", 0)
        _depth.d, start = depth + 1, time.thread_time()
        try:
            return real(self, sig)
        finally:
            _depth.d = depth
            if len(self.overloads) > before:
                try:
                    now = sum(self.stats.cache_misses.values())
                except Exception:
                    now = None
                kind = "compiled" if misses is None or now != misses else "loaded"
                with open(_OUT, "a") as out:
                    out.write(f"{kind}\\t{self.py_func.__module__}\\t{depth}\\t"
                              f"{time.thread_time() - start:.4f}\\n")
    module.Dispatcher.compile = compile


class _Hook:
    def find_spec(self, name, path, target=None):
        if name != "numba.core.dispatcher":
            return None
        import importlib.machinery
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)
        spec.loader.exec_module = exec_module
        return spec


if _OUT:
    sys.meta_path.insert(0, _Hook())
'''


def category(module: str, depth: int) -> str:
    """What a compiled function is, from its module and how deep in other compilations."""
    if module.startswith("plax_numba_kernels."):
        return ("generated kernels, at the top" if depth == 0
                else "generated kernels, as callees")
    top = module.split(".")[0]
    if top == "plax_numba":
        return "plax_numba's fixed functions"
    return "numba's own implementations" if top == "numba" else "other functions"


def summarize(path: str) -> list[tuple[str, str, int, float]]:
    """``(kind, category, count, CPU seconds)`` per kind and category of the records at
    ``path``."""
    counts, seconds = collections.Counter(), collections.Counter()
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                kind, module, depth, cpu = line.rstrip("\n").split("\t")
                key = (kind, category(module, int(depth)))
                counts[key] += 1
                seconds[key] += float(cpu)
    return [(k[0], k[1], counts[k], seconds[k]) for k in sorted(counts)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep-cache", action="store_true",
                        help="keep the environment's kernel cache (default: an empty one)")
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="the Python command's arguments, after --")
    options = parser.parse_args(argv)
    args = options.args[1:] if options.args[:1] == ["--"] else options.args
    if not args:
        parser.error("no command: give the Python arguments after --")
    work = tempfile.mkdtemp(prefix="plax_numba_compiles_")
    try:
        with open(os.path.join(work, "sitecustomize.py"), "w") as f:
            f.write(_SITECUSTOMIZE)
        records = os.path.join(work, "compiles.tsv")
        env = dict(os.environ, PLAX_COUNT_COMPILES_FILE=records)
        env["PYTHONPATH"] = os.pathsep.join([work] + [p for p in [env.get("PYTHONPATH")] if p])
        if not options.keep_cache:
            env["XDG_CACHE_HOME"] = os.path.join(work, "cache")
            os.makedirs(env["XDG_CACHE_HOME"])
            env.pop("PLAX_NUMBA_CACHE_DIR", None)
        code = subprocess.run([sys.executable] + args, env=env).returncode
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        print("| kind | what | count | CPU s inside |")
        print("|---|---|---:|---:|")
        for kind, what, count, cpu in summarize(records):
            print(f"| {kind} | {what} | {count} | {cpu:.1f} |")
        print(f"command CPU time: {usage.ru_utime + usage.ru_stime:.1f} s "
              f"(user {usage.ru_utime:.1f}, sys {usage.ru_stime:.1f}); exit status {code}")
        return code
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
