"""Forecasting baselines on the task API: ``fit(series, stim, meta) -> self`` and
``predict(context, stim_context, stim_future) -> (n, H, N)``.

Mean over context, last value, stimulus-evoked (ridge on lagged stimulus), NLinear and
DLinear (Zeng et al. 2023, channel-independent linear maps over the context), ridge ARX
(a VAR with stimulus input, rolled out), a GRU and TiDE-lite (dense encoder-decoder with
future covariates, Das et al. 2023). All are small; torch models train for a fixed number
of steps on one thread, on ``device`` (``cpu`` by default; ``scimech neuro study --device``).

torch is imported inside the torch models' methods, deliberately: it takes seconds to import
and only GRU and TiDE-lite use it (the sandbox, the simulator and the other baselines do not).
"""

from __future__ import annotations

import numpy as np

from scimech.errors import ConfigError

from .tasks import make_windows

__all__ = ["BASELINES", "MeanBaseline", "LastValue", "StimulusEvoked", "NLinear", "DLinear", "RidgeARX",
           "GRUForecaster", "TiDELite", "fit_baseline"]


def _ridge(X: np.ndarray, Y: np.ndarray, alpha: float) -> np.ndarray:
    """Ridge solution with an unpenalised intercept column appended to X; returns (d+1, m)."""
    Xa = np.concatenate([X, np.ones((len(X), 1))], 1)
    R = alpha * np.eye(Xa.shape[1])
    R[-1, -1] = 0.0
    return np.linalg.solve(Xa.T @ Xa + R, Xa.T @ Y)


def _apply(X, W):
    return X @ W[:-1] + W[-1]


class _Base:
    horizon: int = 32
    context: int = 4

    def __init__(self, context: int = 4, horizon: int = 32, **kw):
        self.context, self.horizon = context, horizon
        for k, v in kw.items():
            setattr(self, k, v)

    def fit(self, series, stim, meta=None):
        return self


class MeanBaseline(_Base):
    """Predicts the mean of the context for every future step."""

    name = "mean"

    def predict(self, context, stim_context, stim_future):
        H = stim_future.shape[1]
        return np.repeat(context.mean(1, keepdims=True), H, 1)


class LastValue(_Base):
    """Predicts the last context value (persistence)."""

    name = "last_value"

    def predict(self, context, stim_context, stim_future):
        return np.repeat(context[:, -1:], stim_future.shape[1], 1)


class StimulusEvoked(_Base):
    """Activity as a ridge function of the stimulus over the last ``lags`` steps only."""

    name = "stimulus_evoked"
    lags = 40
    alpha = 10.0

    def _feats(self, S):
        n, T, K = S.shape
        Sp = np.concatenate([np.zeros((n, self.lags, K), S.dtype), S], 1)
        idx = np.arange(0, self.lags, 4)
        return np.concatenate([Sp[:, self.lags - d : self.lags - d + T] for d in idx], -1)

    def fit(self, series, stim, meta=None):
        F = self._feats(stim)
        self.W_ = _ridge(F.reshape(-1, F.shape[-1]), series.reshape(-1, series.shape[-1]), self.alpha)
        return self

    def predict(self, context, stim_context, stim_future):
        S = np.concatenate([stim_context, stim_future], 1)
        F = self._feats(S)[:, stim_context.shape[1] :]
        return _apply(F, self.W_)


class NLinear(_Base):
    """Subtract the last value, one linear map context -> horizon shared by all neurons."""

    name = "nlinear"

    def fit(self, series, stim, meta=None):
        w = make_windows(series, stim, self.context, self.horizon, stride=2, max_windows=2000)
        last = w.context[:, -1:]
        X = (w.context - last).transpose(0, 2, 1).reshape(-1, self.context)
        Y = (w.target - last).transpose(0, 2, 1).reshape(-1, self.horizon)
        self.W_ = _ridge(X, Y, 1e-3)
        return self

    def predict(self, context, stim_context, stim_future):
        last = context[:, -1:]
        X = (context - last).transpose(0, 2, 1)
        return _apply(X, self.W_).transpose(0, 2, 1) + last


class DLinear(_Base):
    """Moving-average trend + remainder, each mapped linearly context -> horizon."""

    name = "dlinear"

    def _split(self, c):
        k = max(1, min(self.context // 4 * 2 + 1, 25))
        pad = np.concatenate([np.repeat(c[:, :1], k // 2, 1), c, np.repeat(c[:, -1:], k // 2, 1)], 1)
        trend = np.stack([pad[:, i : i + k].mean(1) for i in range(c.shape[1])], 1)
        return trend, c - trend

    def fit(self, series, stim, meta=None):
        w = make_windows(series, stim, self.context, self.horizon, stride=2, max_windows=2000)
        tr, re = self._split(w.context)
        X = np.concatenate([tr, re], 1).transpose(0, 2, 1).reshape(-1, 2 * self.context)
        Y = w.target.transpose(0, 2, 1).reshape(-1, self.horizon)
        self.W_ = _ridge(X, Y, 1e-3)
        return self

    def predict(self, context, stim_context, stim_future):
        tr, re = self._split(context)
        X = np.concatenate([tr, re], 1).transpose(0, 2, 1)
        return _apply(X, self.W_).transpose(0, 2, 1)


class RidgeARX(_Base):
    """VAR(p) with stimulus input, ``x_{t+1} = sum_k A_k x_{t-k} + B s_{t+1} + c``, rolled out."""

    name = "ridge_arx"
    order = 2
    alpha = 1.0

    def fit(self, series, stim, meta=None):
        p = min(self.order, self.context)
        self.p_ = p
        X = np.concatenate([series[:, p - 1 - k : series.shape[1] - 1 - k] for k in range(p)]
                           + [stim[:, p:]], -1)
        Y = series[:, p:]
        self.W_ = _ridge(X.reshape(-1, X.shape[-1]), Y.reshape(-1, Y.shape[-1]), self.alpha)
        return self

    def predict(self, context, stim_context, stim_future):
        hist = list(context[:, -self.p_ :].transpose(1, 0, 2))
        out = []
        for h in range(stim_future.shape[1]):
            x = np.concatenate([hist[-1 - k] for k in range(self.p_)] + [stim_future[:, h]], -1)
            y = np.clip(_apply(x, self.W_), -20, 20)
            out.append(y)
            hist.append(y)
        return np.stack(out, 1)


class _one_thread:
    """Run torch on one thread inside (2 shared cores: more threads only oversubscribe)."""

    def __enter__(self):
        import torch

        self.n = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self.n)


class _Torch(_Base):
    """A torch model: trained and run on ``device`` (``"cpu"`` by default; results on the CPU do
    not depend on it being given)."""

    steps = 300
    hidden = 64
    lr = 3e-3
    seed = 0
    device = "cpu"

    def _windows(self, series, stim):
        return make_windows(series, stim, self.context, self.horizon, stride=2, max_windows=4000, seed=self.seed)


class GRUForecaster(_Torch):
    """GRU over (activity, stimulus) trained on one-step prediction (teacher forcing) over
    64-step chunks of the training trials; forecasts by rolling out its own predictions."""

    name = "gru"
    steps = 150
    hidden = 32

    def fit(self, series, stim, meta=None):
        with _one_thread():
            return self._fit(series, stim)

    def _fit(self, series, stim):
        import torch

        torch.manual_seed(self.seed)
        N, K = series.shape[-1], stim.shape[-1]
        self.net_ = torch.nn.GRU(N + K, self.hidden, batch_first=True).to(self.device)
        self.out_ = torch.nn.Linear(self.hidden, N).to(self.device)
        params = list(self.net_.parameters()) + list(self.out_.parameters())
        opt = torch.optim.Adam(params, lr=self.lr)
        L = min(64, series.shape[1] - 1)
        w = make_windows(series, stim, L, 1, stride=8, max_windows=2000, seed=self.seed)
        xs = torch.as_tensor(np.concatenate([w.context, w.target], 1), device=self.device)
        ss = torch.as_tensor(np.concatenate([w.stim_context, w.stim_future], 1), device=self.device)
        rng = np.random.default_rng(self.seed)
        for _ in range(self.steps):
            b = torch.as_tensor(rng.choice(len(xs), min(32, len(xs)), replace=False), device=self.device)
            x, s = xs[b], ss[b]
            h, _ = self.net_(torch.cat([x[:, :-1], s[:, 1:]], -1))  # input x_t and s_{t+1}
            pred = x[:, :-1] + self.out_(h)
            loss = (pred - x[:, 1:]).abs().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return self

    def _forward(self, ctx, sc, sf):
        import torch

        s_next = torch.cat([sc[:, 1:], sf[:, :1]], 1)
        _, h = self.net_(torch.cat([ctx, s_next], -1))
        last = ctx[:, -1]
        outs = []
        for k in range(sf.shape[1]):
            y = last + self.out_(h[-1])
            outs.append(y)
            if k + 1 < sf.shape[1]:
                _, h = self.net_(torch.cat([y, sf[:, k + 1]], -1)[:, None], h)
            last = y
        return torch.stack(outs, 1)

    def predict(self, context, stim_context, stim_future):
        import torch

        with torch.no_grad():
            return self._forward(torch.as_tensor(context, dtype=torch.float32, device=self.device),
                                 torch.as_tensor(stim_context, dtype=torch.float32, device=self.device),
                                 torch.as_tensor(stim_future, dtype=torch.float32, device=self.device)).cpu().numpy()


class TiDELite(_Torch):
    """Dense encoder-decoder: [context, future covariates] -> MLP -> horizon (plus a linear skip)."""

    name = "tide"
    steps = 200

    def fit(self, series, stim, meta=None):
        with _one_thread():
            return self._fit(series, stim)

    def _fit(self, series, stim):
        import torch

        torch.manual_seed(self.seed)
        N, K = series.shape[-1], stim.shape[-1]
        d_in = self.context * N + self.horizon * K
        self.enc_ = torch.nn.Sequential(torch.nn.Linear(d_in, self.hidden * 2), torch.nn.ReLU(),
                                        torch.nn.Linear(self.hidden * 2, self.horizon * N)).to(self.device)
        self.skip_ = torch.nn.Linear(self.context, self.horizon).to(self.device)
        params = list(self.enc_.parameters()) + list(self.skip_.parameters())
        opt = torch.optim.Adam(params, lr=self.lr)
        w = self._windows(series, stim)
        rng = np.random.default_rng(self.seed)
        for _ in range(self.steps):
            b = rng.choice(len(w), min(64, len(w)), replace=False)
            pred = self._forward(torch.as_tensor(w.context[b], device=self.device),
                                 torch.as_tensor(w.stim_future[b], device=self.device))
            loss = (pred - torch.as_tensor(w.target[b], device=self.device)).abs().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return self

    def _forward(self, ctx, sf):
        import torch

        n, C, N = ctx.shape
        H = self.horizon
        x = torch.cat([ctx.reshape(n, -1), sf[:, :H].reshape(n, -1)], -1)
        y = self.enc_(x).reshape(n, H, N)
        return y + self.skip_(ctx.transpose(1, 2)).transpose(1, 2)

    def predict(self, context, stim_context, stim_future):
        import torch

        with torch.no_grad():
            return self._forward(torch.as_tensor(context, dtype=torch.float32, device=self.device),
                                 torch.as_tensor(stim_future, dtype=torch.float32, device=self.device)).cpu().numpy()


BASELINES = {c.name: c for c in (MeanBaseline, LastValue, StimulusEvoked, NLinear, DLinear, RidgeARX,
                                 GRUForecaster, TiDELite)}


def fit_baseline(name: str, task, **kw):
    """Fit the named baseline on a task's training trials."""
    if name not in BASELINES:
        raise ConfigError(f"Unknown baseline {name!r}; expected one of {sorted(BASELINES)}.")
    model = BASELINES[name](context=task.context, horizon=task.horizon, **kw)
    return model.fit(task.train_series, task.train_stim, task.meta)
