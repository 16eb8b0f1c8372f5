"""Graph neural networks (torch_geometric): the rows of an activation are nodes, the samples
are graphs, and nodes of one graph interact by message passing.

- ``GCN``: ``forward(x, edge_index, batch)``, two ``GCNConv`` layers (each followed by a
  ``ReLU`` module) and a mean pool per graph: one metric value per graph. Called on a
  ``torch_geometric.data.Batch`` through ``forward=lambda m, b: m(b.x, b.edge_index, b.batch)``:
  the graphs are the samples, a tiled pass is a disjoint union, a slice takes whole graphs.
  Two data sets: graphs of different node counts, and "meshes" (every graph the same 6-node
  2x3 grid, different features).
- ``NodeModel``: ``forward(x, edge_index, batch=None)``, ``GraphConv`` layers, one value per
  node; the user passes a dict ``{"x": x, "edge_index": ei}`` whose ``edge_index`` is
  unbatched (dim 0 is 2, not the node count). Without ``samples=`` the rows (nodes) interact:
  the sweeps must agree with per-site hand truth or fall back to one pass per site (attrs),
  and resample / mean / attribution patching must refuse.

Truths: each graph run alone through the model (its own ``x`` and ``edge_index``, batch all
zeros) with plain forward hooks editing the site's output, for per-graph metrics; for
node-level models, one hand-hooked forward of the whole disjoint union per site, summed per
graph where samples are graphs; gradients by autograd at a leaf in place of the site's
output.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn
from torch_geometric.data import Batch, Data
from torch_geometric.nn import GCNConv, GraphConv, global_mean_pool

import scimech as sm
from scimech.errors import DataValidationError

from .helpers import ATOL, edit_output, grad_at, npy, set_cols, watch

F_IN, HID = 4, 16


def metric(out, target=None):
    return out


def fwd(m, b):
    return m(b.x, b.edge_index, b.batch)


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GCNConv(F_IN, HID)
        self.act1 = nn.ReLU()
        self.conv2 = GCNConv(HID, HID)
        self.act2 = nn.ReLU()
        self.lin = nn.Linear(HID, 1)

    def forward(self, x, edge_index, batch):
        h = self.act1(self.conv1(x, edge_index))
        h = self.act2(self.conv2(h, edge_index))
        return global_mean_pool(self.lin(h), batch).squeeze(-1)


class NodeModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GraphConv(F_IN, HID)
        self.conv2 = GraphConv(HID, HID)
        self.lin = nn.Linear(HID, 1)

    def forward(self, x, edge_index, batch=None):
        h = torch.tanh(self.conv1(x, edge_index))
        h = torch.tanh(self.conv2(h, edge_index))
        return self.lin(h).squeeze(-1)


def ring_edges(n: int, g: torch.Generator) -> torch.Tensor:
    """An undirected ring plus one random chord (both directions)."""
    src = torch.arange(n)
    dst = (src + 1) % n
    a, b = torch.randint(0, n, (2,), generator=g).tolist()
    e = torch.stack([torch.cat([src, torch.tensor([a])]), torch.cat([dst, torch.tensor([(a + 2) % n])])])
    return torch.cat([e, e.flip(0)], 1)


MESH_EDGES = torch.tensor([[0, 1], [1, 2], [3, 4], [4, 5], [0, 3], [1, 4], [2, 5]]).T
MESH_EDGES = torch.cat([MESH_EDGES, MESH_EDGES.flip(0)], 1)  # a 2x3 grid, undirected


def graphs(sizes, g, edges=None):
    """Graphs of the given node counts (random features, ring edges unless ``edges``)."""
    return [
        Data(x=torch.randn(n, F_IN, generator=g), edge_index=ring_edges(n, g) if edges is None else edges)
        for n in sizes
    ]


def refeature(data_list, g):
    """The same graphs (nodes, edges) with new random features: a corrupted counterpart."""
    return [Data(x=torch.randn_like(d.x).normal_(generator=g), edge_index=d.edge_index) for d in data_list]


def run_alone(model, d: Data):
    return model(d.x, d.edge_index, torch.zeros(d.num_nodes, dtype=torch.long))


def per_graph(model, data_list, module=None, fn=None) -> np.ndarray:
    """The metric of each graph run alone, with ``fn`` editing ``module``'s output (if given)."""
    out = []
    with torch.no_grad():
        for d in data_list:
            if module is None:
                out.append(run_alone(model, d))
            else:
                with edit_output(module, fn):
                    out.append(run_alone(model, d))
    return npy(torch.cat(out))


def out_alone(model, module, d: Data) -> torch.Tensor:
    with torch.no_grad(), watch(module) as seen:
        run_alone(model, d)
    return seen[0]


@pytest.fixture(scope="module")
def gcn():
    torch.manual_seed(0)
    model = GCN().eval()
    g = torch.Generator().manual_seed(90)
    var = graphs([3, 5, 4, 6], g)
    var_ref = graphs([4, 3, 5], g)
    mesh = graphs([6] * 4, g, MESH_EDGES)
    mesh_ref = graphs([6] * 3, g, MESH_EDGES)
    return SimpleNamespace(
        model=model,
        var=var,
        var_corr=refeature(var, g),
        var_ref=var_ref,
        mesh=mesh,
        mesh_ref=mesh_ref,
        batch=Batch.from_data_list,
    )


def unit(u):
    return lambda t: set_cols(t, slice(u, u + 1), 0.0)


# ----------------------------------------------------------------------------------------------
# a torch_geometric Batch as the input: graphs are the samples


def test_pyg_batch_ablation_sweep_zero(gcn):
    """Zero ablation on a Batch of graphs of different sizes, batch_size=2 graphs per slice,
    several sites per tiled pass: one value per graph, equal to each graph run alone with a
    hook zeroing the unit (or the whole output); the baseline is each graph run alone. Tiling
    is a disjoint union, so the row check finds the graphs independent."""
    m, data = gcn.model, gcn.var
    sites = {
        "conv1.units[3]": (m.conv1, unit(3)),
        "conv2.units[0]": (m.conv2, unit(0)),
        "conv1": (m.conv1, torch.zeros_like),
    }
    res = sm.ablation_sweep(m, gcn.batch(data), list(sites), metric, method="zero", forward=fwd, batch_size=2)
    assert res.sizes["sample"] == len(data), res.sizes
    np.testing.assert_allclose(res.baseline.values, per_graph(m, data), atol=ATOL)
    for s, (mod, fn) in sites.items():
        np.testing.assert_allclose(res.ablated.sel(site=s).values, per_graph(m, data, mod, fn), atol=ATOL, err_msg=s)
    assert res.attrs["row_check"].startswith("independent"), res.attrs.get("row_check")


def test_pyg_batch_patching_sweep(gcn):
    """Denoising patching between two Batches of the same graphs (new features): each graph's
    value equals the corrupted graph run alone with the clean graph's activation (run alone)
    put in; batch_size=3 graphs (slices of 3 and 1)."""
    m, clean, corr = gcn.model, gcn.var, gcn.var_corr
    res = sm.patching_sweep(
        m, gcn.batch(clean), gcn.batch(corr), ["conv1", "conv2.units[5]"], metric, forward=fwd, batch_size=3
    )
    assert res.sizes["sample"] == len(clean)
    np.testing.assert_allclose(res.clean.values, per_graph(m, clean), atol=ATOL)
    np.testing.assert_allclose(res.corrupted.values, per_graph(m, corr), atol=ATOL)
    for s, mod, cols in [("conv1", m.conv1, slice(None)), ("conv2.units[5]", m.conv2, slice(5, 6))]:
        expect = []
        with torch.no_grad():
            for dc, dx in zip(clean, corr):
                src = out_alone(m, mod, dc)
                with edit_output(mod, lambda t, src=src, cols=cols: set_cols(t, cols, src[:, cols])):
                    expect.append(run_alone(m, dx))
        np.testing.assert_allclose(res.patched.sel(site=s).values, npy(torch.cat(expect)), atol=ATOL, err_msg=s)


def test_pyg_batch_mean_ablation_over_all_reference_rows(gcn):
    """Mean ablation with a reference Batch whose graphs differ in node count: the mean over
    every reference node (hand: the reference graphs run alone, rows concatenated)."""
    m = gcn.model
    ref_rows = torch.cat([out_alone(m, m.conv1, d) for d in gcn.var_ref])
    mean = ref_rows[:, 3].mean()
    res = sm.ablation_sweep(
        m,
        gcn.batch(gcn.var),
        ["conv1.units[3]"],
        metric,
        method="mean",
        reference=gcn.batch(gcn.var_ref),
        forward=fwd,
        batch_size=2,
    )
    np.testing.assert_allclose(
        res.ablated.sel(site="conv1.units[3]").values,
        per_graph(m, gcn.var, m.conv1, lambda t: set_cols(t, slice(3, 4), mean)),
        atol=ATOL,
    )


def test_pyg_mesh_mean_ablation_over_every_reference_node(gcn):
    """Meshes (every graph 6 nodes): mean ablation is the mean over every reference node, as for
    graphs of different sizes (hand: reference meshes run alone, rows pooled); a per-position
    mean would differ (checked), so the two definitions are told apart."""
    m = gcn.model
    ref = torch.stack([out_alone(m, m.conv1, d) for d in gcn.mesh_ref])  # (R, 6, HID)
    assert (ref[:, :, 3].mean(0).max() - ref[:, :, 3].mean(0).min()) > 1e-3
    mean = ref[:, :, 3].mean()
    res = sm.ablation_sweep(
        m,
        gcn.batch(gcn.mesh),
        ["conv1.units[3]"],
        metric,
        method="mean",
        reference=gcn.batch(gcn.mesh_ref),
        forward=fwd,
    )
    np.testing.assert_allclose(
        res.ablated.sel(site="conv1.units[3]").values,
        per_graph(m, gcn.mesh, m.conv1, lambda t: set_cols(t, slice(3, 4), mean)),
        atol=ATOL,
    )


@pytest.mark.parametrize("verb", ["ablate", "ablation_sweep"])
def test_pyg_mesh_resample_of_multi_row_samples_is_refused(gcn, verb):
    """Resample where a sample is several rows (graph nodes) would swap nodes between graphs;
    both verbs refuse it with a DataValidationError that names the method they accept."""
    m = gcn.model
    with pytest.raises(DataValidationError, match="method='mean'"):
        if verb == "ablate":
            b = gcn.batch(gcn.mesh)
            with (
                torch.no_grad(),
                sm.ablate(
                    m, "conv1", method="resample", reference=gcn.batch(gcn.mesh_ref), forward=fwd, samples=b.batch
                ),
            ):
                fwd(m, b)
        else:
            sm.ablation_sweep(
                m,
                gcn.batch(gcn.mesh),
                ["conv1"],
                metric,
                method="resample",
                reference=gcn.batch(gcn.mesh_ref),
                forward=fwd,
            )


@pytest.mark.parametrize("verb", ["ablate", "ablation_sweep"])
def test_fixed_mesh_mean_ablation_is_each_nodes_mean_over_reference_meshes(gcn, verb):
    """samples=FixedMesh(6): mean ablation replaces node k of every mesh by node k's mean over
    the reference meshes (hand: reference meshes run alone, stacked, averaged per node)."""
    m = gcn.model
    ref = torch.stack([out_alone(m, m.conv1, d) for d in gcn.mesh_ref])  # (R, 6, HID)
    per_node = ref[:, :, 3].mean(0)  # (6,)
    truth = per_graph(m, gcn.mesh, m.conv1, lambda t: set_cols(t, slice(3, 4), per_node[:, None]))
    b = gcn.batch(gcn.mesh)
    if verb == "ablate":
        with (
            torch.no_grad(),
            sm.ablate(
                m,
                "conv1.units[3]",
                method="mean",
                reference=gcn.batch(gcn.mesh_ref),
                forward=fwd,
                samples=sm.FixedMesh(6),
            ),
        ):
            got = npy(fwd(m, b))
    else:
        got = (
            sm.ablation_sweep(
                m,
                b,
                ["conv1.units[3]"],
                metric,
                method="mean",
                reference=gcn.batch(gcn.mesh_ref),
                forward=fwd,
                samples=sm.FixedMesh(6),
            )
            .ablated.sel(site="conv1.units[3]")
            .values
        )
    np.testing.assert_allclose(got, truth, atol=ATOL)
    pooled = per_graph(m, gcn.mesh, m.conv1, lambda t: set_cols(t, slice(3, 4), ref[:, :, 3].mean()))
    assert np.abs(truth - pooled).max() > 1e-4  # the two definitions are told apart on this data


def test_fixed_mesh_resample_swaps_whole_reference_meshes_node_for_node(gcn):
    """samples=FixedMesh(6): resampling gives each mesh one reference mesh's activation, node for
    node. With one reference mesh the truth is fixed; with three, each mesh's result is one of
    the three hand-made swaps (never a mixture of nodes from several reference meshes)."""
    m = gcn.model
    b = gcn.batch(gcn.mesh)
    alone = [out_alone(m, m.conv1, d) for d in gcn.mesh_ref]
    swaps = np.stack([per_graph(m, gcn.mesh, m.conv1, lambda t, r=r: r.clone()) for r in alone])  # (R, graphs)
    one = sm.ablation_sweep(
        m,
        b,
        ["conv1"],
        metric,
        method="resample",
        reference=gcn.batch(gcn.mesh_ref[:1]),
        forward=fwd,
        samples=sm.FixedMesh(6),
    )
    np.testing.assert_allclose(one.ablated.sel(site="conv1").values, swaps[0], atol=ATOL)
    for seed in range(3):
        with (
            torch.no_grad(),
            sm.ablate(
                m,
                "conv1",
                method="resample",
                reference=gcn.batch(gcn.mesh_ref),
                forward=fwd,
                samples=sm.FixedMesh(6),
                seed=seed,
            ),
        ):
            got = npy(fwd(m, b))
        match = np.abs(swaps - got[None]).min(axis=0)
        np.testing.assert_allclose(match, 0.0, atol=ATOL)


def test_fixed_mesh_on_graphs_of_other_sizes_is_refused(gcn):
    with pytest.raises(DataValidationError, match="FixedMesh"):
        sm.ablation_sweep(
            gcn.model,
            gcn.batch(gcn.var),
            ["conv1"],
            metric,
            method="mean",
            reference=gcn.batch(gcn.var_ref),
            forward=fwd,
            samples=sm.FixedMesh(4),
        )
    with pytest.raises(ValueError, match="nodes"):
        sm.FixedMesh(0)


def test_pyg_resample_with_unequal_node_counts_is_refused(gcn):
    """Resample replaces all rows of a sample by one reference sample's rows: with graphs of
    different node counts that cannot be done, a DataValidationError."""
    with pytest.raises(DataValidationError):
        sm.ablation_sweep(
            gcn.model,
            gcn.batch(gcn.var),
            ["conv1"],
            metric,
            method="resample",
            reference=gcn.batch(gcn.var_ref),
            forward=fwd,
        )


def test_pyg_pairs_with_other_node_counts_are_refused(gcn):
    """Equal node totals but other graph sizes paired nodes of different graphs silently."""
    g = torch.Generator().manual_seed(3)
    clean = gcn.batch(graphs([4, 5, 6], g))
    corrupted = gcn.batch(graphs([5, 6, 4], g))  # 15 nodes each
    for verb in (sm.patching_sweep, sm.attribution_patching):
        with pytest.raises(DataValidationError, match="Graph 0 has 4 nodes in clean and 5 in corrupted"):
            verb(gcn.model, clean, corrupted, ["conv1"], metric, forward=fwd)


def test_pyg_batch_attribution_patching(gcn):
    """AtP on a Batch: per graph, the gradient of that graph's metric at ``conv2``'s output
    (the corrupted graph run alone) dotted with clean - corrupted over the graph's nodes."""
    m, clean, corr = gcn.model, gcn.var, gcn.var_corr
    expect = []
    for dc, dx in zip(clean, corr):
        a, grad = grad_at(m.conv2, lambda dx=dx: run_alone(m, dx), port="output")
        expect.append(float(((out_alone(m, m.conv2, dc) - a) * grad).sum()))
    res = sm.attribution_patching(m, gcn.batch(clean), gcn.batch(corr), ["conv2"], metric, forward=fwd)
    assert res.sizes["sample"] == len(clean)
    np.testing.assert_allclose(res.effect.sel(site="conv2").values, np.array(expect), atol=ATOL)


# ----------------------------------------------------------------------------------------------
# a dict {"x", "edge_index"} with an unbatched edge_index: rows are nodes and they interact


@pytest.fixture(scope="module")
def nodes():
    torch.manual_seed(1)
    model = NodeModel().eval()
    g = torch.Generator().manual_seed(91)
    data = graphs([3, 5, 4, 6], g)
    corr = refeature(data, g)
    ref = graphs([4, 5, 3], g)
    b, bc, br = Batch.from_data_list(data), Batch.from_data_list(corr), Batch.from_data_list(ref)

    def as_dict(bb, with_batch=False):
        d = {"x": bb.x, "edge_index": bb.edge_index}
        if with_batch:
            d["batch"] = bb.batch
        return d

    return SimpleNamespace(model=model, b=b, bc=bc, br=br, as_dict=as_dict, n_graphs=len(data))


def hand_nodes(model, bb, module=None, fn=None) -> torch.Tensor:
    """Per-node output of one forward of the whole disjoint union, ``fn`` editing ``module``."""
    with torch.no_grad():
        if module is None:
            return model(bb.x, bb.edge_index)
        with edit_output(module, fn):
            return model(bb.x, bb.edge_index)


def per_sample_sum(values: torch.Tensor, batch: torch.Tensor, n: int) -> np.ndarray:
    return npy(torch.zeros(n).index_add_(0, batch, values))


NODE_SITES = ["conv1.units[3]", "conv1.units[7]", "conv2.units[1]"]


def node_edit(model, s):
    mod = model.conv1 if s.startswith("conv1") else model.conv2
    return mod, unit(int(s.split("[")[1][:-1]))


def test_dict_with_unbatched_edge_index_sweep_is_never_wrong(nodes):
    """No samples=: the rows are nodes and the sample dim counts nodes. The edge_index (2, E) is
    unbatched metadata, so a tiled pass would give the copies no edges: the sweep must find
    the rows coupled and run one pass per site, or otherwise agree with the hand truth (one
    hooked forward of the whole graph set per site, per node). Either way the numbers equal
    the truth, and attrs say which."""
    m, b = nodes.model, nodes.b
    res = sm.ablation_sweep(m, nodes.as_dict(b), NODE_SITES, metric, method="zero")
    assert res.sizes["sample"] == b.num_nodes, res.sizes
    np.testing.assert_allclose(res.baseline.values, npy(hand_nodes(m, b)), atol=ATOL)
    for s in NODE_SITES:
        np.testing.assert_allclose(
            res.ablated.sel(site=s).values, npy(hand_nodes(m, b, *node_edit(m, s))), atol=ATOL, err_msg=s
        )
    check = res.attrs["row_check"]
    assert check.startswith(("independent", "coupled")), check
    if check.startswith("coupled"):
        assert res.attrs["sweep_path"] == "per_site", res.attrs.get("sweep_path")


def test_dict_with_unbatched_edge_index_patching_sweep(nodes):
    """patching_sweep on the dict input (no samples=): per node, one hand-hooked forward per
    site of the corrupted graphs with the clean activation put in; the tiled copies would have
    lost their edges, so the sweep ran one pass per site (attrs)."""
    m, b, bc = nodes.model, nodes.b, nodes.bc
    res = sm.patching_sweep(m, nodes.as_dict(b), nodes.as_dict(bc), ["conv1", "conv2"], metric)
    for s in ("conv1", "conv2"):
        mod = m.get_submodule(s)
        with torch.no_grad(), watch(mod) as seen:
            m(b.x, b.edge_index)
        np.testing.assert_allclose(
            res.patched.sel(site=s).values, npy(hand_nodes(m, bc, mod, lambda t: seen[0])), atol=ATOL, err_msg=s
        )
    assert res.attrs["row_check"].startswith("coupled"), res.attrs.get("row_check")
    assert res.attrs["sweep_path"] == "per_site", res.attrs.get("sweep_path")


def test_dict_samples_tensor_sums_per_row_metric_per_graph(nodes):
    """samples= the node-to-graph vector (a tensor): the sample dim counts graphs and a
    per-node metric is summed per graph (hand: per-node truth of one hooked forward per site,
    summed with index_add over the batch vector)."""
    m, b = nodes.model, nodes.b
    res = sm.ablation_sweep(m, nodes.as_dict(b), NODE_SITES, metric, method="zero", samples=b.batch)
    assert res.sizes["sample"] == nodes.n_graphs, res.sizes
    np.testing.assert_allclose(
        res.baseline.values, per_sample_sum(hand_nodes(m, b), b.batch, nodes.n_graphs), atol=ATOL
    )
    for s in NODE_SITES:
        np.testing.assert_allclose(
            res.ablated.sel(site=s).values,
            per_sample_sum(hand_nodes(m, b, *node_edit(m, s)), b.batch, nodes.n_graphs),
            atol=ATOL,
            err_msg=s,
        )


def test_dict_samples_field_name_mean_ablation(nodes):
    """samples='batch' names the input field with the node-to-graph vector; mean ablation with a
    reference dict of graphs of other sizes: the mean over every reference node (hand: one
    forward of the reference graphs), per graph sums of the per-node metric."""
    m, b, br = nodes.model, nodes.b, nodes.br
    with torch.no_grad(), watch(m.conv1) as seen:
        m(br.x, br.edge_index)
    mean = seen[0][:, 3].mean()
    res = sm.ablation_sweep(
        m,
        nodes.as_dict(b, True),
        ["conv1.units[3]"],
        metric,
        method="mean",
        reference=nodes.as_dict(br, True),
        samples="batch",
    )
    expect = per_sample_sum(
        hand_nodes(m, b, m.conv1, lambda t: set_cols(t, slice(3, 4), mean)), b.batch, nodes.n_graphs
    )
    np.testing.assert_allclose(res.ablated.sel(site="conv1.units[3]").values, expect, atol=ATOL)


def test_dict_samples_callable_attribution_patching(nodes):
    """samples= a callable(batch) -> the node-to-graph vector; AtP per graph: the gradient of
    the summed per-node metric at ``conv2``'s output on the corrupted graphs (graphs are
    disjoint, so graph i's rows carry only graph i's gradient) dotted with clean - corrupted,
    summed over the graph's nodes."""
    m, b, bc = nodes.model, nodes.b, nodes.bc
    with torch.no_grad(), watch(m.conv2) as seen:
        m(b.x, b.edge_index)
    a, grad = grad_at(m.conv2, lambda: m(bc.x, bc.edge_index), port="output")
    expect = per_sample_sum(((seen[0] - a) * grad).sum(1), b.batch, nodes.n_graphs)
    res = sm.attribution_patching(
        m, nodes.as_dict(b, True), nodes.as_dict(bc, True), ["conv2"], metric, samples=lambda batch: batch["batch"]
    )
    assert res.sizes["sample"] == nodes.n_graphs, res.sizes
    np.testing.assert_allclose(res.effect.sel(site="conv2").values, expect, atol=ATOL)


def test_dict_without_samples_refuses_mean_resample_and_atp(nodes):
    """Rows (nodes) that interact through the unbatched edge_index, no samples=: mean and
    resample ablation and attribution patching raise DataValidationError naming samples=."""
    m, d, dc, dr = nodes.model, nodes.as_dict(nodes.b), nodes.as_dict(nodes.bc), nodes.as_dict(nodes.br)
    for method in ("mean", "resample"):
        with pytest.raises(DataValidationError, match="samples="):
            sm.ablation_sweep(m, d, ["conv1.units[3]"], metric, method=method, reference=dr)
    with pytest.raises(DataValidationError, match="samples="):
        sm.attribution_patching(m, d, dc, ["conv2"], metric)
