"""Runs one candidate program inside the sandbox (executed as ``python -I _runner.py DIR``).

Order matters: limits first, then the network namespace, then the audit hook, and only
then the candidate's code, so nothing the candidate does can lift them. The data file in
``DIR`` holds the candidate's inputs only (no target of any split); the runner writes the
forecasts to ``out.npz`` and the parent scores them.
"""

import json
import os
import posix
import resource
import sys
import traceback
import types


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


# ----------------------------------------------------------------------------- the audit hook
# The hook and each function it calls survive a candidate that rewrites modules: none of them reads a
# global name or a closure (everything it uses, builtins included, is bound at definition as a default
# argument: immutable strings and tuples, builtin functions of the ``posix`` module and of
# ``str``/``bytes``, and the other guard functions), and a change of the ``__code__``, ``__defaults__``
# or ``__kwdefaults__`` of any of them is refused (:func:`_refuse_changing_the_guard`).


def _real_path(
    path,
    _getcwd=posix.getcwd,
    _readlink=posix.readlink,
    _lstat=posix.lstat,
    _type=type,
    _str=str,
    _bytes=bytes,
    _startswith=str.startswith,
    _split=str.split,
    _join=str.join,
    _decode=bytes.decode,
    _OSError=OSError,
):
    """Absolute path with every symlink resolved, resolved here (not by ``os.path``: plain Python,
    patchable); None for what is not a str/bytes path (a path-like object could answer differently
    each time it is asked)."""
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


def _under(r, root, _startswith=str.startswith):
    return r == root or _startswith(r, root + "/")


def _inside(path, workdir, _real=_real_path, _under=_under):
    r = _real(path)
    return r is not None and _under(r, workdir)


def _readable(path, workdir, roots, _real=_real_path, _under=_under, _files=_READ_FILES):
    r = _real(path)
    if r is None:
        return False
    if _under(r, workdir) or r in _files:
        return True
    for root in roots:
        if _under(r, root):
            return True
    return False


# Each check below takes ``(event, args, workdir, roots, guarded)`` and raises PermissionError for
# what a candidate may not do; the hook runs them in order.


def _refuse_blocked(
    event, args, workdir, roots, guarded, _blocked=_BLOCKED, _startswith=str.startswith, _E=PermissionError
):
    """No network, no processes, no native calls, no signals, no change of the limits."""
    if _startswith(event, _blocked):
        raise _E(
            f"sandbox: '{event}' is not allowed for candidate programs (no network, no processes, no native calls)"
        )


def _refuse_changing_the_guard(
    event, args, workdir, roots, guarded, _type=type, _len=len, _Fn=types.FunctionType, _E=PermissionError
):
    """No change of the code or the bound defaults of the hook or of a function it calls."""
    if event == "object.__setattr__" and _len(args) >= 2 and _type(args[0]) is _Fn:
        code = args[0].__code__
        for own in guarded:
            if code is own:
                raise _E(f"sandbox: changing the sandbox's audit hook ({args[1]}) is not allowed")


def _refuse_imports(
    event,
    args,
    workdir,
    roots,
    guarded,
    _private=_PRIVATE,
    _type=type,
    _str=str,
    _len=len,
    _split=str.split,
    _real=_real_path,
    _under=_under,
    _E=PermissionError,
):
    """None of the search's own packages; native code only from the standard library and site-packages."""
    if event == "import" and args and _type(args[0]) is _str and _split(args[0], ".")[0] in _private:
        raise _E(f"sandbox: importing {args[0]!r} is not allowed for candidate programs")
    if event == "import" and _len(args) >= 2 and args[1] is not None:
        # an extension module being loaded (native code, below this hook): only those
        # installed with the interpreter or in site-packages, never one from the folder
        r = _real(args[1])
        lib = False
        for root in roots:
            if r is not None and _under(r, root):
                lib = True
        if not lib or _under(r, workdir):
            raise _E(
                f"sandbox: loading native code from {args[1]!r} is not allowed (only extension modules "
                "of the standard library and site-packages)"
            )


def _refuse_open(
    event,
    args,
    workdir,
    roots,
    guarded,
    _type=type,
    _str=str,
    _int=int,
    _len=len,
    _wflags=_WRITE_FLAGS,
    _inside=_inside,
    _readable=_readable,
    _E=PermissionError,
):
    """Writes inside the candidate's folder only; reads there, in the standard library and site-packages."""
    if event == "open" and _len(args) >= 3 and _type(args[0]) is not _int:
        mode, flags = args[1], args[2] or 0
        writes = (_type(mode) is _str and ("w" in mode or "a" in mode or "x" in mode or "+" in mode)) or (
            flags & _wflags
        ) != 0
        if writes and not _inside(args[0], workdir):
            raise _E(f"sandbox: writing outside the sandbox folder is not allowed ({args[0]!r})")
        if not writes and not _readable(args[0], workdir, roots):
            raise _E(
                f"sandbox: reading outside the sandbox folder is not allowed ({args[0]!r}; only the "
                "candidate's folder, the standard library and site-packages are readable, by str path)"
            )


def _refuse_listing(
    event, args, workdir, roots, guarded, _type=type, _int=int, _readable=_readable, _E=PermissionError
):
    """Folder listings where reading is allowed only."""
    if event in ("os.listdir", "os.scandir") and args and _type(args[0]) is not _int:
        where = "." if args[0] is None else args[0]  # no argument: the current folder
        if not _readable(where, workdir, roots):
            raise _E(f"sandbox: listing folders outside the sandbox folder is not allowed ({where!r})")


def _refuse_path_events(
    event,
    args,
    workdir,
    roots,
    guarded,
    _path_events=_PATH_EVENTS,
    _type=type,
    _int=int,
    _inside=_inside,
    _E=PermissionError,
):
    """Removing, renaming, linking, changing modes or times: inside the candidate's folder only."""
    if event in _path_events:
        for a in args:
            if a is not None and _type(a) is not _int and not _inside(a, workdir):
                raise _E(f"sandbox: '{event}' outside the sandbox folder is not allowed ({a!r})")


#: the hook's checks, in the order it runs them
_CHECKS = (
    _refuse_blocked,
    _refuse_changing_the_guard,
    _refuse_imports,
    _refuse_open,
    _refuse_listing,
    _refuse_path_events,
)
#: every function of the guard besides the hook itself: none of them may be changed
_GUARD = (*_CHECKS, _real_path, _under, _inside, _readable)


def make_audit_hook(workdir, read_roots):
    """The candidate's audit hook: it runs :data:`_CHECKS` on every event, for the candidate's
    folder ``workdir`` and the folders it may read, ``read_roots``.

    It is built to survive a candidate that rewrites modules: the hook and every function of the
    guard it calls (:data:`_GUARD`) read no global name and no closure (everything they use is bound
    at creation as a default argument), they resolve paths themselves (symlinks included) instead of
    calling ``os.path`` (plain Python, patchable), and any change of a ``__code__``/``__defaults__`` of
    the hook or of those functions is refused. Paths must be ``str`` or ``bytes`` (a path-like object
    could answer differently each time it is asked).
    """

    def hook(event, args, _workdir=workdir, _roots=tuple(read_roots), _checks=_CHECKS, _guarded=None):
        for check in _checks:
            check(event, args, _workdir, _roots, _guarded)

    # the same function, knowing its own code object and the guard's (to refuse changes to them)
    guarded = (hook.__code__, *(f.__code__ for f in _GUARD))
    return types.FunctionType(hook.__code__, hook.__globals__, "hook", hook.__defaults__[:-1] + (guarded,))


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
