"""GCN training from a plan — full-batch, or mini-batch with ``sampler``
(:mod:`partplan.nn.minibatch`): :func:`train_gcn` (p processes, gloo / NCCL,
or p virtual ranks with ``backend="local"``): :func:`train_config` checks
everything before any process starts, :func:`train_rank` is the work of one
process (every rank here, or one rank under torchrun / ``--nprocs``).

Per epoch every rank runs the model's forward (``L − 1`` planned SpMMs after
the one-off ``Â X``), the loss on its training rows, the backward (``L − 1``
planned backward SpMMs), one world all-reduce (sum) of the flattened weight
gradients, and an Adam step — identical on every rank, so the model is the
same at any p.

Bytes (``bytes_per_epoch_*``): predicted = for each exchanging layer, the
forward and backward programs' count pairs × width × itemsize plus their
in-program all-reduces (1.5D), plus parameters × itemsize × ranks for the
gradient all-reduce; measured = what the comm counters saw during the epoch.
The per-epoch scalar reductions of the loss and of the accuracy counts (8-byte
values, ``allreduce_world``) are control traffic and not counted.

:class:`~partplan.runtime.LocalComm` holds one model for all virtual ranks:
its backward already sums every rank's loss, so the gradient all-reduce gets
the total from virtual rank 0 and zeros from the others (same bytes counted).
"""
from __future__ import annotations

import resource
import sys
import time

import numpy as np

from .._seed import numpy_seed
from ..errors import PartplanError, PlanError
from ..program.plan import manifest_groups, program_steps
from ..program.core import Group
from ..plan.store import load_plan, load_plan_partition, load_rank, read_manifest
from ..runtime.comm import BACKENDS
from .data import DataError, check_data, random_data, read_rows
from .normalize import NORMALIZATIONS, NormalizationError



# ----------------------------------------------------------------------------- checks
def check_plan_for_gcn(m: dict, where) -> None:
    """A plan the GCN can train on: a GCN normalization, conformal ownership."""
    if m.get("normalize") not in NORMALIZATIONS:
        raise NormalizationError(
            f"{where}: the plan multiplies A as read (normalize = {m.get('normalize')!r}); GCN training needs "
            f"the normalized adjacency stored as plan values. Rebuild it with `partplan plan GRAPH --partition "
            f"FILE --normalize gcn -o X.plan` or `partplan partition GRAPH -k K --normalize gcn -o X.plan`")
    if m.get("ownership") == "decoupled":
        raise PlanError(f"{where}: decoupled ownership (input rows on other ranks than output rows) cannot chain "
                        f"GCN layers; build the plan with --ownership conformal")
    if "backward" not in m["programs"]:
        raise PlanError(f"{where}: the plan has no backward program (built with --backward none); rebuild it "
                        f"with the default --backward auto")


def _check_shard(rp) -> None:
    for prog in ("forward", "backward"):
        if not np.array_equal(rp.in_ids(prog), rp.out_ids(prog)):
            raise PlanError(f"rank {rp.rank}: the {prog} program's output rows differ from its input rows; "
                            f"GCN layers cannot chain on this plan")


def replication(m: dict) -> int:
    """Ranks holding each row (1.5D: c; 1D / 2D: 1)."""
    return int(m["ranks"]) // int(m["row_blocks"])


def world_groups(m: dict) -> list[Group]:
    """The plan's groups plus ``world`` (for the gradient all-reduce) if absent."""
    groups = manifest_groups(m)
    if not any(g.name == "world" for g in groups):
        groups.append(Group("world", tuple(range(m["ranks"]))))
    return groups


def program_bytes(m: dict, rp, comm, program: str, width: int, itemsize: int) -> int:
    """Bytes rank ``rp.rank`` hands to collectives in one run of ``program`` at
    ``width`` columns: its alltoallv rows (the manifest's count pairs) plus the
    rows of its in-program all-reduces (from the shard's buffer sizes)."""
    from ..program.steps import program_rows
    rows = program_rows(program_steps(m, program), rp.rank, rp.buffers(program),
                        lambda fam: comm.member(fam, rp.rank) is not None, int(m["ranks"]))
    return rows * int(width) * int(itemsize)


def allreduce_gradients(model, comm) -> None:
    """Sum the flattened weight gradients over the world (one all-reduce).

    One model serves all local ranks of a :class:`LocalComm` (its backward has
    summed them already): virtual rank 0 contributes the gradient, the others
    zeros, so the result and the bytes counted are those of p real ranks."""
    import torch
    flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).contiguous()
    if len(comm.local) > 1 or not hasattr(comm, "dist"):  # LocalComm: numpy buffers
        a = flat.detach().cpu().numpy()
        bufs = [a.copy()] + [np.zeros_like(a) for _ in comm.local[1:]]
        comm.allreduce("world", bufs, "sum", what="gradient all-reduce")
        total = torch.from_numpy(bufs[0]).to(flat.device)
    else:
        comm.allreduce("world", [flat], "sum", what="gradient all-reduce")
        total = flat
    off = 0
    for p in model.parameters():
        p.grad.copy_(total[off:off + p.numel()].view_as(p))
        off += p.numel()


#: seconds between two progress lines of a long mini-batch run at most (besides one per tenth)
PROGRESS_EVERY_S = 10.0


def _say(cfg: dict, msg: str) -> None:
    """A progress line: to the launcher's progress file when there is one (it
    echoes the lines on its stderr while the ranks run), else to stderr."""
    if cfg.get("progress_file"):
        with open(cfg["progress_file"], "a") as fh:
            fh.write(msg + "\n")
    else:
        print(msg, flush=True, file=sys.stderr)


def _write_predictions(cfg: dict, comm, ids: list, preds: list, n: int, c: int) -> str | None:
    """Write the predicted class of every vertex as ``int64[n]`` in vertex order to
    ``cfg["predictions"]`` (rank 0, atomic). Each process sends its rows' (vertex, class) pairs
    to rank 0 alone, so only rank 0 holds n-sized arrays (the file's and what it gathers); a row
    held by ``c`` replicas counts 1/c from each. A vertex no rank holds is one PlanError on every
    rank. Returns the path on rank 0."""
    size = sum(int(np.asarray(i).size) for i in ids)
    pairs = np.empty((size, 2), dtype=np.int64)          # (vertex, class) of this process's rows
    at = 0
    for i, p in zip(ids, preds):
        m = int(np.asarray(i).size)
        pairs[at:at + m, 0], pairs[at:at + m, 1] = i, p
        at += m
    if len(comm.local) < comm.world:                       # one process per rank: gather on rank 0
        counts = np.zeros(comm.world, dtype=np.int64)
        counts[0] = size
        pairs, _ = comm.exchange_rows(pairs, counts, what="predictions")
    missing = -1
    if comm.local[0] == 0:
        if c == 1:       # every row held once: the classes go straight to their places
            out = np.full(n, -1, dtype=np.int64)
            out[pairs[:, 0]] = pairs[:, 1]
        else:            # c replicas of each row count 1/c each: class + 1 summed (0: no rank held it)
            vec = np.zeros(n, dtype=np.float64)
            for lo in range(0, pairs.shape[0], 1 << 20):   # blocks: no float copy of every pair at once
                blk = pairs[lo:lo + (1 << 20)]
                np.add.at(vec, blk[:, 0], (blk[:, 1] + 1.0) / c)
            out = np.rint(vec).astype(np.int64) - 1
            vec = None
        pairs = None
        if np.any(out < 0):
            missing = int(np.flatnonzero(out < 0)[0])
    if len(comm.local) < comm.world:                       # every rank raises alike, none waits for rank 0
        missing = int(comm.allreduce_world([np.array([float(missing)])], "max")[0][0])
    if missing >= 0:
        from ..errors import PlanError
        raise PlanError(f"{cfg['plan']}: no rank holds vertex {missing}; no predictions written")
    if comm.local[0] != 0:
        return None
    from .._atomic import atomic_path
    with atomic_path(cfg["predictions"], suffix=".npy") as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, out, allow_pickle=False)
    return str(cfg["predictions"])


def evaluate(model, xchg, ax: list, ids: list, ys: list, masks: dict, comm, c: int,
             preds: list | None = None) -> dict:
    """Full-graph accuracies (eval mode) through the plan's forward program:
    ``{"train_acc", "val_acc", "test_acc"}``, each row counted once (1/c per replica).
    ``preds``: a list the predicted classes of each local rank are appended to."""
    import torch
    model.eval()
    with torch.no_grad():
        logits = model(xchg, ax, ids)
    counts = []
    for i, lg in enumerate(logits):
        pred_y = lg.argmax(dim=1)
        if preds is not None:
            preds.append(pred_y.cpu().numpy())
        v = []
        for k in ("train_mask", "val_mask", "test_mask"):
            mk = masks[k][i]
            v += [float((pred_y[mk] == ys[i][mk]).sum()) / c, float(mk.sum()) / c]
        counts.append(v)
    cnt = comm.allreduce_world([np.asarray(v, dtype=np.float64) for v in counts], "sum")[0]
    return {k: (float(cnt[2 * j] / cnt[2 * j + 1]) if cnt[2 * j + 1] else None)  # None: empty mask
            for j, k in enumerate(("train_acc", "val_acc", "test_acc"))}


# ----------------------------------------------------------------------------- the loop (any comm)
def _train(m: dict, shards: list, comm, ops, cfg: dict, device: str = "cpu") -> tuple[dict, object]:
    """Full-batch training for the local ranks of ``comm``; returns (report, model)."""
    import torch
    import torch.nn.functional as F

    from ..runtime.interpreter import Executor
    from .gcn import DistGCN, PlanExchange

    tdt = torch.float64 if cfg.get("dtype") == "float64" else torch.float32
    npdt = np.float64 if tdt == torch.float64 else np.float32
    itemsize = np.dtype(npdt).itemsize
    for rp in shards:
        _check_shard(rp)
    ex = Executor(m, shards, comm, ops)
    xchg = PlanExchange(ex)
    c = replication(m)
    ids = [np.asarray(rp.in_ids("forward")) for rp in shards]
    if cfg.get("data"):
        rows = [read_rows(cfg["data"], i) for i in ids]
    else:
        rows = [random_data(i, int(cfg["random_features"]), int(cfg["classes"]), int(cfg.get("seed", 0)), npdt)
                for i in ids]

    def tens(a, dt=None):
        t = torch.from_numpy(np.ascontiguousarray(a))
        return t.to(device=device, dtype=dt) if dt is not None else t.to(device)

    xs = [tens(r["x"], tdt) for r in rows]
    ys = [tens(r["y"]) for r in rows]
    masks = {k: [tens(r[k]) for r in rows] for k in ("train_mask", "val_mask", "test_mask")}
    f_in = int(xs[0].shape[1]) if xs else 0
    classes = int(cfg["classes"])
    model = DistGCN(f_in, int(cfg["hidden"]), classes, layers=int(cfg["layers"]), dropout=float(cfg["dropout"]),
                    seed=int(cfg.get("seed", 0)), dtype=tdt).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=float(cfg["lr"]), weight_decay=float(cfg["weight_decay"]))
    nparams = sum(p.numel() for p in model.parameters())

    def world_sum(vecs):
        return comm.allreduce_world([np.asarray(v, dtype=np.float64) for v in vecs], "sum")[0]

    n_train = world_sum([[float(mk.sum()) / c] for mk in masks["train_mask"]])[0]
    # predicted bytes
    widths = model.exchange_widths()
    pred = [sum(program_bytes(m, rp, comm, prog, w, itemsize) for w in widths for prog in ("forward", "backward"))
            + nparams * itemsize for rp in shards]
    pred_setup = [program_bytes(m, rp, comm, "forward", f_in, itemsize) for rp in shards]
    pred_epoch, pred_setup = world_sum([[v] for v in pred])[0], world_sum([[v] for v in pred_setup])[0]
    # Â X once
    comm.reset()
    t0 = time.perf_counter()
    ax = model.precompute(xchg, xs)
    setup_s = time.perf_counter() - t0
    setup_measured = float(comm.sent_bytes.sum() + comm.reduce_bytes.sum())
    epochs = int(cfg["epochs"])
    losses, measured = [], []
    times = np.zeros((epochs, 5))  # epoch, exchange, spmm, grad all-reduce, dense
    progress = cfg.get("progress") and comm.local[0] == 0
    last_said = time.perf_counter()
    for epoch in range(epochs):
        comm.reset()
        xchg.reset_phases()
        t0 = time.perf_counter()
        model.train()
        logits = model(xchg, ax, ids, epoch=epoch)
        terms = [F.cross_entropy(lg[tm], y[tm], reduction="sum") * (1.0 / (c * n_train)) + 0.0 * lg.sum()
                 for lg, y, tm in zip(logits, ys, masks["train_mask"])]
        opt.zero_grad(set_to_none=False)
        sum(terms).backward()
        t1 = time.perf_counter()
        allreduce_gradients(model, comm)
        t2 = time.perf_counter()
        opt.step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t3 = time.perf_counter()
        losses.append(float(world_sum([[t.item()] for t in terms])[0]))
        measured.append(float(comm.sent_bytes.sum() + comm.reduce_bytes.sum()))
        ph = xchg.phases
        exch = ph["exchange"] + ph["reduce"]
        spmm = ph["compute"] + ph["gather"] + ph["fold"]
        times[epoch] = [t3 - t0, exch, spmm, t2 - t1, (t3 - t0) - exch - spmm - (t2 - t1)]
        # a line for the first and last epoch, every tenth of the run, and at least every 2 s
        if progress and (epoch == 0 or epoch + 1 == epochs or (epoch + 1) % max(1, epochs // 10) == 0
                         or time.perf_counter() - last_said > 2.0):
            _say(cfg, f"[train] epoch {epoch + 1}/{epochs} loss {losses[-1]:.4f} "
                      f"({times[epoch, 0]:.3f} s/epoch)")
            last_said = time.perf_counter()
    preds = [] if cfg.get("predictions") else None
    acc = evaluate(model, xchg, ax, ids, ys, masks, comm, c, preds)  # not counted in the epoch figures
    written = _write_predictions(cfg, comm, ids, preds, int(m["graph"]["n"]), c) if preds is not None else None
    tmax = comm.allreduce_world([times.reshape(-1)], "max")[0].reshape(times.shape)
    meas = world_sum([measured])  # per epoch, summed over processes
    med = np.median(tmax[1:] if epochs > 1 else tmax, axis=0)  # epoch 0 warms up
    rep = {"job": "train-gcn", "ranks": m["ranks"], "layout": m["layout"], "normalize": m.get("normalize"),
           "n": m["graph"]["n"], "nnz": m["graph"]["nnz"], "features": f_in, "hidden": int(cfg["hidden"]),
           "layers": int(cfg["layers"]), "classes": classes, "dtype": str(np.dtype(npdt)), "epochs": epochs,
           "params": int(nparams), "exchange_widths": widths,
           "losses": losses, **acc,
           "epoch_s": float(med[0]),
           # per-phase seconds need the device synchronized after each step: on a GPU they are not
           # measured (host times of queued work would be reported, the GPU time landing in dense_s)
           **({"exchange_s": float(med[1]), "spmm_s": float(med[2]), "allreduce_s": float(med[3]),
               "dense_s": float(med[4])} if xchg.ex.phase_times
              else dict.fromkeys(("exchange_s", "spmm_s", "allreduce_s", "dense_s"))),
           "bytes_per_epoch_predicted": int(pred_epoch), "bytes_per_epoch_measured": int(meas[0]),
           "bytes_match": bool(np.all(meas == pred_epoch)),
           "gradient_allreduce_bytes_per_epoch": int(nparams * itemsize * m["ranks"]),
           "setup_bytes_predicted": int(pred_setup), "setup_bytes_measured": int(world_sum([[setup_measured]])[0]),
           "setup_s": setup_s}
    if written is not None:
        rep["predictions"] = written
    return rep, model


def check_minibatch_layout(plan, m: dict) -> None:
    """Mini-batch training's plans: 1D (its batch exchange follows the partition's parts, not a routed
    or 2D program); one PlanError saying how to build one otherwise."""
    from ..layouts import layout_class
    if not layout_class(m["layout"]).minibatch:
        raise PlanError(f"{plan}: mini-batch training runs on 1d plans (this one is {m['layout']}); build one "
                        f"from the same partition with --layout 1d, and without --route (or --route flat)")


def _train_minibatch(m: dict, shards: list, part: np.ndarray, comm, cfg: dict) -> tuple[dict, object]:
    """Mini-batch training (see :mod:`partplan.nn.minibatch`) for the local ranks of ``comm``:
    ``shards`` theirs (in ``comm.local`` order), ``part`` the plan's partition."""
    import torch
    import torch.nn.functional as F

    from .gcn import DistGCN
    from .minibatch import backward_exchanges, minibatch_forward, sampler_for
    from .sampling import DistSampler, HeldRows

    check_minibatch_layout(cfg["plan"], m)
    tdt = torch.float64 if cfg.get("dtype") == "float64" else torch.float32
    npdt = np.float64 if tdt == torch.float64 else np.float32
    itemsize = np.dtype(npdt).itemsize
    part, k = np.asarray(part, dtype=np.int64), m["ranks"]
    held = [HeldRows.from_shard(m, sh, part) for sh in shards]
    own = [h.ids for h in held]
    if cfg.get("data"):
        rows = [read_rows(cfg["data"], i) for i in own]
    else:
        rows = [random_data(i, int(cfg["random_features"]), int(cfg["classes"]), int(cfg.get("seed", 0)), npdt)
                for i in own]
    X = [r["x"].astype(npdt, copy=False) for r in rows]
    Y = [torch.from_numpy(r["y"]) for r in rows]
    TM = [r["train_mask"] for r in rows]
    L = int(cfg["layers"])
    smp = sampler_for(cfg["sampler"], L, cfg.get("batch_size"))
    dsmp = DistSampler(smp, held, comm, part)
    # what a rank holds to sample: its rows, the partition and (SAINT samplers) the degree vector
    structure = [h.nbytes + part.nbytes + (0 if dsmp.deg is None else dsmp.deg.nbytes) for h in held]
    structure_bytes = int(comm.allreduce_world([np.array([float(max(structure))])], "max")[0][0])
    model = DistGCN(int(X[0].shape[1]), int(cfg["hidden"]), int(cfg["classes"]), layers=L,
                    dropout=float(cfg["dropout"]), seed=int(cfg.get("seed", 0)), dtype=tdt)
    opt = torch.optim.Adam(model.parameters(), lr=float(cfg["lr"]), weight_decay=float(cfg["weight_decay"]))
    nparams = sum(p.numel() for p in model.parameters())
    rng = np.random.default_rng(numpy_seed(int(cfg.get("seed", 0)) + 7919))
    nb = int(cfg["epochs"]) * int(cfg["batches_per_epoch"])
    widths = [min(model.dims[i], model.dims[i + 1]) for i in range(L)]
    losses, rows_pb, pred_b, meas_b, times, fwd_rows, sample_values = [], [], [], [], [], [], []
    bwd = backward_exchanges(model)
    said = time.perf_counter()
    for b in range(nb):
        t0 = time.perf_counter()
        sampled0 = dsmp.sent_values
        hops, hop_vals = dsmp.sample(rng)
        sample_values.append(dsmp.sent_values - sampled0)
        first = np.unique(hops[L - 1][1])
        x_ids = [first[part[first] == r] for r in comm.local]
        x_rows = [np.ascontiguousarray(x[np.searchsorted(o, i)]) for x, o, i in zip(X, own, x_ids)]
        comm.reset()
        model.train()
        vols = []
        logits, seeds = minibatch_forward(model, comm, part, k, comm.local, hops, hop_vals, x_rows, x_ids,
                                          epoch_seed=b, vol_out=vols)
        fwd_rows.append(float(comm.sent_rows.sum()))  # this process's forward exchange rows (counters)
        sel = [np.flatnonzero(tm[np.searchsorted(o, sd)]) for tm, o, sd in zip(TM, own, seeds)]
        lab = [y[torch.from_numpy(np.searchsorted(o, sd))] for y, o, sd in zip(Y, own, seeds)]
        cnt = comm.allreduce_world([np.array([float(s_.size)]) for s_ in sel], "sum")[0][0]
        trained = cnt > 0     # the global batch holds a training seed (every rank sees the same count)
        if trained:           # else no loss, no gradient and no step (Adam's moments would move the weights)
            terms = [F.cross_entropy(lg[torch.from_numpy(s_)], lb[torch.from_numpy(s_)], reduction="sum")
                     / cnt + 0.0 * lg.sum() for lg, lb, s_ in zip(logits, lab, sel)]
            opt.zero_grad(set_to_none=False)
            sum(terms).backward()
            allreduce_gradients(model, comm)
            opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(float(comm.allreduce_world([np.array([t.item()]) for t in terms], "sum")[0][0])
                      if trained else None)
        rows_pb.append(int(sum(v.sum() for v in vols)))
        pred_b.append(sum(int(v.sum()) * w * itemsize * (2 if back and trained else 1)
                          for v, w, back in zip(vols, widths, bwd)) + (nparams * itemsize * k if trained else 0))
        meas_b.append(float(comm.sent_bytes.sum() + comm.reduce_bytes.sum()))
        if cfg.get("progress") and comm.local[0] == 0 and (
                (b + 1) % max(1, nb // 10) == 0 or time.perf_counter() - said >= PROGRESS_EVERY_S):
            said = time.perf_counter()     # a tenth of the batches, or every PROGRESS_EVERY_S seconds
            _say(cfg, f"[train] batch {b + 1}/{nb} " + (f"loss {losses[-1]:.4f}" if trained else
                                                         "without a training seed (no step)"))
    meas = comm.allreduce_world([np.asarray(meas_b, dtype=np.float64)], "sum")[0]
    rows_meas = comm.allreduce_world([np.asarray(fwd_rows, dtype=np.float64)], "sum")[0]
    tmax = comm.allreduce_world([np.asarray(times)], "max")[0]
    # accuracy of the trained weights on the full graph, through the plan's forward program
    from ..runtime.interpreter import Executor
    from ..runtime.ops import NumpyOps, TorchOps
    from .gcn import PlanExchange
    ops = NumpyOps(str(np.dtype(npdt))) if len(comm.local) > 1 or not hasattr(comm, "dist") else \
        TorchOps(str(np.dtype(npdt)), "cpu", _OPS_KERNEL[_kernels(cfg, "cpu")])
    xchg = PlanExchange(Executor(m, shards, comm, ops))
    ids = [np.asarray(rp.in_ids("forward")) for rp in shards]
    pos = [np.searchsorted(o, i) for o, i in zip(own, ids)]
    ax = model.precompute(xchg, [torch.from_numpy(np.ascontiguousarray(x[q])) for x, q in zip(X, pos)])
    acc = evaluate(model, xchg, ax, ids, [y[torch.from_numpy(q)] for y, q in zip(Y, pos)],
                   {k: [torch.from_numpy(r[k][q]) for r, q in zip(rows, pos)]
                    for k in ("train_mask", "val_mask", "test_mask")}, comm, 1)
    rep = {"job": "train-gcn", "mode": "minibatch", "ranks": k, "layout": m["layout"],
           "normalize": m.get("normalize"), "n": m["graph"]["n"], "nnz": m["graph"]["nnz"],
           "features": int(X[0].shape[1]), "hidden": int(cfg["hidden"]), "layers": L,
           "classes": int(cfg["classes"]), "dtype": str(np.dtype(npdt)), "epochs": int(cfg["epochs"]),
           "batches": nb, "sampler": smp.describe() if hasattr(smp, "describe") else cfg["sampler"],
           "params": int(nparams), "exchange_widths": widths, "losses": losses, **acc,
           "rows_per_batch_mean": float(np.mean(rows_meas)), "rows_per_batch": [int(v) for v in rows_meas],
           "rows_per_batch_predicted": rows_pb,
           "bytes_per_batch_predicted_mean": float(np.mean(pred_b)),
           "bytes_per_batch_measured_mean": float(np.mean(meas)),
           "bytes_match": bool(np.array_equal(np.asarray(pred_b, dtype=np.float64), meas)
                               and np.array_equal(np.asarray(rows_pb, dtype=np.float64), rows_meas)),
           "count_bytes_per_batch": int(8 * k * k * L),  # one int64 per (rank, peer) and layer
           "structure_bytes_per_rank": structure_bytes,
           "sample_bytes_per_batch_mean": float(8 * np.mean(sample_values)),   # all ranks' sends to draw a batch
           "batch_s": float(np.median(tmax[1:] if nb > 1 else tmax))}
    return rep, model


# ----------------------------------------------------------------------------- kernels
_OPS_KERNEL = {"torch": "torch", "native": "scipy"}  # the local SpMM of TorchOps for each kernel table


def _kernels(cfg: dict, device: str) -> str:
    """The resolved kernel table ("torch" / "native") of ``cfg["kernels"]`` on ``device``."""
    from ..runtime.kernels import resolve
    return resolve(cfg.get("kernels", "auto"), device)


# ----------------------------------------------------------------------------- the ranks' work
def train_rank(ctx, cfg: dict) -> dict | None:
    """The training of the ranks this process holds (a
    :class:`~partplan.runtime.launch.WorkerContext`: every rank here with the
    local backend, else one rank of torch.distributed); rank 0 returns the report."""
    if ctx.local:
        import torch
        before = torch.get_num_threads()
        if cfg.get("threads"):  # oversubscribed OpenMP threads cost 4x here (2 cores)
            torch.set_num_threads(int(cfg["threads"]))
        try:
            return _train_local(ctx, cfg)
        finally:
            torch.set_num_threads(before)
    return _train_rank(ctx, cfg)


def _train_local(ctx, cfg: dict) -> dict:
    from ..runtime.comm import LocalComm
    from ..runtime.ops import NumpyOps, TorchOps
    plan = load_plan(cfg["plan"])
    m = plan.manifest
    kernels = _kernels(cfg, ctx.device)
    if cfg.get("sampler") or (kernels == "native" and ctx.device == "cpu"):  # numpy buffers, scipy SpMM
        comm = LocalComm(m["ranks"], world_groups(m))
        ops = NumpyOps(cfg.get("dtype") or "float32")
    else:  # torch tensors on the device, every rank in this process
        comm = LocalComm(m["ranks"], world_groups(m), device=ctx.device)
        ops = TorchOps(cfg.get("dtype") or "float32", ctx.device, _OPS_KERNEL[kernels])
    if cfg.get("sampler"):
        rep, model = _train_minibatch(m, plan.ranks, plan.part, comm, cfg)
    else:
        rep, model = _train(m, plan.ranks, comm, ops, cfg, ctx.device)
    rep.update({"backend": "local", "device": ctx.device, "kernels": kernels, "peak_rss_bytes": _rss()})
    if cfg.get("save"):
        _save(model, rep, cfg)
    return rep


def _rss() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _save(model, rep: dict, cfg: dict) -> None:
    import torch

    from .._atomic import atomic_path
    state = {"state_dict": model.state_dict(), "dims": model.dims, "dropout": model.dropout,
             "normalize": rep["normalize"], "plan": cfg["plan"], "seed": cfg.get("seed", 0),
             "losses": rep["losses"]}
    with atomic_path(cfg["save"], suffix=".pt") as tmp:
        torch.save(state, tmp)


def predict(plan, model, x: np.ndarray) -> np.ndarray:
    """Logits ``n × classes`` of ``model`` (eval mode, no dropout) on features
    ``x`` (n × f, vertex order), computed through the plan's programs on
    LocalComm in this process."""
    import torch

    from ..runtime.comm import LocalComm
    from ..runtime.interpreter import Executor
    from ..runtime.ops import NumpyOps
    from .gcn import PlanExchange
    if not hasattr(plan, "manifest"):
        plan = load_plan(plan)
    m = plan.manifest
    dt = model.weights[0].dtype
    ex = Executor(m, plan.ranks, LocalComm(m["ranks"], world_groups(m)),
                  NumpyOps("float64" if dt == torch.float64 else "float32"))
    xchg = PlanExchange(ex)
    ids = [np.asarray(rp.in_ids("forward")) for rp in plan.ranks]
    xs = [torch.from_numpy(np.ascontiguousarray(x[i])).to(dt) for i in ids]
    model.eval()
    with torch.no_grad():
        out = model(xchg, model.precompute(xchg, xs), ids)
    Z = np.zeros((x.shape[0], out[0].shape[1]), dtype=out[0].numpy().dtype)
    for rp, z in zip(plan.ranks, out):
        Z[np.asarray(rp.out_ids("forward"))] = z.numpy()
    return Z


# ----------------------------------------------------------------------------- torch worker
def _train_rank(ctx, cfg: dict) -> dict | None:
    """One rank of a torch.distributed training job; rank 0 returns the report."""
    import torch

    from ..runtime.ops import TorchOps

    m = read_manifest(cfg["plan"])
    check_plan_for_gcn(m, cfg["plan"])
    rank, world, device = ctx.rank, ctx.world, ctx.device
    comm = ctx.comm(world_groups(m), m["ranks"])
    if cfg.get("sampler"):  # its own rows and the partition (see nn.sampling)
        _, part, _ = load_plan_partition(cfg["plan"])
        rep, model = _train_minibatch(m, [load_rank(cfg["plan"], rank, manifest=m)], part, comm, cfg)
    else:
        shard = load_rank(cfg["plan"], rank, manifest=m)
        ops = TorchOps(cfg.get("dtype") or "float32", device, _OPS_KERNEL[_kernels(cfg, device)])
        rep, model = _train(m, [shard], comm, ops, cfg, device)
    vec = np.zeros(world)
    vec[rank] = _rss()
    rss = comm.allreduce_world([vec], "sum")[0]
    if rank != 0:
        return None
    rep.update({"backend": ctx.backend, "device": device, "kernels": _kernels(cfg, device),
                "peak_rss_bytes_per_rank": [int(v) for v in rss],
                "torch_threads": torch.get_num_threads()})
    if cfg.get("save"):
        _save(model, rep, cfg)
    return rep


# ----------------------------------------------------------------------------- public API
_OPTIONS = {"backend": "gloo", "data": None, "random_features": None, "classes": None, "epochs": 200, "hidden": 16,
            "layers": 2, "lr": 0.01, "weight_decay": 5e-4, "dropout": 0.5, "seed": 0, "dtype": "float32",
            "save": None, "timeout": 60.0, "kernels": "auto", "device": None, "progress": False, "sampler": None,
            "batch_size": None, "batches_per_epoch": None, "predictions": None}
BATCHES_PER_EPOCH = 10   # mini-batches per epoch where a sampler is given without a count


def train_gcn(plan, *, nprocs: int | None = None, backend: str = "gloo", data=None,
              random_features: int | None = None, classes: int | None = None, epochs: int = 200,
              hidden: int = 16, layers: int = 2, lr: float = 0.01, weight_decay: float = 5e-4,
              dropout: float = 0.5, seed: int = 0, dtype: str = "float32", save=None, timeout: float = 60.0,
              threads: int | None = None, kernels: str = "auto", device: str | None = None, progress: bool = False,
              sampler: str | None = None, batch_size: int | None = None,
              batches_per_epoch: int | None = None, predictions=None) -> dict | None:
    """Train a :class:`~partplan.nn.DistGCN` full-batch from ``plan``.

    plan : plan directory built with ``--normalize gcn`` (or ``mean``).
    nprocs : processes to start here (None under torchrun). backend : "gloo",
    "nccl" or "local" (all ranks in this process, LocalComm). data : ``D.npz``
    (see :mod:`partplan.nn.data`), or ``random_features`` F and ``classes`` C.
    save : ``W.pt`` written atomically by rank 0 (state dict + dims + losses).
    predictions : ``P.npy`` written atomically by rank 0 after training: the
    predicted class (argmax of the eval-mode logits) of every vertex, int64[n]
    in the graph's vertex order (full-batch training only).
    kernels : local compute, "torch", "native" (scipy SpMM, CPU) or "auto"
    (:func:`partplan.runtime.kernels.resolve`: torch on CUDA, native on CPU).
    device : "cpu" or "cuda" (default: cuda with nccl, else cpu; gloo takes
    CPU tensors only, see :func:`partplan.runtime.launch.resolve_device`).
    sampler : mini-batch training with the stochastic model's sampler spec
    (``neighbor:B:f1,f2``, ``saint-node:budget``, ``saint-rw:roots:len``; one
    hop per layer), ``batch_size`` overriding the neighbor sampler's B, and
    ``batches_per_epoch`` batches per epoch (default :data:`BATCHES_PER_EPOCH`; see
    :mod:`partplan.nn.minibatch`).

    Returns the report (keys in docs/guide/training.md); under torchrun only
    rank 0 returns it. All checks on the plan, the data and the options happen
    here (:func:`train_config`), before any process starts; every process
    then runs :func:`train_rank`.
    """
    from ..runtime.launch import start
    opts = {"plan": plan, "backend": backend, "data": data, "random_features": random_features, "classes": classes,
            "epochs": epochs, "hidden": hidden, "layers": layers, "lr": lr, "weight_decay": weight_decay,
            "dropout": dropout, "seed": seed, "dtype": dtype, "save": save, "timeout": timeout, "kernels": kernels,
            "device": device, "progress": progress, "sampler": sampler, "batch_size": batch_size,
            "batches_per_epoch": batches_per_epoch, "predictions": predictions}
    cfg = train_config(opts, nprocs, threads)
    return start(cfg, nprocs, train_rank, timeout_s=timeout, threads=threads)


def train_config(options: dict, nprocs: int | None = None, threads: int | None = None) -> dict:
    """The training job's config, every check made before any process starts:
    ``options`` holds ``plan`` and :func:`train_gcn`'s keywords (None: the
    default); keys it does not know (``job``, ``announce``) are kept."""
    o = {**_OPTIONS, **{k: v for k, v in options.items() if v is not None}}
    plan, backend = o["plan"], o["backend"]
    epochs, hidden, layers, lr, weight_decay = o["epochs"], o["hidden"], o["layers"], o["lr"], o["weight_decay"]
    dropout, seed, dtype, data, sampler = o["dropout"], o["seed"], o["dtype"], o["data"], o["sampler"]
    random_features, classes, batch_size = o["random_features"], o["classes"], o["batch_size"]
    if backend not in BACKENDS:
        raise PartplanError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    from .._args import check_int, check_real
    for name, v in (("epochs", epochs), ("hidden", hidden), ("layers", layers)):
        check_int(name, v, lo=1, error=PartplanError)      # bools refused: epochs=True is no count
    lr = check_real("lr", lr, lo_open=True, error=PartplanError)
    weight_decay = check_real("weight_decay", weight_decay, error=PartplanError)
    dropout = check_real("dropout", dropout, hi=1.0, hi_open=True, error=PartplanError)
    if dtype not in ("float32", "float64"):
        raise PartplanError(f"dtype must be float32 or float64, got {dtype!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not -2 ** 63 <= seed < 2 ** 63:
        raise PartplanError(f"seed must be an integer in [-2^63, 2^63) (torch's seed range), got {seed!r}")
    m = read_manifest(plan)
    check_plan_for_gcn(m, plan)
    n = m["graph"]["n"]
    cfg = {k: v for k, v in options.items() if k not in _OPTIONS}
    cfg.update({"job": options.get("job", "train-gcn"), "plan": str(plan), "backend": backend, "epochs": int(epochs),
                "hidden": int(hidden), "layers": int(layers), "lr": float(lr), "weight_decay": float(weight_decay),
                "dropout": float(dropout), "seed": int(seed), "dtype": dtype, "timeout": float(o["timeout"]),
                "kernels": o["kernels"], "device": o["device"], "progress": o["progress"]})
    from ..runtime.launch import resolve_device
    _kernels(cfg, resolve_device(backend, o["device"]))  # a bad kernels / device choice fails before any start
    if data is not None:
        if random_features is not None or classes is not None:
            raise DataError("--random-features / --classes make synthetic data; with --data the classes come "
                            "from the file's labels")
        from .shares import check_data_graph
        info = check_data(data, n, graph_check=lambda d: check_data_graph(plan, m, d))
        cfg.update({"data": str(data), "classes": info.classes})
    else:
        if random_features is None or classes is None or random_features < 1 or classes < 2:
            raise DataError("give --data D.npz (or a PyG Data .pt), or --random-features F (>= 1) and --classes C (>= 2)")
        cfg.update({"random_features": int(random_features), "classes": int(classes)})
    if sampler is not None:
        from .minibatch import sampler_for
        check_minibatch_layout(plan, m)
        if backend == "nccl" or str(o["device"] or "cpu").startswith("cuda"):
            raise PlanError("mini-batch training runs on CPU (gloo or local) in this version (its exchange is "
                            "CPU-side)")
        batches_per_epoch = BATCHES_PER_EPOCH if o["batches_per_epoch"] is None else o["batches_per_epoch"]
        if not isinstance(batches_per_epoch, (int, np.integer)) or batches_per_epoch < 1:
            raise PartplanError(f"batches per epoch must be >= 1, got {batches_per_epoch!r}")
        if batch_size is not None:
            from .._args import check_int
            batch_size = check_int("batch_size", batch_size, lo=1, error=PartplanError)
        try:
            sampler_for(sampler, int(layers), batch_size)
        except ValueError as exc:
            raise PartplanError(str(exc)) from None
        cfg.update({"sampler": sampler, "batch_size": batch_size, "batches_per_epoch": int(batches_per_epoch)})
    elif batch_size is not None or o["batches_per_epoch"] is not None:
        flag = "--batch-size" if batch_size is not None else "--batches-per-epoch"
        raise PartplanError(f"{flag} needs --sampler (mini-batch training)")
    if o["save"] is not None:
        from ..io.outpath import check_output_file
        cfg["save"] = str(check_output_file(o["save"], kind="pt", inputs=[data]))
    if o["predictions"] is not None:
        if sampler is not None:
            raise PartplanError("--predictions applies to full-batch training (no --sampler)")
        from ..io.outpath import check_output_file
        cfg["predictions"] = str(check_output_file(o["predictions"], kind="npy", inputs=[data]))
    from ..runtime.launch import check_nprocs
    check_nprocs(plan, m, nprocs)
    if backend == "local":
        cfg["threads"] = 1 if threads is None else threads
    else:
        cfg["deadline_s"] = 7 * 86400  # a dead or stuck peer fails each collective within --timeout
    return cfg
