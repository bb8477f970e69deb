"""A minimal PEP 517 build backend: packs ``plax_toybackend/`` and the metadata from
pyproject.toml into a pure-Python wheel. Only what ``pip install`` needs is implemented."""
from __future__ import annotations

import base64
import hashlib
import os
import zipfile

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = None

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = "plax_toybackend"


def _project() -> dict:
    with open(os.path.join(_HERE, "pyproject.toml"), "rb") as f:
        if tomllib is not None:
            return tomllib.load(f)["project"]
    # Python 3.10 fallback: the fields this file uses, fixed here.
    return {"name": "plax-toybackend", "version": "0.1.0", "dependencies": ["plax"],
            "entry-points": {"plax.backends": {"toy": "plax_toybackend.plugin"}}}


def _metadata(project: dict) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}",
             f"Version: {project['version']}"]
    lines += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    return "\n".join(lines) + "\n"


def _entry_points(project: dict) -> str:
    out = []
    for group, entries in project.get("entry-points", {}).items():
        out.append(f"[{group}]")
        out += [f"{name} = {target}" for name, target in entries.items()]
        out.append("")
    return "\n".join(out)


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = _project()
    dist = project["name"].replace("-", "_")
    info = f"{dist}-{project['version']}.dist-info"
    files: dict[str, bytes] = {}
    src = os.path.join(_HERE, _PACKAGE)
    for fname in sorted(os.listdir(src)):
        if fname.endswith(".py"):
            with open(os.path.join(src, fname), "rb") as f:
                files[f"{_PACKAGE}/{fname}"] = f.read()
    files[f"{info}/METADATA"] = _metadata(project).encode()
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: _wheel_backend\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    files[f"{info}/entry_points.txt"] = _entry_points(project).encode()
    record = [_record_line(n, d) for n, d in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel_name = f"{dist}-{project['version']}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    raise NotImplementedError("this test package is only built as a wheel")
