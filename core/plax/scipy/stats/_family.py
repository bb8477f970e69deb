"""A distribution's public functions, built from its standard form.

A location-scale distribution (``norm``, ``gamma``, ...) is written once, for ``loc=0`` and
``scale=1``, as functions of the standardized ``z = (x - loc) / scale`` and of its shape
parameters; :func:`loc_scale` builds ``logpdf(x, *shapes, loc=0, scale=1)``, ``cdf``,
``ppf``, ... with JAX's signatures, promotion and docstrings. A discrete distribution shifted
by ``loc`` (``poisson``, ``geom``, ...) is written for ``loc=0``; :func:`shifted` builds
``logpmf(k, *shapes, loc=0)`` and the rest.

Functions the standard form does not give are derived from those it does, as SciPy relates
them: ``pdf = exp(logpdf)``, ``logcdf = log(cdf)``, ``cdf = exp(logcdf)``, or from the log of
the other tail ``cdf = -expm1(logsf)`` and ``logcdf = log(1 - exp(logsf))``.
"""
from __future__ import annotations

import inspect
from typing import Callable, Mapping, Sequence

from plax import lax
from plax import numpy as jnp

from ._util import NAN, NEG_INF, Array, const, inexact, log_diff_exp

__all__ = ["loc_scale", "shifted"]


def _log1mexp(v: Array) -> Array:
    """``log(1 - exp(v))`` for ``v <= 0``."""
    return log_diff_exp(jnp.zeros_like(v), v)


def _neg_expm1(v: Array) -> Array:
    return -lax.expm1(v)


# name -> (source, transform) in order of preference; a source must come from the standard form
_DERIVED = {
    "pdf": [("logpdf", lax.exp)],
    "pmf": [("logpmf", lax.exp)],
    "cdf": [("logcdf", lax.exp), ("logsf", _neg_expm1)],
    "sf": [("logsf", lax.exp), ("logcdf", _neg_expm1)],
    "logcdf": [("cdf", lax.log), ("logsf", _log1mexp)],
    "logsf": [("sf", lax.log), ("logcdf", _log1mexp)],
}

_QUANTILES = ("ppf", "isf")

_RETURNS = {
    "logpdf": "The log density.", "pdf": "The density.",
    "logpmf": "The log probability mass.", "pmf": "The probability mass.",
    "cdf": "``P(X <= x)``.", "logcdf": "``log P(X <= x)``.",
    "sf": "``P(X > x)``.", "logsf": "``log P(X > x)``.",
    "ppf": "``x`` with ``cdf(x) == q``; NaN for ``q`` outside ``[0, 1]``.",
    "isf": "``x`` with ``sf(x) == q``; NaN for ``q`` outside ``[0, 1]``.",
}


def _docstring(dist: str, name: str, summary: str, args: Sequence[tuple[str, str]],
               call: str, value: str) -> str:
    arg_lines = "\n".join(f"  {arg}: {text}" for arg, text in args)
    return (f"{summary}\n\nJAX implementation of :obj:`scipy.stats.{dist}` ``{name}``.\n\n"
            f"Args:\n{arg_lines}\n\nReturns:\n  {_RETURNS[name]}\n\n"
            f"Example:\n  >>> from plax.scipy.stats import {dist}\n"
            f"  >>> round(float({dist}.{name}({call})), 6)\n  {value}\n")


def _public(module: str, name: str, params: Sequence[tuple[str, object]], body: Callable,
            doc: str) -> Callable:
    """A function ``module.name`` with signature ``params`` (name, default or ``empty``)."""
    sig = inspect.Signature([
        inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d)
        for p, d in params])

    def fn(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return body(*bound.args)

    fn.__signature__ = sig
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = module
    fn.__doc__ = doc
    return fn


def _build(module: str, names: Sequence[str], kernels: Mapping[str, Callable],
           docs: Mapping[str, tuple[str, str]], params: Callable, args_doc: Callable,
           example: Callable) -> list:
    """The functions ``names``: ``kernels`` as they are, the others derived from them."""
    dist = module.rsplit(".", 1)[-1]
    built = {}
    for name in names:
        if name in kernels:
            body = kernels[name]
        else:
            source, transform = next((s, t) for s, t in _DERIVED[name] if s in kernels)
            body = (lambda source, transform: lambda *a: transform(built[source](*a)))(
                source, transform)
        summary, value = docs[name]
        built[name] = _public(module, name, params(name), body,
                              _docstring(dist, name, summary, args_doc(name), example(name), value))
    return [built[name] for name in names]


def loc_scale(module: str, names: Sequence[str], standard: Mapping[str, Callable],
              docs: Mapping[str, tuple[str, str]], *, shapes: Mapping[str, str] = {},
              support: tuple | Callable | None = None, positive_scale: bool = False,
              nan_outside_unit: bool = True,
              example: Sequence[float] = (1.0,), example_q: Sequence[float] = (0.75,),
              raw: Mapping[str, Callable] = {}, quantile_arg: str = "q") -> list:
    """The public functions ``names`` of a location-scale distribution.

    Args:
      module: the distribution module's ``__name__``; its last part names the distribution.
      names: the functions to build, from ``logpdf pdf cdf logcdf sf logsf ppf isf``.
      standard: functions of ``(z, *shapes)`` for ``loc=0, scale=1`` (``ppf`` and ``isf``
        of ``(q, *shapes)``), on arguments already promoted and broadcast. ``logpdf`` is
        evaluated where ``z`` lies in ``support`` (its value outside is discarded).
      docs: per name, the summary line of its docstring and the printed value of its example.
      shapes: the shape parameters in order, each with its description.
      support: ``(lo, hi)`` of ``z``, or a function of the shapes giving it; ``logpdf`` is
        ``-inf`` outside (``None``: the whole line).
      positive_scale: NaN wherever ``scale <= 0`` (as JAX for the Gumbel distributions).
      nan_outside_unit: ``ppf`` and ``isf`` are NaN for ``q`` outside ``[0, 1]``; ``False``
        leaves that to the standard quantile function.
      example: the arguments ``x, *shapes`` of the docstring examples.
      example_q: the arguments ``q, *shapes`` of the examples of ``ppf`` and ``isf``.
      raw: functions of the promoted ``(x, *shapes, loc, scale)`` used as they are.
      quantile_arg: the name of ``ppf``'s and ``isf``'s first parameter, JAX's for that
        distribution (so keyword calls work).

    Returns:
      The functions, in the order of ``names``.
    """
    dist = module.rsplit(".", 1)[-1]

    def promoted(name: str, kernel: Callable) -> Callable:
        def body(*args):
            return kernel(*inexact(f"{dist}.{name}", *args))
        return body

    def valid(scale: Array, out: Array) -> Array:
        return jnp.where(scale > 0, out, const(out, NAN)) if positive_scale else out

    def standardized(kernel: Callable) -> Callable:
        def body(x, *rest):
            *shape_args, loc, scale = rest
            return valid(scale, kernel((x - loc) / scale, *shape_args))
        return body

    def density(x, *rest):
        *shape_args, loc, scale = rest
        z = (x - loc) / scale
        out = standard["logpdf"](z, *shape_args) - lax.log(scale)
        if support is not None:
            lo, hi = support(*shape_args) if callable(support) else support
            out = jnp.where((z < lo) | (z > hi), const(out, NEG_INF), out)
        return valid(scale, out)

    def quantile(kernel: Callable) -> Callable:
        def body(q, *rest):
            *shape_args, loc, scale = rest
            out = loc + scale * kernel(q, *shape_args)
            if nan_outside_unit:
                out = jnp.where((q >= 0) & (q <= 1), out, const(out, NAN))
            return valid(scale, out)
        return body

    kernels = {}
    for name, kernel in standard.items():
        if name == "logpdf":
            kernels[name] = promoted(name, density)
        elif name in _QUANTILES:
            kernels[name] = promoted(name, quantile(kernel))
        else:
            kernels[name] = promoted(name, standardized(kernel))
    kernels.update({name: promoted(name, kernel) for name, kernel in raw.items()})

    def params(name):
        first = quantile_arg if name in _QUANTILES else "x"
        return ([(first, inspect.Parameter.empty)]
                + [(s, inspect.Parameter.empty) for s in shapes] + [("loc", 0), ("scale", 1)])

    def args_doc(name):
        first = ((quantile_arg, "probabilities in ``[0, 1]``; integers promote to floats.")
                 if name in _QUANTILES else ("x", "points; integers promote to floats."))
        return [first, *shapes.items(), ("loc", "location."),
                ("scale", "scale (positive" + ("; NaN otherwise)." if positive_scale else ")."))]

    def example_call(name):
        return ", ".join(map(repr, example_q if name in _QUANTILES else example))

    return _build(module, names, kernels, docs, params, args_doc, example_call)


def shifted(module: str, names: Sequence[str], standard: Mapping[str, Callable],
            docs: Mapping[str, tuple[str, str]], *, shapes: Mapping[str, str],
            example: Sequence[float]) -> list:
    """The public functions ``names`` of a discrete distribution shifted by ``loc``.

    Args:
      module: the distribution module's ``__name__``; its last part names the distribution.
      names: the functions to build, from ``logpmf pmf cdf``.
      standard: functions of ``(k - loc, *shapes)`` for ``loc=0``, on arguments already
        promoted and broadcast.
      docs: per name, the summary line of its docstring and the printed value of its example.
      shapes: the shape parameters in order, each with its description.
      example: the arguments ``k, *shapes`` of the docstring examples.

    Returns:
      The functions, in the order of ``names``.
    """
    dist = module.rsplit(".", 1)[-1]

    def kernel(name: str, std: Callable) -> Callable:
        def body(k, *rest):
            k, *rest = inexact(f"{dist}.{name}", k, *rest)
            *shape_args, loc = rest
            return std(k - loc, *shape_args)
        return body

    params = lambda name: ([("k", inspect.Parameter.empty)]
                           + [(s, inspect.Parameter.empty) for s in shapes] + [("loc", 0)])
    args_doc = lambda name: [("k", "outcomes; integers promote to floats."), *shapes.items(),
                             ("loc", "shift.")]
    kernels = {name: kernel(name, std) for name, std in standard.items()}
    return _build(module, names, kernels, docs, params, args_doc,
                  lambda name: ", ".join(map(repr, example)))
