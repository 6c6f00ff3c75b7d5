"""Runtime v2's executor: the step-op registry, overlap of the exchange with the
SpMM's interior rows (bitwise the sequential Z with scipy's kernel, within 1e-12
with torch's, whose summation order is MKL's), LocalComm on torch tensors,
and the prepared exchange. Oracles: scipy ``A @ H`` and the sequential step."""
import numpy as np
import pytest

from partplan import Graph
from partplan.layouts import parse_layout
from partplan.plan import build_plan, write_plan
from partplan.program.steps import STEPS, Step, program_rows, register, step_op
from partplan.runtime.comm import LocalComm
from partplan.runtime.interpreter import Executor
from partplan.runtime.spmm import local_executor, run_spmm

torch = pytest.importorskip("torch")

LAYOUTS = [("1d", 3), ("1.5d:2", 4), ("2d:2x2", 4), ("routed:domain:2", 4), ("routed:source:2", 4), ("1d", 1)]


def _graph(directed, n=240, m=1500, seed=0):
    rng = np.random.default_rng(seed)
    return Graph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), rng.random(m) + 0.25, n=n,
                            symmetrize=not directed)


def _plan(spec, p, directed, seed=0):
    g = _graph(directed, seed=seed)
    part = np.random.default_rng(seed + 1).integers(0, parse_layout(spec, p).row_blocks, g.n)
    return g, build_plan(g, part, p, layout=spec)


class DeferredComm(LocalComm):
    """A LocalComm whose exchange is really deferred: ``start`` fills the rows
    it will write with NaN and returns; ``wait`` copies them. Whatever the
    overlapped step computes between the two sees NaN in every received row —
    a split that reads one gives a different Z."""

    asynchronous = True

    def start(self, xp, sends, outs, what="", async_op=False):
        for o in outs:
            o[...] = float("nan")
        handle = (xp, sends, outs, what)
        if not async_op:
            self.wait(handle)
            return None
        return handle

    def wait(self, handle):
        if handle is not None:
            xp, sends, outs, what = handle
            LocalComm.start(self, xp, sends, outs, what)


def _run(plan, H, prog, async_comm=False, **kw):
    ex = local_executor(plan, dtype=H.dtype, **kw)
    if async_comm:  # LocalComm never overlaps (its exchange is synchronous): drive the overlapped path
        dev = kw.get("device")
        ex = Executor(plan.manifest, plan.ranks, DeferredComm(plan.p, plan.groups(), device=dev), ex.ops,
                      overlap=kw.get("overlap", "on"))
    xs = [H[rp.in_ids(prog)] for rp in plan.ranks]
    if kw.get("device"):
        xs = [ex.ops.from_numpy(x) for x in xs]
    Z = np.zeros((H.shape[0], H.shape[1]), dtype=H.dtype)
    for rp, z in zip(plan.ranks, ex.run(prog, xs)):
        if rp.writes_output(prog):
            Z[rp.out_ids(prog)] = ex.ops.to_numpy(z)
    return Z, ex


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("spec,p", LAYOUTS)
def test_overlap_is_bitwise_the_sequential_step_on_every_layout(spec, p, directed):
    g, plan = _plan(spec, p, directed)
    H = np.random.default_rng(3).standard_normal((g.n, 7))
    A = g.to_scipy()
    for prog, M in (("forward", A), ("backward", A.T.tocsr())):
        for dev, k in ((None, "auto"), ("cpu", "torch"), ("cpu", "native")):
            on, ex = _run(plan, H, prog, async_comm=True, device=dev, kernels=k, overlap="on")
            off, _ = _run(plan, H, prog, device=dev, kernels=k, overlap="off")
            if k == "torch":   # torch's CSR kernel (MKL) picks its own summation order for each call
                np.testing.assert_allclose(on, off, rtol=1e-12, atol=1e-12)
            else:
                assert np.array_equal(on, off), (prog, dev, k)
            if parse_layout(spec, p).exact_replay and k != "torch":
                assert np.array_equal(on, M @ H), (prog, dev, k)   # scipy's own summation order
            else:
                np.testing.assert_allclose(on, M @ H, rtol=1e-12, atol=1e-12)
        if p > 1:  # the exchange that feeds the SpMM is the overlapped one
            assert ex.programs[prog].overlap, prog


@pytest.mark.parametrize("dev,kernels", [(None, "auto"), ("cpu", "torch")])
def test_overlap_split_reads_only_rows_that_are_there(dev, kernels):
    """The early part reads only source rows below the halo; early + late is
    the whole CSR. scipy's kernel (rows added in stored order) splits each row
    at its first received column: late's part of a row starts there. torch's
    splits whole rows: a row is early or late, never both. Checked on the CSR
    of the shards, against the halo start of the exchange."""
    g, plan = _plan("1d", 3, True, seed=5)
    ex = local_executor(plan, device=dev, kernels=kernels)
    prog = ex.programs["forward"]
    k = min(prog.overlap)
    parts = prog.prep[k + 1].split(prog.prep[k].start, ex.ops)
    import scipy.sparse as sps

    def csr(m):  # a copy: scipy's elementwise ops sort indices in place (the executor's matrices must not)
        if isinstance(m, sps.spmatrix):
            return m.tocsr().copy()
        return sps.csr_matrix((m.values().numpy().copy(), m.col_indices().numpy().copy(),
                               m.crow_indices().numpy().copy()), shape=tuple(m.shape))
    for i, (early, late) in enumerate(parts):
        start = prog.prep[k].start[i]
        early, late = csr(early), csr(late)
        ip, ix = prog.prep[k + 1].indptr[i], prog.prep[k + 1].indices[i]
        for r in range(ip.size - 1):  # row by row, in stored order: early's nonzeros, then late's, = the row
            got = np.concatenate([early.indices[early.indptr[r]:early.indptr[r + 1]],
                                  late.indices[late.indptr[r]:late.indptr[r + 1]]])
            if kernels == "torch":
                got = np.sort(got)
                assert np.array_equal(got, np.sort(ix[ip[r]:ip[r + 1]])), r
            else:
                assert np.array_equal(got, ix[ip[r]:ip[r + 1]]), r
        assert early.nnz == 0 or early.indices.max() < start
        assert late.nnz > 0 and (early.nnz > 0 or kernels == "torch")  # a random cut: few whole rows are early
        for r in np.flatnonzero(np.diff(late.indptr)):
            cols = late.indices[late.indptr[r]:late.indptr[r + 1]]
            if kernels == "torch":                                   # whole rows that read a received row
                assert cols.max() >= start and early.indptr[r] == early.indptr[r + 1]
            else:
                assert cols[0] >= start                              # late starts at a received row



def test_a_split_that_reads_received_rows_early_is_caught(monkeypatch):
    """The exactness test above can fail: with every nonzero in the early part
    (read before the exchange lands) the deferred comm's NaN rows reach Z."""
    from partplan.program.steps import SpmmPrep
    g, plan = _plan("1d", 3, True)
    H = np.random.default_rng(3).standard_normal((g.n, 4))
    off, _ = _run(plan, H, "forward", overlap="off")
    on, _ = _run(plan, H, "forward", async_comm=True, overlap="on")
    assert np.array_equal(on, off)
    monkeypatch.setattr(SpmmPrep, "split", lambda self, start, ops: [
        (m, ops.matrix(np.zeros(m.shape[0] + 1, dtype=np.int64), np.zeros(0, dtype=np.int64), None, m.shape))
        for m in self.mats])
    bad, _ = _run(plan, H, "forward", async_comm=True, overlap="on")
    assert not np.array_equal(bad, off)


def test_a_shard_whose_csr_does_not_fit_its_buffers_is_one_error():
    """A re-signed shard with one SpMM row too many is refused before any
    kernel runs (scipy's kernel writes through raw pointers: it would corrupt
    memory), by the executor itself, not only by ``partplan validate``."""
    from partplan import PlanError
    g, plan = _plan("1d", 2, False)
    rp = plan.ranks[0]
    sid = [st["id"] for st in plan.steps("forward") if st["op"] == "spmm"][0]
    ip = rp.arrays[f"{sid}.indptr"]
    rp.arrays[f"{sid}.indptr"] = np.append(ip, ip[-1] + 1)
    rp.arrays[f"{sid}.indices"] = np.append(rp.arrays[f"{sid}.indices"], 0)
    rp.arrays[f"{sid}.row_ids"] = np.append(rp.arrays[f"{sid}.row_ids"], 0)
    for kw in ({}, {"device": "cpu", "kernels": "torch"}):
        with pytest.raises(PlanError, match="indptr is not a CSR pointer array"):
            local_executor(plan, **kw)
    rp.arrays[f"{sid}.indptr"] = ip
    rp.arrays[f"{sid}.indices"] = rp.arrays[f"{sid}.indices"][:-1].copy()
    rp.arrays[f"{sid}.indices"][0] = 10 ** 6           # a column far past the halo
    with pytest.raises(PlanError, match="indices outside"):
        local_executor(plan)


def test_inputs_of_another_dtype_or_kind_are_one_error():
    from partplan import PlanError
    g, plan = _plan("1d", 2, False)
    ex = local_executor(plan, device="cpu", kernels="torch", dtype="float32")
    xs = [torch.zeros((len(rp.in_ids("forward")), 2), dtype=torch.float64) for rp in plan.ranks]
    with pytest.raises(PlanError, match="dtype"):
        ex.run("forward", xs)
    with pytest.raises(PlanError, match="torch tensors"):
        ex.run("forward", [np.zeros((len(rp.in_ids("forward")), 2), dtype=np.float32) for rp in plan.ranks])
    # an integer H replays exactly (cast to the executor's float type first)
    from partplan.runtime.spmm import replay
    Hi = np.arange(g.n * 2).reshape(g.n, 2)
    assert np.array_equal(replay(plan, Hi), g.to_scipy() @ Hi)


def test_localcomm_never_overlaps_its_synchronous_exchange():
    from partplan.runtime.interpreter import Executor
    g, plan = _plan("1d", 3, False)
    ex = local_executor(plan, overlap="on")
    called = []
    orig = Executor._overlapped
    Executor._overlapped = lambda self, *a: called.append(1) or orig(self, *a)
    try:
        H = np.ones((g.n, 2))
        ex.run("forward", [H[rp.in_ids("forward")] for rp in plan.ranks])
        assert not called
        ex.comm.asynchronous = True
        ex.run("forward", [H[rp.in_ids("forward")] for rp in plan.ranks])
        assert called
    finally:
        Executor._overlapped = orig


@pytest.mark.parametrize("spec,p", [("1d", 4), ("2d:2x2", 4), ("routed:domain:2", 4), ("1.5d:3", 3)])
def test_localcomm_on_torch_tensors_counts_the_same_bytes(spec, p):
    g, plan = _plan(spec, p, True, seed=2)
    H = np.random.default_rng(0).standard_normal((g.n, 3)).astype(np.float32)
    Zn, exn = _run(plan, H, "forward")
    Zt, ext = _run(plan, H, "forward", device="cpu", kernels="torch")
    np.testing.assert_allclose(Zt, Zn, rtol=1e-5, atol=1e-5)
    assert np.array_equal(exn.comm.sent_bytes, ext.comm.sent_bytes)
    assert ext.comm.sent_bytes.sum() + ext.comm.reduce_bytes.sum() > 0
    assert np.array_equal(exn.comm.reduce_bytes, ext.comm.reduce_bytes)
    # the buffers really are tensors on the device
    assert all(isinstance(b, torch.Tensor) for b in ext._buffers(ext.programs["forward"], 3)[0].values())


def test_run_spmm_local_backend_on_a_torch_device(tmp_path):
    g, plan = _plan("1d", 3, False)
    path = write_plan(plan, tmp_path / "g.plan")
    rep = run_spmm(path, backend="local", device="cpu", kernels="torch", f=8, repeat=1, overlap="on")
    assert rep["bytes_match"] and rep["device"] == "cpu" and rep["kernels"] == "torch"
    assert rep["overlap"] == "on" and rep["step_sequential_s"] > 0
    rep = run_spmm(path, backend="local", f=8, repeat=1, overlap="off")
    assert rep["kernels"] == "native" and rep["overlap"] == "off"
    rep = run_spmm(path, backend="local", kernels="torch", f=4, repeat=1)   # torch kernels: CPU tensors
    assert rep["kernels"] == "torch" and rep["device"] == "cpu" and rep["bytes_match"]


def test_bad_options_are_one_clear_error(tmp_path):
    from partplan import PlanError
    g, plan = _plan("1d", 2, False)
    path = write_plan(plan, tmp_path / "g.plan")
    with pytest.raises(PlanError, match="overlap"):
        run_spmm(path, backend="local", overlap="maybe")
    with pytest.raises(PlanError, match="kernels"):
        run_spmm(path, backend="local", kernels="cuda")
    with pytest.raises(PlanError, match="no CUDA" if not torch.cuda.is_available() else "gloo"):
        run_spmm(path, nprocs=2, backend="gloo", device="cuda")
    with pytest.raises(PlanError, match="not a torch device|partplan runs on"):
        run_spmm(path, backend="local", device="tpu:7")


@pytest.mark.dist
@pytest.mark.slow
def test_gloo_p2_overlap_off_writes_scipys_Z(tmp_path):
    """overlap="off" over gloo (overlap on, the default, writes scipy's Z bitwise in
    test_runtime.py's gloo tests): the same Z, and the report's timing fields."""
    g, plan = _plan("1d", 2, True, seed=7)
    path = write_plan(plan, tmp_path / "g.plan")
    H = np.random.default_rng(1).standard_normal((g.n, 16))
    np.save(tmp_path / "H.npy", H)
    rep = run_spmm(path, nprocs=2, backend="gloo", features=tmp_path / "H.npy", output=tmp_path / "Z.npy",
                   repeat=1, overlap="off", compare=["bare"], timeout=30)
    assert rep["bytes_match"] and rep["overlap"] == "off"
    assert rep["alpha_s"] > 0 and rep["exchange_predicted_s"] > 0 and rep["bare_a2a_s"] > 0
    assert np.array_equal(np.load(tmp_path / "Z.npy"), g.to_scipy() @ H)


# ----------------------------------------------------------------------------- the registry
def test_every_op_the_layouts_emit_is_registered_and_declares_itself():
    seen = set()
    for spec, p in LAYOUTS:
        _, plan = _plan(spec, p, True)
        for prog in ("forward", "backward"):
            seen |= {st["op"] for st in plan.steps(prog)}
    assert seen == set(STEPS)
    for op, cls in STEPS.items():
        assert cls.op == op and cls.phase in ("gather", "exchange", "compute", "reduce", "fold")
        assert set(cls.arrays).isdisjoint(cls.optional_arrays)


def test_program_rows_are_the_bytes_the_comm_counts():
    """The registry's collective rows × f × itemsize equal the comm counters
    (alltoallv + allreduce) on a 1.5D plan, rank by rank."""
    g, plan = _plan("1.5d:2", 4, True, seed=3)
    H = np.random.default_rng(2).standard_normal((g.n, 5))
    _, ex = _run(plan, H, "forward")
    comm = ex.comm
    for rp in plan.ranks:
        rows = program_rows(plan.steps("forward"), rp.rank, rp.buffers("forward"),
                            lambda fam: comm.member(fam, rp.rank) is not None, 4)
        assert rows * 5 * 8 == comm.sent_bytes[rp.rank].sum() + comm.reduce_bytes[rp.rank]


def test_a_new_step_op_is_one_class(tmp_path):
    """A toy op registered from outside runs in the interpreter and is checked
    by the manifest reader: nothing else needs to change."""
    from partplan.runtime.interpreter import Executor

    @register
    class Scale(Step):
        op, phase = "scale_test", "compute"
        fields = {"buf": "buf"}

        @classmethod
        def walk(cls, w, st):
            pass

        @classmethod
        def run(cls, ctx, st, prep):
            for b in ctx.bufs:
                b[st["buf"]] *= 2.0
    try:
        g, plan = _plan("1d", 2, False)
        prog = plan.manifest["programs"]["forward"]
        prog["steps"].append({"id": f"{prog['prefix']}.{len(prog['steps'])}", "op": "scale_test", "buf": "out",
                              "arrays": []})
        H = np.random.default_rng(0).standard_normal((g.n, 2))
        Z, _ = _run(plan, H, "forward")
        np.testing.assert_allclose(Z, 2.0 * (g.to_scipy() @ H), rtol=1e-12)
        assert step_op(prog["steps"][-1]) is Scale
        # the manifest reader takes it too (fields by kind from the registry): written, read, run
        from partplan.plan import load_plan
        loaded = load_plan(write_plan(plan, tmp_path / "scaled.plan"))
        Z2, _ = _run(loaded, H, "forward")
        assert np.array_equal(Z2, Z)
        prog["steps"][-1]["buf"] = 7                     # a field of the wrong kind: one clear error
        with pytest.raises(Exception, match="buf"):
            load_plan(write_plan(plan, tmp_path / "bad.plan"))
    finally:
        STEPS.pop("scale_test", None)
    with pytest.raises(Exception, match="unknown step op"):
        step_op({"op": "scale_test"})
