"""A galaxy sample (catalogue with units and truth, optional images) and its files: FITS and
zarr, both written atomically and read back with checks that name the fix."""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import astropy.units as u
import numpy as np
import xarray as xr
from astropy import log as astropy_log
from astropy.io import fits
from astropy.table import QTable

from scimech.errors import DataValidationError, MissingVariableError
from scimech.run.results import COMPLETE_MARKER

from .. import constants
from .worlds import SyntheticConfig

__all__ = ["GalaxySample", "populations"]


@dataclass
class GalaxySample:
    """A catalogue (QTable with units and truth columns) and optional ``(N, 4, H, W)`` images."""

    catalog: QTable
    images: np.ndarray | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.catalog)

    def __getitem__(self, idx) -> GalaxySample:
        idx = np.asarray(idx) if not isinstance(idx, slice) else idx
        return GalaxySample(self.catalog[idx], None if self.images is None else self.images[idx], dict(self.meta))

    def populations(self) -> dict[str, np.ndarray]:
        """Boolean masks: ``all``, ``extended``, ``compact``, ``dusty``, ``clean``."""
        return populations(
            self.catalog,
            self.meta.get("dusty_av", SyntheticConfig.dusty_av),
            self.meta.get("extended_arcsec", SyntheticConfig.extended_arcsec),
        )

    # -------- I/O
    def to_fits(self, path: str | Path) -> Path:
        """Write ``IMAGES`` (nanomaggy per pixel) and ``CATALOG`` HDUs; units survive the trip."""
        path = Path(path)
        hdus = [fits.PrimaryHDU()]
        if self.images is not None:
            im = fits.ImageHDU(self.images.astype(np.float32), name="IMAGES")
            im.header["BUNIT"] = "nanomaggy"
            im.header["PIXSCALE"] = (constants.PIXEL_SCALE_ARCSEC, "arcsec / pixel")
            im.header["BANDS"] = ",".join(constants.BANDS)
            hdus.append(im)
        level = astropy_log.level
        astropy_log.setLevel("ERROR")  # "nmgy cannot be recovered": it is, from the UNIT cards below
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", u.UnitsWarning)  # nmgy is not a FITS-standard unit
                cat = fits.table_to_hdu(self.catalog)
        finally:
            astropy_log.setLevel(level)
        cat.name = "CATALOG"
        for name in self.catalog.colnames:
            unit = getattr(self.catalog[name], "unit", None)
            if unit is not None:
                cat.header[f"HIERARCH UNIT {name}"] = unit.to_string()
        for k, v in self.meta.items():
            if isinstance(v, (int, float, str, bool)):
                cat.header[f"HIERARCH META {k}"] = v
        hdus.append(cat)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        fits.HDUList(hdus).writeto(tmp, overwrite=True)
        tmp.replace(path)
        return path

    @classmethod
    def from_fits(cls, path: str | Path) -> GalaxySample:
        """Read a sample written by :meth:`to_fits`.

        Raises
        ------
        FileNotFoundError
            No file at ``path``.
        MissingVariableError
            The file has no ``CATALOG`` HDU.
        DataValidationError
            The file is not FITS, or is truncated or corrupt (the message names the file and the fix).
        """
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(
                f"No FITS sample at {path}; write one with GalaxySample.to_fits or `scimech astro synth`."
            )
        fix = f"Delete {path} and write it again (GalaxySample.to_fits or `scimech astro synth --out {path}`)."
        size = path.stat().st_size
        try:
            # lazy_load_hdus=False reads every header now, so a torn file shows here, not later.
            # astropy only *warns* about a truncated file (and zero-fills or drops what is
            # missing), so its warnings are collected and turned into an error below.
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with fits.open(path, lazy_load_hdus=False) as hdul:
                    names = [h.name for h in hdul]
                    end = max(h._data_offset + h._data_size for h in hdul)
                    torn = [
                        str(w.message).splitlines()[0]
                        for w in caught
                        if "truncated" in str(w.message) or "Error validating header" in str(w.message)
                    ]
                    if torn or size % 2880 or end > size:  # FITS files are whole 2880-byte blocks
                        why = torn[0] if torn else f"{size} bytes, expected {max(end, size + 2880 - size % 2880)}"
                        raise DataValidationError(
                            f"{path} is a truncated FITS file ({why}): its write did not "
                            f"finish or the copy is incomplete. {fix}"
                        )
                    if "CATALOG" not in names:
                        raise MissingVariableError(
                            f"{path} has no CATALOG HDU (found {names}); it was not "
                            f"written by GalaxySample.to_fits. {fix}"
                        )
                    images = np.array(hdul["IMAGES"].data, dtype=np.float32) if "IMAGES" in names else None
                    header = hdul["CATALOG"].header
                    meta = {k[5:]: v for k, v in header.items() if k.startswith("META ")}
                    units = {k[5:]: v for k, v in header.items() if k.startswith("UNIT ")}
                    warnings.simplefilter("ignore", u.UnitsWarning)  # nmgy is not a FITS-standard unit
                    cat = QTable.read(hdul["CATALOG"])
                    n_rows = int(header.get("NAXIS2", len(cat)))
        except DataValidationError:
            raise
        except (OSError, ValueError, TypeError, KeyError, IndexError, EOFError) as err:
            raise DataValidationError(
                f"{path} is not a readable FITS sample: it is corrupt or not FITS ({type(err).__name__}: {err}). {fix}"
            ) from err
        if images is not None and len(images) != n_rows:
            raise DataValidationError(f"{path}: IMAGES holds {len(images)} galaxies but CATALOG {n_rows}. {fix}")
        for name, unit in units.items():  # restore units FITS could not parse
            if name in cat.colnames and getattr(cat[name], "unit", None) is None:
                cat[name] = np.asarray(cat[name]) * u.Unit(unit, format="generic")
        return cls(cat, images, meta)

    def to_zarr(self, path: str | Path) -> Path:
        """Write an xarray/zarr store: ``images (galaxy, band, y, x)`` and one variable per column.

        The store is written to a hidden temporary sibling, gets the completion marker of
        :mod:`scimech.run.results` (``.scimech-complete``) last, and is then moved into place
        with ``os.replace``; an existing store at ``path`` is kept until the new one is
        complete. A crash at any point leaves the old store or none under ``path``, never a
        partial one, and :meth:`from_zarr` refuses a store without the marker.
        """
        path = Path(path)
        ds = xr.Dataset(attrs={k: v for k, v in self.meta.items() if isinstance(v, (int, float, str, bool))})
        for name in self.catalog.colnames:
            col = self.catalog[name]
            unit = getattr(col, "unit", None)
            val = np.asarray(col.value if hasattr(col, "value") else col)
            ds[name] = ("galaxy", val, {"units": str(unit) if unit is not None else ""})
        if self.images is not None:
            ds["images"] = (
                ("galaxy", "band", "y", "x"),
                self.images.astype(np.float32),
                {"units": "nanomaggy", "pixel_scale_arcsec": constants.PIXEL_SCALE_ARCSEC},
            )
            ds = ds.assign_coords(band=list(constants.BANDS))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
        try:
            store = tmp / "store.zarr"
            ds.to_zarr(str(store), mode="w", consolidated=False)
            (store / COMPLETE_MARKER).write_text(f"{len(self)} galaxies\n")
            if path.exists():
                old = tmp / "previous"
                os.replace(path, old)  # same folder: atomic; removed with tmp below
            os.replace(store, path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return path

    @classmethod
    def from_zarr(cls, path: str | Path) -> GalaxySample:
        """Read a sample written by :meth:`to_zarr`.

        Raises
        ------
        FileNotFoundError
            No store at ``path``.
        DataValidationError
            The store lacks the completion marker (an interrupted write) or cannot be read.
        """
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"No zarr sample at {path}; write one with GalaxySample.to_zarr.")
        fix = f"Delete {path} and write it again (GalaxySample.to_zarr or `scimech astro synth --out {path}`)."
        if not (path / COMPLETE_MARKER).is_file():
            raise DataValidationError(
                f"The zarr sample {path} has no completion marker ({COMPLETE_MARKER}): its "
                f"write did not finish (an interrupted run?) or another tool wrote it. {fix}"
            )
        try:
            with warnings.catch_warnings():  # the marker file is not a zarr node; that is fine
                warnings.filterwarnings("ignore", message=".*not recognized as a component.*")
                with xr.open_zarr(str(path), consolidated=False) as opened:
                    ds = opened.load()
        except Exception as err:  # zarr/xarray raise many types on a damaged store
            raise DataValidationError(
                f"Cannot read the zarr sample {path} ({type(err).__name__}: {err}): it is corrupt. {fix}"
            ) from err
        cat = QTable()
        for name in ds.data_vars:
            if name == "images":
                continue
            unit = ds[name].attrs.get("units", "")
            vals = ds[name].values
            cat[name] = vals * u.Unit(unit) if unit else vals
        images = ds["images"].values if "images" in ds else None
        return cls(cat, images, dict(ds.attrs))


def populations(
    catalog: QTable,
    dusty_av: float = SyntheticConfig.dusty_av,
    extended_arcsec: float = SyntheticConfig.extended_arcsec,
) -> dict[str, np.ndarray]:
    """Population masks from truth ``a_v`` [mag] and measured ``shape_r`` [arcsec]."""
    for col in ("a_v", "shape_r"):
        if col not in catalog.colnames:
            raise MissingVariableError(
                f"catalogue lacks '{col}' (has {catalog.colnames}); populations need truth a_v and shape_r."
            )
    av = np.asarray(u.Quantity(catalog["a_v"]).to_value(u.mag))
    r = np.asarray(u.Quantity(catalog["shape_r"]).to_value(u.arcsec))
    dusty = av > dusty_av
    ext = r > extended_arcsec
    return {"all": np.ones(len(av), bool), "extended": ext, "compact": ~ext, "dusty": dusty, "clean": ~dusty}
