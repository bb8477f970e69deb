"""``jax.fwd_and_bwd``: a function's forward and backward passes as two functions, so that a
training loop can run (and ``jit``) each once and reuse the backward function."""
from __future__ import annotations

from typing import Callable, Sequence


def fwd_and_bwd(fun: Callable, argnums: int | Sequence[int], has_aux: bool = False,
                jitted: bool = True) -> tuple[Callable, Callable]:
    """``fwd(*args) -> (y, residuals)`` (``(y, residuals, aux)`` with ``has_aux``), as
    ``vjp(fun, *args)`` restricted to ``argnums``, and ``bwd(residuals, cotangent)``, the
    cotangents of those arguments.

    Args:
      fun: the function.
      argnums: the positional argument (an int: ``bwd`` returns its cotangent) or arguments
        (a sequence: ``bwd`` returns a tuple) to differentiate.
      has_aux: ``fun`` returns ``(output, aux)``; ``fwd`` returns ``aux`` third.
      jitted: return the ``jit`` of both functions (each compiles once per signature).

    Returns:
      ``(fwd, bwd)``.

    Example:
      >>> fwd, bwd = jax.fwd_and_bwd(lambda x, w: x @ w, argnums=(0, 1))
      >>> y, res = fwd(jnp.ones((2, 2)), jnp.ones((2, 2)))
      >>> bwd(res, jnp.ones((2, 2)))[1]
      Array([[2., 2.],
             [2., 2.]], dtype=float32)
    """
    from plax.transforms.autodiff import vjp
    from plax.transforms.jit import jit
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)

    def fwd(*args):
        for i in nums:
            if not -len(args) <= i < len(args):
                raise ValueError(f"argnums {argnums!r} out of range for {len(args)} "
                                 "positional arguments")

        def restricted(*diff):
            full = list(args)
            for i, d in zip(nums, diff):
                full[i] = d
            return fun(*full)
        return vjp(restricted, *[args[i] for i in nums], has_aux=has_aux)

    def bwd(residuals, cotangent):
        cts = residuals(cotangent)
        return cts[0] if single else cts

    if jitted:
        return jit(fwd), jit(bwd)
    return fwd, bwd
