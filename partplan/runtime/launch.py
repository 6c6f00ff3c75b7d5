"""Start p local worker processes the way torchrun does (RANK, WORLD_SIZE,
LOCAL_RANK in the environment), wait for them with a deadline, and turn any
failure into one :class:`CommError` that quotes the error line of the rank
that failed first (the others' are its echo: a closed connection, a timeout)
and names the ranks that failed after it.

The launcher owns its workers: each is the leader of its own
process group; SIGINT / SIGTERM / SIGHUP to the launcher stop every worker
(SIGTERM to each group, SIGKILL after :data:`STOP_GRACE_S`), remove the
temporaries they were writing and the job's ``/tmp/partplan-run-<pid>-*``
folder, then end the launcher: KeyboardInterrupt for SIGINT (the CLI prints
``partplan: interrupted``, exit 130), one line ``partplan: interrupted
(SIGTERM)`` and exit 128 + signal number otherwise (143, 129). A worker sets
``PR_SET_PDEATHSIG`` (SIGKILL) at start-up, so a launcher killed with SIGKILL
still takes its workers with it; the folder it leaves is removed by the next
launch. Local workers meet through a ``FileStore`` in the job's private 0700
folder (no TCP store, no network listener) and gloo binds to loopback
(``GLOO_SOCKET_IFNAME=lo``). Every rank proves knowledge of
``$PARTPLAN_SECRET`` (HMAC of all ranks' nonces) before any data moves
(:func:`authenticate`).

One protocol runs every job: the work of a process is a module-level
function ``fn(ctx, cfg) -> report | None`` on a :class:`WorkerContext`;
:func:`run_rank` opens the context, runs it, has rank 0 write the report
and tears the context down. :func:`start` runs a job's ``fn`` in this
process (``backend`` "local": every rank here; under torchrun: one rank) or
on ``nprocs`` launched processes (:func:`launch`), each of which runs
``python -m partplan.runtime.worker CONFIG.json`` — :func:`run_rank` of the
function named in the config (``entry``).

:class:`WorkerContext` is the one set-up and teardown of a worker (threads,
device, process group, comm, shards, rank 0's result file);
:func:`resolve_device` is the device policy.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from .comm import CommError
from .zygote import start_worker


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith("partplan: error:"):
            return ln[len("partplan: error:"):].strip()
    return lines[-1] if lines else ""


STOP_GRACE_S = 2.0          # seconds between SIGTERM and SIGKILL when workers are stopped
DEAD_PEER_GRACE_S = 5.0     # seconds the survivors of a worker killed by a signal get to end by themselves
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
RUN_PREFIX = "partplan-run-"  # the job folder: RUN_PREFIX + <launcher pid> + "-" + random
STORE_ENV = "PARTPLAN_STORE"  # FileStore path for the workers of a local job
SECRET_ENV = "PARTPLAN_SECRET"
LAUNCHER_ENV = "PARTPLAN_LAUNCHER_PID"


def _sweep_stale_runs() -> list[str]:
    """Remove job folders (``/tmp/partplan-run-<pid>-*``, ours) whose launcher
    no longer runs: what a launcher killed with SIGKILL left behind."""
    from .._atomic import _pid_alive
    removed = []
    base = tempfile.gettempdir()
    pat = re.compile(rf"^{re.escape(RUN_PREFIX)}(\d+)-[A-Za-z0-9_]+$")
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for e in entries:
        m = pat.match(e.name)
        if not m or _pid_alive(int(m.group(1))):
            continue
        try:
            st = e.stat(follow_symlinks=False)
            if not e.is_dir(follow_symlinks=False) or st.st_uid != os.getuid():
                continue
            shutil.rmtree(e.path)
            removed.append(e.path)
        except OSError:
            pass
    return removed


def _remove_job_temps(tmp: Path) -> None:
    """Remove the output temporaries the workers logged in ``tmp/temps``
    (:mod:`partplan._atomic`: files, and the folders of a plan being
    written): those of workers that were killed."""
    try:
        lines = (tmp / "temps").read_text(errors="surrogateescape").splitlines()
    except OSError:
        return
    import stat as _stat
    tmpname = re.compile(r"^\..+\.tmp-\d+-[A-Za-z0-9_]+(\.[A-Za-z0-9]+)?$")
    for ln in lines:
        q = Path(ln)
        if not tmpname.match(q.name):
            continue
        try:
            mode = os.lstat(q).st_mode
            if _stat.S_ISREG(mode):
                os.unlink(q)
            elif _stat.S_ISDIR(mode):    # a plan or chunked graph being written (never through a link)
                shutil.rmtree(q, ignore_errors=True)
        except OSError:
            pass


def _stop(procs: list, grace: float = STOP_GRACE_S) -> None:
    """SIGTERM every live worker's process group, SIGKILL what is left after
    ``grace`` seconds, and reap them all."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
    end = time.monotonic() + grace
    while any(p.poll() is None for p in procs) and time.monotonic() < end:
        time.sleep(0.02)
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for p in procs:
        p.wait()


class _Signals:
    """While active (main thread only), SIGINT/SIGTERM/SIGHUP are recorded
    instead of acted on; the launcher's loop sees them in :attr:`got`."""

    def __init__(self):
        self.got: list[int] = []
        self.old: dict = {}

    def __enter__(self) -> "_Signals":
        if threading.current_thread() is threading.main_thread():
            for sig in FORWARDED:
                try:
                    self.old[sig] = signal.signal(sig, lambda signum, frame: self.got.append(signum))
                except (ValueError, OSError):  # pragma: no cover
                    pass
        return self

    def __exit__(self, *exc) -> None:
        for sig, h in self.old.items():
            signal.signal(sig, h)

    def raise_if_interrupted(self) -> None:
        """End the launcher for the first recorded signal (see the module doc)."""
        if not self.got:
            return
        sig = self.got[0]
        if sig == signal.SIGINT:
            raise KeyboardInterrupt
        print(f"partplan: interrupted ({signal.Signals(sig).name}); the job's workers were stopped, nothing written",
              file=sys.stderr, flush=True)
        raise SystemExit(128 + int(sig))


def worker_env(nprocs: int, job_dir: Path, threads: int | None, env: dict | None = None) -> dict:
    """The environment every worker of :func:`launch` starts with (before its RANK): this
    process's, less MASTER_PORT (the workers meet through a file store in ``job_dir``), plus the
    world's size and the job's paths; ``threads`` (torch / OpenMP threads per worker) replaces any
    OMP_NUM_THREADS the caller's shell holds: it is what ``--threads`` asked for (or its default);
    ``env`` last, over everything."""
    base = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}  # no TCP store
    base.update({"WORLD_SIZE": str(nprocs), "LOCAL_WORLD_SIZE": str(nprocs), "MASTER_ADDR": "127.0.0.1",
                 STORE_ENV: str(job_dir / "store"), "GLOO_SOCKET_IFNAME": "lo", "PARTPLAN_LAUNCHED": "1",
                 LAUNCHER_ENV: str(os.getpid()), "PARTPLAN_JOB_DIR": str(job_dir)})
    if threads is not None:
        base["OMP_NUM_THREADS"] = str(int(threads))
    base.update(env or {})
    return base


def launch(config: dict, nprocs: int, *, worker, timeout_s: float = 60.0, threads: int | None = None,
           env: dict | None = None) -> dict:
    """Run ``nprocs`` workers on ``config`` (JSON-able); returns rank 0's report.

    Each worker process runs :func:`run_rank` of ``worker`` — a module-level
    ``worker(ctx, cfg)``: its ``module:name`` goes into the config as
    ``entry``, which :mod:`partplan.runtime.worker` imports; the runtime holds
    no job table.

    The deadline is generous (start-up + 4 × timeout + the config's own
    ``deadline_s`` if given): workers time out by themselves first; a worker
    still alive after it is killed and reported. A worker that fails ends
    the job within ``timeout_s`` + 30 s; a worker killed by a signal (a dead
    peer) within :data:`DEAD_PEER_GRACE_S` (or ``timeout_s`` when shorter):
    its survivors are stopped and the one error names the dead rank.
    """
    if nprocs < 1:
        raise CommError(f"--nprocs must be >= 1, got {nprocs}")
    _sweep_stale_runs()
    tmp = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-"))  # mode 0700
    errs: list = []
    procs: list = []
    sigs = _Signals()
    try:
        with sigs:
            cfg = dict(config)
            cfg["result"] = str(tmp / "result.json")
            cfg["entry"] = entry_of(worker)
            if config.get("progress"):  # rank 0 appends progress lines here; echoed to our stderr while waiting
                cfg["progress_file"] = str(tmp / "progress.log")
                (tmp / "progress.log").write_text("")
            shown = 0
            (tmp / "config.json").write_text(json.dumps(cfg))
            base = worker_env(nprocs, tmp, threads, env)
            if config.get("announce"):  # starting processes takes seconds: say so (after every check passed)
                print(f"{config['announce']} starting {nprocs} {config.get('backend', 'gloo')} processes ...",
                      file=sys.stderr, flush=True)
            for r in range(nprocs):
                if sigs.got:
                    break
                e = dict(base, RANK=str(r), LOCAL_RANK=str(r), GROUP_RANK="0")
                err = open(tmp / f"rank-{r}.err", "w+")
                errs.append(err)
                try:
                    procs.append(start_worker([str(tmp / "config.json")], e, err))
                except (OSError, EOFError) as exc:   # no process could be started (fork refused, no memory)
                    raise CommError(f"rank {r} could not be started ({exc}); the job's other ranks were "
                                    f"stopped") from None
            deadline = time.monotonic() + 120 + 4 * timeout_s + float(config.get("deadline_s", 0))
            killed: set = set()
            stopped: set = set()
            first_fail, dead = None, None
            ended: dict[int, int] = {}   # failed rank -> the poll round the launcher saw it end in
            rounds = 0
            while any(p.poll() is None for p in procs) and not sigs.got:
                now = time.monotonic()
                rounds += 1
                if cfg.get("progress_file"):
                    shown = _echo_progress(cfg["progress_file"], shown)
                for r, p in enumerate(procs):
                    if r not in ended and p.poll() not in (None, 0):
                        ended[r] = rounds
                if first_fail is None and any(p.poll() not in (None, 0) for p in procs):
                    first_fail = now
                if dead is None and any((p.poll() or 0) < 0 for p in procs):
                    dead = now   # a worker died of a signal: its peers wait on it in vain
                if now > deadline or (first_fail is not None and now > first_fail + timeout_s + 30):
                    # survivors must notice a failed peer within their own timeout
                    for r, p in enumerate(procs):
                        if p.poll() is None:
                            os.killpg(p.pid, signal.SIGKILL)
                            killed.add(r)
                    break
                if dead is not None and now > dead + min(DEAD_PEER_GRACE_S, timeout_s):
                    # a dead peer: its survivors are stopped after a short grace, whatever their timeout
                    stopped = {r for r, p in enumerate(procs) if p.poll() is None}
                    _stop(procs, grace=0.5)
                    break
                time.sleep(0.05)
            if sigs.got:
                _stop(procs)
                _remove_job_temps(tmp)
            else:
                for p in procs:
                    p.wait()
                for r, p in enumerate(procs):   # ended after the loop's last look (it saw every rank done):
                    if r not in ended and p.returncode not in (None, 0):   # the next round, not "never"
                        ended[r] = rounds + 1
        sigs.raise_if_interrupted()
        if cfg.get("progress_file"):
            _echo_progress(cfg["progress_file"], shown)
        codes = [p.returncode for p in procs]
        if any(codes):
            raise CommError("the job failed — " + _failures(codes, errs, killed, stopped, ended))
        res = Path(cfg["result"])
        if not res.is_file():
            raise CommError("the job ended without a report from rank 0")
        return json.loads(res.read_text())
    finally:
        if any(p.poll() is None for p in procs):  # an exception in the loop: never leave a worker behind
            _stop(procs, grace=0.5)
        _remove_job_temps(tmp)
        for fh in errs:
            fh.close()
        shutil.rmtree(tmp, ignore_errors=True)


#: poll rounds (50 ms each) within which ranks that ended count as ending together (:func:`_failures`):
#: 10 s, because a rank that raised can take seconds to exit (torch and gloo teardown) on a loaded
#: machine while the peers it failed end at once on their closed connections
ECHO_WINDOW_ROUNDS = 200
#: what a rank's error says when a peer's failure ended it (a closed connection, a timeout, or a
#: flag a collective carried: "see rank 0's error", "another rank found ..."): an echo
_ECHO = re.compile(r"a peer died|closed by peer|reset by peer|broken pipe|connection refused|timed out|"
                   r"timeout|see rank \d+'s error|see its error|another rank found|another rank holds", re.I)


def _failures(codes: list, errs: list, killed: set, stopped: set = frozenset(),
              ended: dict | None = None) -> str:
    """The cause of a failed job, one line: the error line of the rank that failed first — among the
    ranks that ended within :data:`ECHO_WINDOW_ROUNDS` poll rounds (``ended``) of the first, an error
    that is no echo of a peer's failure (:data:`_ECHO`), then the earliest, then the lowest rank —
    followed by which other ranks failed or were stopped
    after it, never their errors (they are its consequence: a closed connection, a timeout). The
    line once when every rank ended on the same error. When a rank was killed by a signal (a dead
    peer), the dead ranks are named instead."""
    ended = ended or {}
    said = []
    for r, (c, err) in enumerate(zip(codes, errs)):
        err.seek(0)
        said.append(_last_error(err.read()) if c and c > 0 and r not in killed else None)
    if said[0] and len(set(said)) == 1:
        return said[0]
    dead = [r for r, c in enumerate(codes) if c and c < 0 and r not in killed and r not in stopped]   # not our SIGTERM
    if dead:   # a worker killed by a signal: the others' errors are its echo (a closed connection, a timeout)
        lines = []
        others = [r for r in range(len(codes)) if r not in dead]
        for r in dead:
            errs[r].seek(0)
            last = _last_error(errs[r].read())
            lines.append(f"rank {r}: killed by signal {signal.Signals(-codes[r]).name}"
                         + (f" ({last[:300]})" if last else ""))
        return " | ".join(lines) + (f"; the other ranks ({', '.join(map(str, others))}) then stopped"
                                    if others else "")
    failed = [r for r, c in enumerate(codes) if c and r not in killed]
    never = 1 << 62
    if not failed:
        return (f"rank{'s' if len(killed) > 1 else ''} {', '.join(map(str, sorted(killed)))} still running "
                f"after the deadline; killed")
    # a peer's echo (its connection closed) can end before the rank that caused it has exited: the
    # ranks that ended within ECHO_WINDOW_ROUNDS poll rounds of the first count as ending together,
    # and among them an error that is no echo is the cause
    soon = min(ended.get(r, never) for r in failed) + ECHO_WINDOW_ROUNDS
    first = min(failed, key=lambda r: (ended.get(r, never) > soon, bool(said[r] and _ECHO.search(said[r])),
                                       ended.get(r, never), r))
    cause = said[first] or f"exit status {codes[first]}"
    line = cause if cause.startswith(f"rank {first}: ") else f"rank {first}: {cause}"   # named once
    after = [r for r in failed if r != first]
    tail = []
    if after:
        tail.append(f"rank{'s' if len(after) > 1 else ''} {', '.join(map(str, after))} failed after it")
    if killed:
        tail.append(f"rank{'s' if len(killed) > 1 else ''} {', '.join(map(str, sorted(killed)))} still "
                    f"running after the deadline, killed")
    return line + (f" ({'; '.join(tail)})" if tail else "")


def check_nprocs(plan, manifest: dict, nprocs: int | None) -> None:
    """``--nprocs N``, when given, must be the plan's rank count (with every backend: the local one
    runs the plan's ranks in this process, and a different N is a mistake to say, not to ignore)."""
    from ..errors import PlanError
    if nprocs is not None and nprocs != manifest["ranks"]:
        raise PlanError(f"{plan}: the plan is for {manifest['ranks']} ranks; --nprocs {nprocs} does not match")


def entry_of(worker) -> str:
    """``module:name`` of a module-level worker function (what a launched process imports)."""
    mod, name = getattr(worker, "__module__", None), getattr(worker, "__qualname__", "")
    if not mod or not name or "." in name or "<" in name:
        raise CommError(f"a launched worker must be a module-level function, got {worker!r}")
    return f"{mod}:{name}"


def _echo_progress(path: str, shown: int) -> int:
    """Copy the complete lines a worker appended to ``path`` since byte ``shown`` to stderr."""
    try:
        with open(path, "rb") as fh:
            fh.seek(shown)
            data = fh.read()
    except OSError:
        return shown
    end = data.rfind(b"\n") + 1
    if end:
        sys.stderr.write(data[:end].decode(errors="replace"))
        sys.stderr.flush()
    return shown + end


def run_rank(fn, cfg: dict) -> dict | None:
    """One process of a job: open the :class:`WorkerContext` of ``cfg`` (local:
    every rank here; else this rank's process group), run ``fn(ctx, cfg)``,
    have rank 0 write the report to ``cfg["result"]``, tear down. Returns
    ``fn``'s report (None on the other ranks)."""
    with WorkerContext.open(cfg) as ctx:
        rep = fn(ctx, cfg)
        ctx.write_result(cfg, rep)
        return rep


def start(cfg: dict, nprocs: int | None, fn, *, timeout_s: float, threads: int | None = None,
          ranks: int | None = None, plan=None) -> dict | None:
    """Run the job whose processes run ``fn(ctx, cfg)`` (:func:`run_rank`):
    ``cfg["backend"]`` "local" runs every rank in this process; under torchrun
    (``nprocs`` None) this process is one rank; else :func:`launch` starts
    ``nprocs`` processes. ``ranks``: the plan's rank count, which ``nprocs``
    must equal. ``threads``: torch threads per process (None: 1 for the processes started here;
    under torchrun, torchrun's own). Returns the report (None on a non-zero torchrun rank)."""
    from ..errors import PlanError
    if ranks is not None:
        check_nprocs(plan, {"ranks": ranks}, nprocs)
    torchrun = under_torchrun()
    if torchrun and not os.environ.get("PARTPLAN_LAUNCHED"):
        # each of torchrun's processes is one rank: one that started processes of its own, or ran
        # every rank itself, would run the whole job once per torchrun process
        if nprocs is not None or cfg.get("backend", "gloo") == "local":
            raise PlanError(f"under torchrun each process is one rank: leave out "
                            f"{'--nprocs' if nprocs is not None else '--backend local'}")
        die_with_torchrun()
        if threads is not None:
            import torch
            torch.set_num_threads(int(threads))
    threads = 1 if threads is None else threads
    if cfg.get("backend", "gloo") == "local":
        return run_rank(fn, cfg)
    if nprocs is None:
        if not torchrun:
            raise PlanError("give --nprocs N (processes to start here), or start the command with torchrun")
        return run_rank(fn, cfg)
    return launch(cfg, nprocs, worker=fn, timeout_s=timeout_s, threads=threads)


# ----------------------------------------------------------------------------- the worker context
DEVICES = ("cpu", "cuda")


def resolve_device(backend: str, device: str | None = None, *, local_rank: int | None = None) -> str:
    """The torch device a job's buffers live on: ``"cpu"`` or ``"cuda:K"``.

    ``device`` None picks ``cuda`` with nccl, else ``cpu``. nccl runs on CUDA
    only (``cuda:LOCAL_RANK``, one GPU per rank); gloo's all-to-all takes CPU
    tensors only, so ``--device cuda`` with gloo is refused (use nccl, or the
    local backend, which keeps all ranks' buffers on one GPU). Refused as well:
    a CUDA device when torch sees no GPU.
    """
    from ..errors import PlanError
    if device is None:
        device = "cuda" if backend == "nccl" else "cpu"
    kind = str(device).split(":")[0]
    if kind not in DEVICES:
        raise PlanError(f"--device must be one of {', '.join(DEVICES)}, got {device!r}")
    if backend == "nccl" and kind != "cuda":
        raise PlanError("--backend nccl runs on CUDA GPUs; give --device cuda (or --backend gloo for --device cpu)")
    if backend == "gloo" and kind == "cuda":
        raise PlanError("--device cuda with --backend gloo: gloo's all-to-all takes CPU tensors only; "
                        "use --backend nccl (one GPU per rank) or --backend local")
    if kind == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise PlanError(f"{'--backend nccl' if backend == 'nccl' else '--device cuda'} needs a CUDA GPU; "
                            "none is visible here (on CPUs: --backend gloo, or --device cpu)")
        if local_rank is not None:
            return f"cuda:{int(local_rank)}"
        return str(device) if ":" in str(device) else "cuda"
    return "cpu"


class WorkerContext:
    """Where a job's ranks run, opened once per process by :meth:`open`.

    ``rank`` None: every rank in this process (``backend`` "local",
    :class:`~partplan.runtime.comm.LocalComm`); else this process is rank
    ``rank`` of ``world`` (torch.distributed, :class:`~partplan.runtime.comm.TorchComm`).
    ``device``: "cpu" or "cuda:K" (:func:`resolve_device`); ``timeout``: seconds
    a rank waits on a peer. Use as a context manager, or call :meth:`close`
    (destroys the process group) in a ``finally``.
    """

    def __init__(self, backend: str, device: str, timeout: float, rank: int | None = None,
                 world: int | None = None):
        self.backend, self.device, self.timeout = backend, device, float(timeout)
        self.rank, self.world = rank, world

    @classmethod
    def open(cls, cfg: dict) -> "WorkerContext":
        """Set up this process for ``cfg`` (keys ``backend``, ``device``,
        ``timeout``): local — nothing to start; else torch threads from
        OMP_NUM_THREADS (when started by :func:`launch`), the device
        (``cuda:LOCAL_RANK`` with nccl) and ``init_process_group``."""
        backend = cfg.get("backend", "gloo")
        timeout = float(cfg.get("timeout", 60.0))
        if backend == "local":
            return cls("local", resolve_device("local", cfg.get("device")), timeout)
        import torch

        from .comm import init_distributed
        device = resolve_device(backend, cfg.get("device"),
                                local_rank=int(os.environ.get("LOCAL_RANK", "0")) if backend == "nccl" else None)
        if os.environ.get("PARTPLAN_LAUNCHED") and "OMP_NUM_THREADS" in os.environ:
            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        if os.environ.get(STORE_ENV):
            rank, world, store = _init_file_store(backend, timeout, device if backend == "nccl" else None)
        else:  # torchrun / env://: the TCP store torchrun made
            rank, world = init_distributed(backend, timeout_s=timeout, device=device if backend == "nccl" else None)
            import torch.distributed.distributed_c10d as c10d
            store = c10d._get_default_store()
        authenticate(store, rank, world, timeout)
        return cls(backend, device, timeout, rank, world)

    @property
    def local(self) -> bool:
        """True when every rank runs in this process."""
        return self.rank is None

    @property
    def leader(self) -> bool:
        """True on the process that reports (rank 0, or the local process)."""
        return self.rank in (None, 0)

    def check_ranks(self, ranks: int, plan="the plan") -> None:
        """Refuse a plan for another rank count than this job's processes."""
        from ..errors import PlanError
        if not self.local and ranks != self.world:
            how = (f"--nprocs {ranks}" if os.environ.get("PARTPLAN_LAUNCHED")
                   else f"torchrun --nproc-per-node {ranks}, or --nprocs {ranks} without torchrun")
            raise PlanError(f"{plan} is for {ranks} ranks but the job has {self.world} (use {how})")

    def comm(self, groups, ranks: int):
        """The comm of this process over ``groups`` for a job of ``ranks`` ranks:
        LocalComm (all ranks; numpy buffers on CPU, torch tensors on a CUDA
        device) or TorchComm (this rank)."""
        from .comm import LocalComm, TorchComm
        self.check_ranks(ranks)
        if self.local:
            return LocalComm(ranks, list(groups), device=None if self.device == "cpu" else self.device)
        return TorchComm(list(groups), timeout_s=self.timeout, device=self.device)

    def world_comm(self):
        """A comm over the processes of the job with no plan groups, for the
        process-level collectives (``exchange_rows``, ``allgather_object``):
        TorchComm of this rank, or LocalComm of one rank when this process is
        the whole job."""
        from .comm import LocalComm, TorchComm
        if self.local:
            return LocalComm(1, [])
        return TorchComm([], timeout_s=self.timeout, device="cpu")

    def mine(self, per_rank: list) -> list:
        """The entries of a per-rank list that this process holds (all, or ``[per_rank[rank]]``)."""
        return list(per_rank) if self.local else [per_rank[self.rank]]

    def shards(self, path, manifest: dict) -> list:
        """The rank plans this process holds, read from the plan directory ``path``
        (a distributed rank reads the manifest's and its own shard only)."""
        from ..plan.store import load_plan, load_rank
        self.check_ranks(int(manifest["ranks"]), path)
        if self.local:
            return load_plan(path).ranks
        return [load_rank(path, self.rank, manifest=manifest)]

    def write_result(self, cfg: dict, report: dict | None) -> None:
        """Rank 0 writes ``report`` to ``cfg["result"]`` (the launcher reads it), atomically."""
        if report is not None and self.rank == 0 and cfg.get("result"):
            from .._atomic import write_json_atomic
            write_json_atomic(report, cfg["result"])

    def close(self) -> None:
        """Destroy the process group (if any), ignoring one that is already gone."""
        if self.local:
            return
        import torch.distributed as dist
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - a dead peer may have torn it down already
            pass

    def __enter__(self) -> "WorkerContext":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _init_file_store(backend: str, timeout: float, device=None):
    """``init_process_group`` on the ``FileStore`` ``$PARTPLAN_STORE`` (a file
    in the launcher's private 0700 job folder: no network listener);
    returns (rank, world, store)."""
    import datetime

    import torch.distributed as dist

    from .comm import group_backend
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if not dist.is_initialized():
        be, kw = group_backend(backend, device)
        try:
            store = dist.FileStore(os.environ[STORE_ENV], world)
            dist.init_process_group(be, store=store, rank=rank, world_size=world,
                                    timeout=datetime.timedelta(seconds=timeout), **kw)
        except Exception as exc:  # noqa: BLE001 - gloo/NCCL raise RuntimeError subclasses
            raise CommError(f"rank {rank}: init_process_group({be}) on the job's file store failed: "
                            f"{(str(exc).splitlines() or [type(exc).__name__])[0][:300]}") from None
    else:  # pragma: no cover - initialised by the caller
        import torch.distributed.distributed_c10d as c10d
        store = c10d._get_default_store()
    return dist.get_rank(), dist.get_world_size(), store


def _proof(secret: bytes | None, nonces: list[str], rank: int) -> str:
    if secret is None:
        return "none"
    msg = ("partplan-rendezvous-v1|" + ",".join(nonces) + f"|{rank}").encode()
    return "hmac-sha256:" + hmac.new(secret, msg, hashlib.sha256).hexdigest()


def authenticate(store, rank: int, world: int, timeout: float = 60.0) -> None:
    """Check that every rank of the job knows the same ``$PARTPLAN_SECRET``
    before any data moves; raises one :class:`CommError` on every rank
    otherwise.

    Each rank writes a fresh 128-bit nonce into the rendezvous ``store``, then
    ``HMAC-SHA256(secret, all ranks' nonces | rank)``; each rank recomputes and
    compares every other rank's proof (constant-time). As every proof covers
    each rank's own fresh nonce, an old proof cannot be replayed. Without a
    secret on any rank the proofs are the word "none" (no check; a rank with a
    secret refuses a peer without one and vice versa). Costs two store round
    trips. Keys live under ``partplan-auth/<run id>/`` (torchrun's run id and
    restart count, so an elastic restart does not read stale keys)."""
    import datetime

    import torch.distributed as dist
    raw = os.environ.get(SECRET_ENV)
    secret = raw.encode() if raw else None
    run = f"{os.environ.get('TORCHELASTIC_RUN_ID', 'job')}.{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    st = dist.PrefixStore(f"partplan-auth/{run}/", store)
    try:
        st.set_timeout(datetime.timedelta(seconds=timeout))
    except (AttributeError, RuntimeError):  # pragma: no cover
        pass
    where = f"rank {rank}: rendezvous check"
    try:
        st.set(f"nonce/{rank}", secrets.token_hex(16))
        st.wait([f"nonce/{r}" for r in range(world)])
        nonces = [st.get(f"nonce/{r}").decode() for r in range(world)]
        st.set(f"proof/{rank}", _proof(secret, nonces, rank))
        st.wait([f"proof/{r}" for r in range(world)])
        proofs = [st.get(f"proof/{r}").decode(errors="replace") for r in range(world)]
    except Exception as exc:  # noqa: BLE001 - store timeouts are RuntimeError / DistStoreError
        raise CommError(f"{where} failed: {(str(exc).splitlines() or [type(exc).__name__])[0][:200]} "
                        f"(a rank did not reach the rendezvous within {timeout:g} s)") from None
    for r, got in enumerate(proofs):
        if r == rank:
            continue
        if secret is None and got != "none":
            raise CommError(f"{where} failed: rank {r} uses {SECRET_ENV} but this rank has none; set the same "
                            f"{SECRET_ENV} on every rank")
        if secret is not None and got == "none":
            raise CommError(f"{where} failed: rank {r} has no {SECRET_ENV}; set the same {SECRET_ENV} on every rank")
        if not hmac.compare_digest(got, _proof(secret, nonces, r)):
            raise CommError(f"{where} failed: rank {r}'s proof does not match this rank's {SECRET_ENV} "
                            f"(a different secret, or a process outside this job joined the rendezvous)")


# ----------------------------------------------------------------------------- a shared output file
class SharedOutput:
    """One ``.npy`` output written by several ranks (each fills its rows),
    created and committed by rank 0.

    :meth:`create` (every rank, before the work): rank 0 makes a unique
    temporary next to ``path`` (:func:`partplan._atomic.create_npy`:
    ``O_EXCL``, pid + random name, no symlink followed, the whole size
    reserved with ``posix_fallocate``) and tells the others its name and
    inode through one world all-reduce; a rank-0 failure (a full disk) is
    raised on every rank, before any work. :meth:`write` (every writing rank)
    fills rows through an ``O_NOFOLLOW`` memory map of that same inode and
    notes the first non-finite value; :meth:`finish` (every rank) all-reduces
    those notes (the job's barrier), refuses an output that overflowed, then
    rank 0 fsyncs and renames. Two
    jobs writing one ``path`` each commit a complete file (the last rename
    wins). :meth:`discard` removes the temporary (rank 0)."""

    def __init__(self, path: Path, tmp: Path, ident: tuple, dtype, shape, rank: int, comm):
        self.path, self.tmp, self.ident = path, tmp, ident
        self.dtype, self.shape, self.rank, self.comm = dtype, tuple(shape), rank, comm

    @classmethod
    def create(cls, comm, rank: int, path, dtype, shape) -> "SharedOutput":
        import numpy as np

        from .._atomic import create_npy
        from ..errors import OutputPathError, PartplanError
        path = Path(path)
        vec = np.zeros(10, dtype=np.float64)
        err = tmp = None
        if rank == 0:
            try:
                tmp, ident = create_npy(path, dtype, shape)
                m = re.match(r"^.*\.tmp-(\d+)-([0-9a-f]{16})\.npy$", tmp.name)
                token = int(m.group(2), 16)
                vec[0], vec[1] = 1.0, float(m.group(1))
                for i in range(4):
                    vec[2 + i] = float((token >> (16 * i)) & 0xFFFF)
                    vec[6 + i] = float((ident[1] >> (16 * i)) & 0xFFFF)
            except PartplanError as exc:
                err = exc
        try:
            vec = comm.allreduce_world([vec], "sum")[0]
        except BaseException:     # a peer failed before it learnt the name: rank 0's temporary goes
            if tmp is not None:
                from .._atomic import discard_temp
                discard_temp(tmp)      # its lock released too (the reserved space is freed)
            raise
        if err is not None:
            raise err
        if vec[0] != 1.0:
            raise OutputPathError(f"{path}: rank 0 could not create the output (see rank 0's error); nothing written")
        pid = int(vec[1])
        token = sum(int(vec[2 + i]) << (16 * i) for i in range(4))
        ino = sum(int(vec[6 + i]) << (16 * i) for i in range(4))
        tmp = path.parent / f".{path.name}.tmp-{pid}-{token:016x}.npy"
        if rank == 0:
            return cls(path, tmp, ident, dtype, shape, rank, comm)
        return cls(path, tmp, (None, ino), dtype, shape, rank, comm)  # another node may see another st_dev

    def write(self, ids, rows) -> None:
        """Set rows ``ids`` of the output to ``rows`` (this rank's part); the
        first non-finite value (NaN, ±inf) among them is remembered for
        :meth:`finish` (one vectorized ``isfinite`` pass)."""
        import numpy as np

        from .._atomic import write_npy_rows
        rows = np.asarray(rows)
        ids = np.asarray(ids)
        if rows.dtype.kind in "fc":
            bad = ~np.isfinite(rows)
            if bad.any():
                i, j = np.argwhere(bad)[0]
                count = int(bad.sum())
                first = getattr(self, "nonfinite", None)
                total = count + (first[0] if first else 0)
                if first is None:
                    self.nonfinite = (total, int(ids[i]), int(j), bool(np.isnan(rows[i, j])) if rows.ndim == 2
                                      else bool(np.isnan(rows[i])))
                else:
                    self.nonfinite = (total,) + first[1:]
        write_npy_rows(self.tmp, self.dtype, self.shape, self.ident, ids, rows)

    def finish(self, *, input_finite: bool = True, step: str | None = None) -> Path:
        """Every rank: wait until all rows are written (one world all-reduce
        that also sums what each rank's :meth:`write` saw); rank 0 commits
        (fsync, rename). Non-finite values in the output: with
        ``input_finite`` (the job's input held none) they were made by the
        computation — float overflow (±inf) or inf − inf (NaN) — and every
        rank raises the same :class:`~partplan.errors.PlanError` naming the
        rank, the first entry and ``step``, nothing written; else the input
        held them: a warning on stderr (rank 0) and the output is written."""
        import numpy as np

        from .._atomic import commit
        from ..errors import PlanError
        world = int(getattr(self.comm, "world", 1) or 1)
        vec = np.zeros(1 + 4 * world, dtype=np.float64)
        mine = getattr(self, "nonfinite", None)
        if mine is not None:
            vec[0] = mine[0]
            slot = 1 + 4 * (self.rank if world > 1 else 0)
            vec[slot:slot + 4] = (mine[0], mine[1] + 1, mine[2], 1.0 if mine[3] else 0.0)
        vec = self.comm.allreduce_world([vec], "sum")[0]
        if vec[0]:
            r = next(q for q in range(world) if vec[1 + 4 * q])
            _, row, col, isnan = vec[1 + 4 * r:5 + 4 * r]
            rank = f"rank {r}, first at " if world > 1 else "first at "
            at = f"Z[{int(row) - 1}, {int(col)}] = {'nan' if isnan else 'inf'}"
            where = f" at {step}" if step else ""
            if input_finite:
                why = ("NaN from inf - inf after an overflow" if isnan else
                       f"the sums overflowed {np.dtype(self.dtype).name}")
                raise PlanError(f"{self.path}: the output holds {int(vec[0])} non-finite values ({rank}{at}"
                                f"{where}) computed from finite input: {why}; nothing written (use --dtype "
                                f"float64 or scale the input)")
            if self.rank == 0:
                import sys
                print(f"partplan: warning: {self.path}: the output holds {int(vec[0])} non-finite values "
                      f"({rank}{at}{where}); the input held non-finite values", file=sys.stderr, flush=True)
        if self.rank == 0:
            commit(self.tmp, self.path, self.ident)
        return self.path

    def discard(self) -> None:
        """Remove the temporary (rank 0; others leave it to rank 0)."""
        if self.rank == 0:
            from .._atomic import release_temp
            release_temp(self.tmp)
            try:
                os.unlink(self.tmp)
            except OSError:
                pass


def worker_context(cfg: dict) -> WorkerContext:
    """``with worker_context(cfg) as ctx: ...`` — :meth:`WorkerContext.open`."""
    return WorkerContext.open(cfg)


def die_with_torchrun() -> bool:
    """A rank started by torchrun (its elastic agent sets ``$TORCHELASTIC_RUN_ID`` and is this
    process's parent) dies with it: torchrun stops its ranks when it is interrupted, but one
    killed with SIGKILL (a scheduler's hard limit, the OOM killer) cannot, and its ranks would
    train on, reparented to init. The ranks of partplan's own launcher do this at start-up
    (:mod:`partplan.runtime.worker`). Returns whether the death signal was set (False when this
    process was not started by torchrun's agent)."""
    if not os.environ.get("TORCHELASTIC_RUN_ID"):
        return False
    from .._process import die_with_parent
    return die_with_parent(os.getppid())


def under_torchrun() -> bool:
    """True when this process was started by torchrun (or by :func:`launch`:
    RANK, WORLD_SIZE and the file store ``$PARTPLAN_STORE``)."""
    if all(v in os.environ for v in ("RANK", "WORLD_SIZE", STORE_ENV)):
        return True
    return all(v in os.environ for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def _probe_entry(ctx, cfg: dict) -> None:
    """A worker function that does nothing: the process only opens and closes
    its worker context (the rendezvous and its secret check); for tests."""
    return None
