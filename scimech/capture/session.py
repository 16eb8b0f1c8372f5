"""One way in for every verb: a session on the model.

Every verb (``record``, ``ablate``, ``patch``, the sweeps, attribution patching, ``splice``,
``steer``, captum ``attribute``) runs the same steps around what is particular to it. A verb
opens one session and the session does them, in one order, with the verb's name in every
message:

>>> with Session(model, "ablation_sweep", inputs, calls=calls, forward=forward,   # doctest: +SKIP
...              samples=samples) as s:
...     out = s.run(batch)                        # the verb's first pass, under the grad mode it needs
...     s.check(batch, {"repeatable"}, outputs=out)   # the profile's facts, the first pass folded in
...     values = s.values(metric, out)            # per-sample, in the model's precision

- **calls**: ``calls=`` parsed once (:attr:`Session.calls`, :mod:`scimech.capture.calls`);
- **eval mode**: a verb that runs the model on its ``inputs`` itself puts it in eval mode and
  gives every module its own mode back on leaving; a verb whose block the user runs (``ablate``,
  ``patch``, ``splice``, ``steer``, a ``Recorder``) leaves the modes as they are;
- **the profile** (:mod:`scimech.capture.profile`): :meth:`Session.check` asks it for the facts
  the verb needs (measured in eval mode, once per model, ``forward=`` and input signature);
  :meth:`Session.grad` is the autograd mode the model's forward needs; :meth:`Session.run`
  runs a pass under it (the first pass finds it, at no pass of its own);
- **the fired check**: hooks made by :meth:`Session.hooks` are checked on leaving the block
  (a site that never ran, or never reached a call asked for, raises
  :class:`~scimech.errors.SiteNeverRanError`), and :meth:`Session.fired` checks any others;
- **metric values**: :meth:`Session.values` gives the metric's per-sample values in the
  model's precision (float64 and complex kept), summed per sample where rows are not samples;
  :meth:`Session.noise_floor` is how far two such values may differ by rounding alone, and
  :meth:`Session.normalisable` refuses a metric that is constant over the inputs and says
  which normalised effects would divide by rounding.

A new verb then writes only its setter (what replaces an activation) and what it returns.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from scimech.capture.calls import CallPolicy, Calls, parse_calls
from scimech.capture.hooks import HookFn, HookSet, check_fired, hooks_aside, restore_modes, to_eval
from scimech.capture.profile import (
    ModelProfile,
    data_rows_checked,
    forward_folded,
    profile_of,
    require,
    shared_rows,
    tolerance,
)
from scimech.capture.sites import ResolvedSite
from scimech.errors import DataValidationError

__all__ = ["Session", "session", "result_values", "integer_activation"]


def result_values(v: torch.Tensor) -> torch.Tensor:
    """Per-sample metric values as results keep them: detached, on the CPU, in the model's
    precision (float64 stays float64, complex stays complex, never cut to its real part);
    bfloat16, float16 and integers as float32."""
    v = v.detach()
    if not (v.is_complex() or v.dtype == torch.float64):
        v = v.float()
    return v.cpu()


def integer_activation(what: str, site: str, t: torch.Tensor, cannot: str, fix: str) -> DataValidationError:
    """The one message for a verb that cannot act on an activation of integer or boolean values
    (codes, indices, a mask): ``"<what> at '<site>': the activation is <dtype> (...), <cannot>. <fix>"``."""
    return DataValidationError(
        f"{what} at {site!r}: the activation is {str(t.dtype).removeprefix('torch.')} (codes, indices or a mask), "
        f"{cannot}. {fix}"
    )


class Session:
    """One verb's run on one model (see the module docs).

    Parameters
    ----------
    model
        The model.
    verb
        The verb's name: it starts every message.
    inputs
        What the verb runs the model on, where it runs the model itself (then the model is in eval
        mode inside the block, and its modes are given back on leaving); ``None`` where the user
        runs the passes inside the verb's block (the modes are left alone).
    calls
        The verb's ``calls=`` (:mod:`scimech.capture.calls`), parsed here: :attr:`calls`.
    forward
        The verb's ``forward=``.
    samples
        The verb's ``samples=``: given, rows are not checked as samples (the user said what a sample is).
    needs
        What :meth:`check` asks of the profile by default (:data:`scimech.capture.profile.NEEDS`).
    allow_last
        Whether ``calls="last"`` is accepted: only where the verb runs an unchanged pass first.
    why
        For the rows check: what the verb does with rows as samples (for the message).
    """

    def __init__(
        self,
        model: nn.Module,
        verb: str,
        inputs: Any = None,
        *,
        calls: Calls | None = "error",
        forward: Callable | None = None,
        samples: Any = None,
        needs: Iterable[str] = (),
        allow_last: bool = True,
        why: str = "",
        rows_are_samples: bool = False,
    ):
        self.model, self.verb = model, verb
        #: whether the rows this verb records become samples: ``record`` labels them so, and the
        #: reference activations of mean and resample ablation average or draw them (the clean run a
        #: patching sweep or attribution patching records is paired row by row with the corrupted one,
        #: where a tensor every sample shares is the same in both)
        self.rows_are_samples = rows_are_samples
        self.runs = inputs is not None
        self.calls: CallPolicy = parse_calls("error" if calls is None else calls, verb, allow_last=allow_last)
        self.forward, self.samples = forward, samples
        self.needs, self.why = set(needs), why
        self.profile: ModelProfile | None = None
        #: the dtype of the metric as the model computed it (its noise floor), once a value was taken
        self.metric_dtype: torch.dtype | None = None
        self._watched: list[HookSet] = []
        self._modes: list | None = None
        self._warned = False
        self._batch: Any = None  # the batch of the last pass run (:meth:`run`)
        self._rows_checked = False

    # -- the block ---------------------------------------------------------------------------
    def __enter__(self) -> Session:
        if self.runs:
            self._modes = to_eval(self.model)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                for hooks in self._watched:
                    self.fired(hooks)
            elif getattr(exc, "data_rows", None) is not None and self._batch is not None:
                # rows the model computes from the data (edges of a graph built inside forward):
                # the refusal's fix checked on the verb's batch before it is offered
                checked = data_rows_checked(self.model, self._batch, self.forward, self.samples, exc, self.verb)
                if checked is not None:
                    raise checked from exc
        finally:
            self._watched = []
            if self._modes is not None:
                restore_modes(self._modes)
                self._modes = None

    # -- the profile -------------------------------------------------------------------------
    def profile_for(self, batch: Any) -> ModelProfile:
        """The model's profile for this session's ``forward=`` and ``batch``'s signature: looked
        up once per session, on the verb's first batch (the first of :meth:`profile_for`,
        :meth:`grad` or :meth:`run`), as far as it is measured; :attr:`profile` from then on."""
        if self.profile is None:
            self.profile = profile_of(self.model, batch, self.forward)
        return self.profile

    def grad(self, batch: Any = None):
        """The autograd mode the model's forward needs (its profile's; ``no_grad`` until known)."""
        if self.profile is None and batch is not None:
            self.profile_for(batch)
        return torch.no_grad() if self.profile is None else self.profile.grad()

    def run(self, batch: Any, run: Callable[[], Any] | None = None) -> Any:
        """One pass of ``batch`` (``run()``, default the plain forward pass with ``forward=``) under
        the autograd mode the model needs; the first pass of a model finds that mode."""
        self._batch = batch
        return forward_folded(self.model, batch, self.forward, run, prof=self.profile_for(batch))

    def check(
        self,
        batch: Any,
        needs: Iterable[str] | None = None,
        *,
        sites: Sequence[ResolvedSite] = (),
        outputs: Any = None,
        why: str | None = None,
    ) -> ModelProfile:
        """The profile's facts the verb needs (``needs``, default the session's), measured on
        ``batch`` where missing, in eval mode, and checked: a refusal reads
        ``"<verb>: <what was measured>. <the fix>"``. ``outputs``: the output of the verb's own
        unchanged pass of ``batch`` (:meth:`run`), which stands for the first measuring pass."""
        modes = None if self._modes is not None else to_eval(self.model)
        try:
            prof = require(
                self.model,
                batch,
                verb=self.verb,
                needs=self.needs if needs is None else needs,
                forward=self.forward,
                samples=self.samples,
                why=self.why if why is None else why,
                sites=sites,
                outputs=outputs,
            )
        finally:
            if modes is not None:
                restore_modes(modes)
        return prof  # not the session's own profile: the batch checked may be another (a reference)

    # -- hooks and the fired check ----------------------------------------------------------
    def hooks(
        self,
        sites: Iterable[ResolvedSite],
        fn: HookFn,
        *,
        calls: CallPolicy | None = None,
        last: Mapping[str, int] | None = None,
    ) -> HookSet:
        """A :class:`~scimech.capture.hooks.HookSet` of ``fn`` at ``sites`` under the session's
        ``calls=`` (or ``calls``), named by the verb, checked on leaving the session's block."""
        policy = self.calls if calls is None else calls
        hooks = HookSet(sites, fn, model=self.model, calls=policy, verb=self.verb, last=last)
        self._watched.append(hooks)
        return hooks

    def fired(self, seen: HookSet | Mapping[str, int] | Any) -> None:
        """Raise :class:`~scimech.errors.SiteNeverRanError` naming the sites that never ran:
        ``seen`` is a :class:`~scimech.capture.hooks.HookSet` (also checked for the calls it was
        asked for), anything with a ``fired`` count per site (a Recorder), or the counts themselves."""
        counts = seen if isinstance(seen, Mapping) else seen.fired
        check_fired(counts, self.verb)
        if isinstance(seen, HookSet):
            seen.check_calls(self.verb)
        resolved = getattr(seen, "resolved", None)
        if resolved is not None and self._batch is not None and not self._rows_checked and self.rows_are_samples:
            # a Recorder whose rows become samples: a site whose first axis only looked like the
            # batch (as many rows by chance) is refused, once per session (the profile keeps it)
            self._rows_checked = True
            shared_rows(self.model, self._batch, self.forward, resolved, self.verb)
            packed = [r for r in resolved if r.axes is not None and r.axes.packed]
            if packed:  # rows declared packed by sample or stacked by copy: checked on the data (once per model)
                with hooks_aside():
                    self.check(self._batch, {"packing"}, sites=packed)

    # -- metric values -----------------------------------------------------------------------
    def values(
        self,
        metric: Callable[[Any, Any], torch.Tensor],
        out: Any,
        target: Any = None,
        per_sample: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """The metric's per-sample values of ``out`` on the CPU, in the model's precision (float64
        and complex kept; bfloat16, float16 and integers as float32), summed per sample by
        ``per_sample`` where a sample is several rows."""
        v = metric(out, target)
        if not isinstance(v, torch.Tensor) or v.dim() != 1:
            name = getattr(metric, "name", getattr(metric, "__name__", "metric"))
            raise ValueError(f"{self.verb}: the metric {name!r} must return a 1-D tensor (one value per sample).")
        self.metric_dtype = self.metric_dtype or v.dtype
        v = result_values(v)
        return v if per_sample is None else per_sample(v)

    @property
    def metric_tolerance(self) -> float:
        """How far two values of the metric may differ relative to its scale when rows run in
        another batch (the profile's tolerance of the dtype the model computed the metric in)."""
        return tolerance(self.metric_dtype)

    def noise_floor(self, *values: np.ndarray) -> float:
        """How far two values of the metric may differ by rounding alone: the machine epsilon of
        the dtype the model computed it in, times the metric's magnitude over ``values`` (at
        least 1, as the profile compares values: relative above 1, absolute below)."""
        dtype = self.metric_dtype or torch.float32
        if not (dtype.is_floating_point or dtype.is_complex):
            return 0.0  # integer values are exact
        eps = torch.finfo(dtype.to_real() if dtype.is_complex else dtype).eps
        mags = [float(np.nanmax(np.abs(v))) for v in values if np.size(v) and np.isfinite(np.abs(v)).any()]
        return eps * max([1.0, *mags])

    def normalisable(self, clean: np.ndarray, corrupted: np.ndarray, metric: str) -> np.ndarray:
        """Where ``clean - corrupted`` is a difference, not rounding: a mask per sample.

        A metric constant over the inputs (every clean and corrupted value within its noise
        floor of the others) is refused: no effect of it can be normalised, and its effects are
        rounding. Samples whose clean and corrupted values differ by no more than the floor are
        masked, with one warning naming how many and the floor."""
        floor = self.noise_floor(clean, corrupted)
        both = np.concatenate([np.ravel(clean), np.ravel(corrupted)])
        finite = both[np.isfinite(both)]
        spread = float(np.abs(finite - finite[0]).max()) if finite.size else 0.0
        if finite.size > 1 and spread <= floor:
            raise DataValidationError(
                f"{self.verb}: the metric {metric!r} is constant over the inputs: its clean and corrupted values "
                f"differ by at most {spread:.1e}, within its noise floor {floor:.1e} (the {_dtype_name(self)} machine "
                "epsilon times its magnitude, at least 1), so every effect would be rounding (a mean of a normalised "
                "output is 0 by construction). Measure something the inputs change: one output "
                "(metrics.output(index=...)), a logit difference, or the shift from a reference (metrics.output_shift)."
            )
        gap = np.abs(clean - corrupted)
        ok = gap > floor
        low = ~ok & (gap > 0)
        if low.any() and not self._warned:
            self._warned = True
            warnings.warn(
                f"{self.verb}: normalized_effect is NaN for {int(low.sum())} of {low.size} samples whose clean and "
                f"corrupted {metric} differ by at most {float(gap[low].max()):.1e}, within the metric's noise floor "
                f"{floor:.1e} (the {_dtype_name(self)} machine epsilon times its magnitude, at least 1): a ratio whose "
                "denominator is rounding is not a measurement. Use pairs whose metric differs, or read effect "
                "(patched minus the unpatched run) instead.",
                RuntimeWarning,
                stacklevel=3,
            )
        return ok


def _dtype_name(s: Session) -> str:
    return str(s.metric_dtype or torch.float32).removeprefix("torch.")


#: the spelling of the docs: ``with session(model, verb, inputs, calls=..., forward=...) as s:``
session = Session
