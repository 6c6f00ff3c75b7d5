"""Distributed breadth-first search from a 1D, routed or 2D plan,
direction-optimizing, with a sparse/dense frontier exchange chosen per (rank,
peer) and level.

See :mod:`.traversal` for which program BFS runs on (the plan's ``A^T``: an
edge u → v is A[u, v] ≠ 0) and why only the owner → ghost-holder exchange is
needed. Per level every rank:

1. sends the frontier bits of its own vertices in its send lists
   (:func:`~.traversal.exchange_chain`: counts, then one uint8 all-to-all-v,
   per step of the plan's chain — one step in 1D, A/B/C through the domain
   monitors on a routed plan);
2. top-down: expands the frontier columns (own + received ghosts) of its
   CSC block; bottom-up: each unvisited own vertex scans its in-edges for a
   frontier vertex and stops at the first;
3. all-reduces the level's figures (new frontier size, its out-degree sum,
   edges examined, bytes: one small float64 vector) — the stop test and the
   direction switch of the next level.

Direction (Beamer et al. with GAPBS's thresholds, ``alpha`` = 15, ``beta`` =
18): go bottom-up when the out-degree sum of the new frontier (scout count)
exceeds ``edges_to_check / alpha`` (``edges_to_check`` starts at nnz and
drops by each top-down level's scout count); go back top-down when the
frontier shrinks below ``n / beta``.

2D R × C: step 2 runs on the rank's block (partial rows of its grid row ×
columns of its grid column) and the proposals fold along the grid row to the
owner (:func:`~.traversal.exchange_fold`: a bitmap per pair over the rows the
sender may still propose, and the candidate ids of the previous level's
proposals; the smallest candidate wins); before a bottom-up level the owners
send their grid-row peers the visited bits they lack (the fold's transpose),
so an unvisited partial row is scanned only while it is unvisited.

Parents: vertex v gets the smallest global id among its in-neighbours in the
previous level, in both directions: the same tree at any rank count or layout.

Examples
--------
>>> import numpy as np, partplan
>>> from partplan.runtime.bfs import bfs_local
>>> g = partplan.Graph.from_edges([0, 1, 2, 0], [1, 2, 3, 2], symmetrize=True)
>>> res = bfs_local(partplan.build_plan(g, np.array([0, 0, 1, 1])), 0)
>>> res.parents.tolist(), res.levels.tolist()
([0, 0, 0, 2], [0, 1, 1, 2])
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import PlanError
from ..program.plan import Plan, program_steps
from . import kernels as KT
from .traversal import (FoldCarry, RankGraph, _as_comm, check_layout, exchange_chain, exchange_flags,
                        exchange_fold, gather_global, rank_graph, traversal_program, world_sum)

DIRECTIONS = ("auto", "top-down", "bottom-up")
ALPHA, BETA = 15.0, 18.0


@dataclass
class Level:
    """One BFS level, summed over ranks: ``frontier`` vertices expanded,
    ``edges_examined``, payload ``bytes`` (the chosen modes) and what all-sparse /
    all-dense would have cost, ``messages`` (nonempty (rank, peer) payloads),
    ``bytes_measured`` (the comm counters), seconds."""

    level: int
    direction: str
    mode: str
    frontier: int
    edges_examined: int
    bytes: int
    bytes_sparse: int
    bytes_dense: int
    bytes_measured: int
    messages: int
    time_s: float
    steal: dict | None = None  # load-balance keys of the level (partplan.runtime.steal), when a balancer runs

    bytes_per_rank: list | None = None  # payload bytes each rank sent (index = rank)
    messages_per_rank: list | None = None  # nonempty payloads each rank sent
    bytes_by_family: dict | None = None  # payload bytes per group family ("world"; routed "dom", "cross"; 2d "col", "row")
    messages_by_family: dict | None = None  # nonempty payloads per group family

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d.update(d.pop("steal") or {})
        return d


@dataclass
class BfsResult:
    """One search: ``parents`` and ``levels`` (int64[n], vertex order, -1 =
    unreached; the root is its own parent), per-level records, seconds from
    the root's visit to the last level (parents still distributed)."""

    root: int
    parents: np.ndarray
    levels: np.ndarray
    records: list[Level] = field(default_factory=list)
    time_s: float = 0.0

    @property
    def edges_examined(self) -> int:
        return int(sum(r.edges_examined for r in self.records))


def _out_degree(manifest: dict, rp, ids: np.ndarray) -> np.ndarray:
    """Out-degree (row nnz of A) of own vertices ``ids``, from the forward program."""
    from ..program.steps import Spmm, step_op
    sp = [s for s in program_steps(manifest, "forward") if step_op(s) is Spmm][0]["id"]
    ip = np.asarray(rp[f"{sp}.indptr"], dtype=np.int64)
    rows = np.asarray(rp[f"{sp}.row_ids"], dtype=np.int64)
    deg = np.zeros(ids.size, dtype=np.int64)
    o = np.argsort(ids, kind="stable")
    deg[o[np.searchsorted(ids, rows, sorter=o)]] = np.diff(ip)
    return deg


def _out_degree_2d(comm, rgs: list[RankGraph], n: int) -> list[np.ndarray]:
    """Out-degree of own vertices on a 2D plan: column nnz of every block of
    ``A^T`` summed over ranks (one length-n all-reduce, once per engine)."""
    vecs = [np.bincount(rg.ext_ids, weights=np.diff(rg.cindptr), minlength=n) for rg in rgs]
    tot = world_sum(comm, vecs) if len(vecs) == 1 else np.sum(vecs, axis=0)
    return [tot[rg.ids].astype(np.int64) for rg in rgs]


def _by_family(families: list[str], v: np.ndarray) -> tuple[dict, dict]:
    F = len(families)
    return ({f: int(v[k]) for k, f in enumerate(families)}, {f: int(v[F + k]) for k, f in enumerate(families)})


class _Schedule:
    """The direction-optimizing state of one search (Beamer et al. with GAPBS's
    thresholds, module doc): frontier sizes, the scout count and the edges
    left to check. :meth:`next` gives the level's direction, :meth:`advance`
    takes the level's world-summed frontier size and scout count."""

    def __init__(self, eng: "BfsEngine", scout: float):
        self.eng, self.scout = eng, scout
        self.nf, self.prev_nf, self.to_check, self.depth = 1.0, 0.0, float(eng.nnz), 0
        self.cur = "bottom-up" if eng.direction == "bottom-up" else "top-down"

    def next(self) -> str:
        e = self.eng
        if self.depth:
            if e.direction != "auto":
                self.cur = e.direction
            elif self.cur == "top-down":
                self.cur = "bottom-up" if self.scout > self.to_check / e.alpha else "top-down"
            else:
                self.cur = "top-down" if (self.nf < self.prev_nf and self.nf <= e.n / e.beta) else "bottom-up"
        if self.cur == "top-down":
            self.to_check -= self.scout
        return self.cur

    def advance(self, new_nf: float, scout: float) -> None:
        self.prev_nf, self.nf, self.scout = self.nf, new_nf, scout
        self.depth += 1


def _received_column_prefixes(rg, clen: np.ndarray) -> list[list[np.ndarray]]:
    """Per exchange step and peer: the prefix sums of the received rows' column lengths sorted
    longest first (the host's bound on the top-down work of any k of them)."""
    tops, base = [], rg.nl
    for sg in rg.steps:
        per = []
        for j in range(sg.recv_counts.size):
            c = np.sort(clen[base + sg.recv_off[j]:base + sg.recv_off[j + 1]])[::-1]
            per.append(np.concatenate([[0], np.cumsum(c)]).astype(np.int64))
        tops.append(per)
        base += sg.nrecv
    return tops


def _bottom_up_round_rows(rlen: np.ndarray) -> list[np.ndarray]:
    """Per bottom-up round (:func:`~.kernels.torchk.bu_rounds`): which rows still take part, and how many
    of their entries the round scans."""
    from .kernels.torchk import bu_rounds
    rows = []
    for lo, c in bu_rounds():
        rows += [rlen > lo, np.clip(rlen - lo, 0, c) if c is not None else np.maximum(rlen - lo, 0)]
    return rows


class BfsEngine:
    """BFS over the local ranks of ``comm`` (all of them for LocalComm, one
    for TorchComm) from a plan's manifest and those ranks' shards.

    ``kernels`` (:data:`~partplan.runtime.kernels.CHOICES`): the per-rank
    compute — ``native`` (numba, numpy state on the host), ``torch`` (torch
    ops, state as tensors on ``comm.device``, CPU tensors when the comm has
    none) or ``auto`` (torch on CUDA, native otherwise). Both give the same
    parents, levels and per-level figures."""

    def __init__(self, manifest: dict, shards: list, comm, *, direction: str = "auto",
                 alpha: float = ALPHA, beta: float = BETA, kernels: str = "auto"):
        lay = check_layout(manifest, "bfs")
        if direction not in DIRECTIONS:
            raise PlanError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
        self.kind, self.two_d = lay.name, bool(lay.fold)
        if not (alpha > 0 and beta > 0):
            raise PlanError(f"alpha and beta must be > 0, got {alpha}, {beta}")
        if comm.world != manifest["ranks"]:
            raise PlanError(f"the plan is for {manifest['ranks']} ranks but the job has {comm.world}")
        self.X = KT.for_comm(kernels, comm)
        self.kernels = self.X.name
        self.manifest, self.comm = manifest, comm
        self.n, self.nnz = int(manifest["graph"]["n"]), int(manifest["graph"]["nnz"])
        self.direction, self.alpha, self.beta = direction, float(alpha), float(beta)
        prog = traversal_program(manifest)
        self.rgs: list[RankGraph] = [rank_graph(manifest, rp, prog) for rp in shards]
        if self.two_d:
            self.outdeg = _out_degree_2d(comm, self.rgs, self.n)
            self.sync = [rg.fold.reversed(rg.fold_pos) for rg in self.rgs]  # owner → partial-row holders
        else:
            self.outdeg = [_out_degree(manifest, rp, rg.ids) for rp, rg in zip(shards, self.rgs)]
        self.gvs = [self.X.graph(rg) for rg in self.rgs]  # the kernels' view (device copies for torch)
        self.outdeg_x = [self.X.asarray(d, "int64") for d in self.outdeg]
        rg0 = self.rgs[0]
        self.families = list(dict.fromkeys([sg.family for sg in rg0.steps]
                                           + ([rg0.fold.family] if self.two_d else [])))
        self.pos = []  # global id -> own position, per local rank (sorted lookup)
        for rg in self.rgs:
            o = np.argsort(rg.ids, kind="stable")
            self.pos.append((rg.ids[o], o))
        self.balancer = None  # a partplan.runtime.steal.Balancer: frontier stealing on 1D top-down levels
        self.level_hook = None  # called as hook(depth, direction) when a level starts, hook(depth, "done") after

    def _own(self, i: int, v: int) -> int:
        ids, o = self.pos[i]
        k = int(np.searchsorted(ids, v))
        return int(o[k]) if k < ids.size and ids[k] == v else -1

    def check_root(self, root) -> int:
        if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= int(root) < self.n:
            raise PlanError(f"root {root!r} is not a vertex id in [0, {self.n})")
        return int(root)

    def _expand(self, i: int, cur: str, front, ghost, skip):
        """One direction's kernel on local rank i's block: (new rows, edges, candidates)."""
        X, gv = self.X, self.gvs[i]
        if cur == "top-down":
            cols = X.cat([X.flatnonzero(front), gv.nl + X.flatnonzero(ghost)])
            return X.top_down(gv, cols, skip)
        return X.bottom_up(gv, X.cat([front, ghost]), skip)

    def _sync_2d(self, visited, synced, depth, fp):
        """Before a 2D bottom-up level: owners send the visited bits their grid-row
        peers do not have yet (``visited & ~synced``: everything at the first
        bottom-up level, then the last level's discoveries) to the ranks holding
        the vertex as a partial row — the transpose of the fold, same pairs and
        rows, sparse/dense per pair. Returns (block rows now known visited, stats).
        ``fp`` (the fold's carried state): each owner notes the rows its peers
        now know visited."""
        flags = []
        for i, rg in enumerate(self.rgs):
            flags.append(visited[i] & ~synced[i])
            synced[i] |= visited[i]
            fp[i]["pk"] |= flags[i][rg.fold_pos]
        got, _, st = exchange_flags(self.comm, self.sync, flags, None, [rg.fold.idx.size for rg in self.rgs],
                                    what=f"BFS visited sync, level {depth}")
        return [gv.fold_idx[g] for gv, g in zip(self.gvs, got)], st

    def _level_2d(self, cur, front, ghost, visited, known, depth, fp):
        """2D level on each block: top-down expands the frontier columns, bottom-up
        lets every partial row not known visited scan its in-edges (sorted by
        global id) for the first frontier column; either gives candidate parents
        of partial rows. Rows of other ranks go to their owner in the grid row
        (:func:`~.traversal.exchange_fold`: this level's flags, the last level's
        candidate ids); ``known`` (block rows proposed before or known visited) is
        updated. A row is new when proposed and unvisited; its parent is the
        smallest candidate — the own block's at once, the peers' one level later
        (``fp``: per local rank the last fold's flags, ids, counts and new rows).
        Returns per local rank (new own positions, edges, the own block's
        smallest candidate per own row: int64 max where it has none)."""
        X, rgs = self.X, self.rgs
        cands, edges_l, masks = [], [], []
        for i, rg in enumerate(rgs):
            gv = self.gvs[i]
            skip = X.copy(known[i])
            skip[gv.self_src] |= visited[i][gv.self_dst]
            new_p, edges, cand = self._expand(i, cur, front[i], ghost[i], skip)
            mask = X.zeros(rg.nrows, "bool")
            mask[new_p] = True
            mask[gv.self_src] = False  # own rows stay here
            known[i] |= mask
            cands.append(cand)
            edges_l.append(edges)
            masks.append(mask)
        cdt = self._cdt()
        flags = [m[rg.fold.idx] for m, rg in zip(masks, rgs)]
        got, vals, st = exchange_fold(self.comm, [rg.fold for rg in rgs], flags, [f["carry"] for f in fp], cdt,
                                      what=f"BFS fold, level {depth}")
        out = []
        big = np.iinfo(np.int64).max
        for i, rg in enumerate(rgs):
            gv, f = self.gvs[i], fp[i]
            late = X.full(rg.nl, big, "int64")  # the peers' candidates of the last level's new rows
            pg = f["carry"].pgot
            X.minimum_at(late, gv.fold_pos[pg], X.astype(vals[i][pg], "int64"))
            f["late"] = late
            best = X.full(rg.nl, big, "int64")
            c_self = cands[i][gv.self_src]
            ok = c_self >= 0
            X.minimum_at(best, gv.self_dst[ok], c_self[ok])
            prop = best < big
            prop[gv.fold_pos[got[i]]] = True
            new = X.flatnonzero(prop & ~visited[i])
            f["pk"] |= got[i]
            so, ro = rg.fold.send_off, rg.fold.recv_off
            avail, ravail = ~known[i][rg.fold.idx], ~f["pk"]
            f["carry"] = FoldCarry(avail, _segment_counts(avail, so), flags[i], X.astype(cands[i], cdt)[rg.fold.idx],
                                   _segment_counts(flags[i], so), ravail, _segment_counts(ravail, ro), got[i],
                                   _segment_counts(got[i], ro))
            out.append((new, edges_l[i], best))
        return out, st

    def _cdt(self) -> str:
        """A candidate id on the wire: 4 bytes while it fits."""
        return "int32" if self.n <= np.iinfo(np.int32).max else "int64"

    def _fold_start(self) -> list:
        """The native 2D fold's carried state before a search's first level, per local
        rank: the :class:`~.traversal.FoldCarry`, the own rows new at the last level
        (``newprev``) and per received fold entry whether its holder knows the row
        (``pk``: proposed it, or the visited sync sent it)."""
        X, cdt = self.X, self._cdt()
        return [dict(carry=FoldCarry.start(rg.fold, cdt), newprev=X.zeros(rg.nl, "bool"),
                     pk=X.zeros(rg.fold.nrecv, "bool")) for rg in self.rgs]

    def _record(self, records: list, vec: list, st, meas: int, depth: int, cur: str, nf: float, tl: float,
                steal=None, tail: list | None = None) -> tuple[float, float]:
        """All-reduce the level's figures (``vec``: [new, scout, edges] per local
        rank, host float64) with the exchange stats and append its Level;
        returns (new frontier size, its scout count) over all ranks. ``tail``:
        one more float64 vector per local rank, summed in the same all-reduce
        (its sum lands in ``self._tail``)."""
        comm = self.comm
        extra = np.concatenate([st.vector(), [meas], st.rank_vector(comm.world),
                                st.family_vector(self.families)])
        # layout: new, scout, edges, bytes, sparse, dense, dense pairs, sparse pairs, messages, measured,
        # bytes per rank (p), messages per rank (p), bytes per family (F), messages per family (F)
        vec = [np.concatenate([v, extra if i == 0 else np.zeros_like(extra)]) for i, v in enumerate(vec)]
        if tail is not None:
            vec = [np.concatenate([v, t]) for v, t in zip(vec, tail)]
        tot = world_sum(comm, vec)
        if tail is not None:
            self._tail = tot[tot.size - len(tail[0]):]
            tot = tot[:tot.size - len(tail[0])]
        mode = "none" if tot[3] == 0 else ("dense" if tot[7] == 0 and tot[6] > 0 else
                                          "sparse" if tot[6] == 0 else "mixed")
        records.append(Level(depth, cur, mode, int(nf), int(tot[2]), int(tot[3]), int(tot[4]), int(tot[5]),
                             int(tot[9]), int(tot[8]), time.perf_counter() - tl,
                             None if steal is None else steal.info,
                             [int(b) for b in tot[10:10 + comm.world]],
                             [int(m) for m in tot[10 + comm.world:10 + 2 * comm.world]],
                             *_by_family(self.families, tot[10 + 2 * comm.world:])))
        return float(tot[0]), float(tot[1])

    def _torch_state(self):
        """The torch path's buffers, made once per engine: per local rank the state
        (visited, parent, level), the frontier over the ext columns (own, then
        ghosts: the exchange writes the ghost part, bottom-up reads it whole),
        a candidate scratch, and the figure weights float64[8, nl] (1, out-degree,
        CSC column length, CSR row length, then per later bottom-up round of
        :data:`~.kernels.torchk.BU_CHUNKS` whether the row takes part and its
        edges in the round: one product with the new rows' 0/1 vector gives a
        level's new count, scout count, next top-down own edges and what leaves
        the bottom-up rounds' sizes — integer sums, exact in float64), with a host
        copy. Also per step of the expand chain and peer the prefix sums of the
        CSC column lengths of the rows the peer sends, largest first (``tops``:
        the top-down bound of the ghost columns' edges from the counts alone).
        ``parent`` holds int64 max, not −1, for unreached vertices (a level
        updates it by a minimum)."""
        if getattr(self, "_tstate", None) is not None:
            return self._tstate
        import torch

        from .kernels.torchk import BU_CHUNKS
        dev = self.X.device
        st = []
        for i, rg in enumerate(self.rgs):
            clen = np.diff(rg.cindptr)
            rlen = np.diff(rg.indptr)
            rows = [np.ones(rg.nl, np.int64), self.outdeg[i], clen[:rg.nl], rlen]
            rows += _bottom_up_round_rows(rlen)
            w = np.stack(rows).astype(np.int64)
            tops = _received_column_prefixes(rg, clen)
            s0 = rg.steps[0] if rg.steps else None
            st.append(dict(visited=torch.zeros(rg.nl, dtype=torch.bool, device=dev),
                           parent=torch.empty(rg.nl, dtype=torch.int64, device=dev),
                           level=torch.full((rg.nl,), -1, dtype=torch.int64, device=dev),
                           fext=torch.zeros(rg.next_, dtype=torch.bool, device=dev),
                           best=torch.empty(rg.nrows, dtype=torch.int64, device=dev),
                           w=self.X.asarray(w, "float64"), w_host=w, tops=tops,
                           s0=None if s0 is None else s0.on(dev),
                           zero1=torch.zeros(1, dtype=torch.int64, device=dev),
                           silent=all(sg.silent for sg in rg.steps)))
        assert len(BU_CHUNKS) >= 1
        if self.rgs and len(self.rgs[0].steps) > 1 and not all(s["silent"] for s in st):
            # a routed chain: what each later step forwards, counted by the owners of the rows
            rows, slots = self._fan_out()
            for s, r, k in zip(st, rows, slots):
                s["fan"] = (torch.as_tensor(r, device=dev), torch.as_tensor(k, device=dev))
                s["fan_host"] = (r, k)
        self._tstate = st
        return st

    def _fan_out(self) -> tuple[list, list]:
        """A routed chain's later steps, counted at the source (once per engine).
        A row a monitor forwards at step k ≥ 2 carries its vertex's frontier bit,
        so what the monitor flags for a peer is the number of that pair's list
        entries whose vertex is in the frontier — a sum the vertices' owners can
        make. Every (later step, sender, peer) pair gets a slot (``self._slot``:
        int64[steps, p] base per sender, the peer's group index added;
        ``self._nslots`` in all); each list entry's slot travels back along the
        chain (each step reversed, from the last: the receiver returns (position
        in the pair's list, slot) to the sender, which maps the position to its
        buffer row) until it reaches an own row. Returns per local rank (own
        rows, slots): one entry per forwarded copy of an own vertex."""
        comm, rgs = self.comm, self.rgs
        steps = rgs[0].steps
        p, K = comm.world, len(steps)
        size = np.zeros((K, p), np.int64)
        for k in range(1, K):
            for r in range(p):
                g = comm.member(steps[k].family, r)
                size[k, r] = 0 if g is None else len(g.ranks)
        base = (np.cumsum(size.reshape(-1)) - size.reshape(-1)).reshape(K, p)
        self._slot, self._nslots = base, int(size.sum())
        pairs = []  # per local rank: int64[m, 2] (buffer row, slot)
        for i, rg in enumerate(rgs):
            me = comm.local[i]
            got = [np.zeros((0, 2), np.int64)]
            for k in range(1, K):
                sg = rg.steps[k]
                peer = np.repeat(np.arange(sg.send_counts.size), sg.send_counts)
                got.append(np.stack([sg.idx, base[k, me] + peer], axis=1).astype(np.int64))
            pairs.append(np.concatenate(got))
        # buffer rows appended by step k: [nl + a_k, nl + a_k + nrecv_k)
        starts = [np.concatenate([[0], np.cumsum([sg.nrecv for sg in rg.steps])]) + rg.nl for rg in rgs]
        for k in range(K - 1, -1, -1):
            segs = [rg.steps[k] for rg in rgs]
            if all(sg.silent for sg in segs):
                continue
            sends, counts = [], []
            for i, sg in enumerate(segs):
                pr = pairs[i]
                lo = starts[i][k]
                back = (pr[:, 0] >= lo) & (pr[:, 0] < lo + sg.nrecv)
                q = pr[back, 0] - lo  # receive position in this step's block
                j = np.searchsorted(sg.recv_off, q, side="right") - 1  # the peer that sent the row
                o = np.argsort(j, kind="stable")
                sends.append(np.stack([(q - sg.recv_off[j])[o], pr[back, 1][o]], axis=1).astype(np.int64))
                counts.append(np.bincount(j, minlength=sg.recv_counts.size).astype(np.int64))
                pairs[i] = pr[~back]
            peer_c = comm.exchange_counts(segs[0].family, counts)
            outs = [np.empty((int(np.sum(c)), 2), np.int64) for c in peer_c]
            tens = hasattr(comm, "torch")
            touts = [_as_comm(comm, o) for o in outs] if tens else outs
            comm.alltoallv(segs[0].family, [_as_comm(comm, s) for s in sends] if tens else sends, counts, peer_c,
                           touts, what=f"BFS setup: routed counts, step {k + 1}")
            outs = [o.cpu().numpy() if tens else o for o in touts]
            for i, sg in enumerate(segs):
                c = np.asarray(peer_c[i], np.int64)
                j = np.repeat(np.arange(c.size), c)  # the peer the entry came back from: my list segment
                rows = sg.idx[sg.send_off[j] + outs[i][:, 0]]
                pairs[i] = np.concatenate([pairs[i], np.stack([rows, outs[i][:, 1]], axis=1)])
        for i, rg in enumerate(rgs):
            if pairs[i].size and pairs[i][:, 0].max() >= rg.nl:
                raise PlanError("BFS setup: a routed chain forwards a row no earlier step brought")
        return [pr[:, 0].copy() for pr in pairs], [pr[:, 1].copy() for pr in pairs]

    def _later_counts(self, tot) -> list:
        """Per later step of a routed chain, per local rank: the flag counts per
        peer it sends (from the summed slot vector ``tot``)."""
        out = []
        for k in range(1, len(self.rgs[0].steps)):
            per = []
            for i, rg in enumerate(self.rgs):
                b = self._slot[k, self.comm.local[i]]
                per.append(np.rint(tot[b:b + rg.steps[k].send_counts.size]).astype(np.int64))
            out.append(per)
        return out

    def _search_torch(self, root: int) -> BfsResult:
        """:meth:`search` for the torch kernels on a 1D / routed plan with no
        balancer: the same levels, records and result, with the state in
        per-engine device buffers and, per level, **one** device → host copy
        — the level's figures (new frontier size, scout count, the sizes the
        next level's kernels need, the next exchange's flag counts per peer;
        on a routed chain also, per (later step, sender, peer), how many of
        the new frontier's rows that pair will forward, counted by the rows'
        owners and summed by the level's world sum: :meth:`_fan_out`), from which
        the host decides direction and termination and knows every shape of
        the next level. The kernels of a level are a fixed number of launches
        (per local rank and peer, whatever the frontier or the degrees):
        top-down pads its edge ranges to a bound known on the host
        (:meth:`~.kernels.torchk.TorchKernels.top_down_b`), bottom-up sizes its
        rounds from the host's running figures."""
        import torch

        from .kernels.torchk import BIG as KT_BIG
        from .traversal import ExchangeStats, exchange_chain_counted
        comm, rgs, X = self.comm, self.rgs, self.X
        S = self._torch_state()
        loc = range(len(rgs))
        nw = S[0]["w_host"].shape[0] if S else 0
        # host figures per local rank: own frontier size and its CSC edges, then per unvisited set
        # [rows, in-edges, (rows, edges) per later bottom-up round]; the first step's counts per peer
        nf_own, own_e, unvis, counts0 = [], [], [], []
        deg_root = []
        for i in loc:
            s, rg = S[i], rgs[i]
            s["visited"].zero_()
            s["parent"].fill_(KT_BIG)
            s["level"].fill_(-1)
            s["fext"].zero_()
            k = self._own(i, root)
            w = s["w_host"]
            u = w[[0, 3] + list(range(4, nw))].sum(axis=1)
            c0 = np.zeros(rg.steps[0].send_counts.size if rg.steps else 0, dtype=np.int64)
            if k >= 0:
                s["visited"][k] = True
                s["fext"][k] = True
                s["parent"][k], s["level"][k] = root, 0
                nf_own.append(1)
                own_e.append(int(w[2, k]))
                u = u - w[[0, 3] + list(range(4, nw)), k]
                deg_root.append(float(w[1, k]))
                if rg.steps:
                    sg = rg.steps[0]
                    hits = np.flatnonzero(sg.idx == k)
                    np.add.at(c0, np.searchsorted(sg.send_off, hits, side="right") - 1, 1)
            else:
                nf_own.append(0)
                own_e.append(0)
                deg_root.append(0.0)
            unvis.append([int(x) for x in u])
            counts0.append(c0)
        silent = all(s["silent"] for s in S)
        fan = bool(S) and "fan" in S[0]
        hook = self.level_hook
        comm.barrier()
        t0 = time.perf_counter()
        if fan:  # a routed chain: the root's owner counts what each later step forwards
            tails = []
            for i in loc:
                t = np.zeros(self._nslots)
                k = self._own(i, root)
                r, sl = S[i]["fan_host"]
                if k >= 0:
                    np.add.at(t, sl[r == k], 1.0)
                tails.append(t)
            tot = world_sum(comm, [np.concatenate([[d], t]) for d, t in zip(deg_root, tails)])
            later = self._later_counts(tot[1:])
            sched = _Schedule(self, float(tot[0]))
        else:
            later = None
            sched = _Schedule(self, float(world_sum(comm, [np.array([d]) for d in deg_root])[0]))
        records: list[Level] = []
        while sched.nf > 0:
            tl = time.perf_counter()
            cur, depth, nf = sched.next(), sched.depth, sched.nf
            if hook is not None:
                hook(depth, cur)
            sent0 = int(comm.sent_bytes.sum())
            gcnt, gbound = [0] * len(rgs), [0] * len(rgs)
            if silent:  # no (rank, peer) pair at all (one rank): no exchange, no ghost
                st = ExchangeStats()
            else:
                ghost, st, recv = exchange_chain_counted(
                    comm, [rg.steps for rg in rgs], [S[i]["fext"][:rg.nl] for i, rg in enumerate(rgs)], counts0,
                    what=f"BFS level {depth}", later=later)
                for i, rg in enumerate(rgs):
                    if ghost[i].numel():
                        S[i]["fext"][rg.nl:].copy_(ghost[i])
                    for k, per in enumerate(recv):
                        c = per[i]
                        gcnt[i] += int(c.sum())
                        gbound[i] += int(sum(S[i]["tops"][k][j][int(c[j])] for j in np.flatnonzero(c)))
            figs = []
            for i in loc:
                s, gv = S[i], self.gvs[i]
                if cur == "top-down":
                    cols = X.nonzero_n(s["fext"], nf_own[i] + gcnt[i])
                    hit, best, edges = X.top_down_b(gv, cols, own_e[i] + gbound[i], s["visited"], s["best"])
                else:
                    hit, best, edges = X.bottom_up_x(gv, s["fext"], s["visited"],
                                                     (unvis[i][0], *unvis[i][2:]), s["best"])
                s["visited"] |= hit
                torch.minimum(s["parent"], best, out=s["parent"])  # best: int64 max off the new rows
                s["level"].masked_fill_(hit, depth + 1)
                s["fext"][:rgs[i].nl].copy_(hit)
                parts = [s["w"] @ hit.to(torch.float64), edges.to(torch.float64).reshape(1)]
                if s["s0"] is not None and not silent:  # the next exchange's flag counts per peer
                    idx, soff = s["s0"]
                    csum = torch.cat([s["zero1"], torch.cumsum(_take_t(hit, idx), 0, dtype=torch.int64)])
                    parts.append((_take_t(csum, soff[1:]) - _take_t(csum, soff[:-1])).to(torch.float64))
                if fan:  # per (later step, sender, peer) slot: what the chain will forward of the new frontier
                    r, sl = s["fan"]
                    parts.append(torch.zeros(self._nslots, dtype=torch.float64, device=hit.device)
                                 .index_add_(0, sl, _take_t(hit, r).to(torch.float64)))
                figs.append(torch.cat(parts))
            flat = (figs[0] if len(figs) == 1 else torch.cat(figs)).tolist()  # the level's one copy
            vec, o = [], 0
            for i in loc:
                f = flat[o:o + nw + 1]
                o += nw + 1
                cnt, sc, ce, e = f[0], f[1], f[2], f[nw]
                nf_own[i], own_e[i] = int(cnt), int(ce)
                unvis[i] = [a - int(b) for a, b in zip(unvis[i], [f[0], f[3]] + f[4:nw])]
                if S[i]["s0"] is not None and not silent:
                    g = rgs[i].steps[0].send_counts.size
                    counts0[i] = np.asarray(flat[o:o + g], dtype=np.int64)
                    o += g
                if fan:
                    tails[i] = np.asarray(flat[o:o + self._nslots], dtype=np.float64)
                    o += self._nslots
                vec.append(np.array([cnt, sc, e], dtype=np.float64))
            meas = int(comm.sent_bytes.sum()) - sent0
            sched.advance(*self._record(records, vec, st, meas, depth, cur, nf, tl, tail=tails if fan else None))
            if fan:  # the later steps' counts, summed over the owners by the level's world sum
                later = self._later_counts(self._tail)
        if hook is not None:
            hook(sched.depth, "done")
        t_search = time.perf_counter() - t0
        ids = [rg.ids for rg in rgs]
        par = [X.host(torch.where(S[i]["parent"] == KT_BIG, -1, S[i]["parent"])) for i in loc]
        pg = gather_global(comm, ids, par, self.n, -1.0).astype(np.int64)
        lg = gather_global(comm, ids, [X.host(S[i]["level"]) for i in loc], self.n, -1.0).astype(np.int64)
        return BfsResult(root, pg, lg, records, t_search)

    def _torch_state_2d(self):
        """The 2D torch path's buffers, made once per engine, per local rank: the
        own state (visited, parent, level), the frontier over the ext columns,
        the block rows a level skips (``skip``: proposed before, known visited
        by the visited sync, own rows visited), the own bits the grid-row peers
        have (``synced``) and, per fold entry an owner receives, whether that
        peer knows the row (``pk``: it proposed it, or the sync sent it),
        candidate scratch (block rows + the dummy row of
        :meth:`~.kernels.torchk.TorchKernels.bottom_up_b`), the own figure
        weights float64[3, nl] (1, out-degree, CSC column length) and the
        block-row weights float64[1 + 2·rounds, nrows] (1, then per later
        bottom-up round whether the row takes part and its edges in the round),
        with host copies, and per fold entry the sender's weights of that row
        (``rw``); the expand's top-down bounds (``tops``, as
        :meth:`_torch_state`); the expand, sync and fold send lists on the device
        and the fold's receive offsets (``roff``); scratch for the owners'
        candidates (``own``, ``late``) and fold flags (``nfold``)."""
        if getattr(self, "_tstate2", None) is not None:
            return self._tstate2
        import torch

        from .kernels.torchk import BIG as KT_BIG
        from .kernels.torchk import bu_rounds
        dev = self.X.device
        st = []
        for i, rg in enumerate(self.rgs):
            clen = np.diff(rg.cindptr)
            rlen = np.diff(rg.indptr)
            w = np.stack([np.ones(rg.nl, np.int64), self.outdeg[i], clen[:rg.nl]]).astype(np.int64)
            rows = [np.ones(rg.nrows, np.int64)]
            rows += _bottom_up_round_rows(rlen)
            wb = np.stack(rows).astype(np.int64)
            tops = _received_column_prefixes(rg, clen)
            gv = self.gvs[i]
            self.X._const(gv, "zero")  # the kernels' constants, made now rather than in the first level
            st.append(dict(visited=torch.zeros(rg.nl, dtype=torch.bool, device=dev),
                           parent=torch.empty(rg.nl, dtype=torch.int64, device=dev),
                           level=torch.full((rg.nl,), -1, dtype=torch.int64, device=dev),
                           fext=torch.zeros(rg.next_, dtype=torch.bool, device=dev),
                           skip=torch.zeros(rg.nrows, dtype=torch.bool, device=dev),
                           big0=torch.tensor(KT_BIG, dtype=torch.int64, device=dev),
                           zb=torch.zeros((len(bu_rounds()) * 2 + 1, 1), dtype=torch.float64, device=dev),
                           synced=torch.zeros(rg.nl, dtype=torch.bool, device=dev),
                           best=torch.empty(rg.nrows + 1, dtype=torch.int64, device=dev),
                           own=torch.empty(rg.nl, dtype=torch.int64, device=dev),
                           w=self.X.asarray(w, "float64"), w_host=w, wb=self.X.asarray(wb, "float64"), wb_host=wb,
                           tops=tops, s0=rg.steps[0].on(dev), sync=self.sync[i].on(dev), fold=rg.fold.on(dev),
                           self_src=gv.self_src, self_dst=gv.self_dst, fold_pos=gv.fold_pos,
                           zero1=torch.zeros(1, dtype=torch.int64, device=dev),
                           pk=torch.zeros(rg.fold_pos.size, dtype=torch.bool, device=dev),
                           roff=torch.as_tensor(rg.fold.recv_off, device=dev),
                           late=torch.empty(rg.nl, dtype=torch.int64, device=dev),
                           nfold=torch.empty(rg.nl, dtype=torch.int32, device=dev)))
        # per fold entry an owner receives, the sender's block-row weights of that row (once per engine:
        # one fold exchange per weight, every row flagged): the owner counts what its visited sync removes
        # from each receiver's unvisited rows, so a bottom-up level knows its sizes exactly
        from .traversal import _exchange_flags_torch
        ones = [torch.ones(rg.nrows, dtype=torch.bool, device=dev) for rg in self.rgs]
        rw = [[] for _ in self.rgs]
        for k in range(st[0]["wb_host"].shape[0] if st else 0):
            _, vals, _ = _exchange_flags_torch(self.comm, [rg.fold for rg in self.rgs], ones,
                                               [self.X.asarray(s["wb_host"][k], "int64") for s in st],
                                               [rg.fold_pos.size for rg in self.rgs], "BFS setup: row weights")
            for i, v in enumerate(vals):
                rw[i].append(v.to(torch.float64))
        for s, r in zip(st, rw):
            s["rw"] = torch.stack(r) if r else None
            s["rw_host"] = None if s["rw"] is None else self.X.host(s["rw"]).astype(np.int64)
        self._tstate2 = st
        return st

    def _dec_tail(self, decs: list) -> list:
        """Per local rank float64[rounds·p]: its decrements (``decs[i]``: int64[nb, sync peers]) at the
        slots of the peers' global ranks — summed over the world, slot k·p + r is what rank r's
        unvisited figure k loses in the next visited sync."""
        p = self.comm.world
        out = []
        for i, d in enumerate(decs):
            t = np.zeros(d.shape[0] * p)
            g = self.comm.member(self.sync[i].family, self.comm.local[i])
            if g is not None and d.size:
                ranks = np.asarray(g.ranks, dtype=np.int64)
                for k in range(d.shape[0]):
                    np.add.at(t, k * p + ranks, d[k])
            out.append(t)
        return out

    def _dec_in(self, tot: np.ndarray) -> list:
        """Per local rank int64[nb]: its slots of a summed :meth:`_dec_tail`."""
        p = self.comm.world
        return [np.rint(tot[np.arange(tot.size // p) * p + r]).astype(np.int64) for r in self.comm.local]

    def _search_torch_2d(self, root: int) -> BfsResult:
        """:meth:`search` for the torch kernels on a 2D plan: the same levels,
        records and result (same bytes per rank and pair) with **one** device →
        host copy per level, the level's copy.

        A level makes up to three exchanges, each sized on the host before it
        is sent (NCCL's all-to-all takes host split sizes; the mode and bytes
        of a pair follow from its count): the expand along the grid column
        and, before a bottom-up level, the visited sync along the grid row —
        both counted in the level's copy at the end of the previous level
        (with the new frontier size, scout count, own CSC edges, edges
        examined, the next bottom-up's row and edge counts over the rows not
        known visited then, and per grid-row peer what the next visited sync
        removes from the peer's counts: the sizes a bottom-up level takes are
        exact, delivered by the level's world sum) — and the fold along the
        grid row (:func:`~.traversal.exchange_fold`): a bitmap per pair of this
        level's proposals over the entries the holder may still propose, then
        the candidate ids of the previous level's proposals — both counted per
        peer (sent and received) in the previous level's copy
        (:class:`~.traversal.FoldCarry`). An owner's new rows follow from the bitmaps at
        once; their parents take the smallest candidate, the own block's at
        once and the peers' with the next level's fold (the last level finds
        no row, so every parent is complete when the search ends). Top-down
        pads its edge ranges to the host's bound
        (:meth:`~.kernels.torchk.TorchKernels.top_down_b`), bottom-up sizes its
        rows and rounds from the host figures
        (:meth:`~.kernels.torchk.TorchKernels.bottom_up_b`): a fixed number of
        kernel launches per local rank and peer."""
        import torch

        from .kernels.torchk import BIG as KT_BIG
        from .traversal import ExchangeStats, _exchange_flags_torch, exchange_chain_counted
        comm, rgs, X = self.comm, self.rgs, self.X
        S = self._torch_state_2d()
        loc = range(len(rgs))
        nb = S[0]["wb_host"].shape[0] if S else 0
        nf_own, own_e, bounds, counts0, counts_s, decs = [], [], [], [], [], []
        deg_root = []
        cdt = getattr(torch, self._cdt())
        # the fold carries its sizes and the last level's candidate ids from level to level (FoldCarry),
        # and the owners the own rows new at the last level (their parents complete with the next fold)
        carry = [FoldCarry.start(rg.fold, cdt, S[i]["visited"].device) for i, rg in enumerate(rgs)]
        for i in loc:
            s, rg = S[i], rgs[i]
            s["newprev"] = torch.zeros(rg.nl, dtype=torch.bool, device=s["visited"].device)
            for k in ("visited", "fext", "skip", "synced", "pk"):
                s[k].zero_()
            s["parent"].fill_(KT_BIG)
            s["level"].fill_(-1)
            k = self._own(i, root)
            c0 = np.zeros(rg.steps[0].send_counts.size, dtype=np.int64)
            cs = np.zeros(self.sync[i].send_counts.size, dtype=np.int64)
            skip = np.zeros(rg.nrows, dtype=bool)
            if k >= 0:
                s["visited"][k] = True
                s["fext"][k] = True
                s["parent"][k], s["level"][k] = root, 0
                nf_own.append(1)
                own_e.append(int(s["w_host"][2, k]))
                deg_root.append(float(s["w_host"][1, k]))
                for sg, c in ((rg.steps[0], c0), (self.sync[i], cs)):
                    hits = np.flatnonzero(sg.idx == k)
                    np.add.at(c, np.searchsorted(sg.send_off, hits, side="right") - 1, 1)
                skip[rg.self_src[rg.self_dst == k]] = True
                s["skip"][torch.as_tensor(np.flatnonzero(skip), device=s["skip"].device)] = True
            else:
                nf_own.append(0)
                own_e.append(0)
                deg_root.append(0.0)
            bounds.append(tuple(int(x) for x in s["wb_host"][:, ~skip].sum(axis=1)))
            counts0.append(c0)
            counts_s.append(cs)
            dec = np.zeros((nb, cs.size), np.int64)  # the root's partial rows the sync would show its peers
            if k >= 0 and s["rw_host"] is not None:
                e = np.flatnonzero(rg.fold_pos == k)
                np.add.at(dec.T, np.searchsorted(self.sync[i].send_off, e, side="right") - 1, s["rw_host"][:, e].T)
            decs.append(dec)
        quiet_x = all(rg.steps[0].silent for rg in rgs)
        quiet_f = all(rg.fold.silent for rg in rgs)
        hook = self.level_hook
        comm.barrier()
        t0 = time.perf_counter()
        tot = world_sum(comm, [np.concatenate([[d], t]) for d, t in zip(deg_root, self._dec_tail(decs))])
        dec_in = self._dec_in(tot[1:])
        sched = _Schedule(self, float(tot[0]))
        records: list[Level] = []
        f64 = torch.float64
        while sched.nf > 0:
            tl = time.perf_counter()
            cur, depth, nf = sched.next(), sched.depth, sched.nf
            if hook is not None:
                hook(depth, cur)
            sent0 = int(comm.sent_bytes.sum())
            gcnt, gbound = [0] * len(rgs), [0] * len(rgs)
            st = ExchangeStats()
            if not quiet_x:  # 1. expand along the grid column (counts from the last level's copy)
                ghost, st, recv = exchange_chain_counted(
                    comm, [rg.steps for rg in rgs], [S[i]["fext"][:rg.nl] for i, rg in enumerate(rgs)], counts0,
                    what=f"BFS level {depth}")
                for i, rg in enumerate(rgs):
                    if ghost[i].numel():
                        S[i]["fext"][rg.nl:].copy_(ghost[i])
                    c = recv[0][i]
                    gcnt[i] = int(c.sum())
                    gbound[i] = int(sum(S[i]["tops"][0][j][int(c[j])] for j in np.flatnonzero(c)))
            if cur == "bottom-up":  # 2. the visited sync along the grid row (counts from the last level's copy)
                flags = []
                for i in loc:
                    s = S[i]
                    flags.append(s["visited"] & ~s["synced"])
                    s["synced"] |= s["visited"]
                if not quiet_f:
                    got, _, st3 = _exchange_flags_torch(comm, self.sync, flags, None,
                                                        [rg.fold.idx.size for rg in rgs],
                                                        f"BFS visited sync, level {depth}", counts=counts_s)
                    st = st.add(st3)
                    for i in loc:
                        s, fi = S[i], S[i]["fold"][0]
                        s["skip"].index_copy_(0, fi, _take_t(s["skip"], fi) | got[i])
                        s["pk"] |= _take_t(flags[i], s["fold_pos"])
                    # what the sync removed from each receiver's rows: counted by the senders in the last
                    # level's copy, delivered by the last level's world sum
                    bounds = [tuple(int(b) for b in np.asarray(bd) - di) for bd, di in zip(bounds, dec_in)]
            # 3. the block kernel: candidate parents of the partial rows not known visited
            hits, bests, edges_l, masks = [], [], [], []
            for i in loc:
                s, gv = S[i], self.gvs[i]
                skip = s["skip"]  # block rows known visited or proposed before, own rows visited
                if cur == "top-down":
                    cols = X.nonzero_n(s["fext"], nf_own[i] + gcnt[i])
                    hit, best, edges = X.top_down_b(gv, cols, own_e[i] + gbound[i], skip, s["best"][:rgs[i].nrows])
                else:
                    hit, best, edges = X.bottom_up_b(gv, s["fext"], skip, bounds[i], s["best"])
                mask = hit.clone()
                mask.index_fill_(0, s["self_src"], False)  # own rows stay here
                s["skip"] |= mask
                hits.append(hit)
                bests.append(best)
                edges_l.append(edges)
                masks.append(mask)
            # 4. the fold along the grid row: this level's flags (a bitmap per pair) and the last level's
            #    candidate ids, every size known on the host (the plan, the last level's copy)
            st2 = ExchangeStats()
            if not quiet_f:
                fl = [_take_t(masks[i], S[i]["fold"][0]) for i in loc]
                fgot, fvals, st2 = exchange_fold(comm, [rg.fold for rg in rgs], fl, carry, cdt,
                                                 what=f"BFS fold, level {depth}")
                for i in loc:
                    S[i]["pk"] |= fgot[i]  # rows the peer proposed: it knows them
            st = st.add(st2)
            # 5. an own row is new when proposed and unvisited; its parent is the smallest candidate (the own
            #    block's now, the peers' with the next fold); the level's copy
            figs = []
            for i in loc:
                s = S[i]
                own = s["own"]
                own.fill_(KT_BIG)
                own.scatter_reduce_(0, s["self_dst"], _take_t(bests[i], s["self_src"]), "amin")
                prop = own < KT_BIG
                if not quiet_f:
                    late = s["late"]  # the peers' candidates of the last level's new rows
                    late.fill_(KT_BIG)
                    late.scatter_reduce_(0, s["fold_pos"],
                                         torch.where(carry[i].pgot, fvals[i].to(torch.int64), s["big0"]), "amin")
                    torch.minimum(s["parent"], torch.where(s["newprev"], late, s["big0"]), out=s["parent"])
                    nfold = s["nfold"]
                    nfold.zero_()
                    nfold.index_add_(0, s["fold_pos"], fgot[i].to(torch.int32))
                    prop |= nfold > 0
                new = prop & ~s["visited"]
                s["visited"] |= new
                torch.minimum(s["parent"], torch.where(new, own, s["big0"]), out=s["parent"])
                s["level"].masked_fill_(new, depth + 1)
                s["fext"][:rgs[i].nl].copy_(new)
                sk = s["skip"]
                sk.index_copy_(0, s["self_src"], _take_t(sk, s["self_src"]) | _take_t(new, s["self_dst"]))
                parts = [s["w"] @ new.to(f64), edges_l[i].to(f64).reshape(1), s["wb"] @ (~sk).to(f64)]
                flags = s["visited"] & ~s["synced"]
                for key, m in (("s0", new), ("sync", flags)):
                    idx, soff = s[key]
                    csum = torch.cat([s["zero1"], torch.cumsum(_take_t(m, idx), 0, dtype=torch.int64)])
                    parts.append((_take_t(csum, soff[1:]) - _take_t(csum, soff[:-1])).to(f64))
                if s["rw"] is not None and not quiet_f:  # per weight and sync peer: what the sync would remove
                    idx, soff = s["sync"]
                    m = (s["rw"] * (_take_t(flags, idx) & ~s["pk"]).to(f64)).cumsum(1)
                    m = torch.cat([s["zb"], m], 1)
                    parts.append((m.index_select(1, soff[1:]) - m.index_select(1, soff[:-1])).reshape(-1))
                if not quiet_f:  # the next fold's sizes per peer: entries still available, this fold's flags
                    c = carry[i]
                    c.avail, c.pflags, c.pvals = ~_take_t(sk, s["fold"][0]), fl[i], _take_t(bests[i], s["fold"][0])
                    c.pvals = c.pvals.to(cdt)
                    c.ravail, c.pgot, s["newprev"] = ~s["pk"], fgot[i], new
                    for m, off in ((c.avail, s["fold"][1]), (fl[i], s["fold"][1]), (c.ravail, s["roff"]),
                                   (fgot[i], s["roff"])):
                        csum = torch.cat([s["zero1"], torch.cumsum(m, 0, dtype=torch.int64)])
                        parts.append((_take_t(csum, off[1:]) - _take_t(csum, off[:-1])).to(f64))
                figs.append(torch.cat(parts))
            flat = (figs[0] if len(figs) == 1 else torch.cat(figs)).tolist()  # the level's copy
            vec, o, decs = [], 0, []
            for i in loc:
                rg = rgs[i]
                g0, gs = rg.steps[0].send_counts.size, self.sync[i].send_counts.size
                gd = nb * gs if S[i]["rw"] is not None and not quiet_f else 0
                f = flat[o:o + 4 + nb + g0 + gs]
                decs.append(np.asarray(flat[o + 4 + nb + g0 + gs:o + 4 + nb + g0 + gs + gd],
                                       dtype=np.int64).reshape(nb, gs) if gd else np.zeros((nb, gs), np.int64))
                o += 4 + nb + g0 + gs + gd
                if not quiet_f:
                    fs, fr, c = rg.fold.send_counts.size, rg.fold.recv_counts.size, carry[i]
                    c.u_send, c.c_send = (np.rint(flat[o + k * fs:o + (k + 1) * fs]).astype(np.int64) for k in (0, 1))
                    o += 2 * fs
                    c.u_recv, c.c_recv = (np.rint(flat[o + k * fr:o + (k + 1) * fr]).astype(np.int64) for k in (0, 1))
                    o += 2 * fr
                cnt, sc, ce, e = f[0], f[1], f[2], f[3]
                nf_own[i], own_e[i] = int(cnt), int(ce)
                bounds[i] = tuple(int(x) for x in f[4:4 + nb])
                counts0[i] = np.asarray(f[4 + nb:4 + nb + g0], dtype=np.int64)
                counts_s[i] = np.asarray(f[4 + nb + g0:], dtype=np.int64)
                vec.append(np.array([cnt, sc, e], dtype=np.float64))
            meas = int(comm.sent_bytes.sum()) - sent0
            sched.advance(*self._record(records, vec, st, meas, depth, cur, nf, tl, tail=self._dec_tail(decs)))
            dec_in = self._dec_in(self._tail)
        if hook is not None:
            hook(sched.depth, "done")
        t_search = time.perf_counter() - t0
        ids = [rg.ids for rg in rgs]
        par = [X.host(torch.where(S[i]["parent"] == KT_BIG, -1, S[i]["parent"])) for i in loc]
        pg = gather_global(comm, ids, par, self.n, -1.0).astype(np.int64)
        lg = gather_global(comm, ids, [X.host(S[i]["level"]) for i in loc], self.n, -1.0).astype(np.int64)
        return BfsResult(root, pg, lg, records, t_search)

    def search(self, root: int) -> BfsResult:
        """One BFS from ``root`` (global id); every local rank takes part."""
        root = self.check_root(root)
        if self.kernels == "torch" and not self.two_d and self.balancer is None:
            return self._search_torch(root)
        if self.kernels == "torch" and self.two_d:
            return self._search_torch_2d(root)
        comm, rgs, X = self.comm, self.rgs, self.X
        loc = range(len(rgs))
        visited = [X.zeros(rg.nl, "bool") for rg in rgs]
        parent = [X.full(rg.nl, -1, "int64") for rg in rgs]
        level = [X.full(rg.nl, -1, "int64") for rg in rgs]
        front = [X.zeros(rg.nl, "bool") for rg in rgs]
        for i in loc:
            k = self._own(i, root)
            if k >= 0:
                visited[i][k] = front[i][k] = True
                parent[i][k], level[i][k] = root, 0
        comm.barrier()
        t0 = time.perf_counter()
        deg_root = [float(self.outdeg_x[i][front[i]].sum()) for i in loc]
        sched = _Schedule(self, float(world_sum(comm, [np.array([d]) for d in deg_root])[0]))
        records: list[Level] = []
        known = [X.zeros(rg.nrows, "bool") for rg in rgs] if self.two_d else None  # 2D block rows
        synced = [X.zeros(rg.nl, "bool") for rg in rgs] if self.two_d else None  # own bits peers have
        fp = self._fold_start() if self.two_d else None  # 2D: what the next fold carries
        while sched.nf > 0:
            tl = time.perf_counter()
            cur, depth, nf = sched.next(), sched.depth, sched.nf
            if self.level_hook is not None:
                self.level_hook(depth, cur)
            sent0 = int(comm.sent_bytes.sum())
            ghost, _, st = exchange_chain(comm, [rg.steps for rg in rgs], front, None, what=f"BFS level {depth}")
            vec = []
            found, steal = None, None
            if self.two_d:  # expand along the grid column (above), (sync,) local level, fold along the grid row
                if cur == "bottom-up":
                    rows, st3 = self._sync_2d(visited, synced, depth, fp)
                    for i in loc:
                        known[i][rows[i]] = True
                    st = st.add(st3)
                found, st2 = self._level_2d(cur, front, ghost, visited, known, depth, fp)
                st = st.add(st2)
            elif self.balancer is not None and cur == "top-down":
                from .steal import bfs_top_down
                found, steal = bfs_top_down(self.balancer, rgs, front, ghost, visited, depth,
                                            records[-1].time_s if records else None, kernels=X)
            for i in loc:
                if found is not None:
                    new, edges, cand = found[i]
                else:
                    new, edges, cand = self._expand(i, cur, front[i], ghost[i], visited[i])
                visited[i][new] = True
                parent[i][new] = cand[new]
                if fp is not None:  # 2D: the peers' candidates of the last level's new rows came with this fold
                    f = fp[i]
                    late = f["newprev"]
                    parent[i][late] = np.minimum(parent[i][late], f["late"][late])
                    f["newprev"] = X.zeros(rgs[i].nl, "bool")
                    f["newprev"][new] = True
                level[i][new] = depth + 1
                front[i][:] = False
                front[i][new] = True
                vec.append(np.array([len(new), float(self.outdeg_x[i][new].sum()), edges], dtype=np.float64))
            meas = int(comm.sent_bytes.sum()) - sent0  # this process's ranks; counted once (i = 0)
            meas -= 0 if steal is None else steal.measured_local  # steal bytes are reported apart
            sched.advance(*self._record(records, vec, st, meas, depth, cur, nf, tl, steal))
        if self.level_hook is not None:
            self.level_hook(sched.depth, "done")
        t_search = time.perf_counter() - t0
        ids = [rg.ids for rg in rgs]
        pg = gather_global(comm, ids, [X.host(a) for a in parent], self.n, -1.0).astype(np.int64)
        lg = gather_global(comm, ids, [X.host(a) for a in level], self.n, -1.0).astype(np.int64)
        return BfsResult(root, pg, lg, records, t_search)


def _segment_counts(flags: np.ndarray, off: np.ndarray) -> np.ndarray:
    """int64 per segment ``[off[j], off[j + 1])``: the set entries of ``flags`` (host)."""
    csum = np.concatenate([[0], np.cumsum(np.asarray(flags, dtype=bool), dtype=np.int64)])
    return csum[off[1:]] - csum[off[:-1]]


def _take_t(a, idx):
    """``a[idx]`` by ``index_select`` (1-D)."""
    return a.index_select(0, idx)


def bfs_local(plan: Plan, root: int, **kw) -> BfsResult:
    """One BFS with every rank of ``plan`` in this process (LocalComm)."""
    from .comm import LocalComm
    comm = LocalComm(plan.manifest["ranks"], plan.groups())
    return BfsEngine(plan.manifest, plan.ranks, comm, **kw).search(root)
