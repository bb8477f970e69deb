"""``check(pred, msg, *fmt_args)``: the ``check`` primitive a user's assertion binds.

Inside ``checkify`` the equation is functionalised (its rule in the ``checkify`` table turns
it into an update of the error value). Run eagerly it raises :class:`JaxRuntimeError` at
once; staged by ``jit`` (or a loop) outside ``checkify`` it is an error while tracing, as in
JAX: nothing could report it at run time.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Any

import numpy as np

from plax import tree_util
from plax.core import Primitive, Tracer, register_rule
from plax.core.effects import register_effectful

from plax_checkify.errors import FailedCheckError, JaxRuntimeError, Site

check_p = Primitive("check", multiple_results=True)
# no outputs: without this, dead-code elimination would drop every check
register_effectful(check_p)

class _Functionalizing(threading.local):
    """How many checkify traces the running thread is in (a check may be staged only inside
    one; per thread, as the traces: another thread's checkify does not admit this one's)."""

    def __init__(self) -> None:
        self.count = 0


_functionalizing = _Functionalizing()


def _check_abstract_eval(pred, *fmt_avals, msg, fmt_tree, where):
    if not _functionalizing.count:
        raise ValueError(
            "Cannot abstractly evaluate a checkify.check which was not functionalized. This "
            "probably means you tried to stage (jit/scan/pmap/...) a `check` without "
            "functionalizing it through `checkify.checkify`.")
    if pred.dtype != np.dtype(bool):
        raise TypeError(f"check takes a boolean predicate, got {pred.str_short()}")
    return []


check_p.def_abstract_eval(_check_abstract_eval)


def _check_impl(pred, *fmt_args, msg, fmt_tree, where):
    if not bool(np.all(np.asarray(pred))):
        site = Site(FailedCheckError, (msg, fmt_tree), (), where)
        err = JaxRuntimeError(site.message(list(fmt_args)))
        if where and hasattr(err, "add_note"):
            err.add_note(f"The check is at {where}.")
        raise err
    return []


register_rule("impl", check_p)(_check_impl)


@register_rule("jvp", check_p)
def _check_jvp(primals, tangents, **params):
    # a check reads primal values only and has no outputs, so it has no tangent
    check_p.bind(*primals, **params)
    return [], []


@register_rule("batch", check_p)
def _check_batch(vals, dims, **params):
    # the check fails if it fails for any member; the recorded values keep their batch axis
    check_p.bind(*vals, **params)
    return [], []


@register_rule("checkify", check_p)
def _check_checkify(ctx, pred, *fmt_args, msg, fmt_tree, where):
    from plax import numpy as jnp
    ctx.report(FailedCheckError, jnp.logical_not(jnp.all(pred)), fmt_args,
               info=(msg, fmt_tree), where=where)
    return []


def _is_array(x: Any) -> bool:
    from plax.array import Array
    return isinstance(x, (Array, Tracer, np.ndarray, np.generic))


def check(pred: Any, msg: str, *fmt_args: Any, **fmt_kwargs: Any) -> None:
    """Checks that ``pred`` is true; if not, ``checkify`` reports ``msg`` formatted with
    ``fmt_args`` and ``fmt_kwargs`` (``str.format``, with the values at run time).

    Outside ``checkify``, run eagerly, a false ``pred`` raises :class:`JaxRuntimeError` at
    once; under ``jit`` without ``checkify`` it is a ``ValueError`` while tracing.

    Args:
      pred: a boolean scalar (an array predicate fails if any element is false).
      msg: the message, a ``str.format`` template.
      *fmt_args, **fmt_kwargs: pytrees of arrays to format into ``msg``.

    Raises:
      TypeError: a formatting argument is not a pytree of arrays.

    Example:
      >>> from plax.experimental import checkify
      >>> def f(x):
      ...     checkify.check(x > 0, "x must be positive, got {}", x)
      ...     return jnp.log(x)
      >>> err, out = checkify.checkify(f)(jnp.float32(-1.))
      >>> err.get()
      'x must be positive, got -1.0 (`check` failed)'
    """
    from plax import numpy as jnp
    if not isinstance(msg, str):
        raise TypeError(f"checkify.check takes a string message, got {type(msg).__name__}.")
    leaves, tree = tree_util.tree_flatten((fmt_args, fmt_kwargs))
    for leaf in leaves:
        if not _is_array(leaf):
            raise TypeError("Formatting arguments to checkify.check need to be PyTrees of "
                            f"arrays, but got {leaf!r} of type {type(leaf)}.")
    check_p.bind(jnp.asarray(pred, dtype=bool), *leaves, msg=msg, fmt_tree=tree,
                 where=_user_frame())


_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _user_frame() -> str:
    """``file:line (function)`` of the first caller outside this package and plax."""
    import plax
    plax_dir = os.path.dirname(os.path.abspath(plax.__file__)) + os.sep
    frame = sys._getframe(1)
    while frame is not None:
        name = os.path.abspath(frame.f_code.co_filename)
        if not name.startswith((_HERE, plax_dir)):
            return f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return ""


