"""Start launched workers from a process that has already imported torch.

A worker started as ``python -m partplan.runtime.worker CONFIG`` spends about
2 s of CPU importing torch before it does anything; a 4-process job pays that
four times, and a test suite that launches a few hundred workers pays it a few
hundred times. :func:`start_worker` instead forks each worker from a
*zygote*: multiprocessing's fork server, started once per launching process
with torch and ``torch.distributed`` imported. The fork inherits the imports;
the worker then runs exactly what ``python -m partplan.runtime.worker`` runs.

What a worker sees is the same either way:

* its environment is the launcher's ``env`` for that rank (the zygote's own
  environment is replaced before the worker runs);
* it is the leader of a new session (``setsid``), so the launcher's
  ``killpg(pid, ...)`` reaches it and its children;
* its stdout and stderr go to the rank's file;
* ``ps`` shows it as ``python -m partplan.runtime.worker CONFIG`` (its
  ``/proc/PID/environ`` is the fork server's initial one: the variables it
  runs with are those of ``os.environ`` inside it);
* it dies with its launcher: it asks for ``SIGKILL`` when its parent dies
  (:func:`partplan.runtime.worker.die_with_launcher`; its parent is the fork
  server, which exits when the launcher is gone), and a thread waiting on a
  pidfd of the launcher SIGKILLs it the moment the launcher ends.

The zygote is used only where it cannot change what a worker does: on Linux,
while the launcher's environment is the one the fork server was started
with (variables such as ``MKL_ENABLE_INSTRUCTIONS`` are read when torch is
imported), when the rank's ``env`` changes no variable outside
:data:`PER_RANK`, and when no start-up code could read the rank's environment
(no ``PYTHONPATH``, ``PYTHONSTARTUP``, ``sitecustomize`` or ``usercustomize``). Otherwise the
worker is a fresh interpreter (:class:`subprocess.Popen`). When the launcher's environment
changed since the fork server started, the server is restarted (once none of its workers runs).
"""
from __future__ import annotations

import os
import runpy
import subprocess
import sys
import threading
import types
import weakref

#: modules imported once in the fork server (what every worker imports first)
PRELOAD = ("torch", "torch.distributed")

#: variables a rank's environment may set or change without a fresh interpreter:
#: read by the worker and torch.distributed after start-up, never at import
PER_RANK = frozenset({
    "RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "GLOO_SOCKET_IFNAME", "OMP_NUM_THREADS", "PARTPLAN_LAUNCHED", "PARTPLAN_LAUNCHER_PID", "PARTPLAN_JOB_DIR",
    "PARTPLAN_STORE", "PARTPLAN_SECRET", "PARTPLAN_QUIET",
})

#: variables that make a fresh interpreter run extra code at start-up (no zygote when set)
STARTUP_CODE = ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE")

_lock = threading.Lock()
_state: dict = {}
_live: weakref.WeakSet = weakref.WeakSet()   # workers forked by the running server


class ForkedWorker:
    """The part of :class:`subprocess.Popen` the launcher uses (``pid``,
    ``poll``, ``wait``, ``returncode``: negative for a signal), over a
    :class:`multiprocessing.Process` forked by the zygote."""

    def __init__(self, proc):
        self._proc = proc
        self.pid = proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.exitcode

    def poll(self) -> int | None:
        return self._proc.exitcode

    def wait(self, timeout: float | None = None) -> int | None:
        self._proc.join(timeout)
        return self._proc.exitcode


def _context():
    """The fork-server context (started with :data:`PRELOAD` on first use), or
    None where there is none (not Linux, or it cannot start)."""
    with _lock:
        if "ctx" not in _state:
            ctx = None
            if sys.platform.startswith("linux") and _popen_forkserver is not None:
                try:
                    import multiprocessing as mp
                    ctx = mp.get_context("forkserver")
                    ctx.set_forkserver_preload(list(PRELOAD))
                except (ImportError, ValueError):  # pragma: no cover
                    ctx = None
            _state["ctx"] = ctx
            _state["env"] = dict(os.environ)
        return _state["ctx"]


try:  # POSIX: the fork-server start method
    from multiprocessing import context as _mp_context
    from multiprocessing import popen_forkserver as _popen_forkserver
except ImportError:  # pragma: no cover - no fork server on this platform
    _popen_forkserver = None

if _popen_forkserver is not None:
    class _NoMainPopen(_popen_forkserver.Popen):
        """The fork server's Popen without the parent's ``__main__`` in the child's
        preparation data: multiprocessing re-imports a parent's main script in the
        child (which would run a user's unguarded script, or the console script,
        again); a worker needs nothing from it."""

        def _launch(self, process_obj):
            main = sys.modules.get("__main__")
            sys.modules["__main__"] = types.ModuleType("__main__")  # no __file__, no __spec__: no fix-up
            try:
                super()._launch(process_obj)
            finally:
                sys.modules["__main__"] = main

    class WorkerProcess(_mp_context.ForkServerProcess):
        """A process forked by the fork server through :class:`_NoMainPopen`."""

        @staticmethod
        def _Popen(process_obj):
            return _NoMainPopen(process_obj)


def _zygote_fits(env: dict) -> bool:
    """True when a worker forked from the zygote starts as a fresh interpreter
    with ``env`` would (see the module doc)."""
    # code a fresh interpreter runs at start-up may read the rank's environment (a sitecustomize
    # on PYTHONPATH, PYTHONSTARTUP): it would run once in the fork server, not in each worker
    if any(os.environ.get(v) for v in STARTUP_CODE) or {"sitecustomize", "usercustomize"} & set(sys.modules):
        return False
    if _context() is None:
        return False
    if dict(os.environ) != _state["env"] and not _restart():
        return False
    base = _state["env"]
    changed = {k for k in set(env) | set(base) if env.get(k) != base.get(k)}
    return changed <= PER_RANK


def _restart() -> bool:
    """Stop the fork server (started under another environment) so that the next
    start brings up one under today's; False where it cannot be stopped, or while
    workers it forked still run (they would lose their parent)."""
    from multiprocessing import forkserver
    stop = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)
    if stop is None or any(w.poll() is None for w in list(_live)):
        return False
    with _lock:
        stop()
        _state["env"] = dict(os.environ)
    return True


def start_worker(argv: list[str], env: dict, out_file):
    """Start one worker running ``python -m partplan.runtime.worker *argv``
    with environment ``env``, stdout and stderr to the open file ``out_file``
    (the forked worker opens it again by its name); a new session. Returns a
    :class:`ForkedWorker` or a :class:`subprocess.Popen`."""
    if _zygote_fits(env):
        try:
            with _lock:
                proc = WorkerProcess(target=_child, args=(list(argv), dict(env), str(out_file.name)), daemon=False)
                proc.start()
            worker = ForkedWorker(proc)
            _live.add(worker)
            return worker
        except (OSError, EOFError):  # the fork server could not start or fork, or died while it forked
            pass                     # (EOFError: unexpected EOF on its pipe): a fresh interpreter instead
    return subprocess.Popen([sys.executable, "-m", "partplan.runtime.worker", *argv], env=env,
                            stdout=out_file, stderr=subprocess.STDOUT, start_new_session=True)


def _show_cmdline(args: list[str]) -> None:  # pragma: no cover - runs in the forked worker
    """Show ``args`` as this process's command line (``ps``, ``pgrep -f``,
    ``/proc/PID/cmdline``) instead of the fork server's: written over the argv
    area the kernel reports (``arg_start``..``arg_end`` of ``/proc/self/stat``),
    as setproctitle does on Linux; cut to that area's length."""
    import ctypes
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])      # fields 48 and 49 (field 3 is fields[0])
    except (OSError, ValueError, IndexError):
        return
    if not 0 < start < end:
        return
    data = b"\0".join(a.encode(errors="replace") for a in args)[: end - start - 1]
    ctypes.memmove(start, data + b"\0" * (end - start - len(data)), end - start)


def _release_fork_server() -> None:  # pragma: no cover - runs in the forked worker
    """Close this worker's copy of the launcher's end of the fork server's
    liveness pipe (multiprocessing hands it to every child so that children
    could fork too): while any worker held it, the fork server would never see
    the launcher die, never exit, and the workers' death signal (tied to the
    fork server) would never come."""
    from multiprocessing import forkserver
    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if isinstance(fd, int):
        try:
            os.close(fd)
        except OSError:
            pass
        server._forkserver_alive_fd = None


def _die_with(pid: int) -> None:  # pragma: no cover - runs in the forked worker
    """SIGKILL this worker as soon as process ``pid`` (the launcher) ends: a
    daemon thread waits on a pidfd (Linux >= 5.3; else it polls every 0.2 s).
    The fork server's exit would also end it, but only after the server's own
    interpreter shutdown (seconds with torch loaded)."""
    import select
    import signal
    import time
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os.kill(os.getpid(), signal.SIGKILL)
        return
    except (AttributeError, OSError):
        fd = None

    def wait_then_die() -> None:
        if fd is not None:
            select.select([fd], [], [])
        else:
            while True:
                time.sleep(0.2)
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                except PermissionError:
                    pass
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=wait_then_die, name="partplan-launcher-watch", daemon=True).start()


def _child(argv: list[str], env: dict, out_path: str) -> None:  # pragma: no cover - runs in the forked worker
    """The forked worker: what ``python -m partplan.runtime.worker`` does, in
    the rank's session, environment and output file."""
    parent = os.getppid()                       # the fork server (it exits when the launcher is gone)
    os.setsid()
    _release_fork_server()
    _show_cmdline([sys.executable, "-m", "partplan.runtime.worker", *argv])
    fd = os.open(out_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    launcher = env.get("PARTPLAN_LAUNCHER_PID")
    os.environ["PARTPLAN_LAUNCHER_PID"] = str(parent)   # the worker's parent: its death signal is tied to it
    if launcher and launcher.isdigit():         # and with the launcher itself, at once
        _die_with(int(launcher))
    sys.argv = ["-m", *argv]
    # what `python -m partplan.runtime.worker CONFIG` runs (its __main__ block: death signal, main, exit)
    runpy.run_module("partplan.runtime.worker", run_name="__main__", alter_sys=True)
    os._exit(0)                                 # not reached: the worker's main block exits
