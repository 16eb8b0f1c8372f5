"""Runs one candidate program inside the sandbox (executed as ``python -I _runner.py DIR``).

Order matters: limits first, then the network namespace, then the audit hook, and only
then the candidate's code, so nothing the candidate does can lift them.
"""

import json
import os
import resource
import sys
import traceback


def _limits(cfg):
    mem = int(cfg["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    cpu = int(cfg["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    fs = int(cfg["file_bytes"])
    resource.setrlimit(resource.RLIMIT_FSIZE, (fs, fs))


def _netns():
    """Enter a fresh network namespace (only loopback, down): needs root or user namespaces."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        CLONE_NEWNET, CLONE_NEWUSER = 0x40000000, 0x10000000
        if libc.unshare(CLONE_NEWNET) == 0:
            return "netns"
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
            return "userns+netns"
    except Exception:
        pass
    return "none"


_BLOCKED = ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
            "socket.gethostbyname", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
            "os.fork", "os.forkpty", "pty.spawn", "os.spawn")


# the search's own packages: a candidate must not import them (e.g. to rebuild the task and
# read its test or OOD split)
_PRIVATE = ("neuro", "scimech", "ocean", "astro", "evaluate")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_WORKDIR = [""]


def _inside(path) -> bool:
    try:
        real = os.path.realpath(os.fsdecode(path) if not isinstance(path, int) else "")
    except (TypeError, ValueError):
        return False
    root = _WORKDIR[0]
    return real == root or real.startswith(root + os.sep)


def _audit(event, args):
    if event.startswith(_BLOCKED):
        raise PermissionError(f"sandbox: '{event}' is not allowed for candidate programs (no network, no processes)")
    if event == "import" and args and isinstance(args[0], str) and args[0].split(".")[0] in _PRIVATE:
        raise PermissionError(f"sandbox: importing {args[0]!r} is not allowed for candidate programs")
    if event == "open" and len(args) >= 3 and not isinstance(args[0], int):
        mode, flags = args[1], args[2] or 0
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(flags & _WRITE_FLAGS)
        if writes and not _inside(args[0]):
            raise PermissionError(f"sandbox: writing outside the sandbox folder is not allowed ({args[0]!r})")
    if event in ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "shutil.rmtree", "shutil.move", "os.chmod",
                 "os.symlink", "os.link", "os.truncate"):
        paths = [a for a in args if isinstance(a, (str, bytes, os.PathLike))]
        if any(not _inside(p) for p in paths):
            raise PermissionError(f"sandbox: '{event}' outside the sandbox folder is not allowed ({paths!r})")


def main(workdir):
    os.chdir(workdir)
    with open("config.json") as f:
        cfg = json.load(f)
    _limits(cfg)
    guard = _netns()
    import numpy as np

    data = dict(np.load("data.npz"))
    from evaluate import run_candidate  # copied next to this runner

    _WORKDIR[0] = os.path.realpath(workdir)
    sys.addaudithook(_audit)
    result = {"network_guard": guard + "+audit"}
    try:
        with open("candidate.py") as f:
            src = f.read()
        ns = {"__name__": "candidate"}
        exec(compile(src, "candidate.py", "exec"), ns)
        metrics, arrays = run_candidate(ns, data, cfg)
        result.update(ok=True, metrics=metrics)
        np.savez("out.npz", **arrays)
    except MemoryError:
        result.update(ok=False, status="memory", error="MemoryError: the candidate exceeded the address-space limit")
    except BaseException as err:  # noqa: BLE001 - every failure is a failed node
        tb = traceback.format_exc(limit=8)
        result.update(ok=False, status="error", error=f"{type(err).__name__}: {err}", traceback=tb[-4000:])
    with open("result.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    sys.path.insert(0, sys.argv[1])
    main(sys.argv[1])
