"""The shape family's GPU kernels (``plax_cupy.kernels_shape``) on the simulated GPU against
the NumPy backend's, on every dtype (run by test_kernels_a_simulated.py)."""
from __future__ import annotations

import numpy as np
import pytest

from plax import lax
from plax.transforms.checkpoint import name_p
from test_kernels_a_simulated import check, dtypes_all, on_a_gpu, sample

pytestmark = on_a_gpu

DTYPES = dtypes_all()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_moves_of_every_dtype(dtype):
    x = sample((2, 3, 4), dtype)
    check(lax.broadcast_in_dim_p, x[:, :1], shape=(5, 2, 1, 4), broadcast_dimensions=(1, 2, 3))
    check(lax.reshape_p, x, new_sizes=(6, 4))
    check(lax.reshape_p, x, new_sizes=(4, 6), dimensions=(2, 0, 1))
    check(lax.transpose_p, x, permutation=(2, 0, 1))
    check(lax.squeeze_p, x[:, :1], dimensions=(1,))
    check(lax.expand_dims_p, x, dimensions=(0, 3))
    check(lax.rev_p, x, dimensions=(0, 2))
    check(lax.rev_p, x, dimensions=())
    check(lax.concatenate_p, x, x[:, :2], sample((2, 1, 4), dtype, 1), dimension=1)
    check(lax.stack_p, x, sample((2, 3, 4), dtype, 1), axis=1)
    check(lax.unstack_p, x, axis=2)
    check(lax.split_p, x, sizes=(1, 0, 3), axis=2)
    check(lax.stop_gradient_p, x)
    check(name_p, x, name="tagged")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_pad_low_high_interior_and_negative(dtype):
    x = sample((3, 4), dtype)
    value = sample((), dtype, 5)
    check(lax.pad_p, x, value, padding_config=((1, 2, 0), (0, 0, 0)))
    check(lax.pad_p, x, value, padding_config=((2, 1, 1), (0, 3, 2)))
    check(lax.pad_p, x, value, padding_config=((-1, 2, 1), (1, -2, 0)))
    check(lax.pad_p, x, value, padding_config=((-2, -3, 1), (0, 0, 0)))   # crops to nothing
    check(lax.pad_p, x[:0], value, padding_config=((1, 1, 3), (0, 0, 0)))  # empty operand


@pytest.mark.parametrize("dtype", [np.int8, np.uint32, np.int64, np.float16, "bfloat16",
                                   np.float32, np.float64, np.complex64],
                         ids=lambda d: np.dtype(d).name)
def test_iota(dtype):
    import ml_dtypes  # noqa: F401 (the name "bfloat16")
    check(lax.iota_p, dtype=np.dtype(dtype), shape=(3, 5), dimension=1)
    check(lax.iota_p, dtype=np.dtype(dtype), shape=(7,), dimension=0)
    check(lax.iota_p, dtype=np.dtype(dtype), shape=(0, 4), dimension=1)


def test_bfloat16_bits_move_unchanged():
    # a kernel marked bf16 == "bits" takes a Bf16Buffer as it is: a signalling NaN's payload
    # survives (widening to float32 and rounding back would set its quiet bit)
    import cupy
    from plax_cupy import kernels
    from plax_cupy.backend import Bf16Buffer
    fn = kernels.impls()[lax.rev_p]
    assert fn.bf16 == "bits"
    bits = np.array([0x7F81, 0x3F80, 0xFF80], np.uint16)
    out = fn(Bf16Buffer(cupy.asarray(bits)), dimensions=(0,))
    assert isinstance(out, Bf16Buffer)
    np.testing.assert_array_equal(out.bits.get(), bits[::-1])
