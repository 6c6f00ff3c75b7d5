"""Calls into the real partitioners, behind one interface (:func:`run_backend`).

- pymetis (METIS 5.1, graph model): :func:`metis`.
- mtkahypar (Mt-KaHyPar): :func:`mtkahypar_hypergraph` (hypergraph, km1 / cut /
  soed) and :func:`mtkahypar_graph` (graph mode, edge cut).
- kahypar (KaHyPar, GPL): :func:`kahypar_hypergraph`, always in a subprocess
  (KaHyPar exits the process on bad input and is not thread-safe) with an
  INI written by :mod:`partplan.partition.kahypar_ini`.
- kaminpar (KaMinPar 3.7, graph model, edge cut): :mod:`partplan.partition.kaminpar`
  (contexts default / fast / eco / strong / largek* / terapart*; ``context=``
  or ``preset=``).
- stream (graph model): the Fennel / LDG streaming partitioner of
  :mod:`partplan.partition.stream` (method, passes, balance, order, block_rows).
- baselines (:mod:`partplan.partition.baselines`).

:data:`REGISTRY` is the one list of backends: each :class:`Backend` entry says
which models it partitions, which options it takes, whether it is a model's
default and how to run it. The planner (:func:`partplan.partition.partition`),
:func:`run_backend` and the ``--backend`` choices of ``partplan partition``
all read it, so a new engine is one :func:`register` call.

Inputs are validated here because the engines check nothing (pymetis) or exit
the process (kahypar). Only the glue lives here; the engines do the work.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

from .._process import engine_output_to_stderr
from ..errors import BackendUnavailableError, PartitionError
from ..graph import Graph
from ..hypergraph import Hypergraph
from ..models import column_net, metis_graph
from . import baselines
from . import kaminpar as _kaminpar
from . import stream as _stream
from .handoff import pin_arrays, write_hmetis
from .options import _check_k, check_imbalance, engine_seed
from .context import (check_preset, MTKAHYPAR_METRICS, MTKAHYPAR_PRESETS, KaHyParContext, KaMinParContext, MetisContext,
                      MtKaHyParContext, StreamContext, schema_of)
from .registry import REGISTRY, Backend, backend_names, default_backend, get_backend, register  # noqa: F401 (re-exported)
from .schema import GROUPS, PLANNER_ENGINES, Opt, Schema

_MTK = {}  # process-wide mtkahypar Initializer (initialize() may run once per process)

PRESETS = MTKAHYPAR_PRESETS
MTK_OBJECTIVES = MTKAHYPAR_METRICS


_check_imbalance = check_imbalance  # ε in [0, 10): the one check (partition/options.py)


# --------------------------------------------------------------------- METIS
def metis(graph: Graph, k: int, *, imbalance: float = 0.03, seed: int = 0,
          recursive: bool | None = None, vertex_weights: str = "nnz") -> np.ndarray:
    """pymetis ``part_graph`` on the symmetrized graph without self loops.

    ufactor is always set from ``imbalance`` (METIS's RB default is 0.1%).
    """
    import pymetis

    _check_k(graph.n, k)
    _check_imbalance(imbalance)
    if k == 1:
        return np.zeros(graph.n, dtype=np.int64)
    xadj, adjncy, ew, vw = metis_graph(graph, vertex_weights=vertex_weights)
    opts = pymetis.Options(ufactor=max(1, int(round(imbalance * 1000))), seed=engine_seed(seed))
    try:
        res = pymetis.part_graph(k, adjacency=pymetis.CSRAdjacency(xadj, adjncy), vweights=vw,
                                 eweights=ew, recursive=recursive, options=opts)
    except RuntimeError as exc:  # pymetis turns every METIS error into this
        raise PartitionError(f"METIS failed on {graph.name} with k={k}: {exc}") from exc
    part = np.asarray(res.vertex_part, dtype=np.int64)
    if part.size != graph.n or part.min() < 0 or part.max() >= k:
        raise PartitionError(f"METIS returned an invalid partition for k={k}")
    return part


# ---------------------------------------------------------------- Mt-KaHyPar
def mtk_initializer(threads: int | None = None):
    """The process-wide mtkahypar initializer (thread count fixed at first call; ``None``: the
    count it already has, else 1 — the default pipeline's start may have set it to all cores)."""
    import mtkahypar

    if "init" not in _MTK:
        _MTK["threads"] = 1 if threads is None else int(threads)
        _MTK["init"] = mtkahypar.initialize(_MTK["threads"])
    elif threads is not None and _MTK["threads"] != int(threads):
        warnings.warn(f"mtkahypar already initialized with {_MTK['threads']} threads in this process; "
                      f"ignoring threads={threads}", RuntimeWarning, stacklevel=3)
    return _MTK["init"]


def mtk_threads() -> int | None:
    """Thread count mtkahypar was initialized with in this process (None: not yet)."""
    return _MTK.get("threads")


def mtk_context(k: int, imbalance: float, preset: str = "DEFAULT", objective: str = "km1",
                threads: int | None = None):
    import mtkahypar

    preset = check_preset(preset)
    objectives = {"km1": mtkahypar.Objective.KM1, "cut": mtkahypar.Objective.CUT,
                  "soed": mtkahypar.Objective.SOED}
    if objective not in objectives:
        raise BackendUnavailableError(f"unknown mtkahypar objective {objective!r}; choose km1, cut or soed")
    mtk = mtk_initializer(threads)
    ctx = mtk.context_from_preset(getattr(mtkahypar.PresetType, preset))
    ctx.set_partitioning_parameters(int(k), float(imbalance), objectives[objective])
    ctx.logging = False
    return mtk, ctx


def mtk_hypergraph(mtk, ctx, hg: Hypergraph, handoff: str = "arrays"):
    """Hand a :class:`Hypergraph` to mtkahypar: ``arrays`` (list of numpy pin
    views) or ``file`` (hMetis file in a temp dir). See :mod:`.handoff`."""
    if handoff == "arrays":
        vw = hg.vertex_weights if hg.vertex_weights is not None else np.ones(hg.n, dtype=np.int64)
        nw = hg.net_weights if hg.net_weights is not None else np.ones(hg.m, dtype=np.int64)
        return mtk.create_hypergraph(ctx, hg.n, hg.m, pin_arrays(hg), vw.tolist(), nw.tolist())
    if handoff == "file":
        with tempfile.TemporaryDirectory(prefix="partplan-mtk-") as d:
            path = write_hmetis(hg, Path(d) / "model.hgr")
            return mtk.hypergraph_from_file(str(path), ctx)
    raise BackendUnavailableError(f"unknown hypergraph handoff {handoff!r}; use 'arrays' or 'file'")


def _mtk_errors():
    import mtkahypar

    return (mtkahypar.InvalidInputError, mtkahypar.InvalidParameterError,
            mtkahypar.UnsupportedOperationError, mtkahypar.SystemError)


def mtkahypar_hypergraph(hg: Hypergraph, k: int, *, imbalance: float = 0.03, seed: int = 0,
                         preset: str = "DEFAULT", objective: str = "km1", threads: int | None = None,
                         handoff: str = "arrays", initial: np.ndarray | None = None,
                         vcycles: int = 1, fixed: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Partition a hypergraph with Mt-KaHyPar; returns (part, its own km1).

    ``initial``: improve this partition with ``vcycles`` V-cycles instead of
    partitioning from scratch. ``fixed``: int[n], the part each vertex is
    fixed to (-1: free; Mt-KaHyPar's fixed vertices; with ``initial`` a
    fixed vertex must already be in its part there). DEFAULT is not bit-reproducible across runs;
    DETERMINISTIC is. ``threads`` is fixed by the first call in a process.
    """
    import mtkahypar

    _check_k(hg.n, k)
    _check_imbalance(imbalance)
    mtk, ctx = mtk_context(k, imbalance, preset, objective, threads)
    if k == 1:
        return np.zeros(hg.n, dtype=np.int64), 0
    mtkahypar.set_seed(engine_seed(seed))
    try:
        h = mtk_hypergraph(mtk, ctx, hg, handoff)
        if fixed is not None:
            h.add_fixed_vertices(np.asarray(fixed, dtype=np.int64).tolist(), int(k))
        if initial is not None:
            phg = h.create_partitioned_hypergraph(ctx, int(k), np.asarray(initial, dtype=np.int64).tolist())
            phg.improve_partition(ctx, int(vcycles))
        else:
            phg = h.partition(ctx)
    except _mtk_errors() as exc:
        raise PartitionError(f"Mt-KaHyPar failed on {hg.name} with k={k}: {exc}") from exc
    return np.asarray(phg.get_partition(), dtype=np.int64), int(phg.km1())


def mtkahypar_graph(graph: Graph, k: int, *, imbalance: float = 0.03, seed: int = 0,
                    preset: str = "DEFAULT", threads: int | None = None) -> tuple[np.ndarray, int]:
    """Mt-KaHyPar graph mode (edge cut) on the METIS graph model; (part, cut)."""
    import mtkahypar

    _check_k(graph.n, k)
    _check_imbalance(imbalance)
    mtk, ctx = mtk_context(k, imbalance, preset, "cut", threads)
    if k == 1:
        return np.zeros(graph.n, dtype=np.int64), 0
    xadj, adjncy, ew, vw = metis_graph(graph)
    src = np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(xadj))
    keep = src < adjncy
    edges = np.stack([src[keep], adjncy[keep]], axis=1)
    mtkahypar.set_seed(engine_seed(seed))
    try:
        h = mtk.create_graph(ctx, graph.n, int(edges.shape[0]), edges.tolist(), vw.tolist(), ew[keep].tolist())
        phg = h.partition(ctx)
    except _mtk_errors() as exc:
        raise PartitionError(f"Mt-KaHyPar (graph mode) failed on {graph.name} with k={k}: {exc}") from exc
    return np.asarray(phg.get_partition(), dtype=np.int64), int(phg.cut())


def hypergraph(graph: Graph, k: int, **kw) -> np.ndarray:
    """Mt-KaHyPar on the column-net hypergraph of ``graph`` (minimizes 1D volume)."""
    part, _ = mtkahypar_hypergraph(column_net(graph), k, **kw)
    return part


# ------------------------------------------------------------------- KaHyPar
_KAHYPAR_WORKER = r"""
import json, sys
import numpy as np
import kahypar
d = sys.argv[1]
a = np.load(d + "/model.npz")
cfg = json.load(open(d + "/job.json"))
k = int(cfg["k"])
h = kahypar.Hypergraph(int(cfg["n"]), int(cfg["m"]), a["ptr"].tolist(), a["pins"].tolist(), k,
                       a["nw"].tolist(), a["vw"].tolist())
ctx = kahypar.Context()
ctx.loadINIconfiguration(d + "/kahypar.ini")
ctx.setK(k)
ctx.setEpsilon(float(cfg["epsilon"]))
ctx.setSeed(int(cfg["seed"]))
ctx.suppressOutput(True)
kahypar.partition(h, ctx)
part = np.fromiter((h.blockID(v) for v in range(int(cfg["n"]))), dtype=np.int64, count=int(cfg["n"]))
np.save(d + "/part.npy", part)
json.dump({"km1": int(kahypar.connectivityMinusOne(h)), "cut": int(kahypar.cut(h)),
           "imbalance": float(kahypar.imbalance(h, ctx))}, open(d + "/result.json", "w"))
"""


def kahypar_hypergraph(hg: Hypergraph, k: int, *, imbalance: float = 0.03, seed: int = 0,
                       objective: str = "km1", ini: str | os.PathLike | None = None,
                       quality: str = "default", timeout: float | None = None) -> tuple[np.ndarray, dict]:
    """Partition with KaHyPar (direct k-way) in a child process.

    ini : a user KaHyPar INI file (checked to exist); default: one generated
    by :func:`partplan.partition.kahypar_ini.kahypar_ini` for ``objective`` and
    ``quality`` ("fast" or "default"). Returns (part, {"km1", "cut",
    "imbalance"}) as KaHyPar itself reports them. The worker's per-vertex
    ``blockID`` loop runs in the child (KaHyPar has no bulk getter).
    """
    from .kahypar_ini import kahypar_ini

    try:
        import kahypar  # noqa: F401
    except ImportError as exc:
        raise BackendUnavailableError("kahypar is not installed (pip install kahypar)") from exc
    _check_k(hg.n, k)
    _check_imbalance(imbalance)
    if objective not in ("km1", "cut"):
        raise BackendUnavailableError(f"unknown kahypar objective {objective!r}; choose km1 or cut")
    if k == 1:
        return np.zeros(hg.n, dtype=np.int64), {"km1": 0, "cut": 0, "imbalance": 0.0}
    if ini is not None and not Path(ini).is_file():
        raise PartitionError(f"KaHyPar INI file {ini} does not exist")
    if hg.m == 0:  # KaHyPar needs at least one net: nothing can be cut, balance by blocks
        return baselines.block_partition(hg.n, k), {"km1": 0, "cut": 0, "imbalance": 0.0}
    nw = hg.net_weights if hg.net_weights is not None else np.ones(hg.m, dtype=np.int64)
    vw = hg.vertex_weights if hg.vertex_weights is not None else np.ones(hg.n, dtype=np.int64)
    with tempfile.TemporaryDirectory(prefix="partplan-kahypar-") as d:
        np.savez(Path(d) / "model.npz", ptr=hg.net_ptr, pins=hg.pins, nw=nw, vw=vw)
        text = Path(ini).read_text() if ini is not None else kahypar_ini(objective, quality=quality)
        (Path(d) / "kahypar.ini").write_text(text)
        (Path(d) / "job.json").write_text(json.dumps({"n": hg.n, "m": hg.m, "k": int(k),
                                                     "epsilon": float(imbalance), "seed": engine_seed(seed)}))
        try:
            proc = subprocess.run([sys.executable, "-c", _KAHYPAR_WORKER, d], capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise PartitionError(f"KaHyPar on {hg.name} (k={k}) exceeded {timeout} s") from exc
        res = Path(d) / "result.json"
        if proc.returncode != 0 or not res.is_file():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            raise PartitionError(f"KaHyPar failed on {hg.name} with k={k} (exit {proc.returncode}): "
                                 + " | ".join(tail))
        part = np.load(Path(d) / "part.npy")
        info = json.loads(res.read_text())
    return part, info


# ------------------------------------------------------------ the registry
def _run_metis(model_obj, k, *, imbalance, seed, graph=None, **opts):
    if not isinstance(model_obj, Graph):
        raise BackendUnavailableError("metis partitions graphs only (model='graph')")
    return metis(model_obj, k, imbalance=imbalance, seed=seed, **opts), {}


def _run_mtkahypar(model_obj, k, *, imbalance, seed, graph=None, **opts):
    if isinstance(model_obj, Graph):
        o = dict(opts)
        if o.pop("objective", "cut") != "cut" or o.pop("handoff", "arrays") != "arrays":
            raise BackendUnavailableError("mtkahypar graph mode takes objective 'cut' and arrays handoff only")
        part, cut = mtkahypar_graph(model_obj, k, imbalance=imbalance, seed=seed, **o)
        return part, {"cut": cut}
    part, km1 = mtkahypar_hypergraph(model_obj, k, imbalance=imbalance, seed=seed, **opts)
    return part, {"km1": km1}


def _run_kahypar(model_obj, k, *, imbalance, seed, graph=None, **opts):
    if not isinstance(model_obj, Hypergraph):
        raise BackendUnavailableError("kahypar partitions hypergraphs only (model='hypergraph' or 'stochastic')")
    return kahypar_hypergraph(model_obj, k, imbalance=imbalance, seed=seed, **opts)


def _degree_rr(model_obj, k, *, imbalance, seed, graph=None):
    g = model_obj if isinstance(model_obj, Graph) else graph
    if g is None:
        raise PartitionError("degree-rr needs the graph (row nnz)")
    return baselines.degree_round_robin(g, k), {}


# the engines' typed option sets: derived from their contexts (partition/context.py), where each
# option's default, help, range and CLI flag are declared once; partition/schema.py checks against them
METIS_SCHEMA = schema_of(MetisContext)
MTKAHYPAR_SCHEMA = schema_of(MtKaHyParContext)
KAHYPAR_SCHEMA = schema_of(KaHyParContext)
KAMINPAR_SCHEMA = schema_of(KaMinParContext)

def engine(name: str, models: tuple[str, ...], run, context: type, **kw) -> Backend:
    """An engine's registry entry whose options and schema are its context's fields:
    adding an engine is its module (run + context) and one ``register(engine(...))`` here."""
    schema = schema_of(context)
    return Backend(name, models, frozenset(kw.pop("options", schema)), run, schema=schema, context=context, **kw)


register(Backend("metis", ("graph",), frozenset({"recursive"}), _run_metis, default_for=("graph",),
                 schema=METIS_SCHEMA, context=MetisContext))
register(Backend("mtkahypar", ("graph", "hypergraph", "stochastic"),
                 frozenset({"preset", "objective", "threads", "handoff"}), _run_mtkahypar,
                 default_for=("hypergraph", "stochastic"), schema=MTKAHYPAR_SCHEMA, context=MtKaHyParContext))
register(Backend("kahypar", ("hypergraph", "stochastic"), frozenset({"objective", "ini", "quality", "timeout"}),
                 _run_kahypar, schema=KAHYPAR_SCHEMA, context=KaHyParContext))
register(Backend("kaminpar", ("graph",), frozenset({"context", "preset", "threads"}), _kaminpar.run,
                 schema=KAMINPAR_SCHEMA, context=KaMinParContext))


def _run_stream(model_obj, k, *, imbalance, seed, graph=None, **opts):
    """The streaming partitioner (stream.py, Fennel / LDG) on the graph model; info = its stats."""
    if not isinstance(model_obj, Graph):
        raise BackendUnavailableError("stream partitions graphs only (model='graph')")
    stats: dict = {}
    part = _stream.stream_partition(model_obj, k, eps=imbalance, seed=seed, stats=stats, **opts)
    return np.asarray(part, dtype=np.int64), stats


register(engine("stream", ("graph",), _run_stream, StreamContext))
register(Backend("random", ("baseline",), frozenset(),
                 lambda m, k, *, imbalance, seed, graph=None: (baselines.random_partition(m.n, k, seed), {}),
                 default_for=("baseline",), schema={}))
register(Backend("block", ("baseline",), frozenset(),
                 lambda m, k, *, imbalance, seed, graph=None: (baselines.block_partition(m.n, k), {}), schema={}))
register(Backend("striped", ("baseline",), frozenset(),
                 lambda m, k, *, imbalance, seed, graph=None: (baselines.striped_partition(m.n, k), {}),
                 schema={}))
register(Backend("degree-rr", ("baseline",), frozenset(), _degree_rr, schema={}))


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
    """Every engine with a schema: the registry's, then fast and auto."""
    return backend_names() + PLANNER_ENGINES


def check_options(engine: str, options: dict, extra: tuple[str, ...] = ()) -> dict:
    """The one check of an engine's options (partition/schema.py's errors).

    >>> check_options("metis", {"recursive": True})
    {'recursive': True}
    >>> check_options("metis", {"recursive": "yes"})
    Traceback (most recent call last):
    ...
    partplan.errors.OptionError: metis option recursive must be True or False, got 'yes'

    ``options`` checked against ``engine``'s schema (the module doc's errors);
    ``extra``: other option names valid here (listed in the unknown-option error).
    Returns the normalized dict (same keys)."""
    schema = engine_schema(engine)
    unknown = sorted(set(options) - set(schema))
    if unknown:
        valid = ", ".join(list(schema) + [e for e in extra if e not in schema]) or "none"
        raise BackendUnavailableError(f"engine {engine!r} does not take option(s) {', '.join(unknown)}; "
                                      f"it takes: {valid}")
    return {name: schema[name].check(v, engine) for name, v in options.items()}


BASELINES = backend_names("baseline")
BACKENDS = backend_names()


# ------------------------------------------------------------ one interface
def run_backend(name: str, model_obj: Graph | Hypergraph, k: int, *, imbalance: float = 0.03, seed: int = 0,
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
    b = get_backend(name)
    extra = set(opts) - b.options
    if extra:
        raise BackendUnavailableError(f"backend {name!r} does not take option(s) {', '.join(sorted(extra))}")
    _check_k(model_obj.n, k)
    _check_imbalance(imbalance)
    with engine_output_to_stderr():      # METIS's printf diagnostics must not reach --json's stdout
        return b.run(model_obj, k, imbalance=imbalance, seed=seed, graph=graph, **opts)
