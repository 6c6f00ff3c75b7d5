"""``partplan topology probe``: measure pairwise latency and bandwidth with torch.distributed
and write a matrix topology (GUM-style learnt costs).

Every ordered pair is measured in a fixed order, all ranks stepping through the
pairs together (a world all-reduce between pairs keeps them in step): rank a
sends ``small`` bytes to b and b sends them back, ``repeat`` times, then the
same with ``large`` bytes; a one-way time is half the median round trip.
``α(a, b)`` = one-way time of the small message (seconds), ``β(a, b)`` =
(large one-way − small one-way) / (large − small bytes) (seconds per byte,
floored at :data:`BETA_FLOOR`; the report's ``beta_floored_pairs`` counts the ordered pairs where
the large message was not slower, and the command warns: their costs are not measurements).
The matrices are symmetrized (mean of both directions) and the abstract cost is β relative to
the smallest off-diagonal β (:func:`link_matrices`). Rank 0
writes the topology file atomically.

Examples::

    partplan topology probe --nprocs 4 -o machine.json     # local processes over gloo
    torchrun --nproc-per-node 8 -m partplan topology probe -o dgx.json --backend nccl
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import PartplanError


def _pingpong(dist, torch, buf, me: int, a: int, b: int, repeat: int) -> float:
    """Median round trip (seconds) of ``buf`` between a and b, measured on a. On a GPU the clock is
    read with the device synchronized: NCCL's send and recv return once queued on its stream."""
    sync = (lambda: torch.cuda.synchronize(buf.device)) if buf.device.type == "cuda" else (lambda: None)
    times = []
    for _ in range(repeat + 1):  # the first round warms the connection up
        if me == a:
            sync()
            t0 = time.perf_counter()
            dist.send(buf, dst=b)
            dist.recv(buf, src=b)
            sync()
            times.append(time.perf_counter() - t0)
        else:
            dist.recv(buf, src=a)
            dist.send(buf, dst=a)
    return float(np.median(times[1:])) if times else 0.0


def link_matrices(rt: np.ndarray, nbytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(α, β, cost, floored) of the measured round trips ``rt`` (float[2, p, p] seconds: the small
    and the large message from a to b and back) of ``nbytes`` (the two sizes): α the small one-way
    time, β the one-way slope per byte, floored at :data:`BETA_FLOOR`, both symmetrized (mean of
    both directions, diagonal 0), cost β / the smallest off-diagonal β; ``floored``: the ordered
    pairs whose slope was at or below the floor (not a measurement).

    >>> rt = np.array([[[0, 2e-5], [2e-5, 0]], [[0, 4e-5], [2e-5, 0]]])
    >>> a, b, c, n = link_matrices(rt, [8, 1008])
    >>> n, float(a[0, 1]), float(c[0, 1])
    (1, 1e-05, 1.0)
    """
    world = rt.shape[1]
    nbytes = np.asarray(nbytes, dtype=np.float64)
    one_way = rt / 2.0
    alpha = one_way[0]
    slope = (one_way[1] - one_way[0]) / (nbytes[1] - nbytes[0])
    off = ~np.eye(world, dtype=bool)
    floored = int(((slope <= BETA_FLOOR) & off).sum())
    beta = np.maximum(slope, BETA_FLOOR)
    alpha = (alpha + alpha.T) / 2
    beta = (beta + beta.T) / 2
    np.fill_diagonal(alpha, 0.0)
    np.fill_diagonal(beta, 0.0)
    cost = beta / beta[off].min() if world > 1 else np.zeros((1, 1))
    return alpha, beta, cost, floored


def probe_rank(ctx, cfg: dict):
    """One rank of a probe job (a torch.distributed worker context); rank 0
    writes the matrix topology to ``cfg["output"]`` and returns a short report."""
    import torch
    import torch.distributed as dist

    backend = cfg.get("backend", "gloo")
    if ctx.local:
        raise PartplanError("the topology probe measures processes: run it on --nprocs N (or under torchrun)")
    rank, world, device = ctx.rank, ctx.world, ctx.device
    small, large, repeat = int(cfg.get("small", 8)), int(cfg.get("large", 1 << 22)), int(cfg.get("repeat", 5))
    bufs = {s: torch.zeros(max(1, s // 4), dtype=torch.float32, device=device) for s in (small, large)}
    rt = np.zeros((2, world, world))
    flag = torch.zeros(1, device=device)
    for a in range(world):
        for b in range(world):
            if a == b:
                continue
            if rank in (a, b):
                for i, s in enumerate((small, large)):
                    v = _pingpong(dist, torch, bufs[s], rank, a, b, repeat)
                    if rank == a:
                        rt[i, a, b] = v
            dist.all_reduce(flag)  # keep every rank at the same pair
    t = torch.from_numpy(rt.copy()).to(device)
    dist.all_reduce(t)  # each entry was measured by exactly one rank (the sender a)
    rt = t.cpu().numpy()
    if rank != 0:
        return None
    nbytes = np.array([bufs[small].numel() * 4, bufs[large].numel() * 4], dtype=np.float64)
    alpha, beta, cost, floored = link_matrices(rt, nbytes)
    off = ~np.eye(world, dtype=bool)
    doc = {"format": "partplan.topology", "version": 1, "kind": "matrix", "ranks": world,
           "cost": np.round(cost, 6).tolist(), "alpha": alpha.tolist(), "beta": beta.tolist(),
           "probe": {"backend": backend, "small_bytes": int(nbytes[0]), "large_bytes": int(nbytes[1]),
                     "repeat": repeat}}
    from .._atomic import write_json_atomic
    write_json_atomic(doc, cfg["output"])
    rep = {"output": cfg["output"], "ranks": world,
           "alpha_s": {"min": float(alpha[off].min()) if world > 1 else 0.0,
                       "max": float(alpha[off].max()) if world > 1 else 0.0},
           "bandwidth_bytes_per_s": _bandwidth(beta, off),
           "beta_floored_pairs": floored}
    return rep


def _bandwidth(beta: np.ndarray, off: np.ndarray) -> dict:
    """{"min", "max"} bytes per second, 1 / β, over the rank pairs whose β was measured (above
    :data:`BETA_FLOOR` — a floored pair's 1 / β is a placeholder, not a bandwidth); both None when
    there is none (one rank, or every pair floored)."""
    measured = beta[off & (beta > BETA_FLOOR)]
    if measured.size == 0:
        return {"min": None, "max": None}
    return {"min": float(1 / measured.max()), "max": float(1 / measured.min())}


#: seconds per byte a measured β is raised to when the large message was not slower than the small
#: one (noise, or messages too alike in size: ``--large`` near the small size)
BETA_FLOOR = 1e-15

#: the most probe processes ``--nprocs`` starts per core of this machine
PROCS_PER_CORE = 4


def probe_config(cfg: dict, nprocs: int | None = None) -> dict:
    """The probe's config checked before any process starts (output folder,
    message sizes, process count); returns the config the ranks run on."""
    from pathlib import Path
    out = Path(cfg["output"])
    small, large = int(cfg.get("small", 8)), int(cfg.get("large", 1 << 22))
    if not out.parent.exists():
        raise PartplanError(f"{out}: directory {out.parent} does not exist")
    if small < 4 or large <= small or large // 4 <= small // 4:   # the messages are whole float32 values
        raise PartplanError(f"probe sizes: need 4 <= small < large bytes with at least one more float32 (4 bytes) "
                            f"in large (the messages hold whole float32 values), got {small}, {large}")
    if nprocs is not None and nprocs < 2:
        raise PartplanError(f"--nprocs must be >= 2 to measure pairs, got {nprocs}")
    from .._budget import usable_cores
    most = PROCS_PER_CORE * usable_cores()
    if nprocs is not None and nprocs > most:
        raise PartplanError(f"--nprocs {nprocs}: at most {most} processes here ({PROCS_PER_CORE} per core: "
                            f"more would time the scheduler, not the links); across machines start the probe "
                            f"with torchrun")
    from .._budget import check_array_bytes
    # each rank's two buffers, every process of this machine at once
    check_array_bytes(2 * (nprocs or 1), large, 1, "the probe's send and receive buffers", option="--large")
    if cfg.get("backend", "gloo") == "nccl":      # before any process starts
        import torch
        if not torch.cuda.is_available():
            raise PartplanError("--backend nccl needs a CUDA GPU; none is visible here (probe with --backend gloo)")
    timeout = float(cfg.get("timeout", 60.0))
    if not timeout > 0:
        raise PartplanError(f"--timeout must be > 0 seconds (how long a rank waits for a peer), got {timeout:g}")
    return dict(cfg, output=str(out), backend=cfg.get("backend", "gloo"), small=small, large=large,
                repeat=int(cfg.get("repeat", 5)), timeout=timeout)


def run_probe(output, *, nprocs: int | None = None, backend: str = "gloo", small: int = 8,
              large: int = 1 << 22, repeat: int = 5, timeout: float = 60.0) -> dict:
    """Probe ``nprocs`` local processes (None: this process is one rank under
    torchrun): :func:`probe_config`, then :func:`probe_rank` on each process."""
    from .launch import start
    cfg = probe_config({"job": "topoprobe", "output": output, "backend": backend, "small": small, "large": large,
                        "repeat": repeat, "timeout": timeout}, nprocs)
    return start(cfg, nprocs, probe_rank, timeout_s=timeout, threads=None)
