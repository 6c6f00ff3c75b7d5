"""Halo rows of a 1D plan for any PyG layer: :class:`Halo` (one rank of a
torch.distributed job) and :class:`LocalHalo` (every rank in this process, the
in-process oracle).

A 1D plan gives each rank a block of rows (``local_ids``) and the rows it
receives from its peers (``halo_ids``: the sources of its incoming edges held
elsewhere). ``op(x_local)`` returns ``cat([x_local, x_halo])`` by the plan's
forward exchange; its backward sends the halo rows' gradients back to their
owners, which add them to their local rows' gradients. With ``op.edge_index``
(every edge of the user's graph whose target is a local row, PyG's
source → target flow, indices into ``cat([x_local, x_halo])``) a layer whose
output at a target depends only on its incoming edges runs unchanged::

    op = partplan.nn.Halo("g.plan", data.edge_index)
    h = conv(op(x[op.local_ids]), op.edge_index, edge_attr[op.edge_ids])[:op.num_local]

GATConv, SAGEConv, GINConv, GraphConv and the like (their self loops are local
rows). The rows sent are the plan's: bytes sent per rank pair equal
``predicted_bytes(f, dtype)`` exactly, forward and backward.
"""
from __future__ import annotations

import os
import sys
import weakref
from typing import Any

import numpy as np
import torch

from ..errors import PlanError
from ..program.plan import Plan, manifest_groups, manifest_volume
from .rows import RankRows, exchange_step as _exchange_step, positions

__all__ = ["Halo", "HaloRank", "LocalHalo"]

#: attribute names a share's field never takes (they are Halo's own); such a field is in ``op.share`` only
_RESERVED = {"edge_index", "edge_ids", "local_ids", "halo_ids", "num_local", "num_halo", "rank", "share",
             "comm", "manifest", "plan_name", "dtype", "device", "timeout", "training", "forward"}

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _load(plan) -> tuple[str, dict, Any]:
    """(name, manifest, shard reader) of a plan directory or an in-memory Plan."""
    from ..plan.store import load_rank, read_manifest
    if isinstance(plan, Plan):
        m = plan.manifest
        return str(m.get("graph", {}).get("name") or "the plan"), m, lambda r: plan.ranks[r]
    if not isinstance(plan, (str, os.PathLike)):
        raise PlanError(f"Halo: plan must be a plan directory or a Plan, got {type(plan).__name__}")
    m = read_manifest(plan)
    return str(plan), m, lambda r: load_rank(plan, r, manifest=m)


class HaloRank(RankRows):
    """One rank's rows (:class:`~partplan.nn.rows.RankRows`) and edges of a 1D plan (what :class:`Halo`
    exposes).

    Attributes (besides the rows')
    ----------
    edge_index : int64 tensor (2, E_r): every edge of the user's graph whose
        target is a local row, in the user's column order; sources index
        ``cat([x_local, x_halo])``, targets ``0 .. num_local - 1``.
    edge_ids : int64 tensor (E_r,): each such edge's column in the user's
        ``edge_index`` (``edge_attr[edge_ids]`` aligns with ``edge_index``).
    halo_in_degree, halo_loops : int64 arrays: each halo row's non-loop in-edges and self loops over
        the whole graph (what ``gcn_norm`` needs).
    """

    def __init__(self, name: str, m: dict, shard, step: dict, edge_index=None, n: int | None = None):
        super().__init__(name, m, shard, step)
        self.name = name
        self.halo_in_degree = self.halo_loops = None
        #: True when PyG's loop utilities, given no num_nodes, would add loops to other vertices on
        #: some rank than on the whole graph (:func:`inferred_loops_differ`); set by Halo / LocalHalo
        self.inferred_loops_differ = False
        if edge_index is not None:
            ei, eids, deg = _local_edges(name, edge_index, n, self.local_ids, self.halo_ids, self.rank)
            self.set_edges(ei, eids, *deg)

    def set_edges(self, ei: np.ndarray, eids: np.ndarray, halo_in_degree: np.ndarray,
                  halo_loops: np.ndarray) -> None:
        """The rank's edges (Halo indexing) and its halo rows' in-degrees over the whole graph."""
        self.edge_index = torch.from_numpy(ei)
        self.edge_ids = torch.from_numpy(eids)
        self.halo_in_degree, self.halo_loops = halo_in_degree, halo_loops


def _edge_array(edge_index) -> np.ndarray:
    """The user's ``edge_index`` (a tensor, an array or a PyG Data) as int64 numpy (2, E), checked before
    it is copied (:func:`partplan.io._pyg.edge_index_array`: a sparse or meta tensor, float ids, a wrong
    shape or a size past the memory budget is one PlanError)."""
    from ..errors import GraphFormatError
    from ..io._pyg import edge_index_array
    if getattr(edge_index, "edge_index", 0) is None:
        raise PlanError("Halo: the graph has no edge_index")
    try:
        return edge_index_array(edge_index, "Halo")
    except GraphFormatError as exc:
        raise PlanError(str(exc)) from None


def _check_data_rows(name: str, data, n: int) -> None:
    """A PyG ``Data`` given as the graph must be over the plan's ``n`` vertices: its explicit
    ``num_nodes`` and the rows of its node fields (``x``, ``y``, ``pos``, the masks) — one PlanError
    naming the field (PyG would take rows past ``n`` as vertices the plan does not hold, or index
    past a short ``x``); a graph-level ``y`` (one row) is left alone. A tensor or array says nothing
    of the vertex count."""
    from .shares import _NODE_FIELDS, _graph_level
    if isinstance(data, (torch.Tensor, np.ndarray)) or not hasattr(data, "edge_index"):
        return
    keys = data.keys() if callable(getattr(data, "keys", None)) else list(vars(data))
    if "num_nodes" in keys:
        got = data["num_nodes"] if hasattr(data, "__getitem__") else getattr(data, "num_nodes")
        if got is not None and int(got) != n:
            raise PlanError(f"{name}: the data has num_nodes = {int(got)}, the plan's graph {n} vertices: "
                            f"build the plan from this data")
    for key in _NODE_FIELDS:
        val = getattr(data, key, None)
        shape = getattr(val, "shape", None)
        if shape is not None and len(shape) >= 1 and int(shape[0]) != n and not _graph_level(key, shape, n):
            raise PlanError(f"{name}: the data's {key} has {int(shape[0])} rows, the plan's graph {n} "
                            f"vertices: build the plan from this data")


def _local_edges(name: str, edge_index, n: int, local_ids, halo_ids, rank: int):
    """(edge_index over [local; halo] positions, edge ids) of the edges whose target is local, and
    (non-loop in-edges, self loops) of each halo row over the whole ``edge_index``."""
    _check_data_rows(name, edge_index, n)
    ei = _edge_array(edge_index)
    if ei.size and (ei.min() < 0 or ei.max() >= n):
        raise PlanError(f"{name}: edge_index holds vertex ids outside 0..{n - 1} (the plan's graph has "
                        f"{n} vertices)")
    pos = positions(n, local_ids, halo_ids)
    tpos = pos[ei[1]]                                          # each edge's target: local, halo or -1
    sel = np.flatnonzero((tpos >= 0) & (tpos < local_ids.size))
    src, dst = pos[ei[0, sel]], tpos[sel]
    bad = np.flatnonzero(src < 0)
    if bad.size:
        e = int(sel[bad[0]])
        raise PlanError(f"{name}: rank {rank}: edge {e} ({int(ei[0, e])} -> {int(ei[1, e])}) reads a row the "
                        f"plan does not send to this rank ({bad.size} such edges): the plan was not built from "
                        f"this edge_index with PyG's source -> target flow")
    into_halo = tpos >= local_ids.size                         # edges whose target is a halo row
    hpos = tpos[into_halo] - local_ids.size
    loop = ei[0, into_halo] == ei[1, into_halo]
    deg = (np.bincount(hpos[~loop], minlength=halo_ids.size).astype(np.int64),
           np.bincount(hpos[loop], minlength=halo_ids.size).astype(np.int64))
    return np.vstack([src, dst]), sel.astype(np.int64), deg


#: forward calls of a Halo whose row size and dtype the ranks first agree on (every layer of a
#: model's first passes; a small all-to-all each, about the cost of a small exchange on gloo, so
#: not every call: every rank makes the same calls, so every rank checks the same ones)
AGREE_CALLS = 16


class _Exchange:
    """The forward exchange of a 1D plan (and its transpose) for the local ranks of a comm."""

    def __init__(self, name: str, m: dict, views: list[HaloRank], comm):
        self.name, self.m, self.views, self.comm = name, m, views, comm
        fam = views[0].family if views else None
        self.family = fam
        if fam is not None:
            self.fwd = comm.prepare(fam, [v.send_counts for v in views], [v.recv_counts for v in views],
                                    "halo exchange (forward)")
            self.bwd = comm.prepare(fam, [v.recv_counts for v in views], [v.send_counts for v in views],
                                    "halo exchange (backward)")
        self.marker = None
        self.checks_left = AGREE_CALLS
        self._idx_on: dict = {}

    def _idx(self, i: int, device) -> torch.Tensor:
        """Local rank i's send rows as an int64 tensor on ``device`` (made once per device)."""
        key = (i, str(device))
        t = self._idx_on.get(key)
        if t is None:
            t = self._idx_on[key] = torch.from_numpy(self.views[i].idx).to(device)
        return t

    def _go(self, xp, sends, outs, what: str, meanwhile=None, xs=None):
        """The exchange, ``meanwhile()`` run while it flies: asynchronous wherever
        the comm allows (NCCL's stream; gloo's worker thread, while this thread
        copies the local rows). ``xs``: the inputs whose row size and dtype the ranks
        first agree on (:meth:`_agree`)."""
        if self.marker is not None:
            self.marker.called()
        try:
            if xs is not None and self.checks_left > 0:
                self.checks_left -= 1
                self._agree(xs)
            async_op = bool(getattr(self.comm, "asynchronous", False) and sends)
            h = self.comm.start(xp, sends, outs, what, async_op=async_op)
            if meanwhile is not None:
                meanwhile()
            self.comm.wait(h)
        except Exception:
            if self.marker is not None:
                self.marker.fail(what)
            raise

    def _agree(self, xs: list) -> None:
        """Every rank of the exchange passes rows of one size and dtype: the receive buffers are
        sized from this rank's own rows, so a peer's other width would be read as wrong numbers or
        abort gloo. One small host all-to-all (:meth:`~partplan.runtime.comm.TorchComm.agree`, not
        counted in the exchange's bytes), in the first AGREE_CALLS forward calls."""
        keys = [np.array([_FLOATS.index(x.dtype), int(np.prod(x.shape[1:], dtype=np.int64))], dtype=np.int64)
                for x in xs]
        for (lo, hi), v, x in zip(self.comm.agree(self.family, keys, "halo exchange"), self.views, xs):
            if not np.array_equal(lo, hi):
                kinds = ", ".join(str(_FLOATS[i]).replace("torch.", "") for i in sorted({int(lo[0]), int(hi[0])}))
                raise PlanError(f"{self.name}: rank {v.rank}: the ranks of this exchange pass rows of different "
                                f"sizes or dtypes (this rank: shape {tuple(x.shape)}, {str(x.dtype).replace('torch.', '')}"
                                f"; values per row {int(lo[1])} to {int(hi[1])}; dtypes {kinds}): every rank passes "
                                f"rows of the same width and dtype in each call")

    def forward(self, xs: list) -> list:
        outs = [x.new_empty((v.num_local + v.num_halo,) + tuple(x.shape[1:])) for v, x in zip(self.views, xs)]

        def local_rows():
            for o, v, x in zip(outs, self.views, xs):
                o[:v.num_local] = x
        if self.family is None:
            local_rows()
            return outs
        sends = [x[:v.idx.size] if v.contiguous_send else x.index_select(0, self._idx(i, x.device))
                 for i, (x, v) in enumerate(zip(xs, self.views))]
        self._go(self.fwd, sends, [o[v.num_local:] for o, v in zip(outs, self.views)], "halo exchange (forward)",
                 meanwhile=local_rows, xs=xs)
        return outs

    def backward(self, gs: list) -> list:
        if self.family is None:
            return [g[:v.num_local].clone() for g, v in zip(gs, self.views)]
        sends = [g[v.num_local:].contiguous() for g, v in zip(gs, self.views)]
        bufs = [g.new_empty((v.idx.size,) + tuple(g.shape[1:])) for g, v in zip(gs, self.views)]
        res = []

        def local_rows():
            res.extend(g[:v.num_local].clone() for g, v in zip(gs, self.views))
        self._go(self.bwd, sends, bufs, "halo exchange (backward)", meanwhile=local_rows)
        for i, (r, b, v) in enumerate(zip(res, bufs, self.views)):
            if v.contiguous_send:
                r[:b.shape[0]] += b
            else:
                r.index_add_(0, self._idx(i, r.device), b)
        return res


def _exchanged(outs: tuple) -> tuple:
    """Mark the exchange's autograd node: rows from here on are fresh (:func:`_check_one_hop` stops)."""
    if outs and outs[0].grad_fn is not None:
        outs[0].grad_fn.metadata[_EXCHANGE_KEY] = True
    return outs


class _HaloFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ex: _Exchange, *xs):
        ctx.ex = ex
        return tuple(ex.forward([x.detach().contiguous() for x in xs]))

    @staticmethod
    def backward(ctx, *gs):
        gs = [g.contiguous() for g in gs]
        return (None, *ctx.ex.backward(gs))


def _check_x(name: str, v: HaloRank, x, dtype, device) -> None:
    if not isinstance(x, torch.Tensor):
        raise PlanError(f"{name}: Halo takes a torch.Tensor, got {type(x).__name__}")
    if x.layout != torch.strided:
        raise PlanError(f"{name}: Halo takes dense rows, got a {x.layout} tensor (x.to_dense())")
    if x.dtype not in _FLOATS:
        raise PlanError(f"{name}: Halo exchanges floating-point rows (float16/32/64, bfloat16), got {x.dtype} "
                        f"(cast the features, e.g. x.float())")
    if dtype is not None and x.dtype != dtype:
        raise PlanError(f"{name}: the input has dtype {x.dtype}, this Halo was made for {dtype}")
    if device is not None and x.device.type != device.type:
        raise PlanError(f"{name}: the input is on {x.device}, this Halo exchanges on {device}")
    if x.dim() < 1 or x.shape[0] != v.num_local:
        raise PlanError(f"{name}: rank {v.rank}: the input has shape {tuple(x.shape)}, Halo takes the "
                        f"rank's {v.num_local} local rows (x[op.local_ids])")


def _float_dtype(dtype, what: str) -> torch.dtype:
    """``dtype`` as one of the floating torch dtypes a Halo exchanges (a torch dtype, or its name / a
    numpy dtype: "float32", np.float64, "bfloat16"); one PlanError naming ``what`` otherwise."""
    dt = dtype
    if not isinstance(dt, torch.dtype):
        name = str(dtype).replace("torch.", "")
        if name not in ("float16", "float32", "float64", "bfloat16"):
            try:
                name = np.dtype(dtype).name
            except (TypeError, ValueError):
                name = None
        dt = getattr(torch, name, None) if name else None
    if dt not in _FLOATS:
        raise PlanError(f"{what} must be a floating dtype ({', '.join(str(f) for f in _FLOATS)}), got {dtype!r}")
    return dt


def _halo_options(name: str, dtype, device, timeout) -> tuple:
    """Halo's ``dtype`` (None or :func:`_float_dtype`), ``device`` (None or a torch.device torch can
    use here: :func:`partplan.runtime.spmm.check_device`) and
    ``timeout`` (seconds > 0; None: 60), checked: one PlanError naming the argument."""
    from .._args import check_real
    dt = None if dtype is None else _float_dtype(dtype, f"{name}: dtype")
    from ..runtime.spmm import check_device
    dev = None if device is None else torch.device(check_device(device, f"{name}: device"))
    t = 60.0 if timeout is None else check_real(f"{name}: timeout (seconds)", timeout, lo_open=True,
                                                error=PlanError)
    return dt, dev, t


def _predicted(m: dict, f: int, dtype) -> dict:
    from ..metrics.cost import check_width
    check_width(f)
    itemsize = torch.empty(0, dtype=_float_dtype(dtype, "predicted_bytes: dtype")).element_size()
    vol = manifest_volume(m, "forward")
    return {"forward": vol * int(f) * itemsize, "backward": vol.T.copy() * int(f) * itemsize}


class Halo(torch.nn.Module):
    """One rank's local rows plus its halo rows, by a 1D plan's exchange.

    Parameters
    ----------
    plan : plan directory (``partplan plan`` / :func:`partplan.plan_from_pyg`
        ``out=``) or an in-memory :class:`~partplan.plan.Plan`; a 1D, conformal
        plan of the graph of ``edge_index`` (PyG's source → target flow).
    edge_index : the user's ``edge_index`` (2 × E, torch or numpy) or a PyG
        ``Data``; only the columns whose target is a local row are kept. None
        (the default): the plan's per-rank share is read instead
        (:mod:`partplan.nn.shares`; ``plan_from_pyg(..., shares=True)``), so this
        rank reads its own rows, edges and features only, and the share's node
        fields become attributes in ``local_ids`` order (``op.x``, ``op.y``,
        ``op.train_mask``, ...) and its edge fields attributes in ``edge_ids``
        order (``op.edge_attr``, ...); ``op.share`` holds them all by name.
    dtype : when given, the only dtype ``op(x)`` accepts (default: any float).
    device : when given, the device ``op(x)`` must be on (default: the input's).
    timeout : seconds an exchange waits on a peer (default 60); a rank that
        never calls is named in the error.

    torch.distributed must be initialized with the plan's rank count; every
    rank constructs the module and calls it the same number of times
    (collective). ``op(x)`` takes ``x`` = rows ``local_ids`` (``num_local`` × ...)
    and returns ``cat([x, x_halo])`` (``num_local + len(halo_ids)`` rows),
    autograd-aware. ``comm.sent_bytes`` counts the bytes sent per rank pair.
    """

    def __init__(self, plan, edge_index=None, *, dtype: torch.dtype | None = None, device=None,
                 timeout: float | None = None):
        super().__init__()
        import torch.distributed as dist

        from ..runtime.comm import CallCounter, TorchComm, agree_on_failure
        name, m, shard_of = _load(plan)
        self.plan_name, self.manifest = name, m
        dtype, device, timeout = _halo_options(name, dtype, device, timeout)
        if not dist.is_available() or not dist.is_initialized():
            raise PlanError(f"{name}: Halo needs torch.distributed initialized (torchrun + init_process_group); "
                            f"LocalHalo runs every rank in this process")
        world = dist.get_world_size()
        if world != int(m["ranks"]):
            raise PlanError(f"{name} is for {m['ranks']} ranks, this job has {world} "
                            f"(start it with --nproc-per-node {m['ranks']})")
        step = _exchange_step(name, m)
        rank = dist.get_rank()
        self.dtype, self.device = dtype, device
        self.timeout = timeout
        self.comm = TorchComm(manifest_groups(m), timeout_s=self.timeout, device=self.device)
        self.comm.bind_world_timeout()
        failure = None
        try:   # this rank's shard and share: a bad one is said on every rank, not only here
            self._view = HaloRank(name, m, shard_of(rank), step, edge_index, int(m["graph"]["n"]))
            self.share = _attach_share(self, name, plan, m, self._view, edge_index, self.device)
        except Exception as exc:  # noqa: BLE001 - re-raised here; the peers raise its message
            failure = exc
        bad = agree_on_failure(self.comm, world, rank, failure)
        if failure is not None:
            raise failure
        if bad is not None:     # the peers would otherwise wait out the timeout at the first exchange
            raise PlanError(f"{name}: rank {bad[0]} could not load its part of the plan: {bad[1]}")
        if self._view.halo_in_degree is not None:   # the rank's edges are known: one all-reduce pair
            top = self.comm.allreduce_world([np.array([_top_endpoint(self._view)], np.float64)], "max")[0]
            differ = self.comm.allreduce_world([np.array([float(inferred_loops_differ(self._view, int(top[0])))])],
                                               "max")[0]
            self._view.inferred_loops_differ = bool(differ[0] > 0)
        _register(self._view)
        self._ex = _Exchange(name, m, [self._view], self.comm)
        self._ex.marker = CallCounter(self.comm, name)

    # rows and edges of this rank
    rank = property(lambda self: self._view.rank)
    num_local = property(lambda self: self._view.num_local)
    local_ids = property(lambda self: self._view.local_ids)
    halo_ids = property(lambda self: self._view.halo_ids)
    edge_index = property(lambda self: self._view.edge_index)
    edge_ids = property(lambda self: self._view.edge_ids)

    def predicted_bytes(self, f: int, dtype=torch.float32) -> dict:
        """{"forward", "backward"}: int64[p, p] bytes rank q sends rank r per call
        on ``f`` columns of ``dtype`` (the plan's rows × f × itemsize; the
        backward pass sends the transpose)."""
        return _predicted(self.manifest, f, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``cat([x, x[halo rows from their owners]])``; backward adds the halo
        rows' gradients into their owners' rows."""
        _check_x(self.plan_name, self._view, x, self.dtype, self.device)
        return _exchanged(_HaloFn.apply(self._exchange(), x))[0]

    def extra_repr(self) -> str:
        return (f"plan={self.plan_name!r}, rank={self.rank}/{self.manifest['ranks']}, local={self.num_local}, "
                f"halo={len(self.halo_ids)}, edges={self.edge_ids.numel()}")

    def __getstate__(self):
        # process groups do not pickle: a saved Halo keeps its rows and edges and must be
        # built again from the plan to exchange (it has no parameters: state dicts hold nothing)
        state = dict(self.__dict__)
        state["comm"] = state["_ex"] = None
        return state

    def _exchange(self) -> _Exchange:
        if self._ex is None:
            raise PlanError(f"{self.plan_name}: this Halo was unpickled; process groups do not survive "
                            f"pickling: build it again with partplan.nn.Halo(plan, edge_index)")
        return self._ex


class LocalHalo(torch.nn.Module):
    """Every rank of a 1D plan in this process (a :class:`~partplan.runtime.LocalComm`):
    ``ranks[r]`` is rank r's :class:`HaloRank`; ``op(xs)`` takes one tensor per
    rank (rows ``ranks[r].local_ids``) and returns ``cat([x_r, halo_r])`` per
    rank, autograd-aware, by the same exchange as :class:`Halo`."""

    def __init__(self, plan, edge_index=None, *, device=None):
        super().__init__()
        from ..runtime.comm import LocalComm
        if device is not None:
            from ..runtime.spmm import check_device
            check_device(device)
        name, m, shard_of = _load(plan)
        self.plan_name, self.manifest = name, m
        step = _exchange_step(name, m)
        n = int(m["graph"]["n"])
        p = int(m["ranks"])
        self.ranks = [HaloRank(name, m, shard_of(r), step, edge_index, n) for r in range(p)]
        #: per rank: {"node": {name: tensor}, "edge": {name: tensor}} read from the plan's shares
        #: (``edge_index`` None), else None
        self.shares = [_share_of(name, plan, m, v, edge_index, None) for v in self.ranks]
        if all(v.halo_in_degree is not None for v in self.ranks):
            top = max(_top_endpoint(v) for v in self.ranks)
            differ = any(inferred_loops_differ(v, top) for v in self.ranks)
            for v in self.ranks:
                v.inferred_loops_differ = differ
        for v in self.ranks:
            _register(v)
        self.comm = LocalComm(p, manifest_groups(m), device=device if device is not None else "cpu")
        self._ex = _Exchange(name, m, self.ranks, self.comm)

    def predicted_bytes(self, f: int, dtype=torch.float32) -> dict:
        """As :meth:`Halo.predicted_bytes`."""
        return _predicted(self.manifest, f, dtype)

    def forward(self, xs: list) -> list:
        if len(xs) != len(self.ranks):
            raise PlanError(f"{self.plan_name}: LocalHalo takes one tensor per rank ({len(self.ranks)}), "
                            f"got {len(xs)}")
        for v, x in zip(self.ranks, xs):
            _check_x(self.plan_name, v, x, None, None)
        x0 = xs[0]
        for v, x in zip(self.ranks, xs):   # rows cross between ranks: one dtype, device and row shape
            if x.dtype != x0.dtype or x.device != x0.device or x.shape[1:] != x0.shape[1:]:
                raise PlanError(f"{self.plan_name}: rank {v.rank}'s input is {x.dtype} {tuple(x.shape)} on "
                                f"{x.device}, rank 0's {x0.dtype} {tuple(x0.shape)} on {x0.device}: every rank's "
                                f"rows must have one dtype, device and shape past the first dimension")
        return list(_exchanged(_HaloFn.apply(self._ex, *xs)))


# ----------------------------------------------------------------------------- shares
def _share_of(name: str, plan, m: dict, v: HaloRank, edge_index, device) -> dict | None:
    """Rank ``v``'s share when ``edge_index`` is None (its edges set on ``v``), else None."""
    if edge_index is not None:
        return None
    if isinstance(plan, Plan):
        raise PlanError(f"{name}: an in-memory Plan has no shares; pass edge_index, or give the plan "
                        f"directory written with shares=True")
    from .shares import read_share
    sh = read_share(plan, v.rank, manifest=m, local_ids=v.local_ids, halo_ids=v.halo_ids)
    v.set_edges(sh["edge_index"], sh["edge_ids"], sh["halo_in_degree"], sh["halo_loops"])
    out = {"node": sh["node"], "edge": sh["edge"]}
    if device is not None:
        out = {k: {f: t.to(device) for f, t in d.items()} for k, d in out.items()}
    return out


def _attach_share(mod: torch.nn.Module, name: str, plan, m: dict, v: HaloRank, edge_index, device) -> dict | None:
    """Read the share (``edge_index`` None) and set its fields as attributes of ``mod``; returns
    ``{field name: tensor}`` (node fields, then edge fields) or None."""
    sh = _share_of(name, plan, m, v, edge_index, device)
    if sh is None:
        return None
    flat = {**sh["node"], **sh["edge"]}
    for key, t in flat.items():
        if key not in _RESERVED and not hasattr(type(mod), key):
            object.__setattr__(mod, key, t)
    return flat


# ----------------------------------------------------------------------------- gcn_norm through Halo
_VIEWS: "weakref.WeakSet[HaloRank]" = weakref.WeakSet()
_PATCHED: dict = {}


def _top_endpoint(v: HaloRank) -> int:
    """The largest global vertex id of an endpoint of ``v``'s edges, -1 without edges."""
    ei = v.edge_index
    if not ei.numel():
        return -1
    return int(v.row_ids[ei.numpy().reshape(-1)].max())


def inferred_loops_differ(v: HaloRank, top: int) -> bool:
    """Whether PyG's ``add_self_loops`` / ``add_remaining_self_loops`` without ``num_nodes`` add loops
    to other vertices on this rank than on the whole graph. PyG then counts the vertices as the
    largest index + 1: on the whole graph every vertex up to the largest endpoint ``top`` (global
    id) gets one, so vertices above it — isolated ones at the highest ids — get none; on a rank, the
    rows up to its own largest local index do (locals first, then halo rows)."""
    ei = v.edge_index
    last = int(ei.max()) if ei.numel() else -1
    ids = v.row_ids
    return bool(np.any((np.arange(ids.size) <= last) != (ids <= top)))


def _register(v: HaloRank) -> None:
    """Make PyG's ``gcn_norm`` exact on ``v.edge_index`` (see :func:`_halo_gcn_norm`)."""
    _VIEWS.add(v)
    _GENERATION[0] += 1     # copies found to be no Halo's are looked at again
    _install_gcn_norm()


#: bumped by every new Halo rank: a tensor's "no Halo's copy" tag from before it is stale
_GENERATION = [0]


def _tag_copy(edge_index: torch.Tensor, v: HaloRank | None, num_nodes=None) -> None:
    """Remember on ``edge_index`` (a copy of a Halo's, or with ``v`` None a tensor of another graph)
    what :func:`_view_of` found, until the tensor changes in place or another Halo appears: a copy
    moved to a GPU (``op.edge_index.to("cuda")``) is compared with the Halo's edges once, not at
    every layer call. ``num_nodes``: the row count the ranks' edges were filtered by, if any."""
    try:
        edge_index._partplan_halo_copy = (None if v is None else weakref.ref(v), edge_index._version,
                                          _GENERATION[0], None if num_nodes is None else int(num_nodes))
    except (AttributeError, RuntimeError):   # a tensor subclass that takes no attribute: compared each time
        pass


def _tagged_copy(edge_index, num_nodes=None, *, any_rows: bool = True) -> tuple[bool, HaloRank | None]:
    """(whether ``edge_index`` carries a current :func:`_tag_copy` tag, the Halo rank it names): one
    made since the last Halo rank appeared (a new one may hold equal edges), on the tensor as it is,
    and (``any_rows`` False) for the row count ``num_nodes`` asked now: a tag found among the ranks
    of one row count answers for that count only, one found among all ranks for any."""
    tag = getattr(edge_index, "_partplan_halo_copy", None)
    if tag is None or tag[1] != edge_index._version or tag[2] != _GENERATION[0]:
        return False, None
    ref, rows = tag[0], tag[3]
    if rows is not None:                # found among the ranks of one row count
        if any_rows and ref is None:    # "none of them" says nothing of the others'
            return False, None
        if not any_rows and (num_nodes is None or int(num_nodes) != rows):
            return False, None
    v = None if ref is None else ref()
    return ref is None or v is not None, v


def _view_of(edge_index, num_nodes=None) -> HaloRank | None:
    """The live Halo rank whose ``edge_index`` this is: that very tensor (looked up over every live rank
    first), else a copy of it — ``.to(device)``, ``.clone()``, another integer dtype or another order
    of its columns (``sort_edge_index``, ``flip(1)``): the same edges, whose normalization is the
    same — over as many rows as ``num_nodes`` says (when given). Equal copies of several ranks'
    ``edge_index`` whose degrees differ are one PlanError (pass the rank's own ``op.edge_index``); an
    equal ``edge_index`` over another number of rows is another graph's and goes to PyG's own
    ``gcn_norm``."""
    if not isinstance(edge_index, torch.Tensor) or edge_index.dim() != 2:
        return None
    views = [v for v in list(_VIEWS) if getattr(v, "edge_index", None) is not None]
    for v in views:
        if edge_index is v.edge_index:
            return v
    known, v = _tagged_copy(edge_index, num_nodes, any_rows=False)
    if known and (v is None or num_nodes is None or int(num_nodes) == v.num_local + v.num_halo):
        return v
    if edge_index.dtype.is_floating_point or edge_index.dtype.is_complex or edge_index.dtype == torch.bool:
        return None
    cand = [v for v in views if edge_index.shape == v.edge_index.shape
            and (num_nodes is None or int(num_nodes) == v.num_local + v.num_halo)]
    same, ei, keys = [], None, {}
    for v in cand:      # an equal copy first (cheap), then the same edges in another order or dtype
        if edge_index.dtype == v.edge_index.dtype and torch.equal(edge_index.detach().cpu(), v.edge_index):
            same.append(v)
            continue
        if ei is None:
            ei = edge_index.detach().cpu().to(torch.int64).numpy()
            sums = (int(ei[0].sum()), int(ei[1].sum())) if ei.size else (0, 0)
        if sums != _view_sums(v):        # another graph: said by two sums, without a sort
            continue
        rows = v.num_local + v.num_halo
        if rows not in keys:
            keys[rows] = _edge_keys(ei, rows)
        if keys[rows] is not None and np.array_equal(keys[rows], _view_keys(v)):
            same.append(v)
    if len(same) > 1 and len({_degrees(v) for v in same}) > 1:
        raise PlanError(f"gcn_norm: this edge_index equals the edge_index of {len(same)} Halo ranks "
                        f"({', '.join(str(v.rank) for v in same)}) whose halo rows' degrees differ; pass the "
                        f"rank's own op.edge_index (that tensor, not a copy)")
    _tag_copy(edge_index, same[0] if same else None, num_nodes)
    return same[0] if same else None


def _sparse_view(adj) -> HaloRank | None:
    """The live Halo rank whose edges a sparse adjacency holds (a torch sparse COO / CSR / CSC tensor or
    a torch_sparse SparseTensor, as PyG's ``adj_t`` with rows = targets, or its transpose), else None;
    anything else is None. What :func:`_view_of` matches, for the tensor's (source, target) pairs."""
    try:
        if isinstance(adj, torch.Tensor) and adj.layout in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc):
            if adj.layout == torch.sparse_coo:
                row, col = adj.coalesce().indices()
            elif adj.layout == torch.sparse_csr:
                col = adj.col_indices()
                row = torch.repeat_interleave(torch.arange(adj.size(0)), torch.diff(adj.crow_indices().cpu()))
            else:
                row = adj.row_indices()
                col = torch.repeat_interleave(torch.arange(adj.size(1)), torch.diff(adj.ccol_indices().cpu()))
        elif type(adj).__name__ == "SparseTensor" and hasattr(adj, "coo"):
            row, col, _ = adj.coo()
        else:
            return None
    except (RuntimeError, TypeError, ValueError):
        return None
    rows = int(adj.size(0))
    if rows != int(adj.size(1)):
        return None
    row, col = row.detach().cpu().to(torch.int64).numpy(), col.detach().cpu().to(torch.int64).numpy()
    # a sparse tensor merges repeated edges: the same set of (source, target) pairs as a rank's edges
    keys = [_edge_keys(np.stack(ei), rows) for ei in ((col, row), (row, col))]   # adj_t (PyG's), or adj
    mine = [np.unique(k) for k in keys if k is not None]
    for v in [w for w in list(_VIEWS) if getattr(w, "edge_index", None) is not None]:
        if v.num_local + v.num_halo != rows:
            continue
        theirs = np.unique(_view_keys(v))
        if any(np.array_equal(k, theirs) for k in mine):
            return v
    return None


def _edge_keys(ei: np.ndarray, rows: int) -> np.ndarray | None:
    """The columns of ``ei`` (2 × E, int64) as sorted keys source · rows + target (a multiset: equal
    for any column order), or None when an id is outside 0 .. rows − 1."""
    if ei.size and (int(ei.min()) < 0 or int(ei.max()) >= rows):
        return None
    return np.sort(ei[0] * np.int64(rows) + ei[1])


def _view_keys(v: HaloRank) -> np.ndarray:
    """:func:`_edge_keys` of a rank's own ``edge_index`` (made once)."""
    keys = getattr(v, "_keys", None)
    if keys is None or keys[0] is not v.edge_index:
        keys = (v.edge_index, _edge_keys(v.edge_index.numpy(), v.num_local + v.num_halo))
        v._keys = keys
    return keys[1]


def _view_sums(v: HaloRank) -> tuple:
    """(sum of sources, sum of targets) of a rank's own ``edge_index`` (made once): equal for any
    column order, so a tensor whose sums differ is another graph's without sorting it."""
    sums = getattr(v, "_sums", None)
    if sums is None or sums[0] is not v.edge_index:
        ei = v.edge_index.numpy()
        sums = (v.edge_index, (int(ei[0].sum()), int(ei[1].sum())) if ei.size else (0, 0))
        v._sums = sums
    return sums[1]


def _degrees(v: HaloRank) -> tuple:
    """What :func:`_halo_gcn_norm` reads from a rank besides its ``edge_index``."""
    deg = None if v.halo_in_degree is None else tuple(np.asarray(v.halo_in_degree).tolist())
    loops = None if v.halo_loops is None else tuple(np.asarray(v.halo_loops).tolist())
    return v.num_local, v.num_halo, deg, loops


def _install_gcn_norm() -> None:
    """Replace ``gcn_norm`` (once) by :func:`_halo_gcn_norm`, which leaves every ``edge_index`` that is
    not a Halo's to PyG's own function: in PyG's modules and in every loaded module that imported the
    name (a name bound inside a function before the first Halo keeps PyG's own)."""
    import sys
    try:
        from torch_geometric.nn.conv import gcn_conv
    except ImportError:
        return
    orig = _PATCHED.get("orig")
    if orig is None:
        orig = _PATCHED["orig"] = gcn_conv.gcn_norm

        def gcn_norm(edge_index, edge_weight=None, num_nodes=None, improved=False, add_self_loops=True,
                     flow="source_to_target", dtype=None):
            # a copy PyG's loop utilities made of a Halo's edge_index (tagged: the same other edges, and
            # the halo rows' loops it carries), else the tensor or an equal copy
            ref = getattr(edge_index, "_partplan_halo_rank", None)
            v = ref() if ref is not None else None
            loops = getattr(edge_index, "_partplan_halo_loops", None) if v is not None else None
            v = v or _view_of(edge_index, num_nodes)
            if v is None:
                w = _sparse_view(edge_index)
                if w is not None:
                    raise PlanError(f"gcn_norm: this sparse adjacency holds the edges of Halo rank {w.rank}'s "
                                    f"edge_index; PyG would count each halo row's degree from this rank's edges "
                                    f"only. Pass op.edge_index itself (GCNConv(...)(h, op.edge_index)), whose "
                                    f"normalization partplan makes exact")
                v = _same_other_edges(edge_index, num_nodes, add_self_loops)
                if v is None:
                    return orig(edge_index, edge_weight, num_nodes, improved, add_self_loops, flow, dtype)
            return _halo_gcn_norm(v, sys._getframe(1), edge_index, edge_weight, num_nodes, improved,
                                  add_self_loops, flow, dtype, loops=loops)
        gcn_norm.__wrapped__ = orig
        gcn_norm.__doc__ = orig.__doc__
        _PATCHED["fn"] = gcn_norm
        _install_flow_check()
        _wrap_loop_utils()
    swaps = {id(orig): _PATCHED["fn"], **{id(o): f for o, f in _PATCHED["loops"].values()}}
    names = ("gcn_norm",) + tuple(_PATCHED["loops"])
    for mod in list(sys.modules.values()):     # PyG's modules, and a caller's `from ... import gcn_norm`
        try:
            for name in names:
                new = swaps.get(id(getattr(mod, name, None)))
                if new is not None:
                    setattr(mod, name, new)
        except Exception:                       # a module object that refuses attribute access
            continue


def _wrap_loop_utils() -> None:
    """PyG's ``add_self_loops``, ``add_remaining_self_loops`` and ``remove_self_loops`` wrapped (once):
    the ``edge_index`` they return for a Halo's carries that Halo (:func:`_hop_view`), so the checks at
    ``propagate`` also run for layers that add their own self loops (GATConv, ClusterGCNConv, ...)."""
    from torch_geometric.utils import loop

    def tagged(orig):
        def fn(edge_index, *args, **kwargs):
            v = _hop_view(edge_index)
            if (v is not None and v.inferred_loops_differ and orig.__name__ != "remove_self_loops"
                    and (args[2] if len(args) > 2 else kwargs.get("num_nodes")) is None):
                layer = _calling_layer(sys._getframe(1))
                fix = (f"{layer} calls it itself, without num_nodes: give the vertices with no edge a self loop "
                       f"in the data (or ids below the others') before planning, so that the whole graph's "
                       f"largest index + 1 is its vertex count" if layer is not None else
                       "pass num_nodes=x.size(0) (the rank's rows; data.num_nodes in one process)")
                raise PlanError(f"{v.name}: {orig.__name__}(op.edge_index) without num_nodes counts the vertices as "
                                f"the largest index + 1, which adds self loops to other vertices on a rank than "
                                f"on the whole graph here (its highest ids, or a rank's last rows, have no "
                                f"edges): {fix}")
            out = orig(edge_index, *args, **kwargs)
            ei = out[0] if isinstance(out, tuple) else out
            if v is not None and isinstance(ei, torch.Tensor) and ei is not edge_index:
                ei._partplan_halo_rank = weakref.ref(v)
                ei._partplan_halo_loops = _loops_after(orig.__name__, v, edge_index, args, kwargs)
            return out
        fn.__wrapped__, fn.__doc__, fn.__name__ = orig, orig.__doc__, orig.__name__
        return fn
    _PATCHED["loops"] = {name: (getattr(loop, name), tagged(getattr(loop, name)))
                         for name in ("add_self_loops", "add_remaining_self_loops", "remove_self_loops")}


def _calling_layer(frame) -> str | None:
    """The class name of the PyG layer whose method is ``frame`` (one that called a loop utility
    itself, where its caller cannot pass ``num_nodes``), or None (the user's own code)."""
    me = None if frame is None else frame.f_locals.get("self")
    if isinstance(me, torch.nn.Module) and type(me).__module__.startswith("torch_geometric."):
        return type(me).__name__
    return None


def _loops_after(name: str, v: HaloRank, edge_index, args: tuple, kwargs: dict) -> np.ndarray | None:
    """Each halo row's self loops over the whole graph after PyG's loop utility ``name`` (called with
    ``args`` / ``kwargs`` after ``edge_index``), which acts on every vertex alike: ``remove_self_loops``
    leaves none, ``add_self_loops`` adds one to each vertex below ``num_nodes``,
    ``add_remaining_self_loops`` replaces a vertex's loops by one (below ``num_nodes``; none above).
    None where unknown (the Halo carries no loop counts, or ``num_nodes`` is a pair)."""
    own = edge_index is v.edge_index or _tagged_copy(edge_index)[1] is v    # the Halo's edges, or an equal copy
    before = v.halo_loops if own else getattr(edge_index, "_partplan_halo_loops", None)
    if name == "remove_self_loops":
        return np.zeros(v.num_halo, dtype=np.int64)
    n = args[2] if len(args) > 2 else kwargs.get("num_nodes")
    if n is None:
        n = int(edge_index.max()) + 1 if edge_index.numel() else 0
    if not isinstance(n, (int, np.integer)) and not (isinstance(n, torch.Tensor) and n.numel() == 1):
        return None
    gets = (np.arange(v.num_local, v.num_local + v.num_halo) < int(n)).astype(np.int64)
    if name == "add_remaining_self_loops":
        return gets
    return None if before is None else np.asarray(before, dtype=np.int64) + gets    # add_self_loops


def _same_other_edges(edge_index, num_nodes, add_self_loops: bool) -> HaloRank | None:
    """The live Halo rank whose edges other than self loops are this untagged ``edge_index``'s (a
    Halo's tensor passed through a loop utility after a ``.clone()``, or under another name), when
    ``gcn_norm`` adds the loops itself: then only the non-loop edges matter and the normalization is
    made exact. None for another graph's edges. One PlanError where this rank's edges are over a Halo
    rank's local and halo rows, read some halo row, and are a strict subset of that rank's (DropEdge,
    ``coalesce``): no rank holds the in-edges such a selection keeps of another rank's rows, and PyG
    would count each halo row's degree from this rank's edges only; likewise the same non-loop edges
    without added loops, whose halo rows' self loops are not known."""
    if (not isinstance(edge_index, torch.Tensor) or edge_index.dim() != 2 or edge_index.size(0) != 2
            or not edge_index.numel() or edge_index.dtype.is_floating_point or edge_index.dtype.is_complex
            or edge_index.dtype == torch.bool):
        return None
    views = [v for v in list(_VIEWS) if getattr(v, "edge_index", None) is not None and v.num_halo
             and (num_nodes is None or int(num_nodes) == v.num_local + v.num_halo)]
    if not views:   # the common case of another graph: decided without reading its edges
        return None
    lo, hi = int(edge_index.min()), int(edge_index.max())
    views = [v for v in views if lo >= 0 and hi < v.num_local + v.num_halo]
    if not views:
        return None
    ei = edge_index.detach().cpu().to(torch.int64).numpy()
    keep = ei[0] != ei[1]
    src, dst = ei[0, keep], ei[1, keep]
    for v in views:
        nl, rows = v.num_local, v.num_local + v.num_halo
        if not src.size or int(dst.max()) >= nl or int(src.max()) < nl:   # another graph, or one reading no halo row
            continue
        mine_u, mine_c = _nonloop_counts(_edge_keys(ei, rows), rows)
        theirs_u, theirs_c = _nonloop_counts(_view_keys(v), rows)
        at = np.minimum(np.searchsorted(theirs_u, mine_u), max(theirs_u.size - 1, 0))
        if not theirs_u.size or not np.array_equal(theirs_u[at], mine_u) or (mine_c > theirs_c[at]).any():
            continue    # an edge rank v does not hold: another graph's
        if mine_u.size == theirs_u.size and np.array_equal(mine_c, theirs_c):
            if add_self_loops:
                return v
            raise PlanError(f"gcn_norm: this edge_index holds Halo rank {v.rank}'s edges with self loops "
                            f"changed by a copy partplan cannot follow (a clone, or a loop utility under "
                            f"another name): its halo rows' self loops are not known. Normalize with "
                            f"add_self_loops=True, or apply PyG's loop utilities to op.edge_index itself")
        raise PlanError(f"gcn_norm: this edge_index holds part of Halo rank {v.rank}'s edges (a subset, or "
                        f"a coalesced copy of repeated edges); PyG would count each halo row's degree from "
                        f"this rank's edges only, and no rank holds the in-edges such a selection keeps of "
                        f"another rank's rows. Normalize over op.edge_index (PyG's loop utilities applied "
                        f"to it are followed), or use partplan.nn.DistSpMM")
    return None


def _nonloop_counts(keys: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct edge keys (:func:`_edge_keys`: source · rows + target) that are no self loop —
    a loop's key is a multiple of rows + 1 — and their counts."""
    return np.unique(keys[keys % np.int64(rows + 1) != 0], return_counts=True)


_EXCHANGE_KEY = "partplan_halo_exchange"   # autograd node metadata: a Halo exchange's output
_AGGREGATE_KEY = "partplan_halo_aggregate"  # ... a propagate's output over a Halo (its HaloRank's id)
_LINEAGE_MAX_NODES = 1 << 16                # autograd nodes one check walks at most


def _install_flow_check() -> None:
    """Checks at every ``propagate`` on a Halo's ``edge_index`` (PyG's ``propagate`` checks its input by
    ``MessagePassing._check_input``, which this wraps once; other ``edge_index`` tensors pass through
    unchanged), each one PlanError where the layer's output would be silently wrong:

    * ``flow="target_to_source"``: it aggregates at the sources, and a Halo holds each local row's
      in-edges, not its out-edges.
    * **More than one hop** on one exchange (:func:`_check_one_hop`): a halo row's aggregate misses
      the in-edges only its owner holds, so a propagate that reads, at its sources, rows a previous
      propagate over the same Halo aggregated reads wrong rows. PyG's multi-hop layers are known by
      their settings; for the others each propagate's output (tensor and autograd node) is marked by
      a propagate hook registered on the layer when it first meets a Halo, and a propagate whose
      source input is a marked tensor, or descends from a marked node with no Halo exchange between,
      stops; an aggregate computed without gradient is found among the tensors autograd saved for
      the weights it met (:func:`_saved_tensors`). Where autograd records no lineage
      (``torch.no_grad``, such an aggregate mixed with other values before any weight) only the
      marked tensor itself is recognized (docs/guide/pyg.md).

    ``edge_index`` here is a Halo's own tensor or a copy the loop utilities or ``gcn_norm`` made of it
    (:func:`_hop_view`); the flow check also follows equal copies (:func:`_view_of`)."""
    try:
        from torch_geometric.nn.conv import MessagePassing
    except ImportError:
        return
    orig = MessagePassing._check_input

    def _check_input(self, edge_index, size):
        v = _hop_view(edge_index)
        if getattr(self, "flow", None) == "target_to_source":
            v = v or (_view_of(edge_index) if isinstance(edge_index, torch.Tensor) else None)
            if v is not None:
                raise PlanError(f"{type(self).__name__} aggregates with flow='target_to_source' (at the sources); "
                                f"a Halo's edge_index holds the in-edges of rank {v.rank}'s rows (PyG's source -> "
                                f"target flow): plan the reversed graph (edge_index.flip(0)) and run the layer with "
                                f"flow='source_to_target' on that Halo's edge_index")
        if v is not None:
            _check_one_hop(self, v, sys._getframe(1).f_locals)
            if not getattr(self, "_partplan_marks_aggregates", False):
                self.register_propagate_forward_hook(_mark_aggregate)   # runs at the end of this propagate too
                self._partplan_marks_aggregates = True
        return orig(self, edge_index, size)
    _check_input.__wrapped__ = orig
    MessagePassing._check_input = _check_input


def _hop_view(edge_index) -> HaloRank | None:
    """The Halo rank of a ``propagate``'s ``edge_index``: a Halo's own tensor, a copy with its
    self loops added or removed by PyG's loop utilities or the Halo-aware ``gcn_norm`` (GATConv,
    MixHopConv, SGConv, ... propagate over those), or a copy :func:`_view_of` found equal (tagged).
    A tensor on a GPU that is none of these is compared once (:func:`_view_of`, then tagged):
    ``op.edge_index.to("cuda")`` is how a GPU loop holds the edges. Never raises."""
    if not isinstance(edge_index, torch.Tensor):
        return None
    ref = getattr(edge_index, "_partplan_halo_rank", None)
    v = ref() if ref is not None else None
    if v is not None:
        return v
    v = next((w for w in list(_VIEWS) if getattr(w, "edge_index", None) is edge_index), None)
    if v is not None:
        return v
    known, v = _tagged_copy(edge_index)
    if known or edge_index.device.type == "cpu":
        return v
    try:
        return _view_of(edge_index)
    except PlanError:      # equal to several ranks' edges: gcn_norm says so where it matters
        return None


def _declared_hops(layer) -> int:
    """Hops a PyG layer propagates in one call by its own settings (1 for any other layer): K of
    TAGConv / APPNP / SGConv / SSGConv, ARMAConv's and GatedGraphConv's ``num_layers``, MixHopConv's
    highest power."""
    table = _PATCHED.get("hops")
    if table is None:      # built once: this runs at every propagate over a Halo
        import torch_geometric.nn.conv as C
        table = _PATCHED["hops"] = [
            (tuple(getattr(C, n) for n in names if hasattr(C, n)), hops)
            for names, hops in ((("TAGConv", "APPNP", "SGConv", "SSGConv"), lambda m: m.K),
                                (("ARMAConv", "GatedGraphConv"), lambda m: m.num_layers),
                                (("MixHopConv",), lambda m: max(m.powers)))]
    for classes, hops in table:
        if isinstance(layer, classes):
            try:
                return int(hops(layer))
            except (AttributeError, TypeError, ValueError):
                return 1
    return 1


def _second_hop(layer, why: str) -> PlanError:
    return PlanError(f"{type(layer).__name__} {why}: a halo row's aggregate misses the in-edges only its owner "
                     f"holds, so the next hop would read wrong rows. Exchange before each hop (one op(h) per "
                     f"propagate, e.g. one single-hop layer per Halo call), or use partplan.nn.DistSpMM for GCN's "
                     f"normalized A @ H")


def _check_one_hop(layer, v: HaloRank, args: dict) -> None:
    """One PlanError when this ``propagate`` is a second hop over a Halo without an exchange between:
    a PyG layer set to more than one hop (:func:`_declared_hops`), a source-side argument
    (:func:`_source_inputs`) that is a previous propagate's output over the same Halo (any layer,
    gradients or not), or one that descends from such an output in autograd (where gradients are
    recorded). A rank that receives no rows checks as every other rank does, so the refusal is one
    PlanError on every rank (not on some while the others wait at their next exchange), unless no
    rank of the plan receives any: then every hop is exact."""
    if not v.plan_receives:
        return
    hops = _declared_hops(layer)
    if hops > 1:
        raise _second_hop(layer, f"propagates {hops} hops over a Halo's edge_index in one call")
    tensors = _source_inputs(layer, args)
    if any(getattr(t, "_partplan_aggregate", None) == id(v) for t in tensors):
        raise _second_hop(layer, "propagates a previous propagate's output over the same Halo")
    seen, todo = set(), [t.grad_fn for t in tensors if t.grad_fn is not None]
    while todo and len(seen) < _LINEAGE_MAX_NODES:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        meta = node.metadata
        if meta.get(_EXCHANGE_KEY):
            continue
        if meta.get(_AGGREGATE_KEY) == id(v) or any(getattr(t, "_partplan_aggregate", None) == id(v)
                                                    for t in _saved_tensors(node)):
            raise _second_hop(layer, "propagates rows computed from a previous propagate over the same Halo")
        todo.extend(nxt for nxt, _ in node.next_functions)


_SAVED_NAMES: dict = {}   # autograd node type -> its saved-tensor attributes (``_saved_self``, ...)


def _saved_tensors(node) -> list:
    """The tensors an autograd node saved for its backward: an aggregate computed without gradient
    (features that need none, aggregated before a weight) enters the graph only there, as the same
    Python object that carries its mark. Saved tensors already freed by a backward are skipped."""
    names = _SAVED_NAMES.get(type(node))
    if names is None:
        names = _SAVED_NAMES[type(node)] = tuple(a for a in dir(node) if a.startswith("_saved_")
                                                 and not a.endswith(("_sizes", "_strides")))
    out = []
    for name in names:
        try:
            t = getattr(node, name)
        except RuntimeError:        # freed after a backward
            continue
        if isinstance(t, torch.Tensor):
            out.append(t)
    return out


def _source_inputs(layer, args: dict) -> list:
    """The floating tensors a ``propagate`` reads at the sources of its edges (the halo rows): the
    arguments its message reads as ``NAME_j``, of a pair ``(x_src, x_dst)`` the first. What it reads
    at the targets (``NAME_i``, ``x_dst``: local rows, exact after any hop) is not checked."""
    if isinstance(args.get("kwargs"), dict):    # a propagate(edge_index, size, **kwargs) of its own
        args = {**args, **args["kwargs"]}
    out = []
    for name in {a[:-2] for a in getattr(layer, "_user_args", ()) if a.endswith("_j")}:
        val = args.get(name)
        if isinstance(val, (tuple, list)):
            val = val[0] if val else None
        if isinstance(val, torch.Tensor) and val.is_floating_point():
            out.append(val)
    return out


def _mark_aggregate(layer, inputs, out):
    """Propagate hook: mark the output tensor and its autograd node as an aggregate over this Halo
    (:func:`_check_one_hop`); its values are left as they are."""
    v = _hop_view(inputs[0]) if inputs else None
    if v is not None and isinstance(out, torch.Tensor):
        out._partplan_aggregate = id(v)
        if out.grad_fn is not None:
            out.grad_fn.metadata[_AGGREGATE_KEY] = id(v)
    return None


def _loop_weight(improved: bool) -> float:
    """The weight PyG's own ``gcn_norm`` gives an added self loop when no edge weights are passed (1 in
    current releases even with ``improved=True``; 2 in releases that filled the loops' weights), read
    from PyG's function on the two-vertex graph 0 -> 1: the edge's weight is 1 / sqrt(w (1 + w))."""
    key = ("loop", improved)
    if key not in _PATCHED:
        _, w = _PATCHED["orig"](torch.tensor([[0], [1]]), None, 2, improved, True, "source_to_target",
                                torch.float64)
        _PATCHED[key] = 2.0 if abs(float(w[0]) - (1 / 6) ** 0.5) < 1e-9 else 1.0
    return _PATCHED[key]


def _halo_gcn_norm(v: HaloRank, caller, edge_index, edge_weight, num_nodes, improved, add_self_loops, flow,
                   dtype, *, loops: np.ndarray | None = None):
    """PyG's ``gcn_norm`` on a Halo's ``edge_index`` with the whole graph's degrees: a local row's
    in-edges are all in ``edge_index``; a halo row's in-degree comes with the plan (its share, or the
    full ``edge_index`` given to Halo). ``loops``: each halo row's self loops where ``edge_index`` is a
    copy PyG's loop utilities made (:func:`_loops_after`; else the Halo's own counts). One PlanError
    naming :class:`DistSpMM` where it cannot be exact."""
    owner = caller.f_locals.get("self")
    layer = type(owner).__name__ if owner is not None else "this layer"
    hops = getattr(owner, "K", 1)
    if isinstance(hops, int) and hops > 1 or flow != "source_to_target":
        why = (f"propagates {hops} hops" if flow == "source_to_target"
               else "aggregates with flow='target_to_source'")
        raise PlanError(f"{layer} {why} with GCN normalization; Halo exchanges one hop of "
                        f"source -> target rows: use partplan.nn.DistSpMM (GCN's normalized A @ H over the plan) "
                        f"or one Halo call per hop")
    if edge_weight is not None:
        raise PlanError(f"{layer} normalizes by weighted degrees (edge_weight given); a halo row's weighted "
                        f"in-degree needs edges this rank does not hold: use partplan.nn.DistSpMM with a plan "
                        f"built with weight=... and normalize='gcn'")
    if v.halo_in_degree is None:
        raise PlanError(f"{layer}: this Halo has no halo in-degrees; build it from the plan's shares or the "
                        f"full edge_index")
    from torch_geometric.utils import add_remaining_self_loops, scatter
    nl, nh = v.num_local, v.num_halo
    if num_nodes is not None and int(num_nodes) != nl + nh:
        raise PlanError(f"{layer}: normalizing over {num_nodes} rows, Halo's edge_index spans the rank's "
                        f"{nl} local and {nh} halo rows (pass op(x), not x)")
    fill = _loop_weight(bool(improved)) if add_self_loops else 0.0
    ei = edge_index
    if add_self_loops:   # every loop replaced by one of weight `fill`, as PyG's unweighted gcn_norm does
        ei, _ = add_remaining_self_loops(ei, None, fill, nl + nh)
    w = torch.ones(ei.size(1), dtype=dtype, device=ei.device)
    if add_self_loops:
        w[ei[0] == ei[1]] = fill
    deg = scatter(w, ei[1], dim=0, dim_size=nl + nh, reduce="sum")
    nonloop = torch.from_numpy(np.asarray(v.halo_in_degree)).to(deg)
    if not add_self_loops:
        if loops is None and edge_index is not v.edge_index and _view_of(edge_index) is not v:
            raise PlanError(f"{layer}: the self loops of this copy of Halo rank {v.rank}'s edge_index are not "
                            f"known for its halo rows; normalize with add_self_loops=True or over op.edge_index")
        loops = v.halo_loops if loops is None else loops
        deg[nl:] = nonloop + torch.from_numpy(np.asarray(loops, dtype=np.int64)).to(deg)
    else:
        deg[nl:] = nonloop + fill
    dis = deg.pow(-0.5)
    dis.masked_fill_(dis == float("inf"), 0)
    if ei is not edge_index:
        ei._partplan_halo_rank = weakref.ref(v)    # the layer propagates over this copy (_hop_view)
    return ei, dis[ei[0]] * w * dis[ei[1]]
