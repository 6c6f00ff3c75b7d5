"""KaHyPar (GPL) on the hypergraph models, always in a child process (KaHyPar exits the
process on bad input and is not thread-safe), with an INI written by :mod:`.kahypar_ini`:
:func:`kahypar_hypergraph`, its context and its registration."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..._atomic import scratch_dir
from ...errors import BackendUnavailableError, PartitionError
from ...hypergraph import Hypergraph
from ..context import engine, option
from ..options import DEFAULT_IMBALANCE, _check_k, check_c_int_weights, check_imbalance, engine_seed


@dataclass(frozen=True)
class KaHyParContext:
    """KaHyPar (a child process)."""

    metric: str = option("km1", "KaHyPar's objective", choices=("km1", "cut"))
    ini: str | None = option(None, "a KaHyPar INI file (default: generated)", kind="path", cli="--kahypar-ini")
    quality: str = option("default", "the generated INI's quality", choices=("fast", "default"))
    timeout: float | None = option(None, "seconds before the KaHyPar child process is killed", kind="real", unit="s",
                                   lo_open=True)


_KAHYPAR_WORKER = r"""
import json, sys
import numpy as np
import kahypar
d = sys.argv[1]
a = np.load(d + "/model.npz")
cfg = json.load(open(d + "/job.json"))
k = int(cfg["k"])
h = kahypar.Hypergraph(int(cfg["n"]), int(cfg["m"]), a["ptr"].tolist(), a["pins"].tolist(), k,
                       a["nw"].tolist(), a["vw"].tolist())
ctx = kahypar.Context()
ctx.loadINIconfiguration(d + "/kahypar.ini")
ctx.setK(k)
ctx.setEpsilon(float(cfg["epsilon"]))
ctx.setSeed(int(cfg["seed"]))
ctx.suppressOutput(True)
kahypar.partition(h, ctx)
part = np.fromiter((h.blockID(v) for v in range(int(cfg["n"]))), dtype=np.int64, count=int(cfg["n"]))
np.save(d + "/part.npy", part)
json.dump({"km1": int(kahypar.connectivityMinusOne(h)), "cut": int(kahypar.cut(h)),
           "imbalance": float(kahypar.imbalance(h, ctx))}, open(d + "/result.json", "w"))
"""


def kahypar_hypergraph(hg: Hypergraph, k: int, *, imbalance: float = DEFAULT_IMBALANCE, seed: int = 0,
                       objective: str = "km1", ini: str | os.PathLike | None = None,
                       quality: str = "default", timeout: float | None = None) -> tuple[np.ndarray, dict]:
    """Partition with KaHyPar (direct k-way) in a child process.

    ini : a user KaHyPar INI file (checked to exist); default: one generated
    by :func:`partplan.partition.engines.kahypar_ini.kahypar_ini` for ``objective`` and
    ``quality`` ("fast" or "default"). Returns (part, {"km1", "cut",
    "imbalance"}) as KaHyPar itself reports them. The worker's per-vertex
    ``blockID`` loop runs in the child (KaHyPar has no bulk getter).
    """
    from .kahypar_ini import kahypar_ini

    try:
        import kahypar  # noqa: F401
    except ImportError as exc:
        raise BackendUnavailableError("kahypar is not installed (pip install kahypar)") from exc
    _check_k(hg.n, k)
    check_imbalance(imbalance)
    if objective not in ("km1", "cut"):
        raise BackendUnavailableError(f"unknown kahypar objective {objective!r}; choose km1 or cut")
    if k == 1:
        return np.zeros(hg.n, dtype=np.int64), {"km1": 0, "cut": 0, "imbalance": 0.0}
    text = _read_ini(ini) if ini is not None else kahypar_ini(objective, quality=quality)
    check_c_int_weights("KaHyPar", hg.name, vertex_weights=hg.vertex_weights, net_weights=hg.net_weights)
    if hg.m == 0:  # KaHyPar needs at least one net: nothing can be cut, balance by blocks
        from .baselines import block_partition
        return block_partition(hg.n, k), {"km1": 0, "cut": 0, "imbalance": 0.0}
    nw = hg.net_weights if hg.net_weights is not None else np.ones(hg.m, dtype=np.int64)
    vw = hg.vertex_weights if hg.vertex_weights is not None else np.ones(hg.n, dtype=np.int64)
    with scratch_dir("partplan-kahypar") as d:
        np.savez(Path(d) / "model.npz", ptr=hg.net_ptr, pins=hg.pins, nw=nw, vw=vw)
        (Path(d) / "kahypar.ini").write_text(text)
        (Path(d) / "job.json").write_text(json.dumps({"n": hg.n, "m": hg.m, "k": int(k),
                                                     "epsilon": float(imbalance), "seed": engine_seed(seed)}))
        try:
            proc = subprocess.run([sys.executable, "-c", _KAHYPAR_WORKER, d], capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise PartitionError(f"KaHyPar on {hg.name} (k={k}) exceeded {timeout} s") from exc
        res = Path(d) / "result.json"
        if proc.returncode != 0 or not res.is_file():
            raise PartitionError(f"KaHyPar failed on {hg.name} with k={k}"
                                 + (f" (INI file {ini})" if ini is not None else "")
                                 + f": {_child_error(proc.stdout, proc.stderr, proc.returncode)}")
        part = np.load(Path(d) / "part.npy")
        info = json.loads(res.read_text())
    return part, info


def _child_error(stdout: str, stderr: str, rc: int) -> str:
    """What the KaHyPar child said when it failed: a Python exception's last line (its type and
    message, without the child's traceback), else its last lines of output, else its exit status."""
    err = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    if err and any(ln.startswith("Traceback (most recent call last)") for ln in err):
        return err[-1][:500]
    tail = [ln.strip() for ln in (stdout + "\n" + stderr).strip().splitlines() if ln.strip()][-3:]
    return " | ".join(tail)[:500] if tail else f"exit status {rc}"


INI_MAX_BYTES = 1 << 20    # a KaHyPar INI is a few kB of "key=value" lines


def _read_ini(ini) -> str:
    """The text of a user's KaHyPar INI file, checked: a regular file of at most INI_MAX_BYTES of
    UTF-8 text (KaHyPar itself reports unknown keys)."""
    p = Path(ini)
    if not p.is_file():
        raise PartitionError(f"KaHyPar INI file {ini}: " + ("is a directory, not a file" if p.is_dir()
                                                             else "does not exist"))
    if p.stat().st_size > INI_MAX_BYTES:
        raise PartitionError(f"KaHyPar INI file {ini}: {p.stat().st_size} bytes, above the {INI_MAX_BYTES} an INI "
                             f"file of key=value lines needs")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PartitionError(f"KaHyPar INI file {ini}: not UTF-8 text (byte {exc.start})") from None
    if "\0" in text:
        raise PartitionError(f"KaHyPar INI file {ini}: not text (a NUL byte at offset {text.index(chr(0))})")
    return text


def _run(model_obj, k, *, imbalance, seed, graph=None, **opts):
    if not isinstance(model_obj, Hypergraph):
        raise BackendUnavailableError("kahypar partitions hypergraphs only (model='hypergraph' or 'stochastic')")
    return kahypar_hypergraph(model_obj, k, imbalance=imbalance, seed=seed, **opts)


engine("kahypar", ("hypergraph", "stochastic"), _run, KaHyParContext,
       options=("objective", "ini", "quality", "timeout"))
