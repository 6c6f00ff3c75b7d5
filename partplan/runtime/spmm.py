"""Distributed SpMM ``Z = A @ H`` from a plan: :func:`run_spmm` (a measured job on
p processes), :class:`DistSpMM` (inside your own torch training loop) and
:func:`replay` (all ranks in one process through :class:`LocalComm`).

The measured job's work is one function, :func:`spmm_rank` (every rank in
this process with the local backend, one rank of torch.distributed
otherwise); :func:`spmm_config` checks everything before any process starts
and :func:`run_spmm` (or the ``spmm`` job of :mod:`partplan.jobs`) starts it
through :func:`partplan.runtime.launch.start`.

Files are in the graph's vertex order: ``H.npy`` and ``Z.npy`` are ``n × f``
arrays whose row v belongs to vertex v of the graph the plan was built for.
Each rank memory-maps ``H.npy`` and reads only its own rows; the output is a
memory-mapped ``.npy`` into which each rank writes its own rows, renamed into
place by rank 0 when all are done (never half-written).

Figures (what ``partplan run spmm --json`` prints): predicted bytes come from
the manifest's count pairs × f × itemsize; measured bytes are what the
executor handed to ``all_to_all_single`` during one pass, per (rank, peer);
``bytes_match`` is true iff the two p × p matrices are equal. Times: per
repeat, each phase's seconds are maxed over ranks (barrier before each
repeat); reported values are medians over repeats.
"""
from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import numpy as np

from ..errors import OptionError, PlanError
from ..io.outpath import check_output_file
from ..program.plan import Plan, manifest_groups, manifest_volume, program_steps
from ..plan.store import load_plan, read_manifest
from .comm import BACKENDS, LocalComm
from .interpreter import PHASES, Executor
from .launch import SharedOutput, check_nprocs
from .ops import NumpyOps

COMPARE = ("oblivious", "bare")


# ----------------------------------------------------------------------------- features
def random_rows(ids: np.ndarray, f: int, seed: int = 0, dtype="float32") -> np.ndarray:
    """Deterministic features in [-1, 1): row v depends only on (seed, v, f), so
    every rank count sees the same H (splitmix64 of ``v·f + j``, vectorized)."""
    ids = np.asarray(ids, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = ids[:, None] * np.uint64(f) + np.arange(f, dtype=np.uint64)[None, :]
        x = x + np.uint64(seed % (1 << 63)) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return ((x >> np.uint64(11)).astype(np.float64) * (2.0 / (1 << 53)) - 1.0).astype(dtype)


def zipfile_magic(path) -> bool:
    """The file starts with a zip archive's magic bytes (an ``.npz``)."""
    with open(path, "rb") as fh:
        return fh.read(4) == b"PK\x03\x04"


def open_features(path, n: int) -> np.ndarray:
    """Memory-map ``H.npy`` (n × f, float32/float64) after checking its header."""
    p = Path(path)
    if not p.is_file():
        raise PlanError(f"{p}: no such features file")
    from ..io._common import npy_header
    try:        # the header first: numpy reads a file without the .npy magic as a pickle it refuses
        with open(p, "rb") as fh:
            npy_header(fh)
    except (ValueError, EOFError) as exc:
        if zipfile_magic(p):
            raise PlanError(f"{p}: not a .npy array (an .npz archive?); save H with numpy.save") from None
        raise PlanError(f"{p}: {exc} (features: an n x f array saved with numpy.save)") from None
    try:
        H = np.load(p, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise PlanError(f"{p}: not a readable .npy array ({str(exc).splitlines()[0]})") from None
    if not isinstance(H, np.ndarray):  # np.load gives an NpzFile for a zip archive
        raise PlanError(f"{p}: not a .npy array (an .npz archive?); save H with numpy.save")
    if H.ndim != 2 or H.shape[0] != n:
        raise PlanError(f"{p}: features must be an n × f array with n = {n} rows (the plan's graph), "
                        f"got shape {H.shape}")
    if H.dtype not in (np.float32, np.float64):
        order = (" (big-endian: save it little-endian, e.g. H.astype('<f4'))" if H.dtype.byteorder == ">"
                 and H.dtype.newbyteorder("<") in (np.float32, np.float64) else "")
        raise PlanError(f"{p}: features dtype {H.dtype} is not float32 or float64{order}")
    return H


def _bad_entry(block: np.ndarray, dtype) -> tuple[int, int, str] | None:
    """(i, j, why) of the first entry of ``block`` that is not finite, or (``dtype`` float32 and
    ``block`` float64) beyond float32's largest finite value, which the run's cast would make ±inf;
    None when there is none."""
    bad = ~np.isfinite(block)
    over = None
    if dtype is not None and np.dtype(dtype) == np.float32 and block.dtype == np.float64:
        with np.errstate(invalid="ignore"):
            over = np.abs(block) > np.finfo(np.float32).max
        bad = bad | over
    if not bad.any():
        return None
    i, j = (int(x) for x in np.argwhere(bad)[0])
    if over is not None and over[i, j]:
        return i, j, (f"is beyond float32's largest finite {float(np.finfo(np.float32).max):.4g} (--dtype "
                      f"float32): run with --dtype float64, or scale H")
    return i, j, "is not finite"


def check_finite_features(H: np.ndarray, path, *, chunk_elems: int = 1 << 22, dtype=None) -> None:
    """One PlanError naming the first non-finite entry ``H[i, j]`` (NaN or ±inf) — or, with
    ``dtype`` float32 and a float64 H, the first beyond float32's range — scanning a memory-mapped
    H in chunks of about ``chunk_elems`` values."""
    rows = max(1, chunk_elems // max(1, H.shape[1]))
    for r0 in range(0, H.shape[0], rows):
        found = _bad_entry(np.asarray(H[r0:r0 + rows]), dtype)
        if found is not None:
            i, j, why = found
            raise PlanError(f"{path}: features H[{r0 + i}, {j}] = {H[r0 + i, j]} {why}")


def _input_rows(cfg: dict, ids: np.ndarray, n: int, dtype) -> np.ndarray:
    """This rank's rows of H (only those are read), checked for NaN/inf unless
    the launching process scanned all of H already (``features_checked``; under
    torchrun none did)."""
    if cfg.get("features"):
        H = open_features(cfg["features"], n)
        ids = np.asarray(ids)
        if isinstance(H, np.memmap) and H.flags.c_contiguous:   # a window at a time, not the map's pages
            from .._rowio import read_file_rows
            try:
                rows = read_file_rows(cfg["features"], int(H.offset), H.shape, H.dtype, ids)
            except EOFError:
                raise PlanError(f"{cfg['features']}: truncated features file") from None
        else:
            rows = np.asarray(H[ids])
        found = None if cfg.get("features_checked") else _bad_entry(rows, dtype)   # before the cast
        if found is not None:
            i, j, why = found
            raise PlanError(f"{cfg['features']}: features H[{int(ids[i])}, {j}] = {rows[i, j]} {why}")
        with np.errstate(over="ignore"):   # checked above (or by the launching process)
            return np.ascontiguousarray(rows, dtype=dtype)
    return random_rows(ids, int(cfg.get("f") or 16), int(cfg.get("seed", 0)), dtype)


def _resolve_dtype(cfg: dict, n: int) -> np.dtype:
    if cfg.get("dtype"):
        dt = np.dtype(cfg["dtype"])
        if dt not in (np.float32, np.float64):
            raise PlanError(f"dtype must be float32 or float64, got {cfg['dtype']!r}")
        return dt
    if cfg.get("features"):
        return open_features(cfg["features"], n).dtype
    return np.dtype("float32")


# ----------------------------------------------------------------------------- output
# ----------------------------------------------------------------------------- the measured loop
def _allreduce_predicted(ex: Executor, program: str, row_bytes: int) -> np.ndarray:
    """int64[p]: bytes each local rank hands to the program's all-reduce steps, predicted from the
    manifest's steps and the shard's buffer sizes (:func:`partplan.program.steps.program_rows` on
    the all-reduce steps alone): what ``comm.reduce_bytes`` counts. torch.distributed's own
    traffic inside the all-reduce is not observable; the planner's ring model of it is
    :attr:`partplan.metrics.layouts.LayoutStats.reduce_rows`."""
    from ..program.steps import program_rows, step_op
    steps = [st for st in program_steps(ex.manifest, program) if step_op(st).op == "allreduce"]
    out = np.zeros(int(ex.manifest["ranks"]), dtype=np.int64)
    for rp in ex.shards:
        rows = program_rows(steps, rp.rank, rp.buffers(program),
                            lambda fam, r=rp.rank: ex.comm.member(fam, r) is not None, int(ex.manifest["ranks"]))
        out[rp.rank] = rows * row_bytes
    return out


def _measure(ex: Executor, program: str, inputs: list, cfg: dict) -> dict:
    """Warm-up, one counted pass (NaN-filled buffers: any unfilled row shows),
    then ``repeat`` timed passes; returns local figures and the outputs."""
    comm, ops = ex.comm, ex.ops
    repeat, warmup = int(cfg.get("repeat", 5)), int(cfg.get("warmup", 1))
    for _ in range(warmup):
        ex.run(program, inputs)
    prog = ex.programs[program]
    f = int(inputs[0].shape[1])
    for b in ex._buffers(prog, f):
        for name, buf in b.items():
            if name != "in":
                ops.fill(buf, float("nan"))
    comm.reset()
    outs = ex.run(program, inputs)
    sent = comm.sent_bytes.copy()
    reduce_b = comm.reduce_bytes.copy()
    reduce_pred = _allreduce_predicted(ex, program, f * int(inputs[0].itemsize))   # numpy or torch rows
    ex.check_finite(program, inputs, outs)  # collective: overflow / unwritten rows end every rank alike
    outs = [o.clone() if hasattr(o, "clone") else o.copy() for o in outs]
    times = np.zeros((repeat, 2 + len(PHASES)))
    for i in range(repeat):
        comm.barrier()
        t0 = time.perf_counter()
        ex.run(program, inputs)
        ops.synchronize()
        times[i, 0] = time.perf_counter() - t0  # the step as it runs (no inner barriers; overlapped if on)
        comm.barrier()
        ex.run(program, inputs, barriers=True)
        times[i, 1:1 + len(PHASES)] = [ex.last_phases[k] for k in PHASES]  # per phase, barrier before each collective
        comm.barrier()
        t0 = time.perf_counter()
        ex.run(program, inputs, overlap="off")
        ops.synchronize()
        times[i, -1] = time.perf_counter() - t0  # the same step strictly in order
    res = {"times": times, "sent": sent, "reduce": reduce_b, "reduce_pred": reduce_pred, "outs": outs}
    cmp_ = cfg.get("compare") or []
    if "oblivious" in cmp_:
        obl_rows = ex.prepare_oblivious(program)
        comm.reset()
        o2 = ex.run(program, inputs, mode="oblivious")
        for a, b in zip(o2, outs):
            if not np.array_equal(ops.to_numpy(a), ops.to_numpy(b)):
                raise PlanError("the oblivious baseline computed a different Z than the aware plan")
        res["obl_sent"] = comm.sent_bytes.copy()
        res["obl_rows"] = obl_rows
        ot = np.zeros((repeat, 2))
        for i in range(repeat):
            comm.barrier()
            t0 = time.perf_counter()
            ex.run(program, inputs, mode="oblivious")
            ops.synchronize()
            ot[i, 0] = time.perf_counter() - t0
            comm.barrier()
            ex.run(program, inputs, mode="oblivious", barriers=True)
            ot[i, 1] = ex.last_phases["exchange"]
        res["obl_times"] = ot
    if "bare" in cmp_:
        # bare all_to_all_single of the same splits, by the exchange phase's protocol: after a
        # step (the state the job's exchange runs in), a barrier before each call, the calls'
        # seconds summed; column 1: the same calls again at once (warm, back to back)
        bt = np.zeros((repeat, 2))
        ex.bare_exchange(program, f)
        for i in range(repeat):
            comm.barrier()
            ex.run(program, inputs, overlap="off")
            bt[i, 0] = ex.bare_exchange(program, f)
            bt[i, 1] = ex.bare_exchange(program, f)
        res["bare_times"] = bt.reshape(-1)
    return res


def calibrate_alltoall(comm, ops, repeat: int = 5, large_bytes: int | None = None) -> tuple[float, float]:
    """(α seconds per message, β seconds per byte) of this job's world
    ``all_to_all_single``, fitted from two of them on the job's own ranks,
    device and backend: every rank sends one 4-byte value to every peer
    (t_small = α·(p − 1)) and then L bytes to every peer (t_large = α·(p − 1) +
    β·(p − 1)·L; L = ``large_bytes``, default 1 MiB, at most 16 MiB over all
    peers; 4× once more if t_large did not exceed t_small). Times are medians
    over ``repeat`` of the max over ranks, barrier before each. (0, 0) on one rank."""
    p = comm.world
    if p < 2:
        return 0.0, 0.0
    torch, dist = comm.torch, comm.dist
    dev = comm.device

    def timed(nb: int) -> float:
        send = torch.zeros(p * max(1, nb // 4), dtype=torch.float32, device=dev)
        out = torch.empty_like(send)
        t = []
        for _ in range(repeat + 1):
            comm.barrier()
            t0 = time.perf_counter()
            comm._guard(lambda: dist.all_to_all_single(out, send), "calibration all-to-all")
            ops.synchronize()
            t.append(time.perf_counter() - t0)
        tw = comm.allreduce_world([np.asarray(t[1:])], "max")[0]  # every rank: the same sizes, the same calls
        return float(np.median(tw))

    big = int(large_bytes) if large_bytes else max(1 << 16, min(1 << 20, (16 << 20) // p))
    t_small, t_large = timed(4), timed(big)
    if t_large <= t_small:
        big *= 4
        t_large = timed(big)
    alpha = t_small / (p - 1)
    beta = max(t_large - t_small, 0.0) / ((p - 1) * big)
    return alpha, beta


def predicted_exchange(manifest: dict, program: str, row_bytes: int, alpha: float, beta: float) -> float:
    """α-β seconds of the program's exchange phase: per alltoallv step, the
    slowest rank's ``α·max(messages sent, received) + β·max(bytes sent,
    received)`` (:func:`partplan.metrics.cost.alpha_beta_time`), summed over
    the steps (they run one after another)."""
    from ..metrics.cost import alpha_beta_time
    from ..program.core import pairs_to_matrix
    from ..program.steps import pair_steps
    p = manifest["ranks"]
    total = 0.0
    for st in pair_steps(program_steps(manifest, program)):
        vol = pairs_to_matrix(st["pairs"], p) * row_bytes
        np.fill_diagonal(vol, 0)
        t = alpha_beta_time((vol > 0).sum(1), (vol > 0).sum(0), vol.sum(1), vol.sum(0), alpha, beta)
        total += float(t.max()) if t.size else 0.0
    return total


def _report(manifest, cfg, program, f, dtype, kernel, device, sent, reduce_b, reduce_pred, times, extra) -> dict:
    """rank-independent report from world-reduced arrays."""
    row_bytes = f * np.dtype(dtype).itemsize
    pred = manifest_volume(manifest, program) * row_bytes
    match = bool(np.array_equal(pred, sent))
    med = np.median(times, axis=0) if times.size else np.zeros(2 + len(PHASES))
    rep = {"ranks": manifest["ranks"], "backend": cfg["backend"], "layout": manifest["layout"],
           "program": program, "n": manifest["graph"]["n"], "nnz": manifest["graph"]["nnz"], "f": f,
           "dtype": str(np.dtype(dtype)), "kernel": kernel,
           "kernels": "native" if kernel == "scipy" else kernel, "device": str(device),
           "repeat": int(times.shape[0]),
           "bytes_predicted": int(pred.sum()), "bytes_measured": int(sent.sum()), "bytes_match": match,
           "messages_predicted": int(np.count_nonzero(pred)), "messages_measured": int(np.count_nonzero(sent)),
           # rows handed to the all-reduce steps (its wire traffic inside torch.distributed is not observable)
           "allreduce_bytes_predicted": int(np.asarray(reduce_pred).sum()),
           "allreduce_bytes_measured": int(reduce_b.sum()),
           "allreduce_bytes_match": int(np.asarray(reduce_pred).sum()) == int(reduce_b.sum()),
           "overlap": cfg.get("overlap", "on"),
           "step_s": float(med[0]), "step_sequential_s": float(med[-1]),
           **{f"{k}_s": float(v) for k, v in zip(PHASES, med[1:1 + len(PHASES)])}}
    if rep["step_s"] > 0:
        rep["overlap_speedup"] = rep["step_sequential_s"] / rep["step_s"]
    if not match:
        q, r = np.argwhere(pred != sent)[0]
        rep["bytes_mismatch"] = {"src": int(q), "dst": int(r), "predicted": int(pred[q, r]),
                                 "measured": int(sent[q, r])}
    rep.update(extra)
    rep.update(_level_bytes(manifest, pred, sent))
    return rep


def _level_bytes(manifest, pred, sent) -> dict:
    """Predicted and measured bytes per topology level, when the plan records a topology."""
    desc = (manifest.get("topology") or {}).get("description")
    if not desc:
        return {}
    from ..metrics.topology import level_bytes
    from ..topology import topology_from_json
    t = topology_from_json(desc)
    return {"bytes_by_level_predicted": level_bytes(pred, t), "bytes_by_level_measured": level_bytes(sent, t)}


def _finish_compare(res_w: dict, manifest, f, dtype) -> dict:
    out = {}
    row_bytes = f * np.dtype(dtype).itemsize
    if "obl_sent" in res_w:
        out["oblivious_bytes"] = int(res_w["obl_sent"].sum())
        out["oblivious_bytes_predicted"] = int(res_w["obl_rows"].sum() * row_bytes)
        out["oblivious_step_s"] = float(np.median(res_w["obl_times"][:, 0]))
        out["oblivious_exchange_s"] = float(np.median(res_w["obl_times"][:, 1]))
    if "bare_times" in res_w:
        bt = np.asarray(res_w["bare_times"]).reshape(-1, 2)
        out["bare_a2a_s"] = float(np.median(bt[:, 0]))
        out["bare_a2a_back_to_back_s"] = float(np.median(bt[:, 1]))
    if "alpha_beta" in res_w:
        alpha, beta = res_w["alpha_beta"]
        out["alpha_s"], out["beta_s_per_byte"] = alpha, beta
        out["calibration"] = "world all_to_all_single of 4 B and up to 1 MiB per peer, this job's ranks"
        out["exchange_predicted_s"] = predicted_exchange(manifest, res_w["program"], row_bytes, alpha, beta)
    return out


def _ratios(rep: dict) -> dict:
    if rep.get("oblivious_exchange_s"):
        rep["aware_over_oblivious_exchange"] = rep["exchange_s"] / rep["oblivious_exchange_s"]
    if rep.get("bare_a2a_s"):
        rep["exchange_over_bare"] = rep["exchange_s"] / rep["bare_a2a_s"]
    if rep.get("exchange_predicted_s"):
        rep["exchange_over_predicted"] = rep["exchange_s"] / rep["exchange_predicted_s"]
    return rep


# ----------------------------------------------------------------------------- local (one process)
def local_executor(plan: Plan | str | os.PathLike, *, dtype="float64", verify: bool = True,
                   device: str | None = None, kernels: str = "auto", overlap: str = "on") -> Executor:
    """An :class:`Executor` over all ranks of a plan in this process (LocalComm):
    numpy buffers and scipy when ``device`` is None, else torch tensors on
    ``device`` (every exchange a device copy: p ranks on one GPU) with the
    ``kernels`` SpMM ("auto": torch on CUDA, native = scipy on CPU)."""
    if not isinstance(plan, Plan):
        plan = load_plan(plan)
    if device is None and kernels == "torch":
        device = "cpu"   # torch kernels on CPU tensors
    if device is None:
        comm, ops = LocalComm(plan.manifest["ranks"], plan.groups()), NumpyOps(dtype)
    else:
        from .ops import TorchOps
        comm = LocalComm(plan.manifest["ranks"], plan.groups(), device=check_device(device))
        ops = TorchOps(dtype, device, kernels)
    return Executor(plan.manifest, plan.ranks, comm, ops, verify=verify, overlap=overlap)


def check_device(device, what: str = "device"):
    """``device`` (a name or a torch.device) if torch can use it here, else one PlanError naming
    ``what`` (e.g. "cuda" on a machine without a GPU, "mps", "meta")."""
    import torch
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise PlanError(f"{what} {device!r} is not a torch device ({exc})") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise PlanError(f"{what} {device!r}: no CUDA GPU is available here (use the cpu)")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise PlanError(f"{what} {device!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s), "
                        f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    if dev.type not in ("cpu", "cuda"):
        raise PlanError(f"{what} {device!r}: partplan runs on cpu or cuda")
    return device


def replay(plan: Plan, H: np.ndarray, program: str = "forward") -> np.ndarray:
    """``A @ H`` (forward) or ``A^T @ H`` (backward) computed only through the
    plan's program on LocalComm; H is ``n × f`` in vertex order, so is the result."""
    if not isinstance(plan, Plan):
        raise PlanError(f"replay: plan must be a partplan Plan (partplan.load_plan / build_plan), got "
                        f"{type(plan).__name__}")
    H = np.asarray(H)
    if H.ndim == 1:
        H = H[:, None]
    n = plan.part.size
    if H.ndim != 2 or H.shape[0] != n or H.dtype.kind not in "biuf":
        raise PlanError(f"replay: H must be n × f real numbers with n = {n} rows (the plan's graph), got shape "
                        f"{H.shape} of {H.dtype}")
    dt = np.result_type(H.dtype, np.float32)
    ex = local_executor(plan, dtype=dt)
    outs = ex.run(program, [np.asarray(H[rp.in_ids(program)], dtype=dt) for rp in plan.ranks])
    Z = np.zeros((plan.part.size, H.shape[1]), dtype=outs[0].dtype if outs else H.dtype)
    for rp, z in zip(plan.ranks, outs):
        if rp.writes_output(program):
            Z[rp.out_ids(program)] = z
    return Z


def _rss() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


# ----------------------------------------------------------------------------- the ranks' work
def _comm_and_ops(ctx, m: dict, dtype, cfg: dict):
    """(comm, ops, device) of this process: every rank here (LocalComm; numpy
    buffers unless a device or the torch kernels ask for tensors), or one rank
    of torch.distributed (TorchComm, tensors on the context's device)."""
    kernels = cfg.get("kernels") or cfg.get("kernel") or "auto"
    from .ops import TorchOps
    if not ctx.local:
        return ctx.comm(manifest_groups(m), m["ranks"]), TorchOps(dtype, ctx.device, kernels), ctx.device
    dev = cfg.get("device") or ("cpu" if kernels == "torch" else None)
    if dev is None:
        return LocalComm(m["ranks"], manifest_groups(m)), NumpyOps(dtype), "cpu"
    comm = LocalComm(m["ranks"], manifest_groups(m), device=check_device(dev))
    return comm, TorchOps(dtype, dev, kernels), dev


def _world_figures(comm, res: dict, program: str) -> dict:
    """The measured figures summed (bytes) or maxed (times) over the ranks of a
    torch.distributed job (numeric all-reduces only: any backend, no shared files)."""
    p = comm.world

    def red(a, op, shape):
        return comm.allreduce_world([np.asarray(a, dtype=np.float64).reshape(-1)], op)[0].reshape(shape)
    out = {"program": program, "sent": red(res["sent"], "sum", (p, p)).astype(np.int64),
           "reduce": red(res["reduce"], "sum", (-1,)), "reduce_pred": red(res["reduce_pred"], "sum", (-1,)),
           "times": red(res["times"], "max", res["times"].shape)}
    if "obl_sent" in res:
        out["obl_sent"] = red(res["obl_sent"], "sum", (p, p))
        out["obl_rows"] = red(res["obl_rows"], "sum", (p, p))
        out["obl_times"] = red(res["obl_times"], "max", (-1, 2))
    if "bare_times" in res:
        out["bare_times"] = red(res["bare_times"], "max", (-1,))
    return out


def spmm_rank(ctx, cfg: dict) -> dict | None:
    """The spmm job's work in this process (every rank of the plan with the
    local backend, one rank under torch.distributed): read the shards, run
    the measured passes, write the rows of ``Z`` this process holds into the
    shared output; the leader returns the report."""
    m = read_manifest(cfg["plan"])
    shards = ctx.shards(cfg["plan"], m)
    n = m["graph"]["n"]
    program = cfg.get("program", "forward")
    dtype = _resolve_dtype(cfg, n)
    if cfg.get("output") and ctx.leader:
        check_output_file(cfg["output"], kind="npy")
    comm, ops, device = _comm_and_ops(ctx, m, dtype, cfg)
    ex = Executor(m, shards, comm, ops, overlap=cfg.get("overlap", "on"))
    inputs = [ops.from_numpy(_input_rows(cfg, rp.in_ids(program), n, dtype)) for rp in shards]
    f = int(inputs[0].shape[1])
    out = None
    if cfg.get("output"):  # unique temp, space reserved before the work; every rank learns its name
        out = SharedOutput.create(LocalComm(1, []) if ctx.local else comm, ctx.rank or 0, Path(cfg["output"]),
                                  dtype, (n, f))
    try:
        res = _measure(ex, program, inputs, cfg)
        if ctx.local:
            res_w, extra = res, {}
        else:
            import torch
            res_w = _world_figures(comm, res, program)
            res_w["alpha_beta"] = calibrate_alltoall(comm, ops, repeat=max(3, int(cfg.get("repeat", 5))))
            vec = np.zeros(2 * comm.world)
            vec[ctx.rank] = _rss()
            vec[comm.world + ctx.rank] = sum(a.nbytes for a in shards[0].arrays.values())
            vec = comm.allreduce_world([vec], "sum")[0]
            extra = {"peak_rss_bytes_per_rank": [int(v) for v in vec[:comm.world]],
                     "shard_array_bytes_per_rank": [int(v) for v in vec[comm.world:]],
                     "torch_threads": torch.get_num_threads(), "output": cfg.get("output")}
        if out is not None:  # each writing rank fills its rows of rank 0's reserved temporary, rank 0 renames
            for rp, z in zip(shards, res["outs"]):
                if rp.writes_output(program):
                    out.write(rp.out_ids(program), ops.to_numpy(z))
            out.finish()
    except BaseException:
        if out is not None:
            out.discard()
        raise
    if not ctx.leader:
        return None
    extra = {**_finish_compare(res_w, m, f, dtype), **extra}
    if ctx.local:
        extra["peak_rss_bytes"] = _rss()
        extra["output"] = cfg.get("output")      # where Z went, as the other backends report it
    rep = _report(m, cfg, program, f, dtype, ops.kernel, device, res_w["sent"], res_w["reduce"], res_w["reduce_pred"],
                  res_w["times"], extra)
    return _ratios(rep)


# ----------------------------------------------------------------------------- public API
def spmm_config(cfg: dict, nprocs: int | None = None) -> dict:
    """The spmm job's config checked before any process starts (the plan, its
    program, the features — scanned once for NaN / inf —, the output, the
    process count, the options); returns the config the ranks run on (keys
    as :func:`run_spmm` takes them, others kept)."""
    cfg = dict(cfg)
    backend, plan = cfg.get("backend", "gloo"), cfg["plan"]
    if backend not in BACKENDS:
        raise PlanError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    compare = list(cfg.get("compare") or ())
    bad = [c for c in compare if c not in COMPARE]
    if bad:
        raise PlanError(f"--compare takes {', '.join(COMPARE)}; got {', '.join(bad)}")
    from .interpreter import OVERLAP
    from .ops import KERNELS
    kernels = cfg.pop("kernel", None) or cfg.get("kernels") or "auto"
    if kernels not in KERNELS:
        raise PlanError(f"kernels must be one of auto, torch, native (scipy: native's older name); got {kernels!r}")
    overlap, device = cfg.get("overlap", "on"), cfg.get("device")
    if overlap not in OVERLAP:
        raise PlanError(f"overlap must be on or off, got {overlap!r}")
    if device is not None or backend == "nccl":
        check_device(device or "cuda")
        if backend == "gloo" and device.startswith("cuda"):
            raise PlanError("gloo's all-to-all takes CPU tensors only: use --backend nccl (one GPU per rank) "
                            "or --backend local (every rank on one device) with --device cuda")
    repeat, warmup, f = cfg.get("repeat", 5), cfg.get("warmup", 1), cfg.get("f", 16)
    if repeat < 1 or warmup < 0:
        raise PlanError("repeat must be >= 1 and warmup >= 0")
    features = cfg.get("features")
    if features is None and (not isinstance(f, (int, np.integer)) or f < 1):
        raise PlanError(f"f (feature width) must be an integer >= 1, got {f!r}")
    if features is not None and not isinstance(features, (str, os.PathLike)):
        raise PlanError(f"features must be the path of an H.npy file (n × f), got {type(features).__name__}")
    from .._args import check_real
    from .._seed import check_seed
    check_seed(cfg.get("seed", 0), error=PlanError)
    check_real("timeout (seconds)", cfg.get("timeout", 60.0), lo_open=True, error=PlanError)
    if cfg.get("dtype") is not None:
        from ..metrics.cost import dtype_bytes
        try:
            dtype_bytes(cfg["dtype"])
        except OptionError as exc:
            raise PlanError(f"dtype: {exc}") from None
    m = read_manifest(plan)  # refuse a bad plan before starting anything
    program = cfg.get("program", "forward")
    if program not in m["programs"]:
        raise PlanError(f"{plan}: the plan has no {program} program (backward = {m.get('backward')!r})")
    check_nprocs(plan, m, nprocs)
    if cfg.get("output") is not None:
        check_output_file(cfg["output"], kind="npy")
    scanned = False
    if features is not None:
        from .launch import under_torchrun
        if nprocs is not None or backend == "local" or not under_torchrun():   # one scan, before any start
            check_finite_features(open_features(features, m["graph"]["n"]), features, dtype=cfg.get("dtype"))
            scanned = True
        else:       # under torchrun every rank is this process: each checks the rows it reads
            open_features(features, m["graph"]["n"])
    cfg.update({"plan": str(plan), "backend": backend, "features": None if features is None else str(features),
                "f": int(f), "seed": int(cfg.get("seed", 0)), "dtype": cfg.get("dtype"),
                "output": None if cfg.get("output") is None else str(cfg["output"]),
                "repeat": int(repeat), "warmup": int(warmup), "compare": compare, "kernels": kernels,
                "device": device, "overlap": overlap, "timeout": float(cfg.get("timeout", 60.0)),
                "program": program, "features_checked": scanned})
    return cfg


def run_spmm(plan, *, nprocs: int | None = None, backend: str = "gloo", features=None, f: int = 16,
             seed: int = 0, dtype: str | None = None, output=None, repeat: int = 5, warmup: int = 1,
             compare=(), kernel: str | None = None, timeout: float = 60.0, program: str = "forward",
             threads: int | None = None, kernels: str = "auto", device: str | None = None,
             overlap: str = "on") -> dict:
    """Run ``Z = A @ H`` (or the backward ``A^T @ G`` with ``program="backward"``)
    from a plan and measure it.

    plan : plan directory. nprocs : processes to start here (None under
    torchrun: this process is one rank). backend : "gloo", "nccl" or "local"
    (all ranks in this process, LocalComm — exact, no timing meaning).
    features : ``H.npy`` (n × f) or None for deterministic random features of
    width ``f`` from ``seed``. output : ``Z.npy`` to write. compare : subset of
    ("oblivious", "bare"). kernels : local SpMM ("auto": torch on CUDA, native
    = scipy on CPU; "torch"; ``kernel`` is the older name of this option).
    device : "cpu" / "cuda" (None: cuda with nccl, else cpu; with backend
    "local" None keeps numpy buffers, a device puts every rank's tensors on it).
    overlap : "on" starts each exchange asynchronously and computes the rows
    that need no received row meanwhile (bitwise the same Z), "off" runs the
    steps in order; the report has both step times.
    timeout : seconds a rank waits on a peer before failing. threads : torch /
    OpenMP threads per process (None: 1 for the processes started here; under
    torchrun, torchrun's ``OMP_NUM_THREADS``).

    Every check happens before any process starts (:func:`spmm_config`); each
    process then runs :func:`spmm_rank`. Returns the report dict (keys listed
    in docs/design/runtime.md); under torchrun only rank 0 returns it (others None).
    """
    from .launch import start
    cfg = spmm_config({"job": "spmm", "plan": plan, "backend": backend, "features": features, "f": f, "seed": seed,
                       "dtype": dtype, "output": output, "repeat": repeat, "warmup": warmup, "compare": compare,
                       "kernel": kernel, "kernels": kernels, "device": device, "overlap": overlap,
                       "timeout": timeout, "program": program}, nprocs)
    return start(cfg, nprocs, spmm_rank, timeout_s=timeout, threads=threads)


class DistSpMM:
    """The plan's exchange inside your own torch.distributed program — now
    :class:`partplan.nn.DistSpMM` (an autograd-aware ``torch.nn.Module``); this
    name builds one with the older keywords (``kernel``, ``dtype`` as a string).

    After ``init_process_group`` (torchrun), every rank does::

        op = DistSpMM("g.plan")                      # reads manifest + its own shard only
        H_local = features[op.in_ids]                # rows this rank holds
        Z_local = op.forward(H_local)                # rows op.out_ids of A @ H (autograd-aware)
        G_in = op.backward(dL_dZ_local)              # rows op.in_ids of A^T @ G (no autograd)

    Tensors stay on ``device`` (CUDA with NCCL); results are fresh tensors.
    """

    def __new__(cls, plan, *, device=None, kernel: str = "auto", dtype: str = "float32",
                timeout: float = 60.0, verify: bool = True):
        from .dist_spmm import DistSpMM as _Module
        return _Module(plan, device=device, kernels=kernel, dtype=dtype, timeout=timeout, verify=verify)
