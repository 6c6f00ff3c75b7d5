"""One partitioner: single-process and MPI engines are entries of one registry, each with its
typed context, and ``partition()``, the CLI and ``--nprocs`` are checked by one resolve()."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import partplan
from partplan import Graph
from partplan.errors import BackendUnavailableError, OptionError, PartitionError
from partplan.partition.registry import REGISTRY, backend_names, mpi_engine_names
from partplan.partition.request import resolve


def _grid():
    return Graph.from_edges(np.arange(15), np.arange(1, 16), symmetrize=True)


def test_every_engine_is_a_registry_entry_with_a_typed_context():
    assert {"zoltan", "ptscotch", "stream"} <= set(mpi_engine_names())
    assert {"metis", "mtkahypar", "kahypar", "kaminpar", "stream"} <= set(backend_names())
    assert "zoltan" not in backend_names() and "ptscotch" not in backend_names()   # MPI processes only
    assert REGISTRY["zoltan"].processes == ("mpi",) and REGISTRY["metis"].processes == ("one",)
    assert REGISTRY["stream"].processes == ("one", "mpi")
    for name in mpi_engine_names() + ("metis", "mtkahypar", "kahypar", "kaminpar"):
        ctx = REGISTRY[name].context
        assert dataclasses.is_dataclass(ctx), name
        assert REGISTRY[name].schema is not None and set(REGISTRY[name].schema) <= REGISTRY[name].options | \
            {f.name for f in dataclasses.fields(ctx)}, name


@pytest.mark.parametrize("kw, word", [
    (dict(model="graph"), "model (--model)"), (dict(objective="total"), "objective (--objective)"),
    (dict(layout="2d:2x2"), "layout (--layout)"), (dict(ownership="decoupled"), "ownership (--ownership)"),
    (dict(options={"hub_factor": 0.0}), "hub_factor (--hub-factor)"),
    (dict(backend="metis"), "does not run distributed"), (dict(options={"passes": 2}), "explicit --engine"),
    (dict(backend="stream", options={"passes": 0}), "passes"),
    (dict(options={"gather_max_pins": 0}), "gather_max_pins does not apply")])
def test_nprocs_is_checked_by_the_one_resolve(kw, word):
    with pytest.raises((BackendUnavailableError, OptionError, PartitionError)) as e:
        resolve(None, 4, nprocs=2, **kw)
    assert word in str(e.value)
    assert "--gather-max-pins" not in str(e.value)      # a flag is named only where the command has one


@pytest.mark.parametrize("nprocs", [0, -1, 1.5, True, "2"])
def test_nprocs_must_be_a_count(nprocs):
    with pytest.raises(PartitionError, match="nprocs"):
        resolve(None, 4, nprocs=nprocs)


def test_an_mpi_only_engine_without_nprocs_is_one_error():
    for name in ("zoltan", "ptscotch"):
        with pytest.raises(BackendUnavailableError, match="nprocs"):
            partplan.partition(_grid(), 2, backend=name)


def test_output_without_nprocs_is_refused(tmp_path):
    with pytest.raises(PartitionError, match="nprocs"):
        partplan.partition(_grid(), 2, output=tmp_path / "x.npy")


def test_epsilon_is_declared_once():
    """Every entry point's ε default is the one declaration (options.DEFAULT_IMBALANCE)."""
    import inspect

    from partplan.partition import api, engines, options
    from partplan.partition.context import PipelineContext, RefineContext
    from partplan.partition.pipeline.distributed import distributed_partition
    for fn in (api.partition, engines.metis, engines.mtkahypar_hypergraph, engines.kahypar_hypergraph,
               engines.run_backend, distributed_partition):
        assert inspect.signature(fn).parameters["imbalance"].default is options.DEFAULT_IMBALANCE, fn
    assert PipelineContext().imbalance == RefineContext().imbalance == options.DEFAULT_IMBALANCE
    assert PipelineContext().volume_tolerance == RefineContext().volume_tolerance == options.DEFAULT_VOLUME_TOLERANCE


@pytest.mark.parametrize("name", ["metis", "stream", "kaminpar"])
def test_a_graph_engine_refuses_a_hypergraph(name):
    from partplan.models import column_net
    from partplan.partition.engines import run_backend
    with pytest.raises(BackendUnavailableError, match="graphs only"):
        run_backend(name, column_net(_grid()), 2)


def test_every_flag_an_option_is_named_by_is_a_flag_of_the_command():
    """flag_of names a flag only where ``partplan partition`` has it (a refusal must not point at a
    flag argparse rejects); the contexts' Python-only options get none."""
    from partplan.cli.main import build_parser, iter_parsers
    from partplan.partition.context import COMMAND_FLAGS, DistributedRefineContext, _all_contexts, flag_of, options_of
    parser = dict((tuple(path), p) for path, p in iter_parsers(build_parser()))[("partition",)]
    have = {s for a in parser._actions for s in a.option_strings}
    names = set(COMMAND_FLAGS) | {n for _, cls in _all_contexts() for n in options_of(cls)} | \
        set(options_of(DistributedRefineContext))
    named = {n: flag_of(n) for n in names}
    assert {f for f in named.values() if f} <= have
    assert named["gather_max_pins"] is None and named["refine_cycles"] is None and named["model"] == "--model"


def test_a_users_engine_is_its_function_its_context_and_one_registration():
    """The example of docs/guide/partition.md ("Your own engine"): an engine defined outside the
    package is a backend= value with its typed options checked, and the bottleneck refinement
    runs after it like after any engine."""
    from dataclasses import dataclass

    from partplan.errors import UnknownOptionError
    from partplan.partition.context import engine, option

    @dataclass(frozen=True)
    class BlocksContext:
        """Contiguous blocks of rows."""
        reverse: bool = option(False, "number the blocks from the last row")

    def blocks(model, k, *, imbalance, seed, graph, reverse=False):
        part = np.arange(model.n) * k // model.n
        return (k - 1 - part if reverse else part), {}

    g = Graph.from_edges(np.arange(59), np.arange(1, 60), symmetrize=True)
    try:
        engine("blocks", ("graph",), blocks, BlocksContext)
        assert "blocks" in backend_names("graph")
        p = partplan.partition(g, 4, backend="blocks", reverse=True)
        assert p.backend == "blocks" and p.part.tolist() == [3 - i * 4 // 60 for i in range(60)]
        with pytest.raises(OptionError, match="reverse .* must be True or False"):
            partplan.partition(g, 4, backend="blocks", reverse="yes")
        with pytest.raises(UnknownOptionError, match="does not take option.*nope"):
            partplan.partition(g, 4, backend="blocks", nope=1)
        # ids in a shuffled order: contiguous blocks of ids cut most edges, and the max-both
        # refinement after the engine lowers the bottleneck (counted by analyze, not by the run)
        perm = np.random.default_rng(0).permutation(60)
        h = Graph.from_edges(perm[:-1], perm[1:], symmetrize=True)
        start = partplan.analyze(h, np.arange(60) * 4 // 60)
        r = partplan.partition(h, 4, backend="blocks", objective="max-both")
        got = partplan.analyze(h, r.part)
        assert max(got.max_send, got.max_recv) < max(start.max_send, start.max_recv)
    finally:
        REGISTRY.pop("blocks", None)
    assert "blocks" not in backend_names()


def test_a_users_mpi_engine_is_refused_before_the_launch():
    """The MPI processes import partplan's engines, not the caller's module: an engine registered
    there with an mpi_run is one clear error before any process starts."""
    from dataclasses import dataclass

    from partplan.partition.context import engine

    @dataclass(frozen=True)
    class NoOptions:
        """None."""

    def mpi_run(comm, rows, n, k, **_):
        raise AssertionError("never launched")

    try:
        engine("mine", ("graph",), None, NoOptions, mpi_run=mpi_run)
        with pytest.raises(BackendUnavailableError, match="registered by the caller.*run it in one process"):
            resolve(_grid(), 2, backend="mine", nprocs=2)
        resolve(_grid(), 2, nprocs=2)            # the default rule does not choose it: nothing to refuse
    finally:
        REGISTRY.pop("mine", None)
    stream = REGISTRY["stream"]
    try:        # a built-in name the default rule may choose, re-registered by the caller
        engine("stream", ("graph",), None, NoOptions, mpi_run=mpi_run)
        with pytest.raises(BackendUnavailableError, match="'stream' was registered by the caller.*default rule"):
            resolve(_grid(), 2, nprocs=2)
    finally:
        REGISTRY["stream"] = stream


@pytest.mark.parametrize("kw, said", [
    (dict(ownership_method="lp"), "ownership_method (--ownership-method) applies to ownership='decoupled'"),
    (dict(hub_factor=2.0, objective="total"), "hub_factor (--hub-factor) applies to bottleneck objectives"),
    (dict(hub_factor=2.0, model="graph", objective="max-both"), "hub_factor (--hub-factor) needs backend mtkahypar")])
def test_refused_options_are_named_with_their_flags(kw, said):
    """A refusal reads right from Python and from the CLI: the option's name and its flag."""
    with pytest.raises(BackendUnavailableError) as e:
        partplan.partition(_grid(), 2, **kw)
    assert said in str(e.value)
