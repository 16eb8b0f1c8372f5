"""astro's data layer is one folder, ``astro/data/``: the modules that lived flat in astro/
(``astro.catalog``, ``astro.split``, ``from astro import files``, ...) still import at their old paths,
as the module at the new path, with a DeprecationWarning at the user's import line until scimech
0.3.0; their names come in one import (``from astro.data import read_legacy_survey``), silently; and a
study's folder from before the move stays current (a fingerprint names a moved dataclass by its old
module; a catalogue's sample fingerprint does not name modules)."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]

#: the modules that lived flat in astro/ and read, split or write your galaxies, and their new homes,
#: written down from the package's listing before the move (the split under the role name the ocean
#: and neuro data layers give it, `splits`); astro.units (the study's resumable units) stayed
OLD_TO_NEW = {
    "catalog": "catalog",
    "cutout_folder": "cutout_folder",
    "cutouts": "cutouts",
    "files": "files",
    "split": "splits",
    "sweeps": "sweeps",
}


def _run(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


OLD_ASTRO_IMPORT_STATEMENTS = r"""
import json, warnings
out = {}
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    import astro.catalog                                     # noqa
    from astro import cutouts
    from astro.cutout_folder import read_cutout_folder
    from astro.files import load_sample
    import astro.split as old_split
    from astro.sweeps import catalogue_files
import astro.data.catalog, astro.data.cutouts, astro.data.cutout_folder, astro.data.files
import astro.data.splits, astro.data.sweeps
out["same"] = [
    astro.catalog is astro.data.catalog,
    cutouts is astro.data.cutouts,
    read_cutout_folder is astro.data.cutout_folder.read_cutout_folder,
    load_sample is astro.data.files.load_sample,
    old_split is astro.data.splits,
    catalogue_files is astro.data.sweeps.catalogue_files,
]
out["warned"] = sorted({(w.filename, w.lineno, str(w.message)) for w in seen if w.category is DeprecationWarning})
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    import astro
    vars(astro).pop("files", None)
    attribute = astro.files                                  # an attribute of the package
out["attribute"] = [attribute is astro.data.files, [str(w.message) for w in seen]]
print(json.dumps(out))
"""


def test_old_paths_give_the_modules_of_astro_data_and_warn_at_the_import_line():
    out = _run(OLD_ASTRO_IMPORT_STATEMENTS)
    assert out["same"] == [True] * 6
    lines = {"catalog": 6, "cutouts": 7, "cutout_folder": 8, "files": 9, "split": 10, "sweeps": 11}
    assert sorted(out["warned"]) == sorted(
        [
            "<string>",
            line,
            f"astro.{old} moved to astro.data.{OLD_TO_NEW[old]}; the old path will be removed in scimech 0.3.0",
        ]
        for old, line in lines.items()
    )
    same, said = out["attribute"]
    assert same and said == ["astro.files moved to astro.data.files; the old path will be removed in scimech 0.3.0"]


def test_the_table_and_the_folder_agree_and_no_file_is_left_at_an_old_path():
    from scimech._moved import ASTRO_MOVED, TABLES, new_path, old_path

    assert ASTRO_MOVED == {old: f"data.{new}" for old, new in OLD_TO_NEW.items()} and TABLES["astro"] is ASTRO_MOVED
    assert not [m for m in OLD_TO_NEW if (REPO / "astro" / f"{m}.py").exists()]
    assert {p.stem for p in (REPO / "astro" / "data").glob("*.py")} == set(OLD_TO_NEW.values()) | {"__init__"}
    assert (REPO / "astro" / "units.py").exists()  # the study's units, not data: they stayed
    assert new_path("astro.data") is None and old_path("astro.data") == "astro.data"
    assert new_path("astro.split") == "astro.data.splits" and old_path("astro.data.splits") == "astro.split"
    assert new_path("astro.units") is None and new_path("astro.splits") is None and new_path("astrox.catalog") is None
    with pytest.raises(AttributeError, match="no attribute 'no_such_module'"):
        import astro

        astro.no_such_module  # noqa: B018


def test_the_names_of_the_data_layer_come_silently_from_the_package():
    import astro.data as ad

    names = ("read_legacy_survey", "write_legacy_survey", "split_catalogue", "load_sample", "catalogue_files", "Cube")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = {name: getattr(ad, name) for name in names}
    assert set(names) <= set(ad.__all__) and set(names) <= set(dir(ad))
    assert got["read_legacy_survey"].__module__ == "astro.data.catalog"
    assert got["split_catalogue"].__module__ == "astro.data.splits"
    assert got["load_sample"].__module__ == "astro.data.files"
    assert set(OLD_TO_NEW.values()) <= set(dir(ad))


def test_finding_a_catalogues_files_imports_neither_astropy_nor_torch():
    """The package gathers its names lazily: the sweeps module (what the dry run reads) stays light."""
    out = _run(
        "import json, sys\nfrom astro.data import catalogue_files\n"
        "print(json.dumps([m for m in ('astropy', 'torch') if m in sys.modules]))\n"
    )
    assert out == []


def test_a_study_folder_from_before_the_move_stays_current(tmp_path, monkeypatch):
    """Fingerprints of a cut-out cube and a cut-out folder's match (dataclasses of moved modules: a
    fingerprint names a dataclass's module) and of a catalogue read from a file are those the code wrote
    before the move (computed with scimech.run.fingerprint at the commit before it)."""
    from astro import synthetic
    from astro.data.catalog import read_legacy_survey, write_legacy_survey
    from astro.data.cutout_folder import CutoutMatch
    from astro.data.cutouts import Cube
    from astro.resume import _sample_fingerprint
    from scimech.run.fingerprint import fingerprint

    cube = Cube(
        np.arange(16.0).reshape(1, 4, 2, 2),
        ("g", "r", "i", "z"),
        "BANDS",
        "nanomaggy",
        "",
        0.262,
        "PIXSCALE",
        "(N, bands, H, W)",
    )
    assert fingerprint(cube) == "abee9a4c71063d8f"
    assert fingerprint(CutoutMatch(cube, np.array([True]), "by identifier", [], [])) == "d7904ac2404e6450"
    monkeypatch.chdir(tmp_path)  # the sample's meta names its file as given: a relative path
    write_legacy_survey("cat.fits", synthetic.make_galaxies(30, seed=3).catalog)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the dropped rows' warning: not what is tested here
        sample = read_legacy_survey("cat.fits")
    assert _sample_fingerprint(sample) == "91221f61e9084c8d"
