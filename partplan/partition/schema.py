"""Typed option sets of the partitioner: one schema per engine, one validation layer.

Every option ``partition()`` (and ``partplan partition``) accepts is one
:class:`Opt` row — name, kind, range or choices, default, doc — in exactly one
group of :data:`GROUPS`. The rows are not declared here: each is derived from a field of a
typed context (:mod:`partplan.partition.context`, :func:`~partplan.partition.context.schema_of`),
where its default, help, unit, range and CLI flag live once:

- an **engine** group per entry of the backend registry
  (:data:`partplan.partition.engines.REGISTRY`: metis, mtkahypar, kahypar,
  kaminpar, the baselines, and any engine registered later; an entry without
  a typed schema gets untyped rows from its ``options`` set), plus the two
  planner engines ``fast`` (METIS + km1 V-cycle) and ``auto`` (the default
  pipeline, :mod:`partplan.partition.pipeline.auto`: context.PipelineContext); the engines'
  schemas are their contexts' (registry.Backend.context, registered in
  :mod:`partplan.partition.engines`);
- the **planner** group (f, dtype, stats, progress: every engine; context.PlannerContext);
- one group per **model** or **post-pass** that takes options:
  ``hypergraph`` (nets), ``stochastic`` (sampler, θ, δ, batches),
  ``refine`` (bottleneck refinement: the public fields of context.RefineContext), ``hubs``
  and ``ownership``.

:meth:`Opt.check` is the one place a value is checked (through
:func:`check_group` and :func:`partplan.partition.engines.check_options`). The errors are
uniform and raised before any expensive work:

- an option no group of this engine takes:
  :class:`~partplan.errors.BackendUnavailableError` "backend 'metis' does not
  take option(s) x; it takes: ..." (the engine and every valid name);
- a value of the wrong type or out of range: :class:`~partplan.errors.OptionError`
  "metis option recursive (recursive bisection instead of direct k-way) must be True or False, got
  'yes'" (engine, option and what it does, value, accepted range);
- a name outside an option's choices (a preset, a context, a handoff):
  :class:`~partplan.errors.BackendUnavailableError` naming the choices.

>>> check_group("refine", {"time_limit": 5})
{'time_limit': 5.0}
>>> check_group("hubs", {"hub_factor": -1})
Traceback (most recent call last):
...
partplan.errors.OptionError: hubs option hub_factor (...) must be a finite number >= 0, got -1

The engines' own checks (:func:`partplan.partition.engines.check_options`,
:func:`~partplan.partition.engines.engine_schema`) live with the registry.
"""
from __future__ import annotations

from .context import (KINDS, GROUP_CONTEXTS, HubsContext, HypergraphContext, Opt, OwnershipContext,  # noqa: F401
                      PipelineContext, PlannerContext, RefineContext, StochasticContext, schema_of)

Schema = dict  # name -> Opt, in declaration order

AUTO = schema_of(PipelineContext, public=True)
PLANNER = schema_of(PlannerContext)
HYPERGRAPH = schema_of(HypergraphContext)
STOCHASTIC = schema_of(StochasticContext)
REFINE = schema_of(RefineContext, public=True)
HUBS = schema_of(HubsContext)
OWNERSHIP = schema_of(OwnershipContext)

# the planner's own groups (engines come from the registry)
GROUPS: dict[str, Schema] = {"planner": PLANNER, "auto": AUTO, "hypergraph": HYPERGRAPH,
                             "stochastic": STOCHASTIC, "refine": REFINE, "hubs": HUBS, "ownership": OWNERSHIP}
PLANNER_ENGINES = ("fast", "auto")


def check_group(group: str, options: dict) -> dict:
    """``options`` checked against a planner group of :data:`GROUPS` (all keys must belong to it)."""
    return {name: GROUPS[group][name].check(v, group) for name, v in options.items()}
