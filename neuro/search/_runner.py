"""Runs one candidate program inside the sandbox (executed as ``python -I _runner.py DIR``).

Order matters: limits first, then the network namespace, then the audit hook, and only
then the candidate's code, so nothing the candidate does can lift them. The data file in
``DIR`` holds the candidate's inputs only (no target of any split); the runner writes the
forecasts to ``out.npz`` and the parent scores them.
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


_BLOCKED = (
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.sendmsg",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.fork",
    "os.forkpty",
    "pty.spawn",
    "os.spawn",
    # signals to other processes (the search itself), lifting the resource limits (root may)
    "os.kill",
    "os.killpg",
    "signal.pthread_kill",
    "resource.setrlimit",
    "resource.prlimit",
    # native calls through ctypes (could bypass every check here), C-level file access,
    # symlinks (a link inside the folder pointing outside it)
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.call_function",
    "ctypes.cdata",
    "ctypes.string_at",
    "ctypes.wstring_at",
    "ctypes.PyObj_FromPtr",
    "sqlite3.connect",
    "sqlite3.load_extension",
    "os.symlink",
)
# the search's own packages: a candidate must not import them (e.g. to rebuild the task and
# read its test or OOD split)
_PRIVATE = ("neuro", "scimech", "ocean", "astro", "evaluate")
_PATH_EVENTS = (
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.mkdir",
    "shutil.rmtree",
    "shutil.move",
    "os.chmod",
    "os.link",
    "os.truncate",
    "os.chown",
    "os.utime",
)
_READ_FILES = ("/dev/null", "/dev/urandom")


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _read_roots():
    """Folders a candidate may read besides its own: the interpreter's standard library and
    the environment's site-packages (what importing numpy & co. needs)."""
    import site
    import sysconfig

    paths = [sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    paths += site.getsitepackages()
    return tuple(sorted({os.path.realpath(p) for p in paths if p and os.path.isdir(p)}))


def make_audit_hook(workdir, read_roots):
    """The candidate's audit hook.

    It is built to survive a candidate that rewrites modules: everything it uses is bound at
    creation as a default argument (immutable strings and tuples, builtin functions of the
    ``posix`` module and of ``str``/``bytes``), it resolves paths itself (symlinks included)
    instead of calling ``os.path`` (plain Python, patchable), and it refuses any change of a
    ``__code__``/``__defaults__`` of the hook itself. Paths must be ``str`` or ``bytes`` (a
    path-like object could answer differently each time it is asked).
    """
    import posix
    import types

    def hook(
        event,
        args,
        _workdir=workdir,
        _roots=tuple(read_roots),
        _files=_READ_FILES,
        _blocked=_BLOCKED,
        _private=_PRIVATE,
        _path_events=_PATH_EVENTS,
        _getcwd=posix.getcwd,
        _readlink=posix.readlink,
        _lstat=posix.lstat,
        _type=type,
        _str=str,
        _bytes=bytes,
        _int=int,
        _len=len,
        _startswith=str.startswith,
        _split=str.split,
        _join=str.join,
        _decode=bytes.decode,
        _E=PermissionError,
        _OSError=OSError,
        _wflags=_WRITE_FLAGS,
        _Fn=types.FunctionType,
        _self_code=None,
    ):
        def real(path):
            """Absolute path with every symlink resolved; None for what is not a str/bytes path."""
            if _type(path) is _bytes:
                path = _decode(path, "utf-8", "surrogateescape")
            if _type(path) is not _str:
                return None
            if not _startswith(path, "/"):
                path = _getcwd() + "/" + path
            todo = [c for c in _split(path, "/") if c]
            parts = []
            hops = 0
            while todo:
                c = todo.pop(0)
                if c == ".":
                    continue
                if c == "..":
                    if parts:
                        parts.pop()
                    continue
                cand = "/" + _join("/", parts + [c])
                try:
                    is_link = (_lstat(cand).st_mode & 0o170000) == 0o120000
                except _OSError:
                    is_link = False
                if is_link:
                    hops += 1
                    if hops > 40:
                        return None
                    target = _readlink(cand)
                    if _startswith(target, "/"):
                        parts = []
                    todo = [t for t in _split(target, "/") if t] + todo
                    continue
                parts.append(c)
            return "/" + _join("/", parts)

        def under(r, root):
            return r == root or _startswith(r, root + "/")

        def inside(path):
            r = real(path)
            return r is not None and under(r, _workdir)

        def readable(path):
            r = real(path)
            if r is None:
                return False
            if under(r, _workdir) or r in _files:
                return True
            for root in _roots:
                if under(r, root):
                    return True
            return False

        if _startswith(event, _blocked):
            raise _E(
                f"sandbox: '{event}' is not allowed for candidate programs (no network, no processes, no native calls)"
            )
        if (
            event == "object.__setattr__"
            and _len(args) >= 2
            and _type(args[0]) is _Fn
            and (args[0].__code__ is _self_code)
        ):
            raise _E(f"sandbox: changing the sandbox's audit hook ({args[1]}) is not allowed")
        if event == "import" and args and _type(args[0]) is _str and _split(args[0], ".")[0] in _private:
            raise _E(f"sandbox: importing {args[0]!r} is not allowed for candidate programs")
        if event == "import" and _len(args) >= 2 and args[1] is not None:
            # an extension module being loaded (native code, below this hook): only those
            # installed with the interpreter or in site-packages, never one from the folder
            r = real(args[1])
            lib = False
            for root in _roots:
                if r is not None and under(r, root):
                    lib = True
            if not lib or under(r, _workdir):
                raise _E(
                    f"sandbox: loading native code from {args[1]!r} is not allowed (only extension modules "
                    "of the standard library and site-packages)"
                )
        if event == "open" and _len(args) >= 3 and _type(args[0]) is not _int:
            mode, flags = args[1], args[2] or 0
            writes = (_type(mode) is _str and ("w" in mode or "a" in mode or "x" in mode or "+" in mode)) or (
                flags & _wflags
            ) != 0
            if writes and not inside(args[0]):
                raise _E(f"sandbox: writing outside the sandbox folder is not allowed ({args[0]!r})")
            if not writes and not readable(args[0]):
                raise _E(
                    f"sandbox: reading outside the sandbox folder is not allowed ({args[0]!r}; only the "
                    "candidate's folder, the standard library and site-packages are readable, by str path)"
                )
        if event in ("os.listdir", "os.scandir") and args and _type(args[0]) is not _int:
            where = "." if args[0] is None else args[0]  # no argument: the current folder
            if not readable(where):
                raise _E(f"sandbox: listing folders outside the sandbox folder is not allowed ({where!r})")
        if event in _path_events:
            for a in args:
                if a is not None and _type(a) is not _int and not inside(a):
                    raise _E(f"sandbox: '{event}' outside the sandbox folder is not allowed ({a!r})")

    # the same function, knowing its own code object (to refuse changes to itself)
    return types.FunctionType(hook.__code__, hook.__globals__, "hook", hook.__defaults__[:-1] + (hook.__code__,))


def main(workdir):
    os.chdir(workdir)
    with open("config.json") as f:
        cfg = json.load(f)
    _limits(cfg)
    guard = _netns()
    import numpy as np

    data = dict(np.load("data.npz"))  # inputs only: the parent kept every target
    from evaluate import predict_candidate  # copied next to this runner

    hook = make_audit_hook(os.path.realpath(workdir), _read_roots())
    while workdir in sys.path:  # nothing the candidate writes here is importable as a module
        sys.path.remove(workdir)
    sys.addaudithook(hook)
    del hook
    result = {"network_guard": guard + "+audit"}
    try:
        with open("candidate.py") as f:
            src = f.read()
        ns = {"__name__": "candidate"}
        exec(compile(src, "candidate.py", "exec"), ns)
        arrays = predict_candidate(ns, data, cfg)
        np.savez(os.path.join(workdir, "out.npz"), **arrays)  # absolute: the candidate may have chdir-ed
        result.update(ok=True)
    except MemoryError:
        result.update(ok=False, status="memory", error="MemoryError: the candidate exceeded the address-space limit")
    except BaseException as err:  # noqa: BLE001 - every failure is a failed node
        tb = traceback.format_exc(limit=8)
        result.update(ok=False, status="error", error=f"{type(err).__name__}: {err}", traceback=tb[-4000:])
    with open(os.path.join(workdir, "result.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    sys.path.insert(0, sys.argv[1])
    main(sys.argv[1])
