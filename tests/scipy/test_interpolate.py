"""plax.scipy.interpolate.RegularGridInterpolator against SciPy's in float64."""
import numpy as np
import pytest
import scipy.interpolate as si

import plax
from plax.scipy.interpolate import RegularGridInterpolator

R = np.random.default_rng(10)


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


@pytest.mark.parametrize("method", ["linear", "nearest"])
def test_against_scipy(method):
    grid = (np.sort(R.uniform(0, 1, 5)), np.sort(R.uniform(-2, 2, 4)), np.linspace(0, 3, 6))
    values = R.standard_normal((5, 4, 6, 2))
    ours = RegularGridInterpolator(grid, values, method=method)
    ref = si.RegularGridInterpolator(grid, values, method=method, bounds_error=False)
    lo = np.array([g[0] for g in grid])
    hi = np.array([g[-1] for g in grid])
    xi = R.uniform(lo - 0.2, hi + 0.2, (40, 3))        # some points outside: NaN
    xi[:3] = np.array([g[:3] for g in grid]).T          # grid nodes exactly
    np.testing.assert_allclose(ours(xi), ref(xi), rtol=1e-12, atol=1e-12)
    ext = RegularGridInterpolator(grid, values, method=method, fill_value=None)
    ref_ext = si.RegularGridInterpolator(grid, values, method=method, bounds_error=False,
                                         fill_value=None)
    inside = R.uniform(lo, hi, (10, 3))
    np.testing.assert_allclose(ext(inside), ref_ext(inside), rtol=1e-12, atol=1e-12)
    if method == "linear":
        np.testing.assert_allclose(ext(xi), ref_ext(xi), rtol=1e-12, atol=1e-12)
    assert ours(xi.reshape(5, 8, 3)).shape == (5, 8, 2)
    np.testing.assert_allclose(plax.jit(lambda p: ours(p))(inside), ref(inside), rtol=1e-12)


def test_linear_is_differentiable_and_errors():
    grid = (np.linspace(0, 1, 4),)
    values = np.array([0.0, 1.0, 4.0, 9.0])
    f = RegularGridInterpolator(grid, values)
    g = plax.grad(lambda x: f(x[None, None])[0])(0.5)
    np.testing.assert_allclose(g, (4.0 - 1.0) * 3)       # slope of the middle cell
    gv = plax.grad(lambda v: RegularGridInterpolator(grid, v)(np.array([[0.5]]))[0])(values)
    np.testing.assert_allclose(gv, [0.0, 0.5, 0.5, 0.0])
    with pytest.raises(ValueError, match="method"):
        RegularGridInterpolator(grid, values, method="cubic")
    with pytest.raises(NotImplementedError):
        RegularGridInterpolator(grid, values, bounds_error=True)
    with pytest.raises(ValueError, match="dimension"):
        f(np.ones((2, 2)))
