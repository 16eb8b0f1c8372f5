"""Hostile candidate programs are contained by the neuro sandbox and become failed results:
writes outside the sandbox folder, deleting files outside it, reads outside it (the system,
the repository, the search's own data file), importing the search's own packages (to rebuild
the task and read its test split), fork bombs, tampering with the guard itself. A candidate
that walks ``gc`` and the frames of its process finds no held-out target: they never enter
its process."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from neuro.search.sandbox import SandboxLimits, run_in_sandbox, write_data
from neuro.search.tree import evaluate_candidate

MODEL = """
import numpy as np
class Model:
    def fit(self, s, st, meta): return self
    def predict(self, c, sc, sf): return np.zeros((len(c), sf.shape[1], c.shape[2]))
"""


@pytest.fixture(scope="module")
def data_file(candidate_data_file):
    return candidate_data_file


def test_a_well_behaved_candidate_still_scores(data_file):
    r = run_in_sandbox(MODEL, data_file, stage="quick")
    assert r.ok, r.error  # the guards do not get in the way of numpy, or of the runner's own output


def test_write_outside_the_sandbox_is_blocked(data_file, tmp_path):
    target = tmp_path / "outside.txt"
    r = run_in_sandbox(f"open({str(target)!r}, 'w').write('x')\n" + MODEL, data_file, stage="quick")
    assert not r.ok and "outside the sandbox" in r.error
    assert not target.exists()


def test_deleting_outside_the_sandbox_is_blocked(data_file, tmp_path):
    victim = tmp_path / "keep.txt"
    victim.write_text("precious")
    r = run_in_sandbox(f"import os\nos.remove({str(victim)!r})\n" + MODEL, data_file, stage="quick")
    assert not r.ok and "outside the sandbox" in r.error
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("module", ["neuro.tasks", "neuro.search.tree", "scimech.run.results"])
def test_importing_search_internals_is_blocked(data_file, module):
    r = run_in_sandbox(f"import {module}\n" + MODEL, data_file, stage="quick")
    assert not r.ok and "importing" in r.error and module.split(".")[0] in r.error


def test_fork_bomb_is_contained(data_file):
    code = "import os\nwhile True:\n    os.fork()\n" + MODEL
    r = run_in_sandbox(code, data_file, SandboxLimits(wall_seconds=10), stage="quick")
    assert not r.ok and "os.fork" in r.error  # the first fork is refused: no process is ever created


# ------------------------------------------------------------------ reads outside the folder
REPO = Path(__file__).resolve().parents[2]


def _node(code: str, data_file) -> dict:
    """Evaluate a program exactly as the tree search does for one node."""
    return evaluate_candidate(code, str(data_file), str(data_file), asdict(SandboxLimits(wall_seconds=30)), None, 1.5)


@pytest.mark.parametrize("target", ["/etc/passwd", "repo", "data"])
def test_reading_outside_the_folder_is_a_failed_node(data_file, target):
    # the system, the repository (the search's own code) and the search's full data file,
    # which holds the held-out targets
    path = {"/etc/passwd": "/etc/passwd", "repo": str(REPO / "neuro" / "tasks.py"), "data": str(data_file)}[target]
    assert Path(path).exists()
    res = _node(f"SECRET = open({path!r}, 'rb').read()\n" + MODEL, data_file)
    assert res["status"] == "failed" and "reading outside the sandbox folder" in res["error"], res["error"]
    res = _node(f"import os\nfd = os.open({path!r}, os.O_RDONLY)\n" + MODEL, data_file)  # the low-level call too
    assert res["status"] == "failed" and "reading outside" in res["error"]


@pytest.mark.parametrize("how", ["path", "chdir"])
def test_listing_the_repository_is_refused(data_file, how):
    code = (
        f"import os\nNAMES = os.listdir({str(REPO)!r})\n"
        if how == "path"
        else f"import os\nos.chdir({str(REPO)!r})\nNAMES = os.listdir()\n"
    )
    res = _node(code + MODEL, data_file)
    assert res["status"] == "failed" and "listing folders outside" in res["error"], res["error"]


def test_reading_its_own_folder_and_libraries_still_works(data_file):
    code = (
        "import json, random, pathlib\nimport numpy.linalg\n"
        "open('scratch.txt', 'w').write('x')\nassert open('scratch.txt').read() == 'x'\n"
        "assert sorted(__import__('numpy').load('data.npz').files)\n" + MODEL
    )
    res = _node(code, data_file)
    assert res["status"] == "ok", res["error"]


# ---------------------------------------------------- the held-out targets never reach the candidate
TARGET_SENTINEL = np.float32(-4321.0625)  # exactly representable in float32 and in float64
TRAIN_SENTINEL = np.float32(8765.4375)

SEARCHER = """
import gc, sys
import numpy as np

def _arrays(obj, depth=0):
    if isinstance(obj, np.ndarray):
        yield obj
    elif depth < 3 and isinstance(obj, dict):
        for v in list(obj.values()):
            yield from _arrays(v, depth + 1)
    elif depth < 3 and isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _arrays(v, depth + 1)
    elif depth < 3 and hasattr(obj, "__dict__") and isinstance(getattr(obj, "__dict__", None), dict):
        yield from _arrays(obj.__dict__, depth + 1)

def scan(value):
    roots = list(gc.get_objects())
    f = sys._getframe()
    while f is not None:  # every frame of the runner: its locals and globals
        roots += [f.f_locals, f.f_globals]
        f = f.f_back
    roots += list(sys.modules.values())
    for r in roots:
        for a in _arrays(r):
            if a.dtype.kind == "f" and a.size and np.any(a == value):
                return a
    return None

class Model:
    def fit(self, s, st, meta):
        assert scan(TRAIN_VALUE) is not None, "the scan is blind: it did not find the training sentinel"
        self.leak = scan(TARGET_VALUE)
        return self
    def predict(self, c, sc, sf):
        if self.leak is not None:  # cheat with the held-out targets if they were reachable
            return np.full((len(c), sf.shape[1], c.shape[2]), TARGET_VALUE)
        return np.zeros((len(c), sf.shape[1], c.shape[2]))
""".replace("TRAIN_VALUE", repr(float(TRAIN_SENTINEL))).replace("TARGET_VALUE", repr(float(TARGET_SENTINEL)))


@pytest.fixture(scope="module")
def sentinel_file(tmp_path_factory):
    rng = np.random.default_rng(1)
    d = {"train/series": rng.normal(size=(2, 20, 3)).astype(np.float32), "train/stim": np.zeros((2, 20, 5), np.float32)}
    d["train/series"][1, 7, 2] = TRAIN_SENTINEL
    for sp in ("val", "test", "ood_lesion"):
        d[f"{sp}/context"] = rng.normal(size=(4, 4, 3)).astype(np.float32)
        d[f"{sp}/stim_context"] = np.zeros((4, 4, 5), np.float32)
        d[f"{sp}/stim_future"] = np.zeros((4, 2, 5), np.float32)
        d[f"{sp}/target"] = np.full((4, 2, 3), TARGET_SENTINEL, np.float32)
    return write_data(d, tmp_path_factory.mktemp("sentinel") / "data.npz")


@pytest.mark.parametrize("stage", ["quick", "full"])
def test_walking_gc_and_frames_finds_no_held_out_target(sentinel_file, stage):
    r = run_in_sandbox(SEARCHER, sentinel_file, SandboxLimits(wall_seconds=60), stage=stage)
    assert r.ok, r.error  # the scan ran and found the training sentinel (else fit() raises)
    # it did not find the targets: it forecast 0, so every MAE is |0 - sentinel| exactly (a
    # float32 sentinel with few mantissa bits: the float64 mean of identical values is exact)
    assert set(r.metrics) == {"val", "test", "ood_lesion"}
    for sp in r.metrics:
        assert r.metrics[sp] == abs(float(TARGET_SENTINEL)), (sp, r.metrics[sp])


# ------------------------------------------------------ tampering with the guard itself
@pytest.mark.parametrize(
    "attack, needle",
    [
        # rewrite the runner's module-level configuration, then fork
        ("import sys, os\nm = sys.modules['__main__']\nm._BLOCKED = ()\nm._PRIVATE = ()\nos.fork()\n", "os.fork"),
        # replace the hook's bound configuration
        (
            "import gc\nh = [o for o in gc.get_objects() if getattr(o, '__name__', '') == 'hook']\nassert h\n"
            "h[0].__defaults__ = ()\n",
            "audit hook",
        ),
        # make os.path lie about where a path leads
        (
            "import os, posixpath\nposixpath.realpath = os.path.realpath = lambda p, **k: '/tmp'\n"
            "open('/etc/passwd').read()\n",
            "reading outside",
        ),
        # a symlink inside the folder to a file outside it
        ("import os\nos.symlink('/etc/passwd', 'passwd')\nopen('passwd').read()\n", "os.symlink"),
        # native code through ctypes
        ("import ctypes\nctypes.CDLL(None).getpid()\n", "ctypes"),
        # kill the search that runs it; lift its own memory limit (root could)
        ("import os\nos.kill(os.getppid(), 9)\n", "os.kill"),
        ("import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))\n", "setrlimit"),
    ],
)
def test_tampering_with_the_guard_is_a_failed_node(data_file, attack, needle):
    res = _node(attack + MODEL, data_file)
    assert res["status"] == "failed" and needle in res["error"], res["error"]


def test_the_same_walk_finds_the_targets_when_they_share_its_process(sentinel_file, tmp_path):
    # control: fitted and scored in one process (the trusted in-process path used for the
    # baselines), the walk does reach the targets and cheats to MAE 0, so the test above would
    # see a leak. A small fresh process (numpy + evaluate.py only) keeps the walk short.
    import json
    import subprocess
    import sys

    (tmp_path / "searcher.py").write_text(SEARCHER)
    script = (
        f"import sys, json, numpy as np\nsys.path.insert(0, {str(REPO / 'neuro' / 'search')!r})\n"
        "from evaluate import run_candidate\n"
        f"ns = {{}}\nexec(open({str(tmp_path / 'searcher.py')!r}).read(), ns)\n"
        f"data = dict(np.load({str(sentinel_file)!r}))\n"
        "print(json.dumps(run_candidate(ns, data, {'stage': 'quick'})[0]))\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    metrics = json.loads(out.stdout.strip().splitlines()[-1])
    assert metrics["val"] == 0.0 and metrics["test"] == 0.0


def test_a_forged_result_file_is_not_trusted(data_file):
    # the candidate writes the runner's output files itself, claims a perfect score and exits
    # before the runner can: the parent scores what is in out.npz, finds a wrong shape
    code = (
        "import json, os\nimport numpy as np\n"
        "np.savez('out.npz', **{'pred/val': np.zeros((1, 1, 1))})\n"
        "json.dump({'ok': True, 'metrics': {'val': 0.0}}, open('result.json', 'w'))\nos._exit(0)\n"
    )
    r = run_in_sandbox(code, data_file, stage="quick")
    assert not r.ok and "shape" in r.error and r.metrics == {}


def test_loading_native_code_from_the_folder_is_refused(data_file):
    # a real extension module, copied into the candidate's folder and loaded from there with
    # importlib's extension loader: native code that would run below the audit hook
    import _decimal

    code = (
        "import importlib.machinery, importlib.util, shutil\n"
        f"shutil.copy({_decimal.__file__!r}, 'evil.so')\n"
        "loader = importlib.machinery.ExtensionFileLoader('_decimal', 'evil.so')\n"
        "spec = importlib.util.spec_from_file_location('_decimal', 'evil.so', loader=loader)\n"
        "importlib.util.module_from_spec(spec)\n" + MODEL
    )
    res = _node(code, data_file)
    assert res["status"] == "failed" and "loading native code" in res["error"], res["error"]
    res = _node("import _decimal, decimal\n" + MODEL, data_file)  # the installed one still loads
    assert res["status"] == "ok", res["error"]
