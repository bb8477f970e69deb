"""NumPy implementation of dot_general (a batched matmul after moving axes into place)."""
from __future__ import annotations

import math

import numpy as np

from plax import lax
from plax.lax.dot import dot_result_dtype
from plax_numpy.registry import impl


@impl(lax.dot_general_p, fresh=True)  # (a new product on every path)
def _dot_general(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    ld, rd = lhs.dtype, rhs.dtype
    if preferred_element_type is None and (rd is ld or rd == ld):  # the usual product
        out_dtype = ld
        plain = True
    else:  # operands of two dtypes (int8 x float32) are both converted to the result's
        out_dtype = dot_result_dtype(ld, rd, preferred_element_type)
        plain = ld == out_dtype and rd == out_dtype
    if (plain and not lb and lhs.ndim <= 2 and rhs.ndim <= 2 and lc == (lhs.ndim - 1,)
            and rc == (0,) and ld.kind in "fciu" and ld.itemsize > 2):
        # The common matrix/vector product, already in NumPy's layout: one call.
        with np.errstate(all="ignore"):
            return np.asarray(np.dot(lhs, rhs))
    compute = out_dtype
    if (ld.kind == "c" or rd.kind == "c") and np.dtype(out_dtype).kind != "c":
        # complex operands, a real preferred_element_type: the complex product's real part
        # (converting the operands first would drop the imaginary parts' products)
        compute = dot_result_dtype(ld, rd)
    elif np.dtype(compute).itemsize == 2 and np.dtype(compute).kind in "fV":
        compute = np.float32  # NumPy has no fast float16/bfloat16 matmul
    lf = [i for i in range(lhs.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(rhs.ndim) if i not in rc and i not in rb]
    a = np.transpose(lhs, list(lb) + lf + list(lc)).astype(compute, copy=False)
    b = np.transpose(rhs, list(rb) + list(rc) + rf).astype(compute, copy=False)
    bshape = [lhs.shape[d] for d in lb]
    m = math.prod(lhs.shape[d] for d in lf)
    k = math.prod(lhs.shape[d] for d in lc)
    n = math.prod(rhs.shape[d] for d in rf)
    nb = math.prod(bshape)
    a3 = a.reshape(nb, m, k)
    b3 = b.reshape(nb, k, n)
    if a3.dtype == np.bool_:
        out = np.einsum("bmk,bkn->bmn", a3, b3)
    else:
        with np.errstate(all="ignore"):
            out = np.matmul(a3, b3)
    shape = bshape + [lhs.shape[d] for d in lf] + [rhs.shape[d] for d in rf]
    if out.dtype.kind == "c" and np.dtype(out_dtype).kind != "c":
        out = out.real
    return out.reshape(shape).astype(out_dtype, copy=False)

