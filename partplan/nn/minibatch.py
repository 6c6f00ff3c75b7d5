"""Mini-batch GCN training whose exchange is computed from each batch at run time.

Every rank holds its own rows of the normalized matrix ``Â`` (read from its
shard; with the partition vector, reported as ``structure_bytes_per_rank``) and
runs the same seeded sampler, so all ranks draw the same batch: a list of hops
``(rows, cols)`` of sampled nonzeros ``Â[i, j]`` with their values
(:mod:`partplan.models.stochastic`'s samplers, drawn by
:class:`partplan.nn.sampling.DistSampler` from the rows' owners: the batch the
sampler gives on the whole matrix; hop 0 = the seeds' neighbours = the last
layer). The batch's rows stay where the partition puts
them (1D): in layer ``l`` rank ``part[i]`` computes row i from the sampled
``j``; row ``H[j]`` moves from ``part[j]`` to every other rank that needs it,
once per (row, destination) — exactly the batch volume the stochastic
hypergraph model counts (:func:`partplan.models.stochastic.batch_volume`).

Per layer a rank first exchanges its counts (one int64 per peer, checked
against what it computed from the batch), then the payload (``alltoallv``);
the backward pass sends the partial gradients of received rows back and
scatter-adds them. Bytes: payload counted by the comm counters and compared
with the batch's predicted pairs × width × itemsize; count messages
(``8 · p`` bytes per rank and layer) are reported separately.

Layer ``l`` computes the rows of its hop plus the rows the next layer
gathers (a row without sampled neighbours aggregates to 0). The loss is the
mean cross-entropy over the batch's seeds that are in ``train_mask``.

Batches come from ``np.random.default_rng(seed + 7919)`` and the sampler on
the plan's matrix (rows sorted as in the plan), so a run can be replayed:
``rows_per_batch[b]`` equals
:func:`~partplan.models.stochastic.batch_volume` of batch b.
"""
from __future__ import annotations

import numpy as np
import torch

from ..errors import PlanError
from ..models.stochastic import make_sampler


class _Route:
    """One layer's exchange for the local ranks: send positions, counts, and
    where each sampled column lives in the extended input."""

    def __init__(self, send_idx, send_counts, recv_counts):
        self.send_idx, self.send_counts, self.recv_counts = send_idx, send_counts, recv_counts


class BatchExchange(torch.autograd.Function):
    """``ext_r = [H_r ; rows received]`` forward; backward returns the received
    rows' gradients to their owners and scatter-adds them."""

    @staticmethod
    def forward(ctx, comm, route: _Route, *hs):
        ctx.comm, ctx.route, ctx.sizes = comm, route, [h.shape[0] for h in hs]
        got = comm.exchange_counts("world", route.send_counts)  # counts first: what each peer will send
        for r, g, rc in zip(comm.local, got, route.recv_counts):
            if not np.array_equal(g, rc):
                from ..runtime.comm import CommError
                raise CommError(f"rank {r}: peers announce {g.tolist()} rows, this rank computed {rc.tolist()} "
                                f"from the batch (ranks disagree on the sample)")
        sends = [h[idx] for h, idx in zip(hs, route.send_idx)]
        outs = [h.new_empty((int(rc.sum()), h.shape[1])) for h, rc in zip(hs, route.recv_counts)]
        comm.alltoallv("world", sends, route.send_counts, route.recv_counts, outs, what="batch exchange")
        return tuple(torch.cat([h, o]) for h, o in zip(hs, outs))

    @staticmethod
    def backward(ctx, *gs):
        route = ctx.route
        back = [g[n:].contiguous() for g, n in zip(gs, ctx.sizes)]
        outs = [g.new_empty((idx.shape[0], g.shape[1])) for g, idx in zip(gs, route.send_idx)]
        ctx.comm.alltoallv("world", back, route.recv_counts, route.send_counts, outs, what="batch exchange (bwd)")
        grads = []
        for g, n, idx, o in zip(gs, ctx.sizes, route.send_idx, outs):
            gl = g[:n].clone()
            gl.index_add_(0, idx, o)
            grads.append(gl)
        return (None, None, *grads)


def _positions(sorted_ids: np.ndarray, query: np.ndarray, rank: int) -> np.ndarray:
    """Positions of ``query`` in ``sorted_ids``; every id must be present."""
    pos = np.searchsorted(sorted_ids, query)
    if query.size and (pos.max() >= sorted_ids.size or np.any(sorted_ids[np.minimum(pos, sorted_ids.size - 1)]
                                                                != query)):
        raise PlanError(f"rank {rank}: a batch needs rows this rank did not compute (internal error)")
    return pos.astype(np.int64)


def _layer_plan(rows, cols, vals, part, k, ranks, prev_ids, out_ids):
    """Route and local matrices of one layer for ``ranks`` (the local ranks).

    prev_ids[r]: sorted global ids of the input rows rank r holds; out_ids[r]:
    sorted global ids it computes. Returns (route, mats, predicted rows int64[k, k])."""
    pr = part[rows]
    key = np.unique(cols * k + pr)              # (j, destination) once
    j, dst = key // k, key % k
    src = part[j]
    remote = src != dst
    j, dst, src = j[remote], dst[remote], src[remote]
    vol = np.zeros((k, k), dtype=np.int64)
    np.add.at(vol, (src, dst), 1)
    send_idx, sc_all, rc_all, mats = [], [], [], []
    for i, r in enumerate(ranks):
        s = src == r
        o = np.lexsort((j[s], dst[s]))          # by destination, then id
        send_idx.append(torch.from_numpy(_positions(prev_ids[i], j[s][o], r)))
        sc_all.append(vol[r].copy())
        rc_all.append(vol[:, r].copy())
        # receive order: by source rank, then id  -> key src*n + j ascending
        d = dst == r
        rk = np.sort(src[d] * part.size + j[d])
        mine = pr == r
        ri, cj, v = rows[mine], cols[mine], vals[mine]
        local = part[cj] == r
        cpos = np.empty(cj.size, dtype=np.int64)
        cpos[local] = _positions(prev_ids[i], cj[local], r)
        cpos[~local] = prev_ids[i].size + np.searchsorted(rk, part[cj[~local]] * part.size + cj[~local])
        rpos = np.searchsorted(out_ids[i], ri)
        mats.append((rpos, cpos, v, (out_ids[i].size, prev_ids[i].size + rk.size)))
    return _Route(send_idx, sc_all, rc_all), mats, vol


def _spmm(mat, x):
    rpos, cpos, v, shape = mat
    S = torch.sparse_coo_tensor(torch.from_numpy(np.vstack([rpos, cpos])), torch.from_numpy(v).to(x.dtype),
                                shape, check_invariants=False).coalesce()
    return torch.sparse.mm(S, x)


def backward_exchanges(model) -> list[bool]:
    """Per layer: does the backward pass send gradients back? Not in layer 1
    when it exchanges raw X (``(Â X) W``: X needs no gradient)."""
    return [layer > 0 or model.dims[1] <= model.dims[0] for layer in range(model.layers)]


def minibatch_forward(model, comm, part, k, ranks, hops, hop_vals, x_rows, x_ids, *, epoch_seed: int,
                      vol_out: list):
    """Logits of each local rank's seed rows (``out_ids`` of the last layer).

    hops / hop_vals: the batch's hops ``(rows, cols)`` and their values ``Â[rows, cols]``
    (:meth:`partplan.nn.sampling.DistSampler.sample`).
    x_rows[i] / x_ids[i]: the local rank's feature rows and their sorted ids.
    Appends each layer's predicted volume matrix (rows) to ``vol_out``.
    Returns (logits per local rank, seed ids per local rank)."""
    L = model.layers
    if len(hops) != L:
        raise PlanError(f"the sampler gives {len(hops)} hops for a {L}-layer model (give one fanout per layer)")
    layer_hops = [hops[L - 1 - layer] for layer in range(L)]  # layer 0 uses the outermost hop
    layer_vals = [hop_vals[L - 1 - layer] for layer in range(L)]
    outs_per_layer = []
    for layer in range(L):
        rows, cols = layer_hops[layer]
        need = np.unique(layer_hops[layer + 1][1]) if layer + 1 < L else np.zeros(0, np.int64)
        allrows = np.union1d(np.unique(rows), need)
        outs_per_layer.append([allrows[part[allrows] == r] for r in ranks])
    h = [torch.from_numpy(xr) for xr in x_rows]
    prev = list(x_ids)
    for layer in range(L):
        rows, cols = layer_hops[layer]
        vals = layer_vals[layer]
        route, mats, vol = _layer_plan(rows, cols, vals, part, k, ranks, prev, outs_per_layer[layer])
        vol_out.append(vol)
        w = model.weights[layer]
        if w.shape[1] <= w.shape[0]:
            ext = BatchExchange.apply(comm, route, *[x @ w for x in h])
            h = [_spmm(mt, e) for mt, e in zip(mats, ext)]
        else:
            ext = BatchExchange.apply(comm, route, *h)
            h = [_spmm(mt, e) @ w for mt, e in zip(mats, ext)]
        if len(model.biases):
            h = [x + model.biases[layer] for x in h]
        if layer < L - 1:
            h = [torch.relu(x) for x in h]
            if model.training and model.dropout > 0:
                from .gcn import apply_dropout
                h = apply_dropout(h, outs_per_layer[layer], model.dropout,
                                  (model.seed * 1_000_003 + epoch_seed * 101 + layer) % (1 << 62))
        prev = outs_per_layer[layer]
    return h, prev


def sampler_for(spec: str, layers: int, batch_size: int | None = None):
    """The stochastic model's sampler from its spec, with ``layers`` hops."""
    if not isinstance(spec, str):      # DistSampler draws the three samplers of a spec, not an object's
        from ..errors import OptionError
        raise OptionError(f"sampler must be a spec such as 'neighbor:512:10,5', 'saint-node:2000' or "
                          f"'saint-rw:500:4', got {type(spec).__name__}")
    smp = make_sampler(spec)
    if hasattr(smp, "fanouts"):
        if batch_size:
            smp.batch_size = int(batch_size)
        if len(smp.fanouts) != layers:
            raise PlanError(f"sampler {spec!r} has {len(smp.fanouts)} fanouts for a {layers}-layer model")
    elif hasattr(smp, "layers"):
        smp.layers = layers
        if batch_size:
            raise PlanError("--batch-size applies to the neighbor sampler; SAINT samplers take their budget / "
                            "roots in the spec")
    return smp
