"""KaHyPar configuration written by partplan (the wheel ships none, and
KaHyPar has no defaults by design).

The parameter *names* are KaHyPar's documented INI keys (see KaHyPar's
``config/`` directory and README); the values below are our choice for
"direct k-way, km1 (or cut), community-aware coarsening":

- preprocessing: Louvain community detection (also in initial partitioning)
  restricts coarsening to communities; min-hash sparsifier for huge nets;
- coarsening: multilevel heavy-edge rating, contract down to 160·k vertices;
- initial partitioning: recursive bisection over a pool of algorithms;
- refinement: k-way FM (``quality="fast"``) or k-way FM + HyperFlowCutter
  flows (``quality="default"``, the slower, better choice).
"""
from __future__ import annotations

from ...errors import BackendUnavailableError

_BASE = {
    # general
    "mode": "direct", "objective": "km1", "seed": "-1", "cmaxnet": "1000", "vcycles": "0",
    # preprocessing: sparsifier
    "p-use-sparsifier": "true", "p-sparsifier-min-median-he-size": "28",
    "p-sparsifier-max-hyperedge-size": "1200", "p-sparsifier-max-cluster-size": "10",
    "p-sparsifier-min-cluster-size": "2", "p-sparsifier-num-hash-func": "5",
    "p-sparsifier-combined-num-hash-func": "100",
    # preprocessing: community detection (community-aware coarsening)
    "p-detect-communities": "true", "p-detect-communities-in-ip": "true", "p-reuse-communities": "false",
    "p-max-louvain-pass-iterations": "100", "p-min-eps-improvement": "0.0001",
    "p-louvain-edge-weight": "hybrid", "p-large-he-threshold": "1000",
    "p-smallest-maxnet-threshold": "50000", "p-maxnet-removal-factor": "0.01",
    # coarsening
    "c-type": "ml_style", "c-s": "1", "c-t": "160", "c-rating-score": "heavy_edge",
    "c-rating-use-communities": "true", "c-rating-heavy_node_penalty": "no_penalty",
    "c-rating-acceptance-criterion": "best_prefer_unmatched",
    "c-fixed-vertex-acceptance-criterion": "fixed_vertex_allowed",
    # initial partitioning
    "i-mode": "recursive", "i-technique": "multi", "i-c-type": "ml_style", "i-c-s": "1", "i-c-t": "150",
    "i-c-rating-score": "heavy_edge", "i-c-rating-use-communities": "true",
    "i-c-rating-heavy_node_penalty": "no_penalty", "i-c-rating-acceptance-criterion": "best_prefer_unmatched",
    "i-c-fixed-vertex-acceptance-criterion": "fixed_vertex_allowed", "i-algo": "pool", "i-runs": "20",
    "i-bp-algorithm": "worst_fit", "i-bp-heuristic-prepacking": "false", "i-bp-early-restart": "true",
    "i-bp-late-restart": "true", "i-r-type": "twoway_fm", "i-r-runs": "-1", "i-r-fm-stop": "simple",
    "i-r-fm-stop-i": "50",
    # refinement
    "r-runs": "-1", "r-fm-stop": "adaptive_opt", "r-fm-stop-alpha": "1", "r-fm-stop-i": "350",
}
_FLOWS = {"r-flow-execution-policy": "exponential", "r-hfc-size-constraint": "mf-style", "r-hfc-scaling": "16",
          "r-hfc-distance-based-piercing": "true", "r-hfc-mbc": "true"}


def kahypar_ini(objective: str = "km1", *, quality: str = "default") -> str:
    """INI text for direct k-way KaHyPar with ``objective`` km1 or cut."""
    if objective not in ("km1", "cut"):
        raise BackendUnavailableError(f"unknown kahypar objective {objective!r}; choose km1 or cut")
    if quality not in ("fast", "default"):
        raise BackendUnavailableError(f"unknown kahypar quality {quality!r}; choose fast or default")
    cfg = dict(_BASE, objective=objective)
    if quality == "fast":
        cfg["r-type"] = f"kway_fm_{objective}" if objective == "km1" else "kway_fm"
    else:
        cfg["r-type"] = "kway_fm_hyperflow_cutter_km1" if objective == "km1" else "kway_fm_hyperflow_cutter"
        cfg.update(_FLOWS)
    return "".join(f"{k}={v}\n" for k, v in cfg.items())
