"""Legacy Survey products as they are distributed in many files, written from their documentation.

* DR10 sweep catalogues (legacysurvey.org/dr10/files, "Sweep Catalogs"): one file per sky patch of 10 deg
  in RA by 5 deg in Dec, ``<region>/sweep/10.1/sweep-<ramin><decmin>-<ramax><decmax>.fits``, the corners
  as three-digit degrees with ``p`` / ``m`` for the sign of the Dec (``sweep-150p000-160p005.fits``); the
  south (DECam, ``RELEASE`` 10000+) and the north (BASS / MzLS, ``RELEASE`` 9010 / 9011) have sweeps of
  the same names, a galaxy in their overlap in both. Columns: :func:`product_fixtures.dr10_columns`.
* Per-galaxy cut-outs as the Legacy Survey viewer's ``fits-cutout`` service returns them
  (legacysurvey.org/viewer, ``fits-cutout?ra=..&dec=..&layer=ls-dr10&pixscale=0.262&bands=griz``): one
  FITS file per galaxy, a primary HDU ``(bands, H, W)`` with ``BANDS = 'griz'``, ``BAND0..3`` and a TAN
  WCS centred on the requested position (``CRVAL1`` / ``CRVAL2`` = ``ra`` / ``dec``, ``CRPIX`` the
  central pixel, a CD matrix of 0.262"/pixel).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from astropy.io import fits

from .product_fixtures import dr10_columns, write_table


def sweep_name(ra0: int, dec0: int, ra1: int, dec1: int) -> str:
    """``sweep-<ramin><decmin>-<ramax><decmax>.fits`` as DR10 names its sweeps."""

    def corner(ra: int, dec: int) -> str:
        return f"{ra:03d}{'m' if dec < 0 else 'p'}{abs(dec):03d}"

    return f"sweep-{corner(ra0, dec0)}-{corner(ra1, dec1)}.fits"


def with_columns(columns: list[fits.Column], **arrays) -> list[fits.Column]:
    """``columns`` with some arrays replaced (same name, format and unit)."""
    out = []
    for c in columns:
        if c.name in arrays:
            c = fits.Column(name=c.name, format=c.format, unit=c.unit, array=np.asarray(arrays[c.name]))
        out.append(c)
    return out


def positions(objects: np.ndarray, ra0: float, dec0: float) -> tuple[np.ndarray, np.ndarray]:
    """RA / Dec [deg] of objects inside a patch starting at ``(ra0, dec0)``: 0.05 deg apart."""
    return ra0 + 0.5 + 0.05 * (objects % 100), dec0 + 0.5 + 0.05 * (objects // 100)


def write_sweep(folder: Path, name: str, cat, rows: np.ndarray, ra0: float, dec0: float, release: int = 10000, **kw):
    """One sweep file of ``cat``'s ``rows`` placed inside the patch at ``(ra0, dec0)``."""
    ra, dec = positions(np.asarray(rows), ra0, dec0)
    cols = with_columns(dr10_columns(cat, rows, **kw), RA=ra, DEC=dec, RELEASE=np.full(len(rows), release, np.int16))
    folder.mkdir(parents=True, exist_ok=True)
    return write_table(folder / name, cols)


def write_cutout(path: Path, image: np.ndarray, ra: float, dec: float, targetid: int | None = None) -> Path:
    """One galaxy's cut-out as the viewer's fits-cutout writes it (``image``: (4, H, W) g, r, i, z [nanomaggy])."""
    hdu = fits.PrimaryHDU(np.asarray(image, np.float32))
    h = hdu.header
    h["BANDS"] = "griz"
    for i, b in enumerate("griz"):
        h[f"BAND{i}"] = b
    h["CTYPE1"], h["CTYPE2"] = "RA---TAN", "DEC--TAN"
    h["CRVAL1"], h["CRVAL2"] = float(ra), float(dec)
    h["CRPIX1"], h["CRPIX2"] = (image.shape[-1] + 1) / 2, (image.shape[-2] + 1) / 2
    h["CD1_1"], h["CD1_2"], h["CD2_1"], h["CD2_2"] = -0.262 / 3600, 0.0, 0.0, 0.262 / 3600
    if targetid is not None:
        h["TARGETID"] = targetid
    hdu.writeto(path)
    return path
