"""Physiological read-outs of a recording: tail-beat frequency, left-right phase, wave lag.

All take time series sampled at ``dt`` seconds and work on any signal (true rates, a
model's predicted rates, tail angles), so the same read-outs score the simulator and the
discovered models.
"""

from __future__ import annotations

import numpy as np
from scipy import signal

__all__ = [
    "dominant_frequency",
    "beat_frequency",
    "beat_amplitude",
    "phase_difference",
    "lag_seconds",
    "tail_beat_frequency",
    "bout_onsets",
    "bout_tail_beats",
]


def _detrend(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, float)
    return (x - x.mean(-1, keepdims=True)) * np.hanning(x.shape[-1])


def dominant_frequency(x: np.ndarray, dt: float, fmin: float = 5.0, fmax: float = 150.0, pad: int = 8) -> float:
    """Frequency (Hz) of the largest spectral peak of ``x`` (last axis) between fmin and fmax.

    Zero-padding by ``pad`` refines the peak location below the ``1 / (N dt)`` bin width.
    """
    x = _detrend(np.atleast_2d(x))
    n = x.shape[-1] * pad
    P = (np.abs(np.fft.rfft(x, n=n, axis=-1)) ** 2).sum(0)
    f = np.fft.rfftfreq(n, dt)
    band = (f >= fmin) & (f <= fmax)
    if not band.any() or P[band].max() <= 0:
        return float("nan")
    return float(f[band][np.argmax(P[band])])


def beat_frequency(x: np.ndarray, dt: float, fmin: float = 10.0, fmax: float = 100.0, pad: int = 8) -> float:
    """Beat frequency (Hz) of one window ``x`` (1-D): the largest peak of its periodogram strictly
    inside ``[fmin, fmax]``; NaN when the window has no beat there.

    The periodogram is :func:`scipy.signal.periodogram` (Hann taper, the mean removed, zero-padded
    ``pad``-fold to place the peak below the ``1 / (N dt)`` bin width). A window whose largest value
    in the band sits on one of its edges (the spectrum still rising or falling there: the beat, if
    any, lies outside the band) or that is flat has no beat in the band: NaN, never the edge.
    """
    x = np.asarray(x, float)
    if x.ndim != 1:
        raise ValueError(f"beat_frequency takes one window (1-D); got shape {x.shape}. Loop over windows.")
    if x.size < 4 or not np.all(np.isfinite(x)) or np.ptp(x) == 0:
        return float("nan")
    f, P = signal.periodogram(x, fs=1.0 / dt, window="hann", nfft=pad * x.size, detrend="constant")
    band = np.flatnonzero((f >= fmin) & (f <= fmax))
    if band.size < 3:
        return float("nan")
    k = int(np.argmax(P[band]))
    if P[band][k] <= 0 or k in (0, band.size - 1):
        return float("nan")
    return float(f[band][k])


def beat_amplitude(x: np.ndarray, dt: float, f0: float) -> float:
    """Amplitude of the beat of one window ``x`` (1-D) at ``f0`` Hz, in the units of ``x``: the
    Hann-tapered Fourier coefficient at ``f0``, ``2 |sum_t w_t (x_t - mean) exp(-2 pi i f0 t dt)| /
    sum_t w_t`` (a sinusoid of amplitude ``A`` at ``f0`` gives ``A``); NaN when ``f0`` is not finite."""
    x = np.asarray(x, float)
    if x.ndim != 1:
        raise ValueError(f"beat_amplitude takes one window (1-D); got shape {x.shape}. Loop over windows.")
    if not np.isfinite(f0):
        return float("nan")
    w = np.hanning(x.size)
    c = np.sum(w * (x - x.mean()) * np.exp(-2j * np.pi * f0 * np.arange(x.size) * dt))
    return float(2 * np.abs(c) / w.sum())


def phase_difference(x: np.ndarray, y: np.ndarray, dt: float, f0: float | None = None) -> float:
    """Phase (cycles, in (-0.5, 0.5]) by which ``x`` leads ``y`` at the frequency ``f0`` (Hz).

    Computed from the cross-spectrum at ``f0`` (the dominant frequency of ``x`` when not
    given): 0.5 is antiphase, 0 synchrony.
    """
    if f0 is None:
        f0 = dominant_frequency(x, dt)
    t = np.arange(np.shape(x)[-1]) * dt
    basis = np.exp(-2j * np.pi * f0 * t)
    X = (_detrend(x) * basis).sum(-1)
    Y = (_detrend(y) * basis).sum(-1)
    ph = np.angle(np.sum(X * np.conj(Y))) / (2 * np.pi)
    return float(ph)


def lag_seconds(x: np.ndarray, y: np.ndarray, dt: float, f0: float | None = None) -> float:
    """Time (s) by which ``x`` leads ``y`` at the dominant frequency (phase / frequency)."""
    if f0 is None:
        f0 = dominant_frequency(x, dt)
    return phase_difference(x, y, dt, f0) / f0


def tail_beat_frequency(tail_angle: np.ndarray, dt: float) -> float:
    """Tail-beat frequency (Hz) of a tail-angle trace (rad) during swimming."""
    return dominant_frequency(tail_angle, dt, fmin=5.0, fmax=150.0)


def bout_onsets(active: np.ndarray) -> np.ndarray:
    """Indices where a bout starts in a boolean series ``active`` (1-D): every step that is
    active after an inactive one, and step 0 when the series starts in a bout."""
    active = np.asarray(active, bool)
    return np.flatnonzero(active & ~np.concatenate([[False], active[:-1]]))


def bout_tail_beats(
    drive: np.ndarray, bend: np.ndarray, dt: float, on: float = 0.3, min_len: float = 0.1, skip: float = 0.02
) -> np.ndarray:
    """Tail-beat frequency (Hz) of every swim bout of free-swimming trials.

    ``drive`` ``(trial, time)`` is the descending drive (a bout is where it exceeds ``on``; it
    is off between bouts), ``bend`` ``(trial, time)`` a bending signal (a joint angle, or the
    left-minus-right muscle activation of a mid-body joint). A bout's frequency is its
    upward zero crossings per second after the first ``skip`` s (the onset); bouts shorter
    than ``min_len`` s are left out. Returns a flat array, one value per bout.
    """
    drive, bend = np.atleast_2d(np.asarray(drive, float)), np.atleast_2d(np.asarray(bend, float))
    if drive.shape != bend.shape:
        raise ValueError(
            f"bout_tail_beats: drive {drive.shape} and bend {bend.shape} need the same (trial, time) shape."
        )
    out = []
    n_skip, n_min = int(round(skip / dt)), int(round(min_len / dt))
    for d, x in zip(drive, bend):
        act = d > on
        for s in bout_onsets(act):
            e = s + int(np.argmax(~act[s:])) if (~act[s:]).any() else len(act)
            if e - s < n_min:
                continue
            m = x[s + n_skip : e] - x[s + n_skip : e].mean()
            out.append(((m[:-1] < 0) & (m[1:] >= 0)).sum() / (len(m) * dt))
    return np.asarray(out, float)
