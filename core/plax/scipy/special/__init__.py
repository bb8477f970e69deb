"""plax.scipy.special: SciPy's special functions on plax.lax (``jax.scipy.special``).

Arguments promote as in JAX (integers to floats, then to a common inexact dtype) and
broadcast together; every function works under ``jit``, ``vmap`` and ``grad`` (with JAX's
exceptions: ``zeta`` is not differentiable, ``betainc`` only in ``x``).
"""
from ._bessel import i0, i0e, i1, i1e, zeta
from ._error import erf, erfc, erfinv, log_ndtr, ndtr, ndtri
from ._gamma import (beta, betainc, betaln, digamma, factorial, gamma, gammainc, gammaincc,
                     gammaln, gammasgn, multigammaln, polygamma)
from ._logexp import (entr, expit, kl_div, log_softmax, logit, logsumexp, rel_entr, softmax,
                      xlog1py, xlogy)

__all__ = ["beta", "betainc", "betaln", "digamma", "entr", "erf", "erfc", "erfinv", "expit",
           "factorial", "gamma", "gammainc", "gammaincc", "gammaln", "gammasgn", "i0", "i0e",
           "i1", "i1e", "kl_div", "log_ndtr", "log_softmax", "logit", "logsumexp",
           "multigammaln", "ndtr", "ndtri", "polygamma", "rel_entr", "softmax", "xlog1py",
           "xlogy", "zeta"]
