"""What ``partition()`` was asked to do, decided and checked before any work.

:func:`resolve` turns ``partition(graph, k, model=, backend=, objective=,
layout=, imbalance=, seed=, ownership=, **options)`` into one frozen
:class:`Request`: the engine (a registry backend, or the planner's ``fast``
/ ``auto``), the model, the objective, the layout and every option, checked
against its schema (:mod:`partplan.partition.schema`). Every error a user can
trigger with bad input is raised here, before a model is built or an engine
runs; the stages (:mod:`partplan.partition.pipeline.stages`) only do the work.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import BackendUnavailableError, PartitionError, UnknownOptionError
from ..graph import Graph, check_graph
from ..layouts import Layout, parse_layout
from .engines import (DEFAULT_MPI_ENGINE, backend_names, check_mpi_engine, check_options, default_backend,
                      get_backend, in_process_backend)
from .objectives import AUTO_PRESET, FAST_PRESET, check_objective
from .options import check_imbalance, check_seed
from .context import refuse_removed, with_flags
from .schema import AUTO, GROUPS, check_group
from .options import DEFAULT_IMBALANCE

MODELS = ("graph", "hypergraph", "stochastic", "baseline")
OWNERSHIP = ("conformal", "decoupled")
# default objective per model: the hypergraph model refines the bottleneck (max(send, recv)) since
# Mt-KaHyPar + refinement measured 1.15x plain Mt-KaHyPar's time (docs/design/refinement.md, "Defaults")
DEFAULT_OBJECTIVE = {"hypergraph": "max-both"}
#: the objectives the default pipeline serves: its own (max-both; None: the default), and the other
#: bottleneck objectives, refined for after it
PIPELINE_OBJECTIVES = (None, "max-both", "max-send", "max-recv", "weighted")
# options only the default pipeline takes (its volume_tolerance / time_limit are the refine group's,
# its threads the engines' name too)
AUTO_KEYS = tuple(name for name in AUTO if name not in ("volume_tolerance", "time_limit", "threads"))
_POST_GROUPS = ("hypergraph", "stochastic", "refine", "hubs", "ownership")


@dataclass(frozen=True)
class Request:
    """One checked ``partition()`` call. ``engine``: the registry backend, or
    "fast" / "auto"; ``backend``: the registry backend the engine runs first
    (auto: "metis", replaced by the chosen start); ``b``: row blocks;
    ``engine_opts``: the engine's options as the planner spells them
    (``metric`` = the engine's objective); ``groups``: the model / post-pass
    options by group (hypergraph, stochastic, refine, hubs, ownership, auto)."""

    k: int
    b: int
    lay: Layout
    model: str
    engine: str
    backend: str
    objective: str
    imbalance: float
    seed: int
    ownership: str
    engine_opts: dict
    groups: dict
    f: int = 128
    dtype: str = "float32"
    want_stats: bool = True
    progress: Callable[[str], None] | None = field(default=None, compare=False)
    nprocs: int | None = None   # MPI processes (:mod:`partplan.partition.pipeline.distributed`); None: this process

    def say(self, msg: str) -> None:
        if self.progress is not None:
            self.progress(msg)

    @property
    def bottleneck(self) -> bool:
        """Whether a bottleneck objective refines the partition (and b > 1)."""
        return self.objective != "total" and self.b > 1


def _choose(value, allowed, what: str) -> str:
    if value not in allowed:
        raise UnknownOptionError(f"unknown {what} {value!r}; choose one of {', '.join(allowed)}")
    return value


def _pop(opts: dict, names) -> dict:
    return {key: opts.pop(key) for key in list(names) if key in opts}


def _auto_layout(layout, k) -> bool:
    """The default pipeline refines the 1D volume of the row blocks: layouts where that counts."""
    try:
        lay = parse_layout(layout, k)
    except PartitionError:
        return False  # the caller's own check reports the bad layout
    return bool(lay.bottleneck and not lay.routes)


def _engine(model, backend, objective, layout, k, opts: dict, groups: dict) -> tuple[str, str | None, str | None,
                                                                                      str | None]:
    """(engine, model, backend, objective) as given or implied by the preset."""
    if "preset" in opts:
        opts["preset"] = check_planner_preset(opts["preset"], backend=backend)
        if backend is None and model in (None, "graph") and _kaminpar_only(opts["preset"]):
            backend = "kaminpar"      # a name only KaMinPar has (e.g. "strong") names its engine too
    # options of the stochastic model, the hubs pass and the hypergraph's nets select that path; the
    # owners (a post-pass after any engine, the default pipeline's included) do not
    plain = not any(groups[g] for g in ("stochastic", "hubs")) and \
        groups["hypergraph"].get("nets", "auto") == "auto"
    # a bottleneck objective other than max-both: the default pipeline (max(send, recv) bounds both
    # sides), then the refinement for that objective from its result (post_passes)
    if opts.get("preset") == AUTO_PRESET or (model is None and backend is None and "preset" not in opts and plain
                                             and objective in PIPELINE_OBJECTIVES and _auto_layout(layout, k)):
        opts.pop("preset", None)
        if model not in (None, "graph") or backend is not None or objective not in PIPELINE_OBJECTIVES:
            raise BackendUnavailableError("preset 'auto' chooses its own engines (METIS / KaMinPar starts, "
                                          "max-both refinement); drop model and backend, and give a bottleneck "
                                          "objective or none")
        return "auto", "graph", "metis", objective or "max-both"
    if groups["auto"]:
        raise BackendUnavailableError(f"option(s) {with_flags(groups['auto'])} apply to the default pipeline "
                                      f"(preset 'auto') only")
    if opts.get("preset") == FAST_PRESET and backend != "kaminpar":
        opts.pop("preset")
        if model not in (None, "graph"):
            raise BackendUnavailableError(f"preset 'fast' partitions the graph model with METIS; it does not "
                                          f"apply to model={model!r}")
        if backend not in (None, "metis"):
            raise UnknownOptionError(f"preset 'fast' runs METIS; backend {backend!r} does not apply (leave out "
                                     f"the backend, or the preset to run {backend})")
        return "fast", "graph", "metis", objective
    return "", model, backend, objective


def _check_graph_k(graph, k) -> int:
    if graph is not None:
        check_graph(graph, name="partition()'s graph", error=PartitionError)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise PartitionError(f"k must be an integer number of ranks, got {k!r}")
    if int(k) < 1:
        raise PartitionError(f"k must be >= 1, got {int(k)}")
    return int(k)


def _model_backend(model, backend, objective, layout, k, ownership, nets) -> tuple[str, str, str]:
    """The model, backend and objective, defaulted and checked against each other."""
    given = model
    model = "hypergraph" if model is None else model
    if backend is not None:
        if backend not in backend_names():
            in_process_backend(backend)     # an engine of MPI processes only: one error naming nprocs
        _choose(backend, backend_names(), "backend")
        if backend in backend_names("baseline"):
            model = "baseline"
        elif given is None and backend not in backend_names(model):  # an engine alone implies its model
            model = get_backend(backend).models[0]
    _choose(model, MODELS, "model")
    if objective is None:
        objective = DEFAULT_OBJECTIVE.get(model, "total")
        lay = parse_layout(layout, k)
        if not lay.bottleneck or lay.routes:  # refinement counts the 1D volume of the row blocks
            objective = "total"
    check_objective(objective)
    _choose(ownership, OWNERSHIP, "ownership")
    _choose(nets, ("auto", "forward", "joint"), "nets option")
    backend = backend or default_backend(model)
    if backend not in backend_names(model):
        raise BackendUnavailableError(f"backend {backend!r} does not partition the {model} model; "
                                      f"use one of {', '.join(backend_names(model))}")
    return model, backend, objective


def _check_context(req_model, backend, objective, ownership, groups: dict) -> None:
    """Options valid in themselves but not for this model / engine / objective."""
    nets = groups["hypergraph"].get("nets", "auto")
    if nets != "auto" and req_model != "hypergraph":
        raise BackendUnavailableError(f"nets={nets!r} applies to model='hypergraph' only")
    if groups["stochastic"] and req_model != "stochastic":
        raise BackendUnavailableError(f"option(s) {with_flags(groups['stochastic'])} apply to model='stochastic' only")
    if groups["ownership"] and ownership != "decoupled":
        raise BackendUnavailableError(f"option {with_flags(['ownership_method'])} applies to ownership='decoupled' only")
    cost = [name for name in ("alpha", "beta") if groups["refine"].get(name) is not None]
    if cost and objective != "weighted":   # the α-β model is what the weighted objective minimizes
        raise BackendUnavailableError(f"option(s) {with_flags(cost)} apply to objective='weighted' only (the "
                                      f"α-β time of the worst rank); objective is {objective!r}")
    if groups["refine"] and objective == "total":
        raise BackendUnavailableError(f"option(s) {with_flags(groups['refine'])} apply to bottleneck objectives only")
    hub = groups["hubs"].get("hub_factor")
    if hub is not None and hub > 0 and objective == "total":
        raise BackendUnavailableError(f"option {with_flags(['hub_factor'])} applies to bottleneck objectives only")
    if hub is not None and hub > 0 and (backend != "mtkahypar" or req_model != "hypergraph"):
        raise BackendUnavailableError(f"option {with_flags(['hub_factor'])} needs backend mtkahypar on the hypergraph "
                                      f"model (Mt-KaHyPar's fixed vertices)")
    if groups["stochastic"]:  # the sampler spec and θ / δ together: checked before any sampling
        from ..models.stochastic import hoeffding_nets, make_sampler
        make_sampler(groups["stochastic"].get("sampler"))
        hoeffding_nets(2, groups["stochastic"].get("theta", 0.1), groups["stochastic"].get("delta", 0.05))


def _check_layout(graph, lay: Layout, objective: str, ownership: str) -> None:
    if graph is not None and lay.row_blocks > graph.n:
        how = "" if lay.row_blocks == lay.ranks else f" (the {lay.name} layout of k={lay.ranks} ranks)"
        raise PartitionError(f"{lay.row_blocks} row blocks{how} exceed the n={graph.n} vertices of the graph "
                             f"{graph.name!r}")
    if objective != "total" and not lay.bottleneck:
        raise BackendUnavailableError(f"objective {objective!r} (--objective) refines the bottleneck of 1D "
                                      f"volume; layout {lay.spec} cannot use it (use --objective total, or layout "
                                      f"1d or 1.5d)")
    if ownership == "decoupled" and not lay.supports_owner:
        raise BackendUnavailableError(f"decoupled ownership is implemented for the 1D layout only, not {lay.spec}")


def _engine_options(engine: str, model: str, opts: dict, groups: dict, objective: str | None = None) -> dict:
    """The engine's options checked against its schema; auto also takes the refine group's
    volume_tolerance / time_limit and its own (its schema lists them all; those groups are
    checked already: only a name auto does not take is an error here). With a bottleneck
    objective other than max-both, the refine group's other options (alpha, beta, ...) are the
    refinement's after the pipeline (stages.post_passes), not the pipeline's."""
    if engine != "auto":
        return check_options(engine, opts, extra=_valid_elsewhere(model))
    refine = groups["refine"]
    if objective not in (None, "max-both"):
        refine = {name: v for name, v in refine.items() if name in AUTO}
    checked = {**groups["auto"], **refine}
    foreign = {name: v for name, v in checked.items() if name not in AUTO}
    return {**check_options("auto", {**opts, **foreign}), **checked}


def _valid_elsewhere(model: str) -> tuple[str, ...]:
    """The planner's and the post-passes' option names valid with ``model``."""
    groups = ("planner",) + tuple(g for g in _POST_GROUPS if g not in ("hypergraph", "stochastic") or g == model)
    return tuple(name for g in groups for name in GROUPS[g])


def resolve(graph, k, *, model=None, backend=None, objective=None, layout="1d", imbalance=DEFAULT_IMBALANCE, seed=0,
            ownership="conformal", options: dict | None = None, nprocs: int | None = None) -> Request:
    """Check everything ``partition()`` was given (module doc); returns the :class:`Request`.
    ``graph=None`` checks all but what needs the graph (k row blocks <= n): the CLI calls
    it so before reading the graph. ``nprocs``: the partitioner on that many MPI processes
    (one of the registry's MPI engines, or the per-graph choice; 1D, max(send, recv) refined)."""
    opts = dict(options or {})
    refuse_removed(opts)
    planner = check_group("planner", _pop(opts, GROUPS["planner"]))
    groups = {g: check_group(g, _pop(opts, GROUPS[g])) for g in _POST_GROUPS}
    groups["auto"] = check_group("auto", _pop(opts, AUTO_KEYS))
    if nprocs is not None:
        return _resolve_mpi(graph, k, nprocs, model=model, backend=backend, objective=objective, layout=layout,
                            imbalance=imbalance, seed=seed, ownership=ownership, opts=opts, groups=groups,
                            planner=planner)
    engine, model, backend, objective = _engine(model, backend, objective, layout, k, opts, groups)
    k = _check_graph_k(graph, k)
    model, backend, objective = _model_backend(model, backend, objective, layout, k, ownership,
                                               groups["hypergraph"].get("nets", "auto"))
    engine = engine or backend
    engine_opts = _engine_options(engine, model, opts, groups, objective)
    _check_context(model, backend, objective, ownership, groups)
    lay = parse_layout(layout, k)
    _check_layout(graph, lay, objective, ownership)
    imbalance, seed = check_imbalance(imbalance), check_seed(seed)
    return Request(k=k, b=lay.row_blocks, lay=lay, model=model, engine=engine, backend=backend,
                   objective=objective, imbalance=imbalance, seed=seed, ownership=ownership,
                   engine_opts=engine_opts, groups=groups, f=planner.get("f", 128),
                   dtype=planner.get("dtype", "float32"), want_stats=planner.get("stats", True),
                   progress=planner.get("progress"))


def _resolve_mpi(graph, k, nprocs, *, model, backend, objective, layout, imbalance, seed, ownership, opts: dict,
                 groups: dict, planner: dict) -> Request:
    """:func:`resolve` for ``nprocs`` MPI processes: one of the registry's MPI engines (or "auto",
    the per-graph choice), its options checked against its context, the distributed refinement's
    ``time_limit``; everything that applies to one process only is one error naming it."""
    from ..io.chunked import is_chunked
    if isinstance(nprocs, bool) or not isinstance(nprocs, (int, np.integer)) or int(nprocs) < 1:
        raise PartitionError(f"nprocs must be an integer >= 1, got {nprocs!r}")
    if graph is not None and not isinstance(graph, Graph) and \
            not (isinstance(graph, (str, os.PathLike)) and (is_chunked(graph) or Path(graph).is_file())):
        mod = type(graph).__module__.split(".")[0]
        what = f"{str(graph)[:60]!r}, which is neither" if isinstance(graph, (str, os.PathLike)) else \
            f"{type(graph).__name__ if mod == 'builtins' else f'{mod}.{type(graph).__name__}'}" + \
            (" (make it one with partplan.Graph.from_scipy)" if mod == "scipy" else "")
        raise PartitionError(f"partition(..., nprocs=N) needs a partplan Graph, a chunked graph directory or a "
                             f"graph file, got {what}")
    k = _check_graph_k(graph if isinstance(graph, Graph) else None, k)
    lay = parse_layout(layout, k)
    one_process = [name for name, given in (("model", model is not None),
                                            ("objective", objective not in (None, "max-both")),
                                            ("layout", lay != parse_layout("1d", k)),
                                            ("ownership", ownership != "conformal")) if given]
    one_process += [name for g, vals in groups.items() for name in vals if (g, name) != ("refine", "time_limit")]
    if one_process:
        said = with_flags(one_process)
        raise BackendUnavailableError(f"{said} {'does' if len(one_process) == 1 else 'do'} not apply with nprocs "
                                      f"(the distributed partitioner writes 1D partitions refined on max(send, recv))")
    engine = check_mpi_engine(backend, int(nprocs), k, opts)
    engine_opts = check_options(engine, opts) if engine != DEFAULT_MPI_ENGINE else {}
    model = "hypergraph" if engine == DEFAULT_MPI_ENGINE else get_backend(engine).models[0]
    if graph is not None and isinstance(graph, Graph) and k > graph.n:
        raise PartitionError(f"k={k} parts exceed the n={graph.n} vertices of the graph {graph.name!r}")
    return Request(k=k, b=k, lay=lay, model=model, engine=engine, backend=engine, objective="max-both",
                   imbalance=check_imbalance(imbalance), seed=check_seed(seed), ownership="conformal",
                   engine_opts=engine_opts, groups=groups, f=planner.get("f", 128),
                   dtype=planner.get("dtype", "float32"), want_stats=planner.get("stats", True),
                   progress=planner.get("progress"), nprocs=int(nprocs))


__all__ = ["AUTO", "DEFAULT_OBJECTIVE", "MODELS", "OWNERSHIP", "Request", "resolve"]


def _kaminpar_only(preset: str) -> bool:
    """A preset that only KaMinPar has (a KaMinPar context that is neither the planner's nor a
    Mt-KaHyPar preset)."""
    from .engines import PRESETS
    from .engines.kaminpar import CONTEXTS

    return preset in CONTEXTS and preset not in (FAST_PRESET, AUTO_PRESET) and preset.upper() not in PRESETS


def check_planner_preset(preset, backend: str | None = None) -> str:
    """"fast", "auto" (the default pipeline), a Mt-KaHyPar preset name
    (normalized, e.g. "quality" -> "QUALITY") or, for ``backend="kaminpar"``
    (or a name only KaMinPar has, e.g. "strong", which then runs KaMinPar), a KaMinPar context; else
    :class:`~partplan.errors.BackendUnavailableError` (as Mt-KaHyPar's own check)."""
    from .engines.kaminpar import CONTEXTS, check_context

    if backend == "kaminpar":
        return check_context(preset)
    if isinstance(preset, str) and preset.lower() in (FAST_PRESET, AUTO_PRESET):
        return preset.lower()
    from ..errors import BackendUnavailableError
    from .engines import PRESETS, check_preset
    try:
        return check_preset(preset)
    except BackendUnavailableError:
        if isinstance(preset, str) and preset.lower().replace("_", "-") in CONTEXTS:
            return check_context(preset)
        raise BackendUnavailableError(f"unknown mtkahypar preset {preset!r}; choose one of {', '.join(PRESETS)}; "
                                      f"or the planner's fast / auto; or (backend kaminpar) a KaMinPar context: "
                                      f"{', '.join(CONTEXTS)}") from None
