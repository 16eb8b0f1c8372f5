"""The sandbox turns hangs, memory bombs, crashes and network access into failed results."""

import socket
import threading
import time

import pytest

from neuro.search.sandbox import SandboxLimits, run_in_sandbox


@pytest.fixture(scope="module")
def data_file(candidate_data_file):
    return candidate_data_file


GOOD = """
import numpy as np
class Model:
    def fit(self, s, st, meta): return self
    def predict(self, c, sc, sf): return np.zeros((len(c), sf.shape[1], c.shape[2]))
"""


def test_good_program_scores(data_file):
    r = run_in_sandbox(GOOD, data_file, stage="quick")
    assert r.ok, r.error
    assert r.metrics["val"] == pytest.approx(1.0)  # |0 - 1| everywhere


def test_infinite_loop_is_killed(data_file):
    t0 = time.perf_counter()
    r = run_in_sandbox("while True:\n    pass\n", data_file, SandboxLimits(wall_seconds=3, cpu_seconds=30))
    assert not r.ok and r.status == "timeout"
    assert time.perf_counter() - t0 < 20  # killed near the 3 s limit, not left running


def test_memory_bomb_fails(data_file):
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(50_000_000))\n"
    r = run_in_sandbox(code, data_file, SandboxLimits(memory_bytes=1 << 30, wall_seconds=30))
    assert not r.ok and r.status in ("memory", "crashed"), (r.status, r.error)


def test_crash_and_malformed_programs_fail(data_file):
    assert run_in_sandbox("raise RuntimeError('boom')", data_file).status == "error"
    assert "Model" in run_in_sandbox("x = 1", data_file).error
    assert run_in_sandbox("def broken(:", data_file).status == "error"


def test_socket_to_loopback_is_blocked(data_file):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    accepted = []

    def accept():
        t_end = time.time() + 15
        while time.time() < t_end:
            try:
                conn, _ = srv.accept()
                accepted.append(conn)
                return
            except OSError:
                continue

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    code = f"import socket\ns = socket.socket(); s.settimeout(2); s.connect(('127.0.0.1', {port}))\n"
    r = run_in_sandbox(code, data_file)
    th.join(timeout=1)
    srv.close()
    assert not r.ok
    assert not accepted, "the candidate reached the loopback server"


def test_candidate_inputs_hold_no_target():
    import numpy as np

    from neuro.search.evaluate import candidate_inputs, held_out, score_predictions

    z = np.zeros(1)
    data = {
        k: z
        for k in (
            "train/series",
            "train/stim",
            "meta/dt",
            "val/context",
            "val/stim_context",
            "val/stim_future",
            "val/target",
            "ood_lesion/context",
            "ood_lesion/target",
            "probe/swim_context",
            "probe/swim_stim_future",
            "probe/swim_target",
            "probe/impulse_context",
            "probe/impulse_stim_future",
            "probe/impulse_true",
        )
    }
    assert sorted(held_out(data)) == ["ood_lesion/target", "probe/impulse_true", "probe/swim_target", "val/target"]
    assert not any(k.endswith(("target", "_true")) for k in candidate_inputs(data))
    # scoring by hand: |pred - target| averaged over windows and units, per step
    tg = {"val/target": np.array([[[1.0, 3.0], [0.0, 0.0]]])}  # (1 window, H=2, N=2)
    metrics, arrays = score_predictions({"pred/val": np.array([[[0.0, 0.0], [1.0, -1.0]]])}, tg)
    np.testing.assert_allclose(arrays["mae/val"], [2.0, 1.0])
    assert metrics["val"] == pytest.approx(1.5)


def _codes(code):
    """A code object and every code object nested in it (comprehensions, inner functions)."""
    import types

    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def test_the_guard_reads_no_global_and_no_closure():
    """The hook and every function of the guard it calls take what they use from their bound
    defaults: a candidate that rewrites the runner's module (``sys.modules['__main__']``) or a
    builtin's name changes nothing they do (read from their bytecode: no global load anywhere)."""
    import dis

    from neuro.search import _runner

    hook = _runner.make_audit_hook("/nonexistent/workdir", ("/nonexistent/lib",))
    guard = (hook, *_runner._GUARD)
    assert set(_runner._CHECKS) <= set(guard) and len(guard) >= 10
    for f in guard:
        assert f.__closure__ is None, f.__name__
        for code in _codes(f.__code__):
            loads = {i.opname for i in dis.get_instructions(code)} & {"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL"}
            assert not loads, (f.__name__, code.co_name, loads)
    # the hook knows every code object of the guard, its own included
    assert {id(c) for c in hook.__defaults__[-1]} == {id(f.__code__) for f in guard}


@pytest.mark.parametrize(
    "attack",
    [
        # a check of the hook made to accept everything, through the runner's module
        "import sys\nm = sys.modules['__main__']\nm._refuse_open.__code__ = (lambda *a, **k: None).__code__\n",
        # the path resolver made to answer 'inside' for any path
        "import sys\nm = sys.modules['__main__']\nm._real_path.__defaults__ = ()\n",
        "import gc\nf = [o for o in gc.get_objects() if getattr(o, '__name__', '') == '_readable']\nassert f\n"
        "f[0].__kwdefaults__ = {}\n",
    ],
)
def test_changing_a_function_of_the_guard_is_refused(data_file, attack):
    r = run_in_sandbox(attack + GOOD, data_file, stage="quick")
    assert not r.ok and "audit hook" in r.error, r.error
