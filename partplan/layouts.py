"""Process layouts of distributed SpMM ``Z = A @ H`` as objects: 1D, 1.5D(c), 2D(R×C).

A layout knows, for ``ranks`` processes: how many row blocks the partitioner
must produce (:attr:`Layout.row_blocks`), the communication groups every rank
creates, in one fixed order (:meth:`Layout.groups`), the exact volumes the
analyzer reports (:meth:`Layout.volumes`) and the exchange program the runtime
executes (:meth:`Layout.program`). Nothing outside this module interprets a
layout string; a new layout (a routed, hierarchical one) is one new class
registered in :data:`LAYOUTS`. The base class is :class:`partplan.layout_base.Layout`
(re-exported here), the routed layout :class:`partplan.routing.Routed`: this
module imports both, neither imports it.

* **1d** — rank r owns row block r: its rows of A, H and Z. Program: copy own
  rows into ``ext``, gather the rows peers need, all-to-all-v in ``world``
  (received rows land in the tail of ``ext``), local SpMM into ``out``.
* **1.5d:c** — ``b = ranks / c`` row blocks, block i replicated on the c ranks
  ``i·c .. i·c + c − 1`` (group ``replica.i``). Replica l of block i multiplies
  the nonzeros whose column block q has ``(q − i) mod c == l`` and fetches
  ``H_q`` rows from replica ``(q, l)`` in group ``col.l = {x·c + l}``; then
  the replicas all-reduce (sum) their partial rows. So the a2a volume summed
  over ranks is the 1D volume of the b blocks, split over c ranks.
* **2d:RxC** — rank ``a·C + b`` on an R × C grid; vector entries (rows of H and
  Z) go to ``part[v]``; nonzero a_ij is multiplied on (grid row of part[i],
  grid column of part[j]). Expand in the grid column (group ``col.b``), local
  SpMM into partial rows, fold the partial rows to ``part[i]`` in the grid row
  (group ``row.a``). Messages per rank ≤ (R − 1) + (C − 1).

Examples
--------
>>> lay = parse_layout("1.5d:2", ranks=8)
>>> lay.row_blocks, [g.name for g in lay.groups()][:3]
(4, ['col.0', 'col.1', 'replica.0'])
>>> parse_layout("2d", ranks=12).spec
'2d:3x4'
"""
from __future__ import annotations

import math
import re

import numpy as np

from .errors import PartitionError
from .layout_base import Layout
from .plan.exchange import exchange, positions, row_order, sort_small, unit_bounds
from .plan.program import Group, Program
from .routing import ROUTES, Routed


def _exchange_steps(prog: Program, ex: list[dict], in_ids: list[np.ndarray], family: str,
                    out: str = "out") -> None:
    """copy in → ext, gather, alltoallv in ``family`` into ext's tail, spmm ext → ``out``."""
    p = prog.p
    prog.add("copy", src="in", dst="ext", dst_row=0)
    prog.add("gather", [{"idx": ex[r]["send_idx"]} for r in range(p)], src="in", dst="send")
    prog.add("alltoallv", [{"send_counts": ex[r]["send_counts"], "recv_counts": ex[r]["recv_counts"],
                            "recv_ids": ex[r]["halo_ids"]} for r in range(p)],
             group=family, src="send", dst="ext", dst_row="in")
    arrs = []
    for r in range(p):
        d = {"indptr": ex[r]["indptr"], "indices": ex[r]["indices"], "row_ids": ex[r]["row_ids"]}
        if "data" in ex[r]:
            d["data"] = ex[r]["data"]
        arrs.append(d)
    prog.add("spmm", arrs, src="ext", dst=out)
    for r in range(p):
        nl = len(in_ids[r])
        prog.size(r, "ext", nl + len(ex[r]["halo_ids"]))
        prog.size(r, "send", len(ex[r]["send_idx"]))
        prog.size(r, out, len(ex[r]["row_ids"]))


class OneD(Layout):
    """1D row blocks: ``ranks`` row blocks, rank r holds block r.

    ``owner`` (decoupled ownership): rank holding row j of H, if not part[j]."""

    name = "1d"
    supports_owner = True
    bfs = analytics = stealing = gcn = exact_replay = True
    minibatch = routable = distributed_build = True
    layout_stats = False  # its volumes are the CommStats of analyze()

    @classmethod
    def _parse(cls, s, ranks, row_blocks):
        if s not in ("1d", "1"):
            return None
        n = ranks if ranks is not None else row_blocks
        return None if n is None else cls(n)

    def groups(self) -> list[Group]:
        return [Group("world", tuple(range(self.ranks)))]

    def volumes(self, graph, part, *, owner=None, f=128, dtype="float32", **cost):
        from .metrics import analyze
        if owner is not None and not np.array_equal(owner, part):
            from .metrics.ownership import owner_stats
            return owner_stats(graph, part, owner, self.ranks, f=f, dtype=dtype, **cost)
        return analyze(graph, part, self.ranks, f=f, dtype=dtype, backward=False, **cost)

    def program(self, graph, part, *, owner=None, prefix="fwd"):
        k = self.ranks
        rpos, rlists = positions(part, k)
        hold = part if owner is None else owner
        hpos, hlists = (rpos, rlists) if owner is None else positions(owner, k)
        everyone = np.arange(k, dtype=np.int64)
        ex, _ = exchange(graph.n, k, graph.rows, graph.indices, graph.data, None, lambda u, j: hold[j],
                         hlists, hpos, rpos, rlists, lambda r: r, k, lambda u: everyone,
                         order=row_order(graph.indptr, rlists), row_nnz=graph.row_nnz)
        prog = Program.empty(prefix, k)
        prog.set_io(hlists, rlists)
        _exchange_steps(prog, ex, hlists, "world")
        return prog


class OneHalfD(Layout):
    """1.5D: ``ranks / c`` row blocks, each replicated on c consecutive ranks."""

    name = "1.5d"
    replicas = True

    def __init__(self, ranks: int, c: int):
        super().__init__(ranks)
        if int(c) < 1:
            raise PartitionError(f"layout 1.5d:{c}: replication factor c must be >= 1")
        if self.ranks % int(c):
            raise PartitionError(f"layout 1.5d:{c}: {self.ranks} ranks are not divisible by c={c}")
        self.c = int(c)

    @classmethod
    def _parse(cls, s, ranks, row_blocks):
        m = re.fullmatch(r"1\.5d:(\d+)", s)
        if not m:
            return None
        c = int(m.group(1))
        if c < 1:
            raise PartitionError(f"layout {s!r}: replication factor c must be >= 1")
        if ranks is None and row_blocks is not None:
            ranks = row_blocks * c
        return None if ranks is None else cls(ranks, c)

    @property
    def row_blocks(self) -> int:
        return self.ranks // self.c

    @property
    def params(self) -> dict:
        return {"c": self.c}

    @property
    def spec(self) -> str:
        return f"1.5d:{self.c}"

    @classmethod
    def spec_for(cls, params):
        return f"1.5d:{int(params['c'])}"

    def groups(self) -> list[Group]:
        b, c = self.row_blocks, self.c
        cols = [Group(f"col.{l}", tuple(int(x) * c + l for x in range(b))) for l in range(c)]
        reps = [Group(f"replica.{i}", tuple(range(i * c, i * c + c))) for i in range(b)]
        return cols + reps

    def volumes(self, graph, part, *, owner=None, f=128, dtype="float32", **cost):
        from .metrics import analyze_15d
        self._conformal_only(owner)
        return analyze_15d(graph, part, self.c, f=f, dtype=dtype, b=self.row_blocks, **cost)

    def program(self, graph, part, *, owner=None, prefix="fwd"):
        self._conformal_only(owner)
        b, c, p = self.row_blocks, self.c, self.ranks
        pos, lists = positions(part, b)
        rows, cols = graph.rows, graph.indices
        bi, bq = part[rows], part[cols]
        unit = bi * c + (bq - bi) % c
        mine = [lists[r // c] for r in range(p)]
        ex, _ = exchange(graph.n, p, rows, cols, graph.data, unit, lambda u, j: part[j] * c + u % c,
                         mine, pos, pos, mine, lambda r: r // c, b,
                         lambda u: np.arange(b, dtype=np.int64) * c + u % c)
        prog = Program.empty(prefix, p)
        prog.set_io(mine, mine)
        _exchange_steps(prog, ex, mine, "col")
        prog.add("allreduce", group="replica", buf="out")
        prog.writes_output = [r % c == 0 for r in range(p)]
        return prog


class TwoD(Layout):
    """2D checkerboard on an R × C grid (rank = row·C + col); ``part`` assigns
    vector entries (rows of H and Z) to the R·C ranks."""

    name = "2d"
    bfs = fold = True
    bottleneck = False

    def __init__(self, R: int, C: int):
        if int(R) < 1 or int(C) < 1:
            raise PartitionError(f"layout 2d:{R}x{C}: grid dimensions must be >= 1")
        super().__init__(int(R) * int(C))
        self.R, self.C = int(R), int(C)

    @classmethod
    def _parse(cls, s, ranks, row_blocks):
        m = re.fullmatch(r"2d:(\d+)x(\d+)", s)
        if m:
            R, C = int(m.group(1)), int(m.group(2))
            if R < 1 or C < 1:
                raise PartitionError(f"layout {s!r}: grid dimensions must be >= 1")
            n = ranks if ranks is not None else row_blocks
            if n is not None and R * C != n:
                raise PartitionError(f"layout {s!r}: grid {R}x{C} has {R * C} ranks, not {n}")
            return cls(R, C)
        if s == "2d":
            n = ranks if ranks is not None else row_blocks
            if n is None:
                raise PartitionError("layout '2d' needs the number of ranks (or give 2d:RxC)")
            R = max(1, math.isqrt(n))
            while n % R:
                R -= 1
            return cls(R, n // R)
        return None

    @property
    def params(self) -> dict:
        return {"R": self.R, "C": self.C}

    @property
    def spec(self) -> str:
        return f"2d:{self.R}x{self.C}"

    @classmethod
    def spec_for(cls, params):
        return f"2d:{int(params['R'])}x{int(params['C'])}"

    def groups(self) -> list[Group]:
        R, C = self.R, self.C
        cols = [Group(f"col.{b}", tuple(x * C + b for x in range(R))) for b in range(C)]
        rows = [Group(f"row.{a}", tuple(a * C + y for y in range(C))) for a in range(R)]
        return cols + rows

    def volumes(self, graph, part, *, owner=None, f=128, dtype="float32", **cost):
        from .metrics import analyze_2d
        self._conformal_only(owner)
        return analyze_2d(graph, part, self.R, self.C, f=f, dtype=dtype, **cost)

    def program(self, graph, part, *, owner=None, prefix="fwd"):
        self._conformal_only(owner)
        R, C, p = self.R, self.C, self.ranks
        pos, lists = positions(part, p)
        rows, cols = graph.rows, graph.indices
        grow, gcol = part // C, part % C
        unit = grow[rows] * C + gcol[cols]
        ex, _ = exchange(graph.n, p, rows, cols, graph.data, unit, lambda u, j: part[j],
                         lists, pos, None, None, lambda r: r // C, R,
                         lambda u: np.arange(R, dtype=np.int64) * C + u % C)
        prog = Program.empty(prefix, p)
        prog.set_io(lists, lists)
        _exchange_steps(prog, ex, lists, "col", out="partial")
        # fold: partial row i on rank u goes to part[i] in u's grid row (group-rank = grid column)
        self_src, self_dst, send_idx, send_counts, f_rows = [], [], [], [], []
        fvol = np.zeros((p, p), dtype=np.int64)
        for u in range(p):
            ri = ex[u]["row_ids"]
            dest = part[ri]
            own = dest == u
            self_src.append(np.flatnonzero(own).astype(np.int64))
            self_dst.append(pos[ri[own]])
            rem = np.flatnonzero(~own)
            dg = gcol[ri[rem]]
            o = sort_small(dg, C)  # stable: ascending global id inside a destination
            send_idx.append(rem[o].astype(np.int64))
            send_counts.append(np.bincount(dg, minlength=C).astype(np.int64))
            fvol[u] = np.bincount(dest[rem], minlength=p)
            f_rows.append(ri[rem])
        # receive side: rows concatenated by sender (ascending rank = ascending group-rank in
        # the receiver's grid row), ids ascending; a stable sort by destination keeps that order
        fr = np.concatenate(f_rows) if f_rows else np.zeros(0, np.int64)
        fd = part[fr]
        o = sort_small(fd, p)
        fb = unit_bounds(fd, p)
        recv_rows = fr[o]
        recv_ids = [recv_rows[fb[r]:fb[r + 1]] for r in range(p)]
        recv_counts = [fvol[(r // C) * C:(r // C + 1) * C, r].copy() for r in range(p)]
        prog.add("gather", [{"idx": send_idx[r]} for r in range(p)], src="partial", dst="fold_send")
        prog.add("alltoallv", [{"send_counts": send_counts[r], "recv_counts": recv_counts[r],
                                "recv_ids": recv_ids[r]} for r in range(p)],
                 group="row", src="fold_send", dst="fold_recv", dst_row=0)
        prog.add("scatter_add", [{"idx": self_dst[r], "src_idx": self_src[r]} for r in range(p)],
                 src="partial", dst="out", zero=True)
        prog.add("scatter_add", [{"idx": pos[recv_ids[r]]} for r in range(p)], src="fold_recv", dst="out")
        for r in range(p):
            prog.size(r, "fold_send", len(send_idx[r]))
            prog.size(r, "fold_recv", len(recv_ids[r]))
            prog.size(r, "out", len(lists[r]))
        return prog


#: name → class; :func:`parse_layout` tries each in order.
LAYOUTS: dict[str, type[Layout]] = {"1d": OneD, "1.5d": OneHalfD, "2d": TwoD, "routed": Routed}

LAYOUT_HELP = ("1d, 1.5d:C (C replicas of each row block), 2d:RxC (grid; 2d = most square) or "
               "routed:domain:D / routed:source:D (1D through domains of D ranks; D0,D1,... nested)")


def parse_layout(spec, ranks: int | None = None, *, row_blocks: int | None = None) -> Layout:
    """A :class:`Layout` from its string: ``1d``, ``1.5d:c``, ``2d:RxC`` or ``2d``
    (the most square R × C grid, R ≤ C). ``ranks`` (processes) or
    ``row_blocks`` (parts of an existing partition) fixes its size; a Layout
    object is returned as is (after checking ``ranks``).

    >>> parse_layout("1.5d:4", 16)
    OneHalfD('1.5d:4', ranks=16)
    >>> parse_layout("1.5d:4", row_blocks=2).ranks
    8
    """
    if isinstance(spec, Layout):
        if ranks is not None and spec.ranks != ranks:
            raise PartitionError(f"layout {spec.spec} has {spec.ranks} ranks, not {ranks}")
        return spec
    s = str(spec).strip().lower()
    for cls in LAYOUTS.values():
        lay = cls._parse(s, ranks, row_blocks)
        if lay is not None:
            return lay
    if any(re.fullmatch(pat, s) for pat in (r"1d|1", r"1\.5d:\d+")):
        raise PartitionError(f"layout {spec!r} needs the number of ranks")
    raise PartitionError(f"unknown layout {spec!r}; use {LAYOUT_HELP}")


def check_spec(spec: str) -> str:
    """The normalized layout string, if it is one of the known forms (no size
    check: that needs the number of ranks). Raises PartitionError otherwise."""
    s = str(spec).strip().lower()
    if s == "1":
        s = "1d"
    if re.fullmatch(r"1d|2d|1\.5d:[1-9]\d*|2d:[1-9]\d*x[1-9]\d*|routed:(domain|source):[1-9]\d*(,[1-9]\d*)*", s):
        return s
    raise PartitionError(f"unknown layout {spec!r}; use {LAYOUT_HELP}")


def layout_class(spec) -> type[Layout]:
    """The :class:`Layout` subclass of a layout string (or Layout), without its
    size: what a caller with only ``--layout`` asks for capabilities.

    >>> layout_class("routed:domain:4").routes, layout_class("2d").analytics
    (True, False)
    """
    if isinstance(spec, Layout):
        return type(spec)
    s = check_spec(spec)
    return LAYOUTS[s.split(":", 1)[0]]


def routed_layout(route: str, ranks: int, topology=None, sizes=None) -> Layout:
    """The layout of ``route`` on ``ranks``: ``flat`` → 1d; ``domain`` /
    ``source`` → :class:`Routed` over ``sizes`` (default: every domain level of
    ``topology`` smaller than the machine, innermost first — a nested route)."""
    if route == "flat":
        return OneD(ranks)
    if route not in ROUTES:
        raise PartitionError(f"unknown route {route!r}; use one of {', '.join(ROUTES)}")
    if sizes is None:
        if topology is None or not topology.levels:
            raise PartitionError(f"route {route} needs a topology with domain levels (e.g. tree:4x16)")
        sizes = [lv.size for lv in topology.levels if lv.size < ranks] or [topology.levels[0].size]
    return Routed(route, ranks, sizes)


def spec_from_params(layout, params: dict | None = None) -> str:
    """The spec of a layout recorded as its name and its parameters apart (partition
    files of schema /1: ``"1.5d"`` with ``{"c": 2}``); a full spec comes back as is.

    >>> spec_from_params("2d", {"R": 2, "C": 3}), spec_from_params("1.5d:2", {"c": 2})
    ('2d:2x3', '1.5d:2')
    """
    s = str(layout).strip().lower()
    cls = LAYOUTS.get(s)
    if cls is None or not params:
        return s
    return cls.spec_for(params)


def spec_ranks(spec) -> int | None:
    """The number of ranks a layout string fixes by itself (``2d:RxC``: R·C), else None.

    >>> spec_ranks("2d:2x3"), spec_ranks("1.5d:2"), spec_ranks("2d")
    (6, None, None)
    """
    try:
        return parse_layout(spec).ranks
    except PartitionError:
        return None


def layout_from_manifest(m: dict) -> Layout:
    """The layout a plan manifest records (``layout`` spec + ``ranks``)."""
    return parse_layout(m["layout"], int(m["ranks"]))


def stage_schedule(b: int, c: int) -> np.ndarray:
    """int64[S, b, c]: the source block replica l of block i fetches from at
    stage s (−1: nothing), in order of ring offset ``(q − i) mod b`` — the
    staged form of the 1.5D exchange (replica l of block i handles exactly the
    blocks q with ``(q − i) mod c == l``, so every block is fetched once)."""
    i = np.repeat(np.arange(b), b)
    d = np.tile(np.arange(b), b)
    q = (i + d) % b
    l = (q - i) % c
    order = np.lexsort((d, l, i))
    i, l, q = i[order], l[order], q[order]
    grp = i * c + l
    starts = np.flatnonzero(np.concatenate([[True], grp[1:] != grp[:-1]]))
    stage = np.arange(grp.size) - np.repeat(starts, np.diff(np.concatenate([starts, [grp.size]])))
    out = np.full((int(stage.max()) + 1 if stage.size else 0, b, c), -1, dtype=np.int64)
    out[stage, i, l] = q
    return out

