"""The CLI end to end at tiny sizes, and the quickstart notebook."""

from __future__ import annotations

import numpy as np
import pytest

from astro.data import files


@pytest.mark.slow  # a whole study from the command line
def test_cli_synth_train_study_plot(tmp_path):
    from scimech.cli.commands import main

    assert main(["astro", "generate", "--n-galaxies", "160", "--seed", "0", "--out", str(tmp_path / "train.fits")]) == 0
    assert (
        main(["astro", "synth", "--n", "60", "--seed", "1", "--out", str(tmp_path / "test.zarr")]) == 0
    )  # old spelling
    assert (
        main(
            [
                "astro",
                "train",
                "--data",
                str(tmp_path / "train.fits"),
                "--out",
                str(tmp_path / "model"),
                "--epochs",
                "1",
                "--batch-size",
                "40",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "astro",
                "study",
                "--model",
                str(tmp_path / "model"),
                "--train",
                str(tmp_path / "train.fits"),
                "--test",
                str(tmp_path / "test.zarr"),
                "--out",
                str(tmp_path / "run"),
                "--n-bootstrap",
                "20",
            ]
        )
        == 0
    )
    report = (tmp_path / "run" / "report.md").read_text()
    assert "Findings of the reference study" in report and "reproduced" in report.lower()
    res = files.load_study(tmp_path / "run" / "study")
    assert set(res["interventions"].intervention.values) == {"zero", "mean", "resample", "patch"}
    assert res["advantage"]["advantage"].dims == ("population",)
    assert np.isfinite(res["layers"]["score"].values).all()
    (tmp_path / "run" / "findings.txt").unlink()
    assert main(["astro", "redraw", str(tmp_path / "run")]) == 0  # the run folder (or its study/ subfolder)
    assert (tmp_path / "run" / "findings.txt").read_text().startswith("1. ")


@pytest.mark.slow  # a notebook top to bottom
def test_quickstart_notebook_runs(run_notebook):
    nb = run_notebook("astro/notebooks/aion_redshift_quickstart.ipynb", timeout=300)
    assert any("ablated" in o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_study_cli_bad_settings_are_clear_errors(tmp_path, capsys):
    from scimech.cli.commands import main

    assert main(["astro", "study", "--quick", "--chunk-size", "0", "--out", str(tmp_path / "a")]) == 2
    assert "argument --chunk-size: must be a whole number >= 1. Got '0' instead." in capsys.readouterr().err
    assert main(["astro", "study", "--size", "huge", "--out", str(tmp_path / "b")]) == 2
    assert "argument --size: invalid choice: 'huge'" in capsys.readouterr().err
    assert main(["astro", "study", "--planted", "--model", str(tmp_path), "--out", str(tmp_path / "c")]) == 2
    assert "argument --model: not allowed with argument --planted" in capsys.readouterr().err
    assert main(["astro", "study", "--model", str(tmp_path), "--out", str(tmp_path / "c")]) == 2
    assert "give all of --model, --train and --test" in capsys.readouterr().err
    assert main(["astro", "study", "--data", str(tmp_path), "--out", str(tmp_path / "c")]) == 2
    assert (
        "is not a FITS file (.fits, .fits.gz, .fits.bz2) or a folder holding catalog.fits or catalogue.fits or DR10 "
        "sweep files (sweep-*.fits): it seems to be a folder" in capsys.readouterr().err
    )
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()
    assert (
        main(
            [
                "astro",
                "study",
                "--model",
                str(tmp_path / "none"),
                "--train",
                "t.fits",
                "--test",
                "s.fits",
                "--out",
                str(tmp_path / "d"),
            ]
        )
        == 2
    )
    assert "argument --model: must be an existing folder" in capsys.readouterr().err  # not a traceback
    assert not (tmp_path / "d").exists()  # and the run folder is not claimed


@pytest.mark.slow  # a notebook top to bottom
def test_your_own_galaxies_notebook_runs(run_notebook):
    nb = run_notebook("astro/notebooks/your_own_galaxies.ipynb", timeout=300)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "dropped 1 of 120 rows" in text and "SHAPE_R" in text and "Report: " in text
    assert "flux cross-check" in text and "dropped: non-positive inverse variance: 1" in text  # the reading, printed
