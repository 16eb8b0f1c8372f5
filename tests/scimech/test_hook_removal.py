"""No hook of ours remains after a normal run, an exception in forward, or a bad site;
hooks the user registered survive (the captum test_hook_removal idea)."""

import pytest
import torch

from scimech import attribution_patching
from scimech.capture.record import Recorder, record
from scimech.causal import metrics
from scimech.causal.intervene import ablate, ablation_sweep, patch, patching_sweep
from scimech.errors import HeadLayoutError, SiteNotFoundError

from .models import TinyTransformer

_DICTS = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks_always_called",
)


def _hooks(model):
    """Every hook id of every module, in every dict torch keeps them in, and any ``forward``
    set on an instance (sweeps replace reused modules' forward; layer sites wrap it)."""
    return {
        n: {**{d: tuple(getattr(m, d, {}).keys()) for d in _DICTS}, "forward": m.__dict__.get("forward")}
        for n, m in model.named_modules()
    }


class Boom(Exception):
    pass


KINDS = [
    "recorder",
    "recorder_stop_early",
    "ablate",
    "patch",
    "record",
    "ablation_sweep",
    "patching_sweep",
    "attribution_patching",
]
SITES = ["encoder.0.attn.heads[1]", "encoder.1", "encoder.0.mlp:input", "head.units[0]"]


def _run(kind, model, x, sites):
    if kind == "record":
        record(model, x, sites, stop_early=False)
    elif kind == "ablation_sweep":
        ablation_sweep(model, x, sites, metrics.output(), method="zero")
    elif kind == "patching_sweep":
        patching_sweep(model, x, x.flip(0), sites, metrics.output())
    elif kind == "attribution_patching":
        attribution_patching(model, x, x.flip(0), sites, metrics.output(), graddrop=True, verify_top=2)
    else:
        if kind.startswith("recorder"):
            ctx = Recorder(model, sites, stop_early=kind == "recorder_stop_early")
        elif kind == "ablate":
            ctx = ablate(model, sites, method="zero")
        else:
            ctx = patch(model, {s: _recorded(model, s) for s in sites})
        with ctx:
            model(x)
            model(x)


def _recorded(model, site):
    """Activations of one site, recorded on its own (for patch)."""
    with torch.no_grad(), Recorder(model, [site]) as rec:
        model(torch.randn(2, 5, 3))
    return rec.activations[site]


@pytest.mark.parametrize("kind", KINDS)
def test_hooks_removed_and_user_hooks_kept(kind):
    torch.manual_seed(0)
    model = TinyTransformer().eval()
    user = [
        model.encoder[0].attn.proj.register_forward_pre_hook(lambda m, a: None),
        model.encoder[1].register_forward_hook(lambda m, a, o: None),
        model.register_forward_pre_hook(lambda m, a, k: None, with_kwargs=True),
        model.head.register_forward_hook(lambda m, a, o: None, always_call=True),
    ]
    before = _hooks(model)
    x = torch.randn(2, 5, 3)
    with torch.no_grad():
        _run(kind, model, x, SITES)  # normal run
    assert _hooks(model) == before

    def exploding(m, a, o):
        raise Boom

    h = model.encoder[1].mlp.register_forward_hook(exploding)  # after some sites, before others
    before_boom = _hooks(model)
    with pytest.raises(Boom), torch.no_grad():
        _run(kind, model, x, SITES)
    assert _hooks(model) == before_boom
    h.remove()

    for bad, err in (("encoder.9", SiteNotFoundError), ("encoder.1.mlp.heads[0]", HeadLayoutError)):
        with pytest.raises(err), torch.no_grad():  # a bad site among good ones: nothing left attached
            _run(kind, model, x, SITES + [bad])
        assert _hooks(model) == before
    for u in user:
        u.remove()
    assert all(not any(v.values()) for v in _hooks(model).values())  # and the user's own hooks were real


def test_error_inside_our_own_hook_cleans_up():
    """A patch of the wrong shape raises inside our hook; the hooks still go."""
    torch.manual_seed(0)
    model = TinyTransformer().eval()
    before = _hooks(model)
    with pytest.raises(ValueError, match="shape"), torch.no_grad():
        with patch(model, {"encoder.0": torch.zeros(3, 5, 16)}):
            model(torch.randn(2, 5, 3))
    assert _hooks(model) == before
