"""`--dry-run` on every study command: the options are checked, the plan printed (units, sizes,
an estimated time), and nothing is run or written."""

from __future__ import annotations

import pytest

from scimech.cli.commands import main


@pytest.mark.parametrize(
    "argv, units",
    [
        (["ocean", "study"], 3 * 3),  # 3 regimes x 3 seeds
        (["ocean", "study", "--seeds", "0", "1", "--regimes", "mixed"], 2),
        (["astro", "study", "--quick"], 4),  # 600 test galaxies in chunks of 150
        (["astro", "study", "--quick", "--chunk-size", "200"], 3),
        (["neuro", "study"], 1 * 2 * 12 + 1 * 6),  # 1 seed x (priors, none) x 12 nodes + long context
        (["neuro", "study", "--medium", "--long-context", "0"], 3 * 2 * 24),
    ],
)
def test_dry_run_prints_the_plan_and_writes_nothing(argv, units, tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*argv, "--dry-run", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "dry run: nothing was run or written" in text
    assert f"units of work: {units} (" in text
    assert "estimated time: about" in text
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_dry_run_still_refuses_bad_options(tmp_path, capsys):
    assert main(["ocean", "study", "--dry-run", "--epochs", "0", "--out", str(tmp_path / "x")]) == 2
    assert "--epochs: must be a whole number >= 1" in capsys.readouterr().err
    assert main(["ocean", "study", "--dry-run", "--data", str(tmp_path / "nowhere.zarr")]) == 2
    assert "nowhere.zarr' does not exist; expected a zarr store" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
