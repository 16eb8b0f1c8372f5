"""Small files laid out as the real products are, written from their documentation.

* A Legacy Survey DR10 catalogue: the Tractor / sweep columns as https://www.legacysurvey.org/dr10/catalogs/
  lists them (``RELEASE`` int16, ``BRICKID`` int32, ``OBJID`` int32, ``TYPE`` char[3], ``RA``/``DEC``
  float64 [deg], ``EBV`` float32 [mag], ``FLUX_G/R/I/Z`` float32 [nanomaggy], ``FLUX_IVAR_*``
  float32 [1/nanomaggy^2], ``MW_TRANSMISSION_*`` float32, ``SHAPE_R`` float32 [arcsec],
  ``SHAPE_E1/E2`` float32), with the Milky Way transmission of the DR10 pages,
  ``10^(-A_b / 2.5)``, ``A_b = R_b E(B-V)`` and the DECam coefficients ``R_b`` below
  (Schlafly & Finkbeiner 2011, as the DR10 catalogue page gives them).
* DESI redshift columns joined to its rows, as the DESI data model's ZCATALOG lists them
  (https://desidatamodel.readthedocs.io, ``zcatalog``): ``TARGETID`` int64, ``Z``, ``ZERR`` float64,
  ``ZWARN`` int64 (a bitmask; 0 = no warning), ``SPECTYPE`` char[6] (``GALAXY``, ``QSO``, ``STAR``).
* A cut-out cube as the Legacy Survey viewer's ``fits-cutout`` writes one (``BANDS = 'griz'``,
  ``BAND0..``, a TAN WCS of 0.262"/pixel), stacked to ``(N, bands, H, W)``.

The galaxies are synthetic (:func:`astro.synthetic.make_galaxies`): fluxes, shapes and images
consistent with each other, so what a reader gets back can be compared with what was written.
"""

from __future__ import annotations

import astropy.units as u
import numpy as np
from astropy.io import fits

from astro import constants

#: DECam A_b / E(B-V) for g, r, i, z (DR10 catalogue page, Schlafly & Finkbeiner 2011)
R_DECAM = {"g": 3.214, "r": 2.165, "i": 1.592, "z": 1.211}


def mw_transmission(ebv: np.ndarray, band: str) -> np.ndarray:
    """``10^(-0.4 R_b E(B-V))``, the DR10 ``MW_TRANSMISSION_<band>``."""
    return 10 ** (-0.4 * R_DECAM[band] * np.asarray(ebv, float))


def repeat_rows(n: int, n_repeated: int, seed: int = 0) -> np.ndarray:
    """Row order of a catalogue of ``n`` objects where ``n_repeated`` of them appear twice (as in
    overlapping sweep files or a DESI target observed twice), shuffled (fixed seed)."""
    rng = np.random.default_rng(seed)
    rows = np.concatenate([np.arange(n), rng.choice(n, n_repeated, replace=False)])
    return rows[rng.permutation(len(rows))]


def dr10_columns(
    cat,
    rows: np.ndarray | None = None,
    *,
    mw: bool = True,
    desi: bool = False,
    zwarn: dict | None = None,
    spectype: dict | None = None,
    flux_unit: str = "nanomaggy",
    drop: tuple[str, ...] = (),
    z: bool = True,
    av: bool = True,
) -> list[fits.Column]:
    """FITS columns of a DR10 catalogue of synthetic galaxies ``cat`` (rows ``rows`` of it, repeats
    allowed: a repeated row is the same object, same identity). ``mw``: ``MW_TRANSMISSION_*``;
    ``desi``: ``TARGETID``, ``ZERR``, ``ZWARN``, ``SPECTYPE``; ``zwarn`` / ``spectype``: ``{row position:
    value}`` overrides; ``flux_unit``: the TUNIT of the fluxes (values scaled to it)."""
    rows = np.arange(len(cat)) if rows is None else np.asarray(rows)
    n = len(rows)
    obj = rows  # one object per synthetic galaxy
    ebv = cat["ebv"].to_value(u.mag)[rows]
    factor = (1 * u.nmgy).to_value(u.Unit(flux_unit.replace("nanomaggy", "nmgy").replace("maggy", "mgy")))
    cols = [
        fits.Column(name="RELEASE", format="I", array=np.full(n, 10000, np.int16)),
        fits.Column(name="BRICKID", format="J", array=(330000 + obj // 40).astype(np.int32)),
        fits.Column(name="OBJID", format="J", array=(obj % 40).astype(np.int32)),
        fits.Column(name="TYPE", format="3A", array=np.array(["EXP", "DEV", "SER", "REX"])[obj % 4]),
        fits.Column(name="RA", format="D", array=150 + obj * 1e-3, unit="deg"),
        fits.Column(name="DEC", format="D", array=2 + obj * 1e-3, unit="deg"),
        fits.Column(name="EBV", format="E", array=ebv.astype(np.float32), unit="mag"),
    ]
    for b in constants.BANDS:
        cols.append(
            fits.Column(
                name=f"FLUX_{b.upper()}",
                format="E",
                unit=flux_unit,
                array=(cat[f"flux_{b}"].to_value(u.nmgy)[rows] * factor).astype(np.float32),
            )
        )
    for b in constants.BANDS:
        cols.append(
            fits.Column(
                name=f"FLUX_IVAR_{b.upper()}",
                format="E",
                unit=f"1/{flux_unit}^2",
                array=(cat[f"flux_ivar_{b}"].to_value(u.nmgy**-2)[rows] / factor**2).astype(np.float32),
            )
        )
    if mw:
        for b in constants.BANDS:
            cols.append(
                fits.Column(
                    name=f"MW_TRANSMISSION_{b.upper()}", format="E", array=mw_transmission(ebv, b).astype(np.float32)
                )
            )
    cols += [
        fits.Column(
            name="SHAPE_R", format="E", array=cat["shape_r"].to_value(u.arcsec)[rows].astype(np.float32), unit="arcsec"
        ),
        fits.Column(name="SHAPE_E1", format="E", array=np.asarray(cat["shape_e1"], np.float32)[rows]),
        fits.Column(name="SHAPE_E2", format="E", array=np.asarray(cat["shape_e2"], np.float32)[rows]),
    ]
    if desi:
        zw = np.zeros(n, np.int64)
        for k, v in (zwarn or {}).items():
            zw[k] = v
        st = np.array(["GALAXY"] * n, dtype="U6")
        for k, v in (spectype or {}).items():
            st[k] = v
        cols += [
            fits.Column(name="TARGETID", format="K", array=39627000000000000 + obj.astype(np.int64)),
            fits.Column(name="ZERR", format="D", array=1e-4 * (1 + np.asarray(cat["z"], float)[rows])),
            fits.Column(name="ZWARN", format="K", array=zw),
            fits.Column(name="SPECTYPE", format="6A", array=st),
        ]
    if z:
        cols.append(fits.Column(name="Z", format="D", array=np.asarray(cat["z"], float)[rows]))
    if av:
        cols.append(
            fits.Column(name="AV", format="E", array=cat["a_v"].to_value(u.mag)[rows].astype(np.float32), unit="mag")
        )
    return [c for c in cols if c.name not in drop]


def write_table(path, columns: list[fits.Column]):
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(columns)]).writeto(path)
    return path


def write_dr10(path, cat, rows=None, **kw):
    """A DR10(-plus-DESI) catalogue FITS file (:func:`dr10_columns`)."""
    return write_table(path, dr10_columns(cat, rows, **kw))


def write_cube(
    path,
    images: np.ndarray,
    *,
    order: str = "griz",
    header: str | None = "BANDS",
    bunit: str | None = "nanomaggy",
    scale: float = 1.0,
    pixscale: float | None = 0.262,
):
    """A cut-out cube file: ``images`` (N, 4, H, W) in g, r, i, z [nanomaggy per pixel] written with its
    planes in ``order``, multiplied by ``scale``; ``header``: how the bands are named (``"BANDS"`` as
    ``'grzi'``, ``"BAND"`` as ``BAND0..3`` of the cut-out service, ``"FILTER"`` as DECam ``FILTER1..4``
    cards, ``None``: not named); ``pixscale`` [arcsec] as a TAN WCS (CD matrix in degrees); a ``.npy``
    path gets the array alone."""
    cube = np.ascontiguousarray(images[:, ["griz".index(b) for b in order]] * scale, np.float32)
    if str(path).endswith(".npy"):
        np.save(path, cube)
        return path
    hdu = fits.ImageHDU(cube, name="IMAGES")
    h = hdu.header
    if bunit:
        h["BUNIT"] = bunit
    if header == "BANDS":
        h["BANDS"] = order
    elif header == "BAND":
        for i, b in enumerate(order):
            h[f"BAND{i}"] = b
    elif header == "FILTER":
        for i, b in enumerate(order, 1):
            h[f"FILTER{i}"] = f"{b} DECam SDSS c0001 0.0 0.0"
    if pixscale is not None:
        h["CTYPE1"], h["CTYPE2"] = "RA---TAN", "DEC--TAN"
        h["CRVAL1"], h["CRVAL2"] = 150.0, 2.0
        h["CRPIX1"], h["CRPIX2"] = cube.shape[-1] / 2 + 0.5, cube.shape[-2] / 2 + 0.5
        h["CD1_1"], h["CD1_2"], h["CD2_1"], h["CD2_2"] = -pixscale / 3600, 0.0, 0.0, pixscale / 3600
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
    return path
