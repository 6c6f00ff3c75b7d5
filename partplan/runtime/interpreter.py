"""The one interpreter of exchange programs (see :mod:`partplan.program.core`).

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
from ..program.plan import RankPlan, program_steps
from ..program.core import pairs_to_matrix
from ..program.steps import AllToAllV, Gather, Spmm, dst_start, step_op, structure_problems
from .comm import Comm, CommError
from .ops import NumpyOps

PHASES = ("gather", "exchange", "compute", "reduce", "fold")
OVERLAP = ("on", "off")


class _Prog:
    """One program, prepared for the local ranks by the step registry
    (:meth:`partplan.program.steps.Step.prepare`): per step its class, manifest
    entry and device-ready data; buffer sizes; which (alltoallv, spmm) pairs
    can overlap (the spmm reads the buffer the exchange fills)."""

    def __init__(self, manifest, shards, name, ops, comm):
        self.name = name
        self.steps = program_steps(manifest, name)
        self.prefix = shards[0].prefix(name) if shards else ""
        self.sizes = [rp.buffers(name) for rp in shards]
        self.ops = [step_op(st) for st in self.steps]
        # indices, CSR pointers and counts checked against the buffers before anything is prepared;
        # a shard quarantined when it was read (RankPlan.problems: partplan.io.trust) brings its
        # problems instead, reported on every rank by verify's collective check
        self.problems = [(rp.rank, f"{name}: {m}") for rp, sz in zip(shards, self.sizes) if not rp.problems
                         for m in structure_problems(self.steps, rp, sz)]
        self.prep = None if self.problems or any(rp.problems for rp in shards) else \
            [cls.prepare(st, shards, self.sizes, ops, comm) for cls, st in zip(self.ops, self.steps)]
        self.counts = {}  # alltoallv step id -> (send counts, recv counts) per local rank (the start-up check)
        for st in self.steps:
            if step_op(st) is AllToAllV:
                self.counts[st["id"]] = ([_counts(rp, f"{st['id']}.send_counts", st, comm) for rp in shards],
                                         [_counts(rp, f"{st['id']}.recv_counts", st, comm) for rp in shards])
        # the spmm reads the buffer the exchange fills, and writes neither of the exchange's buffers
        # (the exchange may still be reading src / writing dst while the early rows are computed)
        self.overlap = {k for k in range(len(self.steps) - 1)
                        if self.ops[k] is AllToAllV and self.ops[k + 1] is Spmm
                        and self.steps[k + 1]["src"] == self.steps[k]["dst"]
                        and self.steps[k + 1]["dst"] not in (self.steps[k]["src"], self.steps[k]["dst"])}


def _counts(rp: RankPlan, name: str, st: dict, comm) -> np.ndarray:
    """A step's counts of one local rank as int64 — for a quarantined shard
    (whose arrays are not to be trusted) the manifest's pairs instead: the
    rank still takes part in the count exchange, its peers see counts that
    agree, and verify's world-wide flag stops every rank with this rank's
    problem named on it."""
    if not rp.problems:
        return np.asarray(rp[name], dtype=np.int64)
    from ..program.checks import pairs_of
    g = comm.member(st["group"], rp.rank)
    if g is None:
        return np.zeros(0, dtype=np.int64)
    send, recv = pairs_of(st, rp.rank, list(g.ranks))
    return send if name.endswith(".send_counts") else recv


#: ids hashed at a time by :func:`_segment_hashes` (its temporaries: a few int64 arrays of this many)
HASH_CHUNK = 1 << 20


def _segment_hashes(ids, counts: np.ndarray, take: np.ndarray | None = None) -> np.ndarray:
    """int64[len(counts)]: an order-sensitive 64-bit hash of each consecutive segment of the id
    sequence ``ids[take]`` (``ids`` itself without ``take``; segment j: ``counts[j]`` ids): the
    wrapping sum of splitmix64 of (id, position in the segment), computed HASH_CHUNK ids at a time."""
    from ..models.nets import splitmix64
    counts = np.asarray(counts, np.int64)
    ends = np.cumsum(counts)
    total = int(ends[-1]) if ends.size else 0
    out = np.zeros(counts.size, np.uint64)
    with np.errstate(over="ignore"):
        for a in range(0, total, HASH_CHUNK):
            at = np.arange(a, min(a + HASH_CHUNK, total), dtype=np.int64)
            seg = np.searchsorted(ends, at, side="right")           # the segment of each position
            chunk = np.asarray(ids[at if take is None else take[at]], np.int64)
            h = splitmix64(splitmix64(chunk).view(np.int64) ^ (at - (ends[seg] - counts[seg])), salt=1)
            first = np.flatnonzero(np.concatenate([[True], seg[1:] != seg[:-1]]))
            out[seg[first]] += np.add.reduceat(h, first)             # each segment once per chunk
    return out.view(np.int64)


def _no_sync() -> None:
    pass


class _Ctx:
    """What a step op's ``run`` sees: the comm, the array kernels, the local
    ranks' buffers and the executor's scratch allocator."""

    __slots__ = ("comm", "ops", "bufs", "scratch")

    def __init__(self, comm, ops, bufs, scratch):
        self.comm, self.ops, self.bufs, self.scratch = comm, ops, bufs, scratch


class Executor:
    """Run a plan's programs for the local ranks of ``comm``.

    manifest : the plan manifest; shards : the local ranks' :class:`RankPlan`
    (in ``comm.local`` order); ops : :class:`NumpyOps` (default) or
    :class:`~partplan.runtime.ops.TorchOps`; verify : run the count checks now;
    overlap : "on" (default) starts each exchange that feeds an SpMM
    asynchronously, computes what reads no received row (with scipy's kernel:
    each row's nonzeros before its first received column; with torch's: the
    rows that read none), waits, then adds the rest — bitwise the sequential
    result with the CPU kernels (each row's additions keep their order;
    cuSPARSE balances rows by matrix structure, so on CUDA the two agree to
    rounding); "off" runs the steps strictly in order. Only a
    comm whose exchange is asynchronous (TorchComm) overlaps; LocalComm's
    exchange is a synchronous copy, so it always runs in order.
    """

    def __init__(self, manifest: dict, shards: list[RankPlan], comm: Comm, ops=None, *, verify: bool = True,
                 overlap: str = "on"):
        self.manifest = manifest
        self.comm = comm
        self.ops = ops or NumpyOps()
        if overlap not in OVERLAP:
            raise PlanError(f"overlap must be one of {', '.join(OVERLAP)}, got {overlap!r}")
        self.overlap = overlap
        if [rp.rank for rp in shards] != list(comm.local):
            raise PlanError(f"executor: shards of ranks {[rp.rank for rp in shards]} for local ranks {comm.local}")
        if comm.world != manifest["ranks"]:
            raise PlanError(f"the plan is for {manifest['ranks']} ranks but the job has {comm.world} "
                            f"(start it with --nprocs {manifest['ranks']})")
        self.shards = shards
        self.programs = {name: _Prog(manifest, shards, name, self.ops, comm) for name in manifest["programs"]}
        self._structure = [(rp.rank, m) for rp in shards for m in rp.problems]  # quarantined when read
        self._structure += [m for pr in self.programs.values() for m in pr.problems]
        if self._structure and not verify:
            raise PlanError("the plan's shards do not fit their buffers — " +
                            "; ".join(f"rank {r}: {m}" for r, m in self._structure[:4]))
        self._bufs: dict = {}
        self._obl: dict = {}  # program -> step id -> per-rank oblivious set-up (prepare_oblivious)
        self.last_phases = dict.fromkeys(PHASES, 0.0)
        # synchronize the device after every step so last_phases holds each phase's seconds
        # (False: one stream of kernels, phases then count launch time only)
        self.phase_times = True
        if verify:
            self.verify()

    # ------------------------------------------------------------------ checks
    def verify(self) -> None:
        """Check every alltoallv step: local counts == manifest pairs, and what
        each peer will send == what this rank expects (one int per peer through
        the group). Every rank raises if any rank failed."""
        problems = {r: [] for r in self.comm.local}
        for r, m in self._structure:  # every rank still takes part in the collective checks below
            problems[r].append(m)
        p = self.manifest["ranks"]
        for name, prog in self.programs.items():
            for st in prog.steps:
                if st["id"] not in prog.counts:
                    continue
                scs, rcs = prog.counts[st["id"]]
                pairs = pairs_to_matrix(st["pairs"], p)
                sid = st["id"]
                for i, r in enumerate(self.comm.local):
                    g = self.comm.member(st["group"], r)
                    if g is None or self.shards[i].problems:  # a quarantined shard's counts are stand-ins
                        continue
                    sc, rc = scs[i], rcs[i]
                    if sc.size != len(g.ranks) or rc.size != len(g.ranks):
                        problems[r].append(f"{sid}: counts do not have one entry per member of {g.name}")
                        continue
                    members = list(g.ranks)
                    if not (np.array_equal(sc, pairs[r, members]) and np.array_equal(rc, pairs[members, r])):
                        problems[r].append(f"{sid}: shard counts differ from the manifest's pairs "
                                           f"(send {sc.tolist()} vs {pairs[r, members].tolist()}, recv "
                                           f"{rc.tolist()} vs {pairs[members, r].tolist()})")
                    # counts against the buffers they read and fill: AllToAllV.check, in _Prog's structure check
                got = self.comm.exchange_counts(st["group"], [
                    scs[i] if self.comm.member(st["group"], r) else np.zeros(0, np.int64)
                    for i, r in enumerate(self.comm.local)])
                for i, r in enumerate(self.comm.local):
                    g = self.comm.member(st["group"], r)
                    if g is None or got[i].size != len(g.ranks) or self.shards[i].problems:
                        continue
                    rc = rcs[i]
                    if not np.array_equal(got[i], rc):
                        j = int(np.flatnonzero(got[i] != rc)[0])
                        problems[r].append(f"{sid}: rank {g.ranks[j]} will send {int(got[i][j])} rows, "
                                           f"this rank expects {int(rc[j])} (group {g.name})")
        self._raise_agreed(problems)
        self._check_sent_ids(problems)     # every rank's counts agree: its sent rows can be named
        self._raise_agreed(problems)

    def _raise_agreed(self, problems: dict) -> None:
        """Collective: one PlanError on every rank when any rank found a problem (its own listed)."""
        flags = self.comm.allreduce_world([np.array([float(bool(problems[r]))]) for r in self.comm.local], "max")
        mine = [f"rank {r}: {m}" for r in self.comm.local for m in problems[r]]
        if mine:
            raise PlanError("the plan's shards are inconsistent — " + "; ".join(mine[:4]) +
                            (f" (+{len(mine) - 4} more)" if len(mine) > 4 else ""))
        if flags[0][0] > 0:
            raise PlanError(f"rank {self.comm.local[0]}: another rank found its plan counts inconsistent "
                            f"(see its error); stopping before any exchange")

    def _check_sent_ids(self, problems: dict) -> None:
        """Every alltoallv whose send buffer a gather from ``in`` wrote last (the 1D exchange, the
        first of the others) and whose receivers list the rows (``recv_ids``): the rows each rank sends a
        peer, in order, are the rows the peer expects — checked by one order-sensitive 64-bit hash
        per (rank, peer), exchanged as the counts are. Counts alone pass a shard whose send list
        names other rows, or the same rows in another order (wrong rows of Z with exit 0)."""
        for name, prog in self.programs.items():
            if "same_as" in self.manifest["programs"][name]:     # its steps are checked under their own name
                continue
            filled = {}     # buffer -> the gather from ``in`` that last wrote it (None: another step did)
            for st in prog.steps:
                g_st = filled.get(st.get("src")) if st["op"] == "alltoallv" else None
                if "dst" in st:
                    filled[st["dst"]] = st if st["op"] == "gather" and st.get("src") == "in" else None
                sid = st["id"]
                # decided by the manifest, which every rank reads alike (each shard holds the arrays
                # its steps name: the structure check), so every rank makes the same exchanges
                if g_st is None or "recv_ids" not in (st.get("arrays") or ()):
                    continue
                scs, rcs = prog.counts[sid]
                sent, expected = [], []
                for i, (r, rp) in enumerate(zip(self.comm.local, self.shards)):
                    if self.comm.member(st["group"], r) is None:
                        sent.append(np.zeros(0, np.int64))
                        expected.append(None)
                        continue
                    sent.append(_segment_hashes(rp.in_ids(name), scs[i], take=rp[f"{g_st['id']}.idx"]))
                    expected.append(_segment_hashes(rp[f"{sid}.recv_ids"], rcs[i]))
                got = self.comm.exchange_counts(st["group"], sent)
                for i, r in enumerate(self.comm.local):
                    if expected[i] is not None and not np.array_equal(got[i], expected[i]):
                        g = self.comm.member(st["group"], r)
                        j = int(np.flatnonzero(got[i] != expected[i])[0])
                        problems[r].append(f"{sid}: the rows rank {g.ranks[j]} sends are not the rows this rank "
                                           f"lists in {sid}.recv_ids (other rows, or another order)")

    # ------------------------------------------------------------------ buffers
    def _buffers(self, prog: _Prog, f: int):
        key = (prog.name, f)
        if key not in self._bufs:
            self._check_budget(prog, f)
            self._bufs[key] = [{b: self.ops.empty(rows, f) for b, rows in sizes.items() if b != "in"}
                               for sizes in prog.sizes]
        return self._bufs[key]

    def _check_budget(self, prog: _Prog, f: int) -> None:
        """The program's buffers (rows × f × itemsize bytes, every local rank)
        must fit the memory budget (:func:`partplan.io._common.memory_budget`:
        ``PARTPLAN_MAX_BYTES``, else 80% of this machine's memory): one
        PlanError before anything is allocated, never a MemoryError."""
        from ..io._common import ENV_MAX_BYTES, human_bytes, memory_budget
        dt = getattr(self.ops, "dtype", None)
        item = int(getattr(dt, "itemsize", 0) or 8)
        rows = sum(int(r) for sizes in prog.sizes for b, r in sizes.items() if b != "in")
        need = rows * int(f) * item
        budget = memory_budget()
        if need > budget:
            raise PlanError(f"the {prog.name} program's buffers need {human_bytes(need)} ({rows} rows × f = {f} "
                            f"× {item} bytes) on this process, above the memory budget of {human_bytes(budget)} "
                            f"({ENV_MAX_BYTES})")

    # ------------------------------------------------------------------ run
    def forward(self, inputs: list) -> list:
        """``Z = A @ H`` rows for the local ranks (``inputs[i]``: rows ``in_ids``)."""
        return self.run("forward", inputs)

    def backward(self, grads: list) -> list:
        """``A^T @ G`` (rows of G on the forward ``out_ids``)."""
        return self.run("backward", grads)

    def run(self, program: str, inputs: list, *, mode: str = "aware", barriers: bool = False,
            overlap: str | None = None, after_step=None) -> list:
        """Execute ``program`` ("forward" / "backward") on ``inputs`` (one buffer
        of rows ``in_ids`` per local rank); returns the ``out`` buffers (owned
        by the executor: copy them to keep them across calls). ``mode``
        "oblivious" sends whole source buffers instead (see :meth:`prepare_oblivious`).
        ``barriers``: a barrier (not timed) before every collective step, so each
        phase's time is its own and not the wait for a slower rank's previous
        phase (the measurement mode of ``run spmm``; steps then run in order).
        ``overlap``: "on" / "off" for this call (default: the executor's).
        ``after_step(k, bufs)``: called after step k with every local rank's
        buffers (the steps then run in order, without overlap)."""
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
            bad = self.ops.input_problem(x)
            if bad:
                raise PlanError(f"rank {loc[i]}: {bad}")
        bufs = self._buffers(prog, f)
        for i, x in enumerate(inputs):
            bufs[i]["in"] = x
        ph = dict.fromkeys(PHASES, 0.0)
        ops, comm = self.ops, self.comm
        ctx = _Ctx(comm, ops, bufs, self._scratch)
        lap = ((overlap or self.overlap) == "on" and not barriers and mode == "aware" and after_step is None
               and getattr(comm, "asynchronous", False))
        # per-phase seconds need the device synchronized after each step; a run that
        # is not measured (phase_times False, e.g. training on a GPU) lets the queue flow
        sync = ops.synchronize if (barriers or self.phase_times) else _no_sync
        clock = time.perf_counter
        k, nsteps = 0, len(prog.steps)
        while k < nsteps:
            st, cls, prep = prog.steps[k], prog.ops[k], prog.prep[k]
            if barriers and cls.collective:
                sync()
                comm.barrier()
            t0 = clock()
            if lap and k in prog.overlap:
                k = self._overlapped(prog, k, ctx, ph, t0)
                continue
            if mode == "oblivious" and cls is AllToAllV and st["id"] in self._obl.get(program, {}):
                local_s = self._oblivious_step(program, prog, st, bufs)
                ph["gather"] += local_s  # block copies are not charged to the exchange
                t0 += local_s
            else:
                cls.run(ctx, st, prep)
            sync()
            ph[cls.phase] += clock() - t0
            if after_step is not None:
                after_step(k, bufs)
            k += 1
        self.last_phases = ph
        return [b["out"] for b in bufs]

    def check_finite(self, program: str, inputs: list, outs: list) -> None:
        """Collective (every rank calls it after a run of ``program``): if any
        rank's ``outs`` hold a NaN or an infinity, every rank reruns the program
        step by step on zero-filled buffers and raises the same PlanError naming
        the first (step, rank) whose buffers turned non-finite and the cause —
        an overflow of the compute dtype when the inputs are finite, a
        non-finite input otherwise — or, when no step made one, the rank whose
        output has rows no step wrote (NaN-filled buffers that survived)."""
        from .finite import agree, nonfinite
        comm, ops, prog = self.comm, self.ops, self.programs[program]
        n = len(prog.steps)
        bad_in = [nonfinite(x) for x in inputs]
        got = agree(comm, [np.array([0.0, float(b)]) if (nonfinite(o) or b) else None
                           for o, b in zip(outs, bad_in)], 2)
        if got is None:
            return
        f = int(inputs[0].shape[1]) if len(inputs) else 0
        for b in self._buffers(prog, f):
            for name, buf in b.items():
                if name != "in":
                    ops.fill(buf, 0.0)
        first = [None] * len(inputs)

        def seen(k, bufs):
            for i, b in enumerate(bufs):
                if first[i] is None and any(nonfinite(v) for name, v in b.items() if name != "in"):
                    first[i] = k
        self.run(program, inputs, overlap="off", after_step=seen)
        step = agree(comm, [None if k is None else np.array([float(k), float(bad_in[i])])
                            for i, k in enumerate(first)], 2)
        dt = np.dtype(str(getattr(ops, "dtype", "float64")).replace("torch.", ""))
        if step is None:
            raise PlanError(f"rank {got[0]}: the output has rows no step wrote (NaN-filled buffers survived)")
        rank, (k, inp) = step[0], step[1]
        st = prog.steps[int(k)]
        cause = ("a non-finite input value" if inp else
                 f"overflow: a value beyond {dt.name}'s largest finite {np.finfo(dt).max:.4g}")
        raise PlanError(f"rank {rank}: step {st['id']} ({st['op']}, step {int(k) + 1} of {n}) of the {program} "
                        f"program made a non-finite value ({cause})"
                        + ("" if inp or dt == np.float64 else "; run it in float64 (--dtype float64), or scale H or "
                                                              "the plan's values (its edge weights)"))

    def _overlapped(self, prog: _Prog, k: int, ctx: _Ctx, ph: dict, t0: float) -> int:
        """Steps k (alltoallv) and k + 1 (spmm over the buffer it fills):
        start the exchange, compute what needs no received row (the early part
        of :meth:`~partplan.program.steps.SpmmPrep.split`), wait, add the rest.
        Returns the next step index."""
        a2a, sp = prog.steps[k], prog.steps[k + 1]
        clock = time.perf_counter
        parts = prog.prep[k + 1].split(prog.prep[k].start, ctx.ops)
        handle = AllToAllV.start(ctx, a2a, prog.prep[k], async_op=True)
        t1 = clock()
        Spmm.run_part(ctx, sp, parts, 0)
        t2 = clock()
        ctx.comm.wait(handle)
        t3 = clock()
        Spmm.run_part(ctx, sp, parts, 1)
        if self.phase_times:
            ctx.ops.synchronize()
        t4 = clock()
        ph["exchange"] += (t1 - t0) + (t3 - t2)
        ph["compute"] += (t2 - t1) + (t4 - t3)
        return k + 2

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
            if step_op(st) is not AllToAllV or k == 0 or step_op(steps[k - 1]) is not Gather \
                    or steps[k - 1]["dst"] != st["src"]:
                continue
            gat, sid = steps[k - 1], st["id"]
            loc = self.comm.local
            blk = [prog.sizes[i][gat["src"]] for i in range(len(loc))]
            sc, rc = prog.counts[sid]
            mem = [self.comm.member(st["group"], r) for r in loc]
            obl_sc = [np.where(sc[i] > 0, blk[i], 0).astype(np.int64) if mem[i] else np.zeros(0, np.int64)
                      for i in range(len(loc))]
            obl_rc = self.comm.exchange_counts(st["group"], obl_sc)
            # positions of the needed rows inside each sender's block: the sender's gather indices
            pos_send = [np.asarray(self.shards[i][f"{gat['id']}.idx"], dtype=np.int64) if mem[i]
                        else np.zeros(0, np.int64) for i in range(len(loc))]
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
            rows = int(prog.counts[st["id"]][1][i].sum())
            self.ops.take(outs[i], per[i]["pick"], b[st["dst"]][start:start + rows])
        self.ops.synchronize()
        return (t1 - t0) + (time.perf_counter() - t2)

    def bare_exchange(self, program: str = "forward", f: int = 1, *, barriers: bool = True) -> float:
        """Seconds of bare ``all_to_all_single`` calls with the program's split
        sizes (preallocated buffers, no gather, no checks, no counters) — the
        floor the executor's exchange is compared with, measured with the same
        protocol as its exchange phase: a barrier before each call (not timed),
        the device synchronized after it, the calls' times summed."""
        prog = self.programs[program]
        key = ("bare", program, f)
        if key not in self._bufs:
            per = []
            for st, prep in zip(prog.steps, prog.prep):
                if step_op(st) is AllToAllV:
                    scs, rcs = prog.counts[st["id"]]
                    per.append((prep.xp, [self.ops.zeros(int(c.sum()), f) for c in scs],
                                [self.ops.zeros(int(c.sum()), f) for c in rcs]))
            self._bufs[key] = per
        total = 0.0
        start, wait, sync, barrier = self.comm.start, self.comm.wait, self.ops.synchronize, self.comm.barrier
        for xp, sends, outs in self._bufs[key]:
            if barriers:
                sync()
                barrier()
            t0 = time.perf_counter()
            wait(start(xp, sends, outs))
            sync()
            total += time.perf_counter() - t0
        return total


__all__ = ["Executor", "PHASES", "CommError"]
