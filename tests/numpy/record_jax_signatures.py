"""Records the parameters of JAX's public functions into ``jax_signatures.json``.

Run with real JAX installed (``python tests/numpy/record_jax_signatures.py``); the committed
JSON lets ``test_signature_coverage.py`` compare plax's signatures with JAX's on machines
without JAX (CI has none).

Each function is recorded as its parameter list written as Python writes it, without
defaults or annotations (``"a, /, b, *args, c, **kwargs"``): positional-only names before
``/``, keyword-only ones after ``*`` or ``*args``. Defaults are not recorded: behaviour tests
check them, not the record. ``signature_params`` parses a record back into (name, kind) pairs.
"""
from __future__ import annotations

import importlib
import inspect
import json
import pathlib

# plax module -> the JAX module whose public functions' parameters it must accept
NAMESPACES = {
    "": "jax",
    "numpy": "jax.numpy",
    "numpy.linalg": "jax.numpy.linalg",
    "numpy.fft": "jax.numpy.fft",
    "lax": "jax.lax",
    "random": "jax.random",
    "nn": "jax.nn",
    "tree_util": "jax.tree_util",
    "tree": "jax.tree",
    "nn.initializers": "jax.nn.initializers",
    "image": "jax.image",
    "dtypes": "jax.dtypes",
    "debug": "jax.debug",
    "sharding": "jax.sharding",
    "ad_checkpoint": "jax.ad_checkpoint",
    "custom_derivatives": "jax.custom_derivatives",
}
# every jax.scipy module with functions (each stats distribution is its own module)
SCIPY = ("cluster.vq fft integrate interpolate linalg ndimage optimize signal sparse.linalg "
         "spatial.transform special stats stats.bernoulli stats.beta stats.betabinom stats.binom "
         "stats.cauchy stats.chi2 stats.dirichlet stats.expon stats.gamma stats.gennorm "
         "stats.geom stats.gumbel_l stats.gumbel_r stats.laplace stats.logistic "
         "stats.multinomial stats.multivariate_normal stats.nbinom stats.norm stats.pareto "
         "stats.poisson stats.t stats.truncnorm stats.uniform stats.vonmises "
         "stats.wrapcauchy").split()
NAMESPACES.update({f"scipy.{m}": f"jax.scipy.{m}" for m in SCIPY})


def parameters(fn) -> str | None:
    """``fn``'s parameter list without defaults (``"x, /, *, out"``), or None if it has none."""
    if isinstance(fn, type):
        return None          # classes (dtypes, Array, PRNGKeyArray...): not function APIs
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None          # NumPy ufunc objects and C builtins
    bare = sig.replace(parameters=[p.replace(default=inspect.Parameter.empty,
                                             annotation=inspect.Parameter.empty)
                                   for p in sig.parameters.values()],
                       return_annotation=inspect.Signature.empty)
    return str(bare)[1:-1]


def signature_params(text: str) -> list[tuple[str, str]]:
    """Parses a recorded parameter list into ``(name, kind)`` pairs; kind is one of ``pos``
    (positional-only), ``any`` (positional-or-keyword), ``var`` (``*args``), ``kw``
    (keyword-only), ``varkw`` (``**kwargs``)."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    positional_only = "/" in items
    out, kind = [], "pos" if positional_only else "any"
    for item in items:
        if item == "/":
            kind = "any"
        elif item == "*":
            kind = "kw"
        elif item.startswith("**"):
            out.append((item[2:], "varkw"))
        elif item.startswith("*"):
            out.append((item[1:], "var"))
            kind = "kw"
        else:
            out.append((item, kind))
    return out


def record() -> dict:
    """``{namespace: {function name: parameters}}`` of JAX's public functions, plus its version."""
    import jax
    out = {"jax_version": jax.__version__, "namespaces": {}}
    for key, modname in NAMESPACES.items():
        mod = importlib.import_module(modname)
        table = {}
        for name in sorted(dir(mod)):
            if name.startswith("_"):
                continue
            obj = getattr(mod, name)
            if not callable(obj) or inspect.ismodule(obj):
                continue
            params = parameters(obj)
            if params is not None:
                table[name] = params
        out["namespaces"][key] = table
    return out


def _dumps(rec: dict) -> str:
    """The record as JSON with one function per line, so diffs show which signature moved."""
    lines = ["{", f' "jax_version": {json.dumps(rec["jax_version"])},', ' "namespaces": {']
    spaces = list(rec["namespaces"].items())
    for i, (key, table) in enumerate(spaces):
        lines.append(f"  {json.dumps(key)}: {{")
        rows = [f"   {json.dumps(n)}: {json.dumps(p)}" for n, p in table.items()]
        lines.append(",\n".join(rows))
        lines.append("  }" + ("," if i < len(spaces) - 1 else ""))
    lines += [" }", "}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    path = pathlib.Path(__file__).with_name("jax_signatures.json")
    path.write_text(_dumps(record()))
    print(f"wrote {path}")
