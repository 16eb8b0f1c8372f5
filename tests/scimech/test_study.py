"""The study contract (scimech.study): verdicts only from numbers that are there, one writer
for the files `scimech demo` prints, studies found through entry points."""

from __future__ import annotations

import math
import sys

import pytest

from scimech.study import (
    FINDINGS_FILE,
    RECOVERY_FILE,
    PlantedTruthRow,
    assess,
    load_study,
    recovery_line,
    registered_studies,
    write_outcome,
)


def test_a_verdict_needs_finite_numbers():
    ok = assess("mixed supervision is more consistent", True, "0.83 vs 0.58", numbers={"mixed": 0.83, "pred": 0.58})
    assert ok.verdict == "REPRODUCED" and ok.line() == "REPRODUCED: mixed supervision is more consistent (0.83 vs 0.58)."
    no = assess("claim", False, numbers={"a": 1.0})
    assert no.verdict == "NOT reproduced"
    # a NaN estimate can never make a finding "NOT reproduced", whatever the rule said
    nan = assess("claim", False, "nan vs nan", numbers={"agreement mixed": math.nan, "agreement pred": 0.5})
    assert nan.verdict == "NOT ASSESSED" and "agreement mixed is not a finite number" in nan.line()
    assert assess("claim", True, numbers={"x": None}).verdict == "NOT ASSESSED"
    few = assess("consistent across seeds", True, numbers={"r": 0.9}, minimum={"seeds": (1, 2)})
    assert few.verdict == "NOT ASSESSED" and "seeds: 1 where at least 2 are needed" in few.reason
    assert assess("claim", None).verdict == "NOT ASSESSED"


def test_planted_truth_rows_count_only_what_was_assessed():
    rows = [PlantedTruthRow.from_interval("q_surf", "r", 0.9, 0.85, 0.95, 0.5),        # recovered
            PlantedTruthRow.from_interval("q_ekman", "r", 0.55, 0.48, 0.6, 0.5),       # interval reaches 0.48
            PlantedTruthRow.from_interval("eddy", "r", math.nan, math.nan, math.nan, 0.5),   # not assessed
            PlantedTruthRow.from_interval("leak", "r", 0.1, 0.05, 0.2, 0.3, above=False),    # below: recovered
            PlantedTruthRow.from_interval("contrast", "r", 0.9, 0.8, 0.95, 0.5, counted=False)]
    assert [r.recovered for r in rows] == [True, False, None, True, True]
    assert recovery_line("ocean", rows, "seed 0") == "ocean planted truth: 2 of 3 recovered (seed 0; 1 not assessed)"


def test_write_outcome_writes_the_two_files(tmp_path):
    f = [assess("a", True, "1 > 0", numbers={"x": 1}), "a line as it is"]
    paths = write_outcome(tmp_path, f, "astro planted truth: 2 of 2 recovered\n\ntable")
    assert {p.name for p in paths} == {RECOVERY_FILE, FINDINGS_FILE}
    assert (tmp_path / FINDINGS_FILE).read_text() == "REPRODUCED: a (1 > 0).\na line as it is\n"
    assert (tmp_path / RECOVERY_FILE).read_text().splitlines()[0] == "astro planted truth: 2 of 2 recovered"
    assert not list(tmp_path.glob("*.tmp*"))   # atomic: no temporary left behind


def test_the_shipped_studies_are_registered_and_follow_the_contract():
    studies = registered_studies()
    assert list(studies)[:3] == ["ocean", "astro", "neuro"]
    for name in ("ocean", "astro", "neuro"):
        mod = load_study(name)
        assert isinstance(mod.TITLE, str) and mod.TITLE
        assert callable(mod.register) and callable(mod.demo)
    with pytest.raises(KeyError, match="installed: ocean, astro, neuro"):
        load_study("weather")


def test_a_study_of_yours_is_found_through_its_entry_point(tmp_path, monkeypatch):
    """A package declaring [project.entry-points."scimech.studies"] appears in `scimech --help`."""
    pkg = tmp_path / "mystudy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "cli.py").write_text(
        "TITLE = 'weather: a toy study'\n"
        "def register(sub):\n    sub.add_parser('weather', help=TITLE).set_defaults(func=lambda a: 0)\n"
        "def demo(out_dir, quick=True):\n    return out_dir\n")
    dist = tmp_path / "mystudy-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mystudy\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[scimech.studies]\nweather = mystudy.cli\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert registered_studies()["weather"] == "mystudy.cli"
    from scimech.cli import build_parser

    assert "weather: a toy study" in build_parser().format_help()
    sys.modules.pop("mystudy.cli", None)
    sys.modules.pop("mystudy", None)


def test_submodules_are_reachable_as_attributes_and_api_names_stay_functions():
    import subprocess

    code = ("import scimech, inspect; assert inspect.ismodule(scimech.metrics); assert callable(scimech.record); "
            "import scimech.record; assert callable(scimech.record) and not inspect.ismodule(scimech.record)")
    subprocess.run([sys.executable, "-c", code], check=True)
