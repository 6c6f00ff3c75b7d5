"""The partitioner's typed contexts (partition/context.py): one declaration per option feeds the
schemas, the CLI help and the docs table; resolve() is the one check; refine() and the default
pipeline take a context, and their keyword API resolves into the same one."""
from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from partplan import Graph
from partplan.errors import OptionError, PartitionError
from partplan.partition import context as C
from partplan.partition import schema

pytest.importorskip("pymetis")


def _grid(side=12):
    idx = np.arange(side * side).reshape(side, side)
    s = np.r_[idx[:, :-1].ravel(), idx[:-1, :].ravel()]
    d = np.r_[idx[:, 1:].ravel(), idx[1:, :].ravel()]
    return Graph.from_edges(s, d, n=side * side, symmetrize=True)


def test_every_schema_row_is_a_context_field():
    for group, cls in C.GROUP_CONTEXTS.items():
        fields = C.options_of(cls)
        for name, opt in schema.GROUPS[group].items():
            assert opt.default == fields[name].default, (group, name)
            assert opt.doc.startswith(fields[name].metadata["help"]), (group, name)


def test_contexts_are_frozen_and_nested_options_are_flat():
    ctx = C.PipelineContext()
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.seed = 1
    assert set(C.flat(ctx)) == set(C.options_of(C.PipelineContext))
    r = C.resolve(C.RefineContext, {"q": 8, "patience": 50, "seed": -3}, label="refine")
    assert (r.fm.q, r.fm.patience, r.seed) == (8, 50, -3)
    again = C.build(C.RefineContext, {"q": 4}, base=r)
    assert (again.fm.q, again.fm.patience) == (4, 50)


@pytest.mark.parametrize("cls, options, err, words", [
    (C.RefineContext, {"q": 0}, OptionError, ["q", "0"]),
    (C.RefineContext, {"imbalance": -0.1}, PartitionError, ["imbalance"]),
    (C.RefineContext, {"objective": "max"}, OptionError, ["unknown objective"]),
    (C.RefineContext, {"max_cost": 5.0}, OptionError, ["max_cost", "total"]),
    (C.RefineContext, {"nope": 1}, OptionError, ["nope", "patience"]),
    (C.PipelineContext, {"refine_cycles": 0}, OptionError, ["refine_cycles"]),
    (C.PipelineContext, {"starts": "kahypar"}, OptionError, ["kahypar"]),
])
def test_resolve_is_the_one_check(cls, options, err, words):
    with pytest.raises(err) as exc:
        C.resolve(cls, options, label="x")
    for w in words:
        assert w in str(exc.value)


@pytest.mark.parametrize("name, value", [("select", "max"), ("km1_fm", True), ("vcycle", "best")])
def test_removed_experiment_options_say_so(name, value):
    from partplan.partition import api
    from partplan.partition.pipeline.auto import auto_partition

    for call in (lambda: api.partition(_grid(), 4, **{name: value}),
                 lambda: auto_partition(_grid(), 4, **{name: value})):
        with pytest.raises(OptionError, match="removed"):
            call()
    from partplan.partition.refinement.refine import refine
    with pytest.raises(OptionError, match="removed"):
        refine(_grid(), np.arange(144) % 4, 4, full_updates=True)


def test_presets_return_contexts():
    assert C.auto() == C.PipelineContext()
    assert C.auto(refine_work=4).budget.refine_work == 4.0
    from partplan.partition.engines.metis import MetisContext
    assert C.fast() == MetisContext()
    assert C.quality().preset == "QUALITY"
    assert set(C.PRESETS) == {"auto", "fast", "quality"}


def test_one_volume_tolerance_is_told_and_applied():
    """The default pipeline and a refinement after an explicit engine allow the same 3 % more total
    volume: one default, said once in the help, and the one the code runs with."""
    from partplan.partition import api

    text = C.cli_help("--volume-tolerance")
    assert "default 0.03" in text and "0.05" not in text
    assert C.PipelineContext().volume_tolerance == 0.03 and C.RefineContext().volume_tolerance == 0.03
    p = api.partition(_grid(), 4, model="graph", objective="max-both")
    assert p.info["refine"]["params"]["volume_tolerance"] == 0.03
    q = api.partition(_grid(), 4, model="graph", objective="max-both", volume_tolerance=0.2)
    assert q.info["refine"]["params"]["volume_tolerance"] == 0.2


def test_options_table_lists_every_option():
    table = C.options_table()
    rows = [r for r in table.splitlines() if r.startswith("| `")]
    widths = {r.count("|") for r in table.splitlines()}
    assert len(widths) == 1
    names = {r.split("`")[1] for r in rows}
    for cls in list(C.GROUP_CONTEXTS.values()) + list(C.engine_contexts().values()):
        assert set(C.options_of(cls)) <= names
    assert "`--volume-tolerance`" in table


def test_refine_with_a_context_equals_keywords():
    from partplan.partition.refinement.refine import refine

    g, start = _grid(), np.arange(144) % 4
    a, ra = refine(g, start, 4, seed=3, patience=50, volume_tolerance=0.1)
    ctx = C.resolve(C.RefineContext, {"seed": 3, "patience": 50, "volume_tolerance": 0.1}, label="refine")
    b, rb = refine(g, start, 4, context=ctx)
    c, _ = refine(g, start, 4, context=C.resolve(C.RefineContext, {"seed": 3}, label="refine"), patience=50,
                  volume_tolerance=0.1)
    assert np.array_equal(a, b) and np.array_equal(a, c) and ra["params"] == rb["params"]


def test_refine_and_auto_partition_stay_short():
    from partplan.partition.pipeline.auto import auto_partition
    from partplan.partition.refinement.refine import refine

    assert len(inspect.getsource(refine).splitlines()) <= 150
    assert len(inspect.getsource(auto_partition).splitlines()) <= 150
