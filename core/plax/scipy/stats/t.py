"""Student's t distribution (``scipy.stats.t``)."""
from __future__ import annotations

import math

from plax import lax

from ._family import loc_scale
from ._util import Array, const

__all__ = ['logpdf', 'pdf']


def _logpdf(z: Array, df: Array) -> Array:
    half, one = const(z, 0.5), const(z, 1.0)
    norm = (lax.lgamma(half * (df + one)) - lax.lgamma(half * df)
            - half * lax.log(df * const(z, math.pi)))
    return norm - half * (df + one) * lax.log1p(z * z / df)


logpdf, pdf = loc_scale(
    __name__, __all__, dict(logpdf=_logpdf),
    {
        "logpdf": ("Log density of Student's t with ``df`` degrees of freedom.", "-1.576253"),
        "pdf": ("Density of Student's t with ``df`` degrees of freedom (see :func:`logpdf`).",
                "0.206748"),
    },
    shapes={"df": "degrees of freedom (positive)."}, example=(1.0, 3.0))
