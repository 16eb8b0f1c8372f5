"""Selection scores (hand-computed) and the CLI wiring."""

import json
import math

import numpy as np
import pytest

from neuro.search.scoring import rank_normalise, ucb_scores
from neuro.search.tree import Node


def test_rank_normalise_and_ucb_by_hand():
    # lower MAE is better: ranks 0.1 -> 1, 0.3 -> 1/3... with n = 3 finite values
    np.testing.assert_allclose(rank_normalise([0.3, 0.1, math.inf, 0.2]), [1 / 3, 1.0, 0.0, 2 / 3])
    u = ucb_scores([0.1, 0.2], visits=[3, 0], c=1.0)
    # q = [1, 0.5]; bonus = sqrt(ln(4) / (1 + n))
    np.testing.assert_allclose(u, [1 + math.sqrt(math.log(4) / 4), 0.5 + math.sqrt(math.log(4))])
    assert ucb_scores([math.inf], [0])[0] == -math.inf


def test_cli_plot_reads_a_journal(tmp_path):
    from scimech.cli.commands import build_parser

    nodes = [
        Node(0, None, "draft", "x", "h0", status="ok", val=0.5),
        Node(1, 0, "improve", "y", "h1", status="failed", error="boom"),
        Node(2, 0, "improve", "z", "h2", status="ok", val=0.4),
    ]
    from dataclasses import asdict

    (tmp_path / "journal.jsonl").write_text("".join(json.dumps(asdict(n)) + "\n" for n in nodes))
    args = build_parser().parse_args(["neuro", "trees", str(tmp_path), "--out", str(tmp_path / "t.png")])
    assert args.func(args) == 0
    assert (tmp_path / "t.png").stat().st_size > 1000


def test_cli_plot_draws_every_search_of_a_study_folder(tmp_path, capsys):
    from dataclasses import asdict

    from scimech.cli.commands import main

    nodes = [
        Node(0, None, "draft", "x", "h0", status="ok", val=0.5),
        Node(1, 0, "improve", "z", "h2", status="ok", val=0.4),
    ]
    for search in ("search_priors", "search_no_priors", "long_context/search_priors"):
        (tmp_path / search).mkdir(parents=True)
        (tmp_path / search / "journal.jsonl").write_text("".join(json.dumps(asdict(n)) + "\n" for n in nodes))
    assert main(["neuro", "trees", str(tmp_path)]) == 0
    drawn = json.loads(capsys.readouterr().out)["figures"]
    assert sorted(drawn) == sorted(
        str(tmp_path / f"tree_{s}.png") for s in ("search_priors", "search_no_priors", "long_context_search_priors")
    )
    assert all((tmp_path / f"tree_{s}.png").stat().st_size > 1000 for s in ("search_priors",))
    assert (
        main(["neuro", "plot", str(tmp_path / "search_priors" / "missing")]) == 2
    )  # the old name  # not a folder: refused


def test_cli_study_size_flags():
    from scimech.cli.commands import build_parser

    args = build_parser().parse_args(["neuro", "study", "--medium", "--n-seeds", "2", "--long-context", "0"])
    assert args.size == "medium" and args.n_seeds == 2 and args.seeds is None and args.long_context == 0
    assert build_parser().parse_args(["neuro", "study", "--size", "full"]).size == "full"
    # --seeds lists seed values here as in every command (it counted them before); one or the other
    from neuro.study import NeuroStudy

    plan = NeuroStudy().plan(build_parser().parse_args(["neuro", "study", "--seeds", "4", "7", "--dry-run"]))
    assert plan.settings.study.seed_list == [4, 7]
    plan = NeuroStudy().plan(build_parser().parse_args(["neuro", "study", "--seed", "5", "--n-seeds", "3"]))
    assert plan.settings.study.seed_list == [5, 6, 7]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["neuro", "study", "--seeds", "1", "--n-seeds", "2"])
    args = build_parser().parse_args(["neuro", "study"])
    assert args.size == "quick" and args.seeds is None and args.long_context == 256 and args.device == "cpu"


def test_unknown_size_names_the_choices(tmp_path):
    import pytest

    from neuro.study import run_and_report
    from scimech.errors import ConfigError

    with pytest.raises(ConfigError, match="medium"):
        run_and_report(tmp_path, size="huge")
