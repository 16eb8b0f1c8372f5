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

from .tasks import BATCH_ELEMENTS, window_index

__all__ = [
    "BASELINES",
    "MeanBaseline",
    "LastValue",
    "StimulusEvoked",
    "NLinear",
    "DLinear",
    "RidgeARX",
    "GRUForecaster",
    "TiDELite",
    "fit_baseline",
    "YARDSTICKS",
    "MODEL_NAMES",
    "model_name",
]


def _ridge(X: np.ndarray, Y: np.ndarray, alpha: float) -> np.ndarray:
    """Ridge solution with an unpenalised intercept column appended to X; returns (d+1, m)."""
    Xa = np.concatenate([X, np.ones((len(X), 1))], 1)
    R = alpha * np.eye(Xa.shape[1])
    R[-1, -1] = 0.0
    return np.linalg.solve(Xa.T @ Xa + R, Xa.T @ Y)


def _ridge_chunks(pairs, alpha: float) -> np.ndarray:
    """:func:`_ridge` over row chunks ``(X_b, Y_b)`` (the normal equations summed chunk by chunk;
    one chunk gives exactly :func:`_ridge`'s numbers)."""
    G = B = None
    for X, Y in pairs:
        Xa = np.concatenate([X, np.ones((len(X), 1))], 1)
        G = Xa.T @ Xa if G is None else G + Xa.T @ Xa
        B = Xa.T @ Y if B is None else B + Xa.T @ Y
    R = alpha * np.eye(G.shape[0])
    R[-1, -1] = 0.0
    return np.linalg.solve(G + R, B)


def _window_chunks(series, stim, context: int, horizon: int, stride: int, max_windows: int, seed: int = 0):
    """The windows :func:`neuro.tasks.make_windows` would cut, as ``(context, target)`` chunks
    of at most :data:`neuro.tasks.BATCH_ELEMENTS` values (never all windows at once)."""
    n, T, N = series.shape
    tr, st = window_index(n, T, context, horizon, stride, 0, max_windows, seed)
    size = max(1, BATCH_ELEMENTS // ((context + horizon) * N))
    for a in range(0, len(tr), size):
        t, s0 = tr[a : a + size, None], st[a : a + size, None]
        yield series[t, s0 + np.arange(context)], series[t, s0 + context + np.arange(horizon)]


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
        def pairs():
            for ctx, tgt in _window_chunks(series, stim, self.context, self.horizon, 2, 2000):
                last = ctx[:, -1:]
                yield (
                    (ctx - last).transpose(0, 2, 1).reshape(-1, self.context),
                    (tgt - last).transpose(0, 2, 1).reshape(-1, self.horizon),
                )

        self.W_ = _ridge_chunks(pairs(), 1e-3)
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
        def pairs():
            for ctx, tgt in _window_chunks(series, stim, self.context, self.horizon, 2, 2000):
                tr, re = self._split(ctx)
                yield (
                    np.concatenate([tr, re], 1).transpose(0, 2, 1).reshape(-1, 2 * self.context),
                    tgt.transpose(0, 2, 1).reshape(-1, self.horizon),
                )

        self.W_ = _ridge_chunks(pairs(), 1e-3)
        return self

    def predict(self, context, stim_context, stim_future):
        tr, re = self._split(context)
        X = np.concatenate([tr, re], 1).transpose(0, 2, 1)
        return _apply(X, self.W_).transpose(0, 2, 1)


#: above this many units a baseline reads (and the torch ones forecast) the population's first
#: ``LOW_RANK`` principal coordinates instead of every unit
DENSE_MAX, LOW_RANK = 2048, 64


def principal_axes(series: np.ndarray, rank: int) -> np.ndarray:
    """The population's first ``rank`` principal axes over every step of ``series`` (trials,
    time, units), as an ``(units, rank)`` float32 matrix (randomized SVD of the centred steps)."""
    from sklearn.utils.extmath import randomized_svd

    flat = series.reshape(-1, series.shape[-1])
    mean = flat.mean(0, dtype=np.float64).astype(np.float32)
    r = min(rank, flat.shape[1], len(flat))
    _, _, vt = randomized_svd(flat - mean, r, random_state=0)
    return np.ascontiguousarray(vt.T, np.float32)


class RidgeARX(_Base):
    """VAR(p) with stimulus input, ``x_{t+1} = sum_k A_k x_{t-k} + B s_{t+1} + c``, rolled out.

    Above ``dense_max`` units a dense ``A_k`` (``N x N`` each) is out of reach (a 10,000-unit
    VAR(2) has 2 x 10^8 weights and a 20,000-column normal matrix), so the VAR becomes
    low-rank: unit ``i`` is driven by its own ``p`` lags and by the lags of the population's
    first ``rank`` principal components (of the training series) and the stimulus,
    ``x_{t+1,i} = sum_k a_ik x_{t-k,i} + sum_k b_ik . P^T x_{t-k} + B_i s_{t+1} + c_i``, one
    ridge per unit (the search's ``lowrank`` recurrence). ``lowrank_`` says which was fitted."""

    name = "ridge_arx"
    order = 2
    alpha = 1.0
    dense_max = DENSE_MAX
    rank = LOW_RANK

    def fit(self, series, stim, meta=None):
        p = min(self.order, self.context)
        self.p_ = p
        self.lowrank_ = series.shape[-1] > self.dense_max
        if self.lowrank_:
            return self._fit_lowrank(series, stim)
        X = np.concatenate([series[:, p - 1 - k : series.shape[1] - 1 - k] for k in range(p)] + [stim[:, p:]], -1)
        Y = series[:, p:]
        self.W_ = _ridge(X.reshape(-1, X.shape[-1]), Y.reshape(-1, Y.shape[-1]), self.alpha)
        return self

    def _shared(self, lags, u):
        """Inputs every unit shares: the principal components' lags, the stimulus, 1."""
        return np.concatenate([lag @ self.P_ for lag in lags] + [u, np.ones((len(u), 1), u.dtype)], -1)

    def _fit_lowrank(self, series, stim):
        n, T, N = series.shape
        p = self.p_
        self.P_ = principal_axes(series, self.rank)  # (N, r)
        lags = [series[:, p - 1 - k : T - 1 - k].reshape(-1, N) for k in range(p)]
        Y = series[:, p:].reshape(-1, N)
        F = self._shared(lags, stim[:, p:].reshape(-1, stim.shape[-1])).astype(np.float64)
        dF, d = F.shape[1], p + F.shape[1]
        R = self.alpha * np.eye(d)
        R[-1, -1] = 0.0  # the intercept (last shared column) is free
        FF, FY = F.T @ F, F.T @ Y  # (dF, dF), (dF, N)
        aF = np.stack([lag.T @ F for lag in lags], 1)  # (N, p, dF)
        self.W_own_ = np.empty((p, N))
        self.W_shared_ = np.empty((dF, N))
        step = max(1, BATCH_ELEMENTS // (4 * len(Y)))
        for a in range(0, N, step):
            b = min(a + step, N)
            L = [lag[:, a:b].astype(np.float64) for lag in lags]
            y = Y[:, a:b].astype(np.float64)
            G = np.empty((b - a, d, d))
            G[:, p:, p:] = FF
            G[:, :p, p:] = aF[a:b]
            G[:, p:, :p] = aF[a:b].transpose(0, 2, 1)
            rhs = np.empty((b - a, d))
            rhs[:, p:] = FY[:, a:b].T
            for k in range(p):
                rhs[:, k] = (L[k] * y).sum(0)
                for m in range(p):
                    G[:, k, m] = (L[k] * L[m]).sum(0)
            w = np.linalg.solve(G + R, rhs[..., None])[..., 0]  # (units, d)
            self.W_own_[:, a:b] = w[:, :p].T
            self.W_shared_[:, a:b] = w[:, p:].T
        self.W_own_ = self.W_own_.astype(np.float32)
        self.W_shared_ = self.W_shared_.astype(np.float32)
        return self

    def _step(self, hist, u):
        """One step ahead from ``hist`` (lags, newest last) and the stimulus ``u``."""
        lags = [hist[-1 - k] for k in range(self.p_)]
        if not self.lowrank_:
            return _apply(np.concatenate(lags + [u], -1), self.W_)
        own = sum(self.W_own_[k] * lags[k] for k in range(self.p_))
        return own + self._shared(lags, u.astype(np.float32)) @ self.W_shared_

    def predict(self, context, stim_context, stim_future):
        hist = list(context[:, -self.p_ :].transpose(1, 0, 2))
        out = []
        for h in range(stim_future.shape[1]):
            y = np.clip(self._step(hist, stim_future[:, h]), -20, 20)
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
    dense_max = DENSE_MAX
    rank = LOW_RANK
    lowrank_ = False
    P_ = None

    def _fit_axes(self, series) -> int:
        """Above ``dense_max`` units, the population's first ``rank`` principal axes (``P_``,
        units x rank) through which the model reads and forecasts; the width it then works in."""
        import torch

        self.lowrank_ = series.shape[-1] > self.dense_max
        self.P_ = torch.as_tensor(principal_axes(series, self.rank), device=self.device) if self.lowrank_ else None
        return self.P_.shape[1] if self.lowrank_ else series.shape[-1]

    def _read(self, x):
        """The activity as the model reads it: every unit, or the principal axes' coordinates."""
        return x @ self.P_ if self.lowrank_ else x

    def _unread(self, y):
        """Back from the width the model works in to every unit."""
        return y @ self.P_.T if self.lowrank_ else y

    def _windows(self, series, stim):
        """``(trial, start)`` of the training windows (gathered batch by batch)."""
        return window_index(series.shape[0], series.shape[1], self.context, self.horizon, 2, 0, 4000, self.seed)


class GRUForecaster(_Torch):
    """GRU over (activity, stimulus) trained on one-step prediction (teacher forcing) over
    64-step chunks of the training trials; forecasts by rolling out its own predictions.

    Above ``dense_max`` units it reads the activity through the population's first ``rank``
    principal axes and predicts each step's change in their coordinates, mapped back to every
    unit (as TiDE-lite): dense input and output layers over 10,000 units learn little in the
    steps it is given (val MAE 1.86 against 0.46 for the mean). ``lowrank_`` says which."""

    name = "gru"
    steps = 150
    hidden = 32

    def fit(self, series, stim, meta=None):
        with _one_thread():
            return self._fit(series, stim)

    def _fit(self, series, stim):
        import torch

        torch.manual_seed(self.seed)
        K = stim.shape[-1]
        width = self._fit_axes(series)
        self.net_ = torch.nn.GRU(width + K, self.hidden, batch_first=True).to(self.device)
        self.out_ = torch.nn.Linear(self.hidden, width).to(self.device)
        params = list(self.net_.parameters()) + list(self.out_.parameters())
        opt = torch.optim.Adam(params, lr=self.lr)
        L = min(64, series.shape[1] - 1)
        # the windows make_windows would cut (L + 1 steps), gathered batch by batch from the
        # series (2,000 windows of 10,000 units would be 5 GB as copies)
        tr, st = window_index(series.shape[0], series.shape[1], L, 1, 8, 0, 2000, self.seed)
        xs_all = torch.as_tensor(series, device=self.device)
        ss_all = torch.as_tensor(stim, device=self.device)
        tr_t, st_t = torch.as_tensor(tr, device=self.device), torch.as_tensor(st, device=self.device)
        span = torch.arange(L + 1, device=self.device)
        rng = np.random.default_rng(self.seed)
        for _ in range(self.steps):
            b = torch.as_tensor(rng.choice(len(tr), min(32, len(tr)), replace=False), device=self.device)
            rows, cols = tr_t[b][:, None], st_t[b][:, None] + span
            x, s = xs_all[rows, cols], ss_all[rows, cols]
            h, _ = self.net_(torch.cat([self._read(x[:, :-1]), s[:, 1:]], -1))  # input x_t and s_{t+1}
            pred = x[:, :-1] + self._change(h)
            loss = (pred - x[:, 1:]).abs().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return self

    def _change(self, h):
        """The predicted change of every unit from the GRU's state."""
        return self._unread(self.out_(h))

    def _forward(self, ctx, sc, sf):
        import torch

        s_next = torch.cat([sc[:, 1:], sf[:, :1]], 1)
        _, h = self.net_(torch.cat([self._read(ctx), s_next], -1))
        last = ctx[:, -1]
        outs = []
        for k in range(sf.shape[1]):
            y = last + self._change(h[-1])
            outs.append(y)
            if k + 1 < sf.shape[1]:
                _, h = self.net_(torch.cat([self._read(y), sf[:, k + 1]], -1)[:, None], h)
            last = y
        return torch.stack(outs, 1)

    def predict(self, context, stim_context, stim_future):
        import torch

        with torch.no_grad():
            return (
                self._forward(
                    torch.as_tensor(context, dtype=torch.float32, device=self.device),
                    torch.as_tensor(stim_context, dtype=torch.float32, device=self.device),
                    torch.as_tensor(stim_future, dtype=torch.float32, device=self.device),
                )
                .cpu()
                .numpy()
            )


class TiDELite(_Torch):
    """Dense encoder-decoder: [context, future covariates] -> MLP -> horizon (plus a linear skip).

    Above ``dense_max`` units the MLP reads the context through the population's first
    ``rank`` principal axes and forecasts their ``rank`` coordinates, mapped back to every unit
    (plus a bias per unit): a dense first layer over ``context x units`` inputs (2.56 M at
    context 256 and 10,000 units, 328 M weights) is out of memory and its fit diverges.
    ``lowrank_`` says which was fitted."""

    name = "tide"
    steps = 200

    def fit(self, series, stim, meta=None):
        with _one_thread():
            return self._fit(series, stim)

    def _fit(self, series, stim):
        import torch

        torch.manual_seed(self.seed)
        N, K = series.shape[-1], stim.shape[-1]
        width = self._fit_axes(series)
        d_in = self.context * width + self.horizon * K
        self.enc_ = torch.nn.Sequential(
            torch.nn.Linear(d_in, self.hidden * 2),
            torch.nn.ReLU(),
            torch.nn.Linear(self.hidden * 2, self.horizon * width),
        ).to(self.device)
        self.skip_ = torch.nn.Linear(self.context, self.horizon).to(self.device)
        self.bias_ = torch.nn.Parameter(torch.zeros(N, device=self.device)) if self.lowrank_ else None
        params = list(self.enc_.parameters()) + list(self.skip_.parameters()) + ([self.bias_] if self.lowrank_ else [])
        opt = torch.optim.Adam(params, lr=self.lr)
        tr, st = self._windows(series, stim)
        C, H = self.context, self.horizon
        rng = np.random.default_rng(self.seed)
        for _ in range(self.steps):
            b = rng.choice(len(tr), min(64, len(tr)), replace=False)
            rows, s0 = tr[b][:, None], st[b][:, None]
            pred = self._forward(
                torch.as_tensor(series[rows, s0 + np.arange(C)], device=self.device),
                torch.as_tensor(stim[rows, s0 + C + np.arange(H)], device=self.device),
            )
            loss = (pred - torch.as_tensor(series[rows, s0 + C + np.arange(H)], device=self.device)).abs().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return self

    def _forward(self, ctx, sf):
        import torch

        n, C, N = ctx.shape
        H = self.horizon
        z = self._read(ctx)
        x = torch.cat([z.reshape(n, -1), sf[:, :H].reshape(n, -1)], -1)
        y = self.enc_(x).reshape(n, H, z.shape[-1])
        if self.lowrank_:
            y = self._unread(y) + self.bias_
        return y + self.skip_(ctx.transpose(1, 2)).transpose(1, 2)

    def predict(self, context, stim_context, stim_future):
        import torch

        with torch.no_grad():
            return (
                self._forward(
                    torch.as_tensor(context, dtype=torch.float32, device=self.device),
                    torch.as_tensor(stim_future, dtype=torch.float32, device=self.device),
                )
                .cpu()
                .numpy()
            )


BASELINES = {
    c.name: c for c in (MeanBaseline, LastValue, StimulusEvoked, NLinear, DLinear, RidgeARX, GRUForecaster, TiDELite)
}


#: the words a reader sees for each forecaster of :data:`BASELINES` (and the discovered picks)
MODEL_NAMES = {
    "mean": "mean of the context",
    "last_value": "persistence (last value)",
    "stimulus_evoked": "stimulus-evoked ridge",
    "nlinear": "NLinear",
    "dlinear": "DLinear",
    "ridge_arx": "ridge ARX",
    "gru": "GRU",
    "tide": "TiDE-lite",
    "discovered (priors)": "discovered program (priors)",
    "discovered (no priors)": "discovered program (no priors)",
}


def model_name(key) -> str:
    """The plain name of a forecaster (:data:`MODEL_NAMES`); a name it does not know, as given."""
    return MODEL_NAMES.get(str(key), str(key))


#: the classical yardsticks a discovered model must match to be called competent
#: (:mod:`neuro.competence`): ZAPBench's naive baselines and the linear forecasters, by baseline name
YARDSTICKS = {
    "last_value": MODEL_NAMES["last_value"],
    "mean": MODEL_NAMES["mean"],
    **{k: f"linear ({MODEL_NAMES[k]})" for k in ("nlinear", "dlinear", "ridge_arx")},
}


def fit_baseline(name: str, task, **kw):
    """Fit the named baseline on a task's training trials."""
    if name not in BASELINES:
        raise ConfigError(f"Unknown baseline {name!r}; expected one of {sorted(BASELINES)}.")
    model = BASELINES[name](context=task.context, horizon=task.horizon, **kw)
    return model.fit(task.train_series, task.train_stim, task.meta)
