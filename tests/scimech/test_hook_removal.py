"""No hook of ours remains after a normal run, an exception in forward, or a bad site;
hooks the user registered survive (the captum test_hook_removal idea)."""

import pytest
import torch

from scimech.errors import SiteNotFoundError
from scimech.intervene import ablate, patch
from scimech.record import Recorder, record

from .models import TinyTransformer


def _hook_counts(model):
    return {n: (len(m._forward_hooks), len(m._forward_pre_hooks)) for n, m in model.named_modules()}


class Boom(Exception):
    pass


@pytest.mark.parametrize("kind", ["recorder", "ablate", "patch", "record"])
def test_hooks_removed_and_user_hooks_kept(kind):
    torch.manual_seed(0)
    model = TinyTransformer().eval()
    user = model.encoder[0].attn.proj.register_forward_pre_hook(lambda m, a: None)
    user2 = model.encoder[1].register_forward_hook(lambda m, a, o: None)
    before = _hook_counts(model)
    x = torch.randn(2, 5, 3)
    sites = ["encoder.0.attn.heads[1]", "encoder.1"]

    def ctx():
        if kind == "recorder":
            return Recorder(model, sites)
        if kind == "ablate":
            return ablate(model, sites, method="zero")
        if kind == "patch":
            with Recorder(model, sites) as rec:
                model(x)
            return patch(model, dict(rec.activations))
        return None

    if kind == "record":
        record(model, x, sites)
    else:
        with ctx():  # normal run
            model(x)
    assert _hook_counts(model) == before

    def exploding(m, a, o):
        raise Boom

    h = model.head.register_forward_hook(exploding)
    before_boom = _hook_counts(model)
    with pytest.raises(Boom):
        if kind == "record":
            record(model, x, sites, stop_early=False)
        else:
            with ctx():
                model(x)
    assert _hook_counts(model) == before_boom
    h.remove()

    with pytest.raises(SiteNotFoundError):  # a bad site among good ones: nothing left attached
        if kind == "record":
            record(model, x, sites + ["encoder.9"])
        elif kind == "ablate":
            with ablate(model, sites + ["encoder.9"], method="zero"):
                pass
        else:
            with Recorder(model, sites + ["encoder.9"]):
                pass
    assert _hook_counts(model) == before
    user.remove()
    user2.remove()
