"""The registry of partitioning engines: one :class:`Backend` entry per engine
(which models it partitions, which options it takes, whether it is a model's
default, how to run it in one process and how to run it on many MPI processes). :mod:`.backends` registers the engines; the planner,
``run_backend``, the option contexts and the CLI's choices all read
:data:`REGISTRY`. This module imports nothing else of the partitioner, so any
of its modules can ask the registry without an import cycle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import BackendUnavailableError


@dataclass(frozen=True)
class Backend:
    """One partitioner behind :func:`run_backend`.

    name : the ``backend=`` / ``--backend`` value.
    models : the planner models it partitions ("graph", "hypergraph",
        "stochastic", "baseline"); the first backend listing a model in
        ``default_for`` is that model's default.
    options : backend options it takes (anything else is an error, never ignored).
    schema : the typed option set (name -> :class:`~partplan.partition.schema.Opt`)
        ``partition()`` validates against (its names as the planner spells
        them: ``metric`` is the engine's ``objective``); None: untyped.
    context : the engine's typed option context (a frozen dataclass of
        :func:`~partplan.partition.context.option` fields: defaults, help, ranges,
        CLI flags); the options table, the CLI help and the schema read it from here.
    run : ``run(model_obj, k, *, imbalance, seed, graph, **options) -> (part, info)``;
        ``model_obj`` is the model's object (a Graph for graph/baseline, a
        Hypergraph otherwise), ``graph`` the input graph; info holds the
        engine's own objective when it reports one. None: the engine runs on MPI
        processes only.
    mpi_run : how the engine runs on the processes of ``partition(..., nprocs=N)``:
        ``mpi_run(comm, rows, n, k, *, imbalance, seed, symmetric, graph_path, **options)
        -> int32[rows]``, the parts of this process's rows (``rows``: its
        :class:`~partplan.partition.refinement.distributed.RowSlice`); collective over ``comm``.
        None: one process only.
    mpi_missing : ``mpi_missing() -> list[str]``: what its MPI run still needs installed (empty: it can
        run); None: nothing beyond partplan's own requirements.
    """

    name: str
    models: tuple[str, ...]
    options: frozenset = frozenset()
    run: Callable = None
    default_for: tuple[str, ...] = ()
    schema: dict | None = None  # typed options (partition/schema.py); None: untyped rows for ``options``
    context: type | None = None
    mpi_run: Callable | None = None
    mpi_missing: Callable[[], list] | None = None

    @property
    def in_process(self) -> bool:
        """Whether the engine runs in one process (``partition()`` without ``nprocs``)."""
        return self.run is not None

    @property
    def on_mpi(self) -> bool:
        """Whether the engine runs on MPI processes (``partition(..., nprocs=N)``)."""
        return self.mpi_run is not None

    @property
    def processes(self) -> tuple[str, ...]:
        """Where the engine runs: ``"one"`` (this process) and / or ``"mpi"`` (MPI processes)."""
        return tuple(where for where, yes in (("one", self.in_process), ("mpi", self.on_mpi)) if yes)

    def mpi_needs(self) -> list:
        """What is missing here for this engine to run on MPI processes (empty: nothing)."""
        return [] if self.mpi_missing is None else list(self.mpi_missing())


REGISTRY: dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    """Add a backend (a new engine is this one call)."""
    REGISTRY[backend.name] = backend
    return backend


def engine_contexts() -> dict[str, type]:
    """The registered engines' option contexts, by engine name, in registration order."""
    return {n: b.context for n, b in REGISTRY.items() if b.context is not None}


def backend_names(model: str | None = None) -> tuple[str, ...]:
    """Registered engines that run in one process (of ``model``, when given), in registration order."""
    return tuple(n for n, b in REGISTRY.items() if b.in_process and (model is None or model in b.models))


def mpi_engine_names() -> tuple[str, ...]:
    """Registered engines that run on MPI processes, in registration order."""
    return tuple(n for n, b in REGISTRY.items() if b.on_mpi)


def default_backend(model: str) -> str:
    """The default backend of ``model`` (the first registered with it in ``default_for``)."""
    for n, b in REGISTRY.items():
        if model in b.default_for:
            return n
    raise BackendUnavailableError(f"no backend partitions the {model!r} model")


def get_backend(name: str) -> Backend:
    if name not in REGISTRY:
        raise BackendUnavailableError(f"unknown backend {name!r}; choose one of {', '.join(REGISTRY)}")
    return REGISTRY[name]


def in_process_backend(name: str) -> Backend:
    """:func:`get_backend`, refused with one error naming ``nprocs`` when the engine runs on MPI
    processes only."""
    b = get_backend(name)
    if not b.in_process:
        raise BackendUnavailableError(f"engine {name} runs on MPI processes only: add --nprocs N "
                                      f"(partition(..., nprocs=N))")
    return b
