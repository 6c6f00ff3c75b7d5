"""``--topology T --route R --map M`` for analyze / partition / plan, in one place.

:class:`TopologyOptions` loads and checks the options before any expensive
work (unknown preset, bad file, route without topology, rank count mismatch:
one :class:`~partplan.topology.TopologyError`), places a partition on the
topology's ranks (``--map``), names the layout of the route and computes the
``topology`` object (:func:`partplan.metrics.topology.topology_metrics`) that
``analyze --json`` prints and plan manifests record.
"""
from __future__ import annotations

import numpy as np

from partplan.topology import PRESET_HELP, TopologyError


def _routable(layout) -> bool:
    """Whether --route / --map apply to ``layout`` (a spec, a Layout or None = the default 1d)."""
    if layout is None:
        return True
    from partplan.layouts import layout_class
    return layout_class(layout).routable


def add_topology_args(p) -> None:
    """Add --topology, --route, --map to an argparse parser."""
    from partplan.mapping import MAP_METHODS
    from partplan.routing import ROUTES
    g = p.add_argument_group("topology (hierarchy-aware plans, docs/topology.md)")
    g.add_argument("--topology", metavar="T", help=f"machine topology: {PRESET_HELP}")
    g.add_argument("--route", choices=ROUTES, default=None,
                   help="flat: plain 1D all-to-all (default); source: each rank aggregates per target domain; "
                        "domain: gather at the source domain's monitor, one message per domain pair, "
                        "scatter in the target domain (each row crosses once per target domain)")
    g.add_argument("--route-level", metavar="NAME",
                   help="route at this domain level only (default: every level, nested — e.g. racks through "
                        "rack monitors, and inside a rack nodes through node monitors)")
    g.add_argument("--map", dest="map_method", choices=MAP_METHODS, default=None,
                   help="place parts on ranks to lower the topology cost: none (default), greedy "
                        "(greedy + pairwise swaps), steiner (Mt-KaHyPar improve_mapping, k <= 64), "
                        "hierarchical (partition again: METIS across domains first, then inside each)")


class TopologyOptions:
    """The parsed --topology / --route / --map of one command (``layout``: the
    command's --layout spec or None)."""

    def __init__(self, args, layout: str | None = None):
        from partplan.topology import load_topology
        self.spec = getattr(args, "topology", None)
        self.route = getattr(args, "route", None)
        self.map = getattr(args, "map_method", None)
        self.level_name = getattr(args, "route_level", None)
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
            raise TopologyError(f"--route {self.route} / --map {self.map} apply to the 1d layout, not {layout}")

    @property
    def active(self) -> bool:
        return self.topo is not None

    def check_ranks(self, k: int | None) -> None:
        if self.topo is not None and k is not None:
            self.topo.check_ranks(int(k))

    def sizes(self) -> list[int]:
        """Domain sizes the route goes through: --route-level's, else every level below the machine."""
        if self.level is not None:
            return [self.topo.levels[self.level].size]
        return [lv.size for lv in self.topo.levels if lv.size < self.topo.ranks] or [self.topo.levels[0].size]

    def layout_spec(self) -> str | None:
        """The routed layout's spec, or None for flat."""
        if self.topo is None or self.route == "flat":
            return None
        from partplan.layouts import routed_layout
        return routed_layout(self.route, self.topo.ranks, sizes=self.sizes()).spec

    def place(self, graph, part: np.ndarray) -> np.ndarray:
        """``part`` mapped onto the topology (``--map``); records what the mapping gained."""
        self.map_info = None
        if self.topo is None or self.map == "none":
            return part
        from partplan.mapping import map_parts
        new, self.map_info = map_parts(graph, part, self.topo, self.map)
        return new

    def prepare(self, graph, src, k: int | None, layout: str | None):
        """For plan / partition: ``src`` (a part vector or a planner Partition) placed
        on the topology (``--map``), and the layout spec of the route (or ``layout``)."""
        if self.topo is None:
            return src, layout
        part = np.asarray(src.part if hasattr(src, "part") else src, dtype=np.int64)
        if k is None:
            k = int(src.ranks) if hasattr(src, "ranks") else (int(part.max()) + 1 if part.size else 1)
        self.check_ranks(k)
        src_layout = getattr(src, "layout", None)
        if (self.route != "flat" or self.map != "none") and layout is None and not _routable(src_layout):
            raise TopologyError(f"--route {self.route} / --map {self.map} apply to 1d partitions; this one is "
                                f"for layout {src_layout}")
        new = self.place(graph, part)
        if hasattr(src, "part"):
            if new is not part:
                from partplan.metrics import analyze
                src.part = new
                if getattr(src, "stats", None) is not None:
                    src.stats = analyze(graph, new, k, f=src.stats.f, dtype=src.stats.dtype)
        else:
            src = new
        return src, self.layout_spec() or layout

    def metrics(self, graph, part, lay, f: int, dtype: str) -> dict | None:
        """The ``topology`` object for ``part`` under the route (None without --topology)."""
        if self.topo is None:
            return None
        from partplan.metrics.topology import exchange_steps
        from partplan.layouts import routed_layout
        if self.route == "flat":
            st = lay.volumes(graph, part, f=f, dtype=dtype)
        else:
            st = routed_layout(self.route, lay.ranks, sizes=self.sizes()).volumes(graph, part, f=f, dtype=dtype)
        return self.report(exchange_steps(st), f, dtype)

    def report(self, steps, f: int, dtype: str) -> dict:
        from partplan.metrics import dtype_bytes
        from partplan.metrics.topology import topology_metrics
        d = topology_metrics(steps, self.topo, row_bytes=int(f) * dtype_bytes(dtype), route=self.route)
        d["map"] = {"method": self.map, **(getattr(self, "map_info", None) or {})}
        return d

    def attach(self, plan) -> None:
        """Record the topology object (forward program) and the topology itself in the plan manifest."""
        if self.topo is None:
            return
        from partplan.metrics.topology import exchange_steps
        m = plan.manifest
        d = self.report(exchange_steps(plan.stats), m["f"], m["dtype"])
        params = m.get("layout_params") or {}
        d["route"] = params.get("route", "flat")  # what the plan does, also for an explicit --layout routed:...
        d["description"] = self.topo.describe()
        m["topology"] = d


def print_topology(d: dict | None, file=None) -> None:
    """Human-readable lines of a ``topology`` object."""
    if not d:
        return
    print(f"topology    {d.get('topology')}  route={d.get('route')}  map={d.get('map', {}).get('method')}  "
          f"cost={d['cost']:.6g}  alpha-beta={d['alpha_beta_s']:.4g} s  busiest rank {d['busiest_rank']} "
          f"({d['busiest_rank_rows']} crossing rows)", file=file)
    for lv in d["levels"]:
        print(f"  level {lv['name']:<8} ({lv['domains']} domains of {lv['domain_size']}): crossing rows "
              f"{lv['crossing_rows']}, crossing messages {lv['crossing_messages']}, bytes {lv['crossing_bytes']}",
              file=file)
    print(f"  local rows {d['local_rows']} (inside innermost domains), total rows {d['total_rows']} "
          f"in {d['steps']} exchange step(s)", file=file)
