"""docs/plugin_guide.md shows the tested toy backend package, file for file."""
from __future__ import annotations

import re

from subprocess_util import REPO

TOY = REPO / "tests" / "plugin_packages" / "plax_toybackend"


def _shown_files() -> dict[str, str]:
    """path -> text of each fenced block of the guide whose first line is ``# <path>``."""
    text = (REPO / "docs" / "plugin_guide.md").read_text()
    blocks = re.findall(r"```(?:python|toml)\n# ([\w./]+)\n(.*?)```", text, flags=re.S)
    return {path: body for path, body in blocks}


def test_guide_shows_every_file_of_the_toy_backend_as_it_is():
    shown = _shown_files()
    files = {str(p.relative_to(TOY)) for p in TOY.rglob("*") if p.is_file()
             and p.suffix in (".py", ".toml") and "egg-info" not in str(p) and "build" not in p.parts}
    assert set(shown) >= files - {"plax_toybackend/__init__.py"}, (sorted(shown), sorted(files))
    for path, body in shown.items():
        assert (TOY / path).read_text().rstrip() == body.rstrip(), f"{path} differs from the guide"


def test_toy_backend_uses_only_public_names():
    for path in TOY.rglob("*.py"):
        text = path.read_text()
        private = re.findall(r"(?:from|import)\s+(plax[\w.]*\._\w+|plax_numpy\.\w+)", text)
        assert not [p for p in private if p.split(".")[-1].startswith("_")], (path, private)
        assert not re.search(r"from plax[\w.]* import [^\n]*\b_\w+", text), path
