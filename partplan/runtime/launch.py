"""Start p local worker processes the way torchrun does (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT in the environment), wait for them with a
deadline, and turn any failure into one :class:`CommError` that quotes each
failed rank's own error line. The workers run ``python -m
partplan.runtime.worker CONFIG.json`` — the same code path torchrun takes
through ``python -m partplan run ...``.
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


def launch(config: dict, nprocs: int, *, timeout_s: float = 60.0, threads: int | None = None,
           env: dict | None = None) -> dict:
    """Run ``nprocs`` workers on ``config`` (JSON-able); returns rank 0's report.

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
    runs ``worker(cfg)``; else :func:`launch` starts ``nprocs`` processes.
    ``ranks``: the plan's rank count, which ``nprocs`` must equal."""
    from ..errors import PlanError
    if nprocs is None:
        if not under_torchrun():
            raise PlanError("give --nprocs N (processes to start here), or start the command with torchrun")
        return worker(cfg)
    if ranks is not None and nprocs != ranks:
        raise PlanError(f"{plan}: the plan is for {ranks} ranks; --nprocs {nprocs} does not match")
    return launch(cfg, nprocs, timeout_s=timeout_s, threads=threads)


def worker_setup(cfg: dict) -> tuple[str, float, str]:
    """(backend, timeout seconds, device) of this rank of a launched / torchrun
    job: ``cuda:LOCAL_RANK`` with nccl (refused without a visible GPU), else
    ``cpu``; torch threads set from OMP_NUM_THREADS when started by :func:`launch`."""
    import torch

    from ..errors import PlanError
    backend = cfg.get("backend", "gloo")
    timeout = float(cfg.get("timeout", 60.0))
    device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if backend == "nccl" else "cpu"
    if backend == "nccl" and not torch.cuda.is_available():
        raise PlanError("backend nccl needs CUDA GPUs; none is visible (use --backend gloo)")
    if os.environ.get("PARTPLAN_LAUNCHED") and "OMP_NUM_THREADS" in os.environ:
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    return backend, timeout, device


def worker_shutdown() -> None:
    """Destroy the process group, ignoring a group that is already gone."""
    import torch.distributed as dist
    try:
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - a dead peer may have torn it down already
        pass


def under_torchrun() -> bool:
    """True when this process was started by torchrun (or by :func:`launch`)."""
    return all(v in os.environ for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))
