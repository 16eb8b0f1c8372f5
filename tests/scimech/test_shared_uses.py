"""A study declares the options of the shared vocabulary it uses (Study.shared_options), each with what it
does there; the base class adds them, so a study's add_options holds only its own options."""

from __future__ import annotations

import argparse

import pytest

from scimech.run.options import SHARED, USES_GROUP, Use, add_uses
from scimech.studies.contract import load_study


def _group(parser: argparse.ArgumentParser, title: str) -> set[str]:
    group = next(g for g in parser._action_groups if g.title == title)
    return {a.dest for a in group._group_actions}


@pytest.mark.parametrize(
    ("study", "uses"),
    [
        ("ocean", {"seeds", "epochs"}),
        ("astro", {"seed", "epochs", "batch_size", "dtype"}),
        ("neuro", {"seeds", "n_seeds"}),
    ],
)
def test_each_study_lists_the_shared_options_it_uses_in_one_group(study, uses):
    s = load_study(study)
    parser = s.study_parser()
    assert set(s.shared_options) == uses == _group(parser, USES_GROUP)
    for action in parser._actions:
        if action.dest in uses and action.option_strings:
            assert action.shared == action.dest  # built by the vocabulary, its meaning in the help
            assert SHARED[action.dest].meaning.split(":")[0] in action.help


def test_the_same_command_lines_parse_to_the_same_values():
    ocean = load_study("ocean").study_parser()
    args = ocean.parse_args(["--seeds", "0", "2", "--epochs", "3"])
    assert (args.seeds, args.epochs, args.regimes) == ([0, 2], 3, None)
    astro = load_study("astro").study_parser().parse_args(["--planted", "--dtype", "bfloat16"])
    assert (astro.seed, astro.dtype, astro.epochs, astro.data) == (0, "bfloat16", None, None)
    neuro = load_study("neuro").study_parser()
    assert neuro.parse_args(["--n-seeds", "3"]).n_seeds == 3


def test_options_of_one_choice_exclude_each_other(capsys):
    parser = load_study("neuro").study_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["--seeds", "1", "--n-seeds", "2"])
    assert "not allowed with argument --seeds" in capsys.readouterr().err


def test_a_name_outside_the_vocabulary_is_refused_by_name():
    parser = argparse.ArgumentParser()
    with pytest.raises(ValueError, match="epoch: not in the shared vocabulary"):
        add_uses(parser, {"epoch": "typo"})
    add_uses(parser, {"epochs": Use("Here: of the probe", default=4)})
    assert parser.parse_args([]).epochs == 4
