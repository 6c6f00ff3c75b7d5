"""Named partitioning methods: the one table behind ``--method`` of
``partplan analyze``, ``partplan demo`` and ``partplan bench``.

A *method* is a (model, backend) pair of the backend registry
(:data:`partplan.partition.engines.REGISTRY`): every baseline backend is a
method of its own name, ``metis`` partitions the graph model and
``hypergraph`` runs the hypergraph model's default backend (Mt-KaHyPar) on
the column-net hypergraph. Which tuning options a method takes is derived
from the registry, not listed by hand: ``imbalance`` for every real engine,
``seed`` for real engines and the random baseline, ``preset`` where the
backend takes one. A baseline backend added to the registry (an engine module
under partition/engines/) becomes a method with no edit here.

Examples
--------
>>> from partplan import Graph
>>> from partplan.bench.methods import METHODS, run_method
>>> g = Graph.from_edges([0, 1, 2, 3], [1, 2, 3, 0], n=4)
>>> part, info = run_method(g, "block", 2)
>>> [int(x) for x in part]
[0, 0, 1, 1]
>>> sorted(METHODS["hypergraph"].takes)
['imbalance', 'preset', 'seed']
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import PartitionError
from ..graph import Graph
from ..partition.engines import REGISTRY, backend_names, default_backend, run_backend
from ..partition.options import DEFAULT_IMBALANCE

_RANDOMIZED_BASELINES = frozenset({"random"})  # baselines whose result depends on the seed


@dataclass(frozen=True)
class Method:
    """One ``--method`` choice.

    name : what the user types.
    model : "baseline", "graph" or "hypergraph" (the column-net hypergraph).
    backend : the registry entry that runs it.
    takes : the options it reads, a subset of {"seed", "imbalance", "preset"};
        giving any other is a user error (see :func:`check_method_options`).
    """

    name: str
    model: str
    backend: str

    @property
    def takes(self) -> frozenset:
        opts = set()
        if self.model != "baseline":
            opts |= {"seed", "imbalance"}
        elif self.backend in _RANDOMIZED_BASELINES:
            opts.add("seed")
        if "preset" in REGISTRY[self.backend].options:
            opts.add("preset")
        return frozenset(opts)


def _table() -> dict[str, Method]:
    out = {name: Method(name, "baseline", name) for name in backend_names("baseline")}
    out["metis"] = Method("metis", "graph", "metis")
    out["hypergraph"] = Method("hypergraph", "hypergraph", default_backend("hypergraph"))
    return out


METHODS: dict[str, Method] = _table()
METHOD_NAMES: tuple[str, ...] = tuple(METHODS)


def get_method(name: str) -> Method:
    """The :class:`Method` called ``name``, or one PartitionError listing the choices."""
    if name not in METHODS:
        raise PartitionError(f"unknown method {name!r}; choose one of {', '.join(METHOD_NAMES)}")
    return METHODS[name]


def check_method_options(name: str, given) -> None:
    """Refuse options ``given`` (names) that ``name`` does not read — never ignore them."""
    extra = set(given) - get_method(name).takes
    if extra:
        raise PartitionError(f"--{sorted(extra)[0]} has no effect with --method {name}")


def run_method(graph: Graph, name: str, k: int, *, seed: int = 0, imbalance: float = DEFAULT_IMBALANCE,
               preset: str | None = None, threads: int | None = None) -> tuple[np.ndarray, dict]:
    """Partition ``graph`` into ``k`` parts (row blocks) with method ``name``.

    Options the method does not take are not passed on (``seed`` for block,
    ``preset`` for METIS); use :func:`check_method_options` first to refuse
    them when a user gave them. Returns (part int64[n], info) where info holds
    the engine's own objective when it reports one (``km1`` for Mt-KaHyPar).
    """
    m = get_method(name)
    opts = {}
    if preset is not None and "preset" in m.takes:
        opts["preset"] = preset
    if threads is not None and "threads" in REGISTRY[m.backend].options:
        opts["threads"] = threads
    if m.model == "hypergraph":
        from ..models import column_net
        model_obj = column_net(graph)
    else:
        model_obj = graph
    return run_backend(m.backend, model_obj, k, imbalance=imbalance, seed=seed, graph=graph, **opts)
