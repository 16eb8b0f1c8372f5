"""Rows that are not the samples of the inputs, on tiny models written here that have the pattern:

- a mesh forecaster (GraphCast-like, as graph-weather builds it, with an in-place residual) that
  takes gridded fields, one row per sample, and builds its mesh inside: its processor's rows are samples x mesh nodes.
  ``samples=FixedMesh(nodes)`` (which says the *inputs'* rows are mesh nodes) is refused with the
  fix that works, ``axes={site: 'batch*window feature'}``, checked here against a hand loop;
- a message-passing model on one graph given unbatched (``x`` of N nodes, ``edge_index`` of E
  edges): a site of E rows (per-edge messages) is named as the graph's edges and refused with the
  fix that works, a layout without a batch axis (``'edge feature'``: one sample), checked here
  against plain torch hooks and autograd for every verb.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import scimech
from scimech.capture.layout import parse_axes
from scimech.causal.atp import attribution_patching
from scimech.causal.intervene import ablate, ablation_sweep, patching_sweep
from scimech.errors import DataValidationError, DimensionError

from .helpers import ATOL

M, G, F, H = 12, 20, 3, 8  # mesh nodes, grid points, input fields, hidden width


class MeshForecaster(nn.Module):
    """Grid (B, G, F) -> mesh (B*M, H) built inside (grid-to-mesh weights) -> message passing on a
    ring within each mesh, its residual added in place into the processor's output -> back to the
    grid, as a residual update."""

    def __init__(self):
        super().__init__()
        self.g2m = nn.Parameter(torch.randn(M, G) / G)
        self.m2g = nn.Parameter(torch.randn(G, M) / M)
        self.enc, self.proc, self.dec = nn.Linear(F, H), nn.Linear(H, H), nn.Linear(H, F)
        ring = torch.arange(M)
        self.register_buffer("edges", torch.stack([ring, (ring + 1) % M]))

    def forward(self, x):
        b = x.shape[0]
        h = self.enc(torch.einsum("mg,bgf->bmf", self.g2m, x).reshape(b * M, F))
        shift = torch.arange(b).repeat_interleave(M) * M
        src, dst = self.edges[0].repeat(b) + shift, self.edges[1].repeat(b) + shift
        p = self.proc(h + torch.zeros_like(h).index_add_(0, dst, h[src]))
        p += h  # the residual, added in place into the processor's output (a patched site's output)
        out = self.dec(torch.relu(p)).reshape(b, M, F)
        return x + torch.einsum("gm,bmf->bgf", self.m2g, out)


def _grid_metric(out, target=None):
    return out.sum((1, 2))


@pytest.fixture(scope="module")
def mesh():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    return MeshForecaster().eval(), torch.randn(4, G, F, generator=g), torch.randn(6, G, F, generator=g)


def _acts(model, module, x):
    got = {}
    h = module.register_forward_hook(lambda _m, _a, o: got.__setitem__("a", o.detach().clone()))
    with torch.no_grad():
        model(x)
    h.remove()
    return got["a"]


def _run_with(model, module, x, value):
    h = module.register_forward_hook(lambda _m, _a, _o: value.clone())  # the model adds into it in place
    with torch.no_grad():
        out = model(x)
    h.remove()
    return out


@pytest.mark.parametrize("reference_rows", [6, 24])
def test_fixed_mesh_on_grid_inputs_names_the_layout_that_works(mesh, reference_rows):
    """The inputs' rows are samples (gridded fields): FixedMesh(12) cannot group them into meshes.
    Refused (6 rows: not whole meshes; 24 rows with the layout declared: both say what a sample
    is), naming samples= dropped and the site's 'batch*window' layout; on today's code the first
    was refused with "give the rows of one sample as nodes=", which no nodes= fixes."""
    model, x, _ = mesh
    ref = torch.randn(reference_rows, G, F, generator=torch.Generator().manual_seed(2))
    axes = {"proc": "batch*window feature"} if reference_rows == 24 else None
    with pytest.raises(DataValidationError, match=r"drop samples=") as err:
        with ablate(model, "proc", method="mean", reference=ref, samples=scimech.FixedMesh(M), axes=axes):
            model(x)
    if reference_rows == 6:
        assert "batch*window feature" in str(err.value)


def test_the_named_fix_is_each_mesh_nodes_mean_over_the_reference_samples(mesh):
    model, x, ref = mesh
    axes = {"proc": "batch*window feature"}
    truth_mean = _acts(model, model.proc, ref).reshape(6, M, H).mean(0)  # node k over the 6 reference samples
    truth = _run_with(model, model.proc, x, truth_mean.repeat(4, 1))
    with torch.no_grad(), ablate(model, "proc", method="mean", reference=ref, axes=axes):
        got = model(x)
    torch.testing.assert_close(got, truth, rtol=0, atol=ATOL)
    sweep = ablation_sweep(model, x, ["proc"], method="mean", reference=ref, metric=_grid_metric, axes=axes)
    torch.testing.assert_close(
        torch.as_tensor(sweep["ablated"].sel(site="proc").values), _grid_metric(truth), rtol=0, atol=1e-4
    )


def test_patching_the_mesh_processor_written_in_place_matches_the_hand_loop(mesh):
    """Denoising: the clean processor output (all of it, or units 0 and 1) into the corrupted run,
    whose residual is then added in place into what was patched in."""
    model, x, other = mesh
    corrupted = other[:4]
    src = _acts(model, model.proc, x)
    units = src.clone()
    patched = patching_sweep(
        model,
        x,
        corrupted,
        ["proc", "proc.units[0,1]"],
        metric=_grid_metric,
        axes={"proc": "batch*window feature"},
    )
    mine = _acts(model, model.proc, corrupted)
    units[:, 2:] = mine[:, 2:]
    for site, value in (("proc", src), ("proc.units[0,1]", units)):
        truth = _grid_metric(_run_with(model, model.proc, corrupted, value))
        torch.testing.assert_close(torch.as_tensor(patched["patched"].sel(site=site).values), truth, rtol=0, atol=1e-4)


def test_the_named_fix_resamples_whole_reference_meshes_node_for_node(mesh):
    """Each sample's mesh becomes one reference sample's whole mesh (12 rows in node order)."""
    model, x, ref = mesh
    refs = _acts(model, model.proc, ref).reshape(6, M, H)
    seen = []
    with (
        torch.no_grad(),
        ablate(model, "proc", method="resample", reference=ref, axes={"proc": "batch*window feature"}),
    ):
        # registered after ablate's hook: sees the replaced activation
        h = model.proc.register_forward_hook(lambda _m, _a, o: seen.append(o.detach().clone()))
        model(x)
    h.remove()
    for mesh_of_sample in seen[-1].reshape(4, M, H):
        assert any(torch.allclose(mesh_of_sample, r, atol=ATOL) for r in refs)


# -- an edge-level site of one graph given unbatched ---------------------------------------------

N, E = 10, 30


class EdgeMessages(nn.Module):
    """One graph, unbatched: per-edge messages (E, H) from both end nodes, summed at the target."""

    def __init__(self):
        super().__init__()
        self.msg, self.out = nn.Linear(2 * F, H), nn.Linear(H, 1)

    def forward(self, x, edge_index):
        m = self.msg(torch.cat([x[edge_index[0]], x[edge_index[1]]], -1))
        return self.out(torch.tanh(torch.zeros(x.shape[0], m.shape[1]).index_add_(0, edge_index[1], m)))


def _fwd(m, b):
    return m(b["x"], b["edge_index"])


def _node_sum(out, target=None):
    return out.sum(-1)


def _graph_sum(out, target=None):
    return out.sum().reshape(1)  # one graph: one sample


@pytest.fixture(scope="module")
def graph():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    ei = torch.randint(0, N, (2, E), generator=g)
    clean = {"x": torch.randn(N, F, generator=g), "edge_index": ei}
    other = {"x": torch.randn(N, F, generator=g), "edge_index": ei}
    return EdgeMessages().eval(), clean, other


ONE = torch.zeros(N, dtype=torch.long)  # every node in the one sample
AXES = {"msg": "edge feature"}


def test_an_edge_site_is_named_as_edges_with_the_layout_that_works(graph):
    """On today's code the advice was 'batch*window feature' (30 = 10 x 3), which would read
    three edges per node as one node's windows."""
    model, clean, _ = graph
    with pytest.raises(DimensionError, match=r"edges of the graph.*'edge feature'"):
        scimech.record(model, clean, ["msg"], forward=_fwd)
    with pytest.raises(DimensionError, match=r"edges of the graph"):
        with torch.no_grad(), ablate(model, "msg", method="zero"):
            _fwd(model, clean)


def test_record_of_an_edge_site_is_one_sample_of_its_edges(graph):
    model, clean, other = graph
    ds = scimech.record(model, [clean, other], ["msg"], forward=_fwd, axes=AXES)
    assert ds["msg"].dims == ("sample", "edge", "feature")
    truth = torch.stack([_acts_graph(model, clean), _acts_graph(model, other)])
    torch.testing.assert_close(torch.as_tensor(ds["msg"].values), truth, rtol=0, atol=ATOL)


def _acts_graph(model, batch):
    got = {}
    h = model.msg.register_forward_hook(lambda _m, _a, o: got.__setitem__("a", o.detach().clone()))
    with torch.no_grad():
        _fwd(model, batch)
    h.remove()
    return got["a"]


def _graph_with(model, batch, fn):
    h = model.msg.register_forward_hook(lambda _m, _a, o: fn(o))
    with torch.no_grad():
        out = _fwd(model, batch)
    h.remove()
    return out


def test_mean_ablation_of_edges_is_the_reference_graphs_edges(graph):
    """A reference of one graph with the same edges: its messages replace the run's, edge for edge."""
    model, clean, other = graph
    theirs = _acts_graph(model, other)
    truth = _graph_with(model, clean, lambda o: theirs)
    with torch.no_grad(), ablate(model, "msg", method="mean", reference=other, forward=_fwd, samples=ONE, axes=AXES):
        got = _fwd(model, clean)
    torch.testing.assert_close(got, truth, rtol=0, atol=ATOL)


def test_sweeps_of_edge_sites_match_the_hand_loop(graph):
    model, clean, other = graph
    sites = ["msg", "msg.units[0,1,2]"]
    zero = ablation_sweep(model, clean, sites, method="zero", metric=_graph_sum, forward=_fwd, axes=AXES, samples=ONE)

    def zero_units(o):
        o = o.clone()
        o[:, 0:3] = 0
        return o

    for site, fn in zip(sites, [torch.zeros_like, zero_units], strict=True):
        truth = _graph_sum(_graph_with(model, clean, fn))
        torch.testing.assert_close(torch.as_tensor(zero["ablated"].sel(site=site).values), truth, rtol=0, atol=ATOL)
    # denoising: the corrupted run (other) gets the clean messages of units 0:3
    src = _acts_graph(model, clean)

    def clean_units(o):
        o = o.clone()
        o[:, 0:3] = src[:, 0:3]
        return o

    patched = patching_sweep(
        model, clean, other, ["msg.units[0,1,2]"], metric=_graph_sum, forward=_fwd, axes=AXES, samples=ONE
    )
    torch.testing.assert_close(
        torch.as_tensor(patched["patched"].values[0]),
        _graph_sum(_graph_with(model, other, clean_units)),
        rtol=0,
        atol=ATOL,
    )


def test_attribution_patching_of_edges_is_the_gradient_times_the_difference(graph):
    """AtP (denoising): grad of the metric at the corrupted run's messages, dotted with (clean - corrupted)."""
    model, clean, other = graph
    got = attribution_patching(model, clean, other, ["msg"], metric=_graph_sum, forward=_fwd, axes=AXES, samples=ONE)
    a_clean = _acts_graph(model, clean)
    held = {}

    def keep(_m, _a, o):
        held["a"] = o
        o.retain_grad()

    h = model.msg.register_forward_hook(keep)
    _graph_sum(_fwd(model, other)).sum().backward()
    h.remove()
    model.zero_grad()
    truth = float((held["a"].grad * (a_clean - held["a"].detach())).sum())
    assert float(got["effect"].values[0, 0]) == pytest.approx(truth, rel=1e-5, abs=ATOL)


def test_an_unbatched_layout_is_a_view_of_one_sample():
    axes = parse_axes("edge feature")
    assert axes.unbatched and axes.positions == ("edge",)
    t = torch.randn(E, H)
    c = axes.canonical(t, rows=N)
    assert c.shape == (1, E, H)
    c[0, 0, 0] = 7.0  # a write into the view is a write into the model's tensor
    assert t[0, 0] == 7.0
    torch.testing.assert_close(axes.restore(c), t, rtol=0, atol=0)
    with pytest.raises(DimensionError, match="first axis"):
        parse_axes("feature edge")


def test_record_refuses_unbatched_and_batched_sites_together_and_a_cut_graph(graph):
    model, clean, _ = graph
    with pytest.raises(DimensionError, match="two calls"):
        scimech.record(model, clean, ["msg", "out"], forward=_fwd, axes=AXES)
    with pytest.raises(DimensionError, match="batch_size=10"):
        scimech.record(model, clean, ["msg"], forward=_fwd, axes=AXES, batch_size=4)
