"""Helpers shared by the trust and fault tests (importable from any test: pytest puts
``tests/`` on ``sys.path`` when it loads ``tests/conftest.py``).

* :func:`resign_shard` — replace a plan's shard and record its size and sha256 in the
  manifest as ``write_plan`` does (a hostile shard that passes the integrity check).
* :func:`live_pids` — pids of live processes by command line and/or environment.
* :func:`alive`, :func:`gone_within` — wait for processes to end (and kill stragglers).
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from pathlib import Path


def resign_shard(plan_dir: Path, rank: int, data: bytes) -> None:
    """Put ``data`` as rank ``rank``'s shard and record its size and sha256 as write_plan does."""
    f = Path(plan_dir) / f"rank-{rank:05d}.arrow"
    f.write_bytes(data)
    m = json.loads((Path(plan_dir) / "manifest.json").read_text())
    m["shards"][rank].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    (Path(plan_dir) / "manifest.json").write_text(json.dumps(m))


def _state(pid: int | str) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def live_pids(*, cmdline: tuple[str, ...] = (), environ: str | None = None) -> list[int]:
    """Pids of live (not zombie) processes other than this one whose command line holds every
    string of ``cmdline`` and whose environment holds ``environ`` (when given)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            if cmdline:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if not all(s in cmd for s in cmdline):
                    continue
            if environ is not None and environ.encode() not in Path(f"/proc/{d}/environ").read_bytes():
                continue
        except OSError:
            continue
        if _state(d) not in (None, "Z", "X"):
            out.append(int(d))
    return out


def alive(pid: int) -> bool:
    """True while ``pid`` runs (also while it is being torn down); False once gone or a zombie."""
    return _state(pid) not in (None, "Z", "X")


def gone_within(pids: list[int], seconds: float = 5.0) -> list[int]:
    """The pids still alive after ``seconds`` (then SIGKILLed: a failing test leaves no workers)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(alive(q) for q in pids):
            return []
        time.sleep(0.05)
    left = [q for q in pids if alive(q)]
    for q in left:
        os.kill(q, signal.SIGKILL)
    return left
