"""plax.scipy.optimize: unconstrained minimization (``jax.scipy.optimize``).

``minimize(fun, x0, method="BFGS")`` runs BFGS with a strong-Wolfe line search inside
``lax.while_loop``, so it works under ``jit`` and ``vmap`` (over ``x0`` or ``args``).
"""
from ._minimize import OptimizeResults, minimize

__all__ = ["OptimizeResults", "minimize"]
