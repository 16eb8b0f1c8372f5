"""Which calls of a site a verb acts on: one policy for every verb.

A module can run more than once in one forward pass: an RNN cell or a solver's vector field
at every step, a weight-tied block applied N times, one activation module shared by every
block (the same object under several paths), a model rolled out by a loop. Every verb that
records or changes a site (:func:`~scimech.capture.record.record`, :class:`~scimech.capture.record.Recorder`,
:func:`~scimech.causal.intervene.ablate`, :func:`~scimech.causal.intervene.patch`, the sweeps,
:func:`~scimech.causal.atp.attribution_patching`, the dictionary verbs) takes ``calls=``:

- ``"error"`` (default): a site that runs twice in one forward pass raises
  :class:`~scimech.errors.SiteCalledTwiceError`; nothing is assumed;
- ``"all"``: every call (recorded along a ``call`` dim);
- ``k`` (an int): only call ``k`` (0-based) of each forward pass;
- ``[i, j, ...]``: those calls;
- ``"last"``: the last call. An intervention cannot know in advance which call is the last,
  so only the verbs that run an unchanged forward pass first (record, the sweeps, attribution
  patching) accept it; they check that the changed pass runs as many calls.

*One forward pass* is one run of the verb's forward (including a ``forward=`` function that
loops the model, a rollout), or one top-level call of the model inside a ``with`` block of
:func:`~scimech.causal.intervene.ablate` / :func:`~scimech.causal.intervene.patch`, or everything inside
``with scimech.forward_pass():`` (a rollout driven by your own loop). Call indices count
from the start of each pass. A requested call that a pass does not reach is an error, not
a silent no-op.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from torch import nn

__all__ = [
    "Calls",
    "CallPolicy",
    "Pass",
    "parse_calls",
    "forward_pass",
    "current_pass",
    "aliases",
    "repeat_message",
    "shortfall",
]


class Pass:
    """One forward pass under way (an identity); ``root``: opened by a hook on the model itself
    (a top-level model call), not by a verb's forward or :class:`forward_pass`."""

    __slots__ = ("root",)

    def __init__(self, root: bool = False):
        self.root = root


# the forward pass under way; hooks count calls within it
_PASS: contextvars.ContextVar[Pass | None] = contextvars.ContextVar("scimech_forward_pass", default=None)


@dataclass(frozen=True)
class CallPolicy:
    """A parsed ``calls=``: ``mode`` is ``"error"``, ``"all"``, ``"last"`` or ``"index"`` (``indices``)."""

    mode: str
    indices: tuple[int, ...] = ()

    @property
    def stacked(self) -> bool:
        """Several calls are kept (a ``call`` dim): ``"all"`` or a list."""
        return self.mode == "all" or (self.mode == "index" and self.is_list)

    is_list: bool = False

    def acts(self, k: int, last: int | None = None) -> bool:
        """Whether call ``k`` of a pass is acted on (``last``: the index of the last call, when known)."""
        if self.mode in ("error", "all"):
            return True
        if self.mode == "last":
            return last is not None and k == last
        return k in self.indices

    def __str__(self) -> str:
        if self.mode == "index":
            return str(list(self.indices)) if self.is_list else str(self.indices[0])
        return self.mode


#: What ``calls=`` takes: a mode, a call index or a list of them, or a :class:`CallPolicy` already
#: parsed (as the verbs hand it on to one another).
Calls = Literal["error", "all", "last"] | int | Sequence[int] | CallPolicy


def parse_calls(value, verb: str, *, allow_last: bool = True) -> CallPolicy:
    """A :class:`CallPolicy` from a ``calls=`` value, checked with one message form."""
    if isinstance(value, CallPolicy):
        policy = value
    elif isinstance(value, str) and value in ("error", "all", "last"):
        policy = CallPolicy(value)
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        policy = CallPolicy("index", (int(value),))
    elif (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and value
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    ):
        if len(set(value)) != len(value):
            raise ValueError(f"The 'calls' option of {verb} lists a call twice: {list(value)}.")
        policy = CallPolicy("index", tuple(sorted(int(v) for v in value)), is_list=True)  # in call order
    else:
        raise ValueError(
            f"The 'calls' option of {verb} must be 'error', 'all', 'last', a call index >= 0 or a "
            f"list of them. Got {value!r} instead."
        )
    if policy.mode == "last" and not allow_last:
        raise ValueError(
            f"{verb} cannot act on calls='last': which call is the last is known only once the forward pass has "
            "ended, after the earlier calls have run. Give the index instead (calls=k, 0-based; record(..., "
            "calls='all') shows how many calls a pass makes), or use ablation_sweep / patching_sweep, which count "
            "the calls on the unchanged run first."
        )
    return policy


class forward_pass:
    """Context manager: everything inside counts as one forward pass for call indices.

    Passes nest: an inner pass (a verb's own forward) inside an open one is part of it.

    Examples
    --------
    A rollout of 4 steps of one cell is one pass, so ``calls=2`` zeroes the cell's 3rd call only:

    >>> model = torch.nn.Sequential(torch.nn.Linear(2, 2))  # the cell is site "0"
    >>> h, steps = torch.ones(1, 2), []
    >>> with sm.ablate(model, "0", method="zero", calls=2), forward_pass():
    ...     for step in range(4):
    ...         h = model(h)
    ...         steps.append(h)
    >>> [bool((s == 0).all()) for s in steps]
    [False, False, True, False]
    >>> torch.equal(steps[3], model[0].bias.detach()[None])  # the step after sees zeros: the bias alone
    True
    """

    def __init__(self, _root: bool = False):
        self._root = _root

    def __enter__(self):
        self._token = _PASS.set(Pass(self._root)) if _PASS.get() is None else None
        return self

    def __exit__(self, *exc) -> None:
        if self._token is not None:
            _PASS.reset(self._token)


def shortfall(policy: CallPolicy, n: int, last: int | None = None) -> str | None:
    """What a forward pass that ran a site ``n`` times lacks for ``policy`` (``None``: nothing).

    ``last``: the index of the site's last call in the unchanged run (``calls="last"``)."""
    if policy.mode == "index":
        missing = [i for i in policy.indices if i >= n]
        if missing:
            return (
                f"ran {n} time(s) in a forward pass, so call(s) {missing} never happened there and nothing was "
                "recorded or changed at them (calls= counts from 0 within each pass). Choose calls below that "
                "count; record(..., calls='all') shows them."
            )
    elif policy.mode == "last" and last is not None and n != last + 1:
        return (
            f"ran {last + 1} times in the unchanged forward pass but {n} times in the changed one (a number of "
            "calls that depends on the values, e.g. an adaptive solver's steps), so 'the last call' is not one "
            "step of both runs. Give a fixed call index (calls=k) or use a fixed-step solver."
        )
    return None


def current_pass() -> Pass | None:
    """The forward pass under way (an identity), or ``None`` outside any pass."""
    return _PASS.get()


def aliases(model: nn.Module | None, module: nn.Module) -> list[str]:
    """Every path under which ``module`` is registered in ``model`` (one module, several paths)."""
    if model is None:
        return []
    return [n for n, m in model.named_modules(remove_duplicate=False) if m is module and n]


def repeat_message(site: str, module: nn.Module, model: nn.Module | None, verb: str, calls: int | None = None) -> str:
    """Why a site ran twice and the fix, for :class:`~scimech.errors.SiteCalledTwiceError`."""
    paths = aliases(model, module)
    shared = (
        f" The module is one object registered under {len(paths)} paths ({', '.join(paths)}): a shared "
        "module runs once for each, so ablating or recording one path acts on all of them."
        if len(paths) > 1
        else ""
    )
    n = f" ({calls} calls so far)" if calls else ""
    return (
        f"{verb}: site {site!r} ({type(module).__name__}) ran more than once in one forward pass{n} (RNN or "
        f"solver steps, a weight-tied or iterated block, a rollout).{shared} Say which calls: calls='all' "
        "(every call), calls=k (call k, 0-based, of each pass), calls=[i, j], or calls='last' where the verb "
        "accepts it."
    )
