"""What label propagation, matching and pointer-jumping connectivity read from
a plan: the symmetrized neighbourhood of every own vertex, the exchange of
per-vertex values to ghost holders, and messages to the owner of any vertex.

**Neighbours** (:class:`SymGraph`): the rows of the plan's program of ``Aᵀ``
(in-edges, see :mod:`.traversal`) and, for a directed graph, of the
``forward`` program (out-edges) — their union, each neighbour once (by global
id), self loops dropped. The weight of neighbour u of v is the matrix value
(the larger of ``A[u, v]`` and ``A[v, u]`` when both are stored; 1 on an
unweighted plan). The columns index one joined vector: each program's own
rows then what its expand chain appends (:attr:`SymGraph.offs`).

**Neighbour exchange** (:func:`exchange_values`): the changed values go owner
→ ghost holders along each program's chain (1D: one step; routed: the steps
through the domain monitors) with :func:`~.traversal.exchange_chain` — sparse
or dense per (rank, peer) pair, the bytes predicted from the counts and
measured by the comm's counters.

**Owner messages** (:func:`to_owners`, :func:`reply`): pointer jumping reads
and writes ``f[t]`` for arbitrary vertices t, so it sends (t, value) rows of
int64 to ``owner[t]`` over the ``world`` group (all ranks; added to the plan's
groups for layouts without one) and gets replies back along the same pairs.
Rows for the sender's own vertices never leave it. A message of k int64
columns costs 8·k bytes per row; the prediction is the sum over pairs of the
rows × 8·k, known before the payload moves.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import PlanError
from ..program.core import Group
from .traversal import RankGraph, exchange_chain, gather_global, rank_graph, traversal_program

WORLD = "world"


@dataclass
class SymGraph:
    """One rank's symmetrized neighbourhoods (host arrays; :meth:`on` copies them for a kernel set).

    ids : own global ids (state positions 0..nl-1).
    rgs : the RankGraph of each program read (Aᵀ; and A for a directed graph).
    offs : start of each program's columns in the joined column vector.
    ext_ids : global id of every joined column.
    rows, cols, gid, w : the edges sorted by (row, global id of the neighbour):
        own position, joined column, the neighbour's global id, weight (float64).
    """

    ids: np.ndarray
    rgs: list[RankGraph]
    offs: list[int]
    ext_ids: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    gid: np.ndarray
    w: np.ndarray
    perms: list = None  # per program: positions in ``ids`` of its own rows (None: the same order)

    def own_order(self, k: int, X):
        """Program k's own-row order as the kernel set's int64 array (None: the order of ``ids``)."""
        if not self.perms or self.perms[k] is None:
            return None
        cache = self.__dict__.setdefault("_perm_x", {})
        key = (k, X.name, str(X.device))
        if key not in cache:
            cache[key] = X.asarray(self.perms[k], "int64")
        return cache[key]

    @property
    def nl(self) -> int:
        return int(self.ids.size)

    @property
    def next_(self) -> int:
        return int(self.ext_ids.size)

    def full_value_bytes(self, width: int) -> int:
        """Payload bytes of one exchange of every value (no positions) along all programs' chains."""
        return int(sum(int(sg.send_counts.sum()) for rg in self.rgs for sg in rg.steps)) * int(width)


def sym_graphs(manifest: dict, shards) -> tuple[list[SymGraph], list[str]]:
    """The :class:`SymGraph` of every local rank and the group families of their exchange chains."""
    prog = traversal_program(manifest)
    progs = [prog] if prog == "forward" else [prog, "forward"]
    out = []
    for rp in shards:
        rgs = [rank_graph(manifest, rp, p) for p in progs]
        ids = np.array(rgs[0].ids, dtype=np.int64)  # a writable copy (torch refuses read-only views)
        perms = [None]
        for rg in rgs[1:]:  # the programs may hold the same rows in another order (routed plans)
            o = np.argsort(ids, kind="stable")
            k = np.minimum(np.searchsorted(ids, rg.ids, sorter=o), max(ids.size - 1, 0))
            pos = o[k] if ids.size else k
            if rg.ids.size != ids.size or not np.array_equal(ids[pos], rg.ids):
                raise PlanError("the forward and backward programs hold different rows")
            perms.append(None if np.array_equal(rg.ids, ids) else pos)
        offs = np.concatenate([[0], np.cumsum([rg.next_ for rg in rgs])]).astype(np.int64)
        ext = np.concatenate([rg.ext_ids for rg in rgs]) if rgs else np.zeros(0, np.int64)
        rr, cc, ww = [], [], []
        for k, rg in enumerate(rgs):
            rk = np.repeat(np.arange(rg.nrows, dtype=np.int64), np.diff(rg.indptr))
            rr.append(rk if perms[k] is None else perms[k][rk])
            cc.append(rg.indices + offs[k])
            ww.append(np.ones(rg.indices.size) if rg.data is None else np.asarray(rg.data, dtype=np.float64))
        r, c, g, w = union_pairs(np.concatenate(rr), np.concatenate(cc), np.concatenate(ww), ext, ids, rp.rank)
        out.append(SymGraph(ids, rgs, [int(x) for x in offs[:-1]], ext, r, c, g, w, perms))
    fams = list(dict.fromkeys(sg.family for s in out[:1] for rg in s.rgs for sg in rg.steps))
    return out, fams


def union_pairs(r: np.ndarray, c: np.ndarray, w: np.ndarray, ext: np.ndarray, row_ids: np.ndarray, rank: int):
    """The (row, neighbour) pairs of a rank's blocks, each once: entries ``r`` (rows), ``c`` (columns of
    the joined blocks, global ids ``ext[c]``), weights ``w``; self loops (``ext[c] == row_ids[r]``)
    dropped, a pair met in several blocks kept with its largest weight. Returns (r, c, g = ext[c], w)
    sorted by row, then neighbour id. A non-finite weight is one PlanError naming the rank."""
    if w.size and not np.isfinite(w).all():
        raise PlanError(f"rank {rank}: the plan holds a non-finite edge weight")
    g = ext[c]
    keep = g != row_ids[r]  # self loops
    r, c, w, g = r[keep], c[keep], w[keep], g[keep]
    o = np.lexsort((-w, g, r))  # by row, neighbour id, the larger weight first
    r, c, w, g = r[o], c[o], w[o], g[o]
    first = np.concatenate([[True], (r[1:] != r[:-1]) | (g[1:] != g[:-1])]) if r.size else np.zeros(0, bool)
    return r[first], c[first], g[first], w[first]


def exchange_values(comm, sgs: list[SymGraph], changed: list, vals: list, ext: list, fams: list[str],
                    what: str, X) -> np.ndarray:
    """Send the ``changed`` entries of ``vals`` (own values, one array per local
    rank, numpy or device tensors; ``X`` the kernel set) to their ghost holders
    and write them into the joined column vectors ``ext`` (own columns: every own value). Returns
    float64 [bytes, bytes_sparse, bytes_dense, bytes per family…, messages per
    family…] summed over this process's ranks."""
    out = np.zeros(3 + 2 * len(fams))
    for k in range(len(sgs[0].rgs)):
        perm = [s.own_order(k, X) for s in sgs]
        ck = [c if q is None else c[q] for c, q in zip(changed, perm)]
        vk = [a if q is None else a[q] for a, q in zip(vals, perm)]
        got, v, st = exchange_chain(comm, [s.rgs[k].steps for s in sgs], ck, vk, what=what)
        out += np.concatenate([[st.bytes, st.sparse_bytes, st.dense_bytes], st.family_vector(fams)])
        for i, s in enumerate(sgs):
            o, nl, nk = s.offs[k], s.nl, s.rgs[k].next_
            e = ext[i]
            e[o:o + nl] = vk[i]
            seg = e[o + nl:o + nk]
            seg[got[i]] = v[i][got[i]]
    return out


# ----------------------------------------------------------------------------- owner messages
def with_world(groups: list[Group], p: int) -> list[Group]:
    """``groups`` plus a ``world`` group of all p ranks when it has none."""
    if any(g.family == WORLD for g in groups):
        return list(groups)
    return list(groups) + [Group(WORLD, tuple(range(p)))]


def owner_map(comm, ids: list[np.ndarray], n: int) -> np.ndarray:
    """int64[n]: the rank that holds each vertex (one length-n all-reduce at set-up)."""
    own = gather_global(comm, ids, [np.full(i.size, float(r)) for i, r in zip(ids, comm.local)], n, -1.0)
    if n and own.min() < 0:
        raise PlanError(f"vertex {int(np.argmin(own))} is held by no rank")
    return own.astype(np.int64)


@dataclass
class Route:
    """How :func:`to_owners` sorted one rank's rows (to send replies back)."""

    order: object
    send: np.ndarray   # rows sent to each group peer (0 to itself)
    recv: np.ndarray   # rows received from each group peer
    nself: int
    me: int            # the rank's position in its group
    held: object = None  # the rows a rank sends itself (until to_owners returns)
    family: str = WORLD


def _np(a) -> np.ndarray:
    return a.detach().cpu().numpy() if hasattr(a, "detach") else np.asarray(a)


def _for_comm(comm, a):
    """``a`` as the comm exchanges it: numpy for a numpy LocalComm, a tensor otherwise."""
    wants = hasattr(comm, "torch") or getattr(comm, "device", None) is not None
    if wants and not hasattr(a, "detach"):
        import torch
        t = torch.from_numpy(np.ascontiguousarray(a))
        dev = getattr(comm, "device", None)
        return t.to(dev) if dev is not None and str(dev) != "cpu" else t
    if not wants and hasattr(a, "detach"):
        return a.detach().cpu().numpy()
    return a


def _like(a, ref):
    """``a`` (numpy or tensor) as the kind and device of ``ref``."""
    if hasattr(ref, "detach"):
        import torch
        return (a if hasattr(a, "detach") else torch.from_numpy(np.ascontiguousarray(a))).to(ref.device)
    return _np(a)


def _cat(parts, ref):
    if hasattr(ref, "detach"):
        import torch
        return torch.cat([_like(p, ref) for p in parts])
    return np.concatenate([_np(p) for p in parts])


def to_owners(comm, owner, rows: list, what: str) -> tuple[list, list[Route], tuple[int, int]]:
    """Send every local rank's int64 rows (``rows[i]``: shape (m, k), column 0
    a global vertex id) to the rank that owns that vertex (``owner``: the
    :func:`owner_map`, as the kernel set's array) over the ``world`` group.
    Returns (per local rank the rows it owns: its own first, then each peer's in
    rank order; the routes for :func:`reply`; (payload bytes, nonempty messages)
    sent by this process's ranks)."""
    return send_rows(comm, WORLD, [owner[a[:, 0]] for a in rows], rows, what)


def send_rows(comm, family: str, dests: list, rows: list, what: str) -> tuple[list, list[Route], tuple[int, int]]:
    """Send local rank i's int64 rows ``rows[i]`` (shape (m, k)) to the group-ranks
    ``dests[i]`` (int64 per row) of its group of ``family``; rows for the rank
    itself stay. Returns as :func:`to_owners`."""
    routes, sends, scs = [], [], []
    for i, r in enumerate(comm.local):
        g = comm.member(family, r)
        if g is None:
            raise PlanError(f"rank {r} is in no group of family {family!r}")
        pg, me = len(g.ranks), g.ranks.index(r)
        a, dest = rows[i], dests[i]
        if hasattr(a, "detach"):
            import torch
            o = torch.argsort(dest, stable=True)
            cnt = torch.bincount(dest, minlength=pg).cpu().numpy().astype(np.int64)
        else:
            o = np.argsort(dest, kind="stable")
            cnt = np.bincount(dest, minlength=pg).astype(np.int64)
        srt = a[o]
        lo, hi = int(cnt[:me].sum()), int(cnt[:me + 1].sum())
        sc = cnt.copy()
        sc[me] = 0
        sends.append(_cat([srt[:lo], srt[hi:]], a))
        scs.append(sc)
        routes.append(Route(o, sc, np.zeros(pg, np.int64), int(cnt[me]), me, srt[lo:hi], family))
    rcs = comm.exchange_counts(family, scs)
    k = int(rows[0].shape[1])
    got, nbytes, nmsg = [], 0, 0
    outs = []
    for i, a in enumerate(rows):
        routes[i].recv = np.asarray(rcs[i], dtype=np.int64)
        nbytes += int(scs[i].sum()) * 8 * k
        nmsg += int(np.count_nonzero(scs[i]))
        outs.append(_for_comm(comm, np.empty((int(routes[i].recv.sum()), k), dtype=np.int64)))
    comm.alltoallv(family, [_for_comm(comm, s) for s in sends], scs, [rt.recv for rt in routes], outs, what=what)
    for i, a in enumerate(rows):
        got.append(_cat([routes[i].held, outs[i]], a))
        routes[i].held = None
    return got, routes, (nbytes, nmsg)


def reply(comm, routes: list[Route], values: list, what: str) -> tuple[list, int]:
    """Send one int64 value per received row (``values[i]`` aligned with what
    :func:`to_owners` returned to local rank i) back to the row's sender;
    returns (per local rank the values in the order of its rows, (payload bytes, nonempty messages) sent)."""
    sends, outs, nbytes, nmsg = [], [], 0, 0
    for rt, v in zip(routes, values):
        sends.append(_for_comm(comm, v[rt.nself:]))
        outs.append(_for_comm(comm, np.empty(int(rt.send.sum()), dtype=np.int64)))
        nbytes += int(rt.recv.sum()) * 8
        nmsg += int(np.count_nonzero(rt.recv))
    comm.alltoallv(routes[0].family, sends, [rt.recv for rt in routes], [rt.send for rt in routes], outs, what=what)
    res = []
    for rt, v, o in zip(routes, values, outs):
        before = int(rt.send[:rt.me].sum())
        full = _cat([o[:before], v[:rt.nself], o[before:]], v)
        if hasattr(v, "detach"):
            import torch
            out = torch.empty_like(full)
        else:
            out = np.empty_like(full)
        out[rt.order] = full
        res.append(out)
    return res, (nbytes, nmsg)
