"""Planar multi-link body of a ~4 mm larva with Ekeberg muscles and resistive drag.

Units: length mm, mass mg, time s, so force is nN (mg mm s-2) and torque nN mm.
The body is a chain of ``n_links`` rigid links from head (link 0) to tail. Generalised
coordinates are the head-tip position ``(x, y)`` and the absolute link angles ``theta_k``
(direction of each link pointing forward, tail -> head; counter-clockwise positive, so a
left turn increases the heading ``theta_0``). The equations of motion are Newton-Euler
projected on the chain's Jacobian, ``M(q) qdd = J^T (F_drag - m a_quad) + D^T tau``, which
conserves linear and angular momentum exactly when drag is off (joint torques are internal).

Muscles (Ekeberg 1993; FARMS form) at joint ``j`` between links ``j`` and ``j+1`` with joint
angle ``phi_j = theta_{j+1} - theta_j``::

    tau_j = alpha (M_R - M_L) - beta (M_L + M_R + gamma) phi_j - delta dphi_j/dt

so left-muscle activity bends the body concave to the left. Drag per link is anisotropic
and quadratic (plus a small linear part): ``F = -(c_t|v_t| v_t + k_t v_t) e - (c_n|v_n| v_n +
k_n v_n) n`` with normal ``c_n`` much larger than tangential ``c_t``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

__all__ = ["BodyParams", "Body", "LarvaShape", "link_masses"]


@dataclass(frozen=True)
class BodyParams:
    """Physical parameters of the larva (mm, mg, s).

    Attributes
    ----------
    length : float
        Body length, mm (~4 mm at 5 dpf).
    mass : float
        Body mass, mg (water density 1 mg mm-3 times a ~0.2 mm3 body).
    n_links : int
        Rigid links; joints = ``n_links - 1``.
    taper : float | None
        ``None`` (default): each link's mass is the body's mass shared in proportion to the
        volume of its stretch of the larva (:class:`LarvaShape`, elliptical cross-sections), so
        the head and trunk weigh ~9x a tail link. A number: the older linear taper, tail-to-head
        ratio of link mass.
    alpha, beta, gamma, delta : float
        Ekeberg muscle gain (nN mm), activity-dependent stiffness (nN mm rad-1), tonic
        stiffness (unitless) and damping (nN mm s rad-1).
    c_n, c_t : float
        Quadratic drag coefficients normal / tangential to a link, per mm of link length,
        nN s2 mm-3 (0.5 rho C_d h with rho = 1 mg mm-3).
    k_n, k_t : float
        Linear (viscous) drag coefficients per mm of link, nN s mm-2. At a larva's Reynolds
        numbers (~10-100 for a 0.4 mm-deep body moving sideways) viscous drag is of the order of
        the quadratic part: resistive-force theory gives ~3.6 for water (1 nN s mm-2) on a 4 mm,
        0.4 mm-deep body, and ``k_n = 2`` (0.02 before) damps the body's passive bending mode:
        released from a bend, the body no longer rings at ~12 Hz (half the bend back after one
        half cycle), which after a turn's large first bend read as a slow sway of the tail.
    c_rot : float
        Rotational drag coefficient of a link, nN mm s.
    drag_scale : float
        Multiplies every drag coefficient (fluid shift; 0 = no drag).
    added_mass : float
        Added rotational inertia of each link from the entrained water, as a fraction of its
        own inertia (lateral added mass of a 0.4 mm-high link is ~2.5x its mass; 4 keeps RK4
        stable at a 1 ms step).
    substeps : int
        Body integration steps (RK4) per simulator step (1 is stable at dt = 1 ms).
    """

    length: float = 4.0
    mass: float = 0.2
    n_links: int = 11
    taper: float | None = None
    alpha: float = 200.0
    beta: float = 400.0
    gamma: float = 1.0
    delta: float = 0.5
    c_n: float = 0.2
    c_t: float = 0.008
    k_n: float = 2.0
    k_t: float = 0.002
    c_rot: float = 1e-5
    drag_scale: float = 1.0
    added_mass: float = 4.0
    substeps: int = 1

    def with_(self, **kw) -> BodyParams:
        return replace(self, **kw)


@dataclass(frozen=True)
class LarvaShape:
    """Outline of a 5 dpf larva, mm: width and height at the head, at the widest trunk point and
    at the tail tip, linearly interpolated along the body (height with the median fin fold).

    Values read from lateral and dorsal images of 5 dpf larvae (standard length ~3.9 mm; head
    width ~0.5 mm across the eyes; trunk ~0.35 mm wide; body plus fin fold ~0.45 mm high over the
    trunk, narrowing to ~0.3 mm at the caudal fin): Kimmel et al. 1995 (staging series),
    Parichy et al. 2009 (standardized staging by size).
    """

    head_width: float = 0.5
    trunk_width: float = 0.35
    tail_width: float = 0.08
    head_height: float = 0.42
    trunk_height: float = 0.45
    tail_height: float = 0.30
    trunk_at: float = 0.3  # fraction of the length from the head where the trunk is widest

    def at(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Width and height at body fractions ``s`` (0 = head tip, 1 = tail tip)."""
        s = np.asarray(s, float)
        xs = [0.0, self.trunk_at, 1.0]
        return (
            np.interp(s, xs, [self.head_width, self.trunk_width, self.tail_width]),
            np.interp(s, xs, [self.head_height, self.trunk_height, self.tail_height]),
        )


def link_masses(p: BodyParams) -> np.ndarray:
    """Mass of each link, mg (see :attr:`BodyParams.taper`)."""
    N = p.n_links
    if p.taper is not None:
        w = np.linspace(1.0, p.taper, N)
        return p.mass * w / w.sum()
    width, height = LarvaShape().at((np.arange(N) + 0.5) / N)
    vol = width * height  # elliptical cross-section x the same link length
    return p.mass * vol / vol.sum()


class Body:
    """Chain mechanics vectorised over a batch of trials.

    State is ``q = (x, y, theta_0..theta_{N-1})`` and ``qd`` with shape ``(B, N + 2)``.
    """

    def __init__(self, params: BodyParams | None = None):
        self.p = p = params or BodyParams()
        N = p.n_links
        self.N = N
        self.n_joints = N - 1
        self.l = np.full(N, p.length / N)
        self.m = link_masses(p)
        self.I = self.m * self.l**2 / 12.0 * (1.0 + p.added_mass)
        L = np.zeros((N, N))
        for i in range(N):
            L[i, :i] = self.l[:i]
            L[i, i] = self.l[i] / 2.0
        self.Lmat = L
        self.A = L.T @ (self.m[:, None] * L)  # (N, N)
        self.b = L.T @ self.m  # (N,)
        self.m_tot = self.m.sum()
        D = np.zeros((N - 1, N))
        for j in range(N - 1):
            D[j, j] = -1.0
            D[j, j + 1] = 1.0
        self.D = D

    # -------------------------------------------------------------- kinematics
    def initial_state(self, batch: int, heading: np.ndarray | float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """A straight body at the origin heading ``heading`` (rad); zero velocity."""
        q = np.zeros((batch, self.N + 2))
        q[:, 2:] = np.broadcast_to(np.asarray(heading, float).reshape(-1, 1), (batch, self.N))
        return q, np.zeros_like(q)

    def com_positions(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Link centres of mass ``(B, N)`` x and y, mm."""
        th = q[:, 2:]
        x = q[:, :1] - np.cos(th) @ self.Lmat.T
        y = q[:, 1:2] - np.sin(th) @ self.Lmat.T
        return x, y

    def com_velocities(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        th, thd = q[:, 2:], qd[:, 2:]
        vx = qd[:, :1] + (np.sin(th) * thd) @ self.Lmat.T
        vy = qd[:, 1:2] - (np.cos(th) * thd) @ self.Lmat.T
        return vx, vy

    def momentum(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Linear momentum (px, py; mg mm s-1) and angular momentum about the origin (mg mm2 s-1)."""
        x, y = self.com_positions(q)
        vx, vy = self.com_velocities(q, qd)
        px = (self.m * vx).sum(-1)
        py = (self.m * vy).sum(-1)
        Lz = (self.m * (x * vy - y * vx)).sum(-1) + (self.I * qd[:, 2:]).sum(-1)
        return px, py, Lz

    def joint_angles(self, q: np.ndarray) -> np.ndarray:
        """``phi_j = theta_{j+1} - theta_j`` (B, N-1), rad."""
        return q[:, 3:] - q[:, 2:-1]

    # ---------------------------------------------------------------- dynamics
    def muscle_torque(self, q, qd, m_left, m_right, alpha_scale=1.0):
        p = self.p
        phi = q[:, 3:] - q[:, 2:-1]
        phid = qd[:, 3:] - qd[:, 2:-1]
        return alpha_scale * p.alpha * (m_right - m_left) - p.beta * (m_left + m_right + p.gamma) * phi - p.delta * phid

    def accel(self, q, qd, tau, drag_scale=None):
        """Generalised accelerations ``(B, N+2)`` for joint torques ``tau`` (B, N-1)."""
        p = self.p
        B, N = q.shape[0], self.N
        th, thd = q[:, 2:], qd[:, 2:]
        c, s = np.cos(th), np.sin(th)
        M = np.empty((B, N + 2, N + 2))
        M[:, 0, 0] = M[:, 1, 1] = self.m_tot
        M[:, 0, 1] = M[:, 1, 0] = 0.0
        M[:, 0, 2:] = self.b * s
        M[:, 1, 2:] = -self.b * c
        M[:, 2:, 0] = M[:, 0, 2:]
        M[:, 2:, 1] = M[:, 1, 2:]
        dth = th[:, :, None] - th[:, None, :]
        M[:, 2:, 2:] = self.A * np.cos(dth)
        M[:, 2 + np.arange(N), 2 + np.arange(N)] += self.I
        thd2 = thd**2
        Q = np.zeros((B, N + 2))
        Q[:, 0] = -(self.b * c * thd2).sum(-1)
        Q[:, 1] = -(self.b * s * thd2).sum(-1)
        Q[:, 2:] = -np.einsum("jk,bjk,bk->bj", self.A, np.sin(dth), thd2)
        Q[:, 2:] += tau @ self.D
        ds = p.drag_scale if drag_scale is None else drag_scale
        ds = np.asarray(ds, float).reshape(-1, 1) if np.ndim(ds) else ds
        if np.any(np.asarray(ds) != 0):
            vx, vy = self.com_velocities(q, qd)
            vt = vx * c + vy * s
            vn = -vx * s + vy * c
            ln = self.l
            ft = -ds * ln * (p.c_t * np.abs(vt) * vt + p.k_t * vt)
            fn = -ds * ln * (p.c_n * np.abs(vn) * vn + p.k_n * vn)
            Fx = ft * c - fn * s
            Fy = ft * s + fn * c
            Q[:, 0] += Fx.sum(-1)
            Q[:, 1] += Fy.sum(-1)
            Q[:, 2:] += (Fx @ self.Lmat) * s - (Fy @ self.Lmat) * c
            Q[:, 2:] += -ds * p.c_rot * thd
        return np.linalg.solve(M, Q[..., None])[..., 0]

    def step(self, q, qd, m_left, m_right, dt, drag_scale=None, alpha_scale=1.0, integrator="euler"):
        """One step of length ``dt`` (s) with muscle activations held constant.

        ``integrator="euler"`` is semi-implicit (symplectic) Euler, one force evaluation per
        step (the default of the simulator); ``"rk4"`` is classical Runge-Kutta (4 evaluations,
        used to verify the mechanics).
        """

        def f(q_, qd_):
            tau = self.muscle_torque(q_, qd_, m_left, m_right, alpha_scale)
            return qd_, self.accel(q_, qd_, tau, drag_scale)

        if integrator == "euler":
            _, acc = f(q, qd)
            qd = qd + dt * acc
            return q + dt * qd, qd

        k1q, k1v = f(q, qd)
        k2q, k2v = f(q + 0.5 * dt * k1q, qd + 0.5 * dt * k1v)
        k3q, k3v = f(q + 0.5 * dt * k2q, qd + 0.5 * dt * k2v)
        k4q, k4v = f(q + dt * k3q, qd + dt * k3v)
        q = q + dt / 6.0 * (k1q + 2 * k2q + 2 * k3q + k4q)
        qd = qd + dt / 6.0 * (k1v + 2 * k2v + 2 * k3v + k4v)
        return q, qd
