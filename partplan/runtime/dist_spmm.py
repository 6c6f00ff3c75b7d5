"""``Z = A @ H`` from a plan as an autograd-aware ``torch.nn.Module``, for your
own torch.distributed training script.

Under torchrun, after ``init_process_group``, every rank does::

    op = partplan.nn.DistSpMM("g.plan")          # manifest + this rank's shard only
    Z = op(X[op.in_ids] @ W)                      # rows op.out_ids of A @ (X W)
    loss = ...; loss.backward()                   # dL/dH = A^T @ dL/dZ by the plan's backward program

Rows: the input ``h`` holds rows ``in_ids`` of H (global vertex ids, in that
order), the output rows ``out_ids`` of Z. The backward pass runs the plan's
backward program (``A^T @ G``: the forward program itself when the manifest says
``backward: same-as-forward``, i.e. A is symmetric); a plan built without one
(``backward: not-planned``) raises :class:`~partplan.errors.PlanError` when a
gradient is needed.

All ranks must construct the module, call it and call ``.to(...)`` in the same
order (each is collective: process groups, the count check, the exchanges).
"""
from __future__ import annotations

import os

import numpy as np
import torch

from ..errors import PlanError
from ..program.plan import Plan, manifest_groups, program_steps
from ..program.steps import dst_start
from .comm import CommError

#: calls of a DistSpMM whose input widths are checked across the ranks (one small all-to-all per
#: exchange group each)
AGREE_CALLS = 16

__all__ = ["DistSpMM"]


def _torch_dtype(dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        dt = dtype
    else:
        name = str(np.dtype(dtype))
        dt = getattr(torch, name, None)
    if dt not in (torch.float32, torch.float64):
        raise PlanError(f"DistSpMM: dtype must be torch.float32 or torch.float64, got {dtype!r}")
    return dt


class _PlanSpMMFn(torch.autograd.Function):
    """``Z = A h`` by the forward program; ``dh = A^T dZ`` by the backward program."""

    @staticmethod
    def forward(ctx, op: "DistSpMM", h):
        ctx.op = op
        return op._run("forward", h)

    @staticmethod
    def backward(ctx, g):
        op = ctx.op
        if g is None:
            return None, None
        return None, op._run("backward", g)


class DistSpMM(torch.nn.Module):
    """One rank's share of ``Z = A @ H`` from a plan (a directory written by
    ``partplan plan`` / :func:`partplan.plan.write_plan`, or an in-memory
    :class:`~partplan.plan.builder.Plan`).

    Parameters
    ----------
    plan : plan directory (or :class:`Plan`); torch.distributed must be
        initialized with as many ranks as the plan has (checked first, before
        any process group is created).
    device : where the input, output and buffers live (default CPU; CUDA with NCCL).
    dtype : torch.float32 (default) or torch.float64.
    kernels : local SpMM kernel: "auto" (torch on CUDA, scipy on CPU), "torch", "native".
    timeout : seconds a rank waits on a peer before failing.
    overlap : "on" (exchange and independent rows overlapped, same result) or "off".

    ``op(h)``: ``h`` is ``len(in_ids) × f`` of the module's dtype and device;
    returns ``len(out_ids) × f``. ``op.to(torch.float64)`` / ``op.to("cuda")``
    rebuild the executor on the new dtype / device (collective).
    """

    def __init__(self, plan, *, device=None, dtype=torch.float32, kernels: str = "auto", timeout: float = 60.0,
                 overlap: str = "on", verify: bool = True):
        super().__init__()
        import torch.distributed as dist

        from .._args import check_real
        from ..plan.store import load_rank, read_manifest
        from .comm import CallCounter, TorchComm, agree_on_failure
        from .ops import KERNELS
        timeout = check_real("DistSpMM: timeout (seconds)", timeout, lo_open=True, error=PlanError)
        if isinstance(plan, Plan):
            self.plan_name = str(plan.manifest.get("graph", {}).get("name") or "the plan")
            m = plan.manifest
        else:
            if not isinstance(plan, (str, os.PathLike)):
                raise PlanError(f"DistSpMM: plan must be a plan directory or a Plan, got {type(plan).__name__}")
            self.plan_name = str(plan)
            m = read_manifest(plan)  # a bad plan: the same error on every rank, before any collective
        if not dist.is_available() or not dist.is_initialized():
            raise PlanError(f"{self.plan_name}: DistSpMM needs torch.distributed initialized (start the script "
                            f"with torchrun --nproc-per-node {m['ranks']} and call init_process_group, or "
                            f"partplan.runtime.init_distributed)")
        world = dist.get_world_size()
        if world != int(m["ranks"]):
            raise PlanError(f"{self.plan_name} is for {m['ranks']} ranks, this job has {world} "
                            f"(start it with --nproc-per-node {m['ranks']})")
        if kernels not in KERNELS:
            raise PlanError(f"{self.plan_name}: kernels must be one of {', '.join(KERNELS)}, got {kernels!r}")
        self._dtype = _torch_dtype(dtype)
        self._device = torch.device(device) if device is not None else torch.device("cpu")
        if self._device.type == "cuda" and kernels in ("native", "scipy"):
            raise PlanError(f"{self.plan_name}: the native (scipy) kernel runs on CPU only; use kernels='torch'")
        self.manifest = m
        self.rank = dist.get_rank()
        self.kernels = kernels
        self.overlap = overlap
        self.comm = TorchComm(manifest_groups(m), timeout_s=timeout, device=self._device)
        self.comm.bind_world_timeout()  # a peer that never calls fails within `timeout`, not init's 30 min
        failure = None
        try:   # this rank's shard: a bad one is said on every rank, not only here
            self.shard = plan.ranks[self.rank] if isinstance(plan, Plan) else load_rank(plan, self.rank, manifest=m)
        except Exception as exc:  # noqa: BLE001 - re-raised here; the peers raise its message
            failure = exc
        bad = agree_on_failure(self.comm, world, self.rank, failure)
        if failure is not None:
            raise failure
        if bad is not None:     # the peers would otherwise wait out the timeout at the first exchange
            raise PlanError(f"{self.plan_name}: rank {bad[0]} could not load its part of the plan: {bad[1]}")
        self._same_plan_everywhere(m)
        self.calls = CallCounter(self.comm, self.plan_name)
        self._block = None
        self._checks_left = AGREE_CALLS
        self._build(verify=verify)

    def _same_plan_everywhere(self, m: dict) -> None:
        """Every rank opened the same plan: a digest of what defines it (the graph's fingerprints,
        the normalization, the partition file's and every shard's sha256) agrees over the world, one
        small all-reduce at construction. Ranks with copies of two plans of one partition (another
        weighting, another normalization) passed the count checks and computed a mix of both."""
        import hashlib
        import json
        g = m.get("graph", {})
        key = json.dumps([g.get("fingerprint"), g.get("source_fingerprint"), m.get("normalize"),
                          m.get("partition_file", {}).get("sha256"),
                          [e.get("sha256") for e in m.get("shards", [])]], sort_keys=True, default=str)
        raw = hashlib.sha256(key.encode()).digest()
        chunks = np.array([float(int.from_bytes(raw[i:i + 6], "little")) for i in (0, 6, 12)])   # exact in float64
        hi, neg_lo = np.split(self.comm.allreduce_world([np.concatenate([chunks, -chunks])], "max")[0], 2)
        if not np.array_equal(hi, -neg_lo):
            raise PlanError(f"{self.plan_name}: the ranks opened different plans (their manifests name other "
                            f"graphs, normalizations, partition files or shards): every rank must read one plan "
                            f"(rank {self.rank} read {self.plan_name}, graph fingerprint "
                            f"{str(g.get('fingerprint'))[:16]}…)")

    def _agree_rows(self, x, program: str, what: str) -> None:
        """Every rank passes rows of one width and dtype: receive buffers are sized from this rank's
        own rows, so a peer's other width came out as wrong numbers on one rank and a gloo abort on
        another. One small all-to-all per group the program exchanges in
        (:meth:`~partplan.runtime.comm.TorchComm.agree`, bounded by the timeout), in each of the
        first AGREE_CALLS calls (a loop's shapes are settled by then)."""
        if self._checks_left <= 0:
            return
        self._checks_left -= 1
        v = np.array([int(x.shape[1]), int(x.dtype == torch.float64)], dtype=np.int64)
        families = dict.fromkeys(st["group"] for st in program_steps(self.manifest, program) if "group" in st)
        for family in families:
            ((lo, hi),) = self.comm.agree(family, [v], f"{what} check")
            if not np.array_equal(lo, hi):
                raise PlanError(f"{self.plan_name}: rank {self.rank}: the ranks pass {what} of different widths or "
                                f"dtypes (this rank: {tuple(x.shape)}, {str(x.dtype).replace('torch.', '')}; widths "
                                f"{int(lo[0])} to {int(hi[0])}): every rank passes rows of the same width and "
                                f"dtype in each call")

    # ------------------------------------------------------------------ executor
    def _build(self, verify: bool) -> None:
        from .interpreter import Executor
        from .ops import TorchOps
        kern = self.kernels
        if kern == "auto" or (kern in ("native", "scipy") and self._device.type != "cpu"):
            kern = "torch" if self._device.type == "cuda" else "scipy"
        self.ops = TorchOps(str(self._dtype).replace("torch.", ""), self._device, kern)
        self.comm.device = self._device
        self.executor = Executor(self.manifest, [self.shard], self.comm, self.ops, verify=verify,
                                 overlap=self.overlap)
        # per-phase seconds need a device sync after every step; not on a GPU training loop
        self.executor.phase_times = self._device.type != "cuda"

    @property
    def dtype(self) -> torch.dtype:
        return self._dtype

    @property
    def device(self) -> torch.device:
        return self._device

    def __getstate__(self):
        # process groups do not pickle: a saved module keeps its plan's rows and must be built
        # again to run (it has no parameters: state dicts hold nothing of it)
        state = dict(self.__dict__)
        state["comm"] = state["executor"] = state["ops"] = state["calls"] = None
        return state

    def _apply(self, fn, *args, **kwargs):
        super()._apply(fn, *args, **kwargs)
        if self.comm is None:  # unpickled: nothing to rebuild until it is built again from the plan
            return self
        probe = fn(torch.empty(0, dtype=self._dtype, device=self._device))
        if probe.dtype != self._dtype or probe.device != self._device:
            dt = _torch_dtype(probe.dtype)
            if probe.device.type == "cuda" and self.kernels in ("native", "scipy"):
                raise PlanError(f"{self.plan_name}: the native (scipy) kernel runs on CPU only; "
                                f"construct DistSpMM with kernels='torch' or 'auto' to move it to {probe.device}")
            self._dtype, self._device = dt, probe.device
            self._build(verify=False)  # the counts were checked when the module was made
        return self

    def extra_repr(self) -> str:
        return (f"plan={self.plan_name!r}, rank={self.rank}/{self.manifest['ranks']}, in_rows={len(self.in_ids)}, "
                f"out_rows={len(self.out_ids)}, dtype={self._dtype}, device={self._device}")

    # ------------------------------------------------------------------ rows
    @property
    def in_ids(self) -> np.ndarray:
        """Global ids (int64) of the input rows this rank reads, in order (a
        writable copy: ``torch.from_numpy`` takes it without a warning)."""
        return np.array(self.shard.in_ids("forward"), dtype=np.int64)

    @property
    def out_ids(self) -> np.ndarray:
        """Global ids (int64) of the rows of Z this rank returns, in order (a writable copy)."""
        return np.array(self.shard.out_ids("forward"), dtype=np.int64)

    @property
    def local_ids(self) -> np.ndarray:
        """Global ids of this rank's rows when it reads and computes the same rows
        (a conformal 1d plan: ``in_ids == out_ids``), as :class:`partplan.nn.Halo`
        names them; other plans raise :class:`PlanError` (use ``in_ids`` / ``out_ids``)."""
        ids = self.in_ids
        if not np.array_equal(ids, self.out_ids):
            raise PlanError(f"{self.plan_name}: rank {self.rank} reads rows in_ids and computes rows out_ids, "
                            f"which differ on this plan; index the input by in_ids and the output by out_ids")
        return ids

    @property
    def halo_ids(self) -> np.ndarray:
        """Global ids (int64) of the rows this rank receives from its peers in the
        forward pass, in the order they follow the input rows in
        :meth:`local_edge_index`'s source positions."""
        return self._local_block()[0]

    @property
    def has_backward(self) -> bool:
        return "backward" in self.manifest["programs"]

    def _local_block(self):
        """(halo ids, edge_index, weights) of a plan whose forward program is one
        local SpMM over ``[in rows; received rows]`` (1d layouts)."""
        if self._block is not None:
            return self._block
        steps = program_steps(self.manifest, "forward")
        ops = [st["op"] for st in steps]
        spmms = [st for st in steps if st["op"] == "spmm"]
        bad = [o for o in ops if o not in ("copy", "gather", "alltoallv", "spmm")]
        if bad or len(spmms) != 1 or spmms[0]["dst"] != "out":
            raise PlanError(f"{self.plan_name}: local_edge_index needs a plan whose forward program is one local "
                            f"SpMM over [held rows; received rows] (1d layouts); layout "
                            f"{self.manifest.get('layout')!r} runs {', '.join(ops)}")
        sh, sizes = self.shard, self.shard.buffers("forward")
        ids = {"in": self.in_ids}
        for st in steps:
            sid, op = st["id"], st["op"]
            if op == "copy":
                src = ids[st["src"]]
                at = dst_start(st, sizes)
                buf = ids.setdefault(st["dst"], np.full(sizes[st["dst"]], -1, np.int64))
                buf[at:at + src.size] = src
            elif op == "gather":
                ids[st["dst"]] = ids[st["src"]][np.asarray(sh[f"{sid}.idx"], dtype=np.int64)]
            elif op == "alltoallv":
                rid = np.asarray(sh[f"{sid}.recv_ids"], dtype=np.int64)
                at = dst_start(st, sizes, default=0)
                buf = ids.setdefault(st["dst"], np.full(sizes[st["dst"]], -1, np.int64))
                buf[at:at + rid.size] = rid
        st = spmms[0]
        src = ids.get(st["src"])
        n_in = self.in_ids.size
        if st["src"] == "in":
            src = self.in_ids
        if src is None or np.any(src < 0) or not np.array_equal(src[:n_in], self.in_ids):
            raise PlanError(f"{self.plan_name}: rank {self.rank}: the forward SpMM does not read "
                            f"[held rows; received rows]; local_edge_index is not defined for this plan")
        sid = st["id"]
        ip = np.asarray(sh[f"{sid}.indptr"], dtype=np.int64)
        ix = np.asarray(sh[f"{sid}.indices"], dtype=np.int64)
        if not np.array_equal(np.asarray(sh[f"{sid}.row_ids"], dtype=np.int64), self.out_ids):
            raise PlanError(f"{self.plan_name}: rank {self.rank}: the forward SpMM's rows are not out_ids")
        tgt = np.repeat(np.arange(ip.size - 1, dtype=np.int64), np.diff(ip))
        w = (np.asarray(sh[f"{sid}.data"], dtype=np.float64) if sh.has(f"{sid}.data")
             else np.ones(ix.size, dtype=np.float64))
        self._block = (np.ascontiguousarray(src[n_in:]), np.vstack([ix, tgt]), w)
        return self._block

    def local_edge_index(self) -> torch.Tensor:
        """This rank's block of A as a PyG ``edge_index`` (int64, 2 × E) over
        local positions, in PyG's source → target convention:

        * ``edge_index[0]`` (sources) index the rows of ``X_ext =
          cat([h, H[halo_ids]])``: ``0 .. len(in_ids) - 1`` are the input rows
          (``in_ids``), ``len(in_ids) + k`` is halo row ``halo_ids[k]``;
        * ``edge_index[1]`` (targets) index the output rows (``out_ids``).

        Edge e is the nonzero ``A[out_ids[t], ext_ids[s]]`` with weight
        ``local_edge_weight()[e]``, so ``op(h)[t] = Σ_e w_e · X_ext[s_e]`` over
        the edges with target t (a scatter-add, PyG's ``aggr="add"``). Edges are
        sorted by target, then in the plan's stored order. Defined for plans
        whose forward program is one local SpMM (1d layouts); others raise
        :class:`PlanError`."""
        return torch.from_numpy(self._local_block()[1].copy())

    def local_edge_weight(self) -> torch.Tensor:
        """Values of the edges of :meth:`local_edge_index` (float64; ones for
        an unweighted, unnormalized plan)."""
        return torch.from_numpy(self._local_block()[2].copy())

    # ------------------------------------------------------------------ compute
    def _check_input(self, x, program: str, what: str) -> None:
        if not isinstance(x, torch.Tensor):
            raise PlanError(f"{self.plan_name}: DistSpMM takes a torch.Tensor, got {type(x).__name__}")
        if x.dtype != self._dtype:
            how = (f"cast the input, or move the module with .to({x.dtype})" if x.dtype in (torch.float32, torch.float64)
                   else "cast the input: DistSpMM computes in torch.float32 or torch.float64")
            raise PlanError(f"{self.plan_name}: {what} has dtype {x.dtype}, this DistSpMM computes in "
                            f"{self._dtype} ({how})")
        if x.device.type != self._device.type or (self._device.index is not None and x.device.index is not None
                                                   and x.device.index != self._device.index):
            raise PlanError(f"{self.plan_name}: {what} is on {x.device}, this DistSpMM's buffers are on "
                            f"{self._device} (move the input, or the module with .to({str(x.device)!r}))")
        rows = self.shard.buffers(program)["in"]
        if x.dim() != 2 or x.shape[0] != rows:
            raise PlanError(f"{self.plan_name}: rank {self.rank}: {what} has shape {tuple(x.shape)}, the plan's "
                            f"{program} program reads {rows} rows × f (rows in_ids of H)")

    def _run(self, program: str, x):
        if self.executor is None:
            raise PlanError(f"{self.plan_name}: this DistSpMM was unpickled; process groups do not survive "
                            f"pickling: build it again with partplan.nn.DistSpMM(plan)")
        if program not in self.manifest["programs"]:
            raise PlanError(f"{self.plan_name}: the plan has no {program} program (backward: "
                            f"{self.manifest.get('backward')!r}), so DistSpMM cannot compute gradients of its "
                            f"input; rebuild the plan with the backward program planned (build_plan(..., "
                            f"backward=True)) or call it under torch.no_grad()")
        what = "the input" if program == "forward" else "the gradient"
        self._check_input(x, program, what)
        self.calls.called()
        try:
            self._agree_rows(x, program, what)
            return self.executor.run(program, [x.detach().contiguous()])[0].clone()
        except CommError:
            self.calls.fail(f"the {program} program")
            raise

    @property
    def replicas(self) -> int:
        """Ranks holding each row (``ranks / row_blocks``: 1 for 1d and 2d plans, c for 1.5d:c)."""
        return max(1, int(self.manifest["ranks"]) // max(1, int(self.manifest.get("row_blocks") or
                                                                 self.manifest["ranks"])))

    def forward(self, h):
        """Rows ``out_ids`` of ``A @ H`` from rows ``in_ids`` of H (autograd-aware)."""
        self._check_input(h, "forward", "the input")
        if self.replicas > 1 and torch.is_grad_enabled() and h.requires_grad:
            raise PlanError(f"{self.plan_name}: layout {self.manifest.get('layout')!r} holds every row on "
                            f"{self.replicas} ranks, so a loss summed over the ranks counts each row "
                            f"{self.replicas} times and its gradients would be {self.replicas}x too large; "
                            f"train through DistSpMM with a 1d or 2d plan (partplan train gcn and DistGCN "
                            f"scale replicated rows themselves), or call it under torch.no_grad()")
        if self.executor is None:
            raise PlanError(f"{self.plan_name}: this DistSpMM was unpickled; process groups do not survive "
                            f"pickling: build it again with partplan.nn.DistSpMM(plan)")
        return _PlanSpMMFn.apply(self, h)

    def transpose_apply(self, g):
        """Rows ``in_ids`` of ``A^T @ G`` from rows ``out_ids`` of G (the backward
        program, no autograd)."""
        return self._run("backward", g)

    def backward(self, g):
        """:meth:`transpose_apply` (the older :class:`partplan.runtime.DistSpMM` name)."""
        return self._run("backward", g)
