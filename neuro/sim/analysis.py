"""Physiological read-outs of a recording: tail-beat frequency, left-right phase, wave lag.

All take time series sampled at ``dt`` seconds and work on any signal (true rates, a
model's predicted rates, tail angles), so the same read-outs score the simulator and the
discovered models.
"""

from __future__ import annotations

import numpy as np

__all__ = ["dominant_frequency", "phase_difference", "lag_seconds", "tail_beat_frequency"]


def _detrend(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, float)
    return (x - x.mean(-1, keepdims=True)) * np.hanning(x.shape[-1])


def dominant_frequency(x: np.ndarray, dt: float, fmin: float = 5.0, fmax: float = 150.0,
                       pad: int = 8) -> float:
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
