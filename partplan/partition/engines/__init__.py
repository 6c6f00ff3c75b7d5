"""The partitioning engines behind one interface (:func:`run_backend`): one module per engine —
its run function, its typed context and its registration in :mod:`partplan.partition.registry`.

Single-process engines, registered in this order (the first registered with a model in
``default_for`` is that model's default):

- :mod:`.metis` (pymetis, METIS 5.1, graph model) — the graph model's default;
- :mod:`.mtkahypar` (hypergraph km1 / cut / soed; graph mode, edge cut) — the hypergraph and
  stochastic models' default;
- :mod:`.kahypar` (a child process, INI from :mod:`.kahypar_ini`);
- :mod:`.kaminpar` (KaMinPar 3.7, graph model, edge cut);
- :mod:`.stream` (Fennel / LDG streaming, graph model);
- :mod:`.baselines` (random, block, striped, degree-rr).

Engines of many MPI processes (``partition(..., nprocs=N)``, ``--nprocs N``) are entries of
the same registry, with an ``mpi_run``: :mod:`.zoltan` (Zoltan PHG), :mod:`.ptscotch`
(PT-Scotch) and :mod:`.stream` (which runs both ways).

Inputs are validated before an engine runs because the engines check nothing (pymetis) or exit
the process (kahypar).
"""
from __future__ import annotations

import numpy as np

from ..._process import engine_output_to_stderr
from ...errors import BackendUnavailableError, PartitionError, UnknownOptionError
from ...graph import Graph
from ...hypergraph import Hypergraph
from ..options import DEFAULT_IMBALANCE, _check_k, check_imbalance
from ..registry import (REGISTRY, Backend, backend_names, default_backend, get_backend, in_process_backend,  # noqa: F401
                        mpi_engine_names, register)
from ..schema import GROUPS, PLANNER_ENGINES, Opt, Schema
# the engines, in registration order (each module registers itself on import)
from . import metis as _metis_engine  # noqa: E402,F401
from . import mtkahypar as _mtkahypar_engine  # noqa: E402,F401
from . import kahypar as _kahypar_engine  # noqa: E402,F401
from . import kaminpar as _kaminpar_engine  # noqa: E402,F401
from . import stream as _stream_engine  # noqa: E402,F401
from . import baselines  # noqa: E402,F401
from . import zoltan as _zoltan_engine  # noqa: E402,F401
from . import ptscotch as _ptscotch_engine  # noqa: E402,F401
from .kahypar import kahypar_hypergraph  # noqa: E402,F401
from .metis import metis  # noqa: E402,F401
from .mtkahypar import (PRESETS, _mtk_errors, check_preset, hypergraph, mtk_context, mtk_hypergraph,  # noqa: E402,F401
                        mtk_threads, mtkahypar_graph, mtkahypar_hypergraph)


def engine_schema(engine: str) -> Schema:
    """The option schema of ``engine``: a planner engine (fast, auto) or a registry entry
    (its typed ``schema``, else untyped rows for its ``options``)."""
    if engine == "fast":  # METIS + the km1 V-cycle: METIS's options
        return get_backend("metis").schema
    if engine in PLANNER_ENGINES:
        return GROUPS[engine]
    b = get_backend(engine)
    if b.schema is not None:
        return b.schema
    return {name: Opt(name, "any", None, "engine option (untyped)") for name in sorted(b.options)}


def engines() -> tuple[str, ...]:
    """Every engine with a schema: the registry's (in one process or on MPI processes), then fast and auto."""
    return tuple(REGISTRY) + PLANNER_ENGINES


def check_options(engine: str, options: dict, extra: tuple[str, ...] = ()) -> dict:
    """The one check of an engine's options (partition/schema.py's errors).

    >>> check_options("metis", {"recursive": True})
    {'recursive': True}
    >>> check_options("metis", {"recursive": "yes"})
    Traceback (most recent call last):
    ...
    partplan.errors.OptionError: metis option recursive (recursive bisection instead of direct k-way) must be True or False, got 'yes'

    ``options`` checked against ``engine``'s schema (the module doc's errors);
    ``extra``: other option names valid here (listed in the unknown-option error).
    Returns the normalized dict (same keys)."""
    schema = engine_schema(engine)
    unknown = sorted(set(options) - set(schema))
    if unknown:
        valid = ", ".join(list(schema) + [e for e in extra if e not in schema]) or "none"
        what = {"fast": "preset 'fast' (METIS, then the km1 V-cycle)",
                "auto": "the default pipeline (preset 'auto')"}.get(engine, f"engine {engine!r}")
        raise UnknownOptionError(f"{what} does not take option(s) {', '.join(unknown)}; it takes: {valid}")
    return {name: schema[name].check(v, engine) for name, v in options.items()}


#: no engine given with ``nprocs``: the per-graph choice of :func:`partplan.partition.pipeline.distributed.default_engine`
DEFAULT_MPI_ENGINE = "auto"
#: the engines that choice is made among (:func:`partplan.partition.pipeline.engine_rule.choose_engine`)
RULE_ENGINES = ("zoltan", "ptscotch", "stream")


def check_mpi_engine(engine: str | None, nprocs: int, k: int, options: dict | None = None) -> str:
    """The engine to run, after every check that needs no graph (the registry's MPI engines, what
    each still needs installed, its options against its context); raises one PartplanError."""
    from .mpilibs import INSTALL_HINT
    engine = DEFAULT_MPI_ENGINE if engine is None else engine
    if engine not in mpi_engine_names() + (DEFAULT_MPI_ENGINE,):
        raise BackendUnavailableError(f"--engine {engine} does not run distributed; with --nprocs use one of "
                                      f"{', '.join(mpi_engine_names())}")
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or int(nprocs) < 1:
        raise PartitionError(f"--nprocs must be an integer >= 1, got {nprocs!r}")
    # the MPI processes import partplan's engines, not the caller's script: an engine the caller
    # registered (or re-registered under a built-in name the default rule may choose) is refused
    # before the launch
    for name in ((engine,) if engine != DEFAULT_MPI_ENGINE else RULE_ENGINES):
        home = str(getattr(get_backend(name).mpi_run, "__module__", "") or "") if name in REGISTRY else "partplan."
        if not home.startswith("partplan."):
            raise BackendUnavailableError(
                f"engine {name!r} was registered by the caller ({home or 'no module'}), so the MPI processes of "
                f"--nprocs do not have it (they import partplan's own engines, partplan/partition/engines/)"
                + ("; the default rule chooses among them" if name != engine else "") + ": run it in one process")
    if k < 1:
        raise PartitionError(f"-k must be at least 1, got {k}")
    taken = set().union(*(engine_schema(e) for e in mpi_engine_names()))
    alien = sorted(name for name in (options or {}) if name not in taken)
    if alien:   # an option of the one-process engines: no distributed engine takes it
        from ..context import with_flags
        said = with_flags(alien)
        raise BackendUnavailableError(f"{said} {'does' if len(alien) == 1 else 'do'} not apply with --nprocs: no "
                                      f"distributed engine ({', '.join(mpi_engine_names())}) takes "
                                      f"{'it' if len(alien) == 1 else 'them'}")
    if options and engine == DEFAULT_MPI_ENGINE:
        raise BackendUnavailableError(f"option(s) {', '.join(sorted(options))} need an explicit --engine with "
                                      f"--nprocs (one of {', '.join(mpi_engine_names())})")
    if options:
        check_options(engine, options)
    need = get_backend("stream" if engine == DEFAULT_MPI_ENGINE else engine).mpi_needs()   # auto: checked once read
    if need:
        raise BackendUnavailableError(f"the distributed engine {engine} needs {', '.join(need)}; install: "
                                      f"{INSTALL_HINT}")
    return engine


BASELINES = backend_names("baseline")
BACKENDS = backend_names()


# ------------------------------------------------------------ one interface
def run_backend(name: str, model_obj: Graph | Hypergraph, k: int, *, imbalance: float = DEFAULT_IMBALANCE, seed: int = 0,
                graph: Graph | None = None, **opts) -> tuple[np.ndarray, dict]:
    """Partition ``model_obj`` into ``k`` parts with backend ``name`` (see :class:`Backend`).

    model_obj : a :class:`Graph` (metis; mtkahypar graph mode; baselines) or a
        :class:`Hypergraph` (mtkahypar, kahypar). Baselines take a Graph or
        ``n`` via the hypergraph's vertex count (degree-rr needs a Graph).
    opts : backend options — mtkahypar: preset, objective (km1|cut|soed),
        threads, handoff (arrays|file); kahypar: objective, ini, quality,
        timeout; metis: recursive; kaminpar: context (or preset), threads. An option a backend does not take raises
        BackendUnavailableError (never ignored).
    Returns (part int64[n], info) where info holds the engine's own objective
    (``km1`` / ``cut`` / ``edge_cut``) when it reports one.
    """
    b = in_process_backend(name)
    extra = set(opts) - b.options
    if extra:
        raise UnknownOptionError(f"backend {name!r} does not take option(s) {', '.join(sorted(extra))}")
    _check_k(model_obj.n, k)
    check_imbalance(imbalance)
    with engine_output_to_stderr():      # METIS's printf diagnostics must not reach --json's stdout
        return b.run(model_obj, k, imbalance=imbalance, seed=seed, graph=graph, **opts)
