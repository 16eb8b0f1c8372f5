"""Real galaxies for the study: a Legacy Survey DR10 catalogue (and image cut-outs) as a
:class:`~astro.synthetic.GalaxySample`.

:func:`read_legacy_survey` reads a FITS table with the Tractor / sweep columns ``FLUX_G``,
``FLUX_R``, ``FLUX_I``, ``FLUX_Z`` (nanomaggies), ``FLUX_IVAR_G..Z`` (nanomaggy^-2),
``SHAPE_R`` (arcsec), ``SHAPE_E1``, ``SHAPE_E2`` and ``EBV`` (mag), any case, and optionally
a redshift (``Z``, ``REDSHIFT`` or ``Z_SPEC``, e.g. DESI spectroscopic redshifts joined to
the rows; needed to train and to score) and an attenuation (``A_V`` or ``AV``, mag, e.g. from
the DESI FastSpecFit value-added catalogue; the study's dust steps need it). Cut-outs are an
``(N, 4, H, W)`` g, r, i, z cube in nanomaggies per pixel at 0.262"/pixel, one per catalogue
row, from ``.npy`` or FITS.

Rows with a non-positive inverse variance in any band, or a masked / non-finite value in any
column read (or pixel), are dropped; their count is in ``meta["n_rejected"]`` (by reason in
``meta["rejected"]``) and in a warning.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import astropy.units as u
import numpy as np
from astropy.io import fits
from astropy.table import QTable

from scimech.errors import DataValidationError, DimensionError, MissingVariableError, UnitsError

from . import constants
from .synthetic import GalaxySample, SyntheticConfig

__all__ = ["LEGACY_COLUMNS", "OPTIONAL_COLUMNS", "read_legacy_survey", "read_images", "write_legacy_survey"]

#: study column -> (Legacy Survey column, unit of the study)
LEGACY_COLUMNS: dict[str, tuple[str, u.UnitBase | None]] = {
    **{f"flux_{b}": (f"FLUX_{b.upper()}", u.nmgy) for b in constants.BANDS},
    **{f"flux_ivar_{b}": (f"FLUX_IVAR_{b.upper()}", u.nmgy**-2) for b in constants.BANDS},
    "shape_r": ("SHAPE_R", u.arcsec),
    "shape_e1": ("SHAPE_E1", None),
    "shape_e2": ("SHAPE_E2", None),
    "ebv": ("EBV", u.mag),
}
#: study column -> (accepted names, first match wins; unit)
OPTIONAL_COLUMNS: dict[str, tuple[tuple[str, ...], u.UnitBase | None]] = {
    "z": (("Z", "REDSHIFT", "Z_SPEC"), None),
    "a_v": (("A_V", "AV"), u.mag),
}
_SPELLINGS = {"nanomaggies": "nanomaggy", "nanomaggies^-2": "nanomaggy^-2"}


def _unit(text: str | None) -> u.UnitBase | None:
    if not text or not text.strip():
        return None
    t = text.strip()
    for a, b in _SPELLINGS.items():
        t = t.replace(a, b)
    try:
        return u.Unit(t, format="generic")
    except ValueError:
        return u.UnrecognizedUnit(t)


def _column(hdu: fits.BinTableHDU, name: str, unit: u.UnitBase | None, path: Path) -> np.ndarray:
    """Values of column ``name`` in ``unit`` (its TUNIT converted; no TUNIT: the survey's own unit)."""
    values = np.ma.masked_invalid(np.ma.asarray(hdu.data[name], dtype=float))
    idx = [c.name for c in hdu.columns].index(name)
    got = _unit(hdu.columns[idx].unit)
    if unit is None or got is None or got == u.dimensionless_unscaled:
        if unit is not None and got == u.dimensionless_unscaled:
            raise UnitsError(f"{path}: column {name} is dimensionless; expected {unit}. Fix its TUNIT card.")
        return values
    try:
        factor = got.to(unit)
    except u.UnitConversionError as err:
        raise UnitsError(f"{path}: column {name} is in {got}, which does not convert to {unit} (the Legacy "
                         f"Survey unit; 1 nanomaggy = 3.631e-6 Jy, m_AB = 22.5 - 2.5 log10 f). Convert the "
                         "column or fix its TUNIT card.") from err
    return values * factor


def read_images(path: str | Path) -> np.ndarray:
    """An ``(N, 4, H, W)`` cut-out cube [nanomaggy per pixel] from ``.npy`` or FITS (the first
    image HDU with data; ``BUNIT``, when present, must convert to nanomaggies)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No image cube at {path}; give an (N, 4, H, W) .npy or FITS file.")
    try:
        if path.suffix == ".npy":
            cube = np.load(path, mmap_mode="r")
            unit = None
        else:
            with fits.open(path) as hdul:
                hdu = next((h for h in hdul if h.is_image and h.data is not None), None)
                if hdu is None:
                    raise DataValidationError(f"{path} holds no image data; expected an (N, 4, H, W) cube.")
                cube = np.asarray(hdu.data)
                unit = _unit(hdu.header.get("BUNIT"))
    except DataValidationError:
        raise
    except (OSError, ValueError, EOFError, TypeError) as err:   # TypeError: astropy on a truncated file
        raise DataValidationError(f"{path} is not a readable .npy or FITS image cube ({type(err).__name__}: "
                                  f"{str(err)[:200]}).") from err
    if cube.ndim != 4 or cube.shape[1] != len(constants.BANDS):
        raise DimensionError(f"{path}: images have shape {cube.shape}; expected (N, 4, H, W) with the bands "
                             f"{', '.join(constants.BANDS)} on axis 1 (one cut-out per catalogue row).")
    cube = np.asarray(cube, np.float32)
    if unit is not None:
        try:
            cube = cube * np.float32(unit.to(u.nmgy))
        except u.UnitConversionError as err:
            raise UnitsError(f"{path}: BUNIT {unit} does not convert to nanomaggies per pixel.") from err
    return cube


def _centre_crop(cube: np.ndarray, size: int, path: Path) -> np.ndarray:
    h, w = cube.shape[-2:]
    if h < size or w < size:
        raise DimensionError(f"{path}: cut-outs are {h}x{w} pixels, smaller than the {size}x{size} the model "
                             "needs; cut larger stamps.")
    y0, x0 = (h - size) // 2, (w - size) // 2
    return cube[..., y0:y0 + size, x0:x0 + size]


def read_legacy_survey(path: str | Path, images: str | Path | None = None, *, stamp: int | None = None
                       ) -> GalaxySample:
    """A Legacy Survey DR10 catalogue (and cut-outs) as the study's sample.

    Parameters
    ----------
    path
        FITS file whose first table HDU has the columns of :data:`LEGACY_COLUMNS` (names in any
        case; TUNIT cards converted, absent ones taken as the survey's units) and optionally
        those of :data:`OPTIONAL_COLUMNS`.
    images
        ``(N, 4, H, W)`` cut-outs [nanomaggy per pixel], one per row of the table (``.npy`` or FITS).
    stamp
        Centre-crop the cut-outs to ``stamp x stamp`` pixels (the stand-in's grid is 24).

    Returns
    -------
    GalaxySample
        ``catalog``: QTable with ``row`` (index in the file), ``flux_g..z`` [nmgy],
        ``flux_ivar_g..z`` [nmgy-2], ``shape_r`` [arcsec], ``shape_e1``, ``shape_e2``, ``ebv``
        [mag], and ``z``, ``a_v`` [mag] when the file has them; ``images`` or None; ``meta``
        with ``source``, ``n_rows``, ``n_rejected`` and ``rejected`` (count per reason).

    Raises
    ------
    FileNotFoundError
        No file at ``path`` or ``images``.
    MissingVariableError
        A required column is absent (all are named).
    UnitsError
        A column's unit does not convert to the survey's.
    DimensionError
        The image cube is not ``(N, 4, H, W)`` with N = the table's rows.
    DataValidationError
        Not a FITS table, no rows, or no row left after the rejections.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No catalogue at {path}; give a FITS table with Legacy Survey columns.")
    try:
        with fits.open(path) as hdul:
            hdu = next((h for h in hdul if isinstance(h, fits.BinTableHDU)), None)
            if hdu is None:
                raise DataValidationError(f"{path} has no table HDU (found {[h.name for h in hdul]}); expected "
                                          "a Legacy Survey catalogue (a FITS binary table).")
            n = int(hdu.header.get("NAXIS2", 0))
            if n == 0:
                raise DataValidationError(f"{path}: the catalogue table is empty (0 rows).")
            names = {c.name.upper(): c.name for c in hdu.columns}
            missing = [col for col, _ in LEGACY_COLUMNS.values() if col not in names]
            if missing:
                raise MissingVariableError(
                    f"{path} lacks the Legacy Survey column(s) {missing} (has {sorted(names)}). The study needs "
                    f"{[c for c, _ in LEGACY_COLUMNS.values()]}: the g, r, i, z fluxes and inverse variances, "
                    "the shape (SHAPE_R, SHAPE_E1, SHAPE_E2) and the Milky-Way E(B-V).")
            cols = {k: _column(hdu, names[col], unit, path) for k, (col, unit) in LEGACY_COLUMNS.items()}
            for k, (cands, unit) in OPTIONAL_COLUMNS.items():
                found = next((names[c] for c in cands if c in names), None)
                if found is not None:
                    cols[k] = _column(hdu, found, unit, path)
    except (DataValidationError, FileNotFoundError):
        raise
    except (OSError, ValueError, TypeError, KeyError, EOFError) as err:
        raise DataValidationError(f"{path} is not a readable FITS catalogue ({type(err).__name__}: "
                                  f"{str(err)[:200]}).") from err
    cube = None
    if images is not None:
        cube = read_images(images)
        if len(cube) != n:
            raise DimensionError(f"{images} holds {len(cube)} cut-outs but {path} has {n} rows; give one "
                                 "(4, H, W) cut-out per catalogue row, in the same order.")
        if stamp is not None:
            cube = _centre_crop(cube, int(stamp), Path(images))
    bad_ivar = np.zeros(n, bool)
    for b in constants.BANDS:
        iv = cols[f"flux_ivar_{b}"]
        bad_ivar |= ~(iv.filled(np.inf) > 0)            # masked counts as "masked", below
    masked = np.zeros(n, bool)
    for v in cols.values():
        masked |= np.ma.getmaskarray(v)
    if cube is not None:
        masked |= ~np.isfinite(cube).all(axis=(1, 2, 3))
    # a negative redshift is a star or a "no redshift" sentinel (-1, -99), not a galaxy's (at
    # z = -1 the training targets' width 0.01 (1 + z) is 0 and the loss is NaN)
    bad_z = np.zeros(n, bool)
    if "z" in cols:
        bad_z = np.asarray(cols["z"].filled(0.0), float) < 0
    rejected = {"non-positive inverse variance": int((bad_ivar & ~masked).sum()),
                "masked or non-finite value": int(masked.sum())}
    if (bad_z & ~masked & ~bad_ivar).any():
        rejected["negative redshift (a star, or a sentinel such as -1)"] = int((bad_z & ~masked & ~bad_ivar).sum())
    keep = ~(bad_ivar | masked | bad_z)
    n_rej = int(n - keep.sum())
    if not keep.any():
        raise DataValidationError(f"{path}: none of the {n} rows is usable ({rejected}).")
    if n_rej:
        warnings.warn(f"{path}: dropped {n_rej} of {n} rows ({', '.join(f'{k}: {v}' for k, v in rejected.items() if v)})",
                      stacklevel=2)
    cat = QTable()
    cat["row"] = np.flatnonzero(keep)
    for k, v in cols.items():
        unit = LEGACY_COLUMNS.get(k, OPTIONAL_COLUMNS.get(k, (None, None)))[1]
        vals = np.asarray(v.filled(np.nan))[keep]
        cat[k] = vals * unit if unit is not None else vals
    meta = dict(source=str(path), images=str(images) if images is not None else "", n_rows=n, n_rejected=n_rej,
                rejected=rejected, survey="Legacy Surveys DR10", pixel_scale_arcsec=constants.PIXEL_SCALE_ARCSEC,
                dusty_av=SyntheticConfig.dusty_av, extended_arcsec=SyntheticConfig.extended_arcsec)
    return GalaxySample(cat, None if cube is None else np.ascontiguousarray(cube[keep]), meta)


#: TUNIT cards as DR10 sweep files spell them
_TUNIT = {u.nmgy: "nanomaggy", u.nmgy**-2: "1/nanomaggy^2", u.arcsec: "arcsec", u.mag: "mag"}


def write_legacy_survey(path: str | Path, catalog: QTable) -> Path:
    """Write a study catalogue (``flux_g..z`` [nmgy], ``flux_ivar_g..z`` [nmgy-2], ``shape_r``
    [arcsec], ``shape_e1/e2``, ``ebv`` [mag], and ``z``, ``a_v`` [mag] when present) as a
    Legacy Survey DR10 FITS table: the survey's column names (:data:`LEGACY_COLUMNS`, float32
    like a sweep file, TUNIT cards in the survey's units), ``Z`` (float64) and ``AV``; what
    :func:`read_legacy_survey` reads back."""
    path = Path(path)
    cols = []
    for k, (name, unit) in LEGACY_COLUMNS.items():
        v = u.Quantity(catalog[k]).to_value(unit) if unit is not None else np.asarray(catalog[k], float)
        cols.append(fits.Column(name=name, format="E", array=np.asarray(v, np.float32), unit=_TUNIT.get(unit)))
    if "z" in catalog.colnames:
        cols.append(fits.Column(name="Z", format="D", array=np.asarray(catalog["z"], float)))
    if "a_v" in catalog.colnames:
        cols.append(fits.Column(name="AV", format="E", array=np.asarray(u.Quantity(catalog["a_v"]).to_value(u.mag),
                                                                         np.float32), unit="mag"))
    path.parent.mkdir(parents=True, exist_ok=True)
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(cols)]).writeto(path, overwrite=True)
    return path
