"""The head study's datasets stacked along ``block`` (:func:`astro.evidence._along_blocks`) describe every
block they hold, not the first one's (a netCDF reader sees the description before the dims)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from astro.evidence import _along_blocks


def _part(block: int) -> xr.Dataset:
    ds = xr.Dataset({"r2": ("head", np.arange(4.0) + block)}, coords={"head": np.arange(4)})
    ds.attrs["description"] = f"per-head probes in encoder block {block}"
    return ds


def test_the_stack_of_every_block_names_every_block_and_keeps_each_value():
    out = _along_blocks([_part(b) for b in (0, 1, 2)], [0, 1, 2], studied=1)
    assert out.attrs["description"] == "per-head probes in encoder blocks 0, 1, 2 (dim block)"
    assert (out.attrs["block"], out.attrs["blocks"]) == (1, [0, 1, 2])
    # each block's values where that block's part put them (block b holds arange(4) + b)
    np.testing.assert_array_equal(out["r2"].sel(block=2).values, [2.0, 3.0, 4.0, 5.0])


def test_one_block_keeps_its_own_description():
    out = _along_blocks([_part(2)], [2], studied=2)
    assert out.attrs["description"] == "per-head probes in encoder block 2"
