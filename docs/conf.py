"""Sphinx configuration of plax's documentation site (MyST markdown, notebooks executed by myst-nb).

Build it with ``python -m sphinx -W -b html docs docs/_build/html`` (``pip install -e ".[docs]"``);
tests/test_docs_build.py runs the same build.
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "_ext"))

import plax  # noqa: E402

project = "plax"
author = "the plax authors"
copyright = "the plax authors"
release = version = plax.__version__

extensions = [
    "myst_nb",                    # MyST markdown + notebooks written as markdown, executed at build
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",        # plax's docstrings are Google style (Args:, Returns:)
    "plax_api",                   # docs/_ext/plax_api.py: the plax-module directive
]

# templates/ holds the plugin template package (its README is not a page of the site).
exclude_patterns = ["_build", "templates", "**/.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]
source_suffix = {".md": "myst-nb", ".rst": "restructuredtext"}
root_doc = "index"

# --- MyST
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3          # `[text](page.md#a-heading)` links resolve

# --- notebooks: only pages with a `file_format: mystnb` header execute. "cache" re-runs a page
# only when its code changed (jupyter-cache in _build/.jupyter_cache); a fresh checkout executes
# each once. A cell that raises fails the build, as a warning would.
nb_execution_mode = os.environ.get("PLAX_DOCS_EXECUTE", "cache")
nb_execution_timeout = 120
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

# --- API reference
autosummary_generate = False      # the plax-module directive writes the entries on the page
autodoc_default_options = {"undoc-members": False}
autodoc_typehints = "none"        # signatures as written; the docstrings describe the types
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
add_module_names = False

# --- HTML
html_theme = "alabaster"
html_title = f"plax {release}"
html_theme_options = {"description": "JAX's programming model, in Python, with plugins",
                      "fixed_sidebar": True}


def _drop_missing_pages(app, docname, source):
    # docs/multi_device.md is written by another plugin's author; list it once it exists
    # rather than warn (a toctree entry for a missing page is a warning, so an error under -W).
    if docname != "index":
        return
    lines = source[0].splitlines(keepends=True)
    keep = [line for line in lines
            if not (line.strip() in {"multi_device"}
                    and not os.path.exists(os.path.join(HERE, line.strip() + ".md")))]
    source[0] = "".join(keep)


def setup(app):
    app.connect("source-read", _drop_missing_pages)
