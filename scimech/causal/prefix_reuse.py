"""Reusing the unpatched part of a forward pass in patching and ablation sweeps.

When a sweep intervenes at a site, every module that *finished* before the site's value
was produced computes exactly what it computed in the unpatched run of the same inputs:
nothing it read has changed yet. In a model built from a sequence of blocks (an
``nn.ModuleList`` or ``nn.Sequential`` of blocks, ``nn.TransformerEncoder``, AION's
encoder) that is every block before the patched one. A sweep records those modules'
outputs once per batch, in the unpatched run it does anyway, and in each patched forward
pass replaces their ``forward`` by a function returning the recorded output (tiled like
the batch): only the blocks from the patched site on are computed again.

Inside the patched block the same reasoning goes one step further. A head site is the
input of the attention's output projection; when the attention module returns exactly
what its output projection returned (the same tensor object, as torch's and AION's
attention do), the patched attention output is the projection of the recorded projection
input with the site's part replaced. The attention module is then replaced by that one
call ("resumed" at its projection): queries, keys, values and the softmax of the patched
block are not computed again either. An attention that returns more beside its output
(Hugging Face's ``(output, attn_weights)``) is resumed too where what it returns beside it
does not depend on the projection's input: the trace checks that once by autograd (each
projection's input made a leaf, each extra's graph searched for it), and the unpatched run's
extras are returned tiled (held only when at most 4x the projection input's size).

Which modules qualify is read from the model's own call structure, not from its class:
one traced forward pass on two copies of one input row records the order in which modules
start and finish, how often each runs, whether every tensor it returns is batched on dim 0
(two identical rows in, two identical rows out) and which tensor objects it receives and
returns. A module is reused for a site when it ran exactly once, finished before the
site's module started (for an output site: before it finished, the module itself
included) and returns batched tensors; of nested qualifying modules only the outermost is
replaced. A module that changes its input in place (``nn.ReLU(inplace=True)``) never
qualifies, since skipping it would skip that change. Nor does a module that draws random
numbers in its call (the random number generator's state moves across it: Informer's
ProbSparse attention samples keys with ``torch.randint``), nor is a module resumed whose
part before the site draws: under a ``forward=`` that seeds each pass, skipping a draw would
shift every later draw, and the modules after the site would sample other keys than in a
full pass. Models with no such module (one
block called in a loop, weights shared between steps) reuse nothing and run as before.
The results are those of the full forward passes up to float rounding (the reused
outputs were computed on ``b`` rows rather than on the tiled batch).

The same trace also finds what a pass need not compute *after* the sites: where the metric
reads one position of its output alone (:func:`~scimech.causal.metrics.logit_difference` reads
the last), the modules that act on each position alone and after which nothing that mixes
positions starts (a transformer's last MLP, its final norm and unembedding:
:meth:`CallTrace.tail`) compute that position only (:func:`at_position`). A module acts on each
position alone when, called again on its traced input's first position alone and on its last
alone, it returns its traced output there. What runs outside any module (a residual sum; a mean
over positions, which would defeat it) is not seen by the trace, so the sweep checks the tail
once on its own batch with an unchanged copy (:func:`scimech.causal.sweep.sweep_tiles`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from scimech.capture.batches import map_tensors, slice_batch, tile_batch
from scimech.capture.hooks import override_forward, run_forward
from scimech.capture.profile import same_values
from scimech.capture.sites import ResolvedSite

__all__ = [
    "ModuleCall",
    "Resume",
    "Shortcut",
    "CallTrace",
    "trace_calls",
    "recording_reused",
    "reusing",
    "at_position",
]


@dataclass
class ModuleCall:
    """One module's part in a traced forward pass.

    ``start`` / ``end``: positions of its (first) call's start and end among all the start
    and end events of the pass; ``calls``: how often it ran; ``batched``: every tensor it
    returned has the batch on dim 0 (and it changed none of its inputs in place, ``in_place``);
    ``inputs`` / ``output``: the first tensor it received and returned (held for
    :meth:`CallTrace.blocks`); ``replayable``: called with one batched tensor and nothing
    else; ``out_version``: the version counter of ``output`` when it returned;
    ``structure``: its output is a Tensor (``"tensor"``), or a tuple / list of a Tensor
    followed by ``None`` (``(type, length)``), else ``None``.
    """

    name: str
    start: int
    end: int
    calls: int
    batched: bool
    inputs: tuple = ()
    output: Any = None
    in_place: bool = False
    replayable: bool = False
    out_version: int = -1
    structure: Any = None
    #: whether its (first) call drew random numbers (the generator's state moved across it)
    draws: bool = False
    #: the version counter of its input when it was called
    in_version: int = -1
    #: it acts on each position of dim 1 alone: its output at the first and at the last position is
    #: its output on that position alone (:func:`_acts_per_position`)
    per_position: bool = False


@dataclass(frozen=True)
class Resume:
    """Replace module ``outer`` by a call of its descendant ``inner`` on ``inner``'s recorded
    input: ``outer`` returns what ``inner`` returns (``structure`` as in :class:`ModuleCall`)."""

    outer: str
    inner: str
    structure: Any


@dataclass(frozen=True)
class Shortcut:
    """What one site's patched runs take from the unpatched run: the outputs of ``reused``
    modules, and optionally a module resumed at the site's module."""

    reused: tuple[str, ...] = ()
    resume: Resume | None = None

    def __bool__(self) -> bool:
        return bool(self.reused) or self.resume is not None


def _structure(output: Any) -> Any:
    """``"tensor"``; or ``(type, length, extras)`` for a tuple / list whose first item is a Tensor
    and whose others are ``None`` or Tensors (``extras``: their positions, e.g. the attention
    weights an attention module returns beside its output); else ``None``."""
    if isinstance(output, torch.Tensor):
        return "tensor"
    if (
        isinstance(output, (tuple, list))
        and output
        and isinstance(output[0], torch.Tensor)
        and all(o is None or isinstance(o, torch.Tensor) for o in output[1:])
    ):
        return type(output), len(output), tuple(i for i, o in enumerate(output) if i and o is not None)
    return None


def _extras(structure: Any) -> tuple[int, ...]:
    return structure[2] if isinstance(structure, tuple) else ()


def _rebuild(structure: Any, t: torch.Tensor, extras: Sequence[torch.Tensor] = ()) -> Any:
    if structure == "tensor":
        return t
    kind, n, where = structure
    items: list[Any] = [t, *([None] * (n - 1))]
    for i, e in zip(where, extras, strict=True):
        items[i] = e
    return kind(items)


def _leaves(obj: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []

    def keep(t: torch.Tensor) -> torch.Tensor:
        out.append(t)
        return t

    map_tensors(obj, keep)
    return out


def _two_equal_rows(obj: Any) -> bool:
    """Every tensor in ``obj`` has 2 rows on dim 0 and they agree (the batch of the trace)."""
    leaves = _leaves(obj)
    if not leaves:
        return False
    for t in leaves:
        if t.dim() == 0 or t.shape[0] != 2:
            return False
        # identical rows give identical results up to the rounding of how a kernel splits its rows
        # (the profile's tolerance of the dtype); a position or a feature taken for the batch differs at O(1)
        if not same_values(t[0], t[1])[0]:
            return False
    return True


class CallTrace:
    """The call structure of one forward pass: which modules ran, when, how often.

    Built by :func:`trace_calls`; :meth:`shortcut` says what a site's patched runs
    may take from the unpatched run.
    """

    def __init__(
        self,
        calls: Mapping[str, ModuleCall],
        names: Mapping[int, str] | None = None,
        independent: Sequence[tuple[str, str]] = (),
    ):
        self.calls = dict(calls)
        self.names = dict(names or {})  # id(module) -> the path the trace knows it by
        #: (outer, inner) pairs whose outer's extra outputs do not depend on the inner's input (checked by autograd)
        self.independent = set(independent)
        self._shortcuts: dict[tuple[str, str], Shortcut] = {}
        #: per metric reading one position: whether computing the tail at that position alone gave the
        #: metric of the full pass (checked once on the sweep's own batch), and how it was found
        self.tail_checked: dict[Any, tuple[bool, str]] = {}
        self._tails: dict[tuple[int, int], tuple[str, ...]] = {}

    def name_of(self, site: ResolvedSite) -> str:
        """The traced path of the site's module: the same module reached by another path (an
        alias: a block registered twice) is the same traced module."""
        return self.names.get(id(site.module), site.module_path)

    def cut(self, site: ResolvedSite) -> int:
        """Modules that finished before this event cannot see the site's new value."""
        call = self.calls.get(self.name_of(site))
        if call is None:
            return 0
        if site.port == "output" and call.calls == 1:
            return call.end + 1
        return call.start

    def resume(self, site: ResolvedSite) -> Resume | None:
        """The outermost ancestor of the site's module that returns exactly what the site's
        module returned (same tensor object, unchanged), if the site's module can be replayed;
        an ancestor that returns more (attention weights) only where that does not depend on the
        site's module's input (:func:`trace_calls` checks it by autograd)."""
        path = self.name_of(site)
        inner = self.calls.get(path)
        if inner is None or inner.calls != 1 or not inner.replayable or inner.output is None:
            return None
        best = None
        parts = path.split(".")
        for i in range(len(parts) - 1, 0, -1):
            outer = self.calls.get(".".join(parts[:i]))
            if (
                outer is None
                or outer.calls != 1
                or outer.structure is None
                or outer.output is not inner.output
                or outer.out_version != inner.out_version
                or (_extras(outer.structure) and (outer.name, inner.name) not in self.independent)
                or outer.draws  # its part before the site would not draw: later draws would shift
            ):
                break
            best = Resume(outer.name, inner.name, outer.structure)
        return best

    def shortcut(self, site: ResolvedSite) -> Shortcut:
        """What the site's patched runs can take from the unpatched run.

        ``reused``: the outermost modules that ran once, returned batched tensors and
        finished before the site (inside a resumed module: none, it does not run).
        """
        key = (self.name_of(site), site.port)
        if key in self._shortcuts:  # every head of one attention shares its module and port
            return self._shortcuts[key]
        cut = self.cut(site)
        resume = self.resume(site)
        chosen: list[str] = []
        taken: set[str] = set() if resume is None else {resume.outer}
        for name, c in sorted(self.calls.items(), key=lambda kv: kv[1].start):
            if c.start >= cut:
                break
            if c.calls != 1 or not c.batched or c.end >= cut or c.draws:
                continue
            parts = name.split(".")
            if any(".".join(parts[:i]) in taken for i in range(1, len(parts))):
                continue
            chosen.append(name)
            taken.add(name)
        self._shortcuts[key] = Shortcut(tuple(chosen), resume)
        return self._shortcuts[key]

    def tail(self, sites: Sequence[ResolvedSite], length: int) -> tuple[str, ...]:
        """The *tail* of a pass for ``sites``: the outermost modules that act on each position alone
        (:func:`_acts_per_position`, ``length`` positions), start after every one of ``sites``
        finished, and after which every module that starts (their own parts aside) acts on each
        position alone too: a transformer's last MLP, final norm and unembedding, not an MLP that an
        attention reads after it. Empty where a site's module is not traced or ran more than once.
        What runs between these modules outside any module (a residual sum, a mean over positions)
        is not seen here: the sweep checks the tail once on its own batch."""
        cut = -1
        for site in sites:
            call = self.calls.get(self.name_of(site))
            if call is None or call.calls != 1:
                return ()
            cut = max(cut, call.end)
        if (cut, length) in self._tails:
            return self._tails[cut, length]
        chosen: list[str] = []
        mixing = [c for c in self.calls.values() if not c.per_position]
        for c in sorted(self.calls.values(), key=lambda c: c.start):
            if c.start <= cut or not c.per_position or c.output is None or c.output.shape[1] != length:
                continue
            if any(c.name.startswith(f"{n}.") for n in chosen):
                continue
            if not any(self._mixes_after(m, c, mixing) for m in mixing):
                chosen.append(c.name)
        self._tails[cut, length] = tuple(chosen)
        return self._tails[cut, length]

    @staticmethod
    def _mixes_after(m: ModuleCall, c: ModuleCall, mixing: Sequence[ModuleCall]) -> bool:
        """Whether module ``m`` (one that does not act on each position alone) may mix positions
        after module ``c`` starts: it is still running or starts later, and it is not an ancestor
        of ``c`` whose mixing part (a descendant that mixes) finished before ``c`` started (a
        block whose attention ran before its MLP)."""
        if m.calls == 1 and m.end < c.start:
            return False
        if m.calls == 1 and c.name.startswith(f"{m.name}."):
            return not any(d.name.startswith(f"{m.name}.") and d.calls == 1 and d.end < c.start for d in mixing)
        return True

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


def _rng_state() -> list[torch.Tensor]:
    """The state of torch's random number generators: the CPU's, and the current CUDA device's
    where CUDA is in use."""
    got = [torch.get_rng_state()]
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        got.append(torch.cuda.get_rng_state())
    return got


def _moved(before: list[torch.Tensor], after: list[torch.Tensor]) -> bool:
    """Whether random numbers were drawn between two states of :func:`_rng_state`."""
    return len(before) != len(after) or any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


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
    states: dict[str, list[torch.Tensor]] = {}

    def pre(name):
        def hook(module, args, kwargs):
            counter[0] += 1
            c = calls.get(name)
            if c is None:
                states[name] = _rng_state()
                given = _leaves((args, kwargs))
                calls[name] = c = ModuleCall(name, counter[0], -1, 1, False, tuple(given[:1]))
                c.replayable = (
                    len(args) == 1 and not kwargs and isinstance(args[0], torch.Tensor) and _two_equal_rows(args[0])
                )
                c.in_version = given[0]._version if given else -1
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
                c.out_version = lv[0]._version if lv else -1
                c.structure = _structure(output)
                # a module that changes its input in place (ReLU(inplace=True)) has an effect
                # beyond its output: replacing it by its output would drop that effect
                c.in_place = any(t._version != v for t, v in versions.pop(name))
                c.batched = not c.in_place and _two_equal_rows(output)
                c.draws = _moved(states.pop(name), _rng_state())

        return hook

    names: dict[int, str] = {}
    try:
        for name, mod in model.named_modules():  # each module once, under its first path
            if name:
                names[id(mod)] = name
                handles.append(mod.register_forward_pre_hook(pre(name), with_kwargs=True))
                handles.append(mod.register_forward_hook(post(name)))
        with torch.inference_mode(False), torch.no_grad():  # version counters need ordinary tensors
            run_forward(model, map_tensors(probe, torch.clone), forward)
    finally:
        for h in handles:
            h.remove()
    modules = dict(model.named_modules())
    for c in calls.values():
        c.per_position = _acts_per_position(modules[c.name], c)
    return CallTrace(calls, names, _independent_extras(model, probe, forward, calls))


def _acts_per_position(module: nn.Module, c: ModuleCall) -> bool:
    """Whether a module that ran once on one batched tensor (of at least 3 dims: rows, positions,
    features) acts on each position of dim 1 alone: called again on its traced input's first
    position alone, and on its last alone, it returns its traced output there (a norm, an MLP, a
    projection; not an attention, a convolution along the positions, a cumulative sum). Its input
    and output must be unchanged since the call, and it must draw no random numbers."""
    x, y = (c.inputs[0] if c.inputs else None), c.output
    if not (c.calls == 1 and c.replayable and c.structure == "tensor" and c.batched and not c.draws):
        return False
    if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)) or x.dim() < 3 or y.dim() < 3:
        return False
    if x.shape[1] < 2 or x.shape[1] != y.shape[1] or x._version != c.in_version or y._version != c.out_version:
        return False
    try:
        with torch.no_grad():
            for at in (slice(0, 1), slice(-1, None)):
                got = module(x[:, at])
                if (
                    not isinstance(got, torch.Tensor)
                    or got.shape != y[:, at].shape
                    or not same_values(got, y[:, at])[0]
                ):
                    return False
    except Exception:  # noqa: BLE001 - a module that cannot run on one position does not act on each alone
        return False
    return True


def _candidates(calls: Mapping[str, ModuleCall]) -> list[tuple[str, str]]:
    """(outer, inner) pairs where ``outer`` returns ``inner``'s output object first and more beside it."""
    pairs = []
    for name, c in calls.items():
        if c.calls != 1 or not _extras(c.structure) or c.output is None:
            continue
        for other, d in calls.items():
            if other.startswith(name + ".") and d.calls == 1 and d.replayable and d.output is c.output:
                pairs.append((name, other))
    return pairs


def _independent_extras(
    model: nn.Module, probe: Any, forward: Callable | None, calls: Mapping[str, ModuleCall]
) -> list[tuple[str, str]]:
    """The (outer, inner) pairs whose outer's extra outputs (attention weights beside an attention's
    output) do not depend on the inner module's input: one pass of the two-row probe with autograd
    on, each inner's input made a leaf of its own, and each extra's graph searched for that leaf.
    Any failure (a model that cannot run with gradients) resumes none of them."""
    pairs = _candidates(calls)
    if not pairs:
        return []
    leaves: dict[str, torch.Tensor] = {}
    extras: dict[str, list[torch.Tensor]] = {}
    handles = []

    def pre(name):
        def hook(module, args):
            leaves[name] = args[0].detach().requires_grad_(True)
            return (leaves[name], *args[1:])

        return hook

    def post(name):
        def hook(module, args, output):
            extras[name] = [output[i] for i in _extras(calls[name].structure)]

        return hook

    try:
        for outer, inner in pairs:
            handles.append(model.get_submodule(inner).register_forward_pre_hook(pre(inner)))
            handles.append(model.get_submodule(outer).register_forward_hook(post(outer)))
        with torch.inference_mode(False), torch.enable_grad():
            run_forward(model, map_tensors(probe, torch.clone), forward)
    except Exception:  # noqa: BLE001 - the shortcut is an optimisation: without the check, no resume
        return []
    finally:
        for h in handles:
            h.remove()
    return [
        (outer, inner)
        for outer, inner in pairs
        if inner in leaves and outer in extras and not any(_reaches(e, leaves[inner]) for e in extras[outer])
    ]


def _reaches(t: torch.Tensor, leaf: torch.Tensor) -> bool:
    """Whether ``t`` was computed from ``leaf`` (a path in its autograd graph)."""
    if t is leaf:
        return True
    stack, seen = [t.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if getattr(node, "variable", None) is leaf:
            return True
        stack.extend(n for n, _ in node.next_functions)
    return False


@contextmanager
def recording_reused(
    model: nn.Module, shortcuts: Sequence[Shortcut], rows: int
) -> Iterator[dict[tuple[str, str], Any]]:
    """During the forward passes in the block, record what ``shortcuts`` take from the run.

    Yields a dict filled on exit: ``("output", name)`` -> (copies of) the outputs of the
    reused modules, ``("input", name)`` -> the input of each resumed inner module. Values
    whose tensors are not all batched on dim 0 with ``rows`` rows are left out, as are those
    of modules that ran more than once.
    """
    got: dict[tuple[str, str], Any] = {}
    seen: dict[str, int] = {}
    outs = {n for sc in shortcuts for n in sc.reused}
    ins = {sc.resume.inner for sc in shortcuts if sc.resume is not None}
    # a resumed module that returns more than its projection: what it returns beside it, recorded
    more = {
        sc.resume.outer: (sc.resume.inner, _extras(sc.resume.structure))
        for sc in shortcuts
        if sc.resume is not None and _extras(sc.resume.structure)
    }

    def batched(obj) -> bool:
        leaves = _leaves(obj)
        return bool(leaves) and all(t.dim() and t.shape[0] == rows for t in leaves)

    def make(name):
        def wrap(inner):
            def forward(*args, **kwargs):
                seen[name] = seen.get(name, 0) + 1
                if name in ins and args and batched(args[0]):
                    got["input", name] = args[0].detach().clone()
                out = inner(*args, **kwargs)
                if name in outs and batched(out):
                    got["output", name] = map_tensors(out, lambda t: t.detach().clone())
                if name in more:
                    inner_name, where = more[name]
                    kept = [out[i] for i in where]
                    # kept only when batched and not much larger than the projection's input (attention
                    # weights of long sequences are computed again rather than held)
                    x = got.get(("input", inner_name))
                    if batched(kept) and x is not None and sum(t.numel() for t in kept) <= 4 * x.numel():
                        got["extras", name] = [t.detach().clone() for t in kept]
                return out

            return forward

        return wrap

    with ExitStack() as stack:
        for name in sorted(outs | ins | set(more)):
            stack.callback(override_forward(model.get_submodule(name), make(name)).remove)
        yield got
    for key in list(got):
        if seen.get(key[1]) != 1:
            del got[key]


@contextmanager
def reusing(model: nn.Module, recorded: Mapping[tuple[str, str], Any], shortcut: Shortcut, times: int):
    """Within the block, apply ``shortcut`` to forward passes of a batch tiled ``times`` times:
    the reused modules return their recorded outputs (tiled), and a resumed module runs only
    its inner module on the recorded input (tiled). Whatever was not recorded computes as usual."""

    def tiled(obj):
        return tile_batch(obj, times) if times > 1 else map_tensors(obj, torch.clone)

    def returning(out: Any) -> Callable[[Callable], Callable]:
        """A replacement forward that returns ``out`` tiled, whatever it is called with."""
        return lambda inner: lambda *a, **k: tiled(out)

    with ExitStack() as stack:
        for name in shortcut.reused:
            if ("output", name) in recorded:
                out = recorded["output", name]
                stack.callback(override_forward(model.get_submodule(name), returning(out)).remove)
        r = shortcut.resume
        more = _extras(r.structure) if r is not None else ()
        if r is not None and ("input", r.inner) in recorded and (not more or ("extras", r.outer) in recorded):
            x, inner_mod = recorded["input", r.inner], model.get_submodule(r.inner)
            kept = recorded.get(("extras", r.outer), [])
            stack.callback(
                override_forward(
                    model.get_submodule(r.outer),
                    lambda inner: lambda *a, **k: _rebuild(r.structure, inner_mod(tiled(x)), [tiled(e) for e in kept]),
                ).remove
            )
        yield


@contextmanager
def at_position(model: nn.Module, names: Sequence[str], index: int):
    """Within the block, the modules ``names`` (each acting on every position of dim 1 alone,
    :meth:`CallTrace.tail`) compute their output at position ``index`` only; the other positions
    of what they return are zeros. Only a metric that reads that position alone may read the
    output (the sweep checks it once on its own batch). A call with more than one tensor runs
    as usual."""

    def make(inner: Callable) -> Callable:
        def forward(*args, **kwargs):
            x = args[0] if len(args) == 1 and not kwargs else None
            if not isinstance(x, torch.Tensor) or x.dim() < 3:
                return inner(*args, **kwargs)
            at = index % x.shape[1]
            part = inner(x[:, at : at + 1])
            full = part.new_zeros((part.shape[0], x.shape[1], *part.shape[2:]))
            full[:, at] = part[:, 0]
            return full

        return forward

    with ExitStack() as stack:
        for name in names:
            stack.callback(override_forward(model.get_submodule(name), make).remove)
        yield
