"""``samples=FixedMesh(nodes)`` on a model that builds its mesh itself (graph-weather's pattern).

graph-weather's forecaster takes gridded fields, one row per sample, and maps them onto an
icosahedral H3 mesh of 122 nodes inside ``forward``: its processor's rows are samples x mesh
nodes. ``samples=FixedMesh(122)`` reads as "every sample is 122 rows", but it is a statement about
the *inputs'* rows, and a reference batch of 6 gridded samples is not a whole number of meshes.
The refusal names the fix (``samples=`` dropped, the processor's rows declared packed sample by
sample) and says what checking it on the reference's own samples found, site by site: where the
site holds samples x nodes rows packed sample by sample, the layout that works; where it does
not, that the layout does not apply. The fix is then checked against hand-computed per-node means.

``MeshForecaster`` (grid of 20 points -> mesh of 12 nodes -> grid) is the conformance suite's
tiny model of the pattern (tests/conformance/test_meshes_and_edges.py).
"""

from __future__ import annotations

import pytest
import torch

import scimech as sm
from scimech.errors import DataValidationError

from .helpers import capture
from .test_meshes_and_edges import F, G, H, M, MeshForecaster, _grid_metric


@pytest.fixture(scope="module")
def mesh():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    return MeshForecaster().eval(), torch.randn(4, G, F, generator=g), torch.randn(6, G, F, generator=g)


def test_the_refusal_says_the_fix_works_on_the_reference_and_it_gives_per_node_means(mesh):
    """FixedMesh(12) with a reference of 6 gridded samples: refused, with the fix checked on the
    reference (6 x 12 rows, sample by sample); under that fix, mean ablation of the processor is
    each mesh node's mean over the 6 reference samples (plain hooks)."""
    model, x, ref = mesh
    with pytest.raises(DataValidationError) as err:
        sm.ablation_sweep(model, x, ["proc"], _grid_metric, method="mean", reference=ref, samples=sm.FixedMesh(M))
    msg = str(err.value)
    assert "not a whole number of meshes" in msg, msg
    assert (
        "Checked on the first 6 reference samples: site 'proc' holds 6 x 12 rows for 6 samples, sample by sample: "
        "axes={'proc': 'batch*window feature'} works" in msg
    ), msg

    node_means = capture(model.proc, lambda: model(ref)).reshape(6, M, H).mean(0)  # node k over the samples
    h = model.proc.register_forward_hook(lambda _m, _a, _o: node_means.repeat(len(x), 1))  # residual adds in place
    try:
        with torch.no_grad():
            truth = _grid_metric(model(x))
    finally:
        h.remove()
    res = sm.ablation_sweep(
        model, x, ["proc"], _grid_metric, method="mean", reference=ref, axes={"proc": "batch*window feature"}
    )
    torch.testing.assert_close(torch.as_tensor(res.ablated.sel(site="proc").values), truth, rtol=0, atol=1e-4)


def test_a_node_count_the_sites_do_not_hold_is_not_offered_as_working(mesh):
    """FixedMesh(5): the processor holds 6 x 12 rows, not 6 x 5; the message says the layout does
    not apply there rather than offering it (ablate, the same door)."""
    model, x, ref = mesh
    with pytest.raises(DataValidationError) as err:
        with sm.ablate(model, "proc", method="mean", reference=ref, samples=sm.FixedMesh(5)):
            model(x)
    msg = str(err.value)
    assert "site 'proc' gives 72 rows for 6 samples, not 6 x 5: the layout does not apply" in msg, msg
    assert "works" not in msg.split("Checked on")[1], msg
