"""The coupled closed-loop system: eyes -> brain -> spinal CPG -> muscles -> body -> eyes.

:class:`Simulator` holds the true transition function ``state_{t+dt} = step(state_t,
stimulus_t)``, vectorised over a batch of trials (numpy), and runs it compiled (numba) by
default. Per-trial perturbations: ``lesion`` (a ``(B, n_spinal)`` mask that silences
populations), ``module_lesion`` (a ``(B, n_internal)`` mask that silences V2a speed
modules), ``commissural`` (a ``(B,)`` factor on all commissural weights, 0 = cut),
``drag_scale`` (fluid shift) and ``muscle_scale`` (body shift).
"""

from __future__ import annotations

import contextlib
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.special import ndtr

from scimech.errors import ConfigError

from . import compiled, mjbody, noise
from .body import Body, BodyParams
from .circuit import BRAIN_UNITS, Circuit, CircuitParams
from .stimuli import Stimulus

__all__ = ["Simulator", "SimState", "Perturbation"]

_B = {u[0]: i for i, u in enumerate(BRAIN_UNITS)}
#: the optic flow (mm s-1) that drives a direction-selective unit to 1
_V0 = 10.0


def _own(x, dtype=np.float64) -> np.ndarray:
    """A writable C-contiguous copy (one compiled signature for every call)."""
    return np.array(x, dtype, copy=True, order="C")


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


_STIM_KEYS = ("gx", "gy", "rot", "lum", "gain", "closed")
_MEANING = {
    "commissural": "1 = intact commissural V0d weights, 0 = cut",
    "drag_scale": "1 = water, 0 = no drag",
    "muscle_scale": "1 = the muscles' gain, 0 = paralysed",
    "drive": "the clamped descending drive, 0 to drive_max",
}


def _trial_indices(trials) -> np.ndarray:
    """``trials`` as distinct non-negative integer indices (each keys a trial's state and noise)."""
    t = np.asarray(trials).reshape(-1)
    if t.size and (
        not np.issubdtype(t.dtype, np.number)
        or not np.isfinite(t.astype(float)).all()
        or (t != np.round(t)).any()
        or (t < 0).any()
    ):
        raise ConfigError(
            f"trials={np.asarray(trials).tolist()[:8]}; give non-negative integer indices (a trial's "
            "index in the stimulus table keys its initial state and noise)."
        )
    t = t.astype(np.int64)
    if len(np.unique(t)) != len(t):
        raise ConfigError(
            f"trials={t.tolist()[:8]} repeats an index: trials with the same index are the same "
            "fish (same initial state, same noise), not replicates. Give distinct indices."
        )
    return t


@dataclass
class Perturbation:
    """Per-trial changes to the system (all optional; broadcast to the batch).

    Attributes
    ----------
    lesion : np.ndarray | None
        ``(B, n_spinal)`` 0/1 mask: 0 silences a spinal population (see
        ``Circuit.lesion_mask``).
    module_lesion : np.ndarray | None
        ``(B, n_internal)`` 0/1 mask over internal units: 0 silences a V2a speed module (see
        ``Circuit.module_lesion_mask``).
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
    module_lesion: np.ndarray | None = None


@dataclass
class SimState:
    """Full state of a batch of fish (shapes with ``B`` = trials)."""

    brain: np.ndarray  # (B, 12) brain unit rates
    r_hist: np.ndarray  # (H, B, n_spinal) ring of spinal rates per spinal step, newest at [ptr]
    ptr: int
    a: np.ndarray  # (B, n_internal) adaptation
    bout_acc: np.ndarray  # (B,) bout accumulator
    bout_left: np.ndarray  # (B,) time left in current bout, s
    refractory: np.ndarray  # (B,) refractory time left, s
    bout_len: np.ndarray  # (B,) duration of the current bout, s
    lum_prev: np.ndarray  # (B,)
    flash_tr: np.ndarray  # (B,) low-passed luminance-change transient
    muscle: np.ndarray  # (B, 2, n_joints) muscle activations left/right
    q: np.ndarray
    qd: np.ndarray
    heading0: np.ndarray  # (B,) initial heading (open loop projection)
    t: float = 0.0
    extras: dict = field(default_factory=dict)
    r_internal_hist: np.ndarray | None = None  # (H, B, n_internal) ring of internal unit rates
    noise_key: np.ndarray | None = None  # (B,) uint64 keys of the process noise (neuro.sim.noise)
    n_step: int = 0  # steps taken since the state was made (noise counter)
    bout_turn: np.ndarray | None = None  # (B,) left-right drive asymmetry chosen at the bout's start

    @property
    def r(self) -> np.ndarray:
        """Rates of the spinal populations ``(B, n_spinal)`` (V2a: the sum of its modules)."""
        return self.r_hist[self.ptr]

    @property
    def r_internal(self) -> np.ndarray | None:
        """Rates of the internal spinal units ``(B, n_internal)`` (V2a modules resolved)."""
        return None if self.r_internal_hist is None else self.r_internal_hist[self.ptr]


class Simulator:
    """The simulated larva. ``step`` is the ground-truth transition function.

    Parameters
    ----------
    circuit, body
        Parameters of the nervous system and the body.
    seed
        Seed of the initial state and of the process noise.
    threads
        Threads of the compiled path (trials are split among them); default all cores this
        process may use.
    """

    tau_muscle = 0.005

    def __init__(
        self,
        circuit: CircuitParams | None = None,
        body: BodyParams | None = None,
        seed: int = 0,
        threads: int | None = None,
        physics: str = "mujoco",
    ):
        if threads is not None and int(threads) < 1:
            raise ConfigError(f"threads={threads}; give a positive number of threads (or None for all cores).")
        if physics not in ("mujoco", "chain"):
            raise ConfigError(
                f"physics={physics!r}; expected 'mujoco' (the body on MuJoCo with its fluid model) or "
                "'chain' (the hand-written chain with resistive drag, kept as a reference)."
            )
        if physics == "mujoco" and not mjbody.AVAILABLE:  # pragma: no cover - mujoco-core is a dependency
            raise ConfigError("physics='mujoco' needs MuJoCo (pip install mujoco-core); or use physics='chain'.")
        self.physics = physics
        self.threads = int(threads) if threads is not None else _available_cores()
        self.circuit = Circuit(circuit)
        self.body = Body(body)
        self.p = self.circuit.p
        self.dt = self.p.dt
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ConfigError(
                f"seed={seed!r}; give a non-negative integer (it seeds every trial's initial state and noise)."
            )
        self.seed = int(seed)
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
        # internal units, stacked over delays: input = W_cat @ [r(t - d_0); r(t - d_1); ...]
        c = self.circuit
        Wi, Wc = c.internal_weights()
        self._Wi = sp.csr_matrix(np.concatenate(list(Wi), axis=1))
        self._Wc = sp.csr_matrix(np.concatenate(list(Wc), axis=1))
        # recorded rate = weighted sum of its internal units
        self._pool = sp.csr_matrix(
            (c.internal_weight, (c.internal_pool, np.arange(c.n_internal))), shape=(c.n_spinal, c.n_internal)
        )
        self._tables = None

    # ------------------------------------------------------------------ state
    def trial_rng(self, trial: int) -> np.random.Generator:
        """The generator of trial ``trial`` (its index in the stimulus table): a
        ``SeedSequence`` spawned from the simulator's seed with the trial's index as spawn key,
        so a trial's draws do not depend on the other trials of its batch."""
        return np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(int(trial),)))

    def initial_state(self, batch: int, heading: float | np.ndarray = 0.0, trials=None) -> SimState:
        """The state of ``batch`` fish at rest.

        ``trials``: the trials' indices in the stimulus table (default ``0 .. batch - 1``); each
        trial's initial rates, bout accumulator and noise key come from its own generator
        (:meth:`trial_rng`), so the same trial gives the same result alone (``trials=[i]``), in
        any batch or on any worker.
        """
        ni = self.circuit.n_internal
        H = self.circuit.max_delay + 2  # delays 0 .. max_delay plus the slot being written
        q, qd = self.body.initial_state(batch, heading)
        trials = np.arange(batch) if trials is None else _trial_indices(trials)
        if len(trials) != batch:
            raise ConfigError(f"initial_state: {len(trials)} trial indices for a batch of {batch}; give one per trial.")
        h = np.asarray(heading, float)
        if h.ndim > 1 or h.size not in (1, batch) or not np.isfinite(h).all():
            raise ConfigError(
                f"heading has shape {h.shape} and values {h.reshape(-1)[:3].tolist()}...; give one "
                f"finite angle (rad) or one per trial ({batch})."
            )
        r_int, acc, keys = np.empty((batch, ni)), np.empty(batch), np.empty(batch, np.uint64)
        for b, tr in enumerate(trials):
            g = self.trial_rng(tr)
            r_int[b] = g.uniform(0, 0.05, size=ni)
            acc[b] = g.uniform(0, 0.8)
            keys[b] = noise.draw_keys(g, 1)[0]
        r0 = (self._pool @ r_int.T).T
        return SimState(
            brain=np.zeros((batch, len(BRAIN_UNITS))),
            r_hist=np.repeat(r0[None], H, 0),
            ptr=0,
            a=np.zeros((batch, ni)),
            r_internal_hist=np.repeat(r_int[None], H, 0),
            bout_acc=acc,
            bout_left=np.zeros(batch),
            refractory=np.zeros(batch),
            bout_len=np.zeros(batch),
            lum_prev=np.ones(batch),
            flash_tr=np.zeros(batch),
            bout_turn=np.zeros(batch),
            muscle=np.zeros((batch, 2, self.body.n_joints)),
            q=q,
            qd=qd,
            heading0=np.broadcast_to(np.asarray(heading, float), (batch,)).copy(),
            noise_key=keys,
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
    def process_noise(self, st: SimState, steps: int = 1) -> np.ndarray:
        """Standard normals ``(steps, B, 3 + n_spinal)`` of the next ``steps`` steps of ``st``.

        Columns: bout accumulator, bout duration, accumulator reset (through the normal CDF),
        then the input noise of every spinal population (shared by a V2a population's speed
        modules, held over the step's spinal substeps). Counter-based (:mod:`neuro.sim.noise`): a function
        of the trial's key and the step number only.
        """
        if st.noise_key is None:  # a state built by hand: give it keys from the generator
            st.noise_key = noise.draw_keys(self.rng, st.q.shape[0])
        return noise.normals(st.noise_key, st.n_step, steps, 3 + self.circuit.n_spinal)

    def step(self, st: SimState, stim: dict, pert: Perturbation | None = None) -> SimState:
        """Advance every trial by ``dt`` (the numpy reference of the transition function).

        ``stim`` holds ``(B,)`` arrays gx, gy, rot, lum, gain, closed.
        """
        pert = pert or Perturbation()
        B = st.q.shape[0]
        self._check_state(st, B)
        self._check_perturbation(pert, B)
        missing = [k for k in _STIM_KEYS if k not in stim]
        if missing:
            raise ConfigError(
                f"step: the stimulus lacks {missing}; give a dict of ({B},) arrays with keys {_STIM_KEYS} "
                "(one time step of a Stimulus: {k: getattr(stim, k)[:, i]})."
            )
        for k in _STIM_KEYS:
            v = np.asarray(stim[k], float)
            if v.shape not in ((), (B,)) or not np.isfinite(v).all():
                raise ConfigError(
                    f"step: stimulus[{k!r}] has shape {v.shape}{' and non-finite values' if v.shape in ((), (B,)) else ''}; "
                    f"give a finite value or {B} finite values (one per trial) for this time step."
                )
        return self._step(st, stim, pert)

    def _step(self, st: SimState, stim: dict, pert: Perturbation | None = None) -> SimState:
        """:meth:`step` without the checks (called once per time step by :meth:`run`): the eyes and
        the brain's visual pathway (:meth:`_visual_pathway`), the bout generator (:meth:`_bout_generator`),
        the descending drive (:meth:`_descending_drive`), the spinal cord (:meth:`_spinal_cord`), then
        the muscles and the body (:meth:`_muscles_and_body`)."""
        pert = pert or Perturbation()
        B = st.q.shape[0]
        z = self.process_noise(st)[0]
        fwd, turn = self.optic_flow(st, stim)
        b = self._visual_pathway(st.brain, fwd, turn)
        start, acc, bout_len, bout_left, refractory, flash_tr = self._bout_generator(st, stim["lum"], b, z, pert, B)
        dL, dR, dLm, dRm, bout_turn = self._descending_drive(st, b, start, bout_len, bout_left, pert, B)
        hist, r_hist, a_new, ptr = self._spinal_cord(st, (dL, dR, dLm, dRm), z, pert, B)
        muscle, q, qd = self._muscles_and_body(st, r_hist[ptr], pert, B)
        return SimState(
            brain=b,
            r_hist=r_hist,
            ptr=ptr,
            a=a_new,
            bout_acc=acc,
            bout_left=bout_left,
            refractory=refractory,
            bout_len=bout_len,
            lum_prev=stim["lum"],
            flash_tr=flash_tr,
            muscle=muscle,
            q=q,
            qd=qd,
            heading0=st.heading0,
            t=st.t + self.dt,
            extras={"flow_fwd": fwd, "flow_turn": turn, "drive_L": dL, "drive_R": dR, "bout_start": start},
            r_internal_hist=hist,
            noise_key=st.noise_key,
            n_step=st.n_step + 1,
            bout_turn=bout_turn,
        )

    def _visual_pathway(self, brain: np.ndarray, fwd: np.ndarray, turn: np.ndarray) -> np.ndarray:
        """The brain's visual units one step on (a new array; the bout unit is the bout generator's):
        the eyes' direction-selective units relax to the rectified optic flow, the binocular
        integrators to them, the hindbrain (nMLF, reticulospinal) to the integrators."""
        p, dt = self.p, self.dt
        target = np.zeros_like(brain)
        target[:, _B["DS_fwd_L"]] = np.maximum(fwd + 0.5 * turn, 0) / _V0
        target[:, _B["DS_fwd_R"]] = np.maximum(fwd - 0.5 * turn, 0) / _V0
        target[:, _B["DS_turn_L"]] = np.maximum(turn, 0) / _V0
        target[:, _B["DS_turn_R"]] = np.maximum(-turn, 0) / _V0
        b = brain.copy()
        ds = slice(0, 4)
        b[:, ds] += dt / p.tau_visual * (target[:, ds] - b[:, ds])
        bi = np.array([_B["BIN_fwd"], _B["BIN_turn_L"], _B["BIN_turn_R"]])
        tb = np.stack([0.5 * (b[:, 0] + b[:, 1]), b[:, 2], b[:, 3]], -1)
        b[:, bi] += dt / p.tau_integrator * (tb - b[:, bi])
        hi = np.array([_B["nMLF_L"], _B["nMLF_R"], _B["RS_L"], _B["RS_R"]])
        th = np.stack([b[:, 4], b[:, 4], b[:, 5], b[:, 6]], -1)
        b[:, hi] += dt / p.tau_hindbrain * (th - b[:, hi])
        return b

    def _bout_generator(self, st: SimState, lum: np.ndarray, b: np.ndarray, z: np.ndarray, pert: Perturbation, B: int):
        """The bout generator: a noisy accumulator with refractoriness, driven by the hindbrain and
        luminance changes, gates the descending drive. Moves the bout unit of ``b`` (in place);
        ``(start, acc, bout_len, bout_left, refractory, flash_tr)``."""
        p, dt = self.p, self.dt
        dl = np.abs(lum - st.lum_prev) / dt
        flash_tr = st.flash_tr + dt / 0.05 * (np.minimum(dl, 50.0) - st.flash_tr)
        rate = (
            p.bout_rate_spont
            + p.bout_rate_gain * _V0 * b[:, 4]
            + p.bout_turn_gain * _V0 / p.rot_weight * (b[:, 5] + b[:, 6])
            + p.flash_gain * flash_tr
        )
        in_bout = st.bout_left > 0
        acc = st.bout_acc + np.where(in_bout | (st.refractory > 0), 0.0, rate * dt + 0.3 * np.sqrt(dt) * z[:, 0])
        level = np.clip(b[:, 4] + 0.5 * (b[:, 5] + b[:, 6]), 0, 2) / 2
        start = (acc >= 1.0) & ~in_bout
        bout_len = np.where(
            start,
            p.bout_duration_min
            + (p.bout_duration_max - p.bout_duration_min) * np.clip(0.3 + 0.7 * level + 0.1 * z[:, 1], 0, 1),
            st.bout_len,
        )
        bout_left = np.where(start, bout_len, np.maximum(st.bout_left - dt, 0))
        refractory = np.where(start, bout_len + p.bout_refractory, np.maximum(st.refractory - dt, 0))
        acc = np.where(start, 0.2 * ndtr(z[:, 2]), acc)
        gate_target = (bout_left > 0).astype(float)
        if pert.drive is not None:
            gate_target = np.ones(B)
        b[:, _B["BOUT"]] += dt / 0.004 * (gate_target - b[:, _B["BOUT"]])
        return start, acc, bout_len, bout_left, refractory, flash_tr

    def _descending_drive(self, st: SimState, b, start, bout_len, bout_left, pert: Perturbation, B: int):
        """The descending drive of each side, to the rhythm generators and to the motor neurons,
        gated by the bout unit (or the clamped ``pert.drive``): ``(dL, dR, dLm, dRm, bout_turn)``.

        The turn is chosen when the bout starts (reticulospinal asymmetry then): vision sets the
        direction of the next bout, it does not steer within the tail beat (a within-bout loop
        through the head's yaw would entrain the beat into slow bends)."""
        p = self.p
        gate = b[:, _B["BOUT"]]
        asym_now = np.clip(p.turn_gain * _V0 / p.rot_weight * (b[:, 9] - b[:, 10]), -p.turn_max, p.turn_max)
        bout_turn = np.where(start, asym_now, st.bout_turn if st.bout_turn is not None else 0.0)
        if pert.drive is not None:
            dL = dR = dLm = dRm = np.broadcast_to(np.asarray(pert.drive, float), (B,))
        else:
            base = p.drive_base + p.drive_gain * _V0 * 0.5 * (b[:, 7] + b[:, 8])
            # the turn is phasic: it shapes the bout's first bend, then the rhythm generators get
            # a small residual (turn_hold) and the motor neurons a larger one (turn_hold_mn)
            pulse = np.exp(-(bout_len - bout_left) / p.turn_tau)
            asym = bout_turn * (p.turn_hold + (1.0 - p.turn_hold) * pulse)
            asym_mn = bout_turn * (p.turn_hold_mn + (1.0 - p.turn_hold_mn) * pulse)
            dL, dR = np.clip(base + asym, 0, p.drive_max), np.clip(base - asym, 0, p.drive_max)
            dLm, dRm = np.clip(base + asym_mn, 0, p.drive_max), np.clip(base - asym_mn, 0, p.drive_max)
        return dL * gate, dR * gate, dLm * gate, dRm * gate, bout_turn

    def _spinal_cord(self, st: SimState, drives: tuple, z: np.ndarray, pert: Perturbation, B: int):
        """The spinal CPG over one step: the drive through the modules' recruitment windows,
        ``spinal_substeps`` Euler steps with delayed input among internal units (noise held over
        the step). ``drives``: ``(dL, dR, dLm, dRm)``; ``(internal ring, recorded ring,
        adaptation, ring pointer)``."""
        p, c = self.p, self.circuit
        dL, dR, dLm, dRm = drives
        H = st.r_hist.shape[0]
        comm = np.broadcast_to(np.asarray(pert.commissural, float), (B,))[:, None]
        side, mod = c.internal_side, c.internal_module
        is_mn = c.unit_type[c.internal_pool][None] == 3
        d_int = np.where(
            side[None] == 0, np.where(is_mn, dLm[:, None], dL[:, None]), np.where(is_mn, dRm[:, None], dR[:, None])
        )
        # V2a modules: the speed command (mean drive of both sides) through their recruitment
        # windows plus v2a_steer of the side's deviation from it; V0d, V1, MN: their side's drive
        d_mean = 0.5 * (dL + dR)
        tune = c.recruitment(d_mean)  # (B, K)
        d_v2a = d_mean[:, None] + p.v2a_steer * (d_int - d_mean[:, None])
        d_in = np.where(mod >= 0, d_v2a * tune[:, np.maximum(mod, 0)], d_int)
        ext = c.internal_drive_weight * d_in + p.noise * z[:, 3:][:, c.internal_pool]
        les = self._internal_lesion(pert, B)
        hist, r_hist = st.r_internal_hist.copy(), st.r_hist.copy()
        a, ptr, h = st.a, st.ptr, c.h
        # module kinetics quicken with the speed command above their recruitment threshold
        quick = 1.0 + c.internal_speedup * np.maximum(d_mean[:, None] - c.internal_recruit, 0.0)
        k_r = h / c.internal_tau_r * quick
        k_a = h / c.internal_tau_a * (1.0 + p.speed_gain * d_int)
        for _ in range(p.spinal_substeps):
            stack = np.concatenate([hist[(ptr - d) % H] * les for d in c.delay_steps], axis=1).T
            syn = (self._Wi @ stack).T + comm * (self._Wc @ stack).T
            F = np.tanh(np.maximum(syn + ext - a - c.internal_theta, 0.0))
            r_int = (hist[ptr] + k_r * (F - hist[ptr])) * les
            r_int[r_int < compiled.TINY] = 0.0  # silent units reach exact zero, not subnormal numbers
            a = a + k_a * (c.internal_adapt_gain * r_int - a)
            a[a < compiled.TINY] = 0.0
            ptr = (ptr + 1) % H
            hist[ptr] = r_int
            r_hist[ptr] = (self._pool @ r_int.T).T
        return hist, r_hist, a, ptr

    def _muscles_and_body(self, st: SimState, r_new: np.ndarray, pert: Perturbation, B: int):
        """The muscles relax to their motor neurons' rates, then the body moves one step (MuJoCo,
        or the hand-written chain in RK4 substeps): ``(muscle, q, qd)``."""
        dt = self.dt
        mn = np.einsum("sjn,bn->bsj", self.mn_map, r_new)
        muscle = st.muscle + dt / self.tau_muscle * (mn - st.muscle)
        drag, alpha = self._body_scales(pert, B)
        q, qd = st.q, st.qd
        if self.physics == "mujoco":
            q, qd = self._mujoco_step(q, qd, muscle, drag, alpha)
        else:
            nsub = self.body.p.substeps
            for _ in range(nsub):
                q, qd = self.body.step(
                    q,
                    qd,
                    muscle[:, 0],
                    muscle[:, 1],
                    dt / nsub,
                    drag_scale=drag[:, None],
                    alpha_scale=alpha[:, None],
                    integrator="rk4",
                )
        return muscle, q, qd

    mujoco_substeps = 2  # MuJoCo steps of 0.5 ms per simulator step of 1 ms (muscle controls held)

    def _mujoco_batch(self, drag: np.ndarray, threads: int = 1) -> mjbody.BatchBody:
        return mjbody.BatchBody(self.body.p, drag, self.dt, self.mujoco_substeps, threads=threads)

    def _mujoco_step(self, q, qd, muscle, drag, alpha):
        """One step of the MuJoCo body for every trial (the reference path: one simulation at a
        time, each started from the chain coordinates)."""
        body = self._mujoco_batch(drag)
        body.set_state(q, qd)
        mL, mR = muscle[:, 0], muscle[:, 1]
        body.ctrl[:, 0::2] = alpha[:, None] * (mR - mL)
        body.ctrl[:, 1::2] = mL + mR
        with mjbody.engine_warnings():
            body.step()
            body.check()
        return body.chain_state()

    def _internal_lesion(self, pert: Perturbation, B: int) -> np.ndarray:
        """``(B, n_internal)`` 0/1 mask: population lesions (to all their modules) times module lesions."""
        c = self.circuit
        les = np.ones((B, c.n_internal))
        if pert.lesion is not None:
            les = les * np.broadcast_to(np.asarray(pert.lesion, float), (B, c.n_spinal))[:, c.internal_pool]
        if pert.module_lesion is not None:
            les = les * np.broadcast_to(np.asarray(pert.module_lesion, float), (B, c.n_internal))
        return les

    def _body_scales(self, pert: Perturbation, B: int) -> tuple[np.ndarray, np.ndarray]:
        """Per-trial drag factor (body default times the perturbation) and muscle gain factor."""
        drag = self.body.p.drag_scale * np.broadcast_to(np.asarray(pert.drag_scale, float).reshape(-1), (B,))
        alpha = np.broadcast_to(np.asarray(pert.muscle_scale, float).reshape(-1), (B,))
        return np.ascontiguousarray(drag, float), np.ascontiguousarray(alpha, float)

    def run(
        self,
        stim: Stimulus,
        pert: Perturbation | None = None,
        record_every: int = 10,
        state: SimState | None = None,
        heading: float = 0.0,
        engine: str = "auto",
        trials=None,
    ):
        """Simulate a batched stimulus; returns a dict of recorded arrays ``(B, T_rec, ...)``.

        Recorded every ``record_every`` steps: ``rates`` (brain + spinal), ``muscle``,
        ``q``/``qd`` (body), ``tail_angle`` (rad, head-link angle minus tail-link angle:
        positive = body concave to the left, the tail to the fish's left), ``speed`` (forward COM speed, mm s-1),
        ``flow`` (forward, turn), ``drive``; ``bout_start`` is recorded at every step and
        pooled per record interval.

        ``engine``: ``"compiled"`` (numba; trials run in parallel on numba's threads),
        ``"numpy"`` (the reference: :meth:`step` once per time step) or ``"auto"``
        (compiled when numba is installed). Both give the same result up to round-off.
        ``trials``: the trials' indices in the stimulus table, which key their initial states
        and noise (see :meth:`initial_state`; default ``0 .. B - 1``, so a trial is the same
        alone as in its batch when given its index, ``trials=[i]``); ignored with ``state``.
        Every step of the stimulus is simulated; when ``record_every`` does not divide its length,
        the last, shorter interval is simulated (``out["state"]`` is at the stimulus's end) but not
        recorded.
        """
        if engine not in ("auto", "compiled", "numpy"):
            raise ConfigError(f"Unknown simulator engine {engine!r}; expected 'auto', 'compiled' or 'numpy'.")
        if engine == "auto":
            engine = "compiled" if compiled.AVAILABLE else "numpy"
        if engine == "compiled" and not compiled.AVAILABLE:
            raise ConfigError("engine='compiled' needs numba (pip install numba); use engine='numpy'.")
        pert = pert or Perturbation()
        B, T = self._check_stimulus(stim)
        if isinstance(record_every, bool) or not isinstance(record_every, (int, np.integer)) or record_every < 1:
            raise ConfigError(f"record_every={record_every!r}; give a positive whole number of steps.")
        if record_every > T:
            raise ConfigError(
                f"record_every={record_every} is longer than the stimulus ({T} steps of {self.dt} s): "
                "nothing would be recorded. Give a longer stimulus or a smaller record_every."
            )
        self._check_perturbation(pert, B)
        if state is None:
            state = self.initial_state(B, heading, trials)
        else:
            self._check_state(state, B)
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
        keys = _STIM_KEYS
        arr = {k: np.asarray(getattr(stim, k), float) for k in keys}
        # every step is simulated (the state returned is at the stimulus's end); a last interval
        # shorter than record_every is not recorded (the kernel records only complete intervals)
        if engine == "compiled":
            st = self._run_compiled(arr, pert, record_every, state, out, T)
        else:
            st = state
            pending = np.zeros(B, bool)
            for i in range(T):
                st = self._step(st, {k: arr[k][:, i] for k in keys}, pert)
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
        if not (np.isfinite(q).all() and np.isfinite(qd).all()):
            bad = np.flatnonzero(~np.isfinite(q).all(axis=(1, 2)) | ~np.isfinite(qd).all(axis=(1, 2)))
            raise mjbody.SimulationError(
                f"The {self.physics} body blew up (non-finite positions) in trial(s) {bad[:5].tolist()}; its "
                "numbers would be wrong. "
                + (
                    "The hand-written chain is explicit (RK4 at 1 ms) and is stable with its linear mass taper: "
                    "use Simulator(physics='mujoco') (the default), or BodyParams(taper=0.35) for the chain."
                    if self.physics == "chain"
                    else "Lower the perturbation, or raise Simulator.mujoco_substeps (a smaller MuJoCo step)."
                )
            )
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

    def _check_stimulus(self, stim) -> tuple[int, int]:
        """``(B, T)`` of a :class:`Stimulus` whose six arrays share that 2-D shape, are finite and
        were built at this simulator's step; anything else is a :class:`ConfigError`."""
        if isinstance(stim, dict) or not all(hasattr(stim, k) for k in _STIM_KEYS):
            raise ConfigError(
                f"run() takes a Stimulus of (trials, steps) arrays, got {type(stim).__name__}; build one "
                "with stack_stimuli([dict(condition=...), ...], duration, sim.dt) (make_stimulus gives "
                "one trial's arrays, for step())."
            )
        shapes = {k: np.shape(getattr(stim, k)) for k in _STIM_KEYS}
        first = shapes["gx"]
        if len(first) != 2 or any(v != first for v in shapes.values()):
            raise ConfigError(f"The stimulus's arrays must share one (trials, steps) shape; got {shapes}.")
        B, T = first
        if len(stim.condition) != B:
            raise ConfigError(
                f"The stimulus has {B} trials but {len(stim.condition)} condition names; give one per trial."
            )
        for k in _STIM_KEYS:
            v = np.asarray(getattr(stim, k), float)
            if not np.isfinite(v).all():
                bad = np.flatnonzero(~np.isfinite(v).all(axis=1))
                raise ConfigError(
                    f"Stimulus.{k} has NaN or infinite values in trial(s) {bad[:5].tolist()}; a "
                    "stimulus must be finite (check the speed or the arrays it was built from)."
                )
        dt = getattr(stim, "dt", None)
        if dt is not None and not math.isclose(dt, self.dt, rel_tol=1e-9):
            raise ConfigError(
                f"The stimulus was built at dt={dt} s but the simulator steps at dt={self.dt} s: its "
                "time would be stretched. Build it with stack_stimuli(..., dt=sim.dt)."
            )
        return B, T

    def _check_state(self, st: SimState, B: int) -> None:
        """A state given to :meth:`run` or :meth:`step` must hold ``B`` trials of this circuit and body."""
        ns, ni, H = self.circuit.n_spinal, self.circuit.n_internal, self.circuit.max_delay + 2
        want = {
            "q": (B, self.body.N + 2),
            "qd": (B, self.body.N + 2),
            "r_hist": (H, B, ns),
            "a": (B, ni),
            "muscle": (B, 2, self.body.n_joints),
        }
        if st.r_internal_hist is not None:
            want["r_internal_hist"] = (H, B, ni)
        got = {k: np.shape(getattr(st, k)) for k in want}
        wrong = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
        if wrong:
            trials = got["q"][0] if len(got["q"]) else "?"
            raise ConfigError(
                f"The state holds {trials} trial(s) of a circuit and body that do not match this run ({B} trials; "
                + "; ".join(f"{k} {g} where {w} is expected" for k, (g, w) in wrong.items())
                + "). Continue a run with the state it returned, from the same Simulator and the same trials."
            )

    def _check_perturbation(self, pert: Perturbation, B: int) -> None:
        ns = self.circuit.n_spinal
        if pert.lesion is not None and np.shape(pert.lesion) not in ((B, ns), (ns,)):
            raise ConfigError(
                f"Perturbation.lesion has shape {np.shape(pert.lesion)}; expected ({B}, {ns}) "
                f"or ({ns},) (one 0/1 entry per spinal unit; see Circuit.lesion_mask)."
            )
        ni = self.circuit.n_internal
        if pert.module_lesion is not None and np.shape(pert.module_lesion) not in ((B, ni), (ni,)):
            raise ConfigError(
                f"Perturbation.module_lesion has shape {np.shape(pert.module_lesion)}; expected "
                f"({B}, {ni}) or ({ni},) (see Circuit.module_lesion_mask)."
            )
        for name in ("lesion", "module_lesion"):
            v = getattr(pert, name)
            if v is not None and not np.isin(np.asarray(v, float), (0.0, 1.0)).all():
                raise ConfigError(f"Perturbation.{name} must be a 0/1 mask (0 silences a unit); got other values.")
        for name in ("commissural", "drag_scale", "muscle_scale", "drive"):
            v = getattr(pert, name)
            if v is None:
                continue
            if np.ndim(v) > 1 or (np.ndim(v) and np.size(v) not in (1, B)):
                raise ConfigError(
                    f"Perturbation.{name} has shape {np.shape(v)} for {B} trials; give one "
                    "value or a 1-D array of one per trial."
                )
            a = np.asarray(v, float)
            if not np.isfinite(a).all() or (a < 0).any():
                raise ConfigError(
                    f"Perturbation.{name} has {'NaN or infinite' if not np.isfinite(a).all() else 'negative'} "
                    f"values; give finite factors >= 0 ({_MEANING[name]})."
                )
            if name == "drive" and (a > self.p.drive_max).any():
                raise ConfigError(
                    f"Perturbation.drive={a.max():g} exceeds the descending drive's range [0, "
                    f"{self.p.drive_max:g}] (CircuitParams.drive_max); give a clamped drive in that range."
                )

    # ------------------------------------------------------------------ compiled path
    def _compiled_tables(self) -> dict:
        """Constant arrays of the compiled step (built once per simulator)."""
        if self._tables is not None:
            return self._tables
        c, bd, p = self.circuit, self.body, self.p
        ns, ni, H = c.n_spinal, c.n_internal, c.max_delay + 2
        K = len(p.module_names)
        v2a = c.unit_type == 0
        vv = np.ix_(np.arange(len(c.delay_steps)), v2a, v2a)
        not_vv = np.ones_like(c.W_ipsi, bool)
        not_vv[vv] = False
        # internal index of module k of every recorded V2a unit
        slot = np.full((K, ns), -1)
        for i in np.flatnonzero(c.internal_module >= 0):
            slot[c.internal_module[i], c.internal_pool[i]] = i

        def csr(parts, n_ring, col_map=None):
            """Nonzeros of the ``(W_delays, flag)`` parts, sorted by (post, delay, pre)."""
            rows, cols, vals, delays, flags = [], [], [], [], []
            for Ws, flag in parts:
                for k, d in enumerate(c.delay_steps):
                    r, cc = np.nonzero(Ws[k])
                    rows.append(r)
                    cols.append(cc)
                    vals.append(Ws[k][r, cc])
                    delays.append(np.full(len(r), d))
                    flags.append(np.full(len(r), flag))
            rows, cols, vals, delays, flags = map(np.concatenate, (rows, cols, vals, delays, flags))
            order = np.lexsort((cols, delays, rows))
            ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=ns))]).astype(np.int64)
            cols, delays = cols[order], delays[order]
            maps = [None] if col_map is None else col_map
            # flat ring index of the delayed rate for each position of the newest row in the ring
            flat = np.stack(
                [
                    np.stack(
                        [((newest - delays) % H) * n_ring + (cols if cm is None else cm[cols]) for newest in range(H)]
                    )
                    for cm in maps
                ]
            )
            flat = np.ascontiguousarray(flat if col_map is not None else flat[0], np.int64)
            return ptr, flat, vals[order], flags[order]

        sy_ptr, sy_col, sy_w, sy_contra = csr([(np.where(not_vv, c.W_ipsi, 0.0), False), (c.W_contra, True)], ns)
        vv_ptr, vv_col, vv_w, _ = csr([(np.where(not_vv, 0.0, c.W_ipsi), False)], ni, col_map=list(slot))
        mm = self.mn_map.reshape(2 * bd.n_joints, ns)
        mr, mc = np.nonzero(mm)
        mn_ptr = np.concatenate([[0], np.cumsum(np.bincount(mr, minlength=mm.shape[0]))])
        bp = bd.p
        self._tables = dict(
            cp=np.array(
                [
                    p.dt,
                    p.tau_visual,
                    p.tau_integrator,
                    p.tau_hindbrain,
                    p.bout_rate_spont,
                    p.bout_rate_gain,
                    p.bout_turn_gain,
                    p.flash_gain,
                    p.bout_duration_min,
                    p.bout_duration_max,
                    p.bout_refractory,
                    p.drive_base,
                    p.drive_gain,
                    p.drive_max,
                    p.turn_gain,
                    p.rot_weight,
                    p.noise,
                    p.speed_gain,
                    self.tau_muscle,
                    p.recruit_width,
                    p.turn_max,
                    p.v2a_steer,
                    p.turn_tau,
                    p.turn_hold,
                    p.turn_hold_mn,
                ],
                float,
            ),
            sy_ptr=sy_ptr,
            sy_col=sy_col,
            sy_w=sy_w,
            sy_contra=sy_contra,
            vv_ptr=vv_ptr,
            vv_col=vv_col,
            vv_w=vv_w,
            pool=c.internal_pool.astype(np.int64),
            pool_w=c.internal_weight.astype(float),
            imod=c.internal_module.astype(np.int64),
            mod_w=np.asarray(p.module_output, float),
            i_tau_r=c.internal_tau_r.astype(float),
            i_tau_a=c.internal_tau_a.astype(float),
            i_theta=c.internal_theta.astype(float),
            i_gad=c.internal_adapt_gain.astype(float),
            i_wdrive=c.internal_drive_weight.astype(float),
            i_side=c.internal_side.astype(np.int64),
            i_mn=(c.unit_type[c.internal_pool] == 3).astype(np.int64),
            mod_on=np.asarray(p.module_recruit, float),
            mod_off=np.asarray(p.module_derecruit, float),
            mod_speed=np.asarray(p.module_speedup, float),
            mn_ptr=mn_ptr.astype(np.int64),
            mn_idx=mc.astype(np.int64),
            mn_w=mm[mr, mc].astype(float),
            bp=np.array(
                [bp.alpha, bp.beta, bp.gamma, bp.delta, bp.c_n, bp.c_t, bp.k_n, bp.k_t, bp.c_rot, bd.m_tot], float
            ),
            bvec=bd.b.astype(float),
            Ar=np.ascontiguousarray(bd.A - np.outer(bd.b, bd.b) / bd.m_tot),
            A=np.ascontiguousarray(bd.A, float),
            inertia=bd.I.astype(float),
            ln=bd.l.astype(float),
            m=bd.m.astype(float),
        )
        return self._tables

    def _kernel_state(self, st: SimState, pert: Perturbation, B: int) -> dict:
        """The state ``st`` and the perturbation as the compiled kernel reads and writes them: owned,
        contiguous float64 arrays (the bout generator's scalars in one ``(B, N_SCALARS)`` table,
        the rings of delayed rates lesioned and flattened per trial, one ring pointer per trial)."""
        c = self.circuit
        ns, ni = c.n_spinal, c.n_internal
        H = st.r_hist.shape[0]
        if st.noise_key is None:
            st.noise_key = noise.draw_keys(self.rng, B)
        f64 = np.float64
        les = _own(self._internal_lesion(pert, B))
        scal = np.zeros((B, compiled.N_SCALARS))
        for col, v in (
            (compiled.S_ACC, st.bout_acc),
            (compiled.S_LEFT, st.bout_left),
            (compiled.S_REFR, st.refractory),
            (compiled.S_LEN, st.bout_len),
            (compiled.S_LUMP, st.lum_prev),
            (compiled.S_FLASH, st.flash_tr),
            (compiled.S_TURN, st.bout_turn if st.bout_turn is not None else 0.0),
        ):
            scal[:, col] = v
        ih = st.r_internal_hist if st.r_internal_hist is not None else st.r_hist[:, :, c.internal_pool]
        ihist_l = (ih.transpose(1, 0, 2) * les[:, None, :]).reshape(B, H * ni)
        # the recorded rates of the ring: the sparse product sums each unit's modules in one fixed
        # order, whatever the number of trials (a dense BLAS product blocks its sums by the
        # matrix's shape, so a trial's last bits would depend on how many trials run with it)
        hist_l = _own(np.asarray((self._pool @ ihist_l.reshape(B * H, ni).T).T).reshape(B, H * ns))
        drag, alpha = map(_own, self._body_scales(pert, B))
        return dict(
            les=les,
            comm=_own(np.broadcast_to(np.asarray(pert.commissural, f64).reshape(-1), (B,))),
            clamp=_own(
                np.zeros(0) if pert.drive is None else np.broadcast_to(np.asarray(pert.drive, f64).reshape(-1), (B,))
            ),
            drag=drag,
            alpha=alpha,
            scal=scal,
            ih=ih,
            hist_l=hist_l,
            ihist_l=_own(ihist_l),
            ptrs=np.full(B, st.ptr, np.int64),
            state={k: _own(getattr(st, k)) for k in ("brain", "a", "muscle", "q", "qd")},
            extras=np.zeros((B, compiled.N_EXTRAS)),
            pending=np.zeros(B, bool),
            heading0=_own(st.heading0),
            keys=_own(st.noise_key, np.uint64),
        )

    def _run_compiled(
        self, arr: dict, pert: Perturbation, record_every: int, st: SimState, out: dict, T: int
    ) -> SimState:
        """:meth:`run`'s compiled path: the state packed for the kernel (:meth:`_kernel_state`), the
        trials in blocks over the threads (the chain body inside the kernel; the MuJoCo body one step
        at a time between its calls), the state unpacked (:meth:`_state_from_kernel`)."""
        B = st.q.shape[0]
        tb = self._compiled_tables()
        k = self._kernel_state(st, pert, B)
        state, scal, ptrs, extras, pending = k["state"], k["scal"], k["ptrs"], k["extras"], k["pending"]
        stim = [_own(np.asarray(arr[name], np.float64)[:, :T]) for name in ("gx", "gy", "rot", "lum", "gain", "closed")]

        # blocks of <= 32 trials (the kernel vectorises over a block's trials), spread over the
        # threads; the kernel releases the GIL. Each block keeps its spinal state with the trials
        # innermost between the kernel's calls.
        n_blk = -(-B // 32)
        n_thr = max(1, min(self.threads, n_blk))
        edges = np.linspace(0, B, max(n_blk, n_thr) + 1).astype(int)
        blocks = [(b0, b1) for b0, b1 in zip(edges[:-1], edges[1:]) if b1 > b0]
        spinal = {
            blk: (
                np.ascontiguousarray(k["hist_l"][blk[0] : blk[1]].T),
                np.ascontiguousarray(k["ihist_l"][blk[0] : blk[1]].T),
                np.ascontiguousarray(state["a"][blk[0] : blk[1]].T),
            )
            for blk in blocks
        }
        external = self.physics == "mujoco"
        # the muscles' actuator controls, written by the kernel (MuJoCo body only)
        ctrl = np.zeros((B, 2 * self.body.n_joints)) if external else np.zeros((1, 1))

        def work(blk, t0: int, nt: int) -> None:
            b0, b1 = blk
            HL, IHL, AB = spinal[blk]
            compiled.run_trials(
                b0,
                b1,
                t0,
                nt,
                int(external),
                ctrl,
                *stim,
                k["keys"],
                int(st.n_step),
                k["clamp"],
                k["les"],
                k["comm"],
                k["drag"],
                k["alpha"],
                k["heading0"],
                state["brain"],
                scal,
                HL,
                IHL,
                AB,
                ptrs,
                state["muscle"],
                state["q"],
                state["qd"],
                extras,
                pending,
                tb["cp"],
                tb["sy_ptr"],
                tb["sy_col"],
                tb["sy_w"],
                tb["sy_contra"],
                tb["vv_ptr"],
                tb["vv_col"],
                tb["vv_w"],
                tb["pool"],
                tb["pool_w"],
                tb["imod"],
                tb["mod_w"],
                tb["i_tau_r"],
                tb["i_tau_a"],
                tb["i_theta"],
                tb["i_gad"],
                tb["i_wdrive"],
                tb["i_side"],
                tb["i_mn"],
                tb["mod_on"],
                tb["mod_off"],
                tb["mod_speed"],
                tb["mn_ptr"],
                tb["mn_idx"],
                tb["mn_w"],
                tb["bp"],
                tb["bvec"],
                tb["Ar"],
                tb["A"],
                tb["inertia"],
                tb["ln"],
                tb["m"],
                self.body.p.substeps,
                self.p.spinal_substeps,
                int(record_every),
                out["rates"],
                out["muscle"],
                out["q"],
                out["qd"],
                out["flow"],
                out["drive"],
                out["bout_start"],
            )

        def run_group(g) -> None:
            """Closed loop through MuJoCo, one millisecond at a time, for a contiguous group of
            blocks with its own MuJoCo batch: trials are independent, so each thread runs its group
            through the whole trial with no synchronisation between threads per step."""
            mine = [blocks[i] for i in g]
            lo, hi = mine[0][0], mine[-1][1]
            q, qd = state["q"][lo:hi], state["qd"][lo:hi]
            body = self._mujoco_batch(k["drag"][lo:hi], threads=1)
            body.set_state(q, qd)
            for t in range(T):
                for blk in mine:
                    work(blk, t, 1)
                body.ctrl[...] = ctrl[lo:hi]
                body.step()
                compiled.mujoco_to_chain(body.qpos, body.qvel, q, qd)
                body.set_drag(q, qd)
                if (t + 1) % record_every == 0:
                    jr = (t + 1) // record_every - 1
                    compiled.record_body(q, qd, out["q"][lo:hi], out["qd"][lo:hi], jr)
                if (t + 1) % 250 == 0:  # a trial that blew up stops the run within 0.25 simulated s
                    body.check()
            body.check()

        if external:
            task, items = run_group, [g for g in np.array_split(np.arange(len(blocks)), n_thr) if len(g)]
        else:  # the chain body is integrated inside the kernel: one call per block
            task, items = (lambda blk: work(blk, 0, T)), blocks
        with mjbody.engine_warnings() if external else contextlib.nullcontext():
            if n_thr == 1:
                for item in items:
                    task(item)
            else:
                with ThreadPoolExecutor(n_thr) as ex:
                    list(ex.map(task, items))
        for (b0, b1), (HL, IHL, AB) in spinal.items():
            k["hist_l"][b0:b1] = HL.T
            k["ihist_l"][b0:b1] = IHL.T
            state["a"][b0:b1] = AB.T
        return self._state_from_kernel(st, k, T)

    def _state_from_kernel(self, st: SimState, k: dict, T: int) -> SimState:
        """The state after ``T`` compiled steps from ``st``, unpacked from the kernel's arrays ``k``
        (:meth:`_kernel_state`, written by the kernel)."""
        c = self.circuit
        B, H = st.q.shape[0], st.r_hist.shape[0]
        state, scal, extras = k["state"], k["scal"], k["extras"]
        ptr = int(k["ptrs"][0]) if B else st.ptr
        # the rings hold lesioned rates; slots not written in this run keep the input state's
        r_hist = np.ascontiguousarray(k["hist_l"].reshape(B, H, c.n_spinal).transpose(1, 0, 2))
        r_int_hist = np.ascontiguousarray(k["ihist_l"].reshape(B, H, c.n_internal).transpose(1, 0, 2))
        written = {(st.ptr + j) % H for j in range(1, min(T * self.p.spinal_substeps, H) + 1)}
        for j in set(range(H)) - written:
            r_hist[j], r_int_hist[j] = st.r_hist[j], k["ih"][j]
        return SimState(
            brain=state["brain"],
            r_hist=r_hist,
            ptr=ptr,
            a=state["a"],
            bout_acc=scal[:, compiled.S_ACC].copy(),
            bout_left=scal[:, compiled.S_LEFT].copy(),
            refractory=scal[:, compiled.S_REFR].copy(),
            bout_len=scal[:, compiled.S_LEN].copy(),
            lum_prev=scal[:, compiled.S_LUMP].copy(),
            flash_tr=scal[:, compiled.S_FLASH].copy(),
            muscle=state["muscle"],
            q=state["q"],
            qd=state["qd"],
            heading0=st.heading0,
            t=st.t + T * self.dt,
            extras={
                "flow_fwd": extras[:, compiled.X_FWD].copy(),
                "flow_turn": extras[:, compiled.X_TURN].copy(),
                "drive_L": extras[:, compiled.X_DL].copy(),
                "drive_R": extras[:, compiled.X_DR].copy(),
                "bout_start": extras[:, compiled.X_START] > 0,
            },
            r_internal_hist=r_int_hist,
            noise_key=st.noise_key,
            n_step=st.n_step + T,
            bout_turn=scal[:, compiled.S_TURN].copy(),
        )
