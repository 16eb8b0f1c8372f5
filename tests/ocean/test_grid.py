"""Grid derivatives against analytic fields on the sphere."""

import numpy as np

from ocean import grid
from ocean.constants import R_EARTH

LAT = np.linspace(20, 50, 61)
LON = np.linspace(-40, 0, 81)
LA, LO = np.meshgrid(LAT, LON, indexing="ij")


def test_derivatives_of_linear_fields_are_exact():
    # f = a * x with x = R cos(lat) lon_rad along each latitude; g = b * y with y = R lat_rad
    f = 2e-6 * R_EARTH * np.cos(np.deg2rad(LA)) * np.deg2rad(LO)
    g = -3e-6 * R_EARTH * np.deg2rad(LA)
    np.testing.assert_allclose(grid.ddx(f, LAT, LON), 2e-6, rtol=1e-9)
    np.testing.assert_allclose(grid.ddy(g, LAT, LON), -3e-6, rtol=1e-9)


def test_derivatives_of_smooth_field_second_order():
    f = np.sin(np.deg2rad(3 * LO)) * np.cos(np.deg2rad(2 * LA))
    dfdx = 3 * np.cos(np.deg2rad(3 * LO)) * np.cos(np.deg2rad(2 * LA)) / (R_EARTH * np.cos(np.deg2rad(LA)))
    dfdy = -2 * np.sin(np.deg2rad(3 * LO)) * np.sin(np.deg2rad(2 * LA)) / R_EARTH
    inner = (slice(1, -1), slice(1, -1))
    # centred differences: error ~ (k h)^2 / 6 with k h = 3 * 0.5 deg = 0.026 rad -> ~1e-4 relative
    scale = np.abs(dfdx).max()
    assert np.abs(grid.ddx(f, LAT, LON) - dfdx)[inner].max() < 1e-3 * scale
    assert np.abs(grid.ddy(f, LAT, LON) - dfdy)[inner].max() < 1e-3 * np.abs(dfdy).max()


def test_laplacian_of_spherical_harmonic():
    # Y_1^0 ~ sin(lat): lap = -l(l+1)/R^2 * f with l = 1
    f = np.sin(np.deg2rad(LA))
    lap = grid.laplacian(f, LAT, LON, np.ones_like(f, bool))
    inner = (slice(1, -1), slice(1, -1))
    np.testing.assert_allclose(lap[inner], (-2 / R_EARTH**2 * f)[inner], rtol=2e-3)  # O(h^2) truncation


def test_coast_uses_one_sided_difference():
    mask = np.ones_like(LA, bool)
    mask[:, :10] = False  # land in the west
    f = 2e-6 * R_EARTH * np.cos(np.deg2rad(LA)) * np.deg2rad(LO)
    d = grid.ddx(np.where(mask, f, np.nan), LAT, LON, mask)
    np.testing.assert_allclose(d[:, 10:], 2e-6, rtol=1e-9)
    assert np.isnan(d[:, :10]).all()
