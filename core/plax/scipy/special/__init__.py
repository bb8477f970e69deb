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
from ._bessel_jn import bessel_jn
from ._combinatorics import bernoulli, boxcox, boxcox1p, comb, loggamma, poch
from ._dawsn import dawsn
from ._erfcx import erfcx
from ._expint import exp1, expi, expn
from ._hypergeometric import hyp1f1
from ._spence import spence

__all__ = ["beta", "betainc", "betaln", "digamma", "entr", "erf", "erfc", "erfinv", "expit",
           "factorial", "gamma", "gammainc", "gammaincc", "gammaln", "gammasgn", "i0", "i0e",
           "i1", "i1e", "kl_div", "log_ndtr", "log_softmax", "logit", "logsumexp",
           "multigammaln", "ndtr", "ndtri", "polygamma", "rel_entr", "softmax", "xlog1py",
           "xlogy", "zeta",
           "bernoulli", "bessel_jn", "boxcox", "boxcox1p", "comb", "dawsn", "erfcx", "exp1", "expi",
           "expn", "hyp1f1", "loggamma", "poch", "spence"]
from ._faddeeva import fresnel, wofz

__all__ += ["fresnel", "wofz"]
from ._sici import sici

__all__ += ["sici"]
from ._owens_t import owens_t

__all__ += ["owens_t"]
from ._hyp2f1 import hyp2f1

__all__ += ["hyp2f1"]
from ._sph_harm import sph_harm_y

__all__ += ["sph_harm_y"]
