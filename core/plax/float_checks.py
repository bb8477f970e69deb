"""``jax_debug_nans`` / ``jax_debug_infs``: a NaN or infinity produced by an operation raises
``FloatingPointError`` naming it, as in JAX.

Eager operations are checked by a wrapper that the config listener below puts in front of
eager dispatch only while an option is on, so the unchecked path costs nothing. A ``jit``
call checks its outputs; when one is invalid it prints JAX's notice and runs the function
again op by op (as if ``jit`` were removed), so the error names the primitive that produced
the value.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plax.config import config
from plax.core import trace

_checked_eval: list[Callable | None] = [None]  # the wrapper, while installed
_unchecked_eval: list[Callable | None] = [None]  # what it wraps


def active() -> bool:
    """Whether either option is on."""
    return bool(config._values["debug_nans"] or config._values["debug_infs"])


def invalid_kind(values: Any) -> str | None:
    """``"nan"`` or ``"inf"`` if an inexact array among ``values`` holds one that the options
    ask to catch, else None."""
    nans, infs = config._values["debug_nans"], config._values["debug_infs"]
    if not (nans or infs):  # installed for another thread's context (see _on_config_change)
        return None
    for v in values if isinstance(values, (list, tuple)) else (values,):
        aval = getattr(v, "aval", None)
        if aval is None or aval.dtype.kind not in "fc" and aval.dtype.name != "bfloat16":
            continue
        host = np.asarray(v)
        if host.dtype.name == "bfloat16":
            host = host.astype(np.float32)
        if nans and np.isnan(host).any():
            return "nan"
        if infs and np.isinf(host).any():
            return "inf"
    return None


def _checking_eval(prim, args, params):
    out = _unchecked_eval[0](prim, args, params)
    kind = invalid_kind(out)
    if kind is not None:
        # JAX runs an eager primitive as a compiled call of its own, so its check prints the
        # jit notice before the de-optimized run raises: once for an eager operation, once
        # more for a jit call whose op-by-op rerun reaches it (JAX's debugging/flags page)
        _print_notice()
        raise FloatingPointError(f"invalid value ({kind}) encountered in {prim.name}")
    return out


def _print_notice() -> None:
    print("Invalid nan value encountered in the output of a jax.jit function. Calling the "
          "de-optimized version.")


def check_jit_outputs(outs, name: str, rerun: Callable[[], Any]) -> None:
    """Raises ``FloatingPointError`` if the outputs of ``jit(name)`` hold an invalid value,
    after running ``rerun`` (the function without ``jit``) to name the primitive, as JAX
    does."""
    kind = invalid_kind(outs)
    if kind is None:
        return
    _print_notice()
    rerun()  # raises FloatingPointError from the eager check of the first bad operation
    raise FloatingPointError(
        f"invalid value ({kind}) encountered in jit({name}). Because jax_debug_nans and/or "
        "jax_debug_infs is set, the de-optimized function (i.e., the function as if the `jit` "
        "decorator were removed) was called in an attempt to get a more precise error "
        "message. However, the de-optimized function did not produce invalid values during "
        "its execution. This can come from nan/inf literals as inputs or outputs.")


def _on_config_change(name: str, value: Any) -> None:
    # while a thread has a context manager active, another thread may have the checks on:
    # keep the check installed (invalid_kind reads each thread's own options)
    on = active() or config.has_thread_contexts()
    if on and _checked_eval[0] is None:
        _unchecked_eval[0] = trace.shared.eval_primitive
        _checked_eval[0] = trace.shared.eval_primitive = _checking_eval
    elif not on and _checked_eval[0] is not None:
        if trace.shared.eval_primitive is _checking_eval:
            trace.shared.eval_primitive = _unchecked_eval[0]
        _checked_eval[0] = None


config.on_change(_on_config_change)
