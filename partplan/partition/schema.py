"""Typed option sets of the partitioner: one schema per engine, one validation layer.

Every option ``partition()`` (and ``partplan partition``) accepts is one
:class:`Opt` row — name, kind, range or choices, default, doc — in exactly one
group of :data:`GROUPS`:

- an **engine** group per entry of the backend registry
  (:data:`partplan.partition.backends.REGISTRY`: metis, mtkahypar, kahypar,
  kaminpar, the baselines, and any engine registered later; an entry without
  a typed schema gets untyped rows from its ``options`` set), plus the two
  planner engines ``fast`` (METIS + km1 V-cycle) and ``auto`` (the default
  pipeline, :mod:`partplan.partition.pipeline`); the engines' typed schemas
  live beside the engines in :mod:`partplan.partition.backends`;
- the **planner** group (f, dtype, stats, progress: every engine);
- one group per **model** or **post-pass** that takes options:
  ``hypergraph`` (nets), ``stochastic`` (sampler, θ, δ, batches),
  ``refine`` (bottleneck refinement), ``hubs`` and ``ownership``.

:meth:`Opt.check` is the one place a value is checked (through
:func:`check_group` and :func:`partplan.partition.backends.check_options`). The errors are
uniform and raised before any expensive work:

- an option no group of this engine takes:
  :class:`~partplan.errors.BackendUnavailableError` "backend 'metis' does not
  take option(s) x; it takes: ..." (the engine and every valid name);
- a value of the wrong type or out of range: :class:`~partplan.errors.OptionError`
  "metis option recursive must be True or False, got 'yes'" (engine, option,
  value, accepted range);
- a name outside an option's choices (a preset, a context, a handoff):
  :class:`~partplan.errors.BackendUnavailableError` naming the choices.

>>> check_group("refine", {"time_limit": 5})
{'time_limit': 5.0}
>>> check_group("hubs", {"hub_factor": -1})
Traceback (most recent call last):
...
partplan.errors.OptionError: hubs option hub_factor must be a finite number >= 0, got -1

The engines' own checks (:func:`partplan.partition.backends.check_options`,
:func:`~partplan.partition.backends.engine_schema`) live with the registry.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import BackendUnavailableError, OptionError
from .lanes import MAX_WORKERS
from .options import check_bool, check_int, check_real

KINDS = ("int", "real", "bool", "choice", "text", "path", "callable", "any")


@dataclass(frozen=True)
class Opt:
    """One option: ``name``, ``kind`` (one of :data:`KINDS`), ``default``
    (None: the engine's own), ``doc`` (with units), the closed range [lo, hi]
    of an int / real (``lo_open``: lo excluded), the ``choices`` of a choice,
    ``none_ok`` (None accepted: "use the default"), and ``normalize`` (a
    choice's own check, returning the canonical name: presets, contexts)."""

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

    def check(self, value, engine: str):
        """``value`` checked (and normalized) for ``engine``; raises as the module doc says."""
        label = f"{engine} option {self.name} ({self.doc})"
        if value is None and (self.none_ok or self.kind == "any"):
            return None
        if self.kind == "int":
            return check_int(label, value, lo=int(self.lo), hi=int(min(self.hi, 2 ** 62)))
        if self.kind == "real":
            return check_real(label, value, lo=self.lo, hi=self.hi, lo_open=self.lo_open)
        if self.kind == "bool":
            return check_bool(label, value)
        if self.normalize is not None:  # a named choice's own check (presets, contexts, dtypes)
            return self.normalize(value)
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
        if self.kind == "choice":
            dom = "one of " + ", ".join(self.choices)
        elif self.kind in ("int", "real"):
            dom = f"{self.kind} {'>' if self.lo_open else '>='} {self.lo:g}" + (
                f", <= {self.hi:g}" if self.hi != math.inf else "")
        else:
            dom = self.kind
        return f"{self.name}: {dom} (default {self.default!r}) — {self.doc}"


Schema = dict  # name -> Opt, in declaration order


def _schema(*opts: Opt) -> Schema:
    return {o.name: o for o in opts}


def _dtype(v):
    from ..metrics.cost import dtype_bytes
    if not isinstance(v, str):
        raise OptionError(f"option dtype must be a numpy dtype name, got {v!r}")
    dtype_bytes(v)  # an unknown dtype is an OptionError now, not after partitioning
    return v


def _vcycle(v):
    if v is True or v is False or v in ("all", "best"):
        return "all" if v is True else v
    raise OptionError(f"auto option vcycle must be 'all', 'best', True or False, got {v!r}")


AUTO = _schema(
    Opt("starts", "any", "auto", "start engines (graph model), a list or 'a,b'; 'auto': by graph size "
        "(pipeline.starts_by_size)"),
    Opt("vcycle", "any", "all", "km1 V-cycle: 'all' (every start), 'best' (the kept start only), False",
        normalize=_vcycle),
    Opt("select", "choice", "max", "keep the start with the lowest max(send, recv) or total volume",
        choices=("max", "volume")),
    Opt("km1_fm", "bool", False, "a km1 FM pass on the kept start before the bottleneck refinement"),
    Opt("refine", "bool", True, "max-both bottleneck refinement of the kept start"),
    Opt("refine_work", "real", 8.0, "first refinement round's work limit, units per pin of A + I "
        "(counted, not timed: the same result on every machine)"),
    Opt("rounds_work", "real", 0.25, "later rounds' work limit, x the first round's work"),
    Opt("refine_rounds", "int", 8, "refinement rounds at most (restarts from the result, next seed)", lo=1),
    Opt("volume_work", "real", 2.0, "volume round after the refinement: km1 FM that keeps max(send, recv), "
        "work units per pin of A + I (0: none)"),
    Opt("refine_cycles", "int", None, "refinement + volume round cycles at most (the refinement again from the "
        "volume round's result, ending at the first cycle that does not lower the max; none without the "
        "volume round); None: 3 up to 16 M nonzeros, 1 above (pipeline.CYCLES_MAX_NNZ)", lo=1, hi=1000,
        none_ok=True),
    Opt("cycle_work", "real", 0.25, "each later cycle's refinement work limit, x the work the refinement "
        "spent (its rounds included)", lo=0.0),
    Opt("volume_tolerance", "real", 0.03, "allowed total volume growth (fraction)"),
    Opt("time_limit", "real", None, "refinement time limit (s) instead of the work limits (the result then "
        "depends on the machine)", none_ok=True),
    Opt("threads", "int", None, "cores the pipeline may use (None: all): V-cycles and refinements side by "
        "side, the Mt-KaHyPar start's threads (the same partition at any count); KaMinPar keeps one",
        lo=1, hi=MAX_WORKERS, none_ok=True))

PLANNER = _schema(
    Opt("f", "int", 128, "feature width (columns of H) for bytes", lo=1),
    Opt("dtype", "text", "float32", "feature dtype for bytes (a numpy name)", normalize=_dtype),
    Opt("stats", "bool", True, "measure the partition exactly"),
    Opt("progress", "callable", None, "progress callback, one str per step", none_ok=True))
HYPERGRAPH = _schema(Opt("nets", "choice", "auto", "auto: joint nets for a directed graph",
                         choices=("auto", "forward", "joint")))
STOCHASTIC = _schema(
    Opt("sampler", "any", None, "neighbor[:B[:f1,f2]] | saint-node[:budget] | saint-rw[:roots[:length]]"),
    Opt("theta", "real", 0.1, "Hoeffding θ", lo_open=True),
    Opt("delta", "real", 0.05, "Hoeffding δ, in (0, 1)", lo_open=True, hi=1.0),
    Opt("min_batches", "int", None, "sample at least this many batches", lo=1, none_ok=True),
    Opt("max_batches", "int", 100_000, "sample at most this many batches", lo=1))
REFINE = _schema(
    Opt("volume_tolerance", "real", 0.05, "allowed total volume growth (fraction)"),
    Opt("time_limit", "real", None, "seconds instead of the work limit (64 units per pin of A + I; the "
        "result then depends on the machine)", none_ok=True),
    Opt("alpha", "real", None, "α-β model: seconds per message"),
    Opt("beta", "real", None, "α-β model: seconds per byte"))
HUBS = _schema(Opt("hub_factor", "real", 2.0, "rows with > factor·TV/k nonzeros sharing a part go apart (0: off)"))
OWNERSHIP = _schema(Opt("ownership_method", "choice", None, "decoupled ownership solver (default lp up to 64 "
                                                              "row blocks, else greedy)", choices=("greedy", "lp")))

# the planner's own groups (engines come from the registry)
GROUPS: dict[str, Schema] = {"planner": PLANNER, "auto": AUTO, "hypergraph": HYPERGRAPH,
                             "stochastic": STOCHASTIC, "refine": REFINE, "hubs": HUBS, "ownership": OWNERSHIP}
PLANNER_ENGINES = ("fast", "auto")


def check_group(group: str, options: dict) -> dict:
    """``options`` checked against a planner group of :data:`GROUPS` (all keys must belong to it)."""
    return {name: GROUPS[group][name].check(v, group) for name, v in options.items()}
