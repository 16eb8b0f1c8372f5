"""Hand-made truths for the conformance suite: plain torch hooks, no scimech code.

Every expected value in tests/conformance is computed with these helpers (or with
TransformerLens' own hooks), never with scimech's own output.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

# float32 models of one to four layers: the hand-hooked runs and scimech's runs do the same
# operations, but scimech may batch several sites into one tiled forward pass, so matrix
# products see other batch sizes and round differently (about 1e-7 relative on values of
# order 1-10). 1e-5 absolute is two orders of magnitude above that and far below any real
# effect of an intervention (order 0.01-1 on these random models).
ATOL = 1e-5


def _first(obj):
    return obj[0] if isinstance(obj, (tuple, list)) else obj


def _with_first(obj, new):
    if isinstance(obj, tuple):
        return (new, *obj[1:])
    if isinstance(obj, list):
        return [new, *obj[1:]]
    return new


@contextmanager
def edit_input(module: nn.Module, fn: Callable[[torch.Tensor], torch.Tensor]):
    """Replace the first positional input of ``module`` by ``fn(input)`` on every call."""

    def hook(_mod, args):
        return (fn(args[0]), *args[1:])

    handle = module.register_forward_pre_hook(hook)
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def edit_output(module: nn.Module, fn: Callable[[torch.Tensor], torch.Tensor]):
    """Replace the (first) output tensor of ``module`` by ``fn(output)`` on every call."""

    def hook(_mod, _args, out):
        return _with_first(out, fn(_first(out)))

    handle = module.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def watch(module: nn.Module, port: str = "output"):
    """Collect clones of every input (``port="input"``: as the module received it, after any
    pre-hooks) or output tensor of ``module``, one entry per call."""
    seen: list[torch.Tensor] = []

    def hook(_mod, args, out):
        seen.append((args[0] if port == "input" else _first(out)).detach().clone())

    handle = module.register_forward_hook(hook)
    try:
        yield seen
    finally:
        handle.remove()


def capture(module: nn.Module, run: Callable[[], object], port: str = "output") -> torch.Tensor:
    """The tensor at ``module``'s input or output during ``run()`` (exactly one call)."""
    with torch.no_grad(), watch(module, port) as seen:
        run()
    assert len(seen) == 1, f"expected one call of {type(module).__name__}, got {len(seen)}"
    return seen[0]


def set_cols(t: torch.Tensor, cols: slice, value) -> torch.Tensor:
    """A copy of ``t`` with ``t[..., cols]`` replaced (broadcast)."""
    t = t.clone()
    t[..., cols] = value
    return t


def set_channel(t: torch.Tensor, channel: int, value) -> torch.Tensor:
    """A copy of a channels-first ``t`` with ``t[:, channel]`` replaced (broadcast)."""
    t = t.clone()
    t[:, channel] = value
    return t


def head_cols(head: int, head_dim: int) -> slice:
    return slice(head * head_dim, (head + 1) * head_dim)


def npy(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def matching_rows(observed: torch.Tensor, reference: torch.Tensor, atol: float = ATOL) -> list[list[int]]:
    """For each row ``observed[i]``, the indices ``j`` with ``reference[j]`` equal to it in
    every element (all positions, windows, grid points at once)."""
    out = []
    for row in observed:
        diff = (reference - row.unsqueeze(0)).abs().reshape(reference.shape[0], -1).amax(1)
        out.append([int(j) for j in torch.nonzero(diff <= atol).flatten()])
    return out


def grad_at(
    module: nn.Module, run: Callable[[], torch.Tensor], port: str = "input"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(a, d sum(metric) / d a)`` at ``module``'s first input (or, ``port="output"``, its
    first output), where ``run()`` returns the per-sample metric (samples do not interact,
    so the gradient of the sum is the per-sample gradient)."""
    box = {}

    def leaf(t):
        box["a"] = t.detach().clone().requires_grad_(True)
        return box["a"]

    ctx = edit_input(module, leaf) if port == "input" else edit_output(module, leaf)
    with ctx, torch.enable_grad():
        run().sum().backward()
    return box["a"].detach(), box["a"].grad.detach()


def per_sample_dot(delta: torch.Tensor, grad: torch.Tensor) -> np.ndarray:
    """First-order (AtP) estimate: sum over every non-batch element of delta * grad."""
    return npy((delta * grad).reshape(delta.shape[0], -1).sum(1))
