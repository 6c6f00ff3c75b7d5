"""Kipf & Welling GCN over a plan's exchange programs.

:class:`PlanExchange` runs the plan's ``forward`` (``Â @ H``) and ``backward``
(``Âᵀ @ G``) programs on torch tensors for the local ranks of a comm (one rank
with :class:`~partplan.runtime.TorchComm`, all of them with
:class:`~partplan.runtime.LocalComm`); :class:`PlanSpMM` is the autograd
function whose backward is the planned backward program. :class:`DistGCN`
stacks layers ``H' = act(Â H W + b)``.

Replicated rows (1.5D: every row lives on c ranks) follow one invariant:
every replica computes identical values, and the gradient a replica holds is
1/c of the row's gradient (the loss is scaled by 1/c per replica), so the
backward program — which sums partials over the replica group — and the
world all-reduce of weight gradients both give exact totals.

Layer order, per layer ``d_in → d_out``: the exchange carries
``min(d_in, d_out)`` columns (``Â (H W)`` when ``d_out ≤ d_in``, else
``(Â H) W``). The first layer's ``Â X`` does not depend on the weights, so it is
computed once (:meth:`DistGCN.precompute`) and every epoch exchanges only in
layers 2..L: ``L − 1`` forward and ``L − 1`` backward SpMMs per epoch.

Dropout (after each hidden ReLU) draws its mask from (seed, epoch, layer,
global vertex id, column), not from torch's RNG: the same at any rank count.
"""
from __future__ import annotations

import numpy as np
import torch

from ..runtime.interpreter import PHASES, Executor
from ..runtime.ops import NumpyOps

__all__ = ["PlanExchange", "PlanSpMM", "DistGCN", "glorot_", "captured_epoch"]


class PlanExchange:
    """The plan's programs on torch tensors; accumulates per-phase seconds
    (``phases``) over calls until :meth:`reset_phases`."""

    def __init__(self, executor: Executor, *, phase_times: bool | None = None):
        self.ex = executor
        # per-phase seconds synchronize the device after every step; on a GPU the
        # training loop runs unsynchronized unless asked (phase_times=True)
        if phase_times is None:
            phase_times = getattr(getattr(executor.ops, "device", None), "type", "cpu") != "cuda"
        executor.phase_times = phase_times
        self.numpy = isinstance(executor.ops, NumpyOps)
        self.phases = dict.fromkeys(PHASES, 0.0)
        self.calls = 0

    def reset_phases(self) -> None:
        self.phases = dict.fromkeys(PHASES, 0.0)
        self.calls = 0

    def run(self, program: str, xs: list) -> list:
        """``program`` on one tensor per local rank (rows ``in_ids``); fresh tensors out."""
        if self.numpy:
            outs = self.ex.run(program, [x.detach().numpy() for x in xs])
            res = [torch.from_numpy(np.array(o, copy=True)) for o in outs]
        else:
            outs = self.ex.run(program, [x.detach().contiguous() for x in xs])
            res = [o.clone() for o in outs]
        for k, v in self.ex.last_phases.items():
            self.phases[k] += v
        self.calls += 1
        return res


class PlanSpMM(torch.autograd.Function):
    """``Z_r = (Â H)_r`` for every local rank r; backward ``(Âᵀ G)_r`` by the
    plan's backward program. ``PlanSpMM.apply(exchange, *H_local) -> tuple``."""

    @staticmethod
    def forward(ctx, exchange: PlanExchange, *xs):
        ctx.exchange = exchange
        ctx.like = [(x.shape, x.dtype, x.device) for x in xs]
        return tuple(exchange.run("forward", list(xs)))

    @staticmethod
    def backward(ctx, *grads):
        gs = [torch.zeros(s, dtype=dt, device=dev) if g is None else g
              for g, (s, dt, dev) in zip(grads, ctx.like)]
        return (None, *ctx.exchange.run("backward", gs))


def glorot_(w: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Glorot / Xavier uniform in place from ``gen`` (PyG's ``glorot``)."""
    a = float(np.sqrt(6.0 / (w.shape[0] + w.shape[1])))
    with torch.no_grad():
        w.copy_(torch.rand(w.shape, generator=gen, dtype=torch.float64).mul_(2 * a).sub_(a).to(w.dtype))
    return w


def dropout_mask(ids: np.ndarray, width: int, p: float, seed: int) -> np.ndarray:
    """bool keep-mask (probability 1 − p) for rows ``ids`` (global vertex ids):
    a function of (seed, id, column) only — a splitmix64 key per row, then
    murmur3's 32-bit finalizer per (row key, column)."""
    from ..runtime.spmm import random_rows
    key = random_rows(np.asarray(ids), 1, seed, "float64")[:, 0]          # [-1, 1), 53 random bits
    x = ((key + 1.0) * 2.0 ** 31).astype(np.uint32)[:, None] ^ \
        (np.arange(width, dtype=np.uint32) * np.uint32(0x9E3779B9))[None, :]
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x85EBCA6B)
    x ^= x >> np.uint32(13)
    x *= np.uint32(0xC2B2AE35)
    x ^= x >> np.uint32(16)
    return x >= np.uint32(min(int(p * 2.0 ** 32), 2 ** 32 - 1))


def apply_dropout(h: list, ids: list, p: float, seed: int) -> list:
    """``x · keep / (1 − p)`` per local rank (masks from :func:`dropout_mask`)."""
    return [x * torch.from_numpy(dropout_mask(i, x.shape[1], p, seed)).to(x.device, x.dtype) * (1.0 / (1.0 - p))
            for x, i in zip(h, ids)]


class DistGCN(torch.nn.Module):
    """GCN with ``layers`` graph convolutions (Kipf & Welling 2017).

    dims : input features, hidden width (layers 1..L−1), classes. Weights are
    ``d_in × d_out`` (Glorot uniform from ``seed``, identical on every rank),
    biases zero-initialized. ``forward`` takes one tensor of local rows per
    local rank and returns the logits per local rank.

    >>> m = DistGCN(8, 16, 3, layers=2, seed=0)
    >>> [tuple(w.shape) for w in m.weights], m.exchange_widths()
    ([(8, 16), (16, 3)], [3])
    """

    def __init__(self, in_dim: int, hidden: int, classes: int, *, layers: int = 2, dropout: float = 0.5,
                 bias: bool = True, seed: int = 0, dtype=torch.float32):
        super().__init__()
        from .._args import check_int, check_real
        layers = check_int("layers", layers, lo=1, hi=1024)
        dropout = check_real("dropout", dropout, hi=1.0, hi_open=True)
        in_dim, hidden, classes = (check_int(name, v, lo=1, hi=1 << 24) for name, v in
                                   (("in_dim", in_dim), ("hidden", hidden), ("classes", classes)))
        seed = check_int("seed", seed, lo=-(1 << 63), hi=(1 << 63) - 1)
        dims = [int(in_dim)] + [int(hidden)] * (layers - 1) + [int(classes)]
        gen = torch.Generator().manual_seed(int(seed))
        self.dims = dims
        self.dropout = float(dropout)
        self.seed = int(seed)
        self.weights = torch.nn.ParameterList(
            [torch.nn.Parameter(glorot_(torch.empty(dims[i], dims[i + 1], dtype=dtype), gen))
             for i in range(layers)])
        self.biases = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.zeros(dims[i + 1], dtype=dtype)) for i in range(layers)] if bias else [])

    @property
    def layers(self) -> int:
        return len(self.weights)

    def exchange_widths(self) -> list[int]:
        """Columns exchanged per epoch by layers 2..L (forward and backward alike)."""
        return [min(self.dims[i], self.dims[i + 1]) for i in range(1, self.layers)]

    @torch.no_grad()
    def precompute(self, exchange: PlanExchange, xs: list) -> list:
        """``Â X`` for the local ranks (once, before training)."""
        return exchange.run("forward", xs)

    def forward(self, exchange: PlanExchange, ax: list, ids: list, *, epoch: int = 0) -> list:
        """Logits per local rank. ``ax``: the precomputed ``Â X`` rows; ``ids``:
        global vertex ids of each local rank's rows (for dropout)."""
        h = [a @ self.weights[0] for a in ax]
        for layer in range(self.layers):
            if layer > 0:
                w = self.weights[layer]
                if w.shape[1] <= w.shape[0]:        # Â (H W): exchange d_out columns
                    h = list(PlanSpMM.apply(exchange, *[x @ w for x in h]))
                else:                                # (Â H) W: exchange d_in columns
                    h = [x @ w for x in PlanSpMM.apply(exchange, *h)]
            if len(self.biases):
                h = [x + self.biases[layer] for x in h]
            if layer < self.layers - 1:
                h = [torch.relu(x) for x in h]
                if self.training and self.dropout > 0:
                    h = apply_dropout(h, ids, self.dropout, (self.seed * 1_000_003 + epoch * 101 + layer) % (1 << 62))
        return h


def captured_epoch(model: DistGCN, exchange: PlanExchange, ax: list, ids: list, targets: list, opt, *, rtol=None):
    """One training epoch (zero grads, forward, mean cross-entropy over the local
    rows, backward, optimizer step) as ``step() -> loss`` (a 0-dim tensor on the
    device: reading it is the caller's one copy). The first call runs eagerly
    (it makes the optimizer's state); later ones replay one CUDA graph
    (:class:`partplan.runtime.capture.Captured`) where the epoch's shapes are
    static and nothing leaves the device: a CUDA device, one rank in a LocalComm
    (no byte counter to advance), dropout 0 or eval mode (the masks change per
    epoch), an optimizer made with ``capturable=True``. Otherwise, or when the
    capture fails, every call is eager (``step.cap.reason`` says why)."""
    from ..runtime.capture import Captured
    from ..runtime.comm import LocalComm
    dev = ax[0].device
    n = sum(int(t.numel()) for t in targets)
    loss_buf = torch.zeros((), dtype=ax[0].dtype, device=dev)

    def body():
        opt.zero_grad(set_to_none=False)
        outs = model(exchange, ax, ids)
        loss = sum(torch.nn.functional.cross_entropy(o, t, reduction="sum") for o, t in zip(outs, targets)) / n
        loss.backward()
        opt.step()
        loss_buf.copy_(loss.detach())
    comm = exchange.ex.comm
    static = (dev.type == "cuda" and isinstance(comm, LocalComm) and comm.world == 1
              and (model.dropout == 0 or not model.training)
              and all(g.get("capturable", False) for g in opt.param_groups))
    tol = (1e-5 if ax[0].dtype == torch.float32 else 1e-12) if rtol is None else rtol
    cap = Captured(body, dev, enabled=None if static else False, rtol=tol,
                   state=lambda: list(model.parameters()) + [loss_buf] + [
                       t for st in opt.state.values() for t in st.values() if torch.is_tensor(t)],
                   outputs=lambda: [loss_buf, *model.parameters()])
    if not static and cap.reason is None:
        cap.reason = "eager: the epoch is not static (dropout, a multi-rank comm, or a non-capturable optimizer)"
    calls = [0]

    def step():
        if calls[0] == 0:
            body()
        else:
            cap()
        calls[0] += 1
        return loss_buf
    step.cap = cap
    return step
