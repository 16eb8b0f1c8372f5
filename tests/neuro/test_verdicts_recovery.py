"""Intervals over seeds and trials (coverage on data with a known mean), the tail-beat
phase metric (a time-shifted truth), and the planted-truth table: a model fitted with the
true wiring prior recovers the connectivity, one fitted with a shuffled prior does not."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from neuro.evidence import Evidence, SearchEvidence
from neuro.faithfulness import tail_beat_scores
from neuro.findings import findings, tail_beat_finding
from neuro.recovery import edge_auroc, format_table, planted_truth, summary_line
from neuro.search.blocks import DEFAULTS, render
from neuro.search.evaluate import run_candidate
from neuro.verdicts import cluster_bootstrap, compare, verdict_better
from scimech.studies.contract import Finding, PlantedTruthRow


def test_cluster_bootstrap_covers_the_true_mean():
    # 3 seeds x 9 trials x 20 windows, with seed, trial and window noise around a known mean 0.3:
    # the 95 % interval should hold it in about 95 % of 300 repetitions. Percentile intervals
    # over 3 seeds and 9 trials are somewhat narrow; 0.85 is the binomial 99.9 % lower limit
    # of 300 draws at 0.90, so coverage must be at least near nominal
    rng = np.random.default_rng(0)
    trials = np.repeat(np.arange(9), 20)
    hits = 0
    for r in range(300):
        v = (
            0.3
            + 0.02 * rng.standard_normal((3, 1))
            + 0.05 * rng.standard_normal((1, 9))[:, trials]
            + 0.05 * rng.standard_normal((3, 180))
        )
        est, lo, hi = cluster_bootstrap(v, trials, n_resamples=500, seed=r)
        hits += lo <= 0.3 <= hi
    assert hits / 300 >= 0.85


def test_compare_and_verdict_by_hand():
    trials = np.repeat(np.arange(6), 4)
    a = np.full((2, 24), 0.2)
    b = np.full((2, 24), 0.3) + 0.01 * np.sin(np.arange(24))
    c = compare(a, b, trials)
    assert c["diff"] == pytest.approx(a.mean() - b.mean()) and c["diff_high"] < 0
    assert verdict_better(c) == "a better" and verdict_better(compare(b, a, trials)) == "b better"
    assert verdict_better(compare(a, a + 0.01 * np.cos(np.arange(24)), trials)) == "undecided"
    assert c["n_seeds"] == 2 and c["n_clusters"] == 6


def test_tail_beat_phase_error_of_a_shifted_truth(small_task):
    task = small_task
    tgt = task.probes["swim_target"]
    ctx = task.probes["swim_context"]
    same = tail_beat_scores(tgt[:, :32], tgt[:, :32], task, context=ctx, steps=32)
    ok = np.isfinite(same["phase_error"])
    assert ok.any()
    np.testing.assert_allclose(same["phase_error"][ok], 0.0, atol=1e-9)
    np.testing.assert_allclose(same["amplitude_ratio"][ok], 1.0, atol=1e-9)
    # the truth 2 steps ahead leads by 2 dt f cycles at the beat frequency f (the readout's
    # first lags differ, and the beat is not a pure sinusoid: 0.06 cycles)
    ahead = tail_beat_scores(tgt[:, 2:34], tgt[:, :32], task, context=ctx, steps=32)
    k = np.isfinite(ahead["phase_error"]) & ok
    want = (2 * task.dt * same["beat_frequency"][k] + 0.5) % 1.0 - 0.5
    np.testing.assert_allclose(ahead["phase_error"][k], want, atol=0.06)
    # a constant forecast has no beat (none inherited from the context's last beat through the
    # readout's lags either)
    flat = tail_beat_scores(np.repeat(ctx[:, -1:], 32, 1), tgt[:, :32], task, context=ctx, steps=32)
    assert np.nanmax(flat["amplitude_ratio"]) < 1e-9 and not flat["forecast"].any()


def test_edge_auroc_equals_scikit_learn():
    # independent truth: sklearn's roc_auc_score (trapezoidal ROC), on scores with many ties
    # (rounded to 1 decimal, as |J| is 0 on every pair a mask forbids) and unbalanced classes
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    for n, p in ((30, 0.5), (200, 0.1), (500, 0.03)):
        edge = (rng.random(n) < p).astype(float)
        edge[:2] = [0.0, 1.0]
        score = np.round(np.abs(rng.standard_normal(n) + edge), 1)
        score[rng.random(n) < 0.3] = 0.0
        assert edge_auroc(edge, score) == pytest.approx(roc_auc_score(edge, score), abs=1e-12)
    assert edge_auroc(np.ones(5), np.arange(5.0)) == 0.5 == edge_auroc(np.zeros(5), np.arange(5.0))
    assert edge_auroc([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0 and edge_auroc([1, 1, 0, 0], [1, 2, 3, 4]) == 0.0


def _fit_with_prior(task, mask):
    data = task.data_arrays("full")
    data["meta/prior_mask"] = mask.astype(np.float32)
    g = dict(DEFAULTS, readout="rollout", recurrence="masked", order=1, stim_filter="instant", alpha=1.0)
    ns = {}
    exec(render(g), ns)
    return run_candidate(ns, data, {"stage": "full"})[1]


def test_planted_truth_rows_pass_with_the_true_prior_and_fail_with_a_shuffled_one(small_task):
    task = small_task
    true_mask = task.meta["prior_mask"] > 0
    perm = np.random.default_rng(0).permutation(task.n_neurons)
    wrong = true_mask[np.ix_(perm, perm)]  # same number of allowed edges, wrong units
    good = planted_truth(task, _fit_with_prior(task, true_mask))
    bad = planted_truth(task, _fit_with_prior(task, wrong))
    good_edges, bad_edges = (next(r for r in rows if r.truth == "edges") for rows in (good, bad))
    assert good_edges.recovered is True and bad_edges.recovered is False
    assert bad_edges.estimate < 0.75 <= good_edges.ci_low
    line = summary_line(bad)
    k = sum(r.recovered is True for r in bad)
    n = sum(r.recovered is not None for r in bad)
    assert line.startswith(f"neuro planted truth: {k} of {n} recovered (") and "edges" in line
    assert "MISSED" in format_table(bad) and "RECOVERED" in format_table(good)


def _evidence(disc_shift, free_id_shift, free_ood_shift, seed=0, free_nodes=None, **changes):
    """Hand-made evidence: 3 seeds, 9 test trials x 10 windows, 5 OOD trials x 10 windows."""
    rng = np.random.default_rng(seed)
    trials = np.repeat(np.arange(9), 10)
    ood_trials = np.repeat(np.arange(5), 10)
    base = 0.3 + 0.05 * rng.random((1, 9))[:, trials] + 0.01 * rng.random((3, 90))
    prior = base + 0.0
    node = SimpleNamespace(val=0.3, faith={"edge_auroc": 0.99, "sign_accuracy": 0.8, "impulse_distance": 0.7})
    free_node = SimpleNamespace(val=0.31, faith={"edge_auroc": 0.6, "sign_accuracy": 0.7, "impulse_distance": 0.9})
    ood = 0.4 + 0.05 * rng.random((1, 5))[:, ood_trials] + 0.01 * rng.random((3, 50))
    ev = Evidence(
        seeds=[0, 1, 2],
        test_trials=trials,
        ood_clusters=ood_trials,
        best_baseline="tide",
        baseline_test=base - disc_shift,
        picks=["priors"] * 3,
        discovered_test=prior,
        priors=SearchEvidence(prior, ood, [node] * 3, [{}] * 3),
        no_priors=SearchEvidence(prior + free_id_shift, ood + free_ood_shift, free_nodes or [free_node] * 3, [{}] * 3),
    )
    return dataclasses.replace(ev, **changes)


def _lines(ev):
    found = findings(ev)
    assert all(isinstance(f, Finding) for f in found)
    return [f.line() for f in found]


@pytest.mark.parametrize("disc_shift, word", [(-0.02, "REPRODUCED"), (0.02, "NOT reproduced"), (0.0, "UNDECIDED")])
def test_findings_verdicts_follow_the_intervals(disc_shift, word):
    found = findings(_evidence(disc_shift, 0.0, 0.03))
    lines = [f.line() for f in found]
    assert lines[0].startswith(word)
    assert found[0].verdict == ("REPRODUCED" if word == "REPRODUCED" else "NOT reproduced")  # the contract's three
    # unconstrained: same ID, worse OOD -> reproduced; worse both -> partly; better OOD -> not
    assert lines[1].startswith("REPRODUCED")
    assert _lines(_evidence(0.0, 0.03, 0.03))[1].startswith("NOT reproduced (partly: priors better both ID and OOD)")
    assert _lines(_evidence(0.0, 0.0, -0.03))[1].startswith("NOT reproduced (the unconstrained search is better OOD)")
    assert lines[2].startswith("REPRODUCED") and lines[3].startswith("REPRODUCED")  # priors better in every seed


def test_traces_without_a_wiring_prior_do_not_judge_the_priors():
    """Your traces with no prior: both searches were unconstrained, so even evidence that would
    read REPRODUCED (same ID, worse OOD) is not a verdict on wiring priors."""
    assert _lines(_evidence(0.0, 0.0, 0.03))[1].startswith("REPRODUCED")
    lines = _lines(_evidence(0.0, 0.0, 0.03, no_prior=True))
    assert lines[1].startswith("NOT ASSESSED: search with vs without wiring priors")
    assert lines[2].startswith("NOT ASSESSED: recovery of connectivity")
    assert not any(s.startswith("REPRODUCED") for s in lines[1:])


def test_no_verdict_rests_on_a_nan():
    """A seed whose faithfulness could not be measured (NaN edge AUROC, impulse distance) and an
    interval that is not a number leave their findings NOT ASSESSED, naming the number, never
    "NOT reproduced" (before: NaN > x is False, which read as "NOT reproduced")."""
    ev = _evidence(0.0, 0.0, 0.03)
    gap = SimpleNamespace(val=0.31, faith={"edge_auroc": np.nan, "sign_accuracy": 0.7, "impulse_distance": np.nan})
    found = findings(_evidence(0.0, 0.0, 0.03, free_nodes=[ev.no_priors.nodes[0], gap, ev.no_priors.nodes[0]]))
    assert found[2].verdict == found[3].verdict == "NOT ASSESSED" and not found[2].assessed
    lines = [f.line() for f in found]
    assert lines[2].startswith("NOT ASSESSED (edge AUROC without (seed 1) is not a finite number)")
    assert lines[3].startswith("NOT ASSESSED (impulse distance without (seed 1) is not a finite number)")
    broken = ev.discovered_test.copy()
    broken[1] = np.nan  # one seed's test scores are missing
    first = _lines(_evidence(0.0, 0.0, 0.03, discovered_test=broken))[0]
    assert first.startswith(
        "NOT ASSESSED (ID test MAE a, ID test MAE diff, ID test MAE diff_low, ID test MAE diff_high "
        "are not a finite number)"
    )


def test_a_planted_truth_row_without_a_number_is_not_assessed_not_missed():
    from neuro.recovery import _row

    rows = [
        _row("edges", "edge AUROC", "", 0.99, 0.98, 1.0, "lower bound >= 0.75", True),
        _row("signs", "sign accuracy", "", 0.5, 0.4, 0.6, "lower bound >= 0.7", False),
        _row("impulse", "impulse response", "", np.nan, np.nan, np.nan, "not measured", False),
    ]
    assert [r.recovered for r in rows] == [True, False, None] and all(isinstance(r, PlantedTruthRow) for r in rows)
    table = rows
    line = summary_line(table)
    assert line.startswith("neuro planted truth: 1 of 2 recovered (")  # the NaN row is not counted
    assert "impulse nan [nan, nan] NOT ASSESSED" in line and "signs 0.5 [0.4, 0.6] MISSED" in line
    assert format_table(table).count("NOT ASSESSED") == 1


def test_findings_name_the_models_in_plain_words():
    """The best baseline and the closest model read as a reader names them ("TiDE-lite", "ridge ARX"),
    not as the code's keys ("[tide]", "ridge_arx")."""
    first = _lines(_evidence(-0.02, 0.0, 0.03))[0]
    assert " vs the best baseline, TiDE-lite, 0." in first and "[tide]" not in first
    long_table = pd.DataFrame(
        {"tail_beat_forecast": [0.0, 1 / 7], "tail_phase_error": [0.1, 0.04], "tail_amplitude_ratio": [0.0, 0.2]},
        index=["last_value", "ridge_arx"],
    )
    line = tail_beat_finding(long_table, 256).line()
    assert "(closest: ridge ARX)" in line and "ridge_arx" not in line and "last_value" not in line
    assert "persistence (last value) 0.00 (|phase error| 0.10 cycles" in line
    # one claim whatever the outcome: NOT reproduced never stands beside a claim that negates itself
    claim = "at context 256, a model's free run forecasts the tail beat in at least half of the swimming windows"
    assert line.startswith(f"NOT reproduced: {claim} (closest: ridge ARX)")
    long_table.loc["ridge_arx", "tail_beat_forecast"] = 0.6
    yes = tail_beat_finding(long_table, 256)
    assert yes.verdict == "REPRODUCED" and yes.claim == f"{claim} (the free run of ridge ARX)"
