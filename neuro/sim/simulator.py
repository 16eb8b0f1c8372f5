"""The coupled closed-loop system: eyes -> brain -> spinal CPG -> muscles -> body -> eyes.

:class:`Simulator` holds the true transition function ``state_{t+dt} = step(state_t,
stimulus_t)``, vectorised over a batch of trials (numpy). Per-trial perturbations:
``lesion`` (a ``(B, n_spinal)`` mask that silences populations), ``commissural`` (a ``(B,)``
factor on all commissural weights, 0 = cut), ``drag_scale`` (fluid shift) and
``muscle_scale`` (body shift).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .body import Body, BodyParams
from .circuit import BRAIN_UNITS, Circuit, CircuitParams
from .stimuli import Stimulus

__all__ = ["Simulator", "SimState", "Perturbation"]

_B = {u[0]: i for i, u in enumerate(BRAIN_UNITS)}


@dataclass
class Perturbation:
    """Per-trial changes to the system (all optional; broadcast to the batch).

    Attributes
    ----------
    lesion : np.ndarray | None
        ``(B, n_spinal)`` 0/1 mask: 0 silences a spinal unit.
    commissural : np.ndarray | float
        Factor on commissural (V0d) weights, 0 = cut.
    drag_scale : np.ndarray | float
        Factor on all drag coefficients (fluid viscosity/density shift).
    muscle_scale : np.ndarray | float
        Factor on the muscle gain ``alpha`` (body shift).
    drive : np.ndarray | None
        If given, ``(B,)`` clamps the descending drive (bout gate forced on): used to
        measure frequency vs drive in isolation.
    """

    lesion: np.ndarray | None = None
    commissural: np.ndarray | float = 1.0
    drag_scale: np.ndarray | float = 1.0
    muscle_scale: np.ndarray | float = 1.0
    drive: np.ndarray | None = None


@dataclass
class SimState:
    """Full state of a batch of fish (shapes with ``B`` = trials)."""

    brain: np.ndarray          # (B, 12) brain unit rates
    r_hist: np.ndarray         # (H, B, n_spinal) ring buffer of spinal rates, newest at [ptr]
    ptr: int
    a: np.ndarray              # (B, n_spinal) adaptation
    bout_acc: np.ndarray       # (B,) bout accumulator
    bout_left: np.ndarray      # (B,) time left in current bout, s
    refractory: np.ndarray     # (B,) refractory time left, s
    bout_len: np.ndarray       # (B,) duration of the current bout, s
    lum_prev: np.ndarray       # (B,)
    flash_tr: np.ndarray       # (B,) low-passed luminance-change transient
    muscle: np.ndarray         # (B, 2, n_joints) muscle activations left/right
    q: np.ndarray
    qd: np.ndarray
    heading0: np.ndarray       # (B,) initial heading (open loop projection)
    t: float = 0.0
    extras: dict = field(default_factory=dict)

    @property
    def r(self) -> np.ndarray:
        return self.r_hist[self.ptr]


class Simulator:
    """The simulated larva. ``step`` is the ground-truth transition function.

    Parameters
    ----------
    circuit, body
        Parameters of the nervous system and the body.
    seed
        Seed of the process noise.
    """

    tau_muscle = 0.005

    def __init__(self, circuit: CircuitParams | None = None, body: BodyParams | None = None, seed: int = 0):
        self.circuit = Circuit(circuit)
        self.body = Body(body)
        self.p = self.circuit.p
        self.dt = self.p.dt
        self.rng = np.random.default_rng(seed)
        nj = self.body.n_joints
        n = self.p.n_seg
        mn0 = 3 * n * 2  # MN block start: type 3 -> (3*2+side)*n
        # joint j takes the mean MN rate of the segments that fall on it
        seg_of_joint = np.array_split(np.arange(n), nj)
        self.mn_map = np.zeros((2, nj, self.circuit.n_spinal))
        for s in range(2):
            for j, segs in enumerate(seg_of_joint):
                self.mn_map[s, j, mn0 + s * n + segs] = 1.0 / len(segs)
        import scipy.sparse as sp

        # stacked over delays: I = W_cat @ [r(t - d_0); r(t - d_1); ...]
        self._Wi = sp.csr_matrix(np.concatenate(list(self.circuit.W_ipsi), axis=1))
        self._Wc = sp.csr_matrix(np.concatenate(list(self.circuit.W_contra), axis=1))
        self._Wall = sp.csr_matrix(self._Wi + self._Wc)

    # ------------------------------------------------------------------ state
    def initial_state(self, batch: int, heading: float | np.ndarray = 0.0) -> SimState:
        ns = self.circuit.n_spinal
        H = self.circuit.max_delay + 1
        q, qd = self.body.initial_state(batch, heading)
        r0 = self.rng.uniform(0, 0.05, size=(batch, ns))
        return SimState(
            brain=np.zeros((batch, len(BRAIN_UNITS))),
            r_hist=np.repeat(r0[None], H, 0), ptr=0,
            a=np.zeros((batch, ns)),
            bout_acc=self.rng.uniform(0, 0.8, batch), bout_left=np.zeros(batch),
            refractory=np.zeros(batch), bout_len=np.zeros(batch),
            lum_prev=np.ones(batch), flash_tr=np.zeros(batch),
            muscle=np.zeros((batch, 2, self.body.n_joints)), q=q, qd=qd,
            heading0=np.broadcast_to(np.asarray(heading, float), (batch,)).copy(),
        )

    # ------------------------------------------------------------------ visual
    def optic_flow(self, st: SimState, stim: dict) -> tuple[np.ndarray, np.ndarray]:
        """Forward flow and turning flow (mm s-1 equivalent) seen by the fish."""
        heading = st.q[:, 2]
        h = np.where(stim["closed"] > 0, heading, st.heading0)
        ex, ey = np.cos(h), np.sin(h)
        g_fwd = stim["gx"] * ex + stim["gy"] * ey
        g_side = -stim["gx"] * ey + stim["gy"] * ex
        vx, vy = self.body.com_velocities(st.q, st.qd)
        m = self.body.m / self.body.m_tot
        vcx, vcy = (m * vx).sum(-1), (m * vy).sum(-1)
        v_fwd = vcx * np.cos(heading) + vcy * np.sin(heading)
        v_side = -vcx * np.sin(heading) + vcy * np.cos(heading)
        yaw = st.qd[:, 2]
        gain = stim["gain"] * stim["closed"]
        fwd = (g_fwd - gain * v_fwd) * stim["lum"]
        turn = (g_side - gain * v_side + self.p.rot_weight * (stim["rot"] - gain * yaw)) * stim["lum"]
        return fwd, turn

    # ------------------------------------------------------------------ step
    def step(self, st: SimState, stim: dict, pert: Perturbation | None = None) -> SimState:
        """Advance every trial by ``dt``. ``stim`` holds ``(B,)`` arrays gx, gy, rot, lum, gain, closed."""
        p, dt = self.p, self.dt
        pert = pert or Perturbation()
        B = st.q.shape[0]
        v0 = 10.0
        fwd, turn = self.optic_flow(st, stim)
        b = st.brain
        target = np.zeros_like(b)
        target[:, _B["DS_fwd_L"]] = np.maximum(fwd + 0.5 * turn, 0) / v0
        target[:, _B["DS_fwd_R"]] = np.maximum(fwd - 0.5 * turn, 0) / v0
        target[:, _B["DS_turn_L"]] = np.maximum(turn, 0) / v0
        target[:, _B["DS_turn_R"]] = np.maximum(-turn, 0) / v0
        b = b.copy()
        ds = slice(0, 4)
        b[:, ds] += dt / p.tau_visual * (target[:, ds] - b[:, ds])
        bi = np.array([_B["BIN_fwd"], _B["BIN_turn_L"], _B["BIN_turn_R"]])
        tb = np.stack([0.5 * (b[:, 0] + b[:, 1]), b[:, 2], b[:, 3]], -1)
        b[:, bi] += dt / p.tau_integrator * (tb - b[:, bi])
        hi = np.array([_B["nMLF_L"], _B["nMLF_R"], _B["RS_L"], _B["RS_R"]])
        th = np.stack([b[:, 4], b[:, 4], b[:, 5], b[:, 6]], -1)
        b[:, hi] += dt / p.tau_hindbrain * (th - b[:, hi])
        # bout generator: a noisy accumulator with refractoriness gates the descending drive
        lum = stim["lum"]
        dl = np.abs(lum - st.lum_prev) / dt
        flash_tr = st.flash_tr + dt / 0.05 * (np.minimum(dl, 50.0) - st.flash_tr)
        rate = (p.bout_rate_spont + p.bout_rate_gain * v0 * b[:, 4]
                + p.bout_turn_gain * v0 / p.rot_weight * (b[:, 5] + b[:, 6]) + p.flash_gain * flash_tr)
        in_bout = st.bout_left > 0
        acc = st.bout_acc + np.where(in_bout | (st.refractory > 0), 0.0,
                                     rate * dt + 0.3 * np.sqrt(dt) * self.rng.standard_normal(B))
        level = np.clip(b[:, 4] + 0.5 * (b[:, 5] + b[:, 6]), 0, 2) / 2
        start = (acc >= 1.0) & ~in_bout
        bout_len = np.where(start, p.bout_duration_min + (p.bout_duration_max - p.bout_duration_min)
                            * np.clip(0.3 + 0.7 * level + 0.1 * self.rng.standard_normal(B), 0, 1), st.bout_len)
        bout_left = np.where(start, bout_len, np.maximum(st.bout_left - dt, 0))
        refractory = np.where(start, bout_len + p.bout_refractory, np.maximum(st.refractory - dt, 0))
        acc = np.where(start, self.rng.uniform(0, 0.2, B), acc)
        gate_target = (bout_left > 0).astype(float)
        if pert.drive is not None:
            gate_target = np.ones(B)
        b[:, _B["BOUT"]] += dt / 0.004 * (gate_target - b[:, _B["BOUT"]])
        gate = b[:, _B["BOUT"]]
        if pert.drive is not None:
            dL = dR = np.broadcast_to(np.asarray(pert.drive, float), (B,))
        else:
            base = p.drive_base + p.drive_gain * v0 * 0.5 * (b[:, 7] + b[:, 8])
            dL = np.clip(base + p.turn_gain * v0 / p.rot_weight * (b[:, 9] - b[:, 10]), 0, p.drive_max)
            dR = np.clip(base + p.turn_gain * v0 / p.rot_weight * (b[:, 10] - b[:, 9]), 0, p.drive_max)
        dL, dR = dL * gate, dR * gate
        # spinal CPG with delays
        c = self.circuit
        side = c.unit_side
        drive = np.where(side[None] == 0, dL[:, None], dR[:, None]) * c.drive_weight[None]
        H = st.r_hist.shape[0]
        comm = np.broadcast_to(np.asarray(pert.commissural, float), (B,))[:, None]
        r_stack = np.concatenate([st.r_hist[(st.ptr - d) % H] * (1.0 if pert.lesion is None else pert.lesion)
                                  for d in c.delay_steps], axis=1).T
        if np.all(comm == 1.0):
            inp = drive + (self._Wall @ r_stack).T
        else:
            inp = drive + (self._Wi @ r_stack).T + comm * (self._Wc @ r_stack).T
        inp += p.noise * self.rng.standard_normal(inp.shape)
        r = st.r
        F = np.tanh(np.maximum(inp - st.a - p.theta, 0.0))
        r_new = r + dt / p.tau_r * (F - r)
        if pert.lesion is not None:
            r_new = r_new * pert.lesion
        tau_a = p.tau_a / (1.0 + p.speed_gain * drive / np.maximum(c.drive_weight, 1e-9))
        a_new = st.a + dt / tau_a * (c.adapt_gain * r_new - st.a)
        ptr = (st.ptr + 1) % H
        r_hist = st.r_hist
        r_hist[ptr] = r_new
        # muscles and body
        mn = np.einsum("sjn,bn->bsj", self.mn_map, r_new)
        muscle = st.muscle + dt / self.tau_muscle * (mn - st.muscle)
        drag = self.body.p.drag_scale * (np.asarray(pert.drag_scale, float).reshape(-1, 1)
                                         if np.ndim(pert.drag_scale) else pert.drag_scale)
        alpha = (np.asarray(pert.muscle_scale, float).reshape(-1, 1)
                 if np.ndim(pert.muscle_scale) else pert.muscle_scale)
        q, qd = st.q, st.qd
        nsub = self.body.p.substeps
        for _ in range(nsub):
            q, qd = self.body.step(q, qd, muscle[:, 0], muscle[:, 1], dt / nsub, drag_scale=drag,
                                   alpha_scale=alpha, integrator="rk4")
        return SimState(brain=b, r_hist=r_hist, ptr=ptr, a=a_new, bout_acc=acc, bout_left=bout_left,
                        refractory=refractory, bout_len=bout_len, lum_prev=lum, flash_tr=flash_tr,
                        muscle=muscle, q=q, qd=qd, heading0=st.heading0, t=st.t + dt,
                        extras={"flow_fwd": fwd, "flow_turn": turn, "drive_L": dL, "drive_R": dR,
                                "bout_start": start})

    def run(self, stim: Stimulus, pert: Perturbation | None = None, record_every: int = 10,
            state: SimState | None = None, heading: float = 0.0):
        """Simulate a batched stimulus; returns a dict of recorded arrays ``(B, T_rec, ...)``.

        Recorded every ``record_every`` steps: ``rates`` (brain + spinal), ``muscle``,
        ``q``/``qd`` (body), ``tail_angle`` (rad, positive = tail bent to the fish's right,
        i.e. head-link angle minus tail-link angle), ``speed`` (forward COM speed, mm s-1),
        ``flow`` (forward, turn), ``drive``; ``bout_start`` is recorded at every step and
        pooled per record interval.
        """
        B, T = stim.shape
        if state is None:
            state = self.initial_state(B, heading)
        st = state
        n_rec = T // record_every
        nb, ns = self.circuit.n_brain, self.circuit.n_spinal
        out = {
            "rates": np.zeros((B, n_rec, nb + ns), np.float32),
            "muscle": np.zeros((B, n_rec, 2, self.body.n_joints), np.float32),
            "q": np.zeros((B, n_rec, self.body.N + 2)),
            "qd": np.zeros((B, n_rec, self.body.N + 2)),
            "flow": np.zeros((B, n_rec, 2), np.float32),
            "drive": np.zeros((B, n_rec, 2), np.float32),
            "bout_start": np.zeros((B, n_rec), bool),
        }
        keys = ("gx", "gy", "rot", "lum", "gain", "closed")
        arr = {k: getattr(stim, k) for k in keys}
        pending = np.zeros(B, bool)
        for i in range(n_rec * record_every):
            st = self.step(st, {k: arr[k][:, i] for k in keys}, pert)
            pending |= st.extras["bout_start"]
            if (i + 1) % record_every == 0:
                j = (i + 1) // record_every - 1
                out["rates"][:, j, :nb] = st.brain
                out["rates"][:, j, nb:] = st.r
                out["muscle"][:, j] = st.muscle
                out["q"][:, j] = st.q
                out["qd"][:, j] = st.qd
                out["flow"][:, j, 0] = st.extras["flow_fwd"]
                out["flow"][:, j, 1] = st.extras["flow_turn"]
                out["drive"][:, j, 0] = st.extras["drive_L"]
                out["drive"][:, j, 1] = st.extras["drive_R"]
                out["bout_start"][:, j] = pending
                pending[:] = False
        q, qd = out["q"], out["qd"]
        out["tail_angle"] = q[..., 2] - q[..., -1]
        out["heading"] = q[..., 2]
        Bq = q.reshape(-1, q.shape[-1])
        vx, vy = self.body.com_velocities(Bq, qd.reshape(-1, qd.shape[-1]))
        m = self.body.m / self.body.m_tot
        vcx = (m * vx).sum(-1).reshape(B, n_rec)
        vcy = (m * vy).sum(-1).reshape(B, n_rec)
        out["speed"] = vcx * np.cos(out["heading"]) + vcy * np.sin(out["heading"])
        out["dt_rec"] = self.dt * record_every
        out["state"] = st
        return out
