"""Start p local worker processes the way torchrun does (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT in the environment), wait for them with a
deadline, and turn any failure into one :class:`CommError` that quotes each
failed rank's own error line. The workers run ``python -m
partplan.runtime.worker CONFIG.json``, which calls the worker function named
in the config (``entry``) — the function torchrun's processes call directly
through ``python -m partplan run ...``.

:class:`WorkerContext` is the one set-up and teardown of a worker (threads,
device, process group, comm, shards, rank 0's result file), used by every
job's ranks; :func:`resolve_device` is the device policy.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .comm import CommError


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


def launch(config: dict, nprocs: int, *, worker, timeout_s: float = 60.0, threads: int | None = None,
           env: dict | None = None) -> dict:
    """Run ``nprocs`` workers on ``config`` (JSON-able); returns rank 0's report.

    Each worker process runs ``worker(config)`` (a module-level function: its
    ``module:name`` goes into the config as ``entry``, which
    :mod:`partplan.runtime.worker` imports; the runtime holds no job table).

    The deadline is generous (start-up + 4 × timeout + the config's own
    ``deadline_s`` if given): workers time out by themselves first; a worker
    still alive after it is killed and reported.
    """
    if nprocs < 1:
        raise CommError(f"--nprocs must be >= 1, got {nprocs}")
    tmp = Path(tempfile.mkdtemp(prefix="partplan-run-"))
    errs: list = []
    try:
        cfg = dict(config)
        cfg["result"] = str(tmp / "result.json")
        cfg["entry"] = entry_of(worker)
        if config.get("progress"):  # rank 0 appends progress lines here; echoed to our stderr while waiting
            cfg["progress_file"] = str(tmp / "progress.log")
            (tmp / "progress.log").write_text("")
        shown = 0
        (tmp / "config.json").write_text(json.dumps(cfg))
        port = free_port()
        base = dict(os.environ)
        base.update({"WORLD_SIZE": str(nprocs), "LOCAL_WORLD_SIZE": str(nprocs), "MASTER_ADDR": "127.0.0.1",
                     "MASTER_PORT": str(port), "PARTPLAN_LAUNCHED": "1"})
        if threads is not None:
            base.setdefault("OMP_NUM_THREADS", str(threads))
        base.update(env or {})
        procs = []
        for r in range(nprocs):
            e = dict(base, RANK=str(r), LOCAL_RANK=str(r), GROUP_RANK="0")
            err = open(tmp / f"rank-{r}.err", "w+")
            errs.append(err)
            procs.append(subprocess.Popen([sys.executable, "-m", "partplan.runtime.worker", str(tmp / "config.json")],
                                          env=e, stdout=err, stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + 120 + 4 * timeout_s + float(config.get("deadline_s", 0))
        killed = set()
        first_fail = None
        while any(p.poll() is None for p in procs):
            now = time.monotonic()
            if cfg.get("progress_file"):
                shown = _echo_progress(cfg["progress_file"], shown)
            if first_fail is None and any(p.poll() not in (None, 0) for p in procs):
                first_fail = now
            # survivors must notice a dead peer within their own timeout
            if now > deadline or (first_fail is not None and now > first_fail + 2 * timeout_s + 30):
                for r, p in enumerate(procs):
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGKILL)
                        killed.add(r)
                break
            time.sleep(0.05)
        for p in procs:
            p.wait()
        if cfg.get("progress_file"):
            _echo_progress(cfg["progress_file"], shown)
        codes = [p.returncode for p in procs]
        if any(codes):
            lines = []
            for r, (c, err) in enumerate(zip(codes, errs)):
                err.seek(0)
                text = err.read()
                if r in killed:
                    lines.append(f"rank {r}: still running after the deadline; killed")
                elif c and c < 0:
                    last = _last_error(text)
                    lines.append(f"rank {r}: killed by signal {signal.Signals(-c).name}"
                                 + (f" ({last[:300]})" if last else ""))
                elif c:
                    lines.append(f"rank {r}: {_last_error(text) or f'exit status {c}'}")
            raise CommError("the job failed — " + " | ".join(lines))
        res = Path(cfg["result"])
        if not res.is_file():
            raise CommError("the job ended without a report from rank 0")
        return json.loads(res.read_text())
    finally:
        for fh in errs:
            fh.close()
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)


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


def start(cfg: dict, nprocs: int | None, worker, *, timeout_s: float, threads: int | None = 1,
          ranks: int | None = None, plan=None) -> dict | None:
    """Run a job: under torchrun (``nprocs`` None) this process is one rank and
    runs ``worker(cfg)``; else :func:`launch` starts ``nprocs`` processes that
    each run ``worker(cfg)``. ``ranks``: the plan's rank count, which ``nprocs``
    must equal."""
    from ..errors import PlanError
    if nprocs is None:
        if not under_torchrun():
            raise PlanError("give --nprocs N (processes to start here), or start the command with torchrun")
        return worker(cfg)
    if ranks is not None and nprocs != ranks:
        raise PlanError(f"{plan}: the plan is for {ranks} ranks; --nprocs {nprocs} does not match")
    return launch(cfg, nprocs, worker=worker, timeout_s=timeout_s, threads=threads)


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
            raise PlanError(f"--device cuda{' (backend nccl)' if backend == 'nccl' else ''} needs a CUDA GPU; "
                            "none is visible (use --device cpu / --backend gloo)")
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
        rank, world = init_distributed(backend, timeout_s=timeout, device=device if backend == "nccl" else None)
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
            raise PlanError(f"{plan}: the plan is for {ranks} ranks but the job has {self.world} "
                            f"(use --nprocs {ranks})")

    def comm(self, groups, ranks: int):
        """The comm of this process over ``groups`` for a job of ``ranks`` ranks:
        LocalComm (all ranks; numpy buffers on CPU, torch tensors on a CUDA
        device) or TorchComm (this rank)."""
        from .comm import LocalComm, TorchComm
        self.check_ranks(ranks)
        if self.local:
            return LocalComm(ranks, list(groups), device=None if self.device == "cpu" else self.device)
        return TorchComm(list(groups), timeout_s=self.timeout, device=self.device)

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


def worker_context(cfg: dict) -> WorkerContext:
    """``with worker_context(cfg) as ctx: ...`` — :meth:`WorkerContext.open`."""
    return WorkerContext.open(cfg)


def under_torchrun() -> bool:
    """True when this process was started by torchrun (or by :func:`launch`)."""
    return all(v in os.environ for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))
