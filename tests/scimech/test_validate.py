"""The planted-mechanism suite: it recovers what is planted, and fails visibly when a method is broken.

The planted truths are checked here independently of the suite (plain torch hooks,
closed-form values, large samples), and the broken-method tests break the *core's*
methods (the site writer, the probe's fit, the site resolver), never the suite itself.
"""

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

import scimech.studies.validate as sv
from scimech.analysis import probe as probe_mod
from scimech.analysis.attribution import attribute
from scimech.capture import sites as sites_mod
from scimech.causal import intervene as intervene_mod
from scimech.causal import sweep as sweep_mod
from scimech.cli.commands import main
from scimech.run.results import load
from scimech.studies.validate import (
    ablation_choice,
    hidden_concept,
    inert,
    known_attributions,
    silent,
)

CAUSAL = ("ablation_zero", "ablation_mean", "ablation_resample", "patching")
N_QUICK = 512  # samples per case at --quick


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("validate")
    rc = main(["validate", "--quick", "--out", str(out)])
    return rc, out, load(out / "validation.nc")


def _est(ds, case, technique, component):
    return float(ds.estimate.sel(case=case, technique=technique, component=component))


# --- the suite recovers every planted row ------------------------------------------------------------------


def test_quick_suite_recovers_every_planted_row_and_writes_its_files(quick):
    rc, out, ds = quick
    assert rc == 0
    assert sv.missed(ds) == []
    assert set(ds.dims) == {"case", "technique", "component"}
    assert list(ds.case.values) == list(sv.CASES)
    assert ds.attrs["scimech_version"] and json.loads(ds.attrs["config"])["n"] == N_QUICK
    assert (ds.passed == 1).all()
    n_rows = int(ds.truth.notnull().sum())
    # both outcomes are planted, so a method that flags everything, or nothing, fails some row
    assert 0 < int((ds.truth == 1).sum()) < n_rows
    report = (out / "report.md").read_text()
    assert f"All {n_rows} planted rows recovered" in report
    assert "records its ablation method" in report  # the ablation_choice case says why the method is recorded
    assert (out / "report.html").exists()


def test_measured_effects_match_their_analytic_values(quick):
    ds = quick[2]
    # exact: a constant the output adds, components with zero readout weight, unused inputs
    assert _est(ds, "ablation_choice", "ablation_zero", "offset") == pytest.approx(ablation_choice.OFFSET, abs=1e-5)
    for t in CAUSAL:
        assert _est(ds, "inert", t, "inert") == 0.0
        assert _est(ds, "silent", t, "idle") == 0.0
    for feature in ("x4", "x5", "x6", "x7"):
        assert _est(ds, "attribution", "integrated_gradients", feature) == 0.0
    # b (2 - b) at the reference mean b = 2 p (p: the fraction of x1 > 0 among 256 references, standard
    # error 0.031) is 1 - 4 (p - 1/2)^2: within 0.05 of 1 while |p - 1/2| < 0.11 (3.6 standard errors)
    assert _est(ds, "ablation_choice", "ablation_mean", "bimodal") == pytest.approx(1.0, abs=0.05)

    # sample means of n = 512 draws: within 4 standard errors (sd / sqrt(n)) of the population value
    def close(value, mean, sd):
        assert abs(value - mean) < 4 * sd / math.sqrt(N_QUICK), (value, mean)

    mu = math.sqrt(2 / math.pi)  # E|x| for x ~ N(0, 1)
    close(_est(ds, "inert", "ablation_zero", "used"), mu, math.sqrt(1 - mu**2))
    close(_est(ds, "inert", "ablation_resample", "used"), 2 / math.sqrt(math.pi), math.sqrt(2 - 4 / math.pi))
    close(_est(ds, "silent", "ablation_zero", "magnitude"), mu, math.sqrt(1 - mu**2))
    close(_est(ds, "silent", "ablation_zero", "product"), 2 / math.pi, math.sqrt(1 - 4 / math.pi**2))
    # x0 x1 - x0' x1' is Laplace(0, 1): E|.| = 1, sd of |.| = 1
    close(_est(ds, "silent", "patching", "product"), 1.0, 1.0)
    # ||x0| - |x0'||: mean (2 - sqrt 2) 2 / sqrt(pi), second moment 2 - 4 / pi
    m = (2 - math.sqrt(2)) * 2 / math.sqrt(math.pi)
    close(_est(ds, "silent", "ablation_resample", "magnitude"), m, math.sqrt(2 - 4 / math.pi - m**2))
    close(_est(ds, "attribution", "integrated_gradients", "x0"), 3 * mu, 3 * math.sqrt(1 - mu**2))
    close(_est(ds, "attribution", "integrated_gradients", "x2"), 1 / math.pi, 0.5 * math.sqrt(1 - 4 / math.pi**2))
    # probe for x0 on x0 + 0.5 x3: population R2 = 1 / 1.25 = 0.8 (cross-validated R2 of a 1-feature
    # ridge on 512 samples is within ~0.03 of it; the control task adds ~0.01)
    assert _est(ds, "inert", "probe", "inert") == pytest.approx(0.8, abs=0.05)
    # precision against the mechanism: a perfect probe in the "inert" case scores 1 of 2
    assert float(ds.mechanism_precision.sel(case="inert", technique="probe")) == 0.5
    assert float(ds.mechanism_precision.sel(case="ablation_choice", technique="ablation_zero")) == 0.5
    assert float(ds.mechanism_precision.sel(case="ablation_choice", technique="ablation_resample")) == 1.0


def test_missed_names_a_wrong_row(quick):
    ds = quick[2].copy(deep=True)
    ds["flagged"].loc[{"case": "silent", "technique": "ablation_mean", "component": "magnitude"}] = 0.0
    lines = sv.missed(sv.score(ds))
    assert len(lines) == 1 and lines[0].startswith("silent/magnitude [ablation_mean]: missed")


# --- the suite fails when a core method is broken ------------------------------------------------------------


def test_an_ablation_that_does_nothing_fails_the_causal_rows_and_the_command(monkeypatch, tmp_path, capsys):
    # the core's site writer (used by every ablation and patching sweep) writes nothing
    monkeypatch.setattr(sites_mod.ResolvedSite, "assign_", lambda self, t, new: None)
    monkeypatch.setattr(sites_mod.ResolvedSite, "replace", lambda self, t, new: t)
    rc = main(["validate", "--quick", "--out", str(tmp_path), "--cases", "inert", "ablation_choice"])
    assert rc == 1
    assert "MISSED inert/used [ablation_resample]: missed" in capsys.readouterr().err
    ds = load(tmp_path / "validation.nc")
    causal = ds.sel(technique=list(CAUSAL))
    assert (causal.recall == 0).all()  # every planted causal effect is missed
    lines = sv.missed(ds)
    assert len(lines) == int((causal.truth == 1).sum())
    assert all(any(f"[{t}]" in line for t in CAUSAL) for line in lines)
    assert (ds.correct.sel(case="inert", technique="probe").dropna("component") == 1).all()  # probes unaffected
    assert "Case FAILED" in (tmp_path / "report.md").read_text()


def test_a_probe_at_chance_fails_the_probe_rows(monkeypatch):
    real_fit = probe_mod.LinearProbe.fit

    def chance_fit(self, X, y):  # learns from shuffled labels: predicts at chance
        return real_fit(self, X, np.random.default_rng(0).permutation(np.asarray(y)))

    monkeypatch.setattr(probe_mod.LinearProbe, "fit", chance_fit)
    ds = sv.run(quick=True, cases=["inert", "silent"])
    wrong = sorted(line.split(":")[0] for line in sv.missed(ds))
    assert wrong == ["inert/inert [probe]", "inert/used [probe]", "silent/linear [probe]"]
    assert (ds.recall.sel(technique="probe") == 0).all()
    assert (ds.correct.sel(technique=list(CAUSAL)).fillna(1) == 1).all()


def test_ablating_the_wrong_component_raises_false_alarms(monkeypatch):
    real = intervene_mod.resolve_site

    def wrong_site(model, site, layouts=None, axes=None):  # "inert" resolves to the module of "used"
        if site == "inert":
            return dataclasses.replace(real(model, "used", layouts, axes), name="inert")
        return real(model, site, layouts, axes)

    monkeypatch.setattr(intervene_mod, "resolve_site", wrong_site)
    monkeypatch.setattr(sweep_mod, "resolve_site", wrong_site)  # the patching sweep's sites
    ds = sv.run(quick=True, cases=["inert"])
    lines = sv.missed(ds)
    assert len(lines) == len(CAUSAL)
    assert all(line.startswith("inert/inert [") and "false alarm" in line for line in lines)
    assert (ds.precision.sel(case="inert", technique=list(CAUSAL)) < 1).all()


def test_an_under_resolved_integrated_gradients_fails_completeness(monkeypatch):
    from scimech.analysis import attribution as attribution_mod

    real = attribution_mod.attribute

    def one_step(*args, **kwargs):  # one quadrature node: the path integral is no longer resolved
        return real(*args, **{**kwargs, "n_steps": 1})

    monkeypatch.setattr(attribution_mod, "attribute", one_step)
    ds = sv.run(quick=True, cases=["attribution"])
    lines = sv.missed(ds)
    assert any(line.startswith("attribution [integrated_gradients]: completeness fails") for line in lines)
    assert int(ds.passed.sel(case="attribution")) == 0


def test_a_dictionary_that_learned_nothing_misses_every_planted_feature(monkeypatch):
    import scimech.studies.validate.sparse_features as case
    from scimech.analysis.dictionary import TopK

    def untrained(acts, **kw):
        return TopK(acts.shape[-1], kw["n_features"], k=kw["k"], seed=kw["seed"]).eval(), None

    monkeypatch.setattr(case, "train_dictionary", untrained)
    ds = sv.run(quick=True, cases=["sparse_features"])
    lines = sv.missed(ds)
    assert len(lines) == case.N_PLANTED and all("planted_" in line for line in lines)


@pytest.mark.parametrize("broken", ["gap", "realignment"])
def test_a_blind_gap_or_an_idle_realignment_fails_the_shift_case(monkeypatch, broken):
    import scimech.studies.validate.shifted_subspace as case

    if broken == "gap":
        real = case.faithfulness_gap
        monkeypatch.setattr(case, "faithfulness_gap", lambda dic, a, b, **kw: real(dic, a, a, **kw))  # never shifted
    else:
        monkeypatch.setattr(case, "realign", lambda dic, a, b, **kw: dic)
    lines = sv.missed(sv.run(quick=True, cases=["shifted_subspace"]))
    technique = "faithfulness_gap" if broken == "gap" else "realignment"
    assert lines == [f"shifted_subspace/rotated [{technique}]: " + lines[0].split(": ", 1)[1]]
    assert "missed" in lines[0]


def test_unknown_case_is_a_clear_error(capsys):
    with pytest.raises(ValueError, match="Unknown planted case.*inert"):
        sv.run(cases=["nope"])
    assert main(["validate", "--quick", "--cases", "nope"]) == 2  # a message, no traceback
    assert "ConfigError: Unknown planted case(s) ['nope']" in capsys.readouterr().err


# --- the planted truths are real (checked without scimech's methods) -----------------------------------------


def _set_output(module, value):
    return module.register_forward_hook(
        lambda m, i, o: torch.full_like(o, value) if value is not None else torch.randn_like(o) * 100
    )


def test_inert_component_has_zero_readout_weight_and_no_effect():
    model = inert.InertModel()
    assert model.readout.weight[0, inert.COMPONENTS.index("inert")].item() == 0.0
    x = inert.inputs(256, 1)
    torch.testing.assert_close(model(x), x[:, 0] + x[:, 1])
    handle = _set_output(model.inert, None)  # anything written into `inert` ...
    try:
        y = model(x)
    finally:
        handle.remove()
    assert torch.equal(y, model(x))  # ... leaves the output exactly unchanged


def test_silent_components_compute_their_codes_and_are_uncorrelated_with_x0():
    model = silent.SilentModel()
    x = silent.inputs(20_000, 3)
    torch.testing.assert_close(model.magnitude(x)[:, 0], x[:, 0].abs())
    torch.testing.assert_close(model.product(x)[:, 0], x[:, 0] * x[:, 1])
    torch.testing.assert_close(model(x), x[:, 0] + x[:, 0].abs() + x[:, 0] * x[:, 1])
    # population r = 0; the sample r has standard error <= 1.8 / sqrt(n) here
    # (sd of x0 (|x0| - mu) is sqrt(3 - 6 / pi) = 1.04, divided by sd |x0| = 0.60): allow 5 of them
    for code in (model.magnitude(x)[:, 0], model.product(x)[:, 0]):
        assert abs(np.corrcoef(code.numpy(), x[:, 0].numpy())[0, 1]) < 5 * 1.8 / math.sqrt(len(x))


def test_ablation_choice_components_do_what_is_planted():
    model = ablation_choice.AblationChoiceModel()
    x = ablation_choice.inputs(1000, 2)
    torch.testing.assert_close(model(x), x[:, 0] + ablation_choice.OFFSET)  # the bump is 0 on the data
    assert set(torch.unique(model.bimodal(x)).tolist()) == {0.0, 2.0}
    for module, value, change in (
        (model.offset, 0.0, -ablation_choice.OFFSET),
        (model.bimodal, 1.0, 1.0),
        (model.bimodal, 0.0, 0.0),
    ):
        handle = _set_output(module, value)
        try:
            y = model(x)
        finally:
            handle.remove()
        torch.testing.assert_close(y - model(x), torch.full_like(y, change))


def test_hidden_process_is_independent_of_the_prescribed_ones():
    d = hidden_concept.processes(20_000, 0)
    torch.testing.assert_close(d["y"], d["a"] + d["b"] + d["h"])
    for name in ("a", "b"):  # independent sums of distinct inputs: |r| < 5 / sqrt(n)
        assert abs(np.corrcoef(d["h"].numpy(), d[name].numpy())[0, 1]) < 5 / math.sqrt(20_000)


def test_integrated_gradients_equal_the_closed_form():
    model = known_attributions.KnownAttributionModel()
    x = known_attributions.inputs(32, 5)
    got = attribute(model, x, method="integrated_gradients", n_steps=32).values
    x = x.numpy()
    closed = np.zeros_like(x)
    closed[:, 0] = 3 * x[:, 0]
    closed[:, 1] = 2 * np.tanh(x[:, 1])
    closed[:, 2] = closed[:, 3] = x[:, 2] * x[:, 3] / 2  # the straight path splits a product equally
    # 32-node Gauss-Legendre on smooth integrands (float32): errors ~1e-6
    np.testing.assert_allclose(got, closed, atol=1e-4)


def test_same_seed_gives_the_same_result():
    first = sv.run(quick=True, cases=["ablation_choice", "attribution"], seed=1)
    again = sv.run(quick=True, cases=["ablation_choice", "attribution"], seed=1)
    for name in ("estimate", "ci_low", "ci_high", "flagged", "completeness_residual"):
        np.testing.assert_array_equal(first[name].values, again[name].values)


def test_command_help_names_every_case(capsys):
    assert main(["validate", "--help"]) == 0  # main returns argparse's exit status
    assert " ".join(sv.CASES) in " ".join(capsys.readouterr().out.split())
