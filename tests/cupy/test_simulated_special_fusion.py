"""Special functions fuse on the GPU: a jitted chain of complex inverse trigonometric and
hyperbolic functions, of ``bessel_i0e``/``bessel_i1e``, of ``digamma``, ``lgamma``, ``erf``,
``erfc`` and ``erf_inv``, or of one of the iterative ones (``igamma``, ``igammac``,
``igamma_grad_a``, ``random_gamma_grad``, ``zeta``, ``polygamma``, ``betainc``) with the
arithmetic around it is one generated kernel -- one launch, no host fallback, no host copy --
and its values are NumPy/SciPy float64's; eagerly each is one launch too. The gradient of a
``random.gamma`` sampler launches fewer kernels than with ``random_gamma_grad`` declined.

Every call here runs plainly (``PLAX_CUDA_GRAPHS=0``): a CUDA graph replay is one launch
whatever it holds, so the counts below are generated kernels.

Runs on the simulated GPU (:func:`test_on_the_simulated_gpu` starts this file in a child
pytest with ``-p fake_cupy_plugin``) or on a real one.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import scipy.special

from test_kernels_a_simulated import on_a_gpu
from test_simulated_streams import REPO, SIMULATED, child_env, run_file_on_simulated_gpu

BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.fixture(autouse=True)
def _plain_launches(monkeypatch):
    """Programs compiled here run plainly, so a launch is a kernel (not a graph replay)."""
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    """This file on the simulated GPU, then ``benchmarks/gpu_special.py --simulated``: each of
    its rows one kernel, one launch, no host copy or fallback."""
    run_file_on_simulated_gpu(__file__)
    done = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "gpu_special.py"),
                           "--simulated"], capture_output=True, text=True, env=child_env(),
                          cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [line.split() for line in done.stdout.splitlines() if "ms" in line]
    assert len(rows) == 10, done.stdout
    # kernels per plain call, launches per (graphed) call, host copies, host fallbacks
    assert all(r[-5:] == ["1", "1", "0", "0", "0"] for r in rows), done.stdout


def _on_gpu(fn, *args):
    """``fn(*args)`` on the GPU after a first (compiling) call: its outputs as NumPy arrays and
    what the second call cost."""
    import plax
    import plax_cupy
    gpu = plax.devices("gpu")[0]
    with plax.config.override("jax_enable_x64", True):  # float64, complex128 kept as they are
        args = [plax.device_put(a, gpu) for a in args]
        fn(*args)
        with plax_cupy.count() as c:
            out = fn(*args)
            for o in plax.tree_util.tree_leaves(out):
                o.block_until_ready()
        return [np.asarray(o) for o in plax.tree_util.tree_leaves(out)], c


def _assert_one_launch(c):
    assert c.launches == 1 and c.host_fallbacks == 0, (c.launches, c.fallbacks)
    assert c.host_to_device == 0 and c.device_to_host == 0


def _complex_chain(z):
    import plax.numpy as jnp
    return (jnp.arcsin(z) * jnp.arccos(z) + jnp.arctan(z) - jnp.arcsinh(z) * jnp.arccosh(z)
            + jnp.arctanh(z * 0.5))


@on_a_gpu
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=lambda d: np.dtype(d).name)
def test_complex_inverse_functions_fuse_into_one_kernel(dtype):
    import plax
    rng = np.random.default_rng(0)
    z = (rng.uniform(-3, 3, 257) + 1j * rng.uniform(-3, 3, 257)).astype(dtype)
    z[:6] = [0, 1, -1, 2, 1j, -2j]  # branch points and cuts
    (got,), c = _on_gpu(plax.jit(_complex_chain), z)
    _assert_one_launch(c)
    w = z.astype(np.complex128)
    with np.errstate(all="ignore"):
        want = (np.arcsin(w) * np.arccos(w) + np.arctan(w) - np.arcsinh(w) * np.arccosh(w)
                + np.arctanh(w * 0.5))
    rtol = 2e-5 if dtype == np.complex64 else 1e-13
    assert got.dtype == dtype
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=rtol)
    assert not np.isfinite(got[~finite]).any()  # atan(+-i) is infinite: so is the sum


@on_a_gpu
@pytest.mark.parametrize("name", ["arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh"])
def test_eager_complex_inverse_function_is_one_kernel(name):
    import plax.numpy as jnp
    z = np.array([0.5 + 2j, -3 - 0.25j, 1.5 + 0j, 0.0 - 1.5j], np.complex64)
    (got,), c = _on_gpu(getattr(jnp, name), z)
    _assert_one_launch(c)
    np.testing.assert_allclose(got, getattr(np, name)(z.astype(np.complex128)), rtol=1e-6)


def _bessel_chain(x):
    from plax import lax
    return lax.bessel_i0e(x) * 2 - lax.bessel_i1e(x) + x * x


@on_a_gpu
@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32, np.float64], ids=str)
def test_scaled_bessel_functions_fuse_into_one_kernel(dtype):
    import plax
    x = np.concatenate([np.linspace(-40, 40, 161), [0.0, -0.0, np.inf, -np.inf]]).astype(dtype)
    (got,), c = _on_gpu(plax.jit(_bessel_chain), x)
    _assert_one_launch(c)
    w = x.astype(np.float64)
    with np.errstate(all="ignore"):
        want = scipy.special.i0e(w) * 2 - scipy.special.i1e(w) + w * w
    rtol = {np.dtype(np.float16): 4e-3, BF16: 3e-2, np.dtype(np.float32): 1e-6}.get(np.dtype(dtype), 1e-14)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=rtol)


def _gamma_chain(x):
    from plax import lax
    return lax.digamma(x) + lax.lgamma(x) * lax.erf(x) - lax.erfc(x) + lax.erf_inv(x * 0.1)


@on_a_gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
def test_digamma_fuses_with_cudas_special_functions(dtype):
    """digamma (the generator's form) and lgamma, erf, erfc, erf_inv (CUDA's) in one kernel."""
    import plax
    x = np.concatenate([np.linspace(-7.7, 9.5, 70), [0.25, 1.4616321449683622, 9.9]]).astype(dtype)
    (got,), c = _on_gpu(plax.jit(_gamma_chain), x)
    _assert_one_launch(c)
    w = x.astype(np.float64)
    want = (scipy.special.psi(w) + scipy.special.gammaln(w) * scipy.special.erf(w)
            - scipy.special.erfc(w) + scipy.special.erfinv(w * 0.1))
    assert got.dtype == np.dtype(dtype)
    rtol = 2e-5 if dtype == np.float32 else 1e-12  # (lgamma's and digamma's zeros: atol)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


@on_a_gpu
def test_eager_digamma_and_bessel_are_generated_kernels():
    from plax import lax
    x = np.array([-2.5, -0.5, 0.5, 1.0, 3.0, 40.0], np.float32)
    for fn, ref in ((lax.digamma, scipy.special.psi), (lax.bessel_i0e, scipy.special.i0e),
                    (lax.bessel_i1e, scipy.special.i1e)):
        (got,), c = _on_gpu(fn, x)
        _assert_one_launch(c)
        np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=2e-6)


@on_a_gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
def test_gamma_sample_gradients_are_one_launch(dtype):
    """Series and continued-fraction elements, the domain's edges (NaN outside a > 0, x >= 0;
    0 at x == 0) against the CPU backend."""
    import plax
    a = np.array([0.3, 0.5, 1.0, 2.5, 10.0, 0.7, 3.0, -1.0, 2.0, np.nan, 4.0, np.inf], dtype)
    x = np.array([0.2, 2.0, 1.0, 0.5, 12.0, 5.0, 0.0, 1.0, -1.0, 1.0, 30.0, 1.0], dtype)
    cpu = plax.devices("cpu")[0]
    for fn in (_lax_fn("random_gamma_grad"), _lax_fn("igamma_grad_a")):
        (got,), c = _on_gpu(fn, a, x)
        _assert_one_launch(c)
        with plax.config.override("jax_enable_x64", True):
            want = np.asarray(fn(plax.device_put(a, cpu), plax.device_put(x, cpu)))
        assert got.dtype == want.dtype == np.dtype(dtype)
        rtol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True)


def _lax_fn(name):
    from plax import lax
    return getattr(lax, name)


def _iterative_cases():
    """(label, function, operands (float64), SciPy's float64 value or None: the CPU backend's,
    where plax's conventions are not SciPy's or SciPy has no such function)."""
    rng = np.random.default_rng(4)
    a = np.concatenate([rng.uniform(0.1, 30, 60), [0.5, 2.0, 1e-3, 40.0, 0.0, -1.0, np.nan]])
    x = np.concatenate([rng.uniform(0.01, 40, 60), [0.0, 1.0, 5.0, 39.0, 2.0, 1.0, 1.0]])
    s = np.concatenate([rng.uniform(1.2, 12, 60), [1.0, 0.5, 2.0, 3.0, np.inf, 2.0, 4.0]])
    b = np.concatenate([rng.uniform(0.1, 30, 60), [2.0, 3.0, 0.5, 1.0, 2.0, 2.0, 2.0]])
    u = np.concatenate([rng.uniform(0, 1, 60), [0.0, 1.0, 0.5, 0.99, 0.5, 0.5, 1.5]])
    m = np.concatenate([rng.integers(0, 5, 60), [0, 1, 2, 3, 1, 0, 4]]).astype(np.float64)
    sc = scipy.special
    from plax import lax
    return [
        ("igamma", lambda a, x: lax.igamma(a, x) * 2 + 1, (a, x), sc.gammainc(a, x) * 2 + 1),
        ("igammac", lambda a, x: lax.igammac(a, x) - x, (a, x), sc.gammaincc(a, x) - x),
        ("igamma_grad_a", lambda a, x: lax.igamma_grad_a(a, x) + a, (a, x), None),
        ("random_gamma_grad", lambda a, x: lax.random_gamma_grad(a, x) * x, (a, x), None),
        ("zeta", lambda s, q: lax.zeta(s, q) * q, (s, x), sc.zeta(s, x) * x),
        ("polygamma", lambda m, x: lax.polygamma(m, x) + x, (m, x), None),  # (NaN at x = 0)
        ("betainc", lambda a, b, u: lax.betainc(a, b, u) + 1, (a, b, u),
         sc.betainc(a, b, u) + 1),
    ]


@on_a_gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16],
                         ids=["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("case", range(7), ids=["igamma", "igammac", "igamma_grad_a",
                                                "random_gamma_grad", "zeta", "polygamma",
                                                "betainc"])
def test_iterative_special_functions_fuse_into_one_kernel(case, dtype):
    """e.g. ``jit(lambda a, x: igamma(a, x) * 2 + 1)``: one kernel, no host copy; the values
    are SciPy's in float64 (the gamma derivatives: the CPU backend's), NaN where they are."""
    import plax
    label, fn, args, want = _iterative_cases()[case]
    with np.errstate(all="ignore"):
        args = [np.asarray(v).astype(dtype) for v in args]
    (got,), c = _on_gpu(plax.jit(fn), *args)
    _assert_one_launch(c)
    assert got.dtype == np.dtype(dtype)
    if want is None or dtype == BF16:  # (SciPy at the bfloat16 operands: the CPU backend)
        cpu = plax.devices("cpu")[0]
        with plax.config.override("jax_enable_x64", True):
            want = np.asarray(plax.jit(fn)(*[plax.device_put(v, cpu) for v in args]))
    rtol = {np.dtype(np.float32): 2e-6, BF16: 1e-2}.get(np.dtype(dtype), 1e-9)
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64), rtol=rtol,
                               atol=rtol, equal_nan=True, err_msg=label)


@on_a_gpu
def test_eager_iterative_special_functions_are_one_kernel():
    from plax import lax
    a = np.array([0.5, 2.0, 7.5, 30.0], np.float32)
    x = np.array([0.25, 3.0, 7.0, 12.0], np.float32)
    for fn, ref in ((lax.igamma, scipy.special.gammainc), (lax.igammac, scipy.special.gammaincc),
                    (lambda s, q: lax.zeta(s + 1, q), lambda s, q: scipy.special.zeta(s + 1, q))):
        (got,), c = _on_gpu(fn, a, x)
        assert c.launches <= 2 and c.host_fallbacks == 0  # (zeta's s + 1: a kernel of its own)
        assert c.host_to_device == 0 and c.device_to_host == 0
        np.testing.assert_allclose(got, ref(a.astype(np.float64), x.astype(np.float64)), rtol=2e-6)


@on_a_gpu
def test_gamma_sampler_gradient_launches_fewer_kernels(monkeypatch):
    """``grad`` of a ``random.gamma`` sampler in its shape: ``random_gamma_grad`` fuses with its
    neighbours, so the program launches fewer kernels than with it declined (the mechanism
    ``WITHOUT_DEVICE_FORM`` keeps), and computes the same values."""
    import plax
    from plax import random
    from plax_cupy import codegen
    key = random.PRNGKey(0)

    def make():  # a fresh function each time: compiled anew
        return plax.jit(lambda a: plax.grad(lambda a: random.gamma(key, a, (32,)).sum())(a))
    a = np.full((32,), 2.5, np.float32)
    (fused,), c_fused = _on_gpu(make(), a)
    monkeypatch.setattr(codegen, "WITHOUT_DEVICE_FORM", frozenset({"random_gamma_grad"}))
    (split,), c_split = _on_gpu(make(), a)
    assert c_fused.host_fallbacks == c_split.host_fallbacks == 0
    assert c_fused.launches < c_split.launches, (c_fused.launches, c_split.launches)
    np.testing.assert_allclose(fused, split, rtol=1e-5)
    assert np.isfinite(fused).all() and (fused > 0).all()
