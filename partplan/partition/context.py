"""Typed contexts of the partitioner: one frozen dataclass per phase or engine, the one place an
option is declared (default, help, unit, range, CLI flag) and checked.

Each option is a dataclass field made by :func:`option`; its ``metadata`` feeds

* the option schemas of :mod:`partplan.partition.schema` and the engines' in
  :mod:`partplan.partition.engines` (:func:`schema_of`: one :class:`Opt` row per field),
* the help of ``partplan partition`` (:func:`cli_help`, :func:`cli_options`),
* the options table of the docs (:func:`options_table`).

:func:`resolve` builds a context from user options and is the only place they are checked (with
the checkers of :mod:`partplan.partition.options`); code that receives a context trusts it and
derives changed ones with :func:`dataclasses.replace`. The presets are functions returning a
context (:data:`PRESETS`: :func:`auto`, :func:`fast`, :func:`quality`).

Contexts:

* :class:`FMContext` — the FM passes of a refinement (refinement/refine.py, refinement/fm/);
* :class:`RefineContext` — one refinement: objective, limits, cost model, budget, its
  :class:`FMContext`;
* :class:`StartsContext`, :class:`BudgetContext` and :class:`PipelineContext` — the default
  pipeline (pipeline/auto.py): its starts, its refinement budget, the whole;
* :class:`PlannerContext`, :class:`HypergraphContext`, :class:`StochasticContext`,
  :class:`HubsContext`, :class:`OwnershipContext` — the planner's and the models' / post-passes'
  option groups of ``partition()``;
* each engine's context, declared in its module (:mod:`partplan.partition.engines`) and
  registered with it through :func:`engine` (``registry.Backend.context``).

>>> ctx = resolve(RefineContext, {"q": 8, "volume_tolerance": 0}, label="refine")
>>> ctx.fm.q, ctx.volume_tolerance
(8, 0.0)
>>> resolve(PipelineContext, {"refine_rounds": 0}, label="auto")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
partplan.errors.OptionError: auto option refine_rounds (...) must be an integer >= 1, got 0
>>> resolve(PipelineContext, {"select": "volume"}, label="auto")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
partplan.errors.OptionError: option select was removed: ...
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, ClassVar

from ..errors import BackendUnavailableError, OptionError
from ..metrics.cost import DEFAULT_ALPHA_S, DEFAULT_BETA_S_PER_BYTE
from .objectives import OBJECTIVES, check_objective
from .registry import Backend, engine_contexts, get_backend, register
from .options import (DEFAULT_IMBALANCE, DEFAULT_VOLUME_TOLERANCE, INT_MAX, MAX_WORKERS, check_bool, check_imbalance,
                      check_int, check_real, check_seed)

KINDS = ("int", "real", "bool", "choice", "text", "path", "callable", "any")


# ------------------------------------------------------------------------------------ one option
@dataclass(frozen=True)
class Opt:
    """One option as a schema row: ``name``, ``kind`` (one of :data:`KINDS`), ``default``
    (None: the engine's own), ``doc`` (with units), the closed range [lo, hi] of an int / real
    (``lo_open`` / ``hi_open``: lo / hi excluded), the ``choices`` of a choice, ``none_ok`` (None accepted: "use the
    default"), and ``normalize`` (the option's own check, returning the canonical value:
    presets, contexts, ε, seeds). Built from a context field by :func:`schema_of`."""

    name: str
    kind: str
    default: Any = None
    doc: str = ""
    lo: float = 0
    hi: float = math.inf
    lo_open: bool = False
    choices: tuple = ()
    none_ok: bool = False
    normalize: Callable | None = None
    hi_open: bool = False

    def check(self, value, engine: str):
        """``value`` checked (and normalized) for ``engine``: a wrong type or range is an
        :class:`OptionError` naming engine, option, value and range; a name outside the choices a
        :class:`BackendUnavailableError` naming them."""
        label = f"{engine} option {self.name} ({self.doc})"
        if value is None and (self.none_ok or self.kind == "any"):
            return None
        if self.normalize is not None:  # the option's own check (presets, contexts, dtypes, ε, seeds)
            return self.normalize(value)
        if self.kind == "int":
            return check_int(label, value, lo=int(self.lo), hi=int(min(self.hi, INT_MAX)))
        if self.kind == "real":
            return check_real(label, value, lo=self.lo, hi=self.hi, lo_open=self.lo_open, hi_open=self.hi_open)
        if self.kind == "bool":
            return check_bool(label, value)
        if self.kind == "choice":
            if not isinstance(value, str) or value not in self.choices:
                raise BackendUnavailableError(f"unknown {label} {value!r}; choose one of {', '.join(self.choices)}")
            return value
        if self.kind in ("text", "path") and not isinstance(value, (str, bytes)) and not hasattr(value, "__fspath__"):
            raise OptionError(f"{label} must be a {'file name' if self.kind == 'path' else 'string'}, got {value!r}")
        if self.kind == "callable" and not callable(value):
            raise OptionError(f"{label} must be a callable(str), got {value!r}")
        return value

    def describe(self) -> str:
        """One line: name, accepted values, default."""
        return f"{self.name}: {self.accepted()} (default {self.default!r}) — {self.doc}"

    def accepted(self) -> str:
        """The accepted values in words."""
        if self.kind == "choice":
            return "one of " + ", ".join(map(str, self.choices))
        if self.kind in ("int", "real"):
            fmt = (lambda x: str(int(x))) if self.kind == "int" else (lambda x: f"{x:g}")
            return f"{self.kind} {'>' if self.lo_open else '>='} {fmt(self.lo)}" + (
                f", {'<' if self.hi_open else '<='} {fmt(self.hi)}" if self.hi < INT_MAX else "")
        return self.kind


def option(default, help: str, *, kind: str | None = None, unit: str = "", lo: float = 0, hi: float = math.inf,
           lo_open: bool = False, hi_open: bool = False, choices: tuple = (), none_ok: bool | None = None, normalize: Callable | None = None,
           cli: str | None = None, public: bool = True, accepted: str = ""):
    """A context field: ``default`` and its metadata — ``help``, ``unit``, ``kind`` (inferred
    from the default when not given), range [lo, hi] (``lo_open``, ``hi_open``), ``choices``, ``none_ok``
    (default: True when the default is None), ``normalize`` (the option's own check), ``cli``
    (the ``partplan partition`` flag) and ``public`` (an option of ``partition()``; False: of
    the function that takes the context only, e.g. refine's FM knobs)."""
    if kind is None:
        kind = ("bool" if isinstance(default, bool) else "int" if isinstance(default, int)
                else "real" if isinstance(default, float) else "choice" if choices else "text")
    meta = {"help": help, "unit": unit, "kind": kind, "lo": lo, "hi": hi, "lo_open": lo_open, "hi_open": hi_open,
            "choices": choices,
            "none_ok": default is None if none_ok is None else none_ok, "normalize": normalize, "cli": cli,
            "public": public, "accepted": accepted}
    return field(default=default, metadata=meta)


def sub(cls):
    """A field holding a nested context (its options are named flat, as the caller gives them)."""
    return field(default_factory=cls, metadata={"context": cls})


# ------------------------------------------------------------------------------------ checkers
def _seconds(v) -> float:
    """A time limit in seconds: a number >= 0 (infinity allowed: no limit)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v < 0:
        raise OptionError(f"time_limit must be >= 0 seconds (or None), got {v!r}")
    return float(v)


def _width(v) -> int:
    from ..metrics.cost import check_width
    return check_width(v)


def _dtype(v):
    from ..metrics.cost import dtype_bytes
    if not isinstance(v, str):
        raise OptionError(f"option dtype must be a numpy dtype name, got {v!r}")
    dtype_bytes(v)  # an unknown dtype is an OptionError now, not after partitioning
    return v


def _vcycle(v):
    if v is True or v is False or v == "all":
        return "all" if v is True else v
    if v == "best":
        raise OptionError(REMOVED["vcycle='best'"])
    raise OptionError(f"auto option vcycle must be True or False ('all': the same as True), got {v!r}")


def check_starts(starts) -> tuple[str, ...]:
    """Start engines as a tuple (a list, or names joined by ',' or '+'), each a graph-model engine
    (the ``starts`` option's check, context.StartsContext)."""
    from .registry import get_backend  # filled by .backends, which the package imports first

    if isinstance(starts, str):
        starts = tuple(s for s in starts.replace("+", ",").split(",") if s)
    try:
        starts = tuple(starts)
    except TypeError:
        raise OptionError(f"starts must be engine names, got {starts!r}") from None
    if not starts:
        raise OptionError("starts must name at least one graph-model engine")
    for s in starts:
        if not isinstance(s, str) or "graph" not in get_backend(s).models:
            raise OptionError(f"start engine {s!r} does not partition the graph model")
    return starts


def _starts(v):
    if v is None or v == "auto":
        return None
    return check_starts(v)


# ------------------------------------------------------------------------------------ refinement
# one help per CLI flag: the default pipeline measures the growth from the lowest start's total volume,
# a refinement after an explicit engine from its input's (or volume_reference)
VOLUME_TOLERANCE_HELP = "refinement: allowed total volume growth"
TIME_LIMIT_HELP = ("refinement time limit instead of its counted-work budget (the result then depends on the "
                   "machine)")


@dataclass(frozen=True)
class VCycleContext:
    """The km1 V-cycles of :func:`partplan.partition.refinement.vcycle.vcycle_refine` (the fast
    preset, the default pipeline's starts). Every field is a tuning knob fixed by measurement
    (docs/design/planner.md); none is an option of ``partition()``."""

    cycles: int = option(3, "at most this many V-cycles (new clusters each time) ...", unit="cycles", public=False)
    min_cycle_gain: float = option(0.01, "... while the last one lowered km1 by at least this fraction",
                                   unit="fraction", hi=1.0, public=False)
    rounds: int = option(3, "label-propagation rounds per level", unit="rounds", public=False)
    max_net: int = option(16, "nets with more pins are ignored when rating clusters above level 0", unit="pins",
                          public=False)
    cluster_weight: float = option(1.0, "a cluster weighs at most this x (balance cap - ceil(W/k)) + twice the "
                                   "average vertex weight", unit="x", lo_open=True, public=False)
    coarse_vertices_per_part: int = option(20, "coarsening stops below this many vertices per part", unit="vertices",
                                           public=False)
    min_shrink: float = option(0.1, "coarsening stops when a level keeps more than 1 - this share of the vertices",
                               unit="fraction", hi=1.0, public=False)
    min_pin_shrink: float = option(0.1, "... or more than 1 - this share of the pins (hub nets)", unit="fraction",
                                   hi=1.0, public=False)
    own_rating: bool = option(True, "level 0 rates clusters by the two own nets u and v share (O(pins)); False: "
                              "heavy connectivity over all shared nets (O(sum |e|^2))", public=False)
    activate_max: int = option(100, "nets with more pins neither wake their pins after a move nor widen the band",
                               unit="pins", public=False)
    band: int = option(0, "only vertices within this many net-hops of a cut net move (0: the cut nets' pins only)",
                       unit="hops", public=False)
    band_share: float = option(0.8, "work on the whole hypergraph when the band holds more than this share of the "
                               "vertices", unit="fraction", lo_open=True, public=False)
    dense_candidates: bool = option(True, "nets with >= k pins add connectivity only to target parts found in the "
                                    "vertex's smaller nets", public=False)
    max_degree: float = option(16.0, "label propagation skips vertices in more than this many times the level's "
                               "average number of nets per vertex (at least 64)", unit="x", lo_open=True,
                               public=False)
    prune: bool = option(True, "skip vertices that can make no move of gain >= 0 (the result is the same)",
                         public=False)
    fine_every_cycle: bool = option(True, "False: only the last cycle refines the finest level (measured worse: "
                                    "0.905 vs 0.901 at 2.86 vs 3.0x METIS time)", public=False)


@dataclass(frozen=True)
class FMContext:
    """The FM passes of a refinement (refinement/refine.py; the kernels in refinement/fm/)."""

    patience: int = option(200, "moves without a new best state before a pass ends", unit="moves", public=False)
    max_passes: int = option(30, "at most this many passes", unit="passes", public=False)
    max_targets: int = option(3, "target parts evaluated per vertex (its best-connected ones)", unit="parts", lo=1,
                              hi=60, public=False)
    q: int = option(16, "exponent of the potential Φ (higher: closer to the plain max)", lo=1, hi=64, public=False)
    mu: float = option(0.05, "weight of Δ(total volume) in the gain", unit="1/M₀", public=False)
    overload: float = option(0.02, "a pass may overload a part by this fraction of the balance cap in between "
                             "(only states within the cap count)", unit="fraction", hi=1.0, public=False)
    big_degree: int | None = option(None, "vertices with more nets get a new key only at a pass's start and at the "
                                    "top of their heap (None: 4× the average degree, at least 64)", kind="int",
                                    unit="nets", public=False)
    blocked: bool = option(True, "a vertex whose best move the balance cap refuses waits for room in that part",
                           public=False)
    hot: float = option(0.9, "hot parts (cost >= hot × max): the candidates start around them", unit="fraction",
                        hi=1.0, public=False)
    sink: bool = option(True, "also try, per vertex, the cheapest part with room and the part with the most room "
                        "(not for objective 'total')", public=False)
    volume_slack: float = option(0.0, "a pass may exceed the total-volume limit by this fraction of the input's "
                                 "volume in between (only states within the limit count)", unit="fraction",
                                 public=False)
    max_moves_per_pass: int | None = option(None, "moves per pass at most (None: n)", kind="int", unit="moves", lo=1,
                                            public=False)
    min_gain: float = option(0.01, "a new pass starts only when the last one lowered the optimized value by more "
                             "than this fraction", unit="fraction", hi=1.0, public=False)
    multilevel: bool = option(True, "bottleneck objectives: one FM pass, then whole clusters of the partition's "
                              "own coarsening move, then FM on to convergence", public=False)


@dataclass(frozen=True)
class RefineContext:
    """One refinement of a partition (:func:`partplan.partition.refinement.refine.refine`): its objective,
    its limits (balance, total volume, a cap on max(send, recv)), its cost model, its budget and
    its FM passes. ``public`` fields are also options of ``partition()`` after an explicit engine
    (the "refine" group)."""

    cli_where: ClassVar[str] = "after an explicit engine (--preset QUALITY, --model ...)"
    objective: str = option("max-both", "what the refinement lowers: max over parts of max(send, recv), send, "
                            "recv, the α-β time of the worst rank, or the total volume", kind="choice",
                            choices=OBJECTIVES, normalize=check_objective, public=False)
    imbalance: float = option(DEFAULT_IMBALANCE, "ε: part weight (row nnz, at least 1) <= ⌊(1+ε)·⌈W/k⌉⌋, never worse than the "
                              "input", unit="fraction", hi=10.0, normalize=check_imbalance, public=False)
    volume_tolerance: float = option(DEFAULT_VOLUME_TOLERANCE, VOLUME_TOLERANCE_HELP,
                                     unit="fraction", cli="--volume-tolerance")
    seed: int = option(0, "seeds the order vertices enter the heap", normalize=check_seed, accepted="any integer",
                       public=False)
    time_limit: float | None = option(None, TIME_LIMIT_HELP, kind="real", unit="s", normalize=_seconds,
                                      cli="--time-limit")
    work_limit: int | None = option(None, "work units at most: the nets of the vertices whose moves were evaluated "
                                    "(counted, not timed: the same result on every machine)", kind="int",
                                    unit="work units", public=False)
    alpha: float = option(DEFAULT_ALPHA_S, "α-β model: seconds per message", unit="s")
    beta: float = option(DEFAULT_BETA_S_PER_BYTE, "α-β model: seconds per byte", unit="s/byte")
    f: int = option(128, "feature width (columns of H) for bytes", unit="columns", lo=1, normalize=_width,
                    public=False)
    dtype: str = option("float32", "feature dtype for bytes (a numpy name)", normalize=_dtype, public=False)
    volume_reference: int | None = option(None, "the total volume the tolerance is relative to (None: the "
                                          "input's)", kind="int", unit="rows of H", public=False)
    max_cost: float | None = option(None, "objective 'total' only: no move raises a part's max(send, recv) above "
                                    "this", kind="real", unit="rows of H", public=False)
    fm: FMContext = sub(FMContext)


@dataclass(frozen=True)
class DistributedRefineContext:
    """The refinement of a partition held by many MPI processes
    (:func:`partplan.partition.refinement.distributed.refine_distributed`): propose / commit rounds
    that lower max(send, recv) with exact volume deltas; on a graph of at most
    ``gather_max_pins`` pins (nonzeros + rows), the single-process refinement in process 0
    instead. ``time_limit`` is the one option of ``partition(..., nprocs=N)``; the others are
    knobs fixed by measurement (docs/design/distributed.md)."""

    rounds: int = option(200, "propose / commit rounds at most", unit="rounds", public=False)
    per_round: int = option(2048, "proposals per process per round at most", unit="moves", lo=1, public=False)
    theta: float = option(0.97, "a part is heavy when its send or recv is at least this x the maximum", unit="x",
                          hi=1.0, public=False)
    gamma: float = option(1.0, "price of one row of total volume, in bottleneck rows moved off the maximum",
                          unit="x", public=False)
    slack: float = option(0.01, "how far above the weight limit a bottleneck move may fill a part (repair moves "
                          "take it back)", unit="fraction", public=False)
    repair_rounds: int = option(50, "rounds of repair moves at the end at most", unit="rounds", public=False)
    stall_rounds: int = option(25, "stop when the maximum fell by less than stall_gain over this many rounds",
                               unit="rounds", lo=1, public=False)
    stall_gain: float = option(0.002, "see stall_rounds", unit="fraction", hi=1.0, public=False)
    pair_budget: int = option(1 << 22, "(net, proposal) pairs evaluated per round at most, over all processes",
                              unit="pairs", lo=1, public=False)
    coordinated_phases: int = option(4, "phases of coordinated moves (pulls, whole clusters) at most, each when "
                                     "the single moves stop; the single moves go on after one that lowered the "
                                     "maximum or the total (0: single moves only)", unit="phases", public=False)
    coordinated_max_nnz: int = option(1 << 27, "coordinated phases only on graphs with at most this many "
                                      "nonzeros (R-MAT 20, 31 M: -0.7 % max; R-MAT 24, 521 M: no gain for 2x the "
                                      "refinement's time)", unit="nonzeros", lo=0, public=False)
    phase_total_gain: float = option(0.0, "the single moves go on after a coordinated phase that lowered the "
                                     "maximum, or the total by more than this fraction", unit="fraction", lo=0.0,
                                     hi=1.0, public=False)
    pulls: int = option(2, "pull moves into the heavy parts, a pull into a full part taking a bottleneck move out "
                        "of it along: 2: in each coordinated phase (until a round moves none, 10 rounds at most); "
                        "1: in every round; 0: none", choices=(0, 1, 2), public=False)
    cluster_levels: int = option(0, "levels of whole-cluster moves each coordinated phase tries, the finest ones "
                                 "(0: none; 8 and more: every level)", unit="levels", public=False)
    cluster_weight: float = option(1.0, "heaviest cluster, x the balance slack (the weight limit less the "
                                   "average part weight)", unit="x", public=False)
    gather_max_pins: int = option(1 << 24, "a graph with at most this many pins (nonzeros + rows) is held whole "
                                  "instead of refined by the rounds: process 0 refines the engine's partition by "
                                  "the single-process bottleneck refinement (and see gather_pipeline) (0: never)",
                                  unit="pins", lo=0, public=False)
    gather_pipeline: int = option(1, "on a graph refined whole: 1: the single-process default pipeline also "
                                  "runs on it, in process 1 (process 0 with one process), and the engine's refined "
                                  "partition is kept only when no worse on both max(send, recv) and total volume, "
                                  "or lower on the maximum for at most 3 % more total (mpi_worker.engine_kept); "
                                  "0: the engine's refined partition alone", choices=(0, 1), public=False)
    passes_first: int = option(0, "connectivity passes (less total volume, no higher maximum) on the engine's "
                               "partition before the rounds, in process 0 (0: none; the passes after the rounds "
                               "run either way)", unit="passes", lo=0, hi=100, public=False)
    volume_passes: str = option("auto", "where the connectivity passes after the refinement run: 'process0' "
                                "(uint16[n, k] pin counts in process 0, rows in order), 'distributed' (rounds, "
                                "each process holding its own nets' counts), 'auto': process 0 while the counts "
                                "fit in its share of the graph (8 bytes per nonzero of its rows) or 1 GiB "
                                "(mpi_worker.PASS_BUFFER), whichever is more, and the passes' own 4 GiB "
                                "limit, else (and when the passes fail) distributed; a directed pattern "
                                "always distributed (docs/design/volume-passes.md)",
                                choices=("auto", "process0", "distributed"), public=False)
    time_limit: float | None = option(None, TIME_LIMIT_HELP, kind="real", unit="s", normalize=_seconds)
    seed: int = option(0, "seeds the proposals' order", normalize=check_seed, accepted="any integer", public=False)


# ------------------------------------------------------------------------------------ the default pipeline
@dataclass(frozen=True)
class StartsContext:
    """The default pipeline's starts: which engines, their km1 V-cycles, the cores."""

    cli_where: ClassVar[str] = "in the default pipeline"
    starts: tuple | None = option(None, "start engines (graph model), a list or 'a,b'; None or 'auto': by graph "
                                  "size (pipeline.starts_by_size)", kind="any", normalize=_starts)
    vcycle: bool | str = option("all", "km1 V-cycle on every start ('all', or True); False: none", kind="any",
                                normalize=_vcycle)
    threads: int | None = option(None, "cores the pipeline may use (None: all): V-cycles and refinements side by "
                                 "side, the Mt-KaHyPar start's threads (the same partition at any count); KaMinPar "
                                 "keeps one; not with --preset fast (one process, one thread)", kind="int", lo=1,
                                 hi=MAX_WORKERS, cli="--threads")


@dataclass(frozen=True)
class BudgetContext:
    """The default pipeline's refinement budget (counted work units, not seconds, unless a
    ``time_limit`` is given) and its rounds, volume round and cycles."""

    cli_where: ClassVar[str] = "in the default pipeline"
    refine_work: float | None = option(None, "first refinement round's work limit, units per pin of A + I; "
                                       "counted, not timed: the same result on every machine; None: 8 up to 1 M "
                                       "pins, 4 above (pipeline.LARGE_PINS)", kind="real",
                                       unit="work units per pin")
    rounds_work: float = option(0.25, "later rounds' work limit, x the first round's work", unit="x")
    refine_rounds: int = option(8, "refinement rounds at most (restarts from the result, next seed)",
                                unit="rounds", lo=1)
    volume_work: float = option(2.0, "volume round after the refinement: km1 FM that keeps max(send, recv), work "
                                "units per pin of A + I (0: none, and with it no refine/volume cycles and no "
                                "cluster volume rounds)", unit="work units per pin")
    refine_cycles: int | None = option(None, "refinement + volume round cycles at most (the refinement again from "
                                       "the volume round's result, ending at the first cycle that does not lower "
                                       "the max; none without the volume round); None: 3 up to 1 M pins, 1 "
                                       "above (pipeline.LARGE_PINS)", kind="int", unit="cycles", lo=1, hi=1000)
    cycle_work: float = option(0.25, "each later cycle's refinement work limit, x the work the refinement spent "
                               "(its rounds included)", unit="x")
    time_limit: float | None = option(None, TIME_LIMIT_HELP, kind="real", unit="s", cli="--time-limit")


@dataclass(frozen=True)
class PipelineContext:
    """The default pipeline (pipeline/auto.py, ``preset="auto"``): starts, V-cycles, the kept start,
    bottleneck refinement with its rounds, volume round and cycles."""

    cli_where: ClassVar[str] = "in the default pipeline"
    imbalance: float = option(DEFAULT_IMBALANCE, "ε: part weight (row nnz, at least 1) <= ⌊(1+ε)·⌈W/k⌉⌋", unit="fraction",
                              hi=10.0, normalize=check_imbalance, public=False)
    seed: int = option(0, "random seed of every stage", normalize=check_seed, accepted="any integer", public=False)
    refine: bool = option(True, "max-both bottleneck refinement of the kept start")
    volume_tolerance: float = option(DEFAULT_VOLUME_TOLERANCE, VOLUME_TOLERANCE_HELP,
                                     unit="fraction", cli="--volume-tolerance")
    allow_overload: bool = option(False, "only where one row outweighs a part's ε-limit (no partition is within "
                                  "ε): parts may stay above the limit as the start engine left them (METIS, "
                                  "KaMinPar) when that lowers max(send, recv); False: the least overloaded "
                                  "start is kept and no part grows above its heaviest part",
                                  cli="--allow-overload")
    start: StartsContext = sub(StartsContext)
    budget: BudgetContext = sub(BudgetContext)


# ------------------------------------------------------------------------------------ partition()'s groups
@dataclass(frozen=True)
class PlannerContext:
    """Options every engine of ``partition()`` takes."""

    f: int = option(128, "feature width (columns of H) for bytes", unit="columns", lo=1, cli="--features")
    dtype: str = option("float32", "feature dtype for bytes (a numpy name)", normalize=_dtype, cli="--dtype")
    stats: bool = option(True, "measure the partition exactly")
    progress: Callable | None = option(None, "progress callback, one str per step", kind="callable")


@dataclass(frozen=True)
class HypergraphContext:
    """The hypergraph model."""

    nets: str = option("auto", "auto: joint nets for a directed graph", choices=("auto", "forward", "joint"))


@dataclass(frozen=True)
class StochasticContext:
    """The stochastic hypergraph model (models/stochastic.py)."""

    sampler: Any = option(None, "neighbor[:B[:f1,f2]] | saint-node[:budget] | saint-rw[:roots[:length]]",
                          kind="any", cli="--sampler")
    theta: float = option(0.1, "Hoeffding θ", lo_open=True, cli="--theta")
    delta: float = option(0.05, "Hoeffding δ, in (0, 1)", lo_open=True, hi=1.0, hi_open=True, cli="--delta")
    min_batches: int | None = option(None, "sample at least this many batches", kind="int", unit="batches", lo=1)
    max_batches: int = option(100_000, "sample at most this many batches", unit="batches", lo=1)


@dataclass(frozen=True)
class HubsContext:
    """Hubs apart before the refinement (refinement/hubs.py; Mt-KaHyPar on the hypergraph model)."""

    hub_factor: float = option(2.0, "bottleneck objectives with Mt-KaHyPar: rows with more than this times TV/k "
                               "nonzeros that share a part are put in distinct parts before refinement (0: off)",
                               cli="--hub-factor")


@dataclass(frozen=True)
class OwnershipContext:
    """Decoupled ownership (refinement/ownership.py)."""

    ownership_method: str | None = option(None, "decoupled ownership solver (default lp, PuLP + CBC, up to 64 row "
                                          "blocks; greedy above)", kind="choice", choices=("greedy", "lp"),
                                          cli="--ownership-method")


# the option groups of partition() and the engines' contexts, by the names partition() uses
GROUP_CONTEXTS = {"planner": PlannerContext, "auto": PipelineContext, "hypergraph": HypergraphContext,
                  "stochastic": StochasticContext, "refine": RefineContext, "hubs": HubsContext,
                  "ownership": OwnershipContext}
# the engines' contexts are registered with the engines (registry.Backend.context: each engine module under engines/)

# options that existed for experiments only: a clear error instead of "unknown option"
REMOVED = {
    "select": "option select was removed: the default pipeline keeps the start with the lowest max(send, recv) "
              "(select='volume' measured worse on the bottleneck)",
    "km1_fm": "option km1_fm was removed: the km1 FM pass on the kept start gained <= 1 % of total volume and "
              "raised the bottleneck; the volume round after the refinement does that work",
    "full_updates": "option full_updates was removed: the FM passes always re-evaluate incrementally",
    "vcycle='best'": "vcycle='best' was removed: the V-cycle runs on every start (True) or on none (False)",
}


# ------------------------------------------------------------------------------------ fields and schemas
def options_of(cls) -> dict[str, dataclasses.Field]:
    """The option fields of context ``cls`` by flat name, nested contexts included (in order)."""
    out = {}
    for f in fields(cls):
        if "context" in f.metadata:
            out.update(options_of(f.metadata["context"]))
        else:
            out[f.name] = f
    return out


def _opt(f: dataclasses.Field) -> Opt:
    m = f.metadata
    return Opt(f.name, m["kind"], f.default, _doc(f), m["lo"], m["hi"], m["lo_open"], m["choices"], m["none_ok"],
               m["normalize"], m["hi_open"])


def schema_of(cls, public: bool = False) -> dict[str, Opt]:
    """The :class:`Opt` rows of context ``cls`` (name -> Opt), nested contexts flat; ``public``:
    only the options ``partition()`` takes."""
    return {name: _opt(f) for name, f in options_of(cls).items() if f.metadata["public"] or not public}


def engine(name: str, models: tuple[str, ...], run, context: type, *, options=None, **kw) -> Backend:
    """Register an engine whose options and schema are its context's fields: an engine is its
    module (its run function and its context) and this one call there. ``options``: the names
    ``run`` takes, when not every field of the context (None: all); ``kw``: the other
    :class:`~partplan.partition.registry.Backend` fields (``default_for``, ``mpi_run``, ``mpi_missing``)."""
    schema = schema_of(context)
    return register(Backend(name, models, frozenset(schema if options is None else options), run, schema=schema,
                            context=context, **kw))


def build(cls, values: dict, base=None):
    """A ``cls`` context from ``values`` (flat names, already checked) over ``base`` (default:
    the defaults). No check: for values :func:`resolve` has checked or code derives."""
    base = cls() if base is None else base
    changes = {}
    for f in fields(cls):
        inner = f.metadata.get("context")
        if inner is not None:
            mine = {n: v for n, v in values.items() if n in options_of(inner)}
            if mine:
                changes[f.name] = build(inner, mine, getattr(base, f.name))
        elif f.name in values:
            changes[f.name] = values[f.name]
    return replace(base, **changes)


def refuse_removed(options, where: str = "") -> None:
    """One :class:`OptionError` for an option that existed for experiments only (:data:`REMOVED`)."""
    for name in options:
        if name in REMOVED:
            raise OptionError(REMOVED[name] + (f" ({where})" if where else ""))


def resolve(cls, options: dict | None = None, *, label: str, base=None):
    """The one check of user ``options`` (flat names) for context ``cls``: every value checked
    by its field's :class:`Opt` (an unknown name, a wrong type or range: one error naming it),
    the context built over ``base`` (default: the defaults) and checked as a whole."""
    options = dict(options or {})
    refuse_removed(options)
    schema = schema_of(cls)
    unknown = sorted(set(options) - set(schema))
    if unknown:
        raise OptionError(f"{label} does not take option(s) {', '.join(unknown)}; it takes: {', '.join(schema)}")
    ctx = build(cls, {name: schema[name].check(v, label) for name, v in options.items()}, base)
    if isinstance(ctx, RefineContext) and ctx.max_cost is not None and ctx.objective != "total":
        raise OptionError(f"max_cost applies to objective='total' only, got objective={ctx.objective!r}")
    return ctx


def flat(ctx) -> dict:
    """A context's option values by flat name (nested contexts included)."""
    out = {}
    for f in fields(ctx):
        v = getattr(ctx, f.name)
        out.update(flat(v) if "context" in f.metadata else {f.name: v})
    return out


# ------------------------------------------------------------------------------------ presets
def auto(**options) -> PipelineContext:
    """The default pipeline (``preset="auto"``, what ``partition(graph, k)`` runs)."""
    return resolve(PipelineContext, options, label="auto")


def fast(**options):
    """``preset="fast"``: METIS (these options: its :class:`~partplan.partition.engines.metis.MetisContext`),
    then the km1 V-cycle (:mod:`partplan.partition.refinement.vcycle`; no options)."""
    return resolve(get_backend("metis").context, options, label="fast")


def quality(**options):
    """``preset="quality"``: Mt-KaHyPar QUALITY on the hypergraph model; the refinement after it is
    a :class:`RefineContext` (max-both, the explicit engines' work budget), its hubs a
    :class:`HubsContext`."""
    return resolve(get_backend("mtkahypar").context, {"preset": "QUALITY", **options}, label="mtkahypar")


PRESETS = {"auto": auto, "fast": fast, "quality": quality}


# ------------------------------------------------------------------------------------ CLI and docs
def _all_contexts():
    seen = {}
    for group, cls in list(GROUP_CONTEXTS.items()) + list(engine_contexts().items()):
        seen.setdefault(cls, group)
    return [(group, cls) for cls, group in seen.items()]


def _fmt(v) -> str:
    return "none" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def cli_options() -> dict[str, str]:
    """``partplan partition`` flag -> the ``partition()`` option it sets (from the fields' ``cli``)."""
    out = {}
    for _, cls in _all_contexts():
        for name, f in options_of(cls).items():
            if f.metadata["cli"]:
                out.setdefault(f.metadata["cli"], name)
    return out


def flag_of(name: str) -> str | None:
    """The ``partplan partition`` flag that sets the ``partition()`` option ``name``: a context
    field's own ``cli`` flag, or one of the command's flags for the call's own arguments and the
    engines' options (:data:`COMMAND_FLAGS`); None when the command has none (the option is set
    from Python only)."""
    flags = {n: f for f, n in cli_options().items()}
    return flags.get(name, COMMAND_FLAGS.get(name))


def with_flags(names) -> str:
    """Options by their ``partition()`` name and, where ``partplan partition`` has one, its flag
    (:func:`flag_of`), comma-separated: "allow_overload (--allow-overload), seed" — a refusal that
    reads right from Python and from the CLI."""
    return ", ".join(f"{n} ({flag_of(n)})" if flag_of(n) else str(n) for n in names)


#: ``partition()`` arguments and engine options that ``partplan partition`` takes as flags of its
#: own (not from a context field's ``cli``)
COMMAND_FLAGS = {"model": "--model", "objective": "--objective", "layout": "--layout", "ownership": "--ownership",
                 "preset": "--preset", "metric": "--metric"}


def cli_fields(flag: str) -> list:
    """(context, field) of every option ``partplan partition FLAG`` sets, in the contexts' order."""
    return [(owner, f) for _, cls in _all_contexts() for owner in _owners(cls) for f in fields(owner)
            if f.metadata.get("cli") == flag]


def cli_help(flag: str) -> str:
    """The help of ``partplan partition FLAG``: the field's help and unit, and its default in every
    context that takes it (the pipeline's and the refinement's ``--volume-tolerance`` differ)."""
    rows = [(_where(owner), f) for owner, f in cli_fields(flag)]
    if not rows:
        raise KeyError(flag)
    if len({f.metadata["help"] for _, f in rows}) == 1:
        if len({_fmt(f.default) for _, f in rows}) == 1:
            return _doc(rows[0][1]) + _said_default(rows[0][1], "; default {}")
        defaults = ", ".join(dict.fromkeys(f"{_fmt(f.default)} {where}".strip() for where, f in rows))
        return f"{_doc(rows[0][1])}; default {defaults}"
    return "; ".join(f"{where}: {_doc(f)}{_said_default(f, ' (default {})')}" for where, f in rows)


def _said_default(f, form: str) -> str:
    """``form`` with the field's default, or nothing when the help already says what None means."""
    if f.default is None and ("None" in f.metadata["help"] or "default" in f.metadata["help"]):
        return ""
    return form.format(_fmt(f.default))


def _where(cls) -> str:
    return getattr(cls, "cli_where", "")


def _doc(f) -> str:
    m = f.metadata
    return m["help"] if not m["unit"] or m["unit"] in m["help"] else f"{m['help']} ({m['unit']})"


def options_table() -> str:
    """Every option of every context as one markdown table (option, context, default, unit,
    accepted values, CLI flag, description), from the fields' metadata."""
    lines = ["| option | context | default | unit | accepted | CLI | description |",
             "|---|---|---|---|---|---|---|"]
    done = set()
    for ctx in (PipelineContext, RefineContext, PlannerContext, HypergraphContext, StochasticContext, HubsContext,
                OwnershipContext, *engine_contexts().values()):
        for owner in _owners(ctx):
            for f in fields(owner):
                if "context" in f.metadata or (owner, f.name) in done:
                    continue
                done.add((owner, f.name))
                lines.append(_table_row(owner, f))
    return "\n".join(lines) + "\n"


def _table_row(owner, f) -> str:
    o, m = _opt(f), f.metadata
    accepted = m["accepted"] or o.accepted() + (", None" if m["none_ok"] and o.kind != "any" else "")
    return (f"| `{f.name}` | {owner.__name__} | `{_fmt(f.default)}` | {m['unit']} | {accepted} | "
            f"{'`' + m['cli'] + '`' if m['cli'] else ''} | {m['help'].replace('|', '/')} |")



def _owners(cls):
    """``cls`` and its nested contexts, depth first."""
    yield cls
    for f in fields(cls):
        if "context" in f.metadata:
            yield from _owners(f.metadata["context"])


__all__ = ["BudgetContext", "FMContext", "HubsContext", "HypergraphContext", "Opt", "OwnershipContext", "PRESETS",
           "PipelineContext", "PlannerContext", "REMOVED", "RefineContext", "StartsContext", "StochasticContext", "VCycleContext", "DistributedRefineContext", "engine",
           "auto", "build", "cli_help", "cli_options", "fast", "flat", "option", "options_table", "quality",
           "resolve", "schema_of"]
