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
(domain, domain) pair (times lanes), ``source`` = one per (rank, domain)
pair; both carry the distinct (row, destination domain) pairs.

**Nested levels** (``sizes`` = D0 < D1 < ...): the route at level i is the
one above with domains of ``D_i`` inside each level-(i + 1) domain (the
machine above the top), and its steps A and C — which stay inside a level-i
domain — are routed again at level i − 1 (level −1: direct, family ``dom``).
Step names carry the path: "A1.A", "A1.B", "A1.C", "B1", "C1.A", ...; the
crossing family of level i is :func:`cross_family`.

The program is one ``copy``/``gather``/``alltoallv`` triple per step over an
accumulating buffer chain (``h{k}`` = ``h{k-1}`` + the rows step k brings;
any later step can forward a row a rank once held), then ``spmm``. It uses only the
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

from ..errors import PartitionError
from ..metrics.cost import (
    DEFAULT_ALPHA_S,
    DEFAULT_BETA_S_PER_BYTE,
    alpha_beta_time,
    dtype_bytes,
    dtype_name,
)
from ..metrics.stats import PerRankVolume, imbalance
from ..metrics.volume1d import needed_pairs
from ..program.core import Group, Program
from ..program.exchange import positions, row_order, unit_bounds
from .base import Layout

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


def lanes(p: int, D: int) -> int:
    """Monitor pairs per (source, target) domain pair of the domain route (module doc)."""
    remote = p // D - 1
    return max(1, D // remote) if remote > 0 else 1


def cross_family(i: int) -> str:
    """Group family of the crossing step at routing level i ("cross", "cross1", ...)."""
    return "cross" if i == 0 else f"cross{i}"


def _first(keys: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct keys in [0, bound), index of one occurrence of each); keys are
    sorted as uint32 when they fit (about 2× faster than int64)."""
    order = np.argsort(keys.astype(np.uint32) if bound <= 1 << 32 else keys, kind="stable")
    sk = keys[order]
    flag = np.ones(sk.size, dtype=bool)
    np.not_equal(sk[1:], sk[:-1], out=flag[1:])
    return sk[flag], order[flag]


def _route(src, dst, j, sizes, i: int, route: str, n: int, p: int) -> list[tuple[str, Messages]]:
    """Deliveries (rank ``src`` holds row ``j``, rank ``dst`` reads it), each inside one
    domain of level i + 1 (the machine above the top), routed at level i and, for the
    steps inside level-i domains, recursively below. Inside a level-(i + 1) domain each
    row has one holder, so (row, destination domain) identifies a delivery's source."""
    if i < 0:
        return [("", Messages("dom", src, dst, j))]
    S = sizes[i]
    P = sizes[i + 1] if i + 1 < len(sizes) else p
    nd = p // S
    inter = src // S != dst // S
    si, di, ji = src[inter], dst[inter], j[inter]
    ke, first = _first(ji * nd + di // S, n * nd)    # distinct (row, destination domain)
    ju, su = ke // nd, si[first]
    base_u = su // P * P
    du, eu = su % P // S, (ke % nd) * S % P // S      # domain indices inside the parent
    base_i = si // P * P
    dqi, dri = si % P // S, di % P // S
    suf = "" if i == 0 else str(i)
    steps = []
    if route == "domain":
        L = lanes(P, S)
        lu = (du + eu + ju % L) % S
        mon_s = base_u + du * S + lu                  # source monitor m(d, e)
        mon_t = base_u + eu * S + lu                  # target monitor m(e, d)
        ka, fa = _first(ju * p + mon_s, n * p)        # each row once per source monitor
        ja, sa, qa = ka // p, ka % p, su[fa]
        keep = qa != sa
        steps += [(f"A{suf}" + (f".{k}" if k else ""), m)
                  for k, m in _route(qa[keep], sa[keep], ja[keep], sizes, i - 1, route, n, p)]
        steps.append((f"B{suf}", Messages(cross_family(i), mon_s, mon_t, ju)))
        tr = base_i + dri * S + (dqi + dri + ji % L) % S   # receiving monitor of each inter delivery
    elif route == "source":
        steps.append((f"B{suf}", Messages(cross_family(i), su, base_u + eu * S + su % S, ju)))
        tr = base_i + dri * S + si % S
    else:
        raise PartitionError(f"unknown route {route!r}; use one of {', '.join(ROUTES)}")
    fwd = tr != di
    cs = np.concatenate([tr[fwd], src[~inter]])
    cd = np.concatenate([di[fwd], dst[~inter]])
    cj = np.concatenate([ji[fwd], j[~inter]])
    steps += [(f"C{suf}" + (f".{k}" if k else ""), m) for k, m in _route(cs, cd, cj, sizes, i - 1, route, n, p)]
    return steps


def route_messages(graph, part: np.ndarray, route: str, p: int, sizes) -> dict[str, Messages]:
    """The messages of each exchange step of ``route`` for the 1D partition ``part`` (rank
    of each row) on ``p`` ranks, routed over domain levels of ``sizes`` ranks (innermost
    first; an int = one level). One level: steps "A" (domain route only), "B", "C"; two:
    "A1.A", "A1.B", "A1.C", "B1", "C1.A", ... (the level-1 gather and scatter are routed
    through level 0)."""
    j, r = needed_pairs(graph.indptr, graph.indices, part, p, graph.n)
    q = part[j]
    off = q != r
    return route_deliveries(q[off], r[off], j[off], route, p, sizes, graph.n)


def route_deliveries(owner: np.ndarray, reader: np.ndarray, j: np.ndarray, route: str, p: int, sizes,
                     n: int) -> dict[str, Messages]:
    """:func:`route_messages` from the deliveries themselves (rank ``owner``
    holds row ``j``, rank ``reader`` ≠ owner reads it; each distinct). Every
    message of a row depends on that row's deliveries alone, so the
    deliveries of any set of rows give exactly those rows' messages (the
    distributed plan build routes each process's rows on their own); the
    step names do not depend on the data."""
    sizes = [int(sizes)] if np.isscalar(sizes) else [int(x) for x in sizes]
    return dict(_route(owner, reader, j, sizes, len(sizes) - 1, route, n, p))


def route_stages(graph, part, layout: "Routed") -> dict[str, np.ndarray]:
    """int64[p, p] rows sent q → r by each exchange step of ``layout``'s route (the volume model)."""
    msgs = route_messages(graph, np.asarray(part, dtype=np.int64), layout.route, layout.ranks, layout.sizes)
    return {k: m.matrix(layout.ranks) for k, m in msgs.items()}


# ----------------------------------------------------------------------------- stats
@dataclass
class RoutedStats(PerRankVolume):
    """Exact volumes of a routed plan: ``stages`` (step name → int64[p, p] rows),
    ``volume`` = their sum (what the builder cross-checks the program against;
    ``send`` / ``recv`` over all steps from it)."""

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
    "domain" or "source" over domain levels of ``sizes`` contiguous ranks
    (innermost first, each dividing the next and the rank count; an int = one
    level). Spec ``routed:ROUTE:D`` or ``routed:ROUTE:D0,D1,...``; groups
    ``dom.*`` (innermost domains) and per level i ``cross``/``cross{i}`` (the
    ranks of one local index inside a level-(i + 1) domain, one per level-i domain)."""

    name = "routed"
    bfs = analytics = routes = distributed_build = rank_rows_are_part = True

    def __init__(self, route: str, ranks: int, sizes):
        super().__init__(ranks)
        from .._args import check_int
        sizes = [sizes] if np.isscalar(sizes) else list(sizes)
        sizes = [check_int(f"layout routed:{route}: domain size", x, lo=1, error=PartitionError) for x in sizes]
        spec = f"routed:{route}:{','.join(map(str, sizes))}"
        if route not in ("domain", "source"):
            raise PartitionError(f"layout {spec}: route must be domain or source")
        if not sizes or sizes[0] < 1:
            raise PartitionError(f"layout {spec}: domain sizes must be >= 1")
        for a, b in zip(sizes, sizes[1:] + [self.ranks]):
            if b % a or (b == a and b != self.ranks):
                raise PartitionError(f"layout {spec}: domain size {a} does not divide {b} "
                                     f"({'the rank count' if b == self.ranks else 'the next level'}) "
                                     f"or levels repeat")
        self.route, self.sizes = route, sizes

    @property
    def D(self) -> int:
        """Ranks per innermost domain."""
        return self.sizes[0]

    @classmethod
    def _parse(cls, s, ranks, row_blocks):
        m = re.fullmatch(r"routed:(domain|source):(\d+(?:,\d+)*)", s)
        if not m:
            if s.startswith("routed"):
                raise PartitionError(f"layout {s!r}: expected routed:domain:D or routed:source:D "
                                     f"(D = ranks per domain; D0,D1,... for nested levels)")
            return None
        n = ranks if ranks is not None else row_blocks
        if n is None:
            raise PartitionError(f"layout {s!r} needs the number of ranks")
        return cls(m.group(1), n, [int(x) for x in m.group(2).split(",")])

    @property
    def domains(self) -> int:
        return self.ranks // self.D

    @property
    def params(self) -> dict:
        d = {"route": self.route, "domain_size": self.D}
        if len(self.sizes) > 1:
            d["domain_sizes"] = list(self.sizes)
        return d

    @property
    def spec(self) -> str:
        return f"routed:{self.route}:{','.join(map(str, self.sizes))}"

    @classmethod
    def spec_for(cls, params):
        sizes = params.get("domain_sizes") or [params["domain_size"]]
        return f"routed:{params['route']}:{','.join(str(int(x)) for x in sizes)}"

    def _parent(self, i: int) -> int:
        return self.sizes[i + 1] if i + 1 < len(self.sizes) else self.ranks

    def groups(self) -> list[Group]:
        D, p = self.D, self.ranks
        out = [Group(f"dom.{d}", tuple(range(d * D, d * D + D))) for d in range(p // D)]
        for i, S in enumerate(self.sizes):
            P = self._parent(i)
            out += [Group(f"{cross_family(i)}.{b * S + l}", tuple(b * P + x * S + l for x in range(P // S)))
                    for b in range(p // P) for l in range(S)]
        return out

    def _grank(self, family: str):
        if family == "dom":
            D = self.D
            return (lambda r: r % D), D
        for i, S in enumerate(self.sizes):
            if family == cross_family(i):
                P = self._parent(i)
                return (lambda r: r % P // S), P // S
        raise PartitionError(f"layout {self.spec}: no group family {family!r}")  # pragma: no cover

    def volumes(self, graph, part, *, owner=None, f=128, dtype="float32", alpha=DEFAULT_ALPHA_S,
                beta=DEFAULT_BETA_S_PER_BYTE, **cost):
        self._conformal_only(owner)
        part = np.asarray(part, dtype=np.int64)
        p = self.ranks
        return RoutedStats(self.spec, p, self.D, self.route, route_stages(graph, part, self),
                           np.bincount(part, minlength=p).astype(np.int64),
                           np.bincount(part, weights=graph.row_nnz, minlength=p).astype(np.int64),
                           f, dtype_name(dtype), alpha, beta)

    def program(self, graph, part, *, owner=None, prefix="fwd"):
        """copy / gather / alltoallv per exchange step (rows accumulate: buffer ``h{k}`` =
        ``h{k-1}`` + the rows step k brings), then the local SpMM over the last one."""
        self._conformal_only(owner)
        p = self.ranks
        part = np.asarray(part, dtype=np.int64)
        _, lists = positions(part, p)
        msgs = route_messages(graph, part, self.route, p, self.sizes)
        prog = Program.empty(prefix, p)
        prog.set_io(lists, lists)
        scratch = np.zeros(graph.n, dtype=np.int64)
        held, ids = "in", lists
        k = 0
        for m in msgs.values():
            if m.src.size == 0:
                continue
            k += 1
            nxt = f"h{k}"
            prog.add("copy", src=held, dst=nxt, dst_row=0)
            got = self._emit(prog, m, held, ids, f"s{k}", nxt, held, scratch)
            ids = [np.concatenate([x, y]) for x, y in zip(ids, got)]
            for r in range(p):
                prog.size(r, nxt, len(ids[r]))
            held = nxt
        self._spmm(prog, graph, lists, ids, scratch, held)
        return prog

    # ---- program pieces
    def _emit(self, prog: Program, m: Messages, src_name: str, src_ids: list, send_name: str, dst_name: str,
              dst_row, scratch: np.ndarray) -> list[np.ndarray]:
        """gather + alltoallv of messages ``m``; returns the ids each rank receives, in arrival order
        (by source group-rank — ascending rank inside a group — then ascending id)."""
        p = prog.p
        o = np.lexsort((m.j, m.dst, m.src))
        s1, d1, j1 = m.src[o], m.dst[o], m.j[o]
        sb = unit_bounds(s1, p)
        o = np.lexsort((m.j, m.src, m.dst))
        s2, j2 = m.src[o], m.j[o]
        db = unit_bounds(m.dst[o], p)
        gath, a2a, recv = [], [], []
        for r in range(p):
            g, a, rid = self.step_arrays(m.family, d1[sb[r]:sb[r + 1]], j1[sb[r]:sb[r + 1]],
                                         s2[db[r]:db[r + 1]], j2[db[r]:db[r + 1]], src_ids[r], scratch)
            gath.append(g)
            a2a.append(a)
            recv.append(rid)
            prog.size(r, send_name, int(sb[r + 1] - sb[r]))
        if m.src.size:
            prog.add("gather", gath, src=src_name, dst=send_name)
            prog.add("alltoallv", a2a, group=m.family, src=send_name, dst=dst_name, dst_row=dst_row)
        return recv

    def step_arrays(self, family: str, out_dst: np.ndarray, out_j: np.ndarray, in_src: np.ndarray,
                    in_j: np.ndarray, held_ids: np.ndarray, scratch: np.ndarray) -> tuple[dict, dict, np.ndarray]:
        """One rank's arrays of one exchange step: it sends rows ``out_j`` to
        ``out_dst`` (sorted by destination, then id) from the rows it holds
        (``held_ids``, in buffer order) and receives ``in_j`` from ``in_src``
        (sorted by source, then id). ``scratch``: int64[n] work array.
        Returns (gather arrays, alltoallv arrays, the ids received in order)."""
        grank, G = self._grank(family)
        scratch[held_ids] = np.arange(held_ids.size, dtype=np.int64)
        return ({"idx": scratch[out_j]},
                {"send_counts": np.bincount(grank(out_dst), minlength=G).astype(np.int64),
                 "recv_counts": np.bincount(grank(in_src), minlength=G).astype(np.int64), "recv_ids": in_j},
                in_j)

    def _spmm(self, prog: Program, graph, lists, ext, scratch, src: str) -> None:
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
        prog.add("spmm", arrs, src=src, dst="out")


__all__ = ["Routed", "RoutedStats", "Messages", "ROUTES", "cross_family", "lanes", "route_deliveries", "route_messages",
           "route_stages"]
