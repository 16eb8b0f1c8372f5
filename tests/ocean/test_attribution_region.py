"""The report's attribution maps on a grid too large for GradientShap's whole-grid passes (ORCA025:
14 GB) are drawn on one training patch: the tile of the tiling with the most ocean."""

import numpy as np
import xarray as xr

from ocean import report


def _mask(ny: int, nx: int) -> xr.DataArray:
    return xr.DataArray(np.zeros((ny, nx), bool), dims=("lat", "lon"))


def test_a_small_grid_is_attributed_whole():
    assert report._attribution_region(_mask(64, 64), (16, 16)) == {}


def test_a_large_grid_is_attributed_on_the_patch_with_the_most_ocean():
    mask = _mask(1021, 1442)
    # ocean only in a block straddling tiles (2, 3) and (2, 4) of the 128 x 128 tiling, more of it in (2, 4)
    mask[300:360, 480:600] = True
    region = report._attribution_region(mask, (128, 128))
    assert region == {"lat": slice(256, 384), "lon": slice(512, 640)}
    # by hand: the tile (2, 4) holds 60 x 88 ocean points, (2, 3) holds 60 x 32
    assert int(mask.isel(region).sum()) == 60 * 88
    # without a training patch, 256 x 256 tiles: columns 512-767 hold 88 of the 120 ocean columns
    assert report._attribution_region(mask, None) == {"lat": slice(256, 512), "lon": slice(512, 768)}
