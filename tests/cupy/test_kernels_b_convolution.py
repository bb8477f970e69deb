"""``conv_general_dilated``'s GPU kernel (``plax_cupy.kernels_convolution``) on the simulated
GPU against the NumPy backend's: 1 to 3 spatial dimensions, dimension numbers other than
NCHW, strides, negative and positive padding, lhs and rhs dilation, feature and batch groups,
the three strategies (the generated kernel; the implicit GEMM: a gather kernel and one cuBLAS
product, its thresholds forced to take small cases, every layout form and 16-bit type, also
against a float64 reference; im2col through CuPy), every dtype and ``preferred_element_type``;
a 3x3 convolution is one launch, the implicit GEMM two where the layouts need no copy (run by
test_kernels_b_simulated.py)."""
from __future__ import annotations

import numpy as np
import pytest

from plax import lax
from plax.lax.convolution import ConvDimensionNumbers
from test_kernels_a_simulated import on_a_gpu
from test_kernels_b_simulated import _bf16, close

pytestmark = on_a_gpu


def data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) > 0.5
    if dtype.kind in "iu":
        return rng.integers(-3, 4, shape).astype(dtype)
    x = rng.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def conv(lhs, rhs, *, strides=None, padding=None, lhs_dilation=None, rhs_dilation=None,
         dimension_numbers=None, feature_group_count=1, batch_group_count=1,
         preferred_element_type=None, scale=10):
    nsp = lhs.ndim - 2
    ident = tuple(range(nsp + 2))
    return close(lax.conv_general_dilated_p, lhs, rhs,
                 window_strides=strides or (1,) * nsp, padding=padding or ((0, 0),) * nsp,
                 lhs_dilation=lhs_dilation or (1,) * nsp, rhs_dilation=rhs_dilation or (1,) * nsp,
                 dimension_numbers=ConvDimensionNumbers(*(dimension_numbers or (ident, ident, ident))),
                 feature_group_count=feature_group_count, batch_group_count=batch_group_count,
                 precision=None, preferred_element_type=preferred_element_type, scale=scale)


CASES = {
    "1d": dict(lhs=(2, 3, 9), rhs=(4, 3, 3)),
    "2d strided padded": dict(lhs=(2, 4, 7, 6), rhs=(6, 4, 3, 2), strides=(2, 1),
                              padding=((1, 2), (0, 1))),
    "2d negative padding": dict(lhs=(1, 2, 8, 8), rhs=(3, 2, 3, 3), padding=((-1, 2), (1, -2))),
    "2d lhs and rhs dilation": dict(lhs=(2, 2, 5, 6), rhs=(2, 2, 2, 3), lhs_dilation=(2, 1),
                                    rhs_dilation=(1, 2), padding=((1, 1), (2, 0))),
    "3d": dict(lhs=(1, 2, 4, 5, 3), rhs=(2, 2, 2, 2, 2), strides=(1, 2, 1)),
    "feature groups": dict(lhs=(2, 6, 5, 5), rhs=(9, 2, 3, 3), feature_group_count=3),
    "depthwise": dict(lhs=(1, 4, 6, 6), rhs=(4, 1, 3, 3), feature_group_count=4),
    "batch groups": dict(lhs=(4, 3, 6, 5), rhs=(6, 3, 2, 2), batch_group_count=2),
    "im2col (36 offsets)": dict(lhs=(2, 3, 8, 8), rhs=(2, 3, 6, 6), strides=(1, 2)),
    "im2col with groups and dilation": dict(lhs=(2, 4, 14, 14), rhs=(4, 2, 6, 6),
                                            feature_group_count=2, rhs_dilation=(2, 1)),
    "window wider than the input": dict(lhs=(1, 1, 3, 3), rhs=(1, 1, 4, 2)),
}


@pytest.mark.parametrize("case", list(CASES), ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_conv_configurations(case, dtype):
    spec = dict(CASES[case])
    lhs, rhs = data(spec.pop("lhs"), dtype), data(spec.pop("rhs"), dtype, 1)
    conv(lhs, rhs, **spec)


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16", np.complex64, np.complex128,
                                   np.int32, np.int8, np.bool_], ids=str)
def test_conv_dtypes(dtype):
    dtype = _bf16() if dtype == "bfloat16" else np.dtype(dtype)
    lhs, rhs = data((2, 4, 6, 5), dtype), data((4, 2, 3, 2), dtype, 1)
    conv(lhs, rhs, strides=(1, 2), padding=((1, 0), (1, 1)), feature_group_count=2)


def test_conv_preferred_element_type():
    lhs, rhs = data((2, 3, 5, 5), np.int8), data((2, 3, 2, 2), np.int8, 1)
    conv(lhs, rhs, preferred_element_type=np.dtype(np.int32))
    lhs, rhs = data((2, 3, 5, 5), np.float16), data((2, 3, 2, 2), np.float16, 1)
    conv(lhs, rhs, preferred_element_type=np.dtype(np.float32))
    lhs, rhs = data((2, 3, 5, 5), _bf16()), data((2, 3, 2, 2), _bf16(), 1)
    conv(lhs, rhs, preferred_element_type=np.dtype(np.float32))


def test_conv_other_dimension_numbers():
    # NHWC lhs, HWIO rhs, NHWC out; and a channels-first out of a channels-last input
    lhs, rhs = data((2, 6, 5, 4), np.float32), data((3, 2, 4, 5), np.float32, 1)
    conv(lhs, rhs, strides=(2, 1), padding=((1, 1), (0, 1)),
         dimension_numbers=((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2)))
    conv(lhs, rhs, dimension_numbers=((0, 3, 1, 2), (3, 2, 0, 1), (1, 0, 3, 2)))


def test_conv_empty_operands():
    conv(data((0, 3, 5, 5), np.float32), data((2, 3, 2, 2), np.float32))
    conv(data((2, 3, 5, 5), np.float32), data((0, 3, 2, 2), np.float32))


@pytest.mark.parametrize("case", ["2d strided padded", "2d lhs and rhs dilation",
                                  "feature groups", "batch groups", "3d"], ids=str)
def test_conv_im2col_path(case, monkeypatch):
    # the im2col copy through CuPy and one cupy.matmul (what serves long sums of the dtypes the
    # implicit GEMM does not take: integers, complex), forced on small cases
    from plax_cupy import kernels_convolution
    monkeypatch.setattr(kernels_convolution, "DIRECT_MAX_TERMS", 0)
    for dtype in (np.int32, np.complex64):
        spec = dict(CASES[case])
        lhs, rhs = data(spec.pop("lhs"), dtype), data(spec.pop("rhs"), dtype, 1)
        conv(lhs, rhs, **spec)


def test_conv_long_sum_takes_im2col():
    # 40 input features x 36 window positions = 1440 products per output: above the threshold
    lhs, rhs = data((1, 40, 8, 8), np.float32), data((2, 40, 6, 6), np.float32, 1)
    conv(lhs, rhs, padding=((1, 0), (0, 1)))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16", np.int32],
                         ids=lambda d: str(d) if isinstance(d, str) else np.dtype(d).name)
def test_conv_3x3_is_one_launch(dtype):
    # one generated kernel per call (was one product per kernel offset and 8 accumulations),
    # eager and under jit, bfloat16 read as its bits (no widening or rounding launches)
    import plax
    import plax_cupy
    dtype = _bf16() if dtype == "bfloat16" else np.dtype(dtype)
    gpu = plax.devices("gpu")[0]
    lhs = plax.device_put(data((2, 8, 10, 10), dtype), gpu)
    rhs = plax.device_put(data((16, 8, 3, 3), dtype, 1), gpu)

    def f(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME")

    want = np.asarray(plax.jit(f, backend="numpy")(np.asarray(lhs), np.asarray(rhs)))
    jitted = plax.jit(f)
    jitted(lhs, rhs).block_until_ready()  # compiled
    for run in (f, jitted):
        with plax_cupy.count() as c:
            got = run(lhs, rhs).block_until_ready()
        assert c.launches == 1 and c.host_fallbacks == 0, (run, c)
        assert c.host_to_device == 0 and c.device_to_host == 0, c
        np.testing.assert_allclose(np.asarray(got).astype(np.float64),
                                   want.astype(np.float64), rtol=1e-2, atol=1e-2)


@pytest.fixture
def gemm_always(monkeypatch):
    """The implicit GEMM for every convolution of a GEMM dtype (its thresholds at zero)."""
    from plax_cupy import kernels_convolution
    monkeypatch.setattr(kernels_convolution, "GEMM_MIN_TERMS", 0)
    monkeypatch.setattr(kernels_convolution, "GEMM_MIN_FEATURES", 0)
    taken = []
    original = kernels_convolution._via_gemm
    monkeypatch.setattr(kernels_convolution, "_via_gemm",
                        lambda *a, **k: taken.append(a[4]) or original(*a, **k))
    return taken


def _float64_reference(lhs, rhs, **spec):
    """The NumPy backend's convolution of the operands in float64."""
    lhs, rhs = lhs.astype(np.float64), rhs.astype(np.float64)
    from test_kernels_a_simulated import reference
    nsp = lhs.ndim - 2
    ident = tuple(range(nsp + 2))
    return reference(lax.conv_general_dilated_p, lhs, rhs,
                     window_strides=spec.get("strides") or (1,) * nsp,
                     padding=spec.get("padding") or ((0, 0),) * nsp,
                     lhs_dilation=spec.get("lhs_dilation") or (1,) * nsp,
                     rhs_dilation=spec.get("rhs_dilation") or (1,) * nsp,
                     dimension_numbers=ConvDimensionNumbers(*(spec.get("dimension_numbers")
                                                              or (ident, ident, ident))),
                     feature_group_count=spec.get("feature_group_count", 1),
                     batch_group_count=spec.get("batch_group_count", 1), precision=None,
                     preferred_element_type=None)


@pytest.mark.parametrize("case", [c for c in CASES if c != "window wider than the input"], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"],
                         ids=lambda d: d if isinstance(d, str) else np.dtype(d).name)
def test_conv_implicit_gemm(case, dtype, gemm_always):
    dtype = _bf16() if dtype == "bfloat16" else np.dtype(dtype)
    spec = dict(CASES[case])
    lhs, rhs = data(spec.pop("lhs"), dtype), data(spec.pop("rhs"), dtype, 1)
    got = np.asarray(conv(lhs, rhs, **spec)).astype(np.float64)
    assert len(gemm_always) == 1, gemm_always
    # and against float64: the result's rounding (float32 sums, one rounding to the type)
    want = np.asarray(_float64_reference(lhs, rhs, **spec))
    size = np.asarray(_float64_reference(np.abs(lhs), np.abs(rhs), **spec))  # sum of |terms|
    eps = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24}[dtype.name]
    assert np.all(np.abs(got - want) <= eps * np.abs(want) + 4e-6 * size), case


# (lhs layout, kernel layout, output layout) as JAX writes them: NCHW/OIHW, NHWC/HWIO, mixed
_LAYOUTS = {"NCHW OIHW NCHW": ((0, 1, 2, 3), (0, 1, 2, 3), (0, 1, 2, 3)),
            "NHWC HWIO NHWC": ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2)),
            "NHWC OIHW NHWC": ((0, 3, 1, 2), (0, 1, 2, 3), (0, 3, 1, 2)),
            "NCHW HWIO NCHW": ((0, 1, 2, 3), (3, 2, 0, 1), (0, 1, 2, 3)),
            "NHWC OHWI NCHW": ((0, 3, 1, 2), (0, 3, 1, 2), (0, 1, 2, 3))}


def _in_layout(shape_nchw, spec):
    """A logical NCHW/OIHW shape laid out as ``spec`` says (spec[i]: where logical axis i is)."""
    shape = [0] * 4
    for logical, axis in enumerate(spec):
        shape[axis] = shape_nchw[logical]
    return tuple(shape)


@pytest.mark.parametrize("layout", list(_LAYOUTS), ids=str)
@pytest.mark.parametrize("groups, batch", [(1, 1), (1, 2), (2, 2)], ids=lambda g: str(g))
def test_conv_implicit_gemm_layouts_and_launches(layout, groups, batch, gemm_always):
    # each layout form, values as the NumPy backend's; two launches (the gather, the product)
    # where no copy is needed: the kernel first and its result NCHW as it comes for one image
    # (OIHW into NCHW), the rows first and channels-last results as they come without groups
    import plax_cupy
    from plax_cupy.kernels_convolution import conv_general_dilated
    ls, rs, os_ = _LAYOUTS[layout]
    lhs = data(_in_layout((batch, 4, 7, 6), ls), np.float32)
    rhs = data(_in_layout((6, 4 // groups, 3, 2), rs), np.float32, 1)
    spec = dict(strides=(2, 1), padding=((1, 1), (0, 1)), rhs_dilation=(1, 2),
                dimension_numbers=(ls, rs, os_), feature_group_count=groups)
    conv(lhs, rhs, **spec)
    import cupy
    params = dict(window_strides=(2, 1), padding=((1, 1), (0, 1)), lhs_dilation=(1, 1),
                  rhs_dilation=(1, 2), dimension_numbers=ConvDimensionNumbers(ls, rs, os_),
                  feature_group_count=groups, batch_group_count=1, precision=None,
                  preferred_element_type=None)
    x, w = cupy.asarray(lhs), cupy.asarray(rhs)
    with plax_cupy.count() as c:
        conv_general_dilated(x, w, **params)
    plan = gemm_always[-1]
    if plan.kernel_first:  # the kernel as it is; the result NCHW as it comes for one image
        copies = int(batch > 1)
    else:  # each a copy unless its features are last in memory, without groups
        copies = int(rs[0] != 3 or groups > 1) + int(os_[1] != 3 or groups > 1)
    assert c.launches == 2 + copies and c.host_fallbacks == 0, (plan, c)
    if layout in ("NCHW OIHW NCHW", "NHWC HWIO NHWC") and groups == 1 and batch == 1:
        assert c.launches == 2, c
