"""The API reference: which names are public, and a directive that documents all of them.

``public_names(module)`` is the single definition of "public" shared by the site (the
``plax-module`` directive lists and documents exactly these names) and by the test that
requires a docstring on each (tests/test_docs_build.py), so a function cannot be public without
appearing in the reference.

    ```{plax-module} plax.numpy
    ```

expands to an autosummary table of the module's public names followed by one autodoc entry
per name (``autofunction`` / ``autoclass`` / ``autodata``).
"""
from __future__ import annotations

import importlib
import inspect
import types

# The modules of the reference, in the order of its table of contents. plax.scipy.stats's
# distributions are modules (``stats.norm.pdf``), listed each on its own.
STATS_DISTRIBUTIONS = (
    "bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "dirichlet", "expon", "gamma",
    "gennorm", "geom", "gumbel_l", "gumbel_r", "laplace", "logistic", "multinomial",
    "multivariate_normal", "nbinom", "norm", "pareto", "poisson", "t", "truncnorm", "uniform",
    "vonmises", "wrapcauchy",
)
MODULES = (
    "plax", "plax.numpy", "plax.numpy.linalg", "plax.numpy.fft", "plax.lax", "plax.lax.linalg",
    "plax.random", "plax.nn", "plax.nn.initializers", "plax.tree_util", "plax.tree",
    "plax.flatten_util", "plax.profiler",
    "plax.debug", "plax.sharding",
    "plax.scipy.linalg", "plax.scipy.special", "plax.scipy.stats",
    *(f"plax.scipy.stats.{d}" for d in STATS_DISTRIBUTIONS),
    "plax.scipy.optimize", "plax.scipy.signal", "plax.scipy.integrate", "plax.scipy.ndimage",
)


def _is_documentable(obj) -> bool:
    # Functions, classes and other callables (NumPy dtype scalars, ufunc-like objects) are API;
    # modules are listed on their own pages; primitives (``lax.add_p``) and constants are not
    # functions.
    return callable(obj) and not isinstance(obj, types.ModuleType)


def public_names(module_name: str) -> list[str]:
    """The public callables of a module: its ``__all__`` when it has one, else the names its
    ``dir()`` gives (lazily loaded names included) that do not start with an underscore,
    keeping functions and classes only.

    Args:
      module_name: a dotted module name, e.g. ``"plax.numpy"``.

    Returns:
      The names, sorted case-insensitively.
    """
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in dir(module) if not n.startswith("_")]
    out = []
    for name in names:
        obj = getattr(module, name)
        if not _is_documentable(obj):
            continue
        # Without __all__, what a module imported for its own use is not its API. A package
        # (plax, plax.numpy, plax.lax) is a namespace that re-exports its submodules' names
        # and NumPy's dtypes; a plain module (plax.lax.linalg) offers what it defines.
        if not hasattr(module, "__all__"):
            owner = getattr(obj, "__module__", None) or ""
            if hasattr(module, "__path__"):
                if not owner.startswith(("plax", "numpy", "ml_dtypes", "builtins")):
                    continue
            elif owner != module_name:
                continue
        out.append(name)
    return sorted(set(out), key=lambda n: (n.lower(), n))


def _directive_for(obj) -> str:
    if inspect.isclass(obj):
        return "autoclass"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj) or inspect.ismethod(obj):
        return "autofunction"
    return "autofunction" if callable(obj) else "autodata"


def module_rst(module_name: str) -> str:
    """The reStructuredText the ``plax-module`` directive expands to."""
    module = importlib.import_module(module_name)
    names = public_names(module_name)
    lines = [f".. py:module:: {module_name}", "", f".. currentmodule:: {module_name}", ""]
    if names:
        lines += [".. autosummary::", "   :nosignatures:", ""]
        lines += [f"   {n}" for n in names]
        lines.append("")
    for name in names:
        obj = getattr(module, name)
        lines.append(f".. {_directive_for(obj)}:: {name}")
        if inspect.isclass(obj) and getattr(obj, "__module__", "") != module_name:
            # a class re-exported by several modules (plax.Array, plax.numpy.Array) is one
            # object: autodoc registers its defining module's name too, so index it once
            lines.append("   :no-index:")
        lines.append("")
    return "\n".join(lines)


def _foreign_docstring(app, what, name, obj, options, lines):
    # plax re-exports a few NumPy objects as they are (jnp.get_printoptions, the dtype scalar
    # types); their docstrings are NumPy's and cross-reference NumPy's own site. Show the
    # summary line and say where the object comes from instead.
    owner = getattr(obj, "__module__", None) or ""
    if owner.startswith("plax") or not lines:
        return
    if owner.split(".")[0] in {"numpy", "ml_dtypes", "builtins"}:
        summary = lines[0].strip()
        lines[:] = [summary, "", f"(``{owner}.{getattr(obj, '__qualname__', name)}``, "
                    "re-exported by plax unchanged.)", ""]


def setup(app):
    from docutils.statemachine import StringList
    from sphinx.util.docutils import SphinxDirective
    from docutils import nodes

    class PlaxModule(SphinxDirective):
        required_arguments = 1
        has_content = False

        def run(self):
            rst = module_rst(self.arguments[0])
            container = nodes.container()
            self.state.nested_parse(StringList(rst.splitlines(), source=f"<{self.arguments[0]}>"),
                                    self.content_offset, container)
            return container.children

    app.add_directive("plax-module", PlaxModule)
    # after napoleon (priority 500) has turned Google-style sections into reST
    app.connect("autodoc-process-docstring", _foreign_docstring, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
