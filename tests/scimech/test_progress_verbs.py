"""Progress bars of the long core verbs: one switch, off by default where nobody watches.

Truth: the number of sites (and batches) the test asks for, and an empty standard error when
the switch is off.
"""

import numpy as np
import pytest
import torch
from torch import nn

import scimech
from scimech import attribution_patching, patching_sweep, probe_sites
from scimech.analysis.dictionary.train import train_dictionary
from scimech.causal import metrics
from scimech.run import progress as progress_mod

SITES = ["0", "1", "2", "3", "4"]  # five sites: the layers of a Sequential


@pytest.fixture
def bars(monkeypatch):
    """Every bar the progress module makes, kept to read its count after it closes."""
    made = []

    class Kept(progress_mod.tqdm):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.shown = not kw.get("disable", False)  # tqdm disables every bar on closing
            made.append(self)

    monkeypatch.setattr(progress_mod, "tqdm", Kept)
    yield made
    scimech.set_progress(None)


def _model_and_inputs(n=8):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 2)).eval()
    g = torch.Generator().manual_seed(1)
    return model, torch.randn(n, 3, generator=g), torch.randn(n, 3, generator=g)


def test_switch_on_a_sweep_advances_its_bar_once_per_site_and_batch(bars, capsys):
    model, clean, corrupted = _model_and_inputs(8)
    scimech.set_progress(True)
    patching_sweep(model, clean, corrupted, SITES, metrics.output(index=0), batch_size=4)
    (bar,) = [b for b in bars if b.desc.startswith("patching_sweep")]
    assert bar.shown
    assert (bar.n, bar.total) == (2 * len(SITES), 2 * len(SITES))  # 2 batches x 5 sites
    assert "patching_sweep" in capsys.readouterr().err


def test_switch_off_nothing_is_written(bars, capsys):
    model, clean, corrupted = _model_and_inputs(8)
    scimech.set_progress(False)
    patching_sweep(model, clean, corrupted, SITES, metrics.output(index=0), batch_size=4)
    attribution_patching(model, clean, corrupted, SITES, metrics.output(index=0), batch_size=4)
    assert capsys.readouterr().err == ""
    assert bars and not any(b.shown for b in bars)


def test_automatic_is_off_in_tests_and_when_stderr_is_no_terminal(monkeypatch):
    scimech.set_progress(None)
    monkeypatch.setenv("SCIMECH_QUIET", "1")
    assert not progress_mod.progress_enabled()
    monkeypatch.setenv("SCIMECH_QUIET", "0")
    monkeypatch.setattr("sys.stderr.isatty", lambda: False, raising=False)
    assert not progress_mod.progress_enabled()
    assert progress_mod.progress_enabled(True)  # a verb's own progress=True wins
    with pytest.raises(TypeError, match="True, False or None"):
        scimech.set_progress("yes")


def test_attribution_probe_and_dictionary_bars_count_their_work(bars):
    model, clean, corrupted = _model_and_inputs(8)
    scimech.set_progress(True)
    attribution_patching(model, clean, corrupted, SITES, metrics.output(index=0), batch_size=4)
    (atp,) = [b for b in bars if b.desc.startswith("attribution_patching")]
    assert (atp.n, atp.total) == (8, 8)  # samples estimated
    rng = np.random.default_rng(0)
    feats = {f"s{i}": rng.normal(size=(40, 3)) for i in range(3)}
    probe_sites(feats, rng.normal(size=40), cv=2, seeds=(0, 1), n_bootstrap=0)
    (fit,) = [b for b in bars if b.desc.startswith("probe_sites")]
    assert (fit.n, fit.total) == (3 * 2 + 3, 3 * 2 + 3)  # sites x seeds, then each site's statistics
    acts = torch.randn(64, 4, generator=torch.Generator().manual_seed(2))
    train_dictionary(acts, n_features=8, k=2, epochs=3, batch_size=32)
    (dic,) = [b for b in bars if b.desc.startswith("dictionary")]
    assert (dic.n, dic.total) == (3, 3)  # epochs
