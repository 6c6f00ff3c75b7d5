"""Process layouts of distributed SpMM ``Z = A @ H`` as objects: 1D, 1.5D(c), 2D(R×C).

A layout knows, for ``ranks`` processes: how many row blocks the partitioner
must produce (:attr:`Layout.row_blocks`), the communication groups every rank
creates, in one fixed order (:meth:`Layout.groups`), the exact volumes the
analyzer reports (:meth:`Layout.volumes`) and the exchange program the runtime
executes (:meth:`Layout.program`). Nothing outside this module interprets a
layout string; a new layout (a routed, hierarchical one) is one new class
registered in :data:`LAYOUTS`: one module per layout (:mod:`.oned`, :mod:`.onehalfd`,
:mod:`.twod`, :mod:`.routed`) on the base class :class:`partplan.layouts.base.Layout`;
this module holds the registry and the spec parsers, no layout module imports it.

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

import re


from ..errors import PartitionError
from .base import Layout
from .oned import OneD
from .onehalfd import OneHalfD, stage_schedule
from .routed import ROUTES, Routed
from .twod import TwoD

__all__ = ["LAYOUTS", "LAYOUT_HELP", "Layout", "OneD", "OneHalfD", "TwoD", "Routed", "ROUTES",
           "parse_layout", "check_spec", "layout_class", "routed_layout", "spec_from_params",
           "spec_ranks", "layout_from_manifest", "stage_schedule"]


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
    from .._args import check_int
    ranks = check_int("ranks (k)", ranks, lo=1, none_ok=True, error=PartitionError)
    row_blocks = check_int("row blocks", row_blocks, lo=1, none_ok=True, error=PartitionError)
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


def layout_family(name: str) -> type[Layout]:
    """The :class:`Layout` subclass of a layout's family name as stats summaries record it ("1d",
    "1.5d", "2d", "routed"; a full spec's parameters are ignored): its capabilities without a size.

    >>> layout_family("1.5d").replicas, layout_family("2d:2x2").fold
    (True, True)
    """
    cls = LAYOUTS.get(str(name).split(":", 1)[0])
    if cls is None:
        raise PartitionError(f"unknown layout {name!r}; use {LAYOUT_HELP}")
    return cls


def layout_class(spec) -> type[Layout]:
    """The :class:`Layout` subclass of a layout string (or Layout), without its
    size: what a caller with only ``--layout`` asks for capabilities.

    >>> layout_class("routed:domain:4").routes, layout_class("2d").replicas
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


