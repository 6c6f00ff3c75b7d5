"""The registry of step ops: one class per op of an exchange program.

A step op declares everything the layers above ask about it — so a new op is
one class here, registered with :func:`register`, and nothing else changes:

=================  ==============================================================
``fields``         manifest fields it needs (``name: kind``; kinds ``buf`` a
                   buffer name, ``row`` an int ≥ 0 or a buffer name, ``bool``)
``optional``       manifest fields it may have
``arrays``         shard arrays it needs (``<step id>.<name>``)
``optional_arrays`` shard arrays it may have
``phase``          measurement phase (gather, exchange, compute, reduce, fold)
``collective``     whether it calls the comm (every rank of its group takes part)
``pairs``          whether the manifest lists its rows per (src, dst) rank pair
                   (``pairs``; the predicted p × p volume)
``check``          structure problems on one rank (indices inside their buffers,
                   sizes) — before anything indexes with the arrays
``walk``           how global row ids move through it (``partplan validate``)
``rows_sent``      rows a rank hands to collectives in one run (byte predictions)
``prepare``        its arrays in the executor's native form on the device, once
``run``            execute it for the local ranks
=================  ==============================================================

Users of the registry: :class:`partplan.program.core.Program` (building),
:mod:`partplan.plan.checks` and :mod:`partplan.plan.store` (manifest fields and
arrays), :mod:`partplan.runtime.validate` (structure and the id walk), the
interpreter (:class:`partplan.runtime.Executor`: prepare and run), the byte
predictions (:func:`program_rows`) and the traversals' view of a program
(:func:`role`).

This module imports nothing from the runtime: ``run`` and ``prepare`` receive
the executor's context (``ops`` — the array kernels — and ``comm``) as arguments.

Examples
--------
>>> sorted(STEPS)
['allreduce', 'alltoallv', 'copy', 'gather', 'scatter_add', 'spmm']
>>> STEPS["alltoallv"].phase, STEPS["alltoallv"].arrays
('exchange', ('send_counts', 'recv_counts'))
"""
from __future__ import annotations

from typing import Any, Callable, ClassVar

import numpy as np

from ..errors import PlanError
from .exchange import segments


def dst_start(step: dict, sizes: dict, default: int | None = None) -> int:
    """First row a step writes in its ``dst`` buffer: ``dst_row`` itself, or the
    row count of the buffer it names (``sizes``: buffer → rows). ``default``
    stands for an unknown buffer name (None: PlanError)."""
    row = step["dst_row"]
    if not isinstance(row, str):
        return int(row)
    if row in sizes:
        return int(sizes[row])
    if default is None:
        raise PlanError(f"{step['id']}: dst_row names buffer {row!r}, which has no size")
    return default


def _in_range(a: np.ndarray, lo: int, hi: int) -> bool:
    return a.size == 0 or (int(a.min()) >= lo and int(a.max()) < hi)


class RankArrays:
    """One rank's view for :meth:`Step.check`: ``a(name)`` the step's array,
    ``has(name)``, ``rows(buffer)`` its size (−1 when unsized)."""

    def __init__(self, shard, sid: str, sizes: dict):
        self._rp, self._sid, self.sizes = shard, sid, sizes

    def a(self, name: str) -> np.ndarray:
        return self._rp[f"{self._sid}.{name}"]

    def has(self, name: str) -> bool:
        return self._rp.has(f"{self._sid}.{name}")

    def rows(self, buf: str) -> int:
        return int(self.sizes.get(buf, -1))


class Step:
    """Base class of a step op (see the module doc for what each member means)."""

    op: ClassVar[str] = ""
    phase: ClassVar[str] = ""
    fields: ClassVar[dict[str, str]] = {}
    optional: ClassVar[dict[str, str]] = {}
    arrays: ClassVar[tuple[str, ...]] = ()
    optional_arrays: ClassVar[tuple[str, ...]] = ()
    collective: ClassVar[bool] = False
    pairs: ClassVar[bool] = False

    @classmethod
    def buffers(cls, st: dict) -> list[str]:
        """Buffer names the step refers to (each must have a size on every rank)."""
        out = [st[k] for k in ("src", "dst", "buf") if k in st]
        if isinstance(st.get("dst_row"), str):
            out.append(st["dst_row"])
        return out

    @classmethod
    def check(cls, st: dict, r: RankArrays) -> list[str]:
        """Structure problems of the step on one rank (empty: fine)."""
        return []

    @classmethod
    def walk(cls, w, st: dict) -> None:
        """Move global row ids through the step (``w``: the validator's walk state)."""
        raise NotImplementedError

    @classmethod
    def rows_sent(cls, st: dict, rank: int, sizes: dict, member: bool, p: int) -> int:
        """Rows ``rank`` hands to collectives in one run of the step."""
        return 0

    @classmethod
    def prepare(cls, st: dict, shards: list, sizes: list[dict], ops, comm) -> Any:
        """The step's per-rank data in the executor's native form (``ops``)."""
        return None

    @classmethod
    def run(cls, ctx, st: dict, prep: Any) -> None:
        """Execute the step for the executor's local ranks (``ctx.bufs[i]``: rank i's buffers)."""
        raise NotImplementedError


STEPS: dict[str, type[Step]] = {}


def register(cls: type[Step]) -> type[Step]:
    """Add a step op class to :data:`STEPS` (a class decorator)."""
    if not cls.op or not cls.phase:
        raise ValueError(f"{cls.__name__}: a step op needs op and phase")
    STEPS[cls.op] = cls
    return cls


def step_op(st: dict) -> type[Step]:
    """The class of a manifest step (PlanError for an unknown op)."""
    cls = STEPS.get(st.get("op")) if isinstance(st, dict) else None
    if cls is None:
        raise PlanError(f"unknown step op {st.get('op') if isinstance(st, dict) else st!r} "
                        f"(known: {', '.join(STEPS)})")
    return cls


# ----------------------------------------------------------------------------- the ops
@register
class Copy(Step):
    """``dst[dst_row : dst_row + rows(src)] = src``."""

    op, phase = "copy", "gather"
    fields = {"src": "buf", "dst": "buf", "dst_row": "row"}

    @classmethod
    def check(cls, st, r):
        if dst_start(st, r.sizes) + r.rows(st["src"]) > r.rows(st["dst"]):
            return [f"{st['id']} copies past the end of {st['dst']}"]
        return []

    @classmethod
    def walk(cls, w, st):
        for b, sizes in zip(w.bufs, w.sizes):
            src, at = b[st["src"]], dst_start(st, sizes)
            b[st["dst"]][at:at + src.shape[0]] = src

    @classmethod
    def prepare(cls, st, shards, sizes, ops, comm):
        return [dst_start(st, s) for s in sizes]

    @classmethod
    def run(cls, ctx, st, prep):
        for b, at in zip(ctx.bufs, prep):
            src = b[st["src"]]
            b[st["dst"]][at:at + src.shape[0]] = src


@register
class Gather(Step):
    """``dst = src[idx]``."""

    op, phase = "gather", "gather"
    fields = {"src": "buf", "dst": "buf"}
    arrays = ("idx",)

    @classmethod
    def check(cls, st, r):
        if not _in_range(r.a("idx"), 0, r.rows(st["src"])) or r.a("idx").size != r.rows(st["dst"]):
            return [f"{st['id']}.idx outside buffer {st['src']} or not {r.rows(st['dst'])} long"]
        return []

    @classmethod
    def walk(cls, w, st):
        for rp, b in zip(w.ranks, w.bufs):
            b[st["dst"]] = b[st["src"]][rp[f"{st['id']}.idx"]]

    @classmethod
    def prepare(cls, st, shards, sizes, ops, comm):
        return [ops.index(rp[f"{st['id']}.idx"]) for rp in shards]

    @classmethod
    def run(cls, ctx, st, prep):
        take = ctx.ops.take
        for b, idx in zip(ctx.bufs, prep):
            take(b[st["src"]], idx, b[st["dst"]])


class A2APrep:
    """A prepared alltoallv: the comm's :class:`~partplan.runtime.comm.Prepared`
    split sizes and, per local rank, where the received rows land."""

    __slots__ = ("xp", "start", "rows")

    def __init__(self, xp, start: list[int], rows: list[int]):
        self.xp, self.start, self.rows = xp, start, rows

    def outs(self, bufs: list[dict], dst: str) -> list:
        return [b[dst][s:s + n] for b, s, n in zip(bufs, self.start, self.rows)]


@register
class AllToAllV(Step):
    """All-to-all-v in the rank's group of family ``group``: rows of ``src``
    go out grouped by destination group-rank (``send_counts``); ``sum(recv_counts)``
    rows land, in source group-rank order, at ``dst[dst_row:]``."""

    op, phase, collective, pairs = "alltoallv", "exchange", True, True
    fields = {"group": "buf", "src": "buf", "dst": "buf", "dst_row": "row"}
    arrays = ("send_counts", "recv_counts")
    optional_arrays = ("recv_ids",)

    @classmethod
    def check(cls, st, r):
        sc, rc = r.a("send_counts"), r.a("recv_counts")
        start = dst_start(st, r.sizes)
        if np.any(sc < 0) or np.any(rc < 0):
            return [f"{st['id']}: negative count"]
        if int(sc.sum()) != r.rows(st["src"]) or start + int(rc.sum()) > r.rows(st["dst"]):
            return [f"{st['id']}: counts ({int(sc.sum())} sent, {int(rc.sum())} received) do not fit buffers "
                    f"{st['src']} ({r.rows(st['src'])}) / {st['dst']} ({r.rows(st['dst'])})"]
        if r.has("recv_ids") and r.a("recv_ids").size != int(rc.sum()):
            return [f"{st['id']}.recv_ids has {r.a('recv_ids').size} ids for {int(rc.sum())} rows"]
        return []

    @classmethod
    def walk(cls, w, st):
        sid = st["id"]
        R = w.ranks
        starts = [dst_start(st, s) for s in w.sizes]
        outs = [b[st["dst"]][s:s + int(rp[f"{sid}.recv_counts"].sum())] for rp, b, s in zip(R, w.bufs, starts)]
        w.comm.alltoallv(st["group"], [b[st["src"]] for b in w.bufs], [rp[f"{sid}.send_counts"] for rp in R],
                         [rp[f"{sid}.recv_counts"] for rp in R], outs, what=sid)
        for i, rp in enumerate(R):
            mask = w.recv[i].setdefault(st["dst"], np.zeros(w.bufs[i][st["dst"]].shape[0], dtype=bool))
            mask[starts[i]:starts[i] + outs[i].shape[0]] = True
            if w.comm.member(st["group"], rp.rank) is not None and rp.has(f"{sid}.recv_ids") and \
                    not np.array_equal(outs[i][:, 0], rp[f"{sid}.recv_ids"]):
                w.probs.append(f"rank {rp.rank}: {sid}: the rows received are not {sid}.recv_ids (wrong rows "
                               f"sent, or sent in another order)")

    @classmethod
    def rows_sent(cls, st, rank, sizes, member, p):
        return int(sum(c for a, _, c in st.get("pairs", ()) if a == rank))

    @classmethod
    def prepare(cls, st, shards, sizes, ops, comm):
        sid = st["id"]
        sc = [np.asarray(rp[f"{sid}.send_counts"], dtype=np.int64) for rp in shards]
        rc = [np.asarray(rp[f"{sid}.recv_counts"], dtype=np.int64) for rp in shards]
        return A2APrep(comm.prepare(st["group"], sc, rc, what=sid), [dst_start(st, s, default=0) for s in sizes],
                       [int(c.sum()) for c in rc])

    @classmethod
    def run(cls, ctx, st, prep):
        ctx.comm.wait(cls.start(ctx, st, prep))

    @classmethod
    def start(cls, ctx, st, prep, async_op: bool = False):
        """Start the exchange (async: the handle the comm's ``wait`` takes)."""
        bufs = ctx.bufs
        return ctx.comm.start(prep.xp, [b[st["src"]] for b in bufs], prep.outs(bufs, st["dst"]), async_op=async_op)


class SpmmPrep:
    """A prepared local SpMM: per local rank the matrix in the kernel's form and,
    made on first use by :meth:`split`, its early / late parts for overlap."""

    __slots__ = ("mats", "indptr", "indices", "data", "shape", "_split")

    def __init__(self, mats, indptr, indices, data, shape):
        self.mats, self.indptr, self.indices, self.data, self.shape = mats, indptr, indices, data, shape
        self._split = {}

    def split(self, start: list[int], ops) -> list:
        """Per local rank ``(early matrix, late matrix)``, both of the full
        shape and together the whole CSR: ``early @ x`` is written while the
        exchange that fills the source rows from ``start`` on is in flight,
        ``late @ x`` is added after it. Summation order is kept, so the result
        is bitwise the unsplit product:

        * kernels that add each row's nonzeros one by one in stored order
          (``ops.in_order_rows``: scipy's) split every row at its first
          received column — early holds the nonzeros before it, late the rest,
          and adding late continues the same sequence of additions;
        * other kernels (torch: cuSPARSE balances by structure) split whole
          rows — early holds the rows that read no received row, late the
          others; each row lies in one of them, so ``s + 0 = s``."""
        key = tuple(start)
        if key not in self._split:
            per_row = bool(getattr(ops, "in_order_rows", False))
            out = []
            for i, s in enumerate(start):
                ip, ix = self.indptr[i], self.indices[i]
                nrow = ip.size - 1
                lens = np.diff(ip)
                row_of = np.repeat(np.arange(nrow, dtype=np.int64), lens)
                halo = ix >= s
                if per_row:  # nonzeros before the row's first received column
                    cs = np.concatenate([[0], np.cumsum(halo, dtype=np.int64)])
                    early = (cs[1:] - cs[ip[row_of]]) == 0
                else:        # whole rows that read no received column
                    reads = np.zeros(nrow, dtype=bool)
                    reads[row_of[halo]] = True
                    early = ~reads[row_of]
                mats = []
                for sel in (early, ~early):
                    sub_ip = np.concatenate([[0], np.cumsum(np.bincount(row_of[sel], minlength=nrow))]).astype(np.int64)
                    d = None if self.data[i] is None else np.asarray(self.data[i])[sel]
                    mats.append(ops.matrix(sub_ip, ix[sel], d, self.shape[i]))
                out.append(tuple(mats))
            self._split[key] = out
        return self._split[key]


def _ranges(indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(indptr[r], indptr[r + 1])`` over ``rows`` (vectorized)."""
    return segments(indptr[rows], np.diff(indptr)[rows])


@register
class Spmm(Step):
    """``dst = A_local @ src``: ``A_local`` a CSR (``indptr``, ``indices``,
    ``data`` or all ones) whose rows are global rows ``row_ids``."""

    op, phase = "spmm", "compute"
    fields = {"src": "buf", "dst": "buf"}
    arrays = ("indptr", "indices", "row_ids")
    optional_arrays = ("data",)

    @classmethod
    def check(cls, st, r):
        probs = []
        ip, ix = r.a("indptr"), r.a("indices")
        nr = r.rows(st["dst"])
        if ip.size != nr + 1 or (ip.size and (ip[0] != 0 or ip[-1] != ix.size or np.any(np.diff(ip) < 0))):
            probs.append(f"{st['id']}.indptr is not a CSR pointer array of {nr} rows over {ix.size} nonzeros")
        if not _in_range(ix, 0, r.rows(st["src"])):
            probs.append(f"{st['id']}.indices outside [0, {r.rows(st['src'])})")
        if r.has("data") and r.a("data").size != ix.size:
            probs.append(f"{st['id']}.data has {r.a('data').size} values for {ix.size} indices")
        if r.a("row_ids").size != nr:
            probs.append(f"{st['id']}.row_ids has {r.a('row_ids').size} ids for {nr} rows")
        return probs

    @classmethod
    def walk(cls, w, st):
        sid = st["id"]
        for i, (rp, b) in enumerate(zip(w.ranks, w.bufs)):
            ip, ix = rp[f"{sid}.indptr"], rp[f"{sid}.indices"]
            src_ids = b[st["src"]][:, 0]
            cols = src_ids[ix]
            if np.any(cols < 0):
                w.probs.append(f"rank {rp.rank}: {sid} reads rows of {st['src']} that no step wrote")
            if st["src"] in w.recv[i]:
                used = np.zeros(src_ids.size, dtype=bool)
                used[ix] = True
                unread = int(np.count_nonzero(w.recv[i][st["src"]] & ~used))
                if unread:
                    w.probs.append(f"rank {rp.rank}: {unread} rows received into {st['src']} are never read")
            rows = rp[f"{sid}.row_ids"]
            w.trip[0].append(np.repeat(rows, np.diff(ip)))
            w.trip[1].append(cols)
            w.trip[2].append(rp[f"{sid}.data"] if rp.has(f"{sid}.data") else np.ones(ix.size))
            b[st["dst"]] = rows.reshape(-1, 1).astype(np.int64).copy()

    @classmethod
    def prepare(cls, st, shards, sizes, ops, comm):
        sid = st["id"]
        mats, ips, ixs, ds, shapes = [], [], [], [], []
        for rp, sz in zip(shards, sizes):
            ip = np.asarray(rp[f"{sid}.indptr"], dtype=np.int64)
            ix = np.asarray(rp[f"{sid}.indices"], dtype=np.int64)
            data = rp[f"{sid}.data"] if rp.has(f"{sid}.data") else None
            shape = (ip.size - 1, sz.get(st["src"], 0))
            mats.append(ops.matrix(ip, ix, data, shape))
            ips.append(ip)
            ixs.append(ix)
            ds.append(data)
            shapes.append(shape)
        return SpmmPrep(mats, ips, ixs, ds, shapes)

    @classmethod
    def run(cls, ctx, st, prep):
        spmm = ctx.ops.spmm
        for b, mat in zip(ctx.bufs, prep.mats):
            spmm(mat, b[st["src"]], b[st["dst"]])

    @classmethod
    def run_part(cls, ctx, st, parts: list, which: int) -> None:
        """Part ``which`` (0: early, written; 1: late, added) of a split SpMM
        (:meth:`SpmmPrep.split`)."""
        spmm_into = ctx.ops.spmm_into
        for b, pr in zip(ctx.bufs, parts):
            spmm_into(pr[which], b[st["src"]], b[st["dst"]], accumulate=bool(which))


@register
class AllReduce(Step):
    """``buf = Σ buf`` over the rank's group of family ``group``."""

    op, phase, collective = "allreduce", "reduce", True
    fields = {"group": "buf", "buf": "buf"}

    @classmethod
    def walk(cls, w, st):
        for rp, b in zip(w.ranks, w.bufs):
            g = w.comm.member(st["group"], rp.rank)
            if g is not None and not np.array_equal(b[st["buf"]], w.bufs[g.ranks[0]][st["buf"]]):
                w.probs.append(f"rank {rp.rank}: {st['id']}: reduces rows other than rank {g.ranks[0]}'s "
                               f"(group {g.name})")

    @classmethod
    def rows_sent(cls, st, rank, sizes, member, p):
        return int(sizes.get(st["buf"], 0)) if member else 0

    @classmethod
    def run(cls, ctx, st, prep):
        ctx.comm.allreduce(st["group"], [b[st["buf"]] for b in ctx.bufs], "sum", what=st["id"])


@register
class ScatterAdd(Step):
    """``dst[idx] += src[src_idx]`` (``src_idx`` absent: all rows of ``src`` in
    order); with ``zero: true`` ``dst`` is zeroed first."""

    op, phase = "scatter_add", "fold"
    fields = {"src": "buf", "dst": "buf"}
    optional = {"zero": "bool"}
    arrays = ("idx",)
    optional_arrays = ("src_idx",)

    @classmethod
    def check(cls, st, r):
        idx = r.a("idx")
        srows = r.a("src_idx").size if r.has("src_idx") else r.rows(st["src"])
        if not _in_range(idx, 0, r.rows(st["dst"])) or idx.size != srows or (
                r.has("src_idx") and not _in_range(r.a("src_idx"), 0, r.rows(st["src"]))):
            return [f"{st['id']}: scatter indices out of range or of the wrong length"]
        return []

    @classmethod
    def walk(cls, w, st):
        sid = st["id"]
        for rp, b in zip(w.ranks, w.bufs):
            src = b[st["src"]]
            if rp.has(f"{sid}.src_idx"):
                src = src[rp[f"{sid}.src_idx"]]
            dst, idx = b[st["dst"]], rp[f"{sid}.idx"]
            if st.get("zero"):
                dst[:] = -1
                dst[:, 0] = -2  # "zeroed, id unknown" until a row is added
            tgt = dst[idx, 0]
            known = tgt >= 0
            if np.any(src[:, 0][known] != tgt[known]):
                w.probs.append(f"rank {rp.rank}: {sid} adds partial rows to other rows")
            dst[idx[~known], 0] = src[~known, 0]

    @classmethod
    def prepare(cls, st, shards, sizes, ops, comm):
        sid = st["id"]
        return [(ops.index(rp[f"{sid}.idx"]),
                 ops.index(rp[f"{sid}.src_idx"]) if rp.has(f"{sid}.src_idx") else None) for rp in shards]

    @classmethod
    def run(cls, ctx, st, prep):
        ops = ctx.ops
        for i, (b, (idx, src_idx)) in enumerate(zip(ctx.bufs, prep)):
            dst, src = b[st["dst"]], b[st["src"]]
            if st.get("zero"):
                ops.fill(dst, 0.0)
            if src_idx is not None:
                tmp = ctx.scratch(i, st["id"], src_idx.shape[0], int(src.shape[1]))
                ops.take(src, src_idx, tmp)
                src = tmp
            ops.index_add(dst, idx, src)


# ----------------------------------------------------------------------------- questions to the registry
def structure_problems(steps: list[dict], shard, sizes: dict) -> list[str]:
    """Problems of one rank's program before anything indexes with its arrays:
    every buffer a step names has a size, and each step op's own
    :meth:`Step.check` passes (indices inside their buffers, CSR pointers,
    counts fitting). Asked by ``partplan validate`` and by the executor before
    it prepares a program (a bad shard is one PlanError, never an
    out-of-bounds read or write)."""
    probs = []
    for st in steps:
        cls = step_op(st)
        unsized = [b for b in cls.buffers(st) if b not in sizes]
        if unsized:
            probs += [f"{st['id']} names buffer {b!r} with no size in the shard" for b in unsized]
            continue
        try:
            probs += cls.check(st, RankArrays(shard, st["id"], sizes))
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            probs.append(f"{st['id']}: its arrays cannot be checked ({type(exc).__name__}: {exc})")
    return probs



def program_rows(steps: list[dict], rank: int, sizes: dict, member: Callable[[str], bool], p: int) -> int:
    """Rows ``rank`` hands to collectives in one run of a program (``steps``:
    the manifest's; ``sizes``: its buffer rows; ``member(family)``: whether it is
    in a group of that family) — alltoallv rows from the manifest's pairs plus
    all-reduced rows; × f × itemsize = the bytes the comm counters measure."""
    return sum(step_op(st).rows_sent(st, rank, sizes, st.get("group") is None or member(st["group"]), p)
               for st in steps)


def pair_steps(steps: list[dict]) -> list[dict]:
    """The steps whose rows per rank pair the manifest lists (alltoallv)."""
    return [st for st in steps if step_op(st).pairs]


def role(st: dict) -> str:
    """The op of a step, checked against the registry (what the traversals'
    view of a program matches on)."""
    return step_op(st).op


__all__ = ["STEPS", "Step", "register", "step_op", "dst_start", "program_rows", "pair_steps", "role", "structure_problems", "RankArrays",
           "Copy", "Gather", "AllToAllV", "Spmm", "AllReduce", "ScatterAdd"]
