"""Communication backends of the interpreter.

A :class:`Comm` drives one or more **local ranks** (``comm.local``: the global
ranks whose buffers this process holds) — all p of them for
:class:`LocalComm` (virtual ranks in one process, deterministic: the exact
oracle that ``partplan validate`` replays through), one for
:class:`TorchComm` (torch.distributed: gloo on CPU, NCCL on GPU). Every call
takes one entry per local rank, in ``comm.local`` order:

* ``alltoallv(family, sends, send_counts, recv_counts, outs, what)`` — rows of
  ``sends[i]`` grouped by destination group-rank go out; ``recv_counts`` rows
  per source land in ``outs[i]`` (a preallocated contiguous row slice);
* ``allreduce(family, bufs, op)`` — sum / max in place over the rank's group;
* ``exchange_counts(family, values)`` — one int64 per peer through the group
  (``values[i][j]`` goes to group-rank j; returns what each peer sent);
* ``allreduce_world(values, op)`` on small numpy vectors (status flags, timings);
* ``barrier()``.

Process-level collectives (one call per process, no plan groups: what a job
that is not a plan's program exchanges, such as the distributed plan build):

* ``exchange_rows(arr, counts)`` — all-to-all-v of the rows of a numpy array
  over the world, in rounds of at most :data:`ROUND_BYTES` per process;
* ``exchange_fill(fill, counts, dtype)`` — the same for a 1-D send array that
  is never materialized (``fill(dst, a, b)`` writes its elements ``[a, b)``);
* ``allgather_object(obj)`` — every process's small JSON-able object.

:class:`TorchComm` runs them over the default process group;
:class:`LocalComm` of one rank (this process alone) returns its input.

Counters: ``sent_rows[q, r]`` rows and ``sent_bytes[q, r]`` bytes handed to
alltoallv from local rank q to peer r; ``reduce_bytes[q]`` bytes handed to
allreduce — what ``run spmm`` reports as measured.
"""
from __future__ import annotations

import datetime
import itertools
import os
from typing import Protocol

import numpy as np

from ..errors import PartplanError, PlanError
from ..program.core import Group
from ..program.exchange import segments

#: torch.distributed backends a job may name; "local" runs every rank in one process (LocalComm)
BACKENDS = ("gloo", "nccl", "local")


class CommError(PartplanError):
    """A collective failed: a peer died, timed out, or sent what the plan does not say."""


#: bytes one process sends per round of :meth:`TorchComm.exchange_rows` (larger payloads go in rounds)
ROUND_BYTES = 16 << 20
_NP2TORCH = {np.dtype(np.int64): "int64", np.dtype(np.int32): "int32", np.dtype(np.float64): "float64"}


class Comm(Protocol):
    world: int
    local: list[int]

    def member(self, family: str, rank: int) -> Group | None: ...
    def alltoallv(self, family, sends, send_counts, recv_counts, outs, what: str = "") -> None: ...
    def allreduce(self, family, bufs, op: str = "sum", what: str = "") -> None: ...
    def exchange_counts(self, family, values) -> list[np.ndarray]: ...
    def allreduce_world(self, values, op: str = "max") -> list[np.ndarray]: ...
    def allgather_world(self, values, counts) -> list[np.ndarray]: ...
    def agree(self, family, values, what: str = "") -> list[tuple[np.ndarray, np.ndarray]]: ...
    def barrier(self) -> None: ...


class _Counters:
    def __init__(self, world: int):
        self.world = world
        self.reset()

    def reset(self):
        self.sent_rows = np.zeros((self.world, self.world), dtype=np.int64)
        self.sent_bytes = np.zeros((self.world, self.world), dtype=np.int64)
        self.reduce_bytes = np.zeros(self.world, dtype=np.int64)

    def count_prepared(self, i: int, src: int, xp: "Prepared", row_bytes: int):
        """Count local rank i's (global rank ``src``) sends of a prepared exchange
        (group ranks are distinct: a plain fancy-index add)."""
        peers, sc = xp.peers[i], xp.send_counts[i]
        self.sent_rows[src, peers] += sc
        self.sent_bytes[src, peers] += sc * row_bytes

    def count(self, src: int, group: Group, send_counts, row_bytes: int):
        sc = np.asarray(send_counts, dtype=np.int64)
        idx = np.asarray(group.ranks, dtype=np.int64)
        np.add.at(self.sent_rows[src], idx, sc)
        np.add.at(self.sent_bytes[src], idx, sc * row_bytes)


def _row_bytes(buf) -> int:
    shape = tuple(buf.shape)
    width = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    item = buf.itemsize if hasattr(buf, "itemsize") else buf.element_size()
    return int(width * item)


def _group_index(groups: list[Group]) -> dict[str, dict[int, Group]]:
    fam: dict[str, dict[int, Group]] = {}
    for g in groups:
        if list(g.ranks) != sorted(g.ranks) or len(set(g.ranks)) != len(g.ranks):
            raise PlanError(f"group {g.name}: member ranks must be distinct and ascending, got {list(g.ranks)}")
        d = fam.setdefault(g.family, {})
        for r in g.ranks:
            if r in d:
                raise PlanError(f"rank {r} is in two groups of family {g.family!r} ({d[r].name}, {g.name})")
            d[r] = g
    return fam


class Prepared:
    """One alltoallv of a program, prepared once for this process's local
    ranks: the split sizes as Python lists (what ``all_to_all_single`` takes),
    the group of each local rank and the rows each sends to each global peer
    (the counters' increment). Made by :meth:`LocalComm.prepare` /
    :meth:`TorchComm.prepare`; used by ``start`` / ``wait`` with no per-call
    conversion."""

    __slots__ = ("family", "groups", "send_counts", "recv_counts", "sc", "rc", "peers", "what")

    def __init__(self, comm, family: str, send_counts, recv_counts, what: str = ""):
        self.family, self.what = family, what
        self.groups = [comm.member(family, r) for r in comm.local]
        self.send_counts = [np.asarray(c, dtype=np.int64) for c in send_counts]
        self.recv_counts = [np.asarray(c, dtype=np.int64) for c in recv_counts]
        self.sc = [[int(x) for x in c] for c in self.send_counts]
        self.rc = [[int(x) for x in c] for c in self.recv_counts]
        self.peers = [None if g is None else np.asarray(g.ranks, dtype=np.int64) for g in self.groups]


# ----------------------------------------------------------------------------- LocalComm
def _gather_rows(values, counts, local, world) -> list[np.ndarray]:
    """The local ranks' rows for :meth:`LocalComm.allgather_world` as float64[counts[rank], w] arrays,
    all of one width w (a 1-D array is one column); a count or width that does not match raises
    :class:`CommError` before anything is sent."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.shape != (world,) or (counts < 0).any():
        raise CommError(f"world all-gather: counts must be {world} non-negative sizes, got shape {counts.shape}")
    rows = [np.asarray(v, dtype=np.float64) for v in values]
    if any(r.ndim not in (1, 2) for r in rows):
        raise CommError("world all-gather: each rank hands a 1-D or 2-D array of rows")
    rows = [r.reshape(-1, 1) if r.ndim == 1 else r for r in rows]
    if len(rows) != len(local) or len({r.shape[1] for r in rows}) > 1:
        raise CommError("world all-gather: one array per local rank, all of one width")
    for r, v in zip(local, rows):
        if v.ndim != 2 or v.shape[0] != counts[r]:
            raise CommError(f"world all-gather: rank {r} hands {v.shape[0]} rows where the counts say {counts[r]}")
    return rows


class LocalComm(_Counters):
    """p virtual ranks in one process; collectives are array copies in a fixed
    order (deterministic). Checks every count pair and raises :class:`CommError`
    on a mismatch, like a real exchange should but gloo does not. Its exchange
    is synchronous (``asynchronous`` False): there is nothing to overlap."""

    asynchronous = False

    def __init__(self, world: int, groups: list[Group], device=None):
        super().__init__(world)
        self.local = list(range(world))
        self.groups = list(groups)
        self._fam = _group_index(self.groups)
        # None: buffers are numpy arrays; a torch device ("cpu", "cuda:0"): torch tensors on it,
        # every collective a device copy (how one GPU runs p > 1 ranks: NCCL refuses two ranks on one GPU)
        self.device = None
        if device is not None:
            import torch
            self.torch = torch
            self.device = torch.device(device)

    def member(self, family, rank):
        return self._fam.get(family, {}).get(rank)

    def alltoallv(self, family, sends, send_counts, recv_counts, outs, what=""):
        """Every group of ``family`` at once: the count matrix checked against what each member
        expects, then each receiver's rows gathered from the members' sends by one index (the
        loops run over members, not over member pairs: a million at k = 1024 ranks)."""
        seen = set()
        for r0 in self.local:
            g = self.member(family, r0)
            if g is None or g.name in seen:
                continue
            seen.add(g.name)
            ranks = list(g.ranks)
            sent = np.stack([np.asarray(send_counts[s], dtype=np.int64) for s in ranks])  # [i, j]: i sends j
            want = np.stack([np.asarray(recv_counts[s], dtype=np.int64) for s in ranks])  # [j, i]: j expects
            bad = np.argwhere(sent != want.T)
            if bad.size:
                i, j = (int(x) for x in bad[0])
                raise CommError(f"{what}: rank {ranks[i]} sends {int(sent[i, j])} rows to rank {ranks[j]}, which "
                                f"expects {int(want[j, i])} (group {g.name})")
            if sent.any():
                parts = [sends[s] for s in ranks]
                torch_bufs = hasattr(parts[0], "clone")
                if torch_bufs:
                    import torch
                big = torch.cat(parts) if torch_bufs else np.concatenate(parts)
                base = np.cumsum([0] + [int(b.shape[0]) for b in parts[:-1]])   # member i's rows in ``big``
                first = base[:, None] + (np.cumsum(sent, axis=1) - sent)       # [i, j]: i's first row to j
                for j, r in enumerate(ranks):
                    pos = segments(first[:, j], sent[:, j])
                    if pos.size:
                        outs[r][:pos.size] = big[torch.from_numpy(pos).to(big.device) if torch_bufs else pos]
            for s in ranks:
                self.count(s, g, send_counts[s], _row_bytes(sends[s]))

    def prepare(self, family, send_counts, recv_counts, what="") -> Prepared:
        return Prepared(self, family, send_counts, recv_counts, what)

    def start(self, xp: Prepared, sends, outs, what="", async_op: bool = False):
        """Run a prepared exchange (LocalComm: at once, device copies, also when
        ``async_op``); returns the handle :meth:`wait` takes."""
        self.alltoallv(xp.family, sends, xp.send_counts, xp.recv_counts, outs, what or xp.what)
        return None

    def wait(self, handle) -> None:
        pass

    def allreduce(self, family, bufs, op="sum", what=""):
        seen = set()
        for r in self.local:
            g = self.member(family, r)
            if g is None or g.name in seen:
                continue
            seen.add(g.name)
            b0 = bufs[g.ranks[0]]
            acc = b0.clone() if hasattr(b0, "clone") else b0.copy()
            for s in g.ranks[1:]:
                if tuple(bufs[s].shape) != tuple(acc.shape):
                    raise CommError(f"{what}: rank {s} reduces {bufs[s].shape[0]} rows, rank {g.ranks[0]} "
                                    f"{acc.shape[0]} (group {g.name})")
                if op == "sum":
                    acc += bufs[s]
                else:
                    acc = self.torch.maximum(acc, bufs[s]) if hasattr(acc, "clone") else np.maximum(acc, bufs[s])
            for s in g.ranks:
                bufs[s][...] = acc
                self.reduce_bytes[s] += acc.shape[0] * _row_bytes(acc)

    def exchange_counts(self, family, values):
        """What each member of a local rank's group sends it: column ``me`` of the group's matrix
        of ``values`` (one matrix per group, not a Python loop per member pair)."""
        by_group: dict = {}
        out = []
        for r in self.local:
            g = self.member(family, r)
            if g is None:
                out.append(np.zeros(0, dtype=np.int64))
                continue
            if g.name not in by_group:
                by_group[g.name] = (np.stack([np.asarray(values[s], dtype=np.int64) for s in g.ranks]),
                                    {s: i for i, s in enumerate(g.ranks)})
            mat, pos = by_group[g.name]
            out.append(mat[:, pos[r]].copy())
        return out

    def allreduce_world(self, values, op="max"):
        stack = np.stack([np.asarray(v) for v in values])
        red = stack.max(axis=0) if op == "max" else stack.sum(axis=0)
        return [red.copy() for _ in self.local]

    def allgather_world(self, values, counts):
        """Every rank's rows ``values[i]`` (float64[counts[rank], w] of local rank i) stacked in rank
        order, float64[sum(counts), w], for each local rank; ``counts`` (int64[world]) is the same on
        every rank, so nothing is exchanged to size the result."""
        rows = _gather_rows(values, counts, self.local, self.world)
        return [np.concatenate(rows) for _ in self.local]

    def agree(self, family, values, what=""):
        """(lowest, highest) of each entry of the small int vectors ``values`` over the members of
        each local rank's group in ``family``; a rank outside the family gets its own vector."""
        out = []
        for r, v in zip(self.local, values):
            g = self.member(family, r)
            stack = np.stack([np.asarray(values[s], dtype=np.int64) for s in (g.ranks if g else [r])])
            out.append((stack.min(axis=0), stack.max(axis=0)))
        return out

    def barrier(self):
        pass

    # process-level collectives: this process is the whole world (one rank)
    def _alone(self, what: str) -> None:
        if self.world != 1:
            raise CommError(f"{what}: a process-level collective on LocalComm needs a world of one rank, "
                            f"this one has {self.world} (start one process per rank: TorchComm)")

    def exchange_rows(self, arr: np.ndarray, counts, what: str = "exchange") -> tuple[np.ndarray, np.ndarray]:
        """(``arr``, ``counts``): the one process sends its rows to itself."""
        self._alone(what)
        return np.ascontiguousarray(arr), np.asarray(counts, dtype=np.int64).copy()

    def exchange_fill(self, fill, counts, dtype, what: str = "exchange") -> tuple[np.ndarray, np.ndarray]:
        """The virtual send array of :meth:`TorchComm.exchange_fill`, filled whole."""
        self._alone(what)
        counts = np.asarray(counts, dtype=np.int64).copy()
        out = np.empty(int(counts.sum()), dtype=dtype)
        if out.size:
            fill(out, 0, out.size)
        return out, counts

    def allgather_object(self, obj) -> list:
        self._alone("all-gather")
        return [obj]


# ----------------------------------------------------------------------------- TorchComm
class TorchComm(_Counters):
    asynchronous = True  # all_to_all_single(async_op=True): gloo's worker thread, NCCL's stream

    """One rank of a torch.distributed job. Creates every group of the plan once,
    in the manifest's order (torch requires all ranks to create all groups in
    the same order), and wraps every collective so that a dead peer, a timeout
    or a size mismatch becomes one :class:`CommError` naming the rank, the step
    and the group."""

    def __init__(self, groups: list[Group], *, timeout_s: float = 60.0, device=None):
        import torch
        import torch.distributed as dist
        if not dist.is_initialized():
            raise CommError("torch.distributed is not initialized (call init_process_group, or use "
                            "partplan.runtime.init_distributed)")
        self.torch, self.dist = torch, dist
        self.rank, world = dist.get_rank(), dist.get_world_size()
        super().__init__(world)
        self.local = [self.rank]
        self.timeout_s = float(timeout_s)
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self._checks_on = collective_device(torch.device("cpu"))   # the small collectives of a CPU comm
        self.groups = list(groups)
        self._fam = _group_index(self.groups)
        self._pg: dict[str, object] = {}
        td = datetime.timedelta(seconds=self.timeout_s)
        for g in self.groups:
            if len(g.ranks) == world:
                pg = None  # the default group
            else:
                pg = self._guard(lambda: dist.new_group(list(g.ranks), timeout=td), f"creating group {g.name}")
            if self.rank in g.ranks:
                self._pg[g.name] = pg

    def bind_world_timeout(self) -> None:
        """Run this comm's world-wide groups on a group of their own created with
        ``timeout_s`` (collective: every rank calls it once, in the same order),
        instead of the default process group, whose timeout is
        ``init_process_group``'s (30 minutes unless set): a peer that never calls
        an exchange then fails it within ``timeout_s``."""
        td = datetime.timedelta(seconds=self.timeout_s)
        for g in self.groups:
            if len(g.ranks) == self.world and self._pg.get(g.name, 0) is None:
                ranks = list(g.ranks)
                self._pg[g.name] = self._guard(lambda r=ranks: self.dist.new_group(r, timeout=td),
                                               f"creating group {g.name}")

    def _guard(self, fn, what: str):
        try:
            return fn()
        except PartplanError:
            raise
        except Exception as exc:  # gloo/NCCL raise RuntimeError / DistBackendError subclasses
            self._fail(exc, what)

    def _fail(self, exc, what: str):
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CommError(f"rank {self.rank}: {what} failed: {msg[:300]} — a peer died, timed out "
                        f"(timeout {self.timeout_s:g} s) or disagrees with this rank's plan") from None

    def member(self, family, rank):
        return self._fam.get(family, {}).get(rank)

    def _pg_of(self, family):
        g = self.member(family, self.rank)
        return g, self._pg.get(g.name) if g is not None else None

    def alltoallv(self, family, sends, send_counts, recv_counts, outs, what=""):
        g, pg = self._pg_of(family)
        if g is None:
            return
        send, out = sends[0], outs[0]
        sc = [int(x) for x in send_counts[0]]
        rc = [int(x) for x in recv_counts[0]]
        self._guard(lambda: self.dist.all_to_all_single(out, send, output_split_sizes=rc,
                                                        input_split_sizes=sc, group=pg),
                    f"{what} (alltoallv in group {g.name})")
        self.count(self.rank, g, sc, _row_bytes(send))

    def prepare(self, family, send_counts, recv_counts, what="") -> Prepared:
        return Prepared(self, family, send_counts, recv_counts, what)

    def start(self, xp: Prepared, sends, outs, what="", async_op: bool = False):
        """Start a prepared exchange: ``all_to_all_single`` straight from
        ``sends[0]`` into ``outs[0]`` (async with ``async_op``: NCCL runs it on
        its own stream, gloo on its own thread). Returns the handle for :meth:`wait`."""
        g = xp.groups[0]
        if g is None:
            return None
        pg = self._pg.get(g.name)
        send, out = sends[0], outs[0]
        try:
            work = self.dist.all_to_all_single(out, send, output_split_sizes=xp.rc[0],
                                               input_split_sizes=xp.sc[0], group=pg, async_op=async_op)
        except PartplanError:
            raise
        except Exception as exc:
            self._fail(exc, f"{what or xp.what} (alltoallv in group {g.name})")
        self.count_prepared(0, self.rank, xp, _row_bytes(send))
        return (work, what or xp.what, g.name) if async_op else None

    def wait(self, handle) -> None:
        if handle is None:
            return
        work, what, gname = handle
        try:
            work.wait()
        except Exception as exc:
            self._fail(exc, f"{what} (alltoallv in group {gname})")

    def allreduce(self, family, bufs, op="sum", what=""):
        g, pg = self._pg_of(family)
        if g is None:
            return
        rop = self.dist.ReduceOp.SUM if op == "sum" else self.dist.ReduceOp.MAX
        self._guard(lambda: self.dist.all_reduce(bufs[0], op=rop, group=pg), f"{what} (allreduce in group {g.name})")
        self.reduce_bytes[self.rank] += bufs[0].shape[0] * _row_bytes(bufs[0])

    def _small(self, a: np.ndarray):
        """A vector (counts, flags, checks; a mini-batch's sampled entries) as a tensor where this comm's
        collectives run: its device, or the current GPU for a CPU comm under a process group without a
        CPU backend."""
        t = self.torch.from_numpy(np.array(a, order="C"))  # a copy: plans are read-only maps
        dev = self.device if self.device.type == "cuda" else self._checks_on
        return t.to(dev) if dev.type == "cuda" else t

    def exchange_counts(self, family, values):
        g, pg = self._pg_of(family)
        if g is None:
            return [np.zeros(0, dtype=np.int64)]
        send = self._small(np.asarray(values[0], dtype=np.int64).reshape(-1))
        out = self.torch.empty_like(send)
        self._guard(lambda: self.dist.all_to_all_single(out, send, group=pg), f"count check in group {g.name}")
        return [out.cpu().numpy()]

    def agree(self, family, values, what=""):
        """(lowest, highest) of each entry of the small int vector ``values[0]`` over the members of
        this rank's group in ``family``: every member's vector by one all-to-all on the comm's
        device (a group made under plain "nccl" has no CPU backend; gloo's all-reduce takes several
        times as long as this), not counted in the exchange's bytes (a check, not data)."""
        v = np.asarray(values[0], dtype=np.int64).reshape(-1)
        g, pg = self._pg_of(family)
        if g is None:
            return [(v.copy(), v.copy())]
        send = self._small(np.tile(v, len(g.ranks)))
        got = self.torch.empty_like(send)
        self._guard(lambda: self.dist.all_to_all_single(got, send, group=pg),
                    f"{what} (agreement check in group {g.name})")
        every = got.cpu().numpy().reshape(len(g.ranks), v.size)
        return [(every.min(axis=0), every.max(axis=0))]

    def allreduce_world(self, values, op="max"):
        t = self._small(np.asarray(values[0], dtype=np.float64).copy())
        rop = self.dist.ReduceOp.SUM if op == "sum" else self.dist.ReduceOp.MAX
        self._guard(lambda: self.dist.all_reduce(t, op=rop), "world all-reduce")
        return [t.cpu().numpy()]

    def allgather_world(self, values, counts):
        """As :meth:`LocalComm.allgather_world`: one all-to-all in which this rank sends its rows to
        every other rank ((world − 1) · counts[rank] rows), and receives counts[j] rows from rank j."""
        (v,) = _gather_rows(values, counts, self.local, self.world)
        counts = [int(c) for c in counts]
        own, w = counts[self.rank], v.shape[1]
        total = sum(counts)
        if total == 0:
            return [np.zeros((0, w))]
        inp = self._small(np.tile(v, (self.world, 1)))
        out = self.torch.empty((total, w), dtype=self.torch.float64, device=inp.device)
        self._a2a(out, inp, counts, [own] * self.world, "world all-gather")
        return [out.cpu().numpy()]

    def barrier(self):
        # an all-reduce, not dist.barrier(): it honours the timeout on gloo and NCCL alike
        self.allreduce_world([np.zeros(1)], "max")

    # ------------------------------------------------------------------ process-level collectives
    def allgather_object(self, obj) -> list:
        """Every rank's ``obj`` (small, picklable), in rank order."""
        res = [None] * self.world
        self._guard(lambda: self.dist.all_gather_object(res, obj), "all-gather")
        return res

    def exchange_rows(self, arr: np.ndarray, counts, what: str = "exchange") -> tuple[np.ndarray, np.ndarray]:
        """Rows ``arr[sum(counts[:j]) : sum(counts[:j+1])]`` go to rank j (world
        group, CPU); returns (received rows in source-rank order, rows received
        from each rank). Payloads above :data:`ROUND_BYTES` per rank go in rounds."""
        arr = np.ascontiguousarray(arr)

        def fill(dst, a, b):
            dst[...] = arr[a:b]
        return self._rounds(fill, counts, arr.dtype, arr.shape[1:], what, whole=arr)

    def exchange_fill(self, fill, counts, dtype, what: str = "exchange") -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`exchange_rows` of a 1-D send array that is never
        materialized: ``fill(dst, a, b)`` writes its elements ``[a, b)`` into
        ``dst``; each round builds only its own piece (at most
        :data:`ROUND_BYTES`) and the received pieces go straight into the
        preallocated result."""
        return self._rounds(fill, counts, np.dtype(dtype), (), what)

    def _a2a(self, out, inp, osplit, isplit, what: str) -> None:
        self._guard(lambda: self.dist.all_to_all_single(out, inp, [int(x) for x in osplit],
                                                        [int(x) for x in isplit]), what)

    def _rounds(self, fill, counts, dtype, tail, what: str, whole=None) -> tuple[np.ndarray, np.ndarray]:
        torch, p = self.torch, self.world
        counts = np.asarray(counts, dtype=np.int64)
        if dtype not in _NP2TORCH:
            raise CommError(f"{what}: cannot exchange numpy dtype {dtype}")
        tdt = getattr(torch, _NP2TORCH[dtype])
        rc = torch.zeros(p, dtype=torch.int64)
        self._a2a(rc, torch.from_numpy(counts.copy()), [1] * p, [1] * p, f"{what} (counts)")
        rcounts = rc.numpy().copy()
        row_bytes = dtype.itemsize * int(np.prod(tail, dtype=np.int64)) if tail else dtype.itemsize
        mine = max(int(counts.sum()), int(rcounts.sum())) * row_bytes
        rounds = max(self.allgather_object(-(-mine // ROUND_BYTES) if mine else 1))
        out = np.empty((int(rcounts.sum()),) + tail, dtype=dtype) if rounds > 1 else None
        soff = np.concatenate([[0], np.cumsum(counts)])
        roff = np.concatenate([[0], np.cumsum(rcounts)])
        for i in range(rounds):  # loop over rounds: piece i of every segment
            s_lo, s_hi = counts * i // rounds, counts * (i + 1) // rounds
            r_lo, r_hi = rcounts * i // rounds, rcounts * (i + 1) // rounds
            if rounds == 1 and whole is not None:
                send = whole
            else:
                send = np.empty((int((s_hi - s_lo).sum()),) + tail, dtype=dtype)
                at = 0
                for j in range(p):
                    m = int(s_hi[j] - s_lo[j])
                    if m:
                        fill(send[at:at + m], int(soff[j] + s_lo[j]), int(soff[j] + s_hi[j]))
                    at += m
            recv = torch.empty((int((r_hi - r_lo).sum()),) + tail, dtype=tdt)
            self._a2a(recv, torch.from_numpy(send), r_hi - r_lo, s_hi - s_lo, what)
            del send
            rv = recv.numpy()
            if rounds == 1:
                out = rv
            else:
                pos = np.concatenate([[0], np.cumsum(r_hi - r_lo)])
                for j in range(p):
                    out[roff[j] + r_lo[j]: roff[j] + r_hi[j]] = rv[pos[j]:pos[j + 1]]
            del recv, rv
        return out, rcounts


class CallCounter:
    """Names the ranks that did not call a collective module (:class:`~partplan.nn.Halo`,
    :class:`~partplan.nn.DistSpMM`). Each call counts locally (``called``: no
    communication); when an exchange fails (``fail``), the rank posts its call
    number in the job's store and waits up to ``grace`` seconds for its peers'
    posts: a peer that called the same exchange failed too and posts the same
    number; the ranks without it are named in the error. Modules made in the
    same order on every rank share a key."""

    _ids = itertools.count()

    def __init__(self, comm: TorchComm, name: str, grace: float = 2.0):
        self.comm, self.name, self.grace = comm, name, float(grace)
        self.key = f"partplan.calls.{next(self._ids)}"
        self.n = 0
        try:
            from torch.distributed import distributed_c10d as c10d
            self.store = c10d._get_default_store()
        except Exception:  # noqa: BLE001 - without a store the error cannot name the ranks
            self.store = None

    def called(self) -> None:
        self.n += 1

    def fail(self, what: str) -> None:
        """Raise the :class:`CommError` naming the ranks that did not call (if any)."""
        if self.store is None:
            return
        import time
        me, world = self.comm.rank, self.comm.world
        try:
            self.store.set(f"{self.key}.{self.n}.{me}", "1")
            keys = {r: f"{self.key}.{self.n}.{r}" for r in range(world) if r != me}
            end = time.monotonic() + self.grace
            while True:
                behind = [r for r, k in keys.items() if not self.store.check([k])]
                if not behind or time.monotonic() >= end:
                    break
                time.sleep(0.05)
        except Exception:  # noqa: BLE001 - the store went with the job: keep the original error
            return
        if behind:
            raise CommError(f"{self.name}: rank {me}: {what} (call {self.n}) timed out after "
                            f"{self.comm.timeout_s:g} s: rank{'s' if len(behind) > 1 else ''} "
                            f"{', '.join(map(str, behind))} did not call it (every rank must call the module "
                            f"the same number of times, also when evaluating)") from None

def group_backend(backend: str, device=None) -> tuple[str, dict]:
    """``init_process_group``'s backend string and keywords for ``backend``:
    "nccl" becomes ``cpu:gloo,cuda:nccl`` (CPU count tensors work too) and, with
    a ``device``, selects it and binds the group to it."""
    if backend != "nccl":
        return backend, {}
    kw = {}
    if device is not None:
        import torch
        torch.cuda.set_device(device)
        kw["device_id"] = torch.device(device)
    return "cpu:gloo,cuda:nccl", kw


def init_distributed(backend: str = "gloo", *, timeout_s: float = 60.0, device=None):
    """``init_process_group`` from torchrun's environment (RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT) with a short timeout; returns (rank, world).
    ``backend`` "nccl" uses ``cpu:gloo,cuda:nccl`` so CPU count tensors work too."""
    import torch.distributed as dist
    missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ]
    if missing:
        raise CommError(f"not started by torchrun or `--nprocs`: environment variable(s) {', '.join(missing)} "
                        f"unset")
    if not dist.is_initialized():
        be, kw = group_backend(backend, device)
        try:
            dist.init_process_group(be, init_method="env://", timeout=datetime.timedelta(seconds=timeout_s), **kw)
        except Exception as exc:
            raise CommError(f"rank {os.environ['RANK']}: init_process_group({be}) failed: "
                            f"{str(exc).splitlines()[0][:300]}") from None
    return dist.get_rank(), dist.get_world_size()


FAILURE_TEXT_BYTES = 512     # how much of a failed rank's message its peers are told


def collective_device(device):
    """Where a collective over tensors meant for ``device`` can run: ``device`` itself, except a CPU
    device under a default process group without a CPU backend (``init_process_group("nccl")``:
    NCCL only, which refuses CPU tensors), where it is the current GPU. ``init_distributed`` and
    ``"cpu:gloo,cuda:nccl"`` keep CPU tensors on the CPU."""
    import torch
    import torch.distributed as dist
    device = torch.device(device)
    if device.type != "cpu" or not dist.is_initialized():
        return device
    try:
        config = dist.get_backend_config()
    except (AttributeError, RuntimeError, ValueError):   # an older torch: its backends take CPU tensors
        return device
    if "cpu:" in config or not torch.cuda.is_available():
        return device
    return torch.device("cuda", torch.cuda.current_device())


def agree_on_failure(comm, world: int, rank: int, failure: BaseException | None) -> tuple[int, str] | None:
    """Every rank learns whether any rank failed (one all-reduce of a flag per rank, on the comm's
    device: NCCL and gloo alike) and, only then, the first failed rank's message (a second all-reduce of
    its UTF-8 bytes, at most FAILURE_TEXT_BYTES). Returns (rank, message) of the first failed rank, or
    None when none failed."""
    flags = np.zeros(world)
    flags[rank] = failure is not None
    failed = np.flatnonzero(comm.allreduce_world([flags], "max")[0] > 0)
    if failed.size == 0:
        return None
    text = np.zeros((world, FAILURE_TEXT_BYTES))
    if failure is not None:
        raw = f"{type(failure).__name__}: {failure}".encode("utf-8", "replace")[:FAILURE_TEXT_BYTES]
        text[rank, :len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    text = comm.allreduce_world([text.ravel()], "sum")[0].reshape(world, FAILURE_TEXT_BYTES)
    first = int(failed[0])
    return first, bytes(text[first].astype(np.uint8)).rstrip(b"\0").decode("utf-8", "replace")
