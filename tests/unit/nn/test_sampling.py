"""Mini-batch sampling where no rank holds the matrix (partplan.nn.sampling): the oracle is the
stochastic model's sampler on the whole matrix, drawn from the same seed — the same hops, bit for
bit, with the matrix's own values (scipy) — at any rank count, and the rows a rank holds read
from its shard are the matrix's rows (scipy)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from partplan import Graph, build_plan, write_plan
from partplan.errors import PartplanError
from partplan.models.stochastic import make_sampler
from partplan.nn.sampling import DistSampler, HeldRows
from partplan.plan import load_plan
from partplan.runtime.comm import LocalComm

SPECS = ["neighbor:12:3,2", "neighbor:7:-1,2,1", "saint-node:30", "saint-rw:9:4"]


def _graph(n: int, density: float, seed: int, pattern: bool) -> Graph:
    """A directed random matrix with empty rows (the last fifth of the rows has no entry)."""
    A = sp.random(n, n, density=density, random_state=seed, format="csr")
    A = sp.diags(np.r_[np.ones(n - n // 5), np.zeros(n // 5)]) @ A
    A = A.tocsr()
    A.eliminate_zeros()
    A.sort_indices()
    return Graph(A.indptr.astype(np.int64), A.indices.astype(np.int64), None if pattern else A.data + 0.5)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("p", [1, 3, 5])
def test_distributed_draws_are_the_whole_matrix_samplers(spec, p):
    for seed, pattern in ((0, False), (1, True)):
        g = _graph(60, 0.08, seed, pattern)
        A = g.to_scipy()
        part = np.random.default_rng(seed).integers(0, p, g.n)
        if p == 5:
            part[part == 2] = 0                      # a rank that holds no row
        held = [HeldRows.from_graph(g, part, r) for r in range(p)]
        ds = DistSampler(make_sampler(spec), held, LocalComm(p, []), part)
        mine, whole = np.random.default_rng(seed + 11), np.random.default_rng(seed + 11)
        smp = make_sampler(spec)
        for _ in range(4):                           # successive batches: the generators stay in step
            hops, vals = ds.sample(mine)
            want = smp.sample(g, whole)
            assert len(hops) == len(want) == len(vals)
            for (r, c), (wr, wc), v in zip(hops, want, vals):
                assert np.array_equal(r, wr) and np.array_equal(c, wc)
                assert np.array_equal(v, np.asarray(A[wr, wc]).ravel())
        assert mine.random() == whole.random()
        assert (ds.sent_values > 0) == (p > 1)


class _TallyComm(LocalComm):
    """LocalComm that counts the values the ranks hand to its all-gathers and refuses an all-reduce."""

    handed = 0

    def allgather_world(self, values, counts):
        self.handed += sum(np.asarray(v).size for v in values)
        return super().allgather_world(values, counts)

    def allreduce_world(self, values, op="max"):
        raise AssertionError("the sampler all-reduces")


@pytest.mark.parametrize("spec", SPECS)
def test_each_entry_is_sent_once_to_each_other_rank(spec):
    """Every value a draw needs comes from its one owner: the ranks hand the all-gathers each value
    once, and the report's count is that times the p - 1 ranks it goes to."""
    p = 4
    g = _graph(70, 0.08, 2, False)
    part = np.random.default_rng(2).integers(0, p, g.n)
    comm = _TallyComm(p, [])
    ds = DistSampler(make_sampler(spec), [HeldRows.from_graph(g, part, r) for r in range(p)], comm, part)
    for _ in range(3):
        ds.sample(np.random.default_rng(4))
    assert comm.handed > 0 and ds.sent_values == comm.handed * (p - 1)


def test_held_rows_from_shards_are_the_plans_matrix(tmp_path):
    """Each rank's rows read from its shard of a normalized plan: the matrix validate rebuilds from
    every shard (scipy), row for row, in global ids."""
    g = _graph(80, 0.06, 3, False)
    part = np.arange(g.n) % 3
    path = write_plan(build_plan(g, part, 3, normalize="gcn"), tmp_path / "g.plan")
    plan = load_plan(path)
    from partplan.runtime.validate import _rebuild
    A = _rebuild(plan)[0].tocsr()
    A.sort_indices()
    for rp in plan.ranks:
        h = HeldRows.from_shard(plan.manifest, rp, plan.part)
        assert np.array_equal(h.ids, np.flatnonzero(part == rp.rank))
        sub = A[h.ids]
        assert np.array_equal(h.indptr, sub.indptr) and np.array_equal(h.cols, sub.indices)
        assert np.array_equal(h.vals, sub.data)
        assert h.nbytes < A.data.nbytes + A.indices.nbytes + A.indptr.nbytes
    with pytest.raises(PartplanError, match="rows other than"):
        HeldRows.from_shard(plan.manifest, plan.ranks[0], (part + 1) % 3)


def test_held_rows_out_of_rank_order_are_refused():
    """The all-gathers join the local ranks' pieces in rank order: held rows in another order gave
    another rank's degrees where the counts matched (a review found it), so they are refused."""
    g = _graph(30, 0.1, 0, True)
    part = np.arange(30) % 2
    held = [HeldRows.from_graph(g, part, r) for r in (1, 0)]
    with pytest.raises(PartplanError, match=r"held rows of ranks \[1, 0\]"):
        DistSampler(make_sampler("saint-node:10"), held, LocalComm(2, []), part)


def test_a_sampler_object_is_refused_by_name():
    from partplan.nn.minibatch import sampler_for
    with pytest.raises(PartplanError, match="sampler must be a spec"):
        sampler_for(make_sampler("neighbor:4:2"), 1)


def test_a_rank_reads_its_share_of_the_matrix_not_the_whole(tmp_path):
    """A rank reads its own shard, not every shard into one scipy CSR of the whole matrix. Peak of
    numpy's allocations (tracemalloc) while one rank of eight reads its rows (after another rank's read: imports are not counted): below a
    third of the whole matrix's CSR bytes."""
    import tracemalloc

    from partplan.plan.store import load_plan_partition, load_rank
    g = _graph(3000, 0.01, 5, False)
    part = np.arange(g.n) % 8
    path = write_plan(build_plan(g, part, 8, normalize="gcn"), tmp_path / "g.plan")
    whole = g.indptr.nbytes + g.indices.nbytes + g.data.nbytes
    m, part_read, _ = load_plan_partition(path)
    HeldRows.from_shard(m, load_rank(path, 0, manifest=m), part_read)
    tracemalloc.start()
    try:
        held = HeldRows.from_shard(m, load_rank(path, 1, manifest=m), part_read)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert held.ids.size == np.count_nonzero(part == 1)
    assert peak < whole / 3, (peak, whole)


def test_a_walk_on_a_matrix_without_entries_stays_put():
    """saint-rw on a matrix with no nonzero indexed its empty column array (IndexError)."""
    g = Graph(np.zeros(6, np.int64), np.zeros(0, np.int64))
    hops = make_sampler("saint-rw:4:3").sample(g, np.random.default_rng(0))
    assert hops[0][0].size == 0 and hops[0][1].size == 0


def _gloo_sampler_worker(rank, world, port, out):
    import torch
    import torch.distributed as dist

    from partplan.runtime.comm import TorchComm
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        g = _graph(70, 0.08, 5, False)
        part = np.random.default_rng(5).integers(0, world, g.n)
        part[part == 1] = 0                                   # rank 1 holds no row
        res = {}
        for spec in SPECS:
            ds = DistSampler(make_sampler(spec), [HeldRows.from_graph(g, part, rank)], TorchComm([], timeout_s=60), part)
            rng = np.random.default_rng(9)
            for b in range(2):
                hops, vals = ds.sample(rng)
                for h, ((r, c), v) in enumerate(zip(hops, vals)):
                    res[f"{spec}_{b}_{h}"] = np.stack([r.astype(np.float64), c.astype(np.float64), v])
        np.savez(f"{out}/r{rank}.npz", **res)
    finally:
        dist.destroy_process_group()


@pytest.mark.dist
@pytest.mark.slow
def test_gloo_ranks_draw_the_whole_matrix_samplers(tmp_path):
    """Three gloo processes (TorchComm's all-gathers, one rank holding no row) draw the batches the
    whole-matrix samplers draw, with the matrix's values (scipy)."""
    import socket

    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_gloo_sampler_worker, args=(3, port, str(tmp_path)), nprocs=3, join=True)
    g = _graph(70, 0.08, 5, False)
    A = g.to_scipy()
    got = [np.load(tmp_path / f"r{r}.npz") for r in range(3)]
    for spec in SPECS:
        smp, rng = make_sampler(spec), np.random.default_rng(9)
        for b in range(2):
            for h, (wr, wc) in enumerate(smp.sample(g, rng)):
                want = np.stack([wr, wc, np.asarray(A[wr, wc]).ravel()])
                for z in got:
                    assert np.array_equal(z[f"{spec}_{b}_{h}"], want), (spec, b, h)


def test_a_world_all_gather_refuses_a_scalar_piece():
    from partplan.runtime.comm import CommError
    with pytest.raises(CommError, match="1-D or 2-D array of rows"):
        LocalComm(1, []).allgather_world([np.float64(1.0)], [1])
