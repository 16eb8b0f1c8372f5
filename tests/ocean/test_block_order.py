"""Training reads a product larger than memory in an order that shuffles within blocks of time steps,
through a cache bounded in bytes.

Truths: the order is checked by counting (every item once, each block's items contiguous); the block
reads by the reader's count of loads against the number of distinct blocks the items need; the
cache's bytes by summing the ``nbytes`` of the arrays it holds; every item's values against the
dataset indexed with numpy; the order of a small product against ``torch.utils.data.RandomSampler``
with the seed ``seed * 1000 + epoch`` (the order the training always had).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ocean import data, synthetic
from ocean.data import samples
from scimech.errors import DataValidationError

from .test_training import planted_dataset

WINDOW, LEAD, BLOCK = 3, 1, 5  # windows of 3 steps and a target 1 later straddle the 5-step blocks' cores


@pytest.fixture(scope="module")
def ds():
    return planted_dataset().isel(time=slice(0, 40))  # 2 members x 40 months, 8 x 8 points, land in a corner


@pytest.fixture(scope="module")
def split_norm(ds):
    s = data.chronological_split(ds.sizes["time"], window=WINDOW, lead=LEAD, fractions=(0.6, 0.2, 0.2))
    return s, data.fit_normalizer(ds, s.train, window=WINDOW, lead=LEAD)


def windows(ds, split_norm, *, patch=(4, 4), blocks_held=2):
    s, norm = split_norm
    wd = data.WindowDataset(ds, s.train, norm, window=WINDOW, lead=LEAD, patch=patch, block=BLOCK)
    per_block = wd.reader.block_bytes
    return data.WindowDataset(
        ds, s.train, norm, window=WINDOW, lead=LEAD, patch=patch, block=BLOCK, max_bytes=blocks_held * per_block
    )


def order_of(batches, epoch, monkeypatch):
    """The item indices an epoch's batches read, in the order read."""
    seen = []
    get = data.WindowDataset.__getitem__

    def recording(self, i):
        seen.append(i)
        return get(self, i)

    with monkeypatch.context() as mp:
        mp.setattr(data.WindowDataset, "__getitem__", recording)
        n = sum(len(b["t"]) for b in batches(epoch))
    assert n == len(seen)
    return seen


def test_block_sampler_is_a_permutation_with_each_block_contiguous():
    keys = [(m, t // 4) for m in range(2) for t in range(13) for _ in range(3)]  # 2 members x 4 blocks, 3 tiles
    orders = {}
    for seed, epoch in [(0, 0), (0, 1), (1, 0)]:
        g = torch.Generator().manual_seed(seed * 1000 + epoch)
        order = list(samples.BlockSampler(keys, generator=g))
        assert sorted(order) == list(range(len(keys)))  # every item exactly once
        runs = [keys[order[0]]] + [keys[j] for i, j in zip(order, order[1:]) if keys[i] != keys[j]]
        assert len(runs) == len(set(keys)) == 8  # each block's items in one run: 8 blocks, 8 runs
        orders[seed, epoch] = order
    assert orders[0, 0] != orders[0, 1] and orders[0, 0] != orders[1, 0]
    again = list(samples.BlockSampler(keys, generator=torch.Generator().manual_seed(0)))
    assert again == orders[0, 0]  # the same seed and epoch give the same order
    # the blocks' order is shuffled too, not only the items within each block
    firsts = {tuple(keys[o[0]]) for o in orders.values()} | {
        tuple(keys[list(samples.BlockSampler(keys, generator=torch.Generator().manual_seed(s)))[0]]) for s in range(8)
    }
    assert len(firsts) > 1


def test_block_order_reads_each_block_once_per_epoch_where_a_global_shuffle_rereads(ds, split_norm, monkeypatch):
    wd = windows(ds, split_norm)
    needed = len(set(wd.blocks))
    assert wd.block_bytes > wd.reader.max_bytes  # the record outgrows the cache: the block order is chosen
    batches = data.make_batches(wd, 4, seed=3)
    assert batches.order == "blocks"
    for epoch in range(2):
        before = wd.reader.loads
        order = order_of(batches, epoch, monkeypatch)
        assert sorted(order) == list(range(len(wd)))
        assert wd.reader.loads - before <= needed
    # the same items in a global shuffle through the same bounded cache read blocks again and again
    glob = windows(ds, split_norm, patch=None)
    assert len(order_of(data.make_batches(glob, 4, seed=3, order="global"), 0, monkeypatch)) == len(glob)
    assert glob.reader.loads > 2 * needed


def test_every_item_read_through_the_halo_is_the_dataset_indexed(ds, split_norm):
    s, norm = split_norm
    wd = windows(ds, split_norm, patch=None)
    ocean = ds["mask"].values.astype(bool)
    straddling = 0
    for i in samples.BlockSampler(wd.blocks, generator=torch.Generator().manual_seed(5)):
        m, t, _ = wd.items[i]
        straddling += (t - WINDOW + 1) // BLOCK != (t + LEAD) // BLOCK
        item = wd[i]
        x = item["x"].numpy().reshape(len(synthetic.INPUTS), WINDOW, *ocean.shape)
        for k, v in enumerate(synthetic.INPUTS):
            manual = (ds[v].values[m, t - WINDOW + 1 : t + 1] - norm.mean[v]) / norm.std[v]
            np.testing.assert_allclose(x[k][:, ocean], manual[:, ocean], rtol=1e-5, atol=1e-5)  # float32
        y = (ds["dmlhc_dt"].values[m, t + LEAD] - norm.mean["dmlhc_dt"]) / norm.scale
        np.testing.assert_allclose(item["y"].numpy()[0][ocean], y[ocean], rtol=1e-5, atol=1e-5)
        assert (x[:, :, ~ocean] == 0).all()
    assert straddling > 0  # some windows reach across a block's core: served by its halo
    assert wd.reader.loads == len(set(wd.blocks))


def test_the_cache_never_holds_more_bytes_than_its_bound(ds, split_norm, monkeypatch):
    wd = windows(ds, split_norm, patch=None, blocks_held=2)
    reader = wd.reader
    bound = reader.max_bytes
    held = lambda: sum(a.nbytes + b.nbytes for a, b in reader.cache.values())  # noqa: E731
    peaks = []
    read = reader._array

    def counting(names, scale, m, lo, hi):
        out = read(names, scale, m, lo, hi)
        peaks.append(held() + out.nbytes)  # what is held while a block is being read
        return out

    monkeypatch.setattr(reader, "_array", counting)
    g = torch.Generator().manual_seed(0)
    for i in torch.randperm(len(wd), generator=g).tolist():  # a global shuffle: the most evictions
        wd[i]
        assert held() <= bound
    assert reader.loads > 2 and max(peaks) <= bound
    assert len(reader.cache) <= 2
    with pytest.raises(DataValidationError, match="max_bytes.*below one block"):
        s, norm = split_norm
        data.WindowDataset(ds, s.train, norm, window=WINDOW, lead=LEAD, block=BLOCK, max_bytes=1000)


def test_a_small_product_keeps_the_global_shuffle_it_always_had(ds, split_norm, monkeypatch):
    s, norm = split_norm
    wd = data.WindowDataset(ds, s.train, norm, window=WINDOW, lead=LEAD)  # default bound: the product fits
    batches = data.make_batches(wd, 4, seed=2)
    assert batches.order == "global"
    for epoch in (0, 1):
        g = torch.Generator().manual_seed(2 * 1000 + epoch)
        loader = torch.utils.data.DataLoader(wd, batch_size=4, shuffle=True, generator=g)  # as before blocks
        truth = [(int(m), int(t)) for b in loader for m, t in zip(b["member"], b["t"])]
        assert [wd.items[i][:2] for i in order_of(batches, epoch, monkeypatch)] == truth
    assert wd.reader.loads == len(set(wd.blocks))  # held whole: each block read once over both epochs
