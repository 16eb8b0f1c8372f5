"""Your galaxies, in one import: a Legacy Survey catalogue and its cut-outs read, split by object, and
the study's samples written and read back.

The data layer is a subpackage, one module per concern; this package gathers their public names
(``from astro.data import read_legacy_survey``), each imported when first used, so that finding a
catalogue's files (:mod:`astro.data.sweeps`) imports neither astropy nor torch:

- :mod:`astro.data.catalog`: :func:`read_legacy_survey`, a Legacy Survey DR10 catalogue (with DESI
  redshifts joined to its rows, and cut-outs) read as a :class:`~astro.synthetic.GalaxySample`, with
  what was read said back (:class:`scimech.studies.reading.Reading`); :func:`write_legacy_survey`,
  a study catalogue written with the survey's columns and units;
- :mod:`astro.data.sweeps`: the files a catalogue names (one file, a list, a glob, a folder of DR10
  ``sweep-*.fits``) and the sky patch of each sweep file;
- :mod:`astro.data.cutouts`: :func:`read_cube`, an ``(N, bands, H, W)`` cut-out cube with its band
  order, units and pixel scale read from its header, and :func:`check_fluxes`, its fluxes
  cross-checked against the catalogue's;
- :mod:`astro.data.cutout_folder`: :func:`read_cutout_folder`, a folder of one FITS cut-out per
  galaxy matched to the catalogue's rows by ``TARGETID`` or sky position;
- :mod:`astro.data.splits`: :func:`split_catalogue`, training and test galaxies split by object
  identity (``TARGETID``, ``RELEASE`` + ``BRICKID`` + ``OBJID``; scikit-learn's
  ``GroupShuffleSplit``), never by row;
- :mod:`astro.data.files`: the study's files: :func:`load_sample` / :func:`save_sample` (``.fits`` /
  ``.zarr``), :func:`load_adapter` (a stand-in or AION-1 checkpoint folder) and
  :func:`save_study` / :func:`load_study` (one netCDF per part of the results).

The old flat paths (``astro.catalog``, ``astro.cutouts``, ``astro.cutout_folder``, ``astro.files``,
``astro.split``, ``astro.sweeps``) give these modules, with a DeprecationWarning, until scimech 0.3.0
(:mod:`scimech._moved`).
"""

from __future__ import annotations

import lazy_loader as _lazy

#: the data layer's modules, and the public names each defines: imported when first used (scientific
#: Python's SPEC 1, lazy_loader)
__getattr__, _dir, __all__ = _lazy.attach(
    __name__,
    submodules=["catalog", "cutout_folder", "cutouts", "files", "splits", "sweeps"],
    submod_attrs={
        "catalog": ["read_legacy_survey", "write_legacy_survey", "LEGACY_COLUMNS"],
        "cutouts": ["Cube", "read_cube", "check_fluxes"],
        "cutout_folder": ["read_cutout_folder"],
        "files": ["load_sample", "save_sample", "load_adapter", "save_study", "load_study"],
        "splits": ["split_catalogue", "split_by_object"],
        "sweeps": ["catalogue_files"],
    },
)


def __dir__() -> list[str]:
    """The data layer's public names and its modules (``dir(data)``, tab completion)."""
    return list(__all__)
