"""The one interpreter of exchange programs (see :mod:`partplan.plan.program`).

:class:`Executor` runs a plan's forward or backward program for the local
ranks of a :class:`~partplan.runtime.comm.Comm`: all p virtual ranks with
:class:`LocalComm` (numpy), one rank with :class:`TorchComm` (torch tensors,
CPU or CUDA). Before the first collective it checks every alltoallv step's
counts against the manifest's count pairs (this rank) and through the group
(what each peer will send == what this rank expects), and every rank learns
whether any rank failed: a bad plan ends with one clear error on every rank,
never with gloo's uninitialised rows or an NCCL hang.

Per call it records seconds per phase (gather = copy/gather, exchange =
alltoallv, compute = spmm, reduce = allreduce, fold = scatter_add).

Examples
--------
>>> import numpy as np, partplan
>>> from partplan.runtime import Executor, LocalComm
>>> g = partplan.Graph.from_edges([0, 1, 2], [1, 2, 3], symmetrize=True)
>>> plan = partplan.build_plan(g, np.array([0, 0, 1, 1]))
>>> ex = Executor(plan.manifest, plan.ranks, LocalComm(2, plan.groups()))
>>> H = np.arange(8.0).reshape(4, 2)
>>> Z = ex.forward([H[rp.in_ids()] for rp in plan.ranks])
>>> np.vstack(Z).tolist() == (g.to_scipy() @ H).tolist()
True
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import PlanError
from ..plan.builder import RankPlan, program_steps
from ..plan.program import PHASE, dst_start, pairs_to_matrix
from .comm import Comm, CommError
from .ops import NumpyOps

PHASES = ("gather", "exchange", "compute", "reduce", "fold")


class _Prog:
    """One program, prepared for the local ranks: index arrays and matrices in
    the ops' native form, buffer sizes."""

    def __init__(self, manifest, shards, name, ops):
        self.name = name
        self.steps = program_steps(manifest, name)
        self.prefix = shards[0].prefix(name) if shards else ""
        self.sizes = [rp.buffers(name) for rp in shards]
        self.arrays = []
        self.mats = []
        for rp in shards:
            arrs, mats = {}, {}
            for st in self.steps:
                sid = st["id"]
                if st["op"] in ("gather", "scatter_add"):
                    for a in st["arrays"]:
                        arrs[f"{sid}.{a}"] = ops.index(rp[f"{sid}.{a}"])
                elif st["op"] == "alltoallv":
                    for a in ("send_counts", "recv_counts"):
                        arrs[f"{sid}.{a}"] = np.asarray(rp[f"{sid}.{a}"], dtype=np.int64)
                elif st["op"] == "spmm":
                    ip, ix = rp[f"{sid}.indptr"], rp[f"{sid}.indices"]
                    data = rp[f"{sid}.data"] if rp.has(f"{sid}.data") else None
                    rows = ip.size - 1
                    cols = rp.buffers(name).get(st["src"], 0)
                    mats[sid] = ops.matrix(ip, ix, data, (rows, cols))
            self.arrays.append(arrs)
            self.mats.append(mats)


class Executor:
    """Run a plan's programs for the local ranks of ``comm``.

    manifest : the plan manifest; shards : the local ranks' :class:`RankPlan`
    (in ``comm.local`` order); ops : :class:`NumpyOps` (default) or
    :class:`~partplan.runtime.ops.TorchOps`; verify : run the count checks now.
    """

    def __init__(self, manifest: dict, shards: list[RankPlan], comm: Comm, ops=None, *, verify: bool = True):
        self.manifest = manifest
        self.comm = comm
        self.ops = ops or NumpyOps()
        if [rp.rank for rp in shards] != list(comm.local):
            raise PlanError(f"executor: shards of ranks {[rp.rank for rp in shards]} for local ranks {comm.local}")
        if comm.world != manifest["ranks"]:
            raise PlanError(f"the plan is for {manifest['ranks']} ranks but the job has {comm.world} "
                            f"(start it with --nprocs {manifest['ranks']})")
        self.shards = shards
        self.programs = {name: _Prog(manifest, shards, name, self.ops) for name in manifest["programs"]}
        self._bufs: dict = {}
        self._obl: dict = {}  # program -> step id -> per-rank oblivious set-up (prepare_oblivious)
        self.last_phases = dict.fromkeys(PHASES, 0.0)
        self.fault = None  # test hook: callable(step_id) run before each step
        if verify:
            self.verify()

    # ------------------------------------------------------------------ checks
    def verify(self) -> None:
        """Check every alltoallv step: local counts == manifest pairs, and what
        each peer will send == what this rank expects (one int per peer through
        the group). Every rank raises if any rank failed."""
        problems = {r: [] for r in self.comm.local}
        p = self.manifest["ranks"]
        for name, prog in self.programs.items():
            for st in prog.steps:
                if st["op"] != "alltoallv":
                    continue
                pairs = pairs_to_matrix(st["pairs"], p)
                sid = st["id"]
                for i, r in enumerate(self.comm.local):
                    g = self.comm.member(st["group"], r)
                    if g is None:
                        continue
                    sc, rc = prog.arrays[i][f"{sid}.send_counts"], prog.arrays[i][f"{sid}.recv_counts"]
                    if sc.size != len(g.ranks) or rc.size != len(g.ranks):
                        problems[r].append(f"{sid}: counts do not have one entry per member of {g.name}")
                        continue
                    members = list(g.ranks)
                    if not (np.array_equal(sc, pairs[r, members]) and np.array_equal(rc, pairs[members, r])):
                        problems[r].append(f"{sid}: shard counts differ from the manifest's pairs "
                                           f"(send {sc.tolist()} vs {pairs[r, members].tolist()}, recv "
                                           f"{rc.tolist()} vs {pairs[members, r].tolist()})")
                    bufs = prog.sizes[i]
                    if int(sc.sum()) != bufs.get(st["src"], -1):
                        problems[r].append(f"{sid}: sends {int(sc.sum())} rows from buffer {st['src']!r} of "
                                           f"{bufs.get(st['src'])} rows")
                    start = dst_start(st, bufs, default=0)
                    if start + int(rc.sum()) > bufs.get(st["dst"], -1):
                        problems[r].append(f"{sid}: receives {int(rc.sum())} rows at row {start} of buffer "
                                           f"{st['dst']!r} of {bufs.get(st['dst'])} rows")
                got = self.comm.exchange_counts(st["group"], [
                    prog.arrays[i][f"{sid}.send_counts"] if self.comm.member(st["group"], r) else np.zeros(0, np.int64)
                    for i, r in enumerate(self.comm.local)])
                for i, r in enumerate(self.comm.local):
                    g = self.comm.member(st["group"], r)
                    if g is None or got[i].size != len(g.ranks):
                        continue
                    rc = prog.arrays[i][f"{sid}.recv_counts"]
                    if not np.array_equal(got[i], rc):
                        j = int(np.flatnonzero(got[i] != rc)[0])
                        problems[r].append(f"{sid}: rank {g.ranks[j]} will send {int(got[i][j])} rows, "
                                           f"this rank expects {int(rc[j])} (group {g.name})")
        flags = self.comm.allreduce_world([np.array([float(bool(problems[r]))]) for r in self.comm.local], "max")
        mine = [f"rank {r}: {m}" for r in self.comm.local for m in problems[r]]
        if mine:
            raise PlanError("plan counts are inconsistent — " + "; ".join(mine[:4]) +
                            (f" (+{len(mine) - 4} more)" if len(mine) > 4 else ""))
        if flags[0][0] > 0:
            raise PlanError(f"rank {self.comm.local[0]}: another rank found its plan counts inconsistent "
                            f"(see its error); stopping before any exchange")

    # ------------------------------------------------------------------ buffers
    def _buffers(self, prog: _Prog, f: int):
        key = (prog.name, f)
        if key not in self._bufs:
            self._bufs[key] = [{b: self.ops.empty(rows, f) for b, rows in sizes.items() if b != "in"}
                               for sizes in prog.sizes]
        return self._bufs[key]

    # ------------------------------------------------------------------ run
    def forward(self, inputs: list) -> list:
        """``Z = A @ H`` rows for the local ranks (``inputs[i]``: rows ``in_ids``)."""
        return self.run("forward", inputs)

    def backward(self, grads: list) -> list:
        """``A^T @ G`` (rows of G on the forward ``out_ids``)."""
        return self.run("backward", grads)

    def run(self, program: str, inputs: list, *, mode: str = "aware", barriers: bool = False) -> list:
        """Execute ``program`` ("forward" / "backward") on ``inputs`` (one buffer
        of rows ``in_ids`` per local rank); returns the ``out`` buffers (owned
        by the executor: copy them to keep them across calls). ``mode``
        "oblivious" sends whole source buffers instead (see :meth:`prepare_oblivious`).
        ``barriers``: a barrier (not timed) before every collective step, so each
        phase's time is its own and not the wait for a slower rank's previous
        phase (the measurement mode of ``run spmm``)."""
        if program not in self.programs:
            raise PlanError(f"the plan has no {program} program (manifest 'backward' = "
                            f"{self.manifest.get('backward')!r})")
        prog = self.programs[program]
        loc = self.comm.local
        if len(inputs) != len(loc):
            raise PlanError(f"{len(inputs)} inputs for {len(loc)} local ranks")
        f = int(inputs[0].shape[1]) if len(inputs) else 0
        for i, x in enumerate(inputs):
            if tuple(x.shape) != (prog.sizes[i]["in"], f):
                raise PlanError(f"rank {loc[i]}: input has shape {tuple(x.shape)}, the plan's {program} program "
                                f"reads {prog.sizes[i]['in']} rows × f")
        bufs = self._buffers(prog, f)
        for i, x in enumerate(inputs):
            bufs[i]["in"] = x
        ph = dict.fromkeys(PHASES, 0.0)
        ops = self.ops
        for st in prog.steps:
            if self.fault is not None:
                self.fault(st["id"])
            op, sid = st["op"], st["id"]
            if barriers and op in ("alltoallv", "allreduce"):
                ops.synchronize()
                self.comm.barrier()
            t0 = time.perf_counter()
            if op == "copy":
                for b in bufs:
                    src = b[st["src"]]
                    b[st["dst"]][st["dst_row"]:st["dst_row"] + src.shape[0]] = src
            elif op == "gather":
                for i, b in enumerate(bufs):
                    ops.take(b[st["src"]], prog.arrays[i][f"{sid}.idx"], b[st["dst"]])
            elif op == "alltoallv":
                if mode == "oblivious" and sid in self._obl.get(program, {}):
                    local_s = self._oblivious_step(program, prog, st, bufs)
                    ph["gather"] += local_s  # block copies are not charged to the exchange
                    t0 += local_s
                else:
                    outs = []
                    for i, b in enumerate(bufs):
                        start = dst_start(st, prog.sizes[i])
                        rows = int(prog.arrays[i][f"{sid}.recv_counts"].sum())
                        outs.append(b[st["dst"]][start:start + rows])
                    self.comm.alltoallv(st["group"], [b[st["src"]] for b in bufs],
                                        [a[f"{sid}.send_counts"] for a in prog.arrays],
                                        [a[f"{sid}.recv_counts"] for a in prog.arrays], outs, what=sid)
            elif op == "spmm":
                for i, b in enumerate(bufs):
                    ops.spmm(prog.mats[i][sid], b[st["src"]], b[st["dst"]])
            elif op == "allreduce":
                self.comm.allreduce(st["group"], [b[st["buf"]] for b in bufs], "sum", what=sid)
            elif op == "scatter_add":
                for i, b in enumerate(bufs):
                    dst, src = b[st["dst"]], b[st["src"]]
                    if st.get("zero"):
                        ops.fill(dst, 0.0)
                    a = prog.arrays[i]
                    if f"{sid}.src_idx" in a:
                        tmp = self._scratch(i, sid, a[f"{sid}.src_idx"].shape[0], f)
                        ops.take(src, a[f"{sid}.src_idx"], tmp)
                        src = tmp
                    ops.index_add(dst, a[f"{sid}.idx"], src)
            else:  # pragma: no cover - the manifest check refuses unknown ops
                raise PlanError(f"unknown step op {op!r}")
            ops.synchronize()
            ph[PHASE[op]] += time.perf_counter() - t0
        self.last_phases = ph
        return [b["out"] for b in bufs]

    def _scratch(self, i, sid, rows, f):
        key = ("scratch", i, sid, f)
        if key not in self._bufs:
            self._bufs[key] = self.ops.empty(rows, f)
        return self._bufs[key]

    # ------------------------------------------------------------------ baselines
    def prepare_oblivious(self, program: str = "forward") -> dict:
        """Set up the sparsity-oblivious baseline (CAGNET-style, whole block rows)
        of ``program`` from the same partition: for each ``gather → alltoallv``
        pair a rank sends its **whole** source buffer to every peer it sends
        anything to; the receiver picks the rows it needs out of the blocks
        (positions learnt once here, through the group). Returns predicted
        oblivious rows ``int64[p, p]``."""
        prog = self.programs[program]
        p = self.manifest["ranks"]
        steps = prog.steps
        plans = {}
        rows_pq = np.zeros((p, p), dtype=np.int64)
        for k, st in enumerate(steps):
            if st["op"] != "alltoallv" or k == 0 or steps[k - 1]["op"] != "gather" \
                    or steps[k - 1]["dst"] != st["src"]:
                continue
            gat, sid = steps[k - 1], st["id"]
            loc = self.comm.local
            blk = [prog.sizes[i][gat["src"]] for i in range(len(loc))]
            sc = [prog.arrays[i][f"{sid}.send_counts"] for i in range(len(loc))]
            rc = [prog.arrays[i][f"{sid}.recv_counts"] for i in range(len(loc))]
            mem = [self.comm.member(st["group"], r) for r in loc]
            obl_sc = [np.where(sc[i] > 0, blk[i], 0).astype(np.int64) if mem[i] else np.zeros(0, np.int64)
                      for i in range(len(loc))]
            obl_rc = self.comm.exchange_counts(st["group"], obl_sc)
            # positions of the needed rows inside each sender's block: the sender's gather indices
            pos_send = [self.ops.to_numpy(prog.arrays[i][f"{gat['id']}.idx"]) if mem[i] else np.zeros(0, np.int64)
                        for i in range(len(loc))]
            pos_recv = [np.empty((int(rc[i].sum()) if mem[i] else 0, 1), dtype=np.int64) for i in range(len(loc))]
            pos_recv = [self.ops.index(x) for x in pos_recv]
            self.comm.alltoallv(st["group"], [self.ops.index(x.reshape(-1, 1)) for x in pos_send],
                                [x if mem[i] else np.zeros(0, np.int64) for i, x in enumerate(sc)],
                                [x if mem[i] else np.zeros(0, np.int64) for i, x in enumerate(rc)],
                                pos_recv, what=f"{sid} (oblivious setup)")
            per = []
            for i, r in enumerate(loc):
                if not mem[i]:
                    per.append(None)
                    continue
                # received positions, per source, shifted by the source block's offset in the big buffer
                ob_off = np.concatenate([[0], np.cumsum(obl_rc[i])])[:-1]
                src_of_row = np.repeat(np.arange(len(rc[i])), rc[i])
                pos = self.ops.to_numpy(pos_recv[i]).reshape(-1) + ob_off[src_of_row]
                nz = obl_sc[i][obl_sc[i] > 0]
                rep_idx = np.tile(np.arange(blk[i], dtype=np.int64), nz.size)  # whole block once per peer
                per.append({"send_counts": obl_sc[i], "recv_counts": obl_rc[i], "pick": self.ops.index(pos),
                            "src": gat["src"], "recv_rows": int(obl_rc[i].sum()),
                            "rep_idx": self.ops.index(rep_idx)})
                g = mem[i]
                rows_pq[r, list(g.ranks)] += obl_sc[i]
            plans[sid] = per
        self._obl[program] = plans
        self.comm.reset()
        return rows_pq

    def _oblivious_step(self, program, prog, st, bufs) -> float:
        """Whole-block exchange of one step; returns the seconds of local copies."""
        t0 = time.perf_counter()
        per = self._obl[program][st["id"]]
        f = bufs[0][st["dst"]].shape[1] if bufs else 0
        outs, sends = [], []
        for i, b in enumerate(bufs):
            key = ("obl", program, st["id"], i, f)
            if key not in self._bufs:
                self._bufs[key] = (self.ops.empty(per[i]["recv_rows"] if per[i] else 0, f),
                                   self.ops.empty(per[i]["rep_idx"].shape[0] if per[i] else 0, f))
            out, send = self._bufs[key]
            if per[i] is not None:  # the whole source block, once per peer (not timed as exchange)
                self.ops.take(b[per[i]["src"]], per[i]["rep_idx"], send)
            outs.append(out)
            sends.append(send)
        self.ops.synchronize()
        t1 = time.perf_counter()
        self.comm.alltoallv(st["group"], sends,
                            [x["send_counts"] if x else np.zeros(0, np.int64) for x in per],
                            [x["recv_counts"] if x else np.zeros(0, np.int64) for x in per], outs,
                            what=f"{st['id']} (oblivious)")
        self.ops.synchronize()
        t2 = time.perf_counter()
        for i, b in enumerate(bufs):
            if per[i] is None:
                continue
            start = dst_start(st, prog.sizes[i])
            rows = int(prog.arrays[i][f"{st['id']}.recv_counts"].sum())
            self.ops.take(outs[i], per[i]["pick"], b[st["dst"]][start:start + rows])
        self.ops.synchronize()
        return (t1 - t0) + (time.perf_counter() - t2)

    def bare_exchange(self, program: str = "forward", f: int = 1) -> float:
        """Seconds of bare ``alltoallv`` calls with the program's split sizes
        (preallocated buffers, no gather, no checks) — the floor the executor's
        exchange is compared with."""
        prog = self.programs[program]
        key = ("bare", program, f)
        if key not in self._bufs:
            per = []
            for st in prog.steps:
                if st["op"] == "alltoallv":
                    sid = st["id"]
                    per.append((st, [self.ops.zeros(int(a[f"{sid}.send_counts"].sum()), f) for a in prog.arrays],
                                [self.ops.zeros(int(a[f"{sid}.recv_counts"].sum()), f) for a in prog.arrays]))
            self._bufs[key] = per
        t0 = time.perf_counter()
        for st, sends, outs in self._bufs[key]:
            sid = st["id"]
            self.comm.alltoallv(st["group"], sends, [a[f"{sid}.send_counts"] for a in prog.arrays],
                                [a[f"{sid}.recv_counts"] for a in prog.arrays], outs, what=f"{sid} (bare)")
        self.ops.synchronize()
        return time.perf_counter() - t0


__all__ = ["Executor", "PHASES", "CommError"]
