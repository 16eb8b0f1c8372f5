"""The README's figures are those of the commands they cite (scripts/readme_figures.py).

Default tier: the README's figures blocks and the script's reading of output files, on files written
here with known contents. Slow tier: ``scimech demo`` (ocean, the planted astro stand-in, neuro at
their quick sizes, as ``make demo``) and ``scimech astro study --quick`` run here, and every number of
the README's blocks they give is compared with their output files at the README's printed precision.
The neuro block of the medium study (``scimech neuro study --size medium``, about 7 minutes on 2
cores on its own) is not run here; ``python scripts/readme_figures.py --check`` compares it with a
medium run's folder.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def _script():
    spec = importlib.util.spec_from_file_location("readme_figures", REPO / "scripts" / "readme_figures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["readme_figures"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


rf = _script()


# --- default tier --------------------------------------------------------------------------------
def test_every_block_has_one_pair_of_markers_inside_a_paragraph():
    text = README.read_text()
    for name in rf.BLOCKS:
        assert text.count(f"<!-- figures {name}: begin") == 1, name
        assert text.count(f"<!-- figures {name}: end -->") == 1, name
    assert set(rf.readme_blocks(text)) == set(rf.BLOCKS)
    # a line opening with "<!--" would start an HTML block and split the README's paragraph in two
    assert not [line for line in text.splitlines() if line.lstrip().startswith("<!-- figures")]


def test_rewrite_replaces_the_bodies_only():
    text = "a <!-- figures x: begin (note) -->old 1.0<!-- figures x: end --> b <!-- figures y: begin -->2<!-- figures y: end -->"
    out = rf.rewrite(text, {"x": "new 3.5"})
    assert (
        out
        == "a <!-- figures x: begin (note) -->new 3.5<!-- figures x: end --> b <!-- figures y: begin -->2<!-- figures y: end -->"
    )
    assert rf.readme_blocks(out) == {"x": "new 3.5", "y": "2"}
    with pytest.raises(rf.FiguresError, match=r"no markers for \['z'\]"):
        rf.rewrite(text, {"z": "1"})


def test_numbers_and_formats_as_printed():
    assert rf.numbers("RMSE 98.1 [87.2, 110] W m-2, [-32.4, -3.9]; ~1e-12; 97-105; context-256: 8 of 13") == [
        "98.1",
        "87.2",
        "110",
        "-32.4",
        "-3.9",
        "1e-12",
        "97",
        "105",
        "8",
        "13",
    ]
    assert rf.order(2.4584e-12) == "1e-12" and rf.order(0.09) == "1e-2"
    assert rf.pct(0.046667) == "4.7" and rf.g3(109.96) == "110" and rf.g3(0.023333) == "0.0233"


def test_outcome_files_are_read_as_written(tmp_path):
    (tmp_path / "recovery.txt").write_text("ocean planted truth: 8 of 13 recovered (...)\n\ntable\n")
    (tmp_path / "findings.txt").write_text(
        "REPRODUCED: skill ...\nNOT reproduced: consistency ...\n3. NOT ASSESSED (why): x\n4. MISSED (planted): y\n"
    )
    assert rf.recovery_count(tmp_path) == (8, 13)
    assert rf.findings_verdicts(tmp_path) == ["REPRODUCED", "NOT reproduced", "NOT ASSESSED", "MISSED"]
    with pytest.raises(rf.FiguresError, match="has no summary.nc"):
        rf._file(tmp_path, "summary.nc")


def test_competence_cells_are_the_saved_table(tmp_path):
    from scimech.studies.competence import Metric, competence, save_competence, synthetic_world

    rng = np.random.default_rng(0)
    err = {"model": rng.normal(0, 1.0, 200), "climatology": rng.normal(0, 2.0, 200)}
    rmse = Metric("RMSE", lambda e: float(np.sqrt(np.mean(e**2))), units="W m-2")
    save_competence(competence(err, dissected=["model"], metrics=[rmse], world=synthetic_world("t")), tmp_path)
    got = rf.competence_cells(tmp_path)
    for m, e in err.items():  # the value is the RMSE of the errors, computed here
        assert got["cells"][m, "RMSE"][0] == pytest.approx(np.sqrt(np.mean(e**2)), rel=1e-12)
    value, low, high = got["cells"]["model", "RMSE"][:3]
    assert low < value < high
    assert got["best"] == {"RMSE": "climatology"} and got["verdict"]["model"] == "competent"


# --- slow tier: the commands the README cites ----------------------------------------------------
#: block -> which run folder(s) it reads: ``scimech demo``'s study folder or the quick astro study's
QUICK_BLOCKS = {
    "ocean": ("demo/ocean",),
    "astro": ("astro",),
    "astro-planted": ("demo/astro",),
    "neuro-quick": ("demo/neuro",),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``scimech demo`` and ``scimech astro study --quick``, as the README cites them."""
    from scimech.cli import main

    root = tmp_path_factory.mktemp("readme_runs")
    assert main(["demo", "--out", str(root / "demo")]) == 0
    assert main(["astro", "study", "--quick", "--out", str(root / "astro")]) == 0
    return root


def _differences(readme: str, run: str) -> list[str]:
    said, got = rf.numbers(readme), rf.numbers(run)
    if len(said) != len(got):
        return [f"the README's block has {len(said)} numbers, the run's {len(got)}: {said} vs {got}"]
    return [f"README {a} where the run gives {b} (number {i + 1})" for i, (a, b) in enumerate(zip(said, got)) if a != b]


@pytest.mark.slow  # scimech demo (ocean, planted astro, neuro) and the quick astro study: about 6 min on 2 cores
@pytest.mark.parametrize("block", sorted(QUICK_BLOCKS))
def test_readme_block_is_the_run(runs, block):
    shown = rf.readme_blocks(README.read_text())[block]
    body = rf.render(block, *(runs / f for f in QUICK_BLOCKS[block]))
    assert not _differences(shown, body), (
        f"README block {block!r} differs from the run: {_differences(shown, body)}; "
        "rewrite it with python scripts/readme_figures.py --write"
    )
    assert shown == body


@pytest.mark.slow  # reuses the runs above
def test_readme_headline_figures_read_from_the_files(runs):
    """The headline numbers, read here from the output files with xarray and pandas, not by the script."""
    import pandas as pd

    blocks = rf.readme_blocks(README.read_text())
    flat = {k: re.sub(r"\s+", " ", v) for k, v in blocks.items()}

    comp = xr.load_dataset(runs / "demo/ocean/competence.nc")
    mixed = comp.sel(model="mixed", metric="RMSE")
    assert (
        f"RMSE {float(mixed.value):.3g} [{float(mixed.ci_low):.3g}, {float(mixed.ci_high):.3g}] W m-2 (mixed)"
        in flat["ocean"]
    )
    summary = xr.load_dataset(runs / "demo/ocean/run/summary.nc")
    cka = summary["cka_mean"]
    assert f"({float(cka.sel(regime='mixed')):.3f} vs {float(cka.sel(regime='prediction_only')):.3f}," in flat["ocean"]
    expected = summary["recovery_expected"].astype(bool)  # rows built to be recovered (not the contrasts)
    counted = int((summary["recovered"].astype(bool) & expected).sum())
    assert f"{counted} of {int(expected.sum())} recovered" in flat["ocean"]

    astro = xr.load_dataset(runs / "astro/competence.nc").sel(model="photometry-only")
    sig, out = astro.sel(metric="sigma_NMAD"), astro.sel(metric="outlier fraction")
    assert f"sigma_NMAD is {float(sig.value):.3f} [{float(sig.ci_low):.3f}, {float(sig.ci_high):.3f}]" in flat["astro"]
    assert (
        f"{100 * float(out.value):.1f} % [{100 * float(out.ci_low):.1f}, {100 * float(out.ci_high):.1f}]"
        in flat["astro"]
    )

    rec = pd.read_csv(runs / "demo/neuro/recovery.csv")
    assert flat["neuro-quick"] == f"({int(rec['recovered'].sum())} of {len(rec)})"
