"""A Legacy Survey catalogue as it is distributed: the files a source names (one file, a list, a glob or
a folder) and the sky patch of each DR10 sweep file, read from its name.

DR10's sweep catalogues (legacysurvey.org/dr10/files, "Sweep Catalogs": ``<region>/sweep/10.1/``) come
one file per sky patch of 10 deg in RA by 5 deg in Dec, named
``sweep-<ramin><decmin>-<ramax><decmax>.fits``: the RA in three digits [deg], then ``p`` (plus) or ``m``
(minus) and the Dec in three digits [deg] of the patch's lower and upper corners
(``sweep-210p025-220p030.fits``: 210 <= RA < 220, 25 <= Dec < 30). The south (DECam) and the north
(BASS / MzLS) each have their own sweeps of the same names; a galaxy in the overlap is in both (joined
by :func:`astro.data.splits.join_positions`).

Cut-outs come one FITS file per galaxy (the Legacy Survey viewer's ``fits-cutout``): a folder of them is
told by :func:`holds_cutouts` (read and matched to the rows by :mod:`astro.data.cutout_folder`).
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from pathlib import Path

from scimech.errors import ConfigError

__all__ = [
    "Source",
    "catalogue_files",
    "sweep_patch",
    "source_text",
    "holds_cutouts",
    "SWEEP_GLOB",
    "CATALOGUE_NAMES",
    "CUTOUT_SUFFIXES",
]

#: one path (a file, a folder, a glob) or several
Source = str | os.PathLike | Sequence[str | os.PathLike]
#: the sweep files a folder is searched for
SWEEP_GLOB = "sweep-*.fits"
#: a folder without sweep files: its one catalogue
CATALOGUE_NAMES = ("catalog.fits", "catalogue.fits")
#: the files a folder of per-galaxy cut-outs is searched for
CUTOUT_SUFFIXES = (".fits", ".fits.gz", ".fits.fz")
_SWEEP = re.compile(r"^sweep-(\d{3})([pm])(\d{3})-(\d{3})([pm])(\d{3})\.fits(?:\.gz)?$")


def _has_glob(text: str) -> bool:
    return any(c in text for c in "*?[")


def catalogue_files(source: Source) -> list[Path]:
    """The catalogue files ``source`` names, in order: a file; a list of files; a glob (sorted); a
    folder: its ``sweep-*.fits`` files (sorted), else its ``catalog.fits`` / ``catalogue.fits``.

    Raises
    ------
    FileNotFoundError
        A path that is not there, or a glob that matches nothing.
    ConfigError
        An empty list, a folder without catalogues, or a file named twice.
    """
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        if not Path(text).exists() and _has_glob(text):
            found = sorted(Path(p) for p in glob.glob(text))
            if not found:
                raise FileNotFoundError(f"No file matches {text}; check the pattern (quote it in a shell).")
            return _distinct(found)
        path = Path(text)
        if path.is_dir():
            return [_folder(path)] if not sorted(path.glob(SWEEP_GLOB)) else sorted(path.glob(SWEEP_GLOB))
        if not path.exists():
            raise FileNotFoundError(f"No catalogue at {path}; give a FITS table with Legacy Survey columns.")
        return [path]
    paths = [Path(p) for p in source]
    if not paths:
        raise ConfigError("No catalogue files given (an empty list); give one file, several, a glob or a folder.")
    out = []
    for p in paths:
        out += catalogue_files(p)
    return _distinct(out)


def _folder(path: Path) -> Path:
    found = [path / n for n in CATALOGUE_NAMES if (path / n).is_file()]
    if not found:
        raise ConfigError(
            f"{path} is a folder without a catalogue: no {SWEEP_GLOB} (DR10 sweep files) and no "
            f"{' or '.join(CATALOGUE_NAMES)}; put your catalogue files there, or give the files themselves."
        )
    return found[0]


def _distinct(paths: list[Path]) -> list[Path]:
    seen: dict[Path, Path] = {}
    for p in paths:
        key = p.resolve()
        if key in seen:
            raise ConfigError(f"{p} is given twice (as {seen[key]}); give each catalogue file once.")
        seen[key] = p
    return paths


def sweep_patch(name: str | Path) -> tuple[float, float, float, float] | None:
    """``(ra_min, ra_max, dec_min, dec_max)`` [deg] of a DR10 sweep file from its name
    (``sweep-210p025-220p030.fits`` -> ``(210, 220, 25, 30)``); ``None`` for another name."""
    m = _SWEEP.match(Path(name).name)
    if not m:
        return None
    ra0, s0, d0, ra1, s1, d1 = m.groups()
    return float(ra0), float(ra1), (-1 if s0 == "m" else 1) * float(d0), (-1 if s1 == "m" else 1) * float(d1)


def source_text(paths: list[Path]) -> str:
    """The files in words, for a reading's source line: one path, or ``<folder>/{a, b, ...} (n files)``."""
    if len(paths) == 1:
        return str(paths[0])
    parents = {str(p.parent) for p in paths}
    if len(parents) == 1:
        names = [p.name for p in paths]
        shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        return f"{parents.pop()}/{{{shown}}} ({len(paths)} files)"
    return f"{len(paths)} files: " + "; ".join(map(str, paths[:4])) + ("; ..." if len(paths) > 4 else "")


def holds_cutouts(path: Path) -> bool:
    """Whether ``path`` is a folder holding FITS files (:data:`CUTOUT_SUFFIXES`): per-galaxy cut-outs, as
    ``--images`` takes them (what each holds is read, and refused if need be, by :mod:`astro.data.cutout_folder`)."""
    return path.is_dir() and any(p.is_file() and p.name.lower().endswith(CUTOUT_SUFFIXES) for p in path.iterdir())
