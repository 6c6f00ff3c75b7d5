"""The registry of partitioning engines: one :class:`Backend` entry per engine
(which models it partitions, which options it takes, whether it is a model's
default, how to run it). :mod:`.backends` registers the engines; the planner,
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
        engine's own objective when it reports one.
    """

    name: str
    models: tuple[str, ...]
    options: frozenset = frozenset()
    run: Callable = None
    default_for: tuple[str, ...] = ()
    schema: dict | None = None  # typed options (partition/schema.py); None: untyped rows for ``options``
    context: type | None = None


REGISTRY: dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    """Add a backend (a new engine is this one call)."""
    REGISTRY[backend.name] = backend
    return backend


def engine_contexts() -> dict[str, type]:
    """The registered engines' option contexts, by engine name, in registration order."""
    return {n: b.context for n, b in REGISTRY.items() if b.context is not None}


def backend_names(model: str | None = None) -> tuple[str, ...]:
    """Registered backends (of ``model``, when given), in registration order."""
    return tuple(n for n, b in REGISTRY.items() if model is None or model in b.models)


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
