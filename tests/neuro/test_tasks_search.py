"""Tasks, baselines and the tree search (selection, failures, dedup, journal and resume)."""

import json

import numpy as np
import pytest

from neuro.baselines import BASELINES, LastValue, MeanBaseline, fit_baseline
from neuro.search.offline import OfflineProposer, parse_genome, random_genome, render
from neuro.search.sandbox import SandboxLimits
from neuro.search.tree import TreeSearch, load_journal
from neuro.tasks import evaluate, mae_per_step, make_windows


def test_windows_and_mae_by_hand():
    x = np.arange(20, dtype=float).reshape(1, 10, 2)
    s = np.zeros((1, 10, 5))
    w = make_windows(x, s, context=3, horizon=2, stride=5)
    assert w.context.shape == (2, 3, 2) and w.target.shape == (2, 2, 2)  # starts 0 and 5
    np.testing.assert_array_equal(w.target[0, 0], [6.0, 7.0])  # step 3 of the series
    np.testing.assert_array_equal(w.target[1, 1], [18.0, 19.0])  # step 9
    pred = np.zeros((2, 3, 1))
    tgt = np.array([[[1.0], [2.0], [3.0]], [[-1.0], [0.0], [1.0]]])
    np.testing.assert_allclose(mae_per_step(pred, tgt), [1.0, 1.0, 2.0])


def test_simple_baselines_match_definitions(small_task):
    w = small_task.val
    m = MeanBaseline().predict(w.context, w.stim_context, w.stim_future)
    np.testing.assert_allclose(m[:, 5], w.context.mean(1), rtol=1e-6)
    last = LastValue().predict(w.context, w.stim_context, w.stim_future)
    np.testing.assert_array_equal(last[:, -1], w.context[:, -1])


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_every_baseline_fits_and_predicts(small_task, name):
    kw = {"steps": 5} if name in ("gru", "tide") else {}
    model = fit_baseline(name, small_task, **kw)
    res = evaluate(model, small_task, splits=("val",))
    assert np.isfinite(res["mae"].values).all()
    assert res["mae"].dims == ("split", "lead") and res.sizes["lead"] == small_task.horizon


def test_prior_mask_respects_dale_and_anatomy(small_task):
    M, sign = small_task.meta["prior_mask"] > 0, small_task.meta["prior_sign"]
    types, sides = small_task.meta["type"], small_task.meta["side"]
    W = small_task.true_weights
    # every true edge among observed units is allowed by the prior, and signs follow Dale's law
    off = ~np.eye(len(W), dtype=bool)
    assert np.all(M[(W != 0) & off])
    assert set(sign[np.isin(types, ["V0d", "V1"])]) == {-1.0}
    # V0d never projects to its own side
    v0d = np.flatnonzero(types == "V0d")
    for j in v0d:
        assert not np.any(M[:, j] & (sides == sides[j]))


class Scripted:
    """A proposer that returns fixed programs in order, then the last one again."""

    def __init__(self, codes):
        self.codes, self.k, self.seen = list(codes), 0, []

    def propose(self, op, parent, other, rng, task_info=""):
        self.seen.append((op, parent, other))
        c = self.codes[min(self.k, len(self.codes) - 1)]
        self.k += 1
        return c


def test_search_failures_dedup_views_and_resume(small_task, tmp_path):
    rng = np.random.default_rng(0)
    good = render(dict(random_genome(rng, True), order=1, stim_filter="instant", alpha=1.0))
    codes = [good, "raise ValueError('bad program')", "while True:\n    pass\n", good]
    prop = Scripted(codes)
    # the endless loop runs until a limit kills it, so the limits set this test's length: 5 s is
    # ~10x what each sandbox stage of the good program takes (~0.5 s: start, fit, forecasts)
    ts = TreeSearch(
        small_task,
        prop,
        tmp_path / "s",
        max_nodes=4,
        n_drafts=4,
        workers=1,
        limits=SandboxLimits(wall_seconds=5, cpu_seconds=5),
    )
    nodes = ts.run()
    st = [n.status for n in nodes]
    assert st[0] == "ok" and st[1] == "failed" and st[2] == "failed" and st[3] == "duplicate"
    assert "timed out" in nodes[2].error or "timeout" in nodes[2].error
    assert nodes[0].ood and "edge_auroc" in nodes[0].faith  # computed ...
    for _, parent, other in prop.seen:  # ... but never shown to the proposer
        for v in (parent, other):
            if v is not None:
                assert set(v) == {"id", "op", "code", "val", "error", "status"}
    lines = (tmp_path / "s" / "journal.jsonl").read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[0])["status"] == "ok"
    # a torn last line (crash mid-write) is ignored, and a rerun continues to the new budget
    with open(tmp_path / "s" / "journal.jsonl", "a") as f:
        f.write('{"id": 4, "par')
    ts2 = TreeSearch(
        small_task,
        OfflineProposer(priors=True),
        tmp_path / "s",
        max_nodes=6,
        n_drafts=1,
        limits=SandboxLimits(wall_seconds=20, cpu_seconds=20),
        debug_prob=0.0,
    )
    assert len(ts2.nodes) == 4
    nodes2 = ts2.run()
    assert len(nodes2) == 6 and [n.id for n in nodes2] == list(range(6))
    assert nodes2[4].op == "improve" and nodes2[4].parent == 0  # greedy: improve the best
    assert len(load_journal(tmp_path / "s" / "journal.jsonl")) == 6


def test_offline_genome_round_trip():
    rng = np.random.default_rng(1)
    g = random_genome(rng, priors=False)
    assert parse_genome(render(g)) == g
    prop = OfflineProposer(priors=True)
    child = parse_genome(prop.propose("improve", {"code": render(g), "val": 0.5}, None, rng))
    assert child["recurrence"] == "masked" or child != g
