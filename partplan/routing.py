"""Routed (hierarchy-aware) 1D SpMM plans: rows of H cross a domain boundary once per target domain.

Ranks are grouped into domains of ``D`` contiguous ranks (``domain = rank // D``,
the innermost level of a :class:`~partplan.topology.Topology`). In plain 1D
(``flat``) row ``H[j]`` goes from its owner ``q = part[j]`` to every rank that
reads it — three ranks of one remote domain get three copies over the network.
A routed plan sends each (row, destination domain) pair across once:

* ``domain`` route (TuCOMM-style aggregation): the **monitor** of (source
  domain d, target domain e) is rank ``d·D + (d + e) mod D`` — target domains
  are spread over the ranks of a domain, so no rank carries all inter-domain
  traffic, and the two monitors of a domain pair share the local index
  ``(d + e) mod D``. Steps: (A) owners send the rows bound for remote domains
  to their monitor, once per (row, monitor), inside the domain (family
  ``dom``); (B) monitor ``m(d, e)`` sends ``m(e, d)`` one aggregated message
  with every row of d needed in e, once (family ``cross``: groups of equal
  local index, one rank per domain); (C) the receiving monitor hands each row
  to the ranks of its domain that read it, and owners send rows to readers in
  their own domain directly (family ``dom``); then the local SpMM.
  When there are fewer remote domains than ranks per domain (``p/D − 1 < D``)
  a domain pair's rows are split over ``L = D // (p/D − 1)`` **lanes** (row j
  uses local index ``(d + e + j mod L) mod D``), so every rank still carries a
  share of the inter-domain rows (2 domains of 32 would otherwise route
  everything through one rank); a domain pair then sends up to L messages.
  :func:`lanes` gives L (1 whenever ``p/D − 1 >= D``).
* ``source`` route (AML-style): each rank aggregates per target domain with
  no intra-domain gather: rank q sends every row it owns that domain e reads,
  once, to ``e·D + q mod D`` (family ``cross``); step (C) as above.

Crossing the domain boundary: ``domain`` = one message per communicating
(domain, domain) pair, ``source`` = one per (rank, domain) pair; both carry
the distinct (row, destination domain) pairs. The program uses only the
existing step ops (copy / gather / alltoallv / spmm), so the one interpreter,
the validator and both comms run it unchanged. :func:`route_stages` is the
volume model (int64[p, p] rows per exchange step) the builder cross-checks the
program against, exactly.

Examples
--------
>>> import numpy as np
>>> from partplan import Graph
>>> g = Graph.from_edges([2, 3], [0, 0], n=4)   # rows 2 and 3 read column 0
>>> lay = Routed("domain", 4, 2)                 # 4 ranks = 2 domains × 2, vertex v on rank v
>>> st = route_stages(g, np.array([0, 1, 2, 3]), lay)
>>> {k: int(v.sum()) for k, v in st.items()}     # H[0]: 0 → monitor 1 → monitor 3 → rank 2
{'A': 1, 'B': 1, 'C': 1}
>>> [int(x) for x in np.argwhere(st["B"])[0]]    # the one crossing message (flat sends two)
[1, 3]
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .errors import PartitionError
from .layouts import Layout
from .metrics.cost import DEFAULT_ALPHA_S, DEFAULT_BETA_S_PER_BYTE, alpha_beta_time, dtype_bytes
from .metrics.stats import imbalance
from .metrics.volume1d import _sorted_distinct, needed_pairs
from .plan.exchange import positions, row_order, unit_bounds
from .plan.program import Group, Program

ROUTES = ("flat", "source", "domain")


# ----------------------------------------------------------------------------- the messages
@dataclass
class Messages:
    """One exchange step: row ``j[i]`` goes from rank ``src[i]`` to ``dst[i]`` in family ``family``."""

    family: str
    src: np.ndarray
    dst: np.ndarray
    j: np.ndarray

    def matrix(self, p: int) -> np.ndarray:
        return np.bincount(self.src * p + self.dst, minlength=p * p).reshape(p, p).astype(np.int64)


def _distinct(keys: np.ndarray, bound: int) -> np.ndarray:
    """Sorted distinct keys in [0, bound) (sort + neighbour compare: numpy's np.unique is ~10× slower)."""
    return _sorted_distinct(keys, bound)


def lanes(p: int, D: int) -> int:
    """Monitor pairs per (source, target) domain pair of the domain route (module doc)."""
    remote = p // D - 1
    return max(1, D // remote) if remote > 0 else 1


def route_messages(graph, part: np.ndarray, route: str, p: int, D: int) -> dict[str, Messages]:
    """The messages of each step ("A" domain route only, "B", "C") of ``route``
    for the 1D partition ``part`` (rank of each row) on ``p`` ranks in domains of ``D``."""
    nd = p // D
    n = graph.n
    j, r = needed_pairs(graph.indptr, graph.indices, part, p, n)
    q = part[j]
    off = q != r
    j, q, r = j[off], q[off], r[off]
    dq, dr = q // D, r // D
    intra = dq == dr
    ji, ri, qi = j[~intra], r[~intra], q[~intra]
    dqi, dri = dq[~intra], dr[~intra]
    # distinct (row, destination domain) pairs
    ke = _distinct(ji * nd + dri, n * nd)
    ju, eu = ke // nd, ke % nd
    qu = part[ju]
    du = qu // D
    out = {}
    if route == "domain":
        L = lanes(p, D)
        lu = (du + eu + ju % L) % D
        s = du * D + lu                       # source monitor m(d, e)
        t = eu * D + lu                       # target monitor m(e, d)
        ka = _distinct(ju * p + s, n * p)          # each row once per monitor (a monitor serves several e)
        ja, sa = ka // p, ka % p
        qa = part[ja]
        keep = qa != sa
        out["A"] = Messages("dom", qa[keep], sa[keep], ja[keep])
        out["B"] = Messages("cross", s, t, ju)
        tr = dri * D + (dqi + dri + ji % L) % D   # receiving monitor of each inter (row, reader)
    elif route == "source":
        out["B"] = Messages("cross", qu, eu * D + qu % D, ju)
        tr = dri * D + qi % D
    else:
        raise PartitionError(f"unknown route {route!r}; use one of {', '.join(ROUTES)}")
    fwd = tr != ri
    cs = np.concatenate([tr[fwd], q[intra]])
    cd = np.concatenate([ri[fwd], r[intra]])
    cj = np.concatenate([ji[fwd], j[intra]])
    out["C"] = Messages("dom", cs, cd, cj)
    return out


def route_stages(graph, part, layout: "Routed") -> dict[str, np.ndarray]:
    """int64[p, p] rows sent q → r by each exchange step of ``layout``'s route (the volume model)."""
    msgs = route_messages(graph, np.asarray(part, dtype=np.int64), layout.route, layout.ranks, layout.D)
    out = {"A": np.zeros((layout.ranks,) * 2, np.int64)} if layout.route == "domain" else {}
    out.update({k: m.matrix(layout.ranks) for k, m in msgs.items()})
    return out


# ----------------------------------------------------------------------------- stats
@dataclass
class RoutedStats:
    """Exact volumes of a routed plan: ``stages`` (step name → int64[p, p] rows),
    ``volume`` = their sum (what the builder cross-checks the program against)."""

    layout: str
    p: int
    D: int
    route: str
    stages: dict
    part_sizes: np.ndarray
    compute_load: np.ndarray
    f: int = 128
    dtype: str = "float32"
    alpha: float = DEFAULT_ALPHA_S
    beta: float = DEFAULT_BETA_S_PER_BYTE
    extra: dict = field(default_factory=dict)

    @property
    def volume(self) -> np.ndarray:
        v = np.zeros((self.p, self.p), dtype=np.int64)
        for m in self.stages.values():
            v += m
        return v

    @property
    def send(self) -> np.ndarray:
        """int64[p]: rows each rank sends over all steps."""
        return self.volume.sum(axis=1)

    @property
    def recv(self) -> np.ndarray:
        return self.volume.sum(axis=0)

    @property
    def shape(self) -> tuple:
        """(domains, ranks per domain)."""
        return (self.p // self.D, self.D)

    @property
    def stage_list(self) -> list[np.ndarray]:
        return list(self.stages.values())

    def summary(self) -> dict:
        rb = self.f * dtype_bytes(self.dtype)
        vol = self.volume
        send, recv = vol.sum(axis=1), vol.sum(axis=0)
        t = 0.0
        for m in self.stages.values():
            t += float(alpha_beta_time(np.count_nonzero(m, axis=1), np.count_nonzero(m, axis=0),
                                       m.sum(axis=1) * rb, m.sum(axis=0) * rb, self.alpha, self.beta).max())
        return {"layout": self.layout, "route": self.route, "domain_size": self.D, "p": self.p,
                "total_volume": int(vol.sum()), "max_send": int(send.max()), "max_recv": int(recv.max()),
                "send_imbalance": imbalance(send), "recv_imbalance": imbalance(recv),
                "messages": int(sum(np.count_nonzero(m) for m in self.stages.values())),
                "max_send_messages": int(sum(np.count_nonzero(m, axis=1) for m in self.stages.values()).max()),
                "max_recv_messages": int(sum(np.count_nonzero(m, axis=0) for m in self.stages.values()).max()),
                **{f"step_{k}_rows": int(m.sum()) for k, m in self.stages.items()},
                "compute_imbalance": imbalance(self.compute_load),
                "max_compute_load": int(self.compute_load.max()),
                "total_bytes": int(vol.sum()) * rb, "alpha_s": self.alpha, "beta_s_per_byte": self.beta,
                "time_estimate_s": t}

    def to_dict(self) -> dict:
        return {**self.summary(), "send": self.send.tolist(), "recv": self.recv.tolist()}


# ----------------------------------------------------------------------------- the layout
class Routed(Layout):
    """1D row blocks executed through a routed exchange (module doc): ``route``
    "domain" or "source", domains of ``D`` contiguous ranks. Spec ``routed:ROUTE:D``."""

    name = "routed"

    def __init__(self, route: str, ranks: int, D: int):
        super().__init__(ranks)
        if route not in ("domain", "source"):
            raise PartitionError(f"layout routed:{route}:{D}: route must be domain or source")
        if int(D) < 1 or self.ranks % int(D):
            raise PartitionError(f"layout routed:{route}:{D}: {self.ranks} ranks are not a multiple of the "
                                 f"domain size {D}")
        self.route, self.D = route, int(D)

    @classmethod
    def _parse(cls, s, ranks, row_blocks):
        m = re.fullmatch(r"routed:(domain|source):(\d+)", s)
        if not m:
            if s.startswith("routed"):
                raise PartitionError(f"layout {s!r}: expected routed:domain:D or routed:source:D "
                                     f"(D = ranks per domain)")
            return None
        n = ranks if ranks is not None else row_blocks
        if n is None:
            raise PartitionError(f"layout {s!r} needs the number of ranks")
        return cls(m.group(1), n, int(m.group(2)))

    @property
    def domains(self) -> int:
        return self.ranks // self.D

    @property
    def params(self) -> dict:
        return {"route": self.route, "domain_size": self.D}

    @property
    def spec(self) -> str:
        return f"routed:{self.route}:{self.D}"

    def groups(self) -> list[Group]:
        D, nd = self.D, self.domains
        dom = [Group(f"dom.{d}", tuple(range(d * D, d * D + D))) for d in range(nd)]
        cross = [Group(f"cross.{l}", tuple(d * D + l for d in range(nd))) for l in range(D)]
        return dom + cross

    def _grank(self, family: str):
        D = self.D
        return (lambda r: r % D, D) if family == "dom" else (lambda r: r // D, self.domains)

    def volumes(self, graph, part, *, owner=None, f=128, dtype="float32", alpha=DEFAULT_ALPHA_S,
                beta=DEFAULT_BETA_S_PER_BYTE, **cost):
        self._conformal_only(owner)
        part = np.asarray(part, dtype=np.int64)
        p = self.ranks
        return RoutedStats(self.spec, p, self.D, self.route, route_stages(graph, part, self),
                           np.bincount(part, minlength=p).astype(np.int64),
                           np.bincount(part, weights=graph.row_nnz, minlength=p).astype(np.int64),
                           f, str(dtype), alpha, beta)

    def program(self, graph, part, *, owner=None, prefix="fwd"):
        self._conformal_only(owner)
        p = self.ranks
        part = np.asarray(part, dtype=np.int64)
        _, lists = positions(part, p)
        msgs = route_messages(graph, part, self.route, p, self.D)
        prog = Program.empty(prefix, p)
        prog.set_io(lists, lists)
        scratch = np.zeros(graph.n, dtype=np.int64)
        cat = lambda a, b: [np.concatenate([x, y]) for x, y in zip(a, b)]  # noqa: E731
        if self.route == "domain":
            prog.add("copy", src="in", dst="pa", dst_row=0)
            got = self._emit(prog, msgs["A"], "in", lists, "sa", "pa", "in", scratch)
            pa = cat(lists, got)
            for r in range(p):
                prog.size(r, "pa", len(pa[r]))
            src_b, src_ids = "pa", pa
        else:
            src_b, src_ids = "in", lists
        prog.add("copy", src="in", dst="pb", dst_row=0)
        got = self._emit(prog, msgs["B"], src_b, src_ids, "sb", "pb", "in", scratch)
        pb = cat(lists, got)
        prog.add("copy", src="pb", dst="ext", dst_row=0)
        got = self._emit(prog, msgs["C"], "pb", pb, "sc", "ext", "pb", scratch)
        ext = cat(pb, got)
        for r in range(p):
            prog.size(r, "pb", len(pb[r]))
            prog.size(r, "ext", len(ext[r]))
        self._spmm(prog, graph, lists, ext, scratch)
        return prog

    # ---- program pieces
    def _emit(self, prog: Program, m: Messages, src_name: str, src_ids: list, send_name: str, dst_name: str,
              dst_row, scratch: np.ndarray) -> list[np.ndarray]:
        """gather + alltoallv of messages ``m``; returns the ids each rank receives, in arrival order
        (by source group-rank — ascending rank inside a group — then ascending id)."""
        p = prog.p
        grank, G = self._grank(m.family)
        o = np.lexsort((m.j, m.dst, m.src))
        s1, d1, j1 = m.src[o], m.dst[o], m.j[o]
        sb = unit_bounds(s1, p)
        o = np.lexsort((m.j, m.src, m.dst))
        s2, d2, j2 = m.src[o], m.dst[o], m.j[o]
        db = unit_bounds(d2, p)
        gath, a2a, recv = [], [], []
        for r in range(p):
            ids = src_ids[r]
            scratch[ids] = np.arange(ids.size, dtype=np.int64)
            seg = slice(sb[r], sb[r + 1])
            gath.append({"idx": scratch[j1[seg]]})
            rseg = slice(db[r], db[r + 1])
            rid = j2[rseg]
            recv.append(rid)
            a2a.append({"send_counts": np.bincount(grank(d1[seg]), minlength=G).astype(np.int64),
                        "recv_counts": np.bincount(grank(s2[rseg]), minlength=G).astype(np.int64),
                        "recv_ids": rid})
            prog.size(r, send_name, int(sb[r + 1] - sb[r]))
        if m.src.size:
            prog.add("gather", gath, src=src_name, dst=send_name)
            prog.add("alltoallv", a2a, group=m.family, src=send_name, dst=dst_name, dst_row=dst_row)
        return recv

    def _spmm(self, prog: Program, graph, lists, ext, scratch) -> None:
        perm, bounds = row_order(graph.indptr, lists)
        cols = graph.indices if perm is None else graph.indices[perm]
        data = None if graph.data is None else (graph.data if perm is None else graph.data[perm])
        arrs = []
        for r in range(prog.p):
            scratch[ext[r]] = np.arange(ext[r].size, dtype=np.int64)
            c = cols[bounds[r]:bounds[r + 1]]
            indptr = np.zeros(lists[r].size + 1, dtype=np.int64)
            np.cumsum(graph.row_nnz[lists[r]], out=indptr[1:])
            d = {"indptr": indptr, "indices": scratch[c], "row_ids": lists[r]}
            if data is not None:
                d["data"] = data[bounds[r]:bounds[r + 1]]
            arrs.append(d)
        prog.add("spmm", arrs, src="ext", dst="out")


def routed_layout(route: str, ranks: int, topology=None, D: int | None = None) -> Layout:
    """The layout of ``route`` on ``ranks``: ``flat`` → 1d; ``domain`` /
    ``source`` → :class:`Routed` over the innermost level of ``topology``
    (or domains of ``D`` ranks)."""
    from .layouts import OneD
    if route == "flat":
        return OneD(ranks)
    if route not in ROUTES:
        raise PartitionError(f"unknown route {route!r}; use one of {', '.join(ROUTES)}")
    if D is None:
        if topology is None or not topology.levels:
            raise PartitionError(f"route {route} needs a topology with domain levels (e.g. tree:4x16)")
        D = topology.levels[0].size
    return Routed(route, ranks, D)


__all__ = ["Routed", "RoutedStats", "Messages", "ROUTES", "lanes", "route_messages", "route_stages", "routed_layout"]
