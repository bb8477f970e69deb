"""plax's command line.

    python -m plax info [-v]                          what plax found: plugins, backends, devices
    python -m plax conformance --backend NAME [...]   a backend's acceptance test, with progress
    python -m plax COMMAND ...                        a command a plugin provides (``cost``, ...)
"""
from __future__ import annotations

import os
import platform as _platform
import sys
import time

USAGE = ("usage: python -m plax info [-v|--verbose]\n"
         "       python -m plax conformance --backend NAME [pytest arguments...]")


def main(argv: list[str]) -> int:
    """Runs the command line; returns the exit status.

    Args:
      argv: ``sys.argv``. ``info`` (``-v``/``--verbose`` adds the traceback of every plugin
        that failed to load) and ``conformance`` are built in; any other command is looked up
        among the plugins' exported commands.

    Returns:
      0 on success, 1 when the environment selects nothing usable (``info``) or a conformance
      test failed, 2 for bad usage.
    """
    args = argv[1:]
    if args and args[0] == "conformance":
        return conformance(args[1:])
    if args and args[0] != "info" and not args[0].startswith("-"):
        return run_plugin_command(args[0], args[1:])
    flags = {a for a in args[1:]}
    if not args or args[0] != "info" or not flags <= {"-v", "--verbose"}:
        print(USAGE, file=sys.stderr)
        return 2
    return info(verbose=bool(flags))


# ------------------------------------------------------------------ info

def info(verbose: bool = False) -> int:
    """Prints what plax found: a summary in tables (plugins, backends with their versions and
    threading, devices), then the full report of :func:`plax.plugins.info`.

    Returns:
      0, or 1 when the environment selects no usable device.
    """
    import numpy as np

    import plax
    from plax import plugins
    reg = plugins.registry()
    print(f"plax {plax.__version__}")
    print(f"Python {_platform.python_version()}, NumPy {np.__version__}, "
          f"{_platform.system()} {_platform.machine()}, {os.cpu_count()} CPUs")
    print()
    print(table(["plugin", "status", "kind", "provides", "package"], plugin_rows(reg)))
    print()
    print(table(["backend", "platform", "priority", "devices", "version and threading"],
                backend_rows(reg)))
    print()
    print(plugins.info(verbose=verbose))
    for line in backend_info_lines(reg):
        print(line)
    try:
        device = plax.devices()[0]
        reason = reg.default_reason()
        print(f"default backend: {plax.default_backend()} "
              f"(runs on {device!r} with {device.backend.name!r}; {reason})")
    except RuntimeError as err:
        print(f"default backend: none ({err})")
        return 1
    return 0


def table(header: list[str], rows: list[list[str]]) -> str:
    """Left-aligned columns under a header and a rule of dashes; the last column is not
    padded (it may be long)."""
    rows = [[str(c) for c in r] for r in rows] or [["(none)"] + [""] * (len(header) - 1)]
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header) - 1)]

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)) + "  " + cells[-1]
    return "\n".join([line(header), line(["-" * w for w in widths] + ["-" * len(header[-1])])]
                     + [line(r).rstrip() for r in rows])


def _distribution_versions() -> dict[tuple[str, str], str]:
    """(entry-point group, plugin name) -> "distribution version" of the package declaring it."""
    from importlib.metadata import entry_points
    out = {}
    for group in ("plax.backends", "plax.plugins"):
        for ep in entry_points(group=group):
            dist = getattr(ep, "dist", None)
            if dist is not None:
                out[(group, ep.name)] = f"{dist.metadata['Name']} {dist.version}"
    return out


def plugin_rows(reg) -> list[list[str]]:
    versions = _distribution_versions()
    rows = []
    for r in reg.records:
        kind = {"plax.backends": "backend", "plax.plugins": "transform"}.get(r.group, r.group)
        provides = ", ".join(r.backends + r.exports)
        if r.status != "loaded":
            provides = r.error
        package = versions.get((r.group, r.name), "(registered at run time)")
        rows.append([r.name, r.status, kind, _clip(provides, 60), package])
    return rows


def backend_rows(reg) -> list[list[str]]:
    rows = []
    for b in sorted(reg.backends.values(), key=lambda b: (b.platform, -b.priority)):
        default = " (default)" if reg.backends_for_platform(b.platform)[0] is b else ""
        devices = ", ".join(repr(d) for d in reg.backend_devices.get(b.name, []))
        facts = {}
        describe = getattr(b, "info", None)
        if callable(describe):
            try:
                facts = describe() or {}
            except Exception as err:  # noqa: BLE001 - info is for people; never fatal
                facts = {"info() failed": f"{type(err).__name__}: {err}"}
        shown = ", ".join(f"{k} {v}" for k, v in facts.items() if k != "kernel cache")
        rows.append([b.name, b.platform, f"{b.priority}{default}", _clip(devices, 40),
                     shown or "-"])
    for name, plat in sorted(reg.excluded.items()):
        rows.append([name, plat, "-", f"excluded by {reg.platforms_setting}", "-"])
    return rows


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def backend_info_lines(registry) -> list[str]:
    """One line per backend that describes itself through ``Backend.info()`` (a dict of
    label -> value: the Numba backend reports its Numba version, threading layer and thread
    count); a backend whose ``info`` fails is reported, not fatal."""
    lines = []
    for name in sorted(registry.backends):
        info = getattr(registry.backends[name], "info", None)
        if not callable(info):
            continue
        try:
            facts = info()
        except Exception as err:  # noqa: BLE001 - info is for people; never fatal
            lines.append(f"backend {name}: info() failed: {type(err).__name__}: {err}")
            continue
        if facts:
            lines.append(f"backend {name}: " + ", ".join(f"{k} {v}" for k, v in facts.items()))
    return lines


# ------------------------------------------------------------------ conformance

CONFORMANCE_USAGE = """\
usage: python -m plax conformance --backend NAME [pytest arguments...]

Runs plax's conformance kit against one backend -- the same as
    pytest --pyargs plax.testing.conformance --plax-backend=NAME
with a progress line instead of pytest's dots. Other arguments go to pytest
(-k EXPR selects tests, -x stops at the first failure, -n 2 runs two workers
with pytest-xdist). Exit status: pytest's (0 when every test passed)."""


def conformance(args: list[str]) -> int:
    """``python -m plax conformance --backend NAME [pytest args]``: the conformance kit in this
    process, with :class:`ConformanceProgress` reporting as it goes.

    Returns:
      pytest's exit status; 2 for bad usage or an unknown backend.
    """
    backend, rest = None, []
    it = iter(args)
    for a in it:
        if a in ("-h", "--help"):
            print(CONFORMANCE_USAGE)
            return 0
        if a == "--backend":
            backend = next(it, None)
        elif a.startswith("--backend="):
            backend = a.split("=", 1)[1]
        else:
            rest.append(a)
    if not backend:
        print(CONFORMANCE_USAGE, file=sys.stderr)
        return 2
    from plax import plugins
    known = sorted(plugins.registry().backends)
    if backend not in known:
        print(f"unknown backend {backend!r}; installed: {', '.join(known) or 'none'} "
              f"(python -m plax info says why a plugin did not load)", file=sys.stderr)
        return 2
    import pytest
    progress = ConformanceProgress(backend)
    pytest_args = ["--pyargs", "plax.testing.conformance", f"--plax-backend={backend}",
                   "-q", "-rfE", "-p", "no:cacheprovider",
                   # our line replaces pytest's dots and its percentages
                   "-o", "console_output_style=classic", *rest]
    print(f"plax conformance kit, backend {backend!r}: pytest {' '.join(pytest_args)}",
          flush=True)
    return int(pytest.main(pytest_args, plugins=[progress, _pytest_glue(pytest, progress)]))


def _pytest_glue(pytest, progress):
    """The hooks that need pytest's decorators (built here, so that ``python -m plax info``
    never imports pytest): each test keeps its category (pytest's summary counts it) but loses
    its letter (the dot of a pass), which the progress line replaces; under pytest-xdist the
    controller learns the number of tests from the workers' collections."""
    class Glue:
        @pytest.hookimpl(optionalhook=True)
        def pytest_xdist_node_collection_finished(self, node, ids):
            if not progress.total:
                progress.total = len(ids)
                progress.start = progress.last_print = time.monotonic()
                progress._write_line(f"{progress.total} tests collected for backend "
                                     f"{progress.backend!r}")

        @pytest.hookimpl(hookwrapper=True)
        def pytest_report_teststatus(self, report, config):
            outcome = yield
            result = outcome.get_result()
            if isinstance(result, tuple) and len(result) == 3 and result[0]:
                outcome.force_result((result[0], "", ""))
    return Glue()


class ConformanceProgress:
    """A pytest plugin that reports the kit's progress: on a terminal one line rewritten in
    place (done/total, percentage, counts, elapsed and estimated remaining time, the running
    test); elsewhere (a CI log, a pipe) a line at every tenth of the run and at least every
    30 seconds. Failures are listed as they happen, and in pytest's summary at the end."""

    def __init__(self, backend: str, stream=None):
        self.backend = backend
        self.stream = stream or sys.stdout
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.total = 0
        self.done = 0
        self.counts = {"passed": 0, "failed": 0, "skipped": 0}
        self.start = time.monotonic()
        self.last_print = self.start
        self.next_fraction = 0.1
        self._printed_done = -1
        self._seen: set[str] = set()

    # -- pytest hooks

    def pytest_collection_finish(self, session):
        self.total = len(session.items)
        self.start = self.last_print = time.monotonic()
        self._write_line(f"{self.total} tests collected for backend {self.backend!r}")

    def pytest_runtest_logreport(self, report):
        if report.nodeid in self._seen:
            return
        outcome = None
        if report.failed:
            outcome = "failed"
        elif report.skipped:
            outcome = "skipped"
        elif report.when == "call":
            outcome = "passed"
        if outcome is None:
            return
        self._seen.add(report.nodeid)
        self.done += 1
        self.counts[outcome] += 1
        if outcome == "failed":
            self._write_line(f"FAILED {report.nodeid} ({report.when})")
        self._report(report.nodeid)

    def pytest_sessionfinish(self, session):
        if self.total:
            self._report("", final=True)

    # -- output

    def status(self, current: str = "") -> str:
        elapsed = time.monotonic() - self.start
        pct = 100.0 * self.done / self.total if self.total else 100.0
        left = ""
        if 0 < self.done < self.total:
            left = f", ~{_clock(elapsed / self.done * (self.total - self.done))} left"
        counts = ", ".join(f"{n} {k}" for k, n in self.counts.items() if n)
        text = (f"[{self.done:>{len(str(self.total))}}/{self.total} {pct:5.1f}%] "
                f"{counts or 'starting'}; {_clock(elapsed)} elapsed{left}")
        return f"{text}  {current}" if current else text

    def _report(self, current: str, final: bool = False) -> None:
        now = time.monotonic()
        if self.tty:
            width = 120
            line = self.status(current.rsplit("::", 1)[-1])[:width - 1]
            self.stream.write("\r\033[K" + line + ("\n" if final else ""))
            self.stream.flush()
            return
        fraction = self.done / self.total if self.total else 1.0
        if final and self.done == self._printed_done:
            return
        if final or fraction >= self.next_fraction or now - self.last_print >= 30:
            self._printed_done = self.done
            while self.next_fraction <= fraction:
                self.next_fraction += 0.1
            self.last_print = now
            self._write_line(self.status())

    def _write_line(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\033[K")
        self.stream.write(text + "\n")
        self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


# ------------------------------------------------------------------ commands from plugins

def run_plugin_command(name: str, args: list[str]) -> int:
    """Runs ``python -m plax NAME ARGS...`` where a plugin provides the command: its hook
    exports a callable ``cli.NAME`` (``{"cli.cost": main}``), called with the remaining
    arguments and returning the exit status.

    Returns:
      The command's exit status; 2, with a message saying which package provides the
      command (or which are available), when no plugin provides it.
    """
    from plax import plugins
    try:
        command = plugins.lookup(f"cli.{name}")
    except AttributeError as err:
        known = sorted(k[len("cli."):] for k in plugins.registry().exports if k.startswith("cli."))
        message = str(err) if f"cli.{name}" in plugins.KNOWN_PROVIDERS else \
            f"unknown command {name!r}"
        print(f"{USAGE}\n{message}. Commands: {', '.join(['info', 'conformance'] + known)}.",
              file=sys.stderr)
        return 2
    return int(command(list(args)) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
