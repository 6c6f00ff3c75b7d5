"""Machine topology: which ranks share a domain, and what a message between two ranks costs.

A :class:`Topology` has ``ranks`` processes and

* ``levels`` — the **domain levels**, innermost outward (e.g. ``node`` = 4
  GPUs, ``rack`` = 8 nodes). Level i groups ranks into contiguous domains of
  ``size`` ranks (``rank // size``); a message between q and r *crosses* level
  i when ``q // size != r // size``. Each level carries the α (s per message),
  β (s per byte) and abstract ``cost`` (per row) of a message whose outermost
  crossed level is that one;
* ``local`` — α, β, cost of a message inside one innermost domain;
* ``cost``, ``alpha``, ``beta`` — float64[ranks, ranks] matrices (diagonal 0),
  derived from the levels for a tree, given explicitly for a ``matrix``
  topology (irregular links, e.g. an NVLink mesh, or a probe's measurements).

Sources (:func:`load_topology`): presets ``tree:RxD`` (R ranks per domain ×
D domains; intra cost 1, inter 10 — or ``tree:RxD:1,4``), deeper trees
``tree:4x8x2`` (levels node, rack; costs 1, 10, 100), ``dgx1`` (the 8-GPU
DGX-1 hybrid cube-mesh: 2, 1 or 0 NVLinks per pair), or a JSON file (format
in docs/guide/topology.md). α and β default to ``1e-6 s × cost`` and
``1e-10 s/byte × cost`` where not given.

Examples
--------
>>> t = load_topology("tree:4x16")
>>> t.ranks, [lv.name for lv in t.levels], float(t.cost[0, 3]), float(t.cost[0, 4])
(64, ['domain'], 1.0, 10.0)
>>> load_topology("tree:4x8x2").describe()["levels"][1]["size"]
32
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import PartplanError

FORMAT = "partplan.topology"
FORMAT_VERSION = 1
BASE_ALPHA_S = 1e-6           # α of a cost-1 link (seconds per message)
BASE_BETA_S_PER_BYTE = 1e-10  # β of a cost-1 link (seconds per byte, 10 GB/s)


def _scaled(base: float, cost: float) -> float:
    """base × cost, rounded as the decimal a user would write (10 × 1e-6 = 1e-05)."""
    return float(f"{base * cost:.12g}")
DEEP_LEVEL_NAMES = ("node", "rack", "pod", "row", "site")

#: DGX-1 (V100) NVLink count per GPU pair: hybrid cube-mesh, 6 links per GPU
DGX1_LINKS = np.array([
    [0, 1, 1, 2, 2, 0, 0, 0],
    [1, 0, 2, 1, 0, 2, 0, 0],
    [1, 2, 0, 2, 0, 0, 1, 0],
    [2, 1, 2, 0, 0, 0, 0, 1],
    [2, 0, 0, 0, 0, 1, 1, 2],
    [0, 2, 0, 0, 1, 0, 2, 1],
    [0, 0, 1, 0, 1, 2, 0, 2],
    [0, 0, 0, 1, 2, 1, 2, 0]], dtype=np.int64)
#: per NVLink count: (cost, α s, β s/byte); 0 links = PCIe + QPI through the hosts
DGX1_LINK_PARAMS = {2: (0.5, 5e-6, 2e-11), 1: (1.0, 5e-6, 4e-11), 0: (2.5, 1e-5, 1e-10)}


class TopologyError(PartplanError, ValueError):
    """A topology description (file, preset string or field) is invalid."""


@dataclass(frozen=True)
class Link:
    """Parameters of one kind of message: α (s), β (s/byte), abstract cost (per row)."""

    alpha: float
    beta: float
    cost: float

    def __post_init__(self):
        from .._args import check_real
        for name in ("alpha", "beta", "cost"):
            object.__setattr__(self, name, check_real(f"link {name}", getattr(self, name), error=TopologyError))

    def to_json(self) -> dict:
        return {"alpha": self.alpha, "beta": self.beta, "cost": self.cost}


@dataclass(frozen=True)
class Level:
    """A domain level: domains of ``size`` contiguous ranks; ``link`` = a message
    whose outermost crossed level is this one."""

    name: str
    size: int
    link: Link | None = None

    def __post_init__(self):
        from .._args import check_int
        if not isinstance(self.name, str) or not self.name:
            raise TopologyError(f"a level's name must be a non-empty string, got {self.name!r}")
        object.__setattr__(self, "size", check_int(f"level {self.name}: size", self.size, lo=1, error=TopologyError))
        if self.link is not None and not isinstance(self.link, Link):
            raise TopologyError(f"level {self.name}: link must be a Link, got {type(self.link).__name__}")


class Topology:
    """See the module doc. ``source`` is the preset string or file it came from. A tree's
    ``cost``, ``alpha`` and ``beta`` (ranks × ranks) are built when first read: its levels say
    everything else (``topology show tree:100x100`` holds no 10,000 × 10,000 matrix)."""

    def __init__(self, ranks: int, kind: str, levels: list[Level], cost: np.ndarray | None,
                 alpha: np.ndarray | None, beta: np.ndarray | None, local: Link | None = None,
                 source: str = "", extra: dict | None = None):
        self.ranks, self.kind, self.levels, self.local, self.source = ranks, kind, levels, local, source
        self.extra = {} if extra is None else extra
        self._mats = None if cost is None else (cost, alpha, beta)

    def _matrices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._mats is None:
            self._mats = _tree_matrices(self.ranks, self.levels, self.local, self.source)
        return self._mats

    @property
    def cost(self) -> np.ndarray:
        """float64[ranks, ranks]: abstract cost per row between two ranks (diagonal 0)."""
        return self._matrices()[0]

    @property
    def alpha(self) -> np.ndarray:
        """float64[ranks, ranks]: seconds per message between two ranks (diagonal 0)."""
        return self._matrices()[1]

    @property
    def beta(self) -> np.ndarray:
        """float64[ranks, ranks]: seconds per byte between two ranks (diagonal 0)."""
        return self._matrices()[2]

    def __repr__(self) -> str:
        return f"Topology({self.source or self.kind!r}: {self.kind}, {self.ranks} ranks, {len(self.levels)} levels)"

    # ---- structure
    def domain_of(self, level: int, ranks=None) -> np.ndarray:
        """int64 domain index of ``ranks`` (default all) at level ``level``."""
        r = np.arange(self.ranks) if ranks is None else np.asarray(ranks)
        return r // self.levels[level].size

    def crossing(self, level: int) -> np.ndarray:
        """bool[ranks, ranks]: q and r in different domains of ``level``."""
        d = self.domain_of(level)
        return d[:, None] != d[None, :]

    def level_index(self, name: str) -> int:
        for i, lv in enumerate(self.levels):
            if lv.name == name:
                return i
        raise TopologyError(f"topology {self.source or self.kind} has no level {name!r} "
                            f"(levels: {', '.join(lv.name for lv in self.levels) or 'none'})")

    @property
    def symmetric(self) -> bool:
        return self.kind == "tree" or bool(np.array_equal(self.cost, self.cost.T))

    def check_ranks(self, ranks: int) -> "Topology":
        if ranks != self.ranks:
            raise TopologyError(f"topology {self.source or self.kind} has {self.ranks} ranks, the job has {ranks}")
        return self

    # ---- output
    def describe(self) -> dict:
        """The JSON form (what :func:`topology_from_json` reads back)."""
        d = {"format": FORMAT, "version": FORMAT_VERSION, "kind": self.kind, "ranks": self.ranks,
             "source": self.source}
        if self.levels:
            sizes = [lv.size for lv in self.levels] + [self.ranks]
            d["fanouts"] = [sizes[0]] + [b // a for a, b in zip(sizes, sizes[1:])]
            d["levels"] = [{"name": lv.name, "size": lv.size, **(lv.link.to_json() if lv.link else {})}
                           for lv in self.levels]
        if self.kind == "tree":
            d["local"] = self.local.to_json()
        else:
            d["cost"] = self.cost.tolist()
            d["alpha"] = self.alpha.tolist()
            d["beta"] = self.beta.tolist()
            if not self.symmetric:        # read back as it was given (an asymmetric matrix must say so)
                d["symmetric"] = False
        d.update(self.extra)
        return d

    def table(self) -> str:
        lines = [f"topology {self.source or self.kind}: {self.kind}, {self.ranks} ranks"]
        if self.local is not None:
            lines.append(f"  local          cost {self.local.cost:g}  alpha {self.local.alpha:.3g} s  "
                         f"beta {self.local.beta:.3g} s/B")
        for lv in self.levels:
            tail = (f"  cost {lv.link.cost:g}  alpha {lv.link.alpha:.3g} s  beta {lv.link.beta:.3g} s/B"
                    if lv.link else "")
            lines.append(f"  level {lv.name:<8} {self.ranks // lv.size} domains of {lv.size} ranks{tail}")
        if self.kind == "matrix" and self.ranks <= 16:
            lines.append("  cost matrix:")
            lines += ["    " + " ".join(f"{x:6.3g}" for x in row) for row in self.cost]
        return "\n".join(lines)


# ----------------------------------------------------------------------------- construction
# The largest cost, α or β a topology may give: the mapping and the figures sum them over pairs of
# ranks and rows of H in float64, where 1e308 overflowed to inf (a greedy map that then placed
# several parts on one rank); 1e100 leaves room for any count of rows and ranks.
MAX_LINK_VALUE = 1e100


def _finite_nonneg(x, what: str, text: bool = False) -> float:
    """``x`` as a finite number in [0, MAX_LINK_VALUE] (:func:`partplan._args.check_real`); a string
    only when ``text`` (a preset's own text: in a JSON file "1e-9" is no number, and true is not 1)."""
    from .._args import check_real
    if text and isinstance(x, str):
        try:   # ASCII decimal text (nan / inf fail the range check): float() also reads "1_0" and
            # other scripts' digits
            if not re.fullmatch(r"[0-9.eE+-]{1,64}|[+-]?(nan|inf|infinity)", x.strip(), flags=re.IGNORECASE):
                raise ValueError(x)
            x = float(x)
        except ValueError:
            raise TopologyError(f"{what} must be a number, got {x!r}") from None
    return check_real(what, x, hi=MAX_LINK_VALUE, error=TopologyError)


def _link(d: dict, what: str, default_cost: float, level: bool = True) -> Link:
    if not isinstance(d, dict):
        raise TopologyError(f"{what} must be an object with alpha / beta / cost, got {d!r}")
    unknown = set(d) - ({"alpha", "beta", "cost", "name", "size", "fanout"} if level else {"alpha", "beta", "cost"})
    if unknown:
        raise TopologyError(f"{what}: unknown field(s) {', '.join(sorted(unknown))} (alpha, beta, cost)")
    cost = _finite_nonneg(d["cost"], f"{what}.cost") if "cost" in d else default_cost
    alpha = _finite_nonneg(d.get("alpha", _scaled(BASE_ALPHA_S, cost)), f"{what}.alpha")
    beta = _finite_nonneg(d.get("beta", _scaled(BASE_BETA_S_PER_BYTE, cost)), f"{what}.beta")
    return Link(alpha, beta, cost)


def tree(fanouts, links: list[Link] | None = None, *, names=None, source: str = "") -> Topology:
    """A tree topology: ``fanouts`` innermost first (ranks per innermost domain,
    then domains per parent, ..., the top count last); ``links`` = local link
    then one per domain level (``len(fanouts)`` in all; default costs 1, 10, 100, ...).

    >>> tree([2, 3]).cost.tolist()[0]
    [0.0, 1.0, 10.0, 10.0, 10.0, 10.0]
    """
    from .._args import check_int
    if isinstance(fanouts, (str, bytes)) or not hasattr(fanouts, "__iter__"):
        raise TopologyError(f"tree fanouts must be a list of >= 2 integers >= 1, got {fanouts!r}")
    fan = [check_int("tree fanout", f, lo=1, error=TopologyError) for f in fanouts]
    if len(fan) < 2 or any(f < 1 for f in fan):
        raise TopologyError(f"tree fanouts must be >= 2 integers >= 1 (innermost first, top count last), got {fanouts}")
    if len(fan) > MAX_FANOUTS:
        raise TopologyError(f"a tree has at most {MAX_FANOUTS} fanouts ({MAX_FANOUTS - 1} domain levels), got {len(fan)}")
    nlev = len(fan) - 1
    if names is None:
        names = ["domain"] if nlev == 1 else [DEEP_LEVEL_NAMES[i] if i < len(DEEP_LEVEL_NAMES) else f"level{i}"
                                              for i in range(nlev)]
    if len(names) != nlev:
        raise TopologyError(f"a tree with fanouts {fan} has {nlev} domain level(s); got names {list(names)}")
    if len(set(names)) != nlev:
        dup = next(x for i, x in enumerate(names) if x in list(names)[:i])
        raise TopologyError(f"the tree's level names must differ (a level is named by --route-level); "
                            f"{dup!r} is given twice in {list(names)}")
    if links is None:
        links = [Link(_scaled(BASE_ALPHA_S, 10 ** i), _scaled(BASE_BETA_S_PER_BYTE, 10 ** i), float(10 ** i))
                 for i in range(nlev + 1)]
    if len(links) != nlev + 1:
        raise TopologyError(f"a tree with {nlev} domain level(s) needs {nlev + 1} links (local + one per level)")
    if not all(isinstance(lk, Link) for lk in links):
        raise TopologyError(f"tree links must be Link objects (local, then one per level), got "
                            f"{[type(lk).__name__ for lk in links]}")
    p = math.prod(fan)                        # Python ints: no int64 wrap-around
    if p > MAX_RANKS:
        raise TopologyError(f"{source or tree_spec(fan)}: {p} ranks, more than a job runs (at most {MAX_RANKS})")
    sizes = [math.prod(fan[:i + 1]) for i in range(nlev)]
    levels = [Level(str(names[i]), int(sizes[i]), links[i + 1]) for i in range(nlev)]
    return Topology(p, "tree", levels, None, None, None, links[0], source or tree_spec(fan))


def _tree_matrices(p: int, levels: list[Level], local: Link, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A tree's cost, α and β matrices (float64[p, p], diagonal 0): each pair's outermost crossed
    level's link, ``local`` inside one innermost domain. The memory budget is checked first."""
    check_matrix_budget(p, where)
    r = np.arange(p)
    which = np.zeros((p, p), dtype=np.int64)  # 0 = local, i + 1 = outermost crossed level i
    for i, lv in enumerate(levels):
        d = r // lv.size
        which[d[:, None] != d[None, :]] = i + 1
    table = np.array([[lk.cost, lk.alpha, lk.beta] for lk in [local] + [lv.link for lv in levels]])
    mats = tuple(table[which, c] for c in range(3))
    for m in mats:
        np.fill_diagonal(m, 0.0)
    return mats


#: the most ranks a topology describes
MAX_RANKS = 2 ** 31 - 1

#: the most fanouts of a tree (its domain levels + 1), as the ``tree:`` preset's text allows: default
#: level costs 10, 100, ... stay far below MAX_LINK_VALUE
MAX_FANOUTS = 32

#: bytes per (rank, rank) pair while a tree is built: the level map (int64), a comparison
#: (bool) and the cost, α and β matrices (float64)
PAIR_BYTES = 8 + 1 + 3 * 8

#: bytes per (rank, rank) pair the topology figures take beside it (``metrics.topology``: the
#: route's per-step volume matrices, their sum, the crossing masks and the temporaries of the
#: sums; measured: ``analyze email-Enron -k 4000 --topology tree:40x100 --route domain`` peaked
#: 74 bytes per pair above the same analyze without a topology)
FIGURES_PAIR_BYTES = 9 * 8


#: bytes the parsed JSON of a topology file may take per byte of the file: a matrix entry of two
#: characters ("1,") becomes a list slot (8 bytes) and a float object (24); the file is refused above
#: the memory budget / this, before it is parsed
JSON_EXPANSION = 16


def check_matrix_budget(ranks: int, where: str) -> None:
    """One :class:`TopologyError` naming ``where`` (the preset, file or
    argument) when ``ranks`` × ``ranks`` pairs need more than the memory
    budget (``PARTPLAN_MAX_BYTES``), BEFORE any matrix is allocated: the
    topology's own matrices and those of its figures (:data:`PAIR_BYTES` +
    :data:`FIGURES_PAIR_BYTES` per pair)."""
    from .._budget import ENV_MAX_BYTES, human_bytes, memory_budget
    per = PAIR_BYTES + FIGURES_PAIR_BYTES
    need, budget = int(ranks) * int(ranks) * per, memory_budget()
    if need > budget:
        raise TopologyError(f"{where}: {ranks} ranks need {ranks} × {ranks} × {per} bytes = "
                            f"{human_bytes(need)} of rank × rank matrices (the topology's and its figures'), "
                            f"above the memory budget of {human_bytes(budget)} (raise it with "
                            f"{ENV_MAX_BYTES}=<bytes>)")


def tree_spec(fanouts) -> str:
    return "tree:" + "x".join(str(int(f)) for f in fanouts)


def matrix(cost, *, alpha=None, beta=None, fanouts=None, names=None, source: str = "",
           require_symmetric: bool = True) -> Topology:
    """A matrix topology from a ranks × ranks ``cost`` (diagonal ignored, set 0);
    ``alpha`` / ``beta`` matrices (default from the cost); optional ``fanouts``
    (as for :func:`tree`) give it domain levels for routing and crossing counts."""
    c = _square(cost, "cost")
    p = c.shape[0]
    a = c * BASE_ALPHA_S if alpha is None else _square(alpha, "alpha", p)
    b = BASE_BETA_S_PER_BYTE * c if beta is None else _square(beta, "beta", p)
    for m, name in ((c, "cost"), (a, "alpha"), (b, "beta")):
        if require_symmetric and not np.array_equal(m, m.T):
            i, j = np.argwhere(m != m.T)[0]
            raise TopologyError(f"{name} matrix is not symmetric: [{i}][{j}] = {m[i, j]:g} but [{j}][{i}] = "
                                f"{m[j, i]:g} (give \"symmetric\": false to allow it)")
        np.fill_diagonal(m, 0.0)
    levels = []
    if fanouts is not None:
        if math.prod(int(f) for f in fanouts) != p:   # before tree() builds its own p × p matrices
            raise TopologyError(f"fanouts {list(fanouts)} multiply to {math.prod(int(f) for f in fanouts)} ranks, "
                                f"the matrix has {p}")
        lt = tree(fanouts, names=names)
        levels = [Level(lv.name, lv.size, None) for lv in lt.levels]
    return Topology(p, "matrix", levels, c, a, b, None, source or "matrix")


def _square(m, what: str, p: int | None = None) -> np.ndarray:
    if isinstance(m, (list, tuple, np.ndarray)):   # its pairs within the memory budget before any work
        check_matrix_budget(len(m), what)
    if isinstance(m, (list, tuple)):   # JSON true / false are not costs (numpy would read them as 1 / 0)
        for i, row in enumerate(m):
            for j, x in enumerate(row if isinstance(row, (list, tuple)) else ()):
                if isinstance(x, (bool, str, bytes)):
                    raise TopologyError(f"{what}[{i}][{j}] = {x!r}: entries must be numbers")
    if isinstance(m, (list, tuple)) and m and all(isinstance(r, (list, tuple)) for r in m):
        ragged = [i for i, r in enumerate(m) if len(r) != len(m)]
        if ragged:
            raise TopologyError(f"{what} matrix must be square (ranks × ranks): it has {len(m)} rows, and row "
                                f"{ragged[0]} has {len(m[ragged[0]])} entries")
    try:
        a = np.array(m, dtype=np.float64)
    except (TypeError, ValueError):
        raise TopologyError(f"{what} matrix must be a list of rows of numbers") from None
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] < 1:
        raise TopologyError(f"{what} matrix must be square (ranks × ranks), got shape {a.shape}")
    if p is not None and a.shape[0] != p:
        raise TopologyError(f"{what} matrix is {a.shape[0]} × {a.shape[0]}, the cost matrix {p} × {p}")
    bad = ~np.isfinite(a) | (a < 0) | (a > MAX_LINK_VALUE)
    np.fill_diagonal(bad, False)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise TopologyError(f"{what}[{i}][{j}] = {float(a[i, j])!r}: entries must be finite, >= 0 and at most "
                            f"{MAX_LINK_VALUE:g}")
    return a


def dgx1() -> Topology:
    """The DGX-1 (V100) hybrid cube-mesh: GPUs 0-3 and 4-7 are two fully
    connected quads, pairs have 2, 1 or 0 NVLinks (:data:`DGX1_LINKS`); cost
    0.5 / 1 / 2.5, β 20 / 40 / 100 ps per byte (≈ 50 / 25 / 10 GB/s)."""
    p = DGX1_LINKS.shape[0]
    mats = [np.zeros((p, p)) for _ in range(3)]
    for links, vals in DGX1_LINK_PARAMS.items():
        sel = DGX1_LINKS == links
        for m, v in zip(mats, vals):
            m[sel] = v
    t = matrix(mats[0], alpha=mats[1], beta=mats[2], fanouts=[4, 2], names=["quad"], source="dgx1")
    t.extra["nvlinks"] = DGX1_LINKS.tolist()
    return t


# ----------------------------------------------------------------------------- parsing
PRESET_HELP = "tree:RxD[:INTRA,INTER] (R ranks per domain × D domains), tree:AxBxC (deeper), dgx1, or a JSON file"


def parse_preset(spec: str) -> Topology | None:
    """A preset topology from its string, or None when ``spec`` is not preset-shaped."""
    if not isinstance(spec, str):
        raise TopologyError(f"a topology preset is a string (dgx1, tree:AxB...), got {spec!r}")
    s = spec.strip().lower()
    if s == "dgx1":
        return dgx1()
    if not s.startswith("tree:"):
        return None
    m = re.fullmatch(r"tree:(\d{1,18}(?:x\d{1,18}){1,31})(?::([^:]{1,2000}))?", s, flags=re.ASCII)
    if not m:
        raise TopologyError(f"preset {spec[:200]!r}: expected tree:RxD or tree:RxD:INTRA,INTER (e.g. "
                            f"tree:4x16:1,10; fanouts of at most 18 digits, at most 32 levels)")
    fan = [int(x) for x in m.group(1).split("x")]
    if any(f < 1 for f in fan):
        raise TopologyError(f"preset {spec!r}: fanouts must be >= 1")
    links = None
    if m.group(2):
        parts = m.group(2).split(",")
        if len(parts) != len(fan):
            raise TopologyError(f"preset {spec!r}: give {len(fan)} costs (local, then one per level), "
                                f"got {len(parts)}")
        costs = [_finite_nonneg(x, f"preset {spec!r} cost", text=True) for x in parts]
        links = [Link(_scaled(BASE_ALPHA_S, c), _scaled(BASE_BETA_S_PER_BYTE, c), c) for c in costs]
    return tree(fan, links, source=s)


def topology_from_json(d: dict, source: str = "") -> Topology:
    """A topology from its JSON object (see docs/guide/topology.md); errors name ``source``."""
    where = source or "topology"
    try:
        return _from_json(d, source, where)
    except TopologyError as exc:
        if str(exc).startswith(where):
            raise
        raise TopologyError(f"{where}: {exc}") from None


def _from_json(d: dict, source: str, where: str) -> Topology:
    if not isinstance(d, dict):
        raise TopologyError(f"{where}: the top level must be a JSON object")
    unknown = set(d) - _FIELDS["tree"] - _FIELDS["matrix"]
    if unknown:
        raise TopologyError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    if d.get("format", FORMAT) != FORMAT:
        raise TopologyError(f"{where}: format {d.get('format')!r} is not {FORMAT!r}")
    version = d.get("version", FORMAT_VERSION)
    if type(version) is not int or version != FORMAT_VERSION:   # JSON true and 1.0 == 1 in Python
        raise TopologyError(f"{where}: version {d.get('version')!r} is not supported (this tool reads "
                            f"{FORMAT_VERSION})")
    kind = d.get("kind")
    if kind not in ("tree", "matrix"):
        raise TopologyError(f"{where}: field 'kind' must be \"tree\" or \"matrix\", got {_short(kind)}")
    other = sorted(set(d) - _FIELDS[kind])
    if other:
        raise TopologyError(f"{where}: field(s) {', '.join(other)} belong to the other kind of topology, not to "
                            f"a {kind} ({', '.join(sorted(_FIELDS[kind]))})")
    src = d.get("source", "")
    if not isinstance(src, str):
        raise TopologyError(f"{where} (field 'source'): must be a string, got {_short(src)}")
    ranks = d.get("ranks")
    if ranks is not None and (not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 1):
        raise TopologyError(f"{where}: field 'ranks' must be an integer >= 1, got {ranks!r}")
    levels = d.get("levels", [])
    if not isinstance(levels, list) or not all(isinstance(x, dict) for x in levels):
        raise TopologyError(f"{where}: field 'levels' must be a list of objects")
    if "levels" in d and not levels and d.get("fanouts") is not None:   # given, but not one per domain level
        raise TopologyError(f"{where}: field 'levels' is empty; it needs one object per domain level "
                            f"(len(fanouts) - 1), or leave it out for the default names and costs")
    if kind == "tree":
        fan = _fanouts(d, levels, where)
        names = _level_names(levels, fan, where)
        nlev = len(fan) - 1
        links = [_link(d.get("local", {}), f"{where}: local", 1.0, level=False)]
        links += [_link(levels[i] if levels else {}, f"{where}: levels[{i}]", float(10 ** (i + 1)))
                  for i in range(nlev)]
        t = tree(fan, links, names=names, source=source or tree_spec(fan))
    else:
        if "cost" not in d:
            raise TopologyError(f"{where}: a matrix topology needs field 'cost' (ranks × ranks)")
        fan = _fanouts(d, levels, where) if "fanouts" in d or levels else None
        names = _level_names(levels, fan, where) if fan is not None else None
        for i, lv in enumerate(levels):   # a matrix's links come from its matrices: a level names a domain
            priced = sorted(set(lv) & {"alpha", "beta", "cost"})
            if priced:
                raise TopologyError(f"{where} (field 'levels[{i}].{priced[0]}'): a matrix topology takes its "
                                    f"costs, α and β from its matrices; its levels hold name, size and fanout")
            _link(lv, f"{where}: levels[{i}]", 1.0)
        sym = d.get("symmetric", True)
        if not isinstance(sym, bool):
            raise TopologyError(f"{where} (field 'symmetric'): must be true or false, got {sym!r}")
        t = matrix(d["cost"], alpha=d.get("alpha"), beta=d.get("beta"), fanouts=fan, names=names,
                   source=source or "matrix", require_symmetric=sym)
        if "probe" in d:
            t.extra["probe"] = _probe_record(d["probe"], where)
    if "nvlinks" in d:   # the DGX-1 preset's NVLink counts (ranks × ranks integers), carried through
        nv = _square(d["nvlinks"], f"{where}: nvlinks")
        if nv.shape[0] != t.ranks or (nv != np.round(nv)).any() or (nv < 0).any():
            raise TopologyError(f"{where} (field 'nvlinks'): must be {t.ranks} × {t.ranks} non-negative integers")
        t.extra["nvlinks"] = nv.astype(np.int64).tolist()
    if ranks is not None and ranks != t.ranks:
        raise TopologyError(f"{where}: fanouts / matrix describe {t.ranks} ranks, but field 'ranks' says {ranks}")
    return t


#: the fields of each kind of topology file (``source``: the preset or file it was made from;
#: ``probe``: the measurement's settings, :mod:`partplan.runtime.probe`; ``nvlinks``: the DGX-1
#: preset's NVLink counts)
_COMMON = {"format", "version", "kind", "ranks", "source", "levels", "fanouts", "nvlinks"}
_FIELDS = {"tree": _COMMON | {"local"}, "matrix": _COMMON | {"cost", "alpha", "beta", "symmetric", "probe"}}

#: a probe record's fields and their types (what ``topology probe`` writes)
_PROBE_FIELDS = {"backend": str, "small_bytes": int, "large_bytes": int, "repeat": int}


def _short(x) -> str:
    """``repr(x)`` cut to 80 characters, for an error line."""
    r = repr(x)
    return r if len(r) <= 80 else r[:77] + "..."


def _probe_record(pr, where: str) -> dict:
    """The ``probe`` object of a matrix topology (carried into plans as it is), checked: the fields
    ``topology probe`` writes, each of its type (a backend name of at most 32 word characters)."""
    if not isinstance(pr, dict):
        raise TopologyError(f"{where} (field 'probe'): must be an object, got {_short(pr)}")
    for key, val in pr.items():
        want = _PROBE_FIELDS.get(key)
        if want is None:
            raise TopologyError(f"{where} (field 'probe.{key}'): unknown (fields: {', '.join(_PROBE_FIELDS)})")
        if not isinstance(val, want) or isinstance(val, bool) or (want is int and val < 0) or (
                want is str and not re.fullmatch(r"\w{1,32}", val)):
            raise TopologyError(f"{where} (field 'probe.{key}'): must be a "
                                f"{'non-negative integer' if want is int else 'backend name'}, got {_short(val)}")
    return dict(pr)


def _level_names(levels: list, fan: list[int], where: str) -> list[str] | None:
    """The names of ``levels`` (None when there are none), checked: one level per
    domain level of ``fan``, each with a non-empty string ``name``, and its
    ``size`` (ranks per domain) and ``fanout`` (domains per parent), when given,
    those of ``fan``."""
    if not levels:
        return None
    names = [lv.get("name", None) for lv in levels]
    for i, x in enumerate(names):
        if not isinstance(x, str) or not x or not x.isprintable() or len(x) > 64:
            raise TopologyError(f"{where} (field 'levels[{i}].name'): every level needs a 'name' of 1 to 64 "
                                f"printable characters, got {_short(x)}")
    nlev = len(fan) - 1
    if len(levels) != nlev:
        raise TopologyError(f"{where}: {len(levels)} levels for fanouts {fan} (expected {nlev})")
    size = 1
    for i, lv in enumerate(levels):
        size *= fan[i]
        for key, want in (("size", size), ("fanout", fan[i + 1])):
            if key in lv and (isinstance(lv[key], bool) or lv[key] != want):
                raise TopologyError(f"{where} (field 'levels[{i}].{key}'): {lv[key]!r} conflicts with fanouts "
                                    f"{fan} (which give {want})")
    return names


def _fanouts(d: dict, levels: list, where: str) -> list[int]:
    fan = d.get("fanouts")
    if fan is None:
        raise TopologyError(f"{where}: field 'fanouts' is missing (innermost first, e.g. [4, 16] = 4 ranks per "
                            f"domain × 16 domains)")
    if not isinstance(fan, list) or not 2 <= len(fan) <= MAX_FANOUTS or not all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in fan):
        raise TopologyError(f"{where}: field 'fanouts' must be a list of 2 to {MAX_FANOUTS} integers >= 1, got "
                            f"{_short(fan)}")
    ranks = d.get("ranks")
    if isinstance(ranks, int) and math.prod(fan) != ranks:
        raise TopologyError(f"{where}: fanouts {fan} multiply to {math.prod(fan)}, not to ranks = {ranks}")
    return fan


def load_topology(spec, ranks: int | None = None) -> Topology:
    """A :class:`Topology` from a preset string, a JSON file path, a dict, or a
    Topology (returned as is); ``ranks`` checks the size."""
    if isinstance(spec, Topology):
        t = spec
    elif isinstance(spec, dict):
        t = topology_from_json(spec)
    else:
        s = str(spec)
        t = parse_preset(s)
        if t is None:
            path = Path(s)
            if not path.is_file():
                raise TopologyError(f"unknown topology {s!r}: not a file and not a preset ({PRESET_HELP})")
            if path.suffix.lower() in (".yaml", ".yml"):
                raise TopologyError(f"{path}: YAML topologies need pyyaml, which is not installed; use JSON")
            from .._files import read_json   # regular file, size before reading, UTF-8, depth / NaN limits
            from .._budget import memory_budget
            d = read_json(path, max_bytes=min(1 << 30, memory_budget() // JSON_EXPANSION), what="topology",
                          error=TopologyError)
            t = topology_from_json(d, source=str(path))
    if ranks is not None:
        t.check_ranks(int(ranks))
    return t


def write_topology(t: Topology, path) -> Path:
    """Write ``t`` as JSON, atomically."""
    from .._atomic import write_json_atomic
    return write_json_atomic(t.describe(), path)


__all__ = ["Topology", "TopologyError", "Level", "Link", "tree", "matrix", "dgx1", "load_topology",
           "topology_from_json", "write_topology", "parse_preset"]
