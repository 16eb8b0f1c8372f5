"""Visual stimulus conditions (ZAPBench-like), as arrays over time for a batch of trials.

A stimulus is given in the world frame: a grating velocity ``(gx, gy)`` in mm s-1 (the
direction the stripes move), a whole-field rotation ``rot`` in rad s-1 (counter-clockwise
positive, i.e. leftward), a luminance in [0, 1] and the closed-loop feedback ``gain``
(1 = natural, 0 = open loop: the fish's own motion never changes what it sees). The fish
starts heading along +x, so a grating along +x is a *forward* grating (it moves
tail-to-head, which drives the optomotor response) and one along +y moves to the fish's left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scimech.errors import ConfigError

__all__ = ["CONDITIONS", "Stimulus", "make_stimulus", "stack_stimuli"]

CONDITIONS = (
    "grating_fwd",
    "grating_left",
    "grating_right",
    "turning",
    "flash",
    "dark",
    "open_loop",
    "gain_change",
    "grating_bwd",
)


@dataclass
class Stimulus:
    """Stimulus arrays of shape ``(B, T)`` at the simulation step.

    Attributes
    ----------
    gx, gy : np.ndarray
        Grating velocity in the world frame, mm s-1.
    rot : np.ndarray
        Whole-field rotation, rad s-1 (positive = leftward / counter-clockwise).
    lum : np.ndarray
        Luminance, 0 (dark) to 1.
    gain : np.ndarray
        Closed-loop gain (0 = open loop).
    closed : np.ndarray
        1 where the projection of the grating follows the fish's heading (closed loop), else 0.
    condition : list[str]
        Condition name per trial.
    dt : float | None
        The step the arrays were built at, s (:func:`stack_stimuli` sets it; ``Simulator.run``
        refuses a stimulus built at another step, whose time it would stretch).
    """

    gx: np.ndarray
    gy: np.ndarray
    rot: np.ndarray
    lum: np.ndarray
    gain: np.ndarray
    closed: np.ndarray
    condition: list
    dt: float | None = None

    @property
    def shape(self):
        return self.gx.shape

    def features(self) -> np.ndarray:
        """Covariates ``(B, T, 5)``: gx, gy, rot, lum, gain (what a forecaster may see)."""
        return np.stack([self.gx, self.gy, self.rot, self.lum, self.gain], -1)


FEATURES = ("grating_x", "grating_y", "rotation", "luminance", "gain")
FEATURE_UNITS = ("mm s-1", "mm s-1", "rad s-1", "1", "1")


def make_stimulus(
    condition: str,
    duration: float,
    dt: float,
    *,
    speed: float = 10.0,
    on: float = 1.5,
    off: float = 1.0,
    onset: float = 0.25,
    seed: int = 0,
) -> dict:
    """One trial's stimulus arrays (each ``(T,)``) for a named condition.

    Parameters
    ----------
    condition
        One of :data:`CONDITIONS`.
    duration, dt
        Trial length and simulation step, s.
    speed
        Grating speed, mm s-1 (turning: rotation of ``speed / 10`` rad s-1).
    on, off
        Motion epochs of ``on`` seconds alternate with stationary epochs of ``off`` s.
    onset
        Time of the first motion epoch, s.
    seed
        Seed of the random parts (flash times, gain levels).
    """
    if not isinstance(condition, str) or condition not in CONDITIONS:
        raise ConfigError(f"Unknown stimulus condition {condition!r}; expected one of {CONDITIONS}.")
    for name, v, ok, want in (
        ("duration", duration, lambda x: x > 0, "> 0 s"),
        ("dt", dt, lambda x: x > 0, "> 0 s"),
        ("speed", speed, lambda x: True, "finite (mm s-1)"),
        ("on", on, lambda x: x > 0, "> 0 s"),
        ("off", off, lambda x: x >= 0, ">= 0 s"),
        ("onset", onset, lambda x: True, "finite (s)"),
    ):
        try:
            good = math.isfinite(v) and ok(v)
        except TypeError:
            good = False
        if not good:
            raise ConfigError(f"make_stimulus({condition!r}): {name}={v!r}; give a number {want}.")
    T = int(round(duration / dt))
    if T < 1:
        raise ConfigError(
            f"make_stimulus({condition!r}): duration={duration} s is shorter than one step "
            f"(dt={dt} s); give a longer duration."
        )
    t = np.arange(T) * dt
    rng = np.random.default_rng(seed)
    phase = (t - onset) % (on + off)
    moving = ((t >= onset) & (phase < on)).astype(float)
    z = np.zeros(T)
    out = dict(gx=z.copy(), gy=z.copy(), rot=z.copy(), lum=np.ones(T), gain=np.ones(T), closed=np.ones(T))
    if condition in ("grating_fwd", "open_loop", "gain_change"):
        out["gx"] = speed * moving
    if condition == "grating_bwd":
        out["gx"] = -speed * moving
    if condition == "grating_left":
        out["gy"] = speed * moving
    if condition == "grating_right":
        out["gy"] = -speed * moving
    if condition == "turning":
        k = np.floor((t - onset) / (on + off)).astype(int)
        sign = np.where(k % 2 == 0, 1.0, -1.0)
        out["rot"] = (speed / 10.0) * moving * sign
    if condition == "open_loop":
        out["gain"] = z.copy()
        out["closed"] = z.copy()
    if condition == "gain_change":
        k = np.floor(np.maximum(t - onset, 0) / (on + off)).astype(int)
        levels = rng.choice([0.5, 1.0, 1.5], size=k.max() + 1)
        out["gain"] = levels[k]
    if condition == "flash":
        lum = np.ones(T)
        n_flash = max(1, int(duration / 1.5))
        for t0 in onset + rng.uniform(0, max(duration - onset - 0.3, 0.01), n_flash):
            lum[(t >= t0) & (t < t0 + 0.2)] = 0.0
        out["lum"] = lum
    if condition == "dark":
        out["lum"] = z.copy()
    return out


def stack_stimuli(specs: list[dict], duration: float, dt: float) -> Stimulus:
    """Build a batched :class:`Stimulus` from a list of ``make_stimulus`` keyword dicts."""
    if isinstance(specs, (str, dict)) or not len(specs):
        raise ConfigError(
            f"stack_stimuli takes a non-empty list of dicts such as [dict(condition='grating_fwd')], "
            f"one per trial; got {specs!r}."
        )
    trials = []
    for i, spec in enumerate(specs):
        if not isinstance(spec, dict) or "condition" not in spec:
            raise ConfigError(
                f"stack_stimuli: trial {i}'s spec {spec!r} is not a dict with a 'condition' "
                f"(e.g. dict(condition='grating_fwd', speed=10.0))."
            )
        try:
            trials.append(make_stimulus(duration=duration, dt=dt, **spec))
        except TypeError as e:  # a misspelt or unknown key
            raise ConfigError(
                f"stack_stimuli: trial {i}'s spec {spec!r}: {e}; its keys are those of "
                "make_stimulus (condition, speed, on, off, onset, seed)."
            ) from None
    st = {k: np.stack([tr[k] for tr in trials]) for k in trials[0]}
    return Stimulus(condition=[s["condition"] for s in specs], dt=float(dt), **st)
