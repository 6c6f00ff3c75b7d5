"""``--topology T --route R --map M`` for analyze / partition / plan: the parsing.

The planning itself is the library's :class:`partplan.topology.planning.TopologyPlan`
(checks before any work, ``--map`` placement, the route's layout, the
``topology`` object); :class:`TopologyOptions` builds one from the parsed
arguments.
"""
from __future__ import annotations

from partplan.topology import PRESET_HELP
from partplan.topology.planning import TopologyPlan


def add_topology_args(p) -> None:
    """Add --topology, --route, --map to an argparse parser."""
    from partplan.topology.mapping import MAP_METHODS
    from partplan.layouts.routed import ROUTES
    g = p.add_argument_group("topology (hierarchy-aware plans, docs/guide/topology.md)")
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


def _check_preset_size(spec, k) -> None:
    """A ``tree:AxBx...`` preset's ranks (the product of its fanouts) checked
    before the topology is built (it holds ranks × ranks matrices): equal to
    ``-k`` when given, and its matrices within the memory budget
    (:func:`~partplan.topology.machine.check_matrix_budget`). One error naming --topology."""
    import re

    from partplan.errors import OptionError
    from partplan.topology.machine import check_matrix_budget
    m = re.fullmatch(r"tree:(\d+(?:x\d+)+)(?::[^:]+)?", str(spec or "").strip().lower())
    if not m:
        return
    fanouts = [int(f) for f in m.group(1).split("x")]
    if min(fanouts) < 1:
        return      # the preset's own error (fanouts >= 1) comes when it is read
    ranks = 1
    for f in fanouts:
        ranks *= f
    if k is not None and ranks != int(k):
        raise OptionError(f"--topology {spec}: {ranks} ranks, but -k is {k} (one rank per part)")
    check_matrix_budget(ranks, f"--topology {spec}")


class TopologyOptions(TopologyPlan):
    """The parsed --topology / --route / --map / --route-level of one command (``layout``: the
    command's --layout spec or None), as a :class:`~partplan.topology.planning.TopologyPlan`."""

    def __init__(self, args, layout: str | None = None):
        _check_preset_size(getattr(args, "topology", None), getattr(args, "k", None))
        super().__init__(getattr(args, "topology", None), getattr(args, "route", None),
                         getattr(args, "map_method", None), getattr(args, "route_level", None), layout)
        if getattr(args, "ownership", None) == "decoupled":
            self.refuse_owners("with --ownership decoupled")
        own_threads = getattr(args, "backend", None) == "mtkahypar" and getattr(args, "threads", None) is not None
        if self.map == "steiner" and not own_threads:
            # improve_mapping is reproducible on one Mt-KaHyPar thread only; the pool is set once per process,
            # so before any start uses it (the default pipeline's start is the same at any count).
            # --engine mtkahypar --threads N keeps the threads asked for, and with them Mt-KaHyPar's own
            # run-to-run variation
            from partplan.partition.engines.mtkahypar import mtk_initializer
            mtk_initializer(1)


def print_topology(d: dict | None, file=None) -> None:
    """Human-readable lines of a ``topology`` object (checked with the manifest:
    :func:`partplan.program.checks.check_topology_object`)."""
    if not d or "cost" not in d:     # no figures (a description alone): nothing to print
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
