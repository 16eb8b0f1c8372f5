"""The report's attribution maps on a grid too large for GradientShap's whole-grid passes (ORCA025:
14 GB) are drawn on one region of 256 x 256 points (whole training patches): the tile of that tiling with
the most ocean."""

import numpy as np
import xarray as xr

from ocean import report


def _mask(ny: int, nx: int) -> xr.DataArray:
    return xr.DataArray(np.zeros((ny, nx), bool), dims=("lat", "lon"))


def test_a_small_grid_is_attributed_whole():
    assert report._attribution_region(_mask(64, 64), (16, 16)) == {}


def test_a_large_grid_is_attributed_on_the_region_with_the_most_ocean():
    mask = _mask(1021, 1442)
    # ocean only in a block straddling tiles (1, 1) and (1, 2) of the 256 x 256 tiling, more of it in (1, 2)
    mask[300:360, 480:600] = True
    region = report._attribution_region(mask, (128, 128))  # two training patches a side
    assert region == {"lat": slice(256, 512), "lon": slice(512, 768)}
    # by hand: the tile (1, 2) holds 60 x 88 ocean points, (1, 1) holds 60 x 32
    assert int(mask.isel(region).sum()) == 60 * 88
    assert report._attribution_region(mask, None) == region
    # training patches of 100: regions of 200 x 200 (two whole patches); the block lies in tiles (1, 2) and
    # (1, 3) (columns 400-599: all 120 columns), rows 200-399 hold all 60 rows
    assert report._attribution_region(mask, (100, 100)) == {"lat": slice(200, 400), "lon": slice(400, 600)}
    # a training patch larger than the region's side: one patch
    big = report._attribution_region(mask, (300, 300))
    assert big["lat"].stop - big["lat"].start == 300 and int(mask.isel(big).sum()) == 60 * 120
