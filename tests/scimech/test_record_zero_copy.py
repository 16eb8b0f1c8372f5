"""record keeps an activation without a copy only where the model leaves it alone: a tensor the
model changes in place after the hook (a ReLU(inplace=True), ``x.add_(1)`` in a later module,
a write that depends on the data), or still holds after the pass, is recorded as it was at the
hook, compared against a hand-written hook that clones."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from scimech.capture.record import record


class AddsInPlace(nn.Module):
    """Adds 1 to its input in place where ``on`` (as a residual written into its input would)."""

    def __init__(self, on: bool = True):
        super().__init__()
        self.on = on

    def forward(self, x):
        return x.add_(1.0) if self.on else x + 1.0


def chain(later: nn.Module) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 5), later, nn.Linear(5, 2)).eval()


def cloned_at_hook(model: nn.Module, module: nn.Module, x: torch.Tensor) -> np.ndarray:
    """The truth: module's output as it was when its forward returned, cloned by a plain hook."""
    got = []
    h = module.register_forward_hook(lambda m, a, out: got.append(out.detach().clone()))
    try:
        with torch.no_grad():
            model(x)
    finally:
        h.remove()
    return got[0].numpy()


@pytest.mark.parametrize(
    "later", [nn.ReLU(inplace=True), AddsInPlace()], ids=["relu-inplace", "add_-in-a-later-module"]
)
@pytest.mark.parametrize("batch_size", [4, 10], ids=["batches", "one-batch"])
def test_a_tensor_written_after_the_hook_is_recorded_as_at_the_hook(later, batch_size):
    model = chain(later)
    x = torch.randn(10, 3) + 0.5  # some outputs of the Linear are negative: the ReLU changes them
    truth = cloned_at_hook(model, model[0], x)
    assert not np.allclose(truth, model[1](model[0](x)).detach().numpy())  # the later module does change it
    for _ in range(2):  # the second call knows the site is written in place (copied from the start)
        ds = record(model, x, ["0"], batch_size=batch_size)
        np.testing.assert_array_equal(ds["0"].values, truth)


def test_a_write_that_starts_later_is_caught_and_the_batch_recorded_again():
    later = AddsInPlace(on=False)
    model = chain(later)
    x = torch.randn(8, 3)
    truth = cloned_at_hook(model, model[0], x)
    np.testing.assert_array_equal(record(model, x, ["0"], batch_size=4)["0"].values, truth)  # left alone
    later.on = True  # the tensor kept without a copy is now written after the hook
    passes = []
    h = model.register_forward_pre_hook(lambda *a: passes.append(1))
    try:
        ds = record(model, x, ["0"], batch_size=4)
    finally:
        h.remove()
    np.testing.assert_array_equal(ds["0"].values, truth)
    assert len(passes) == 3  # the first batch once more, with the site copied; the second batch copied at once


class KeepsItsOutput(nn.Module):
    """Holds its last output and writes into it on the next call (a cache updated in place)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 4)
        self.last: torch.Tensor | None = None

    def forward(self, x):
        if self.last is not None:
            self.last.zero_()
        self.last = self.lin(x)
        return self.last


def test_a_tensor_the_model_still_holds_is_copied():
    torch.manual_seed(0)
    model = nn.Sequential(KeepsItsOutput(), nn.Tanh()).eval()
    x = torch.randn(6, 3)
    with torch.no_grad():
        truth = model[0].lin(x).numpy()
    for _ in range(2):
        ds = record(model, [x[:3], x[3:]], ["0"])  # an iterable of batches: each kept until the end
        np.testing.assert_array_equal(ds["0"].values, truth)
    one = record(model, x, ["0"])
    with torch.no_grad():
        model(x)  # zeroes the tensor it kept from the recording's pass
    np.testing.assert_array_equal(one["0"].values, truth)


def test_a_tensor_left_alone_is_kept_without_a_copy():
    model = chain(nn.Tanh())
    x = torch.randn(10, 3)
    kept = []
    h = model[0].register_forward_hook(lambda m, a, out: kept.append(out.detach()))  # an alias, not a copy
    try:
        record(model, x, ["0"])  # learns that the site is not written after its hook
        kept.clear()
        ds = record(model, x, ["0"])
    finally:
        h.remove()
    assert np.shares_memory(ds["0"].values, kept[0].numpy())  # one batch: the model's own memory
    np.testing.assert_array_equal(ds["0"].values, cloned_at_hook(model, model[0], x))


def test_calls_all_of_a_state_written_in_place_keep_each_call():
    class Steps(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.Linear(4, 4)

        def forward(self, h):
            for _ in range(3):
                h = self.cell(h)
                h.mul_(0.5)  # the step's output halved in place after the cell's hook
            return h

    torch.manual_seed(0)
    model = Steps().eval()
    h0 = torch.randn(5, 4)
    with torch.no_grad():  # by hand: each call's output before the halving
        outs, h = [], h0
        for _ in range(3):
            h = model.cell(h)
            outs.append(h.clone())
            h = h * 0.5
    ds = record(model, h0, ["cell"], calls="all", batch_size=2)
    np.testing.assert_allclose(ds["cell"].values, torch.stack(outs, 1).numpy(), rtol=0, atol=1e-6)


def test_tensors_made_under_inference_mode_are_copied():
    # inference tensors carry no version counter to check: copied at the hook, as a ReLU(inplace=True) needs
    model = chain(nn.ReLU(inplace=True))
    x = torch.randn(6, 3)
    truth = cloned_at_hook(model, model[0], x)

    def forward(m, b):
        with torch.inference_mode():
            return m(b)

    np.testing.assert_array_equal(record(model, x, ["0"], forward=forward)["0"].values, truth)
    with torch.inference_mode():
        np.testing.assert_array_equal(record(model, x, ["0"])["0"].values, truth)
