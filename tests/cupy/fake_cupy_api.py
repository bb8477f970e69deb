"""Which NumPy and SciPy functions the simulated CuPy (:mod:`fake_cupy`) implements: the names
CuPy 14 provides under the same name (``cupy.<name>``, ``cupy.linalg``, ``cupy.fft``,
``cupyx.scipy.special``, ``cupyx.scipy.ndimage``, ``cupyx.scipy.linalg``, ``cupyx.scipy.signal``),
read from CuPy 14.2's namespaces beside NumPy 2.4 and SciPy (see also CuPy's comparison table,
https://docs.cupy.dev/en/latest/reference/comparison.html).

A plain table: :mod:`fake_cupy` runs the NumPy/SciPy function of a listed name on the device
arrays' host copies and returns device arrays; a NumPy function or ufunc that is not listed
fails on device arrays as it does with CuPy (``TypeError``). Add a name only if CuPy has it.
"""

from __future__ import annotations

#: ``cupy.<name>`` for ``numpy.<name>`` (functions and ufuncs)
NUMPY = frozenset("""
    abs absolute acos acosh add all allclose amax amin angle any append apply_along_axis
    apply_over_axes arange arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax
    argmin argpartition argsort argwhere around array array2string array_equal array_equiv
    array_repr array_split array_str asanyarray asarray asarray_chkfinite ascontiguousarray
    asfortranarray asin asinh astype atan atan2 atanh atleast_1d atleast_2d atleast_3d
    average bartlett base_repr binary_repr bincount bitwise_and bitwise_count bitwise_invert
    bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift bitwise_xor blackman
    broadcast_arrays broadcast_shapes broadcast_to can_cast cbrt ceil choose clip
    column_stack common_type compress concat concatenate conj conjugate convolve copy
    copysign copyto corrcoef correlate cos cosh count_nonzero cov cross cumprod cumsum
    cumulative_prod cumulative_sum deg2rad degrees delete diag diag_indices
    diag_indices_from diagflat diagonal diff digitize divide divmod dot dsplit dstack
    ediff1d einsum empty empty_like equal exp exp2 expand_dims expm1 extract eye fabs
    fill_diagonal fix flatnonzero flip fliplr flipud float_power floor floor_divide fmax
    fmin fmod format_float_positional format_float_scientific frexp from_dlpack frombuffer
    fromfile fromfunction fromiter fromstring full full_like gcd genfromtxt get_printoptions
    gradient greater greater_equal hamming hanning heaviside histogram histogram2d
    histogramdd hsplit hstack hypot i0 identity imag indices inner interp intersect1d invert
    isclose iscomplex iscomplexobj isdtype isfinite isfortran isin isinf isnan isneginf
    isposinf isreal isrealobj isscalar issubdtype iterable ix_ kaiser kron lcm ldexp
    left_shift less less_equal lexsort linspace load loadtxt log log10 log1p log2 logaddexp
    logaddexp2 logical_and logical_not logical_or logical_xor logspace mask_indices matmul
    matrix_transpose max maximum may_share_memory mean median meshgrid min min_scalar_type
    minimum mintypecode mod modf moveaxis multiply nan_to_num nanargmax nanargmin nancumprod
    nancumsum nanmax nanmean nanmedian nanmin nanprod nanstd nansum nanvar ndim negative
    nextafter nonzero not_equal ones ones_like outer packbits pad partition percentile
    permute_dims piecewise place poly polyadd polyfit polymul polysub polyval positive pow
    power printoptions prod promote_types ptp put put_along_axis putmask quantile rad2deg
    radians ravel ravel_multi_index real real_if_close reciprocal remainder repeat require
    reshape resize result_type right_shift rint roll rollaxis roots rot90 round row_stack
    save savetxt savez savez_compressed searchsorted select set_printoptions setdiff1d
    setxor1d shape shares_memory show_config sign signbit sin sinc sinh size sort
    sort_complex split sqrt square squeeze stack std subtract sum swapaxes take
    take_along_axis tan tanh tensordot tile trace transpose trapezoid tri tril tril_indices
    tril_indices_from trim_zeros triu triu_indices triu_indices_from true_divide trunc
    typename union1d unique unique_all unique_counts unique_inverse unique_values unpackbits
    unravel_index unwrap vander var vdot vsplit vstack where zeros zeros_like
""".split())

#: ``cupy.linalg.<name>`` for ``numpy.linalg.<name>``
NUMPY_LINALG = frozenset("""
    LinAlgError cholesky cond cross det eig eigh eigvals eigvalsh inv lstsq matmul
    matrix_power matrix_rank matrix_transpose norm pinv qr slogdet solve svd tensorinv
    tensorsolve
""".split())

#: ``cupy.fft.<name>`` for ``numpy.fft.<name>``
NUMPY_FFT = frozenset("""
    fft fft2 fftfreq fftn fftshift hfft ifft ifft2 ifftn ifftshift ihfft irfft irfft2 irfftn
    rfft rfft2 rfftfreq rfftn
""".split())

#: ``cupyx.scipy.special.<name>`` for ``scipy.special.<name>``
SCIPY_SPECIAL = frozenset("""
    bdtr bdtrc bdtri beta betainc betaincinv betaln binom boxcox boxcox1p cbrt chdtr chdtrc
    chdtri cosdg cosm1 cotdg digamma ellipeinc ellipj ellipk ellipkinc ellipkm1 entr erf
    erfc erfcinv erfcx erfinv exp1 exp10 exp2 expi expit expm1 expn exprel fdtr fdtrc fdtri
    gamma gammainc gammaincc gammainccinv gammaincinv gammaln gammasgn gdtr gdtrc huber i0
    i0e i1 i1e inv_boxcox inv_boxcox1p j0 j1 k0 k0e k1 k1e kl_div lambertw log1p log_expit
    log_ndtr log_softmax loggamma logit logsumexp lpmv multigammaln nbdtr nbdtrc nbdtri ndtr
    ndtri pdtr pdtrc pdtri poch polygamma pseudo_huber psi radian rel_entr rgamma round
    shichi sici sinc sindg softmax sph_harm_y spherical_yn tandg wright_bessel xlog1py xlogy
    y0 y1 yn zeta zetac
""".split())

#: ``cupyx.scipy.ndimage.<name>`` for ``scipy.ndimage.<name>``
SCIPY_NDIMAGE = frozenset("""
    affine_transform binary_closing binary_dilation binary_erosion binary_fill_holes
    binary_hit_or_miss binary_opening binary_propagation black_tophat center_of_mass
    convolve convolve1d correlate correlate1d distance_transform_edt extrema find_objects
    fourier_ellipsoid fourier_gaussian fourier_shift fourier_uniform gaussian_filter
    gaussian_filter1d gaussian_gradient_magnitude gaussian_laplace generate_binary_structure
    generic_filter generic_filter1d generic_gradient_magnitude generic_laplace grey_closing
    grey_dilation grey_erosion grey_opening histogram iterate_structure label
    labeled_comprehension laplace map_coordinates maximum maximum_filter maximum_filter1d
    maximum_position mean median median_filter minimum minimum_filter minimum_filter1d
    minimum_position morphological_gradient morphological_laplace percentile_filter prewitt
    rank_filter rotate shift sobel spline_filter spline_filter1d standard_deviation sum
    sum_labels uniform_filter uniform_filter1d value_indices variance white_tophat zoom
""".split())

#: ``cupyx.scipy.linalg.<name>`` for ``scipy.linalg.<name>``
SCIPY_LINALG = frozenset("""
    bandwidth block_diag circulant expm hankel khatri_rao kron lu lu_factor lu_solve
    solve_triangular toeplitz
""".split())

#: ``cupyx.scipy.signal.<name>`` for ``scipy.signal.<name>`` (the convolutions)
SCIPY_SIGNAL = frozenset("""
    choose_conv_method convolve convolve2d correlate correlate2d fftconvolve oaconvolve
""".split())

#: ``cupy.lib.stride_tricks.<name>`` for ``numpy.lib.stride_tricks.<name>`` (views, no copy)
NUMPY_STRIDE_TRICKS = frozenset("as_strided sliding_window_view".split())

#: module path in the simulated CuPy -> (the NumPy/SciPy module it runs, its table)
NAMESPACES = {"cupy": ("numpy", NUMPY), "cupy.linalg": ("numpy.linalg", NUMPY_LINALG),
              "cupy.fft": ("numpy.fft", NUMPY_FFT),
              "cupy.lib.stride_tricks": ("numpy.lib.stride_tricks", NUMPY_STRIDE_TRICKS),
              "cupyx.scipy.special": ("scipy.special", SCIPY_SPECIAL),
              "cupyx.scipy.ndimage": ("scipy.ndimage", SCIPY_NDIMAGE),
              "cupyx.scipy.linalg": ("scipy.linalg", SCIPY_LINALG),
              "cupyx.scipy.signal": ("scipy.signal", SCIPY_SIGNAL)}

#: ``cupy.<name>`` kernels whose float arithmetic or comparisons CuPy compiles with
#: ``-ftz=true``: the simulation runs them on float32/complex64 operands with subnormals
#: flushed to zero (sign kept) and flushes their float32 results, as the GPU does
#: (``add.ftz``, ``mul.ftz``, ``sqrt.ftz``, ``setp.ftz``, ``max.ftz``, ``abs.ftz``), whether
#: called as ``cupy.<name>``, as an array operator or method (``x * y``, ``x.sum()``) or
#: through NumPy's dispatch. Every ``cupyx.scipy.special`` function flushes likewise. The
#: comparisons flush their operands (CuPy's ``less`` of float32 compiles to
#: ``setp.lt.ftz.f32``, checked with NVRTC: a subnormal compares equal to zero); their boolean
#: results are not floats. Selections (``where``) and data movement do not flush on a GPU and
#: are not listed.
FLUSHES_FLOAT32 = frozenset("""
    abs absolute add argmax argmin clip conj conjugate cumprod cumsum divide exp hypot log
    logaddexp max maximum mean min minimum multiply negative nextafter power prod sqrt square
    subtract sum true_divide trunc
    equal greater greater_equal less less_equal not_equal
""".split())
