"""Every study's run hands on one evidence type (scimech.studies.evidence.Evidence), and the study's
findings, planted truth and outcome take it; each study's evidence built cheaply (fake units, hand-made
window errors, datasets with the attributes the studies write), each answer checked against the numbers
put in."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
import xarray as xr

from scimech.studies.contract import Evidence as ContractEvidence
from scimech.studies.evidence import Evidence
from scimech.studies.verdicts import PlantedTruthRow


def test_a_study_must_say_its_measurements_and_planted_rows():
    class Half(Evidence):
        def measurements(self):
            return {}

    with pytest.raises(TypeError, match="planted_rows"):
        Half()
    assert ContractEvidence is Evidence  # the contract names the same type


@pytest.fixture(scope="module")
def ocean_evidence():
    from ocean.evidence import Evidence as OceanEvidence
    from ocean.evidence import analyse
    from ocean.plan import StudyConfig

    from ..ocean.test_analysis import NS, NX, NY, fake_unit

    rng = np.random.default_rng(5)
    t = rng.standard_normal((NS, 6, NY, NX))
    units = {}
    for s in (0, 1):
        units[("mixed", s)] = fake_unit(t + 0.01 * rng.standard_normal(t.shape), t, "mixed", s)  # recovers
        units[("prediction_only", s)] = fake_unit(rng.standard_normal(t.shape), t, "prediction_only", s)
    return OceanEvidence(analyse(units), units, StudyConfig(), seconds=12.5)


def test_ocean_evidence_is_the_shared_type_and_its_rows_are_the_summary_cells(ocean_evidence, tmp_path):
    from ocean.study import OceanStudy

    ev = ocean_evidence
    assert isinstance(ev, Evidence)
    assert ev.measurements()["summary"] is ev.summary
    assert dict(ev.phase_seconds()) == {"run": 12.5}
    rows = ev.planted_rows()
    # one row per (truth, regime) cell of the summary, its verdict the cell's; the mixed regime's
    # free concept is the planted hidden flux (t + 1% noise: recovered)
    rec = ev.summary["recovered"]
    assert any(r.truth == "q_hidden in free_0" and r.label == "mixed" and r.recovered for r in rows)
    assert len({(r.truth, r.label) for r in rows}) == len(rows)
    for r in rows:
        assert r.recovered == bool(rec.sel(truth=r.truth, regime=r.label)), (r.truth, r.label)
    # the contract's steps take it: the recovery line counts the counted rows recovered
    study = OceanStudy()
    first = study.planted_truth(ev).splitlines()[0]
    counted = [r for r in rows if r.counted and r.recovered is not None]
    k, n = map(int, re.search(r"(\d+) of (\d+) recovered", first).groups())
    assert (k, n) == (sum(r.recovered for r in counted), len(counted))
    assert all(f.verdict is not None for f in study.findings(ev))
    # your product: nothing planted, and the study says so instead of a planted-truth line
    from dataclasses import replace

    yours = replace(ev, config=replace(ev.config, data=str(tmp_path / "mine.zarr")))
    assert yours.planted_rows() is None and not re.search(r"\d+ of \d+ recovered", study.planted_truth(yours))


def _astro_results(galaxies: str, planted: int) -> dict[str, xr.Dataset]:
    preds = xr.Dataset({"z_true": ("sample", [0.1, 0.4, 0.9])}, attrs={"galaxies": galaxies})
    return {"predictions": preds, "interventions": xr.Dataset(attrs={"planted": planted})}


def test_astro_evidence_is_the_shared_type():
    from astro.evidence import AstroEvidence
    from astro.study import AstroStudy

    res = _astro_results("catalog", 0)
    ev = AstroEvidence(res, {"head study": 3.0})
    assert isinstance(ev, Evidence)
    assert dict(ev.measurements()) == res and dict(ev.phase_seconds()) == {"head study": 3.0}
    # your catalogue: real galaxies have no planted truth, in the rows and in the contract's step
    assert ev.planted_rows() is None and AstroStudy().planted_truth(ev) is None
    # the synthetic sky with a model that carries no planted mechanism: nothing to score, no row
    assert AstroEvidence(_astro_results("synthetic", 0)).planted_rows() == []
    assert dict(AstroEvidence(res).phase_seconds()) == {}


def test_neuro_run_is_the_shared_type_and_hands_on_its_window_errors(tmp_path):
    from neuro.evidence import gather_evidence
    from neuro.plan import StudySettings
    from neuro.run import StudyRun
    from neuro.study import NeuroStudy

    base = {"last_value": {"test": np.array([0.5, 0.7, 0.6])}, "ridge_arx": {"test": np.array([0.3, 0.2, 0.4])}}
    trial = np.array([0, 0, 1])
    task = SimpleNamespace(
        signal="rates",
        meta={},
        n_neurons=5,
        train_series=np.zeros((3, 10, 5)),
        test=SimpleNamespace(trial=trial),
        ood={},
    )
    ev = gather_evidence(task, [0], {}, {0: base}, {"last_value": 1.0, "ridge_arx": 0.5})
    rows = [
        PlantedTruthRow("wiring", "sign accuracy", 0.9, 0.8, 0.95, 0.7, True),
        PlantedTruthRow("beat", "frequency error", 0.4, 0.1, 0.9, 0.2, False),
    ]
    settings = StudySettings(out=tmp_path)
    run = StudyRun(settings, task, None, ev, None, {}, planted=rows, seconds={"baselines": 2.0})
    assert isinstance(run, Evidence)
    saved = run.measurements()["evidence"]
    # the best baseline by validation score (ridge ARX, 0.5 < 1.0) and its window errors, as put in
    assert saved.attrs["best_baseline"] == "ridge_arx"
    np.testing.assert_array_equal(saved["baseline_test"].values, [[0.3, 0.2, 0.4]])
    assert run.planted_rows() is rows and dict(run.phase_seconds()) == {"baselines": 2.0}
    assert NeuroStudy().planted_truth(run).splitlines()[0].startswith("neuro planted truth: 1 of 2 recovered")
