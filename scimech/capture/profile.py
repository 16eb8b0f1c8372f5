"""One model profile: what every verb assumes about a model, measured once, in one place.

Every verb acts on rows, calls and axes, so each assumes facts about the model: that two
unchanged passes agree, that the rows of a batch are independent samples, whether the
forward itself needs autograd (forces from an energy), and, per site, how often it runs and
with which shapes, its dtype and layout, and whether the model writes in place into its
output. These facts form one :class:`ModelProfile` per model, ``forward=``, input signature
(the structure, trailing shapes and dtypes of a batch, not its number of rows) and parameter
version (a parameter or buffer changed in place, or a module swapped, is a new model). A
profile is measured at most once and cached on the model (weakly: it never keeps a model
alive); every verb consults it through its session (:mod:`scimech.capture.session`), whose
check calls :func:`require`, which measures only what is missing and refuses, in one message
form (``"<verb>: <what was measured>. <the fix>"``), what the verb cannot act on.
:func:`scimech.profile <scimech.capture.profiling.profile>` shows it as a table. It lives in ``capture``, below
``causal``, because both use it (its old path ``scimech.causal.model_profile`` still imports).

What is measured, on the first batch a verb sees (in eval mode, as the verbs run):

- **grad**: the first pass runs under ``torch.no_grad()``; a forward that calls
  ``torch.autograd.grad`` (forces as the gradient of an energy, a physics-informed residual)
  fails there, and is run again under ``torch.enable_grad()``; every verb then runs it so
  (:meth:`ModelProfile.grad`). :func:`forward_folded` folds this into a verb's own first
  pass (``record`` pays no extra pass for it).
- **repeatable**: a second unchanged pass must give the same outputs (NaN at the same places,
  land points, counts as the same; tolerance from the output's dtype, :func:`tolerance`). A
  model that keeps state across calls or draws random numbers would add its drift to every
  effect. One more forward pass.
- **rows independent** (when no ``samples=`` says what a sample is): the first half of the
  rows alone must give the outputs they give within the whole batch. Half a forward pass. A
  sweep asks it too (``"coupling"``), not to refuse but to run one site per pass where the rows
  interact (an adaptive solver whose steps follow the batch's largest error, batch statistics):
  a tiled pass's unchanged control copy cannot see such a coupling where its own rows set the
  shared step. For a sweep the half batch stands for the repeat, so it costs no pass more.
- **sites** (:func:`~scimech.capture.profiling.profile` only, or when a verb asks): per site, the calls of one pass,
  each call's shape, dtype, layout (declared by ``axes=`` or inferred) and whether the model
  changes the site's output in place after it is produced (then the verbs hand the model
  copies of what they put there, never a tensor they keep).
- **packing** (a site declared ``batch*window ...``, rows packed sample by sample): the first
  half of the samples alone must give the first rows of the whole batch's activation; a
  mixture of experts that sorts tokens by expert across the batch does not, and is refused
  (``record``, the sweeps and attribution patching ask for it).
- **tiling**: whether rows of a tiled batch interact, the verdict of a sweep's first tiled
  pass (:mod:`scimech.causal.sweep`), kept so that a later sweep skips the control copy.

The checks of these facts live here and nowhere else; :mod:`scimech.causal.samples` keeps what a
sample is (``samples=``, :class:`~scimech.causal.samples.FixedMesh`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from scimech.capture.batches import (
    batch_size_of,
    is_graph_batch,
    leaf_tensors,
    map_tensors,
    n_samples_of,
    slice_batch,
    tile_batch,
)
from scimech.capture.hooks import StopForward, first_tensor, hooks_aside, modules_of, run_forward
from scimech.capture.layout import edge_layout
from scimech.capture.sites import resolve_site
from scimech.errors import DataValidationError, DimensionError

__all__ = [
    "ModelProfile",
    "SiteFacts",
    "require",
    "profile_of",
    "measure",
    "forward_folded",
    "tolerance",
    "same_values",
    "drift_error",
    "rows_error",
    "forget",
    "signature",
    "shared_rows",
    "data_rows_checked",
    "NEEDS",
]

#: what a verb may ask :func:`require` for
NEEDS = frozenset({"grad", "repeatable", "rows", "coupling", "sites", "packing"})

#: relative difference (to the output's scale) above which two float32 passes or the rows of a
#: batch differ: kernel rounding on other batch sizes is ~1e-7, an adaptive solver's shared steps ~1e-4
ROWS_RTOL = 1e-5

#: torch's messages for a gradient asked of a graph that was never built (a forward under no_grad)
_NO_GRAPH = ("does not require grad", "does not have a grad_fn", "One of the differentiated Tensors")


def tolerance(dtype: torch.dtype | None) -> float:
    """How far two unchanged passes (or a row alone and within its batch) may differ, relative
    to the output's scale: bfloat16 / float16 move by ~1e-2 when kernels sum in another order
    (GPU atomics, scatter), float32 by ~1e-7, float64 by ~1e-15; a state kept across calls moves
    the output by the state's effect."""
    if dtype in (torch.bfloat16, torch.float16):
        return 5e-2
    if dtype in (torch.float64, torch.complex128):
        return 1e-9
    return ROWS_RTOL


def same_values(a: torch.Tensor, b: torch.Tensor, rtol: float | None = None) -> tuple[bool, float]:
    """Whether two tensors agree: one shape, NaN (and infinities) at the same places, the rest
    within ``rtol`` (default :func:`tolerance` of ``a``'s dtype) of their scale; and the largest
    difference relative to that scale."""
    if a.shape != b.shape:
        return False, float("inf")
    if not (a.is_floating_point() or a.is_complex()):
        return bool(torch.equal(a, b.to(a.dtype))), 0.0 if torch.equal(a, b.to(a.dtype)) else float("inf")
    rtol = tolerance(a.dtype) if rtol is None else rtol
    a, b = a.detach(), b.detach()
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    if not torch.equal(nan_a, nan_b):
        return False, float("inf")
    fa, fb = torch.isfinite(a), torch.isfinite(b)
    if not torch.equal(fa, fb) or not torch.equal(a[~fa & ~nan_a], b[~fb & ~nan_b]):
        return False, float("inf")
    a, b = a[fa], b[fb]
    if not a.numel():
        return True, 0.0
    a, b = (a.to(torch.complex128), b.to(torch.complex128)) if a.is_complex() else (a.double(), b.double())
    scale = max(1.0, float(a.abs().max()))
    rel = float((a - b).abs().max()) / scale
    return rel <= rtol, rel


def drift_error(verb: str, what: str) -> DataValidationError:
    """The one message for a model whose unchanged output drifts between passes."""
    return DataValidationError(
        f"{verb}: the unchanged model gave {what} on the same batch in a second forward pass: it keeps state across "
        "calls (a counter, a cache, a running normaliser) or draws random numbers, so every effect would include "
        "that drift. Pass a forward= that resets the state and seeds any randomness before each pass "
        "(forward=lambda m, x: (m.reset(), m(x))[1]), or make the model's forward deterministic."
    )


def rows_error(verb: str, reason: str, why: str) -> DataValidationError:
    """The one message for rows that are not independent samples where a verb treats them so."""
    return DataValidationError(
        f"{verb}: the rows of the first axis are not independent samples: {reason} (message passing over a "
        "graph, an adaptive solver's step-size control, batch statistics or attention across the batch). "
        f"{why} would mix them. Pass samples= (each row's sample index, e.g. a graph batch's `batch` vector, "
        "torch.zeros(n, dtype=torch.long) where the batch is one graph, or torch.arange(n) to declare every row its "
        "own sample and accept the coupling)."
    )


@dataclass
class SiteFacts:
    """What one site does in one forward pass of the profiled batch."""

    calls: int
    shapes: list[tuple[int, ...]]
    dtype: str
    layout: str
    layout_from: str
    in_place: bool
    #: for a declared 'batch*window' layout: whether the rows are packed sample by sample
    #: (``"sample by sample"``, ``"not sample by sample: ..."``, ``"not checked: ..."``; None: not asked)
    packing: str | None = None
    #: the declared layout that :attr:`packing` was checked for (another declaration is checked anew)
    packing_layout: str | None = None

    @property
    def changing_shape(self) -> bool:
        """Whether the calls of one pass have different shapes (a decoder's growing sequence)."""
        return len(set(self.shapes)) > 1


@dataclass
class ModelProfile:
    """The facts every verb assumes about a model, for one ``forward=``, input signature and
    parameter version (see the module docs); ``None`` where not measured yet.

    Examples
    --------
    :func:`scimech.profile` measures one and keeps it in its table's ``attrs``:

    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    >>> prof = sm.profile(model, torch.randn(8, 3), ["0"]).attrs["profile"]
    >>> prof.output_dtype, prof.repeatable, prof.needs_grad, prof.rows_interact  # "": rows independent
    (torch.float32, True, False, '')
    >>> prof.sites["0"].shapes
    [(8, 4)]
    >>> prof.tolerance  # how far two unchanged float32 passes may differ, relative
    1e-05
    """

    signature: tuple
    rows: int | None = None
    output_dtype: torch.dtype | None = None
    needs_grad: bool | None = None
    repeatable: bool | None = None
    repeat_note: str = ""
    #: why the rows of a batch are not independent samples (``""``: they are; ``None``: not measured)
    rows_interact: str | None = None
    #: whether the first half of the rows alone gave other values than within the whole batch (a
    #: measured coupling: an adaptive solver's shared steps, batch statistics); ``False``: the same
    #: values; ``None``: not measured, or told apart by structure only (another shape, a failed pass)
    rows_coupled: bool | None = None
    sites: dict[str, SiteFacts] = field(default_factory=dict)
    #: a sweep's verdict on tiled batches: ``(coupled, note)``
    tiling: tuple[bool, str] | None = None
    #: the module calls of one pass (:func:`scimech.causal.prefix_reuse.trace_calls`), traced by the
    #: first sweep that plans prefix reuse and kept for the next
    call_trace: Any = None
    #: per site: why its first axis is not the batch (``""``: it is, or it could not be told), measured
    #: on a batch of another size (:func:`shared_rows`)
    batched: dict[str, str] = field(default_factory=dict)
    #: the rows of the half batch of the rows check and the first-axis size of each module's
    #: first output in that pass (by module path): what tells a shared tensor at no pass of its own
    half_rows: tuple[int, dict[str, int]] | None = None
    #: forward passes spent measuring (half a batch counts as one)
    passes: int = 0
    #: each site's layout as the hooks worked it out, by site, activation shape, dtype and batch size
    #: (:class:`~scimech.capture.hooks.HookSet`): measured by no pass of its own, dropped with the profile
    #: when a parameter or buffer changes or a module is swapped
    layouts: dict = field(default_factory=dict, repr=False)

    @property
    def tolerance(self) -> float:
        """How far two unchanged passes may differ, relative to the output's scale (:func:`tolerance`)."""
        return tolerance(self.output_dtype)

    def grad(self):
        """The autograd mode the verbs run this model's forward under: ``torch.enable_grad()``
        where the forward computes gradients itself, else ``torch.no_grad()``."""
        return torch.enable_grad() if self.needs_grad else torch.no_grad()

    def __repr__(self) -> str:
        def show(v):
            return "not measured" if v is None else v

        rows = (
            "not measured"
            if self.rows_interact is None
            else "independent"
            if not self.rows_interact
            else f"interact ({self.rows_interact})"
        )
        lines = [
            f"ModelProfile (output {str(self.output_dtype).removeprefix('torch.')}, "
            f"tolerance {self.tolerance:.0e}, {self.passes} measuring pass(es))",
            f"  needs grad: {show(self.needs_grad)}; repeatable: {show(self.repeatable)}"
            f"{' (' + self.repeat_note + ')' if self.repeat_note else ''}; rows: {rows}",
        ]
        for name, s in self.sites.items():
            lines.append(
                f"  {name}: {s.calls} call(s) {s.shapes if s.changing_shape else s.shapes[:1]}, {s.dtype}, "
                f"'{s.layout}' ({s.layout_from}){', written in place' if s.in_place else ''}"
            )
        return "\n".join(lines)


# -- the cache -----------------------------------------------------------------------------------

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def forget(model: nn.Module) -> None:
    """Drop every cached profile of ``model`` (they are also dropped when a parameter or buffer
    changes in place or a module is swapped; call this after changing the model's Python state)."""
    _CACHE.pop(model, None)


def _version(model: nn.Module) -> int:
    """Changes when a parameter or buffer is changed in place (``_version``) or replaced, or a module
    swapped: one walk over the modules (every verb's session looks it up)."""
    mods = modules_of(model)
    tensors = (t for m in mods for own in (m._parameters, m._buffers) for t in own.values() if t is not None)
    return hash((tuple(map(id, mods)), tuple((id(t), t._version) for t in tensors)))


def _leaf_sig(v: Any, rows: int | None) -> Any:
    if isinstance(v, torch.Tensor):
        shape = tuple(v.shape[1:]) if v.dim() and v.shape[0] == rows else tuple(v.shape)
        return ("T", shape, str(v.dtype), str(v.device), v.requires_grad)
    if isinstance(v, Mapping):
        return ("M", type(v).__qualname__, tuple((k, _leaf_sig(x, rows)) for k, x in v.items()))
    if isinstance(v, (tuple, list)):
        return ("S", type(v).__qualname__, tuple(_leaf_sig(x, rows) for x in v))
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return (
            "D",
            type(v).__qualname__,
            tuple((f.name, _leaf_sig(getattr(v, f.name), rows)) for f in dataclasses.fields(v)),
        )
    if v is None or isinstance(v, (bool, int, float, str)):
        return ("V", repr(v)[:64])
    return ("O", type(v).__qualname__)


def signature(batch: Any) -> tuple:
    """The input signature of a batch: its structure, the trailing shapes (the rows left out),
    dtypes and devices of its tensors; for a graph batch its class and the dtype and width of each field."""
    if is_graph_batch(batch):
        return (
            "graph",
            type(batch).__qualname__,
            tuple(
                (k, str(v.dtype), tuple(v.shape[1:]) if k not in ("edge_index", "batch", "ptr") else v.dim())
                for k, v in batch
                if isinstance(v, torch.Tensor)
            ),
        )
    try:
        rows = batch_size_of(batch)
    except TypeError:
        rows = None
    return _leaf_sig(batch, rows)


def _forward_key(forward: Callable | None) -> tuple:
    """Who ``forward`` is: a function by its code, the objects its closure holds and its
    defaults (a ``lambda m, b: m(**b)`` written afresh in every call is the same forward), a
    bound method by its function and object, any other callable by itself."""
    if forward is None:
        return ("default",)
    func, owner = getattr(forward, "__func__", forward), getattr(forward, "__self__", None)
    code = getattr(func, "__code__", None)
    if code is None:
        return ("forward", id(func), id(owner))
    cells = tuple(id(c.cell_contents) for c in (func.__closure__ or ()) if _filled(c))
    return ("code", id(code), cells, tuple(map(id, func.__defaults__ or ())), id(owner))


def _filled(cell) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:  # an empty cell
        return False
    return True


def _anchor(forward: Callable | None):
    """What a cached profile keeps a weak reference to, to tell a live forward from a dead one
    whose ids were reused: the function's code, else the callable."""
    func = getattr(forward, "__func__", forward)
    return getattr(func, "__code__", func)


def _cached(model: nn.Module, batch: Any, forward: Callable | None) -> ModelProfile:
    """The profile of ``(model, forward, signature of batch, parameter version)`` from the cache
    (a new, empty one, cached, the first time)."""
    try:
        per_model = _CACHE.setdefault(model, {})
    except TypeError:  # a model that cannot be weakly referenced: measured afresh each time
        return ModelProfile(signature(batch))
    sig = signature(batch)
    key = (_forward_key(forward), sig, _version(model))
    entry = per_model.get(key)
    if entry is not None:
        ref, prof = entry
        if ref is None or ref() is _anchor(forward):
            return prof
    prof = ModelProfile(sig)
    try:
        ref = None if forward is None else weakref.ref(_anchor(forward))
    except TypeError:  # a forward that cannot be weakly referenced: its profile is not kept
        return prof
    for k in [
        k for k, (r, _) in per_model.items() if (k[0] == key[0] and k[1] == sig) or (r is not None and r() is None)
    ]:
        del per_model[k]  # an older parameter version of the same model, forward and signature; a forward gone
    per_model[key] = (ref, prof)
    return prof


# -- measuring -----------------------------------------------------------------------------------


def _no_graph(err: BaseException) -> bool:
    """Whether ``err`` is torch's refusal of a gradient through a graph never built (no_grad)."""
    return isinstance(err, RuntimeError) and any(m in str(err) for m in _NO_GRAPH)


def forward_folded(
    model: nn.Module,
    batch: Any,
    forward: Callable | None,
    run: Callable[[], Any] | None = None,
    prof: ModelProfile | None = None,
) -> Any:
    """``run()`` (a verb's own forward pass of ``batch``; default the plain forward pass,
    :func:`~scimech.capture.hooks.run_forward`) under the autograd mode the model needs: known
    from its profile, else tried under ``no_grad`` and, where the forward itself takes gradients,
    run again under ``enable_grad``; the fact joins the profile. The verb's first pass measures
    it, so it costs no pass of its own."""
    if run is None:
        run = functools.partial(run_forward, model, batch, forward)
    prof = prof if prof is not None else _cached(model, batch, forward)
    if prof.needs_grad is not None:
        with prof.grad():
            return run()
    try:
        with torch.no_grad():
            out = run()
        prof.needs_grad = False
        return out
    except RuntimeError as err:
        if not _no_graph(err):
            raise
    with torch.enable_grad():
        out = run()
    prof.needs_grad = True
    return out


class _Observer:
    """Plain forward hooks on the sites of a profile pass: calls, shapes, dtype, layout, and
    the version counter of each output (to find the model writing into it in place)."""

    def __init__(self, resolved: Sequence):
        self.resolved = list(resolved)
        self.seen: dict[str, list[tuple[torch.Tensor, int]]] = {s.name: [] for s in self.resolved}
        self.layout: dict[str, tuple[str, str]] = {}
        self._handles: list = []

    def _see(self, site, t: torch.Tensor) -> None:
        self.seen[site.name].append((t, t._version))
        if site.name not in self.layout:
            try:
                self.layout[site.name] = (str(site.layout(t)), "declared" if site.axes is not None else "inferred")
            except Exception as err:  # noqa: BLE001 - shown, not raised: the verbs raise it where it matters
                self.layout[site.name] = (f"unknown ({type(err).__name__})", "refused")

    def __enter__(self) -> _Observer:
        for s in self.resolved:
            if s.port == "input":

                def pre(module, args, kwargs, _s=s):
                    t = args[0] if args else next((v for v in kwargs.values() if isinstance(v, torch.Tensor)), None)
                    if t is not None:
                        self._see(_s, first_tensor(t))

                self._handles.append(s.module.register_forward_pre_hook(pre, with_kwargs=True))
            else:

                def post(module, args, out, _s=s):
                    self._see(_s, first_tensor(out))

                self._handles.append(s.module.register_forward_hook(post))
        return self

    def __exit__(self, *exc) -> None:
        while self._handles:
            self._handles.pop().remove()

    def facts(self) -> dict[str, SiteFacts]:
        out = {}
        for s in self.resolved:
            seen = self.seen[s.name]
            layout, source = self.layout.get(s.name, ("never ran", "-"))
            out[s.name] = SiteFacts(
                calls=len(seen),
                shapes=[tuple(t.shape) for t, _ in seen],
                dtype=str(seen[0][0].dtype).removeprefix("torch.") if seen else "-",
                layout=layout,
                layout_from=source,
                in_place=any(t._version != v for t, v in seen),
            )
        return out


def _outputs(out: Any) -> list[torch.Tensor]:
    return [t.detach() for t in leaf_tensors(out)]


def _rows_reason(
    model: nn.Module,
    batch: Any,
    forward: Callable | None,
    full: list[torch.Tensor],
    prof: ModelProfile,
    observer: _Observer | None = None,
) -> str:
    """Why the rows of ``batch`` are not independent samples (``""``: they are), given the
    outputs ``full`` of the whole batch: the first half of the rows runs alone (``observer``:
    hooks that watch sites in that pass)."""
    b = prof.rows
    if b is None or b < 2:
        return ""
    h = b // 2
    try:
        part = slice_batch(batch, 0, h)
        with prof.grad(), observer if observer is not None else _Observer(()), _first_axes(model) as sizes:
            half = _outputs(run_forward(model, part, forward))
        prof.half_rows = (batch_size_of(part), sizes)
    except Exception as err:  # noqa: BLE001 - the rows cannot even run apart
        return f"the first {h} of {b} rows cannot run without the others ({type(err).__name__}: {str(err)[:120]})"
    finally:
        prof.passes += 1
    pairs = [(f, s) for f, s in zip(full, half, strict=False) if f.dim() and f.shape[0] == b]
    if not pairs or len(full) != len(half):
        return f"the output is not batched on its first axis like the {b} input rows"
    for f, s in pairs:
        if s.shape != f[:h].shape:
            return f"the first {h} rows alone give an output of shape {tuple(s.shape)}, not {tuple(f[:h].shape)}"
        ok, rel = same_values(f[:h], s)
        if not ok:
            prof.rows_coupled = True
            if f.is_floating_point() or f.is_complex():
                return (
                    f"the first {h} of {b} rows alone give outputs that differ by {rel:.1e} of their scale "
                    "from the same rows within the whole batch"
                )
            return f"the first {h} of {b} rows alone give other outputs than within the whole batch"
    prof.rows_coupled = False
    return ""


def _all_rows(outputs: list[torch.Tensor], rows: int | None) -> bool:
    """Whether every output is batched on its first axis like ``rows`` input rows (at least 2):
    then a half batch compares all of them, as a repeat would."""
    return bool(rows and rows >= 2 and outputs and all(t.dim() and t.shape[0] == rows for t in outputs))


def _measure(
    model: nn.Module,
    batch: Any,
    forward: Callable | None,
    prof: ModelProfile,
    needs: set[str],
    resolved: Sequence = (),
    outputs: Any = None,
) -> None:
    """Fill what ``needs`` asks of ``prof`` and it lacks (in eval mode: the caller's session put the model there).
    ``outputs``: the output of an unchanged pass of ``batch`` the verb ran itself (its first
    pass, through :func:`forward_folded`), which stands for the first measuring pass."""
    if "packing" in needs:  # checked on the values of a half batch: drift and rows first
        needs = needs | {"repeatable"}
    rows_wanted = bool({"rows", "coupling"} & needs) and prof.rows_interact is None and not is_graph_batch(batch)
    want_first = (
        (prof.repeatable is None and ("repeatable" in needs or rows_wanted))
        or rows_wanted
        or prof.needs_grad is None
        or bool(resolved)
    )
    if not want_first:
        return
    try:
        prof.rows = batch_size_of(batch)  # the rows of the batch measured (a signature leaves them out)
    except TypeError:
        prof.rows = None
    # in eval mode: the verb's session put the model there (scimech.capture.session)
    if outputs is not None and prof.needs_grad is not None and not resolved:
        one = _outputs(outputs)  # the verb's own first pass: folded in
    else:
        with _Observer(resolved) as seen:
            one = _outputs(forward_folded(model, batch, forward, prof=prof))
        prof.passes += 1
    if resolved:
        prof.sites.update(seen.facts())
    floats = [t for t in one if t.is_floating_point() or t.is_complex()]
    prof.output_dtype = floats[0].dtype if floats else prof.output_dtype
    packed = [r for r in resolved if r.axes is not None and r.axes.packed] if "packing" in needs else []
    half_seen = _Observer(packed) if packed else None
    folded: str | None = None  # the rows check of the half batch that stood for the repeat
    if prof.repeatable is None and "coupling" in needs and rows_wanted and _all_rows(one, prof.rows):
        # a sweep's check: the half batch stands for the repeat. Its rows alike within the whole batch and
        # alone, both facts hold (a drift or a coupling would move them); else a repeat tells which it is
        folded = _rows_reason(model, batch, forward, one, prof, half_seen)
        if not folded:
            prof.repeatable, prof.repeat_note, prof.rows_interact = True, "", ""
    if prof.repeatable is None and ("repeatable" in needs or rows_wanted):
        with prof.grad():
            two = _outputs(run_forward(model, batch, forward))
        prof.passes += 1
        prof.repeatable, prof.repeat_note = True, ""
        if len(one) != len(two):
            prof.repeatable, prof.repeat_note = False, "another number of outputs"
        for a, b in zip(one, two, strict=False):
            ok, rel = same_values(a, b)
            if not ok:
                prof.repeatable = False
                prof.repeat_note = (
                    f"other outputs ({rel:.1e} of their scale; allowed {tolerance(a.dtype):.0e} "
                    f"for {str(a.dtype).removeprefix('torch.')})"
                    if rel != float("inf")
                    else "other outputs (NaN or infinities at other places, or another shape)"
                )
                break
    if folded is not None and not prof.repeatable:
        prof.rows_coupled = None  # two unchanged passes differ: the half batch told nothing of the rows
    elif folded is not None and prof.rows_interact is None:
        prof.rows_interact = folded  # the repeat agreed: the half batch's difference is the rows'
    if (rows_wanted or packed) and prof.repeatable and prof.rows_interact is None:
        prof.rows_interact = _rows_reason(model, batch, forward, one, prof, half_seen)
    elif packed and prof.repeatable and folded is None:
        prof.rows_interact = _rows_reason(model, batch, forward, one, prof, half_seen)
    if half_seen is not None:  # some sites are declared packed
        for r in packed:
            prof.sites[r.name].packing = _packing(r, seen, half_seen, prof)
            prof.sites[r.name].packing_layout = str(r.axes)


def _packing(site, full: _Observer, half: _Observer, prof: ModelProfile) -> str:
    """Whether a site declared ``batch*window`` holds its rows sample by sample: the first half
    of the samples alone must give the first rows of the whole batch's activation (a mixture of
    experts that sorts tokens by expert across the batch does not)."""
    if prof.repeatable is False:
        return "not checked: two unchanged passes differ"
    if prof.rows_interact:
        return "not checked: the rows of the batch interact"
    got_full, got_half, b = full.seen[site.name], half.seen[site.name], prof.rows or 0
    if not got_full or not got_half or b < 2:
        return "not checked: the site did not run in both passes"
    t, u = got_full[0][0].detach(), got_half[0][0].detach()
    n, h = t.shape[0], b // 2
    if n % b or u.shape[0] != h * (n // b):
        return (
            f"not sample by sample: {b} samples give {n} rows and {h} samples {u.shape[0]}, not "
            f"{h} x {n // b if n % b == 0 else n / b:g}"
        )
    if site.axes.copies:  # copy c of sample i at row c * b + i: the half batch's copies are the first h of each
        k = n // b
        ok, rel = same_values(torch.cat([t[c * b : c * b + h] for c in range(k)]), u)
        if not ok:
            return (
                f"not copies of the batch: the first {h} samples alone give other rows (by {rel:.1e} of their "
                f"scale) than the first {h} rows of each of the {k} blocks of {b} rows of the whole batch"
            )
        return "copies of the batch"
    ok, rel = same_values(t[: u.shape[0]], u)
    if not ok:
        return (
            f"not sample by sample: the first {h} samples alone give other rows (by {rel:.1e} of their scale) "
            f"than the first {u.shape[0]} rows of the whole batch"
        )
    return "sample by sample"


def require(
    subject: nn.Module | ModelProfile,
    batch: Any = None,
    *,
    verb: str,
    needs: Iterable[str] = ("grad",),
    forward: Callable | None = None,
    samples: Any = None,
    why: str = "",
    sites: Sequence = (),
    outputs: Any = None,
) -> ModelProfile:
    """The profile of ``subject`` on ``batch``'s signature, measured where it lacks what
    ``needs`` asks, and checked: the one place where a verb's assumptions are refused.

    Parameters
    ----------
    subject
        The model (its profile is looked up, measured on ``batch`` where needed, and cached), or
        a :class:`ModelProfile` (checked as it is).
    batch
        One batch of the inputs the verb will run (its first).
    verb
        The verb's name, which starts every message.
    needs
        Any of ``"grad"`` (the autograd mode, :meth:`ModelProfile.grad`), ``"repeatable"`` (two
        unchanged passes agree), ``"rows"`` (rows are independent samples, checked only where
        ``samples`` is ``None`` and ``batch`` is not a graph batch), ``"coupling"`` (whether they
        are, measured but not refused: a sweep that tiles the batch runs one site per pass where
        they are not; where the repeat is not measured yet, the half batch stands for it) and
        ``"sites"`` (facts of ``sites``, resolved sites).
    forward
        The verb's ``forward=``.
    samples
        The verb's ``samples=``: given, the rows are not checked (the user said what a sample is).
    why
        For ``"rows"``: what the verb does with rows as samples (for the message).
    sites
        For ``"sites"``: resolved sites.
    outputs
        The output of an unchanged pass of ``batch`` that the verb ran itself under
        :func:`forward_folded` (its own first pass): it stands for the first measuring pass,
        so a drift check costs one pass more than the verb's own work, once.

    Returns
    -------
    ModelProfile

    Raises
    ------
    DataValidationError
        ``"<verb>: <what was measured>. <the fix>"``: a drifting model names ``forward=``,
        interacting rows name ``samples=``.
    """
    needs = set(needs)
    unknown = needs - NEEDS
    if unknown:
        raise ValueError(f"require: unknown needs {sorted(unknown)}; choose from {sorted(NEEDS)}.")
    if isinstance(subject, ModelProfile):
        prof = subject
    else:
        if samples is not None:
            needs -= {"rows", "coupling"}
        prof = _cached(subject, batch, forward)
        if "packing" in needs:
            sites = [s for s in sites if s.axes is not None and s.axes.packed]
            needs = needs | {"sites"} if sites else needs - {"packing"}
        new = [
            s
            for s in sites
            if s.name not in prof.sites or ("packing" in needs and prof.sites[s.name].packing_layout != str(s.axes))
        ]
        new = new if "sites" in needs else []
        if new or needs - {"sites", "packing"}:
            _measure(subject, batch, forward, prof, needs, new, outputs)
    if "repeatable" in needs or ("rows" in needs and samples is None):
        if prof.repeatable is False:
            raise drift_error(verb, prof.repeat_note)
    if "rows" in needs and samples is None and prof.rows_interact:
        raise rows_error(verb, prof.rows_interact, why or "Treating rows as samples")
    for s in sites if "packing" in needs else ():
        packing = prof.sites[s.name].packing or ""
        if packing.startswith("not copies"):
            raise DimensionError(
                f"{verb}: site {s.name!r} is declared '{s.axes}', copies of the whole batch stacked, but they are "
                f"{packing}. Its rows would be labelled as other samples'. Declare 'batch*window ...' where each "
                "sample's rows are packed together, or choose a site whose first axis is the batch."
            )
        if packing.startswith("not sample by sample"):
            raise DimensionError(
                f"{verb}: site {s.name!r} is declared '{s.axes}', rows packed sample by sample, but they are "
                f"{packing} (a mixture of experts sorts tokens by expert across the batch; a model may gather rows "
                "from several samples). Its rows would be labelled as other samples'. Choose a site where the rows "
                "are in sample order again (after the experts' outputs are put back), or one whose first axis is the "
                "batch."
            )
    return prof


def shared_rows(
    model: nn.Module,
    batch: Any,
    forward: Callable | None,
    sites: Sequence,
    verb: str,
    prof: ModelProfile | None = None,
) -> ModelProfile:
    """Refuse a site whose first axis only looks like the batch: on ``batch`` it has as many rows
    as the batch, but on a batch of another size (its first half, or two copies of a one-sample
    batch) it keeps them, so it is one tensor every sample shares (T5's relative-position bias,
    a positional table), not rows of samples. Measured once per site, in one pass with every
    scimech hook standing aside (it runs inside the verb's block); kept in the profile: ``prof``,
    the model's profile for ``forward`` and ``batch``'s signature where the verb's session holds it
    (no look-up of its own), else looked up.

    Raises
    ------
    DimensionError
        ``"<verb>: site ... is one tensor every sample shares ..."``, naming ``axes=`` without a
        batch axis (then it is one sample that every row shares: a mean or a resample over
        samples leaves it as it is).
    """
    prof = _cached(model, batch, forward) if prof is None else prof
    sites = [s for s in sites if s.axes is None or not (s.axes.packed or s.axes.unbatched)]  # declared: as said
    if prof.half_rows is not None:  # the rows check's half batch told it, at no pass of its own
        half, sizes = prof.half_rows
        for s in sites:
            if s.name not in prof.batched and s.port == "output" and s.module_path in sizes:
                got = sizes[s.module_path]
                prof.batched[s.name] = _kept(batch_size_of(batch), half, got) if got != half else ""
    todo = [s for s in sites if s.name not in prof.batched]
    if todo:
        try:
            rows, n = batch_size_of(batch), n_samples_of(batch)
            other = slice_batch(batch, 0, n // 2) if n >= 2 else tile_batch(batch, 2)
            size = batch_size_of(other)
            with prof.grad(), hooks_aside(), _Observer(todo) as seen, _stop_when_seen(seen):
                run_forward(model, other, forward)
        except StopForward:
            pass  # every site ran: the rest of the pass is not needed
        except Exception:  # noqa: BLE001 - a model that runs on no other batch size: not told, not refused
            rows, seen = 0, None
        finally:
            prof.passes += 1
        for s in todo:
            shapes = [tuple(t.shape) for t, _ in seen.seen[s.name]] if seen is not None else []
            kept = [sh for sh in shapes if sh and sh[0] != size]
            prof.batched[s.name] = _kept(rows, size, kept[0][0]) if kept else ""
    for s in sites:
        why = prof.batched.get(s.name, "")
        if why:
            raise _shared_error(verb, s.name, why)
    return prof


def _kept(rows: int, size: int, got: int) -> str:
    return f"its first axis has {rows} rows on a batch of {rows} and {got} on a batch of {size}"


@contextlib.contextmanager
def _first_axes(model: nn.Module):
    """The size of the first axis of each module's first output tensor in the pass inside (by path)."""
    sizes: dict[str, int] = {}

    def see(path: str, out: Any) -> None:
        if path not in sizes:
            t = next(iter(leaf_tensors(out)), None)
            if t is not None and t.dim():
                sizes[path] = int(t.shape[0])

    handles = [m.register_forward_hook(lambda _m, _a, out, _p=p: see(_p, out)) for p, m in model.named_modules() if p]
    try:
        yield sizes
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def _stop_when_seen(seen: _Observer):
    """End a pass of ``seen``'s observer once every site it watches has run (a partial pass)."""

    def stop(*_):
        if all(seen.seen.values()):
            raise StopForward

    handles = [s.module.register_forward_hook(stop) for s in seen.resolved]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _shared_error(verb: str, site: str, why: str) -> DimensionError:
    names = "position_1 position_2 feature"
    return DimensionError(
        f"{verb}: site {site!r} has no batch axis: {why}, so it is one tensor every sample shares (a "
        "relative-position bias, a positional table, a buffer) and its rows are not samples; a mean or a resample "
        f"over them would change the model. Declare it without a batch axis, one name per axis, e.g. "
        f"axes={{{site!r}: {names!r}}} for a (query, key, heads) bias (the axis of its features named 'feature'): "
        "it is then one sample every row shares, recorded once, and a mean or resample ablation leaves it as it is; or choose a site whose first axis is the batch."
    )


def profile_of(model: nn.Module, batch: Any, forward: Callable | None = None) -> ModelProfile:
    """The cached profile of ``model`` for ``forward=`` and ``batch``'s signature, as far as it
    is measured (a new, empty one the first time): what a verb's own first pass fills through
    :func:`forward_folded` and ``require(..., outputs=...)``."""
    return _cached(model, batch, forward)


def measure(
    model: nn.Module, batch: Any, forward: Callable | None, prof: ModelProfile, needs: set[str], sites: Sequence = ()
) -> None:
    """Measure into ``prof`` what ``needs`` names and it lacks (``sites``: resolved sites whose facts are
    wanted), for callers outside a verb (:mod:`scimech.capture.profiling`); a verb's session does this
    through :func:`require`."""
    _measure(model, batch, forward, prof, needs, list(sites))


def _first_sample_rows(batch: Any, samples: Any) -> tuple[int, str] | None:
    """How many leading rows of ``batch`` are its first sample, and how that was told: from
    ``samples=`` (an index tensor, a field name, a callable), a graph batch's batch vector, or
    a field named ``batch`` (an integer index per row, in order); ``None`` where nothing says."""
    try:
        rows = batch_size_of(batch)
    except TypeError:
        return None
    idx, how = None, ""
    if is_graph_batch(batch):
        idx, how = batch.batch, "the graph batch's batch vector"
    elif isinstance(samples, torch.Tensor):
        idx, how = samples, "samples="
    elif isinstance(samples, str):
        idx, how = (batch.get(samples) if isinstance(batch, Mapping) else getattr(batch, samples, None)), "samples="
    elif callable(samples) and not isinstance(samples, type):
        try:
            idx, how = samples(batch), "samples="
        except Exception:  # noqa: BLE001 - a samples= that fails is refused by the verb itself
            return None
    elif samples is None and isinstance(batch, Mapping):
        idx, how = batch.get("batch"), "its field 'batch'"
    if not isinstance(idx, torch.Tensor) or idx.dim() != 1 or idx.shape[0] != rows or idx.is_floating_point():
        return None
    idx = idx.long().cpu()
    if rows < 2 or not bool((idx[1:] >= idx[:-1]).all()) or int(idx[0]) != 0:
        return None  # rows not in sample order: the first sample is not a slice
    first = int((idx == 0).sum())
    return (first, how) if 0 < first < rows else None


def data_rows_checked(
    model: nn.Module, batch: Any, forward: Callable | None, samples: Any, err: BaseException, verb: str = ""
) -> DimensionError | None:
    """For an activation refused as rows the model computes from the data (``err.data_rows``, an
    edge-level site of a graph built inside forward), the refusal with its fix checked on the
    data: the first sample of ``batch`` alone runs, and the site gives rows of its own there (the
    fix, one graph per batch with the site declared without a batch axis, then works). ``None``
    where it cannot be checked (no sample index, the sample cannot run alone): the refusal stands."""
    site, n_rows, rows = err.data_rows  # type: ignore[attr-defined]
    first = _first_sample_rows(batch, samples)
    if first is None:
        return None
    h, how = first
    try:
        resolved = resolve_site(model, site)
        part = slice_batch(batch, 0, 1) if is_graph_batch(batch) else _rows_of(batch, h, rows)
        with hooks_aside(), _Observer([resolved]) as seen, torch.no_grad():
            run_forward(model, part, forward)
        got = [tuple(t.shape) for t, _ in seen.seen[resolved.name]]
    except Exception:  # noqa: BLE001 - the sample does not run alone: the fix is not offered as checked
        return None
    if not got:
        return None
    shape = got[0]
    layout = edge_layout(site, shape)
    return DimensionError(
        f"{verb + ': ' if verb else ''}site {site!r} gives {n_rows} rows for a batch of {rows} rows: a number the model computes from the data, "
        f"not rows of samples: the edges of a graph the model builds inside forward (a radius graph: SchNet's "
        f"distance expansion and filter network), which have no sample axis when several graphs share a batch. "
        f"Checked on this batch: its first sample alone ({h} rows, told by {how}) runs and gives {shape[0]} rows "
        f"of shape {shape} at {site!r}. Give the graphs one per batch (a list of one-graph batches, each with its "
        f"sample index at 0) and declare the site without a batch axis, axes={{{site!r}: {layout!r}}}: each pass is "
        "one sample (where a verb asks which rows are one sample, samples= the index field, or torch.zeros(n, "
        "dtype=torch.long)); or choose a node-level site."
    )


def _rows_of(batch: Any, h: int, rows: int) -> Any:
    """The first ``h`` rows of every leaf batched on ``rows`` rows (other leaves kept whole)."""
    return map_tensors(batch, lambda t: t[:h] if t.dim() and t.shape[0] == rows else t)
