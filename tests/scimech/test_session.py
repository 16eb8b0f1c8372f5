"""One way in for every verb (scimech.capture.session): the session is the one caller of the
steps every verb shares, it gives the model's modes back whatever happens, its fired check names
the verb, and a new sweep is only a setter around the one batch loop."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import scimech
from scimech.capture.hooks import HookSet
from scimech.capture.session import Session
from scimech.capture.sites import resolve_site
from scimech.causal import metrics
from scimech.causal.sweep import sweep_batches
from scimech.errors import SiteNeverRanError

CORE = Path(scimech.__file__).parent


def _calls_of(names: set[str]) -> dict[str, list[str]]:
    """Every call of a function named in ``names`` in the core, by the file it is in."""
    found: dict[str, list[str]] = {n: [] for n in names}
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if name in names:
                    found[name].append(str(path.relative_to(CORE)))
    return found


def test_the_steps_every_verb_shares_have_one_caller_the_session():
    calls = _calls_of({"to_eval", "parse_calls", "check_fired", "require"})
    for name, where in calls.items():
        assert where and set(where) == {"capture/session.py"}, (name, where)


def test_capture_imports_nothing_from_causal():
    # the profile and the session live in capture, below causal, which uses them: no circle
    for path in (CORE / "capture").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("scimech.causal"), (path.name, node.module)


def test_the_old_import_path_of_the_profile_still_serves_the_same_objects():
    from scimech.capture import profile as new
    from scimech.capture import profiling
    from scimech.causal import model_profile as old

    assert old.require is new.require and old.ModelProfile is new.ModelProfile and old.profile is profiling.profile


class _Frozen(nn.Module):
    """A model training with a frozen batch norm kept in eval (what model.train(was) would lose)."""

    def __init__(self):
        super().__init__()
        self.lin, self.norm, self.out = nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 1)

    def forward(self, x):
        return self.out(torch.tanh(self.norm(self.lin(x))))


def _modes(model: nn.Module) -> list[bool]:
    return [m.training for m in model.modules()]


def test_a_session_gives_every_module_its_own_mode_back_even_when_the_verb_fails():
    model = _Frozen().train()
    model.norm.eval()
    before = _modes(model)
    with Session(model, "a verb", torch.zeros(2, 4)):
        assert not any(_modes(model))  # eval mode inside, as every verb measures
    assert _modes(model) == before
    # a verb refused inside its session: the modes come back all the same
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    with pytest.raises(SiteNeverRanError, match="ablation_sweep"):
        scimech.ablation_sweep(model, x, ["lin"], lambda out, t=None: x[:, 0], method="zero", forward=lambda m, b: b)
    assert _modes(model) == before


def test_a_block_the_user_runs_keeps_the_users_modes():
    model = _Frozen().train()
    with scimech.ablate(model, ["lin"], method="zero"):
        assert _modes(model)[0]  # the user's train mode, as before: the user runs the passes
        model(torch.randn(3, 4))


@pytest.mark.parametrize("verb", ["ablate", "patch", "splice", "steer"])
def test_the_fired_check_on_leaving_names_the_verb(verb):
    from scimech.analysis.dictionary import SparseDictionary, splice, steer

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.0), nn.Linear(4, 1)).eval()
    model.forward = lambda x: model[2](model[0](x))  # the dropout never runs
    site = "1"
    blocks = {
        "ablate": lambda: scimech.ablate(model, [site], method="zero"),
        "patch": lambda: scimech.patch(model, {site: torch.zeros(3, 4)}),
        "splice": lambda: splice(model, site, SparseDictionary(4, 8)),
        "steer": lambda: steer(model, site, direction=np.ones(4)),
    }
    with pytest.raises(SiteNeverRanError, match=rf"^{verb}: site\(s\) \['1'\] never ran"):
        with blocks[verb]():
            model(torch.randn(3, 4))


def test_a_session_checks_the_hooks_it_made_only_when_the_block_ends_normally():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    site = resolve_site(model, "1")
    with pytest.raises(ZeroDivisionError), Session(model, "v") as s, s.hooks([site], lambda s_, t: None):
        raise ZeroDivisionError  # the user's error, not a "never ran" one
    with pytest.raises(SiteNeverRanError, match="^v: "), Session(model, "v") as s:
        assert isinstance(s.hooks([site], lambda s_, t: None), HookSet)


def test_a_new_sweep_is_a_setter_around_the_one_batch_loop():
    """A fourth verb, 'shift each site by +1', written as its setter only: every site's metric
    equals a hand-made loop of plain torch hooks, and the batch loop's own work (unchanged pass,
    profile check, tiles, reuse) comes with it."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 5), nn.Tanh(), nn.Linear(5, 2)).eval()
    x = torch.randn(7, 3)
    sites = ["0", "2", "3"]
    metric = metrics.output(index=1)

    def setter(batch, _source, _target, _per_sample):
        return (lambda i, site, current, call: current + 1.0), None

    with Session(model, "shift_sweep", x) as s:
        resolved = [resolve_site(model, n) for n in sites]
        batches = [(0, x[:4], None), (4, x[4:], None)]  # 3 sites share a tiled pass (no prefix to reuse)
        run = sweep_batches(s, batches, resolved, metric, setter, max_rows=16, reuse_prefix=False)
    truth = []
    with torch.no_grad():
        for n in sites:
            h = model.get_submodule(n).register_forward_hook(lambda m, a, o: o + 1.0)
            truth.append(model(x)[:, 1].numpy())
            h.remove()
        base = model(x)[:, 1].numpy()
    # float32 rounding of the tiled passes (other batch sizes): ~1e-7 on values of order 1
    np.testing.assert_allclose(run.changed.numpy(), np.stack(truth), atol=1e-6)
    np.testing.assert_allclose(run.baseline.numpy(), base, atol=1e-6)
    assert run.attrs["row_check"].startswith("independent")


class _Twice(nn.Module):
    """One block applied twice in one forward pass (weights tied across steps)."""

    def __init__(self):
        super().__init__()
        self.block, self.out = nn.Linear(3, 3), nn.Linear(3, 1)

    def forward(self, x):
        return self.out(self.block(torch.tanh(self.block(x))))


def test_a_site_that_runs_twice_is_refused_in_the_name_of_the_verb_that_met_it():
    from scimech.errors import SiteCalledTwiceError

    torch.manual_seed(0)
    model, x, x2 = _Twice().eval(), torch.randn(4, 3), torch.randn(4, 3)
    metric = metrics.output()
    verbs = {
        "record": lambda: scimech.record(model, x, ["block"]),
        "ablation_sweep": lambda: scimech.ablation_sweep(model, x, ["block"], metric, method="zero"),
        "patching_sweep": lambda: scimech.patching_sweep(model, x, x2, ["block"], metric),
        "attribution_patching": lambda: scimech.attribution_patching(model, x, x2, ["block"], metric),
    }
    for verb, run in verbs.items():
        with pytest.raises(SiteCalledTwiceError, match=rf"^{verb}: site 'block' \(Linear\) ran more than once"):
            run()
