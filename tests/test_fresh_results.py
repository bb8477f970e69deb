"""Kernels marked ``fresh_result`` (:func:`plax.lowering.fresh_result`) allocate their results
on every path, and a jitted program uses the mark: the operand of such a step gives its
buffer to a later in-place result while the step's result still lives.

The first test runs every marked NumPy kernel directly over the conformance kit's cases of its
primitive (every dtype the kit checks), so a kernel that hands back its operand, a view of it
or a read-only array on some path fails. The others read the generated NumPy program of one
jitted function per family: ``a``'s buffer takes ``cos(a)`` in place (``out=``) while the
marked step's result is still to be read, which a step that may return a view forbids.
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax, plugins
from plax import numpy as jnp
from plax.lowering import lower, returns_fresh


def _numpy_impls():
    from plax_numpy import impls
    return impls()


def _outputs(out) -> list:
    return list(out) if isinstance(out, (list, tuple)) else [out]


#: inputs and parameters beyond the kit's, for the shortcuts a kernel could take (no axes,
#: size-1 axes and transforms, 1x1 and empty matrices, empty scans, one operand, a window of
#: one element, an operand shorter than the window or of rank 0, no random bits but the new
#: key, no padding, a conversion to the operand's own dtype, the paths of large arrays)
def _shortcut_cases():
    from plax.lax import linalg
    from plax.lax.fft import FftType
    from plax.lax.fused_multiply_add import fma_p
    f = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = (f + 1j * f[::-1]).astype(np.complex64)
    i = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = i % 2 == 0
    m = np.array([[4.0]], np.float32)
    big = np.linspace(-1, 1, 20000, dtype=np.float32).reshape(100, 200)
    mats = (m, np.zeros((2, 0, 0), np.float32))   # (empty: the kernels' own results)
    reductions = [(x, {"axes": axes}) for x in (f, c, i, b) for axes in ((), (0,), (0, 1))]
    cumulative = [(x, {"axis": a, "reverse": r})
                  for x in (f, i, np.ones((1, 20), np.float32), np.zeros((0, 20), np.float32),
                            np.zeros((2, 0), np.float32))   # (an empty scan axis or other axis)
                  for a in (0, 1) for r in (False, True)]
    window = {"window_strides": (1, 1), "padding": ((0, 0), (0, 0)), "base_dilation": (1, 1),
              "window_dilation": (1, 1), "window_dimensions": (1, 1)}
    cases = {lax.dot_general_p: [((f, f.T), {"dimension_numbers": (((1,), (0,)), ((), ())),
                                            "precision": None, "preferred_element_type": None}),
                                 ((c[None], c[None]),
                                  {"dimension_numbers": (((2,), (2,)), ((0,), (0,))),
                                   "precision": None,
                                   "preferred_element_type": np.dtype(np.float32)})],
             lax.sort_p: [((x,), {"dimension": d, "is_stable": True, "num_keys": 1})
                          for x in (f, c, np.ones((2, 1), np.float32)) for d in (0, 1)]
             + [((f, i), {"dimension": 1, "is_stable": True, "num_keys": 2})],
             lax.argmax_p: [(f, {"axes": (a,), "index_dtype": np.dtype(np.int32)}) for a in (0, 1)],
             lax.argmin_p: [(f[:1], {"axes": (0,), "index_dtype": np.dtype(np.int32)})],
             lax.fft_p: [(x, {"fft_type": t, "fft_lengths": (1,)})
                         for x, t in ((c[:, :1], FftType.FFT), (c[:, :1], FftType.IFFT),
                                      (f[:, :1], FftType.RFFT), (c[:, :1], FftType.IRFFT))],
             linalg.cholesky_p: [(a, {}) for a in mats], linalg.lu_p: [(a, {}) for a in mats],
             linalg.qr_p: [(a, {"full_matrices": u}) for a in mats for u in (0, 1)],
             linalg.eigh_p: [(a, {"lower": True}) for a in mats],
             linalg.svd_p: [(a, {"full_matrices": u, "compute_uv": v}) for a in mats
                            for u in (0, 1) for v in (0, 1)],
             linalg.eig_p: [(a, {"compute_left_eigenvectors": True,
                                 "compute_right_eigenvectors": True}) for a in mats],
             linalg.triangular_solve_p: [((a, a), {"left_side": s, "lower": True,
                                                   "transpose_a": False, "conjugate_a": False,
                                                   "unit_diagonal": True})
                                         for a in mats for s in (0, 1)],
             lax.rng_bit_generator_p: [(k, {"shape": (), "dtype": np.dtype(np.uint32),
                                            "algorithm": 1, "out_sharding": None})
                                       for k in (np.arange(1, 5, dtype=np.uint32),
                                                 np.arange(1, 3, dtype=np.uint64))],
             lax.concatenate_p: [((f,), {"dimension": 0})],
             lax.pad_p: [((f, np.float32(0)), {"padding_config": cfg})   # nothing padded
                         for cfg in (((0, 0, 0), (0, 0, 0)), ((-1, 0, 0), (0, -2, 0)))],
             lax.select_n_p: [((big > 0, big, -big), {})],    # (the bit blend of large arrays)
             lax.convert_element_type_p: [(x, {"new_dtype": x.dtype, "weak_type": False})
                                          for x in (f, i, b, c)],
             fma_p: [((big, big, big), {})],                  # (chunk by chunk)
             lax.top_k_p: [(f, {"k": 3, "axis": 1})],
             lax.reduce_precision_p: [(f, {"exponent_bits": 8, "mantissa_bits": 23})],
             lax.cumlogsumexp_p: [(f[:1], {"axis": 0, "reverse": r}) for r in (0, 1)]}
    for p in (lax.reduce_window_sum_p, lax.reduce_window_max_p, lax.reduce_window_min_p):
        cases[p] = [(f, window), (f, {**window, "window_dimensions": (3, 4)}),
                    (np.float32(2.0)[...], {k: () for k in window})]
    for p in (lax.reduce_sum_p, lax.reduce_prod_p, lax.reduce_max_p, lax.reduce_min_p):
        cases[p] = [(x, params) for x, params in reductions if x.dtype != bool or
                    p in (lax.reduce_max_p, lax.reduce_min_p)]
    for p in (lax.reduce_and_p, lax.reduce_or_p, lax.reduce_xor_p):
        cases[p] = [(x, params) for x, params in reductions if x.dtype.kind in "bi"]
    for p in (lax.cumsum_p, lax.cumprod_p, lax.cummax_p, lax.cummin_p):
        cases[p] = cumulative
    return cases


def _kit_cases(p):
    """``(operands, params, label)`` of every conformance-kit case of ``p``, every dtype."""
    from plax.testing.conformance.harness import answered_by_core, dt
    from plax.testing.conformance.specs import BY_PRIMITIVE
    spec = BY_PRIMITIVE[p]
    cases = [(case.operands(), case.params, f"{dtype} [{case.label}]")
             for dtype in spec.dtypes for case in spec.cases(dt(dtype))]
    # (a case the core answers itself never reaches a kernel)
    return [c for c in cases if not answered_by_core(p, c[0], c[1])]


def test_kernels_marked_fresh_never_return_operand_memory():
    from plax.lax import linalg
    from plax.lax.fused_multiply_add import fma_p
    from plax.testing.conformance.specs import BY_PRIMITIVE
    marked = {p: fn for p, fn in _numpy_impls().items() if returns_fresh(fn)}
    # the families this mark was verified for, kernel by kernel (a regression drops one)
    assert {lax.fft_p, lax.conv_general_dilated_p, lax.gather_p, lax.scatter_add_p,
            lax.top_k_p, lax.cumsum_p, lax.threefry2x32_p, lax.dot_general_p,
            lax.reduce_window_sum_p, lax.dynamic_update_slice_p, lax.concatenate_p,
            linalg.cholesky_p, linalg.qr_p, linalg.eigh_p, linalg.svd_p, linalg.lu_p,
            linalg.triangular_solve_p, linalg.eig_p, lax.pad_p, lax.select_n_p, lax.clamp_p,
            lax.sign_p, lax.convert_element_type_p, lax.erf_p, fma_p} <= set(marked)
    unchecked = sorted(p.name for p in marked if p not in BY_PRIMITIVE)
    assert not unchecked, f"marked fresh without conformance cases: {unchecked}"
    shortcuts = _shortcut_cases()
    checked = 0
    with plax.config.override("enable_x64", True):
        for p, kernel in marked.items():
            extra = [(ops if isinstance(ops, tuple) else (ops,), params, f"shortcut {params}")
                     for ops, params in shortcuts.get(p, [])]
            for operands, params, label in _kit_cases(p) + extra:
                where = f"{p.name} {label}"
                # read-only, as the backend's buffers are: an operand handed back on some
                # path (an empty one too, which shares no memory) is then not writeable
                operands = [_read_only(x) for x in operands]
                for out in _outputs(kernel(*operands, **params)):
                    assert isinstance(out, np.ndarray) or np.ndim(out) == 0, where
                    assert not any(np.shares_memory(out, x) for x in operands), where
                    if isinstance(out, np.ndarray) and out.ndim:
                        assert out.flags.writeable, where   # (a later ufunc may write it)
                    checked += 1
    assert checked > 1000, checked


def _read_only(x):
    if not isinstance(x, np.ndarray):
        return x
    view = x.view()
    view.setflags(write=False)
    return view


def _program(f, *args) -> list[str]:
    from plax_numpy.backend import NumpyEmitter
    backend = plugins.registry().backends["numpy"]
    fn = lower(plax.make_jaxpr(f)(*args).jaxpr, NumpyEmitter(backend.impls), backend,
               plax.devices("cpu")[0])
    return [line.strip() for line in fn.__plax_source__.splitlines()]


x44 = np.linspace(-1, 1, 16).reshape(4, 4).astype(np.float32)


# (name, f(a) reading a = exp(x) through the family's primitive first, x) : each program is
# ``a = exp(x); r = family(a); return combine(r, cos(a))``
def _fft(a):
    return jnp.fft.rfft(a).real[..., :2]


def _conv(a):
    k = jnp.ones((1, 1, 2, 2), a.dtype)
    return lax.conv_general_dilated(a[None, None], k, (1, 1), "SAME")[0, 0, :, :2]


def _gather(a):
    return a[jnp.array([2, 0, 1, 3])][:, :2]


def _scatter(a):
    return a.at[jnp.array([0, 2])].add(1.0)[:, :2]


def _top_k(a):
    return lax.top_k(a, 2)[0]


def _cumsum(a):
    return jnp.cumsum(a, axis=1)[:, :2]


def _cholesky(a):
    # exp(x44) is not symmetric: lax's cholesky reads the lower triangle (symmetrizing first
    # would put the product before it)
    return lax.linalg.cholesky(a, symmetrize_input=False)[:, :2]


def _window(a):
    return lax.reduce_window(a, -jnp.inf, lax.max, (1, 3), (1, 1), "VALID")


@pytest.mark.parametrize("family", [_fft, _conv, _gather, _scatter, _top_k, _cumsum, _cholesky,
                                    _window], ids=lambda f: f.__name__.strip("_"))
def test_a_marked_step_lets_its_operand_be_reused_in_place(family):
    def f(x):  # a = exp(x) is v1
        a = jnp.exp(x)
        r = family(a)
        c = jnp.cos(a)   # a's last reader, while r lives
        return r * 2.0 + c[:, :2]

    lines = _program(f, x44)
    if family is _scatter:
        # (cos(a) reads the scatter's operand: it is scheduled first, and the scatter, then
        # a's last reader, writes into a's buffer: plax.lowering.reads_before_updates)
        assert any(line.startswith("v") and "(v1, " in line and line.endswith("out=v1)")
                   for line in lines), lines
    else:
        assert any("(v1, out=v1)" in line for line in lines), lines   # cos(a) into a's buffer
    np.testing.assert_allclose(np.asarray(plax.jit(f, backend="numpy")(x44)),
                               np.asarray(f(x44)), rtol=1e-6, atol=1e-6)


def test_an_unmarked_step_still_holds_its_operand():
    # the same program through a slice (a view): a's buffer must not take cos(a)
    def f(x):
        a = jnp.exp(x)
        r = a[:, 1:3]
        c = jnp.cos(a)
        return r * 2.0 + c[:, :2]

    lines = _program(f, x44)
    assert not any("(v1, out=v1)" in line for line in lines), lines
    a = np.exp(x44.astype(np.float64))
    np.testing.assert_allclose(np.asarray(plax.jit(f, backend="numpy")(x44)),
                               a[:, 1:3] * 2 + np.cos(a)[:, :2], rtol=1e-5)
