"""Reusing the unpatched part of a forward pass in patching and ablation sweeps.

When a sweep intervenes at a site, every module that *finished* before the site's value
was produced computes exactly what it computed in the unpatched run of the same inputs:
nothing it read has changed yet. In a model built from a sequence of blocks (an
``nn.ModuleList`` or ``nn.Sequential`` of blocks, ``nn.TransformerEncoder``, AION's
encoder) that is every block before the patched one, and inside the patched block
whatever runs before the site (the layer norm, the query / key / value projections of a
head's attention). A sweep therefore records those modules' outputs once per batch, in
the unpatched run it does anyway, and in each patched forward pass replaces their
``forward`` by a function returning the recorded output (tiled like the batch): only the
blocks from the patched site on are computed again.

Which modules qualify is read from the model's own call structure, not from its class:
one traced forward pass on two copies of one input row records the order in which modules
start and finish, how often each runs, and whether every tensor it returns is batched on
dim 0 (two identical rows in, two identical rows out). A module qualifies for a site when
it ran exactly once, finished before the site's module started (for an output site: before
it finished, the module itself included) and returns batched tensors; of nested
qualifying modules only the outermost is replaced; a module that changes its input in
place (``nn.ReLU(inplace=True)``) never qualifies, since skipping it would skip that change. Models with no such module (one block
called in a loop, weights shared between steps) simply reuse nothing and run as before.
The results are those of the full forward passes up to float rounding (the reused
outputs were computed on ``b`` rows rather than on the tiled batch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .hooks import map_tensors, override_forward, run_forward, slice_batch, tile_batch
from .sites import ResolvedSite

__all__ = ["ModuleCall", "CallTrace", "trace_calls", "capture_outputs", "reusing"]


@dataclass
class ModuleCall:
    """One module's part in a traced forward pass.

    ``start`` / ``end``: positions of its (first) call's start and end among all the start
    and end events of the pass; ``calls``: how often it ran; ``batched``: every tensor it
    returned has the batch on dim 0 (and it changed none of its inputs in place, ``in_place``);
    ``inputs`` / ``output``: the first tensor it received and returned (held for
    :meth:`CallTrace.blocks`).
    """

    name: str
    start: int
    end: int
    calls: int
    batched: bool
    inputs: tuple = ()
    output: Any = None
    in_place: bool = False


def _leaves(obj: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    map_tensors(obj, lambda t: out.append(t) or t)
    return out


def _two_equal_rows(obj: Any) -> bool:
    """Every tensor in ``obj`` has 2 rows on dim 0 and they agree (the batch of the trace)."""
    leaves = _leaves(obj)
    if not leaves:
        return False
    for t in leaves:
        if t.dim() == 0 or t.shape[0] != 2:
            return False
        a, b = t[0].detach(), t[1].detach()
        if a.is_floating_point() or a.is_complex():
            # identical rows give identical results up to the rounding of how a kernel splits
            # its rows; a position or a feature taken for the batch differs at O(1)
            scale = float(a.abs().max()) if a.numel() else 0.0
            if not torch.allclose(a, b, rtol=1e-4, atol=1e-6 * max(scale, 1.0), equal_nan=True):
                return False
        elif not torch.equal(a, b):
            return False
    return True


class CallTrace:
    """The call structure of one forward pass: which modules ran, when, how often.

    Built by :func:`trace_calls`; :meth:`reusable` lists the modules a site's patched runs
    may take from the unpatched run.
    """

    def __init__(self, calls: Mapping[str, ModuleCall]):
        self.calls = dict(calls)

    def cut(self, site: ResolvedSite) -> int:
        """Modules that finished before this event cannot see the site's new value."""
        call = self.calls.get(site.module_path)
        if call is None:
            return 0
        if site.port == "output" and call.calls == 1:
            return call.end + 1
        return call.start

    def reusable(self, site: ResolvedSite) -> tuple[str, ...]:
        """The outermost modules that ran once, returned batched tensors and finished before the site."""
        cut = self.cut(site)
        chosen: list[str] = []
        taken: set[str] = set()
        for name, c in sorted(self.calls.items(), key=lambda kv: kv[1].start):
            if c.start >= cut:
                break
            if c.calls != 1 or not c.batched or c.end >= cut:
                continue
            parts = name.split(".")
            if any(".".join(parts[:i]) in taken for i in range(1, len(parts))):
                continue
            chosen.append(name)
            taken.add(name)
        return tuple(chosen)

    def blocks(self, model: nn.Module) -> list[str]:
        """The longest chain of sibling modules where each one's input is the previous one's output.

        Children of an ``nn.ModuleList`` / ``nn.Sequential`` that ran once each, in order,
        with ``x = block(x)`` between them (the same tensor object): the layers of a
        residual stack. Empty if there is no chain of two or more.
        """
        best: list[str] = []
        for name, mod in model.named_modules():
            if not isinstance(mod, (nn.ModuleList, nn.Sequential)) or len(mod) < 2:
                continue
            chain: list[str] = []
            for kid in (f"{name}.{k}" if name else k for k in mod._modules):
                c = self.calls.get(kid)
                if c is None or c.calls != 1 or not c.inputs or c.output is None:
                    chain = []
                    continue
                prev = self.calls[chain[-1]] if chain else None
                if prev is not None and not (c.start > prev.end and c.inputs[0] is prev.output):
                    chain = []
                chain.append(kid)
                if len(chain) > len(best):
                    best = list(chain)
        return best if len(best) >= 2 else []


def trace_calls(model: nn.Module, batch: Any, forward: Callable | None = None) -> CallTrace:
    """Trace the module calls of one forward pass on two copies of the first row of ``batch``.

    The pass runs with hooks on every submodule (so torch's fused paths are off and every
    submodule that can run does) and without gradients.
    """
    probe = tile_batch(slice_batch(batch, 0, 1), 2)
    counter = [0]
    calls: dict[str, ModuleCall] = {}
    handles = []

    versions: dict[str, list[tuple[torch.Tensor, int]]] = {}

    def pre(name):
        def hook(module, args, kwargs):
            counter[0] += 1
            c = calls.get(name)
            if c is None:
                given = _leaves((args, kwargs))
                calls[name] = ModuleCall(name, counter[0], -1, 1, False, tuple(given[:1]))
                versions[name] = [(t, t._version) for t in given]
            else:
                c.calls += 1
        return hook

    def post(name):
        def hook(module, args, output):
            counter[0] += 1
            c = calls[name]
            if c.end < 0:
                c.end = counter[0]
                lv = _leaves(output)
                c.output = lv[0] if lv else None
                # a module that changes its input in place (ReLU(inplace=True)) has an effect
                # beyond its output: replacing it by its output would drop that effect
                c.in_place = any(t._version != v for t, v in versions.pop(name))
                c.batched = not c.in_place and _two_equal_rows(output)
        return hook

    try:
        for name, mod in model.named_modules():
            if name:
                handles.append(mod.register_forward_pre_hook(pre(name), with_kwargs=True))
                handles.append(mod.register_forward_hook(post(name)))
        with torch.inference_mode(False), torch.no_grad():   # version counters need ordinary tensors
            run_forward(model, map_tensors(probe, torch.clone), forward)
    finally:
        for h in handles:
            h.remove()
    return CallTrace(calls)


@contextmanager
def capture_outputs(model: nn.Module, names: Sequence[str], rows: int) -> Iterator[dict[str, Any]]:
    """Record (copies of) the outputs of modules ``names`` during the forward passes in the block.

    Outputs whose tensors are not all batched on dim 0 with ``rows`` rows are left out, as
    are modules that ran more than once (their recorded output would be ambiguous).
    """
    got: dict[str, Any] = {}
    seen: dict[str, int] = {}

    def make(name):
        def wrap(inner):
            def forward(*args, **kwargs):
                out = inner(*args, **kwargs)
                seen[name] = seen.get(name, 0) + 1
                leaves = _leaves(out)
                if seen[name] == 1 and leaves and all(t.dim() and t.shape[0] == rows for t in leaves):
                    got[name] = map_tensors(out, lambda t: t.detach().clone())
                else:
                    got.pop(name, None)
                return out
            return forward
        return wrap

    with ExitStack() as stack:
        for name in names:
            stack.callback(override_forward(model.get_submodule(name), make(name)).remove)
        yield got
    for name, n in seen.items():
        if n != 1:
            got.pop(name, None)


@contextmanager
def reusing(model: nn.Module, outputs: Mapping[str, Any], names: Sequence[str], times: int):
    """Within the block, modules ``names`` return their recorded ``outputs`` tiled ``times``
    times on dim 0 instead of computing (names without a recorded output compute as usual)."""
    with ExitStack() as stack:
        for name in names:
            if name not in outputs:
                continue
            out = outputs[name]

            def make(inner, _out=out):
                return lambda *args, **kwargs: tile_batch(_out, times) if times > 1 else \
                    map_tensors(_out, torch.clone)
            stack.callback(override_forward(model.get_submodule(name), make).remove)
        yield
