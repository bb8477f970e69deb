"""Special functions as elementwise primitives: erf, erfc, erf_inv, lgamma, digamma, polygamma."""
from __future__ import annotations

import math

import plax.lax.binary as B
import plax.lax.unary as U
from plax.core.primitive import Primitive
from plax.core.shaped_array import ShapedArray
from plax.lax.base import FLOAT, asarray, check_dtype, same_dtypes, broadcasting_shape
from plax.lowering.fusion import ELEMENTWISE, register_fusible
from plax.transforms.batching import defbroadcasting
from plax.transforms.jvp import defjvp, defjvp2

erf_p = U._unop("erf", (FLOAT,))
erfc_p = U._unop("erfc", (FLOAT,))
erf_inv_p = U._unop("erf_inv", (FLOAT,))
lgamma_p = U._unop("lgamma", (FLOAT,))
digamma_p = U._unop("digamma", (FLOAT,))

erf, erfc, erf_inv, lgamma, digamma = map(U._bind1, (erf_p, erfc_p, erf_inv_p, lgamma_p, digamma_p))

_two_over_sqrt_pi = 2.0 / math.sqrt(math.pi)


def _exp_neg_sq(x):
    return U.exp(U.neg(B.mul(x, x)))


defjvp(erf_p, lambda t, x: B.mul(t, B.mul(B.full_like_scalar(_two_over_sqrt_pi, x), _exp_neg_sq(x))))
defjvp(erfc_p, lambda t, x: B.mul(t, B.mul(B.full_like_scalar(-_two_over_sqrt_pi, x), _exp_neg_sq(x))))
defjvp2(erf_inv_p, lambda t, ans, x: B.mul(
    t, B.mul(B.full_like_scalar(math.sqrt(math.pi) / 2, x), U.exp(B.mul(ans, ans)))))
defjvp(lgamma_p, lambda t, x: B.mul(t, digamma(x)))
defjvp(digamma_p, lambda t, x: B.mul(t, polygamma(B.full_like_scalar(1, x), x)))

polygamma_p = Primitive("polygamma")


@polygamma_p.def_abstract_eval
def _polygamma_abstract_eval(m, x):
    check_dtype("polygamma", x, (FLOAT,))
    dt = same_dtypes("polygamma", [m, x])
    return ShapedArray(broadcasting_shape("polygamma", [m, x]), dt, m.weak_type and x.weak_type)


def polygamma(m, x):
    """The m-th derivative of digamma at x (``m`` a non-negative integer value of x's dtype)."""
    return polygamma_p.bind(asarray(m), asarray(x))


defbroadcasting(polygamma_p)
register_fusible(polygamma_p, ELEMENTWISE)  # the Numba backend has scalar forms
defjvp(polygamma_p, None,
       lambda t, m, x: B.mul(t, polygamma(B.add(m, B.full_like_scalar(1, m)), x)))
