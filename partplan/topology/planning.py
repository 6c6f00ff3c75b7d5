"""Topology-aware planning in the library: ``topology`` + ``route`` + ``map``.

:class:`TopologyPlan` loads and checks a topology with its route and mapping
before any expensive work (unknown preset, bad file, route without topology,
rank count mismatch: one :class:`~partplan.topology.TopologyError`), places a
partition on the topology's ranks (``map_method``), names the layout of the
route and computes the ``topology`` object
(:func:`partplan.metrics.topology.topology_metrics`) that ``analyze --json``
prints and plan manifests record. The CLI (``--topology T --route R --map M``
of analyze / partition / plan) only parses its options into one of these;
the error messages name the CLI's options, as the CLI is its main user.

Example
-------
>>> tp = TopologyPlan("tree:2x2", route="domain")
>>> tp.layout_spec()
'routed:domain:2'
"""
from __future__ import annotations

import numpy as np

from . import PRESET_HELP, TopologyError, load_topology


def _routable(layout) -> bool:
    """Whether --route / --map apply to ``layout`` (a spec, a Layout or None = the default 1d)."""
    if layout is None:
        return True
    from ..layouts import layout_class
    return layout_class(layout).routable


def _routed(layout) -> bool:
    """Whether ``layout`` (a spec or a Layout) is a routed one (its exchange goes through domains)."""
    from ..layouts import layout_class
    return layout_class(layout).routes


class TopologyPlan:
    """Topology-aware planning of one partition (module doc).

    Parameters
    ----------
    topology : a preset or file (:func:`partplan.topology.load_topology`); None: no topology.
    route : "flat" (default with a topology) | "source" | "domain" (:data:`partplan.layouts.routed.ROUTES`).
    map_method : "none" (default) | "greedy" | "steiner" | "hierarchical" (:data:`partplan.topology.mapping.MAP_METHODS`).
    route_level : route at this domain level only (default: every level, nested).
    layout : the layout spec the partition is for (None: 1d); route / map apply to 1d only.

    Raises :class:`~partplan.topology.TopologyError` for a bad combination, before any work.
    """

    def __init__(self, topology: str | None = None, route: str | None = None, map_method: str | None = None,
                 route_level: str | None = None, layout: str | None = None):
        self.spec, self.route, self.map, self.level_name = topology, route, map_method, route_level
        if self.spec is None and self.level_name is not None:
            raise TopologyError(f"--route-level {self.level_name} needs --topology T ({PRESET_HELP})")
        if self.spec is None:
            given = [f"{o} {v}" for o, v in (("--route", self.route), ("--map", self.map))
                     if v not in (None, "flat", "none")]
            if given:
                raise TopologyError(f"{given[0]} needs --topology T ({PRESET_HELP})")
            self.topo = None
            return
        self.topo = load_topology(self.spec)
        self.route = self.route or "flat"
        self.map = self.map or "none"
        if self.route != "flat" and not self.topo.levels:
            raise TopologyError(f"--route {self.route} needs a topology with domain levels; {self.spec} has none "
                                f"(give 'fanouts' in the file)")
        self.level = self.topo.level_index(self.level_name) if self.level_name is not None else None
        if self.level_name is not None and self.route == "flat":
            raise TopologyError(f"--route-level {self.level_name} applies to --route source / domain, not flat")
        if (self.route != "flat" or self.map != "none") and not _routable(layout):
            raise TopologyError(f"{self._given()} {self._verb()} to the 1d layout, not {layout}")
        if layout is not None and _routed(layout):
            want = self.layout_spec()    # the route this topology gives (None: flat)
            if want is None or want != (layout.spec if hasattr(layout, "spec") else str(layout).strip().lower()):
                raise TopologyError(f"--layout {layout} and --topology {self.spec} disagree: the topology "
                                    f"{'routes flat (give --route source or domain)' if want is None else f'gives {want}'}"
                                    f"; give --topology with --route (the routed layout follows from it), or "
                                    f"--layout alone")

    def refuse_owners(self, where: str) -> None:
        """One TopologyError when a route or a mapping is asked for a decoupled partition (``where``:
        how the owners came: "with --ownership decoupled", "to a decoupled partition"): its owners
        send the rows of H, the routes and the mapping move parts."""
        if self.topo is not None and (self.route != "flat" or self.map != "none"):
            raise TopologyError(f"{self._given()} {'do' if len(self._asked()) > 1 else 'does'} not apply {where} "
                                f"(its owners send the rows of H; the routes and the mapping move parts)")

    def _asked(self) -> list:
        return [f"{o} {v}" for o, v in (("--route", self.route), ("--map", self.map)) if v not in ("flat", "none")]

    def _given(self) -> str:
        """The routing / mapping options the user asked for, as they wrote them."""
        return " and ".join(self._asked())

    def _verb(self) -> str:
        return "apply" if len(self._asked()) > 1 else "applies"

    @property
    def active(self) -> bool:
        return self.topo is not None

    def check_ranks(self, k: int | None) -> None:
        if self.topo is not None and k is not None:
            self.topo.check_ranks(int(k))

    def sizes(self) -> list[int]:
        """Domain sizes the route goes through: --route-level's, else every distinct level size below
        the machine."""
        if self.level is not None:
            return [self.topo.levels[self.level].size]
        sizes = [lv.size for lv in self.topo.levels if lv.size < self.topo.ranks]   # a fanout-1 level repeats
        return list(dict.fromkeys(sizes)) or [self.topo.levels[0].size]                # the size below it

    def layout_spec(self) -> str | None:
        """The routed layout's spec, or None for flat."""
        if self.topo is None or self.route == "flat":
            return None
        from ..layouts import routed_layout
        return routed_layout(self.route, self.topo.ranks, sizes=self.sizes()).spec

    def place(self, graph, part: np.ndarray) -> np.ndarray:
        """``part`` mapped onto the topology (``--map``); records what the mapping gained."""
        self.map_info = None
        if self.topo is None or self.map == "none":
            return part
        from .mapping import map_parts
        new, self.map_info = map_parts(graph, part, self.topo, self.map)
        if self.route != "flat" and "rejected" not in self.map_info:
            # the mapping lowers the cost of the flat exchange; a routed one sends other rows (each
            # once per domain), so the placement is kept only where the route's own cost is not higher
            was, got = self._routed_cost(graph, part), self._routed_cost(graph, new)
            if got > was:
                self.map_info = dict(self.map_info, cost_rejected=self.map_info["cost_after"],
                                     cost_after=self.map_info["cost_before"], rejected=(
                    f"--route {self.route} costs {got:.6g} with it, above {was:.6g} without"))
                new = part
        if "rejected" in self.map_info:
            import warnings

            from ..errors import PartplanWarning
            warnings.warn(PartplanWarning(f"--map {self.map} not applied: {self.map_info['rejected']}"),
                          stacklevel=2)
        return new

    def _routed_cost(self, graph, part: np.ndarray) -> float:
        """The topology cost (Σ rows × cost per step, what ``topology.cost`` reports) of ``part``
        under the route."""
        from ..layouts import routed_layout
        from ..metrics.topology import exchange_steps, topology_metrics
        st = routed_layout(self.route, self.topo.ranks, sizes=self.sizes()).volumes(graph, part, f=1)
        return topology_metrics(exchange_steps(st), self.topo, row_bytes=1, route=self.route)["cost"]

    def prepare(self, graph, src, k: int | None, layout: str | None):
        """For plan / partition: ``src`` (a part vector or a planner Partition) placed
        on the topology (``--map``), the layout spec of the route (or ``layout``), and the plan's
        rank count (``k``, or the one worked out from ``src``: a placement may move an empty part
        last, so the placed vector's largest id no longer tells it)."""
        if self.topo is None:
            return src, layout, k
        if getattr(src, "owner", None) is not None:
            self.refuse_owners("to a decoupled partition")
        part = np.asarray(src.part if hasattr(src, "part") else src, dtype=np.int64)
        if k is None:        # the plan's ranks: the row blocks, times the replicas of a 1.5D layout
            from ..layouts import parse_layout
            parts = int(getattr(src, "row_blocks", 0) or (int(part.max()) + 1 if part.size else 1))
            if layout:
                k = parse_layout(layout, row_blocks=parts).ranks
            else:
                k = int(src.ranks) if hasattr(src, "ranks") else parts
        self.check_ranks(k)
        src_layout = getattr(src, "layout", None)
        if (self.route != "flat" or self.map != "none") and layout is None and not _routable(src_layout):
            raise TopologyError(f"{self._given()} {self._verb()} to 1d partitions; this one is for layout "
                                f"{src_layout}")
        new = self.place(graph, part)
        if hasattr(src, "part"):
            if new is not part:
                from ..metrics import analyze
                src.part = new
                if getattr(src, "stats", None) is not None:
                    src.stats = analyze(graph, new, k, f=src.stats.f, dtype=src.stats.dtype)
        else:
            src = new
        return src, self.layout_spec() or layout, k

    def apply(self, graph, p):
        """A planner :class:`~partplan.partition.api.Partition` ``p`` placed on the topology
        (``map_method``) and given the route's layout, as ``partplan partition --topology`` does."""
        p, spec, _ = self.prepare(graph, p, p.ranks, None)
        if spec is not None:
            from ..layouts import parse_layout
            lay = parse_layout(spec, p.ranks)
            p.layout, p.layout_params = spec, lay.params
            if getattr(p, "stats", None) is not None:   # the route's own figures (hops counted), as the plan's
                p.layout_stats = lay.volumes(graph, p.part, f=p.stats.f, dtype=p.stats.dtype)
        return p

    def metrics(self, graph, part, lay, f: int, dtype: str, owner=None) -> dict | None:
        """The ``topology`` object for ``part`` (its decoupled ``owner`` sending the rows of H,
        when given) under the route (None without --topology)."""
        if self.topo is None:
            return None
        from ..metrics.topology import exchange_steps
        from ..layouts import routed_layout
        if owner is not None:
            self.refuse_owners("to a decoupled partition")
        if self.route == "flat":
            st = lay.volumes(graph, part, f=f, dtype=dtype, **({"owner": owner} if owner is not None else {}))
        else:
            st = routed_layout(self.route, lay.ranks, sizes=self.sizes()).volumes(graph, part, f=f, dtype=dtype)
        return self.report(exchange_steps(st), f, dtype)

    def report(self, steps, f: int, dtype: str) -> dict:
        from ..metrics import dtype_bytes
        from ..metrics.topology import topology_metrics
        d = topology_metrics(steps, self.topo, row_bytes=int(f) * dtype_bytes(dtype), route=self.route)
        d["map"] = {"method": self.map, **(getattr(self, "map_info", None) or {})}
        return d

    def attach(self, plan) -> None:
        """Record the topology object (forward program) and the topology itself in the plan manifest."""
        if self.topo is None:
            return
        from ..metrics.topology import exchange_steps
        m = plan.manifest
        d = self.report(exchange_steps(plan.stats), m["f"], m["dtype"])
        params = m.get("layout_params") or {}
        d["route"] = params.get("route", "flat")  # what the plan does, also for an explicit --layout routed:...
        d["description"] = self.topo.describe()
        m["topology"] = d
