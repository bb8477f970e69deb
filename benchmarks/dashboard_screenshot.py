"""Screenshots of the published asv dashboard, taken with headless Chromium, and a check that
its pages show the plax and JAX series.

    asv run HEAD~5..HEAD && asv publish          # fills .asv/html
    python benchmarks/dashboard_screenshot.py [--html .asv/html] [--out dashboard.png]
        [--benchmark bench_table.RandomNormal.time_normal_10M]

Serves the published HTML on 127.0.0.1 (asv's pages load their data with fetch(), which
file:// URLs forbid), then for the overview page and one benchmark's graph page:

1. dumps the DOM after the page's scripts ran (``--dump-dom``) and checks it: the overview
   lists the benchmark; the graph page's parameter selector offers ``plax:<backend>`` for
   every backend in the results and ``jax``;
2. takes a PNG screenshot (``--screenshot``) for a person to look at.

asv's pages load jQuery, flot and Bootstrap from public CDNs. Where those cannot be reached (a
machine whose only network is the package registries), the served copy of each page points
them at the same libraries taken from the npm registry with ``npm pack`` (cached in
``~/.cache/plax-asv-vendor``; ``--no-vendor`` keeps the CDN addresses). The published files
are never changed.

Chromium is Debian's ``chromium`` package (``apt-get install -y chromium``); not a Python
dependency, so this script is not part of the test suite. Exits 1 when a check fails.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Flags this needs on a container without a GPU, a sandbox or a network: no first-run UI, no
# background fetches (component updates, sync, QUIC), a throwaway profile per run.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                  "--disable-dev-shm-usage"]


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("no Chromium found: apt-get install -y chromium")


def chromium(args: list[str], budget_ms: int = 15000) -> str:
    """Runs headless Chromium with a fresh profile; returns its stdout."""
    with tempfile.TemporaryDirectory(prefix="plax-chromium-") as profile:
        cmd = [find_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
               f"--virtual-time-budget={budget_ms}", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        raise RuntimeError(f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


# The CDN files asv's index.html loads, by file name -> (npm package, file in its tarball).
VENDOR = {
    "jquery-3.3.1.min.js": ("jquery@3.3.1", "package/dist/jquery.min.js"),
    "jquery.flot.min.js": ("flot@0.8.3", "package/jquery.flot.js"),
    "jquery.flot.time.min.js": ("flot@0.8.3", "package/jquery.flot.time.js"),
    "jquery.flot.selection.min.js": ("flot@0.8.3", "package/jquery.flot.selection.js"),
    "jquery.flot.categories.min.js": ("flot@0.8.3", "package/jquery.flot.categories.js"),
    "jquery.flot.orderBars.js": ("flot-orderbars@1.0.0", "package/js/jquery.flot.orderBars.js"),
    "stupidtable.min.js": ("stupid-table-plugin@1.1.3", "package/stupidtable.min.js"),
    "md5.min.js": ("blueimp-md5@2.19.0", "package/js/md5.min.js"),
    "bootstrap.min.js": ("bootstrap@3.1.1", "package/dist/js/bootstrap.min.js"),
    "bootstrap.min.css": ("bootstrap@3.1.1", "package/dist/css/bootstrap.min.css"),
}


def vendor_dir() -> str | None:
    """A folder holding every file of VENDOR, fetched with ``npm pack`` on first use; None
    when npm is missing or a package cannot be fetched (the pages keep their CDN addresses)."""
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                         "plax-asv-vendor")
    if all(os.path.exists(os.path.join(cache, name)) for name in VENDOR):
        return cache
    npm = shutil.which("npm")
    if npm is None:
        return None
    os.makedirs(cache, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for spec in sorted({spec for spec, _ in VENDOR.values()}):
            proc = subprocess.run([npm, "pack", spec, "--silent"], cwd=tmp, capture_output=True,
                                  text=True, timeout=300)
            if proc.returncode != 0:
                print(f"npm pack {spec} failed; keeping the CDN addresses", file=sys.stderr)
                return None
            tarball = os.path.join(tmp, proc.stdout.strip().splitlines()[-1])
            with tarfile.open(tarball) as tar:
                for name, (s, member) in VENDOR.items():
                    if s == spec:
                        data = tar.extractfile(member).read()
                        with open(os.path.join(cache, name), "wb") as f:
                            f.write(data)
    return cache


_CDN = re.compile(r'(src|href)="https://[^"]*/([^/"]+)"((?:\s+(?:integrity|crossorigin|'
                  r'referrerpolicy)="[^"]*")*)')


def localise(html: str, vendored: set[str]) -> str:
    """The page with each CDN address that has a vendored file replaced by /_vendor/NAME (its
    subresource-integrity attributes dropped: npm's builds are not the CDN's minified bytes)."""
    def repl(m):
        kind, name = m.group(1), m.group(2)
        return f'{kind}="/_vendor/{name}"' if name in vendored else m.group(0)
    return _CDN.sub(repl, html)


def serve(directory: str, vendor: str | None) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(type("Handler", (_Handler,), {"vendor": vendor}),
                                directory=directory)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


class _Handler(http.server.SimpleHTTPRequestHandler):
    vendor: str | None = None

    def send_head(self):
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if self.vendor and path.startswith("/_vendor/"):
            return self._send_bytes(os.path.join(self.vendor, os.path.basename(path)))
        if self.vendor and (path.endswith(".html") or path.endswith("/")):
            local = self.translate_path(path)
            if os.path.isdir(local):
                local = os.path.join(local, "index.html")
            if os.path.exists(local):
                with open(local, encoding="utf-8") as f:
                    text = localise(f.read(), set(os.listdir(self.vendor)))
                return self._send_data(text.encode(), "text/html; charset=utf-8")
        return super().send_head()

    def _send_bytes(self, path):
        if not os.path.exists(path):
            self.send_error(404)
            return None
        with open(path, "rb") as f:
            data = f.read()
        return self._send_data(data, self.guess_type(path))

    def _send_data(self, data: bytes, content_type: str):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        return io.BytesIO(data)

    def log_message(self, *args):
        pass


def expected_frameworks(html_dir: str, benchmark: str) -> list[str]:
    """The ``framework`` values the published data has for ``benchmark``."""
    with open(os.path.join(html_dir, "index.json")) as f:
        index = json.load(f)
    info = index["benchmarks"].get(benchmark)
    if info is None:
        sys.exit(f"{benchmark} is not in the published results; publish first, or pick one of "
                 f"{sorted(index['benchmarks'])[:10]}...")
    return [v.strip("'\"") for v in info["params"][0]]


def check(condition: bool, what: str, failures: list[str]) -> None:
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", default=os.path.join(REPO, ".asv", "html"),
                        help="asv's published HTML (default .asv/html)")
    parser.add_argument("--out", default="asv_dashboard.png",
                        help="the benchmark graph's screenshot (the overview's goes beside it, "
                             "suffixed _overview)")
    parser.add_argument("--benchmark", default="bench_table.RandomNormal.time_normal_10M")
    parser.add_argument("--size", default="1400,1000", help="window size W,H")
    parser.add_argument("--no-vendor", action="store_true",
                        help="keep the CDN addresses of asv's scripts (a machine online)")
    args = parser.parse_args(argv)
    if not os.path.exists(os.path.join(args.html, "index.json")):
        sys.exit(f"no published dashboard in {args.html}: run `asv publish` first")

    frameworks = expected_frameworks(args.html, args.benchmark)
    plax_series = [f for f in frameworks if f.startswith("plax:")]
    server, base = serve(args.html, None if args.no_vendor else vendor_dir())
    failures: list[str] = []
    try:
        graph_url = f"{base}#{args.benchmark}"
        overview = chromium(["--dump-dom", base])
        check(args.benchmark.split(".")[0] in overview,
              f"the overview lists {args.benchmark.split('.')[0]}", failures)
        dom = chromium(["--dump-dom", graph_url])
        check("framework" in dom, "the graph page shows the framework parameter", failures)
        for name in plax_series + ["jax"]:
            check(name in dom, f"the graph page offers the series {name!r}", failures)
        check(bool(plax_series), "the results hold at least one plax series", failures)
        check("jax" in frameworks, "the results hold a JAX series", failures)
        # the plot itself: asv draws it with flot on <canvas> elements
        check("flot-base" in dom or "<canvas" in dom, "the graph is drawn", failures)

        root, ext = os.path.splitext(args.out)
        overview_png = f"{root}_overview{ext or '.png'}"
        for url, png in ((base, overview_png), (graph_url, args.out)):
            chromium([f"--screenshot={os.path.abspath(png)}", f"--window-size={args.size}", url])
            check(os.path.getsize(png) > 10_000, f"screenshot {png}", failures)
    finally:
        server.shutdown()
    print(f"series in the results for {args.benchmark}: {', '.join(frameworks)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
