"""The constants of the float32 ``exp``, ``tanh`` and ``logistic`` scalar forms, in a module
that imports no numba: numba's forms (:mod:`plax_numba.scalar`) and the LLVM first tier's
(:mod:`plax_numba.llvm_tier`) read the same numbers, so both tiers give the same bits.
How each was chosen is told beside its use in :mod:`plax_numba.scalar`.
"""
from __future__ import annotations

import numpy as np

# exp_f32
LOG2E = np.float32(1.44269504088896341)
LN2_HI = np.float32(0.693359375)        # Cody-Waite split of ln 2 (Cephes expf)
LN2_LO = np.float32(-2.12194440e-4)
Q0, Q1, Q2 = np.float32(0.49999994), np.float32(0.16666521), np.float32(0.04166839)
Q3, Q4 = np.float32(0.008368745), np.float32(0.0013814539)
LO, HI, ONE = np.float32(-104.0), np.float32(89.0), np.float32(1.0)
ROUNDER = np.float32(12582912.0)        # 1.5 * 2**23: adding it rounds to an integer
ROUNDER_BITS = np.int32(0x4B400000)     # its bit pattern; the integer sits in the low bits

# tanh_f32: x N(z) / D(z), z = x*x, on |x| <= TBIG
N1, N2 = np.float32(0.1337750107049942), np.float32(0.0034912724513560534)
N3, N4 = np.float32(2.0533043425530195e-05), np.float32(1.3240137874959146e-08)
D1, D2 = np.float32(0.46710821986198425), np.float32(0.025860896334052086)
D3, D4 = np.float32(0.0003278358490206301), np.float32(7.7316076385614e-07)
TBIG = np.float32(9.1)
