"""A distributed neighbour loader over a plan's per-rank shares, for any PyG model.

:class:`NeighborLoader` is PyG's ``NeighborLoader`` on p processes where no
rank holds the graph: rank r reads its share (:mod:`partplan.nn.shares`: its
rows' fields and in-edges), samples from the seeds it owns, and fetches what
a sampled neighbour held elsewhere brings — its node fields and, for the next
hop, its own sampled in-edges with their edge fields — from the neighbour's
owner, in one request / reply all-to-all per hop.

Sampling (PyG's rules, ``directed=True``, without replacement): a node
expanded at hop h keeps ``min(num_neighbors[h], in-degree)`` of its
in-edges (``-1``: all), a multi-edge counting once per copy; each node is
expanded once per batch, at the hop where it first appears. The edges kept
are those with the smallest keys ``hash(seed, epoch, edge id)``: a uniform
sample without replacement that is a function of (seed, epoch, node) alone,
so any rank — the node's owner — draws the same one.

Batches: the seeds (``input_nodes``) of all ranks are ordered by
``hash(seed, epoch, node)`` (or by id with ``shuffle=False``) and cut into
global batches of ``batch_size``; on step i every rank takes the seeds of
global batch i that it owns, in that order. So the union over the ranks of
step i's seeds is the same at any p (summed losses over ranks give the global
batch's gradient: :func:`partplan.nn.global_mean`). Each rank samples the
trees of its own seeds, expanding a node once, at the hop where it first
appears in them: where one rank's trees reach a node that the global batch
reaches earlier (another rank's seed, say), its fanout there is that of the
later hop, so a seed's sampled tree is the single-process one when the trees
of different ranks' seeds do not meet, or with every fanout -1 (then, with L
layers and L hops, every seed's output is the full-graph one). Every rank runs
the same number of steps (collective); a rank without seeds in a step gets an
empty batch.

Each batch is a ``torch_geometric.data.Data`` with what PyG's loader gives:
``x``, ``y``, every node field in ``n_id`` order (the seeds first),
``edge_index`` (PyG's source → target flow, indices into ``n_id``), every edge
field (``edge_attr``, ...) in ``e_id`` order, ``n_id`` and ``e_id`` (global
ids: ``data.edge_index[:, e_id] == n_id[edge_index]``), ``batch_size``,
``num_sampled_nodes`` / ``num_sampled_edges`` per hop; so
``model(batch.x, batch.edge_index)[:batch.batch_size]`` runs unchanged.
``batch.comm_bytes`` = {"predicted", "measured"}: bytes this rank sent
(requests) and received (replies) for the batch, the prediction from the
batch's remote nodes and edges, the measurement from the transport.
"""
from __future__ import annotations

import os
from typing import Iterator, Sequence

import numpy as np
import torch

from ..errors import OptionError, PlanError
from ..program.exchange import segments

__all__ = ["NeighborLoader", "sample_keys"]

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer over uint64 (wrapping)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def sample_keys(seed: int, epoch: int, ids: np.ndarray, salt: int = 0) -> np.ndarray:
    """uint64 keys ``hash(seed, epoch, salt, id)``: edge keys (salt 0) decide samples, node keys (salt 1) the
    seeds' order."""
    with np.errstate(over="ignore"):
        base = _mix(np.array([(int(seed) * 0x9E3779B97F4A7C15 + int(epoch) * 0xD1B54A32D192ED03
                               + int(salt) * 0x8CB92BA72F3D8DD7) & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))
        return _mix(np.asarray(ids, dtype=np.int64).view(np.uint64) * np.uint64(0x9E3779B97F4A7C15) ^ base)


class _Local:
    """This rank's share as a sampler: in-edges of its rows by target (CSC), edge ids ascending."""

    def __init__(self, sh: dict, halo_ids: np.ndarray):
        """Takes the share's ``edge_index`` and ``edge_ids`` out of ``sh``: each is dropped as soon as
        its sorted copy exists, so building holds at most the share's edges and two sorted arrays
        (one int32 when the edges fit)."""
        lid = sh["local_ids"]
        ei, eids = sh.pop("edge_index"), sh.pop("edge_ids")
        order = np.lexsort((eids, ei[1]))
        if order.size < 2 ** 31:
            order = order.astype(np.int32)
        self.local_ids = lid
        self.sorter = np.argsort(lid, kind="stable")
        self.sorted_ids = lid[self.sorter]
        self.ptr = np.zeros(lid.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(ei[1], minlength=lid.size), out=self.ptr[1:])
        self.eid = eids[order]
        del eids
        src = ei[0][order]
        del ei
        rows = np.concatenate([lid, halo_ids])
        np.take(rows, src, out=src, mode="clip")     # in place (read_share checked every index)
        self.src = src
        self.edge_pos = order           # row of each CSC entry in the share's edge fields

    def pos(self, ids: np.ndarray) -> np.ndarray:
        """Local positions of owned global ids."""
        return self.sorter[np.searchsorted(self.sorted_ids, ids)]

    def sample(self, ids: np.ndarray, k: int, seed: int, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """For owned nodes ``ids``: (per-node counts, CSC positions of the kept in-edges, grouped by node,
        edge ids ascending within a node)."""
        p = self.pos(ids)
        lo, deg = self.ptr[p], self.ptr[p + 1] - self.ptr[p]
        cand = segments(lo, deg)
        if k < 0 or cand.size == 0 or int(deg.max(initial=0)) <= k:
            return deg, cand
        seg = np.repeat(np.arange(ids.size, dtype=np.int64), deg)
        keys = sample_keys(seed, epoch, self.eid[cand])
        o = np.lexsort((keys, seg))                           # by node, then key
        rank_in_seg = np.arange(cand.size, dtype=np.int64) - np.repeat(np.cumsum(deg) - deg, deg)
        keep = o[rank_in_seg < k]                             # the k smallest keys of each node
        keep.sort()                                           # back to node order, edge ids ascending
        return np.minimum(deg, k), cand[keep]


class _Transport:
    """All-to-all of byte rows with counts first (gloo / NCCL through torch.distributed, or one process);
    counts the payload bytes this rank sends and receives per peer."""

    def __init__(self, rank: int, world: int, timeout: float):
        self.rank, self.world, self.timeout = rank, world, float(timeout)
        # CPU byte rows, exchanged on the current GPU under a process group without a CPU backend
        # (init_process_group("nccl"): NCCL refuses CPU tensors); counted as the same bytes either way
        self.device = torch.device("cpu")
        if world > 1:
            from ..runtime.comm import collective_device
            self.device = collective_device(self.device)
        self.last_sent = np.zeros(world, dtype=np.int64)   # bytes the last a2a sent to / received from each peer
        self.last_recv = np.zeros(world, dtype=np.int64)

    def wait(self, work, what: str) -> None:
        """Wait for an asynchronous collective at most ``timeout`` seconds; one PlanError otherwise."""
        import datetime
        try:
            work.wait(timeout=datetime.timedelta(seconds=self.timeout))
        except RuntimeError as exc:
            raise PlanError(f"rank {self.rank}: the neighbour loader's {what} did not complete within "
                            f"{self.timeout:g} s (a rank stopped iterating, or iterates another epoch or step "
                            f"count): {str(exc).splitlines()[0][:200]}") from None

    def a2a(self, rows: torch.Tensor, counts: np.ndarray, row_bytes: int) -> tuple[torch.Tensor, np.ndarray]:
        """Send ``rows`` (uint8, n × row_bytes, grouped by destination with ``counts[d]`` rows each);
        returns (received rows grouped by source, counts per source)."""
        counts = np.asarray(counts, dtype=np.int64)
        if rows.dim() != 2 or rows.dtype != torch.uint8 or rows.shape[0] != int(counts.sum()):
            raise PlanError(f"rank {self.rank}: {rows.shape[0]} rows to send for counts summing to {int(counts.sum())}")
        if self.world == 1:
            self.last_sent = self.last_recv = np.zeros(1, dtype=np.int64)
            return rows, counts
        import torch.distributed as dist
        dev = self.device
        c = torch.from_numpy(counts.copy()).to(dev)
        rc = torch.empty_like(c)
        self.wait(dist.all_to_all_single(rc, c, async_op=True), "count exchange")
        rcounts = rc.cpu().numpy().astype(np.int64)
        out = torch.empty((int(rcounts.sum()), row_bytes), dtype=torch.uint8, device=dev)
        if row_bytes:
            self.wait(dist.all_to_all_single(out, rows.contiguous().to(dev), output_split_sizes=rcounts.tolist(),
                                             input_split_sizes=counts.tolist(), async_op=True), "exchange")
        out = out.cpu()
        # bytes on the wire per peer, from the buffers themselves (this rank's own rows never leave it)
        other = np.arange(self.world) != self.rank
        self.last_sent = counts * int(rows.shape[1]) * rows.element_size() * other
        self.last_recv = rcounts * int(out.shape[1]) * out.element_size() * other
        return out, rcounts

    def allreduce_world(self, values, op: str = "max") -> list[np.ndarray]:
        """Max or sum over the ranks of small float64 vectors (the start-up failure check,
        :func:`partplan.runtime.comm.agree_on_failure`)."""
        import torch.distributed as dist
        out = []
        for v in values:
            t = torch.from_numpy(np.array(v, dtype=np.float64)).to(self.device)
            self.wait(dist.all_reduce(t, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM,
                                      async_op=True), "start-up check")
            out.append(t.cpu().numpy())
        return out

    def all_gather(self, outs: list, t: torch.Tensor, what: str) -> None:
        import torch.distributed as dist
        if self.device.type == "cpu":
            self.wait(dist.all_gather(outs, t, async_op=True), what)
            return
        moved = [o.to(self.device) for o in outs]
        self.wait(dist.all_gather(moved, t.to(self.device), async_op=True), what)
        for o, m in zip(outs, moved):
            o.copy_(m.cpu())


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    """rows × bytes (uint8) of any dense tensor."""
    t = t.detach().contiguous()
    width = int(np.prod(t.shape[1:], dtype=np.int64)) if t.dim() > 1 else 1
    flat = t.reshape(t.shape[0], width)
    return flat.view(torch.uint8) if flat.dtype != torch.uint8 else flat


def _int_rows(a: np.ndarray) -> torch.Tensor:
    """rows × (8 · columns) uint8 of an int64 matrix."""
    flat = torch.from_numpy(np.array(a, dtype=np.int64).reshape(-1))
    return flat.view(torch.uint8).reshape(a.shape[0], 8 * a.shape[1])


def _from_bytes(b: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    fresh = torch.empty(tuple(b.shape), dtype=torch.uint8)   # offset 0, row-major: viewable as any dtype
    fresh.copy_(b)
    return fresh.view(like.dtype).reshape((b.shape[0],) + tuple(like.shape[1:]))


class _Packer:
    """Several tensors with the same rows, packed as one byte matrix."""

    def __init__(self, fields: dict):
        self.names = sorted(fields)
        self.like = {k: fields[k][:0] for k in self.names}
        self.widths = [_as_bytes(fields[k][:1]).shape[1] if fields[k].dim() else 0 for k in self.names]
        self.row_bytes = int(sum(self.widths))

    def pack(self, fields: dict, rows: np.ndarray) -> torch.Tensor:
        idx = torch.from_numpy(rows)
        parts = [_as_bytes(fields[k][idx]) for k in self.names]
        return torch.cat(parts, 1) if parts else torch.zeros((rows.size, 0), dtype=torch.uint8)

    def unpack(self, b: torch.Tensor) -> dict:
        out, at = {}, 0
        for k, w in zip(self.names, self.widths):
            out[k] = _from_bytes(b[:, at:at + w], self.like[k])
            at += w
        return out


class NeighborLoader:
    """Mini-batches of sampled subgraphs from a plan's shares (see the module doc).

    Parameters
    ----------
    plan : a plan directory with shares (``plan_from_pyg(data, p, out=PATH, shares=True)``), 1D.
    num_neighbors : in-edges kept per node at each hop (``-1``: all), e.g. ``[10, 5]``.
    batch_size : seeds per global batch (over all ranks).
    input_nodes : the seeds: the name of a bool node field of the shares (``"train_mask"``), a bool
        tensor over all vertices, or global vertex ids (a set: an id listed twice is one seed, where
        PyG's loader would draw it twice); None: every vertex.
    seed : the sampling seed; the same seed gives the same batches at any p.
    shuffle : order the seeds by ``hash(seed, epoch, node)`` (True) or by id.
    drop_last : skip the last global batch when it is short.
    timeout : seconds each exchange waits on its peers; a rank that stops iterating makes the others
        raise one PlanError within it.
    pyg_options : PyG's ``replace``, ``directed``, ``disjoint``, ``subgraph_type``, ``num_workers``,
        ``persistent_workers``, ``pin_memory`` at their defaults only (anything else: one OptionError).

    torch.distributed must be initialized with the plan's rank count (or not at all for a 1-rank
    plan). ``len(loader)`` = steps per epoch (every rank); each ``iter()`` is one epoch
    (``set_epoch`` sets the next one; it starts at 0 and counts up).

    Example (each rank of ``torchrun --nproc-per-node 2``)::

        loader = partplan.nn.NeighborLoader("g.plan", num_neighbors=[10, 5], batch_size=512,
                                            input_nodes="train_mask", seed=0)
        for batch in loader:
            out = model(batch.x, batch.edge_index)[:batch.batch_size]
            loss = partplan.nn.global_mean(F.cross_entropy(out, batch.y[:batch.batch_size],
                                                           reduction="none"), ddp=True)
    """

    def __init__(self, plan, num_neighbors: Sequence[int], *, batch_size: int = 1, input_nodes=None,
                 seed: int = 0, shuffle: bool = True, drop_last: bool = False, timeout: float = 60.0,
                 **pyg_options):
        from ..plan.store import load_plan_partition, load_rank, read_manifest
        from torch_geometric.data import Data  # noqa: F401 - imported here, not in the first batch
        from .rows import RankRows, exchange_step
        from .shares import read_share
        if not isinstance(plan, (str, os.PathLike)):
            raise PlanError(f"NeighborLoader takes the plan's path first (NeighborLoader(\"g.plan\", num_neighbors, "
                            f"...): each rank reads its share of the data there), got {type(plan).__name__}")
        if not isinstance(num_neighbors, (list, tuple, np.ndarray)) or not len(num_neighbors) or any(
                not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < -1 for k in num_neighbors):
            raise OptionError(f"num_neighbors must be a list of ints >= -1 (one per hop), got {num_neighbors!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise OptionError(f"batch_size must be a positive int, got {batch_size!r}")
        # PyG's NeighborLoader options this loader follows only at their defaults
        defaults = {"replace": False, "directed": True, "disjoint": False, "subgraph_type": "directional",
                    "num_workers": 0, "persistent_workers": False, "pin_memory": False}
        for key, val in pyg_options.items():
            if key not in defaults:
                raise OptionError(f"NeighborLoader takes no option {key!r} (PyG's {key} has no counterpart here)")
            if val != defaults[key]:
                raise OptionError(f"NeighborLoader samples with {key}={defaults[key]!r} only (PyG's default); "
                                  f"{key}={val!r} is not supported")
        self.num_neighbors = [int(k) for k in num_neighbors]
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not -2 ** 63 <= seed < 2 ** 63:
            # the sample keys hash the seed's 64 bits: seeds outside one int64 would repeat others' batches
            raise OptionError(f"seed must be an integer in [-2^63, 2^63), got {seed!r} (a 64-bit unsigned seed s, "
                              f"e.g. torch.initial_seed(): s - 2**64 when s >= 2**63)")
        self.batch_size, self.seed, self.shuffle, self.drop_last = int(batch_size), int(seed), shuffle, drop_last
        name = str(plan)
        m = read_manifest(plan)
        import torch.distributed as dist
        init = dist.is_available() and dist.is_initialized()
        world, rank = (dist.get_world_size(), dist.get_rank()) if init else (1, 0)
        if world != int(m["ranks"]):
            raise PlanError(f"{name} is for {m['ranks']} ranks, this job has {world}"
                            + ("" if init else " (torch.distributed is not initialized)"))
        self.n = int(m["graph"]["n"])
        self.rank, self.world = rank, world
        self.transport = _Transport(rank, world, timeout)
        failure = None
        try:   # this rank's shard and share: a bad one is said on every rank, not only here
            _, self.part, _ = load_plan_partition(plan)
            v = RankRows(name, m, load_rank(plan, rank, manifest=m), exchange_step(name, m))
            sh = read_share(plan, rank, manifest=m, local_ids=v.local_ids, halo_ids=v.halo_ids)
            self.local = _Local(sh, v.halo_ids)
        except Exception as exc:  # noqa: BLE001 - re-raised here; the peers raise its message
            failure = exc
        from ..runtime.comm import agree_on_failure
        bad = agree_on_failure(self.transport, world, rank, failure) if world > 1 else None
        if failure is not None:
            raise failure
        if bad is not None:     # the peers would otherwise fail at their first exchange, naming none of it
            raise PlanError(f"{name}: rank {bad[0]} could not load its part of the plan: {bad[1]}")
        self.node_fields, self.edge_fields = sh["node"], sh["edge"]
        self.nodes = _Packer(self.node_fields)
        self.edges = _Packer(self.edge_fields)
        self.seeds = self._input(input_nodes, name)
        self.seed_counts = self._gather_settings(self.seeds.size)   # every rank's seeds (they never change)
        self.total_seeds = int(self.seed_counts.sum())
        self.epoch = 0

    # ------------------------------------------------------------------ seeds
    def _input(self, input_nodes, name: str) -> np.ndarray:
        """This rank's seeds (global ids, ascending)."""
        lid = self.local.local_ids
        if input_nodes is None:
            return np.sort(lid)
        if isinstance(input_nodes, str):
            t = self.node_fields.get(input_nodes)
            if t is None or t.dtype != torch.bool or t.dim() != 1:
                raise OptionError(f"{name}: input_nodes={input_nodes!r} is no bool node field of the shares "
                                  f"(fields: {', '.join(sorted(self.node_fields)) or 'none'})")
            return np.sort(lid[t.numpy()])
        if isinstance(input_nodes, torch.Tensor) and (input_nodes.layout != torch.strided
                                                      or input_nodes.device.type == "meta"):
            raise OptionError(f"input_nodes: a dense tensor of vertex ids or a bool mask, got a "
                              f"{input_nodes.layout} tensor on {input_nodes.device}")
        try:
            a = (input_nodes.detach().cpu().numpy() if isinstance(input_nodes, torch.Tensor)
                 else np.asarray(input_nodes))
        except (ValueError, TypeError) as exc:   # a ragged list, an object numpy cannot hold
            raise OptionError(f"input_nodes: a 1-D array of vertex ids, a bool mask of {self.n} entries, a bool "
                              f"node field's name or None; got {type(input_nodes).__name__} ({exc})") from None
        if a.size == 0 and a.ndim == 1:     # no seeds (np.asarray([]) is float64)
            a = a.astype(np.int64)
        if a.dtype == bool:
            if a.shape != (self.n,):
                raise OptionError(f"input_nodes: a bool mask must have one entry per vertex ({self.n})")
            a = np.flatnonzero(a)
        if a.ndim != 1 or a.dtype.kind not in "iu":
            raise OptionError(f"input_nodes: a 1-D array of vertex ids, a bool mask of {self.n} entries, a bool "
                              f"node field's name or None; got {type(input_nodes).__name__} of dtype {a.dtype} "
                              f"and shape {a.shape}")
        if a.size and (a.min() < 0 or a.max() >= self.n):
            raise OptionError(f"input_nodes: vertex ids must be ints in [0, {self.n})")
        a = np.unique(a.astype(np.int64))
        return a[self.part[a] == self.rank]

    def _gather_settings(self, seeds: int) -> np.ndarray:
        """Every rank's seed count; the sampling settings, which every rank must share (a rank's fanouts
        decide what it samples of the rows it owns for the others, and the batches are global), checked
        equal on every rank: one OptionError naming the setting that differs, on every rank alike."""
        names = ("num_neighbors", "batch_size", "seed", "shuffle", "drop_last")
        vals = (tuple(self.num_neighbors), self.batch_size, self.seed, bool(self.shuffle), bool(self.drop_last))
        if self.world == 1:
            return np.array([seeds], dtype=np.int64)
        import hashlib
        digest = [np.frombuffer(hashlib.sha256(repr(v).encode()).digest()[:8], dtype=np.int64)[0] for v in vals]
        mine = torch.tensor([seeds, *digest], dtype=torch.int64)
        out = [torch.zeros_like(mine) for _ in range(self.world)]
        self.transport.all_gather(out, mine, "seed count and settings")
        rows = torch.stack(out).numpy()
        for i, name in enumerate(names):
            differ = np.flatnonzero(rows[:, i + 1] != rows[0, i + 1])
            if differ.size:
                raise OptionError(f"NeighborLoader: ranks 0 and {int(differ[0])} were given another {name}; every "
                                  f"rank must build the loader with the same {', '.join(names)} (this rank, "
                                  f"{self.rank}: {name}={vals[i]!r})")
        return rows[:, 0].copy()

    def _order_keys(self, ids: np.ndarray, epoch: int) -> np.ndarray:
        return sample_keys(self.seed, epoch, ids, salt=1) if self.shuffle else ids.astype(np.uint64)

    def _steps(self, epoch: int) -> list[np.ndarray]:
        """This rank's seeds of each global batch of ``epoch``, in the global order (every rank's
        (key, id) pairs are gathered: 16 bytes per seed, after the epoch, which every rank must
        share: one OptionError on every rank otherwise)."""
        keys = self._order_keys(self.seeds, epoch)
        if self.world > 1:
            counts = self.seed_counts
            mine = torch.from_numpy(np.stack([keys.view(np.int64), self.seeds], 1).reshape(-1).copy())
            top = 2 * int(counts.max())                       # gloo gathers equal sizes: pad to the largest
            padded = torch.zeros(1 + top, dtype=torch.int64)
            padded[0] = epoch
            padded[1:1 + mine.numel()] = mine
            gathered = [torch.empty(1 + top, dtype=torch.int64) for _ in counts]
            self.transport.all_gather(gathered, padded, "seed order")
            epochs = np.array([int(g[0]) for g in gathered])
            if (epochs != epoch).any():
                other = int(np.flatnonzero(epochs != epochs[0])[0]) if (epochs != epochs[0]).any() else self.rank
                raise OptionError(f"NeighborLoader: ranks 0 and {other} iterate epochs {int(epochs[0])} and "
                                  f"{int(epochs[other])}: every rank iterates the same epoch (set_epoch on every "
                                  f"rank alike; this rank, {self.rank}: epoch {epoch})")
            allk = np.concatenate([g.numpy()[1:1 + 2 * int(c)].reshape(-1, 2) for g, c in zip(gathered, counts)])
            allkeys, allids = allk[:, 0].copy().view(np.uint64), allk[:, 1].copy()
        else:
            allkeys, allids = keys, self.seeds
        ordered = allids[np.lexsort((allids, allkeys))]
        B = self.batch_size
        out = []
        for i in range(len(self)):
            chunk = ordered[i * B:(i + 1) * B]
            out.append(chunk[self.part[chunk] == self.rank])
        return out

    def __len__(self) -> int:
        return self.total_seeds // self.batch_size if self.drop_last else -(-self.total_seeds // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        from .._args import check_int
        self.epoch = check_int("epoch", epoch, hi=2 ** 62)

    def __iter__(self) -> Iterator:
        epoch = self.epoch
        self.epoch += 1
        for seeds in self._steps(epoch):
            yield self.sample(seeds, epoch)

    # ------------------------------------------------------------------ one batch
    def sample(self, seeds: np.ndarray, epoch: int = 0):
        """The sampled subgraph of ``seeds`` (global ids this rank owns) at ``epoch``; collective (every
        rank calls it once per step, with its own seeds)."""
        from torch_geometric.data import Data
        a = seeds.detach().cpu().numpy() if isinstance(seeds, torch.Tensor) else np.asarray(seeds)
        if a.ndim != 1 or (a.size and (a.dtype.kind not in "iu" or a.min() < 0 or a.max() >= self.n)):
            raise OptionError(f"rank {self.rank}: sample() takes a 1-D array of vertex ids in [0, {self.n}), got "
                              f"{a.dtype} of shape {a.shape}")
        seeds = a.astype(np.int64)
        if seeds.size and (self.part[seeds] != self.rank).any():
            raise OptionError(f"rank {self.rank}: sample() takes seeds this rank owns")
        if np.unique(seeds).size != seeds.size:
            raise OptionError(f"rank {self.rank}: sample() takes distinct seeds (a repeated seed would repeat its "
                              f"whole tree in the batch)")
        measured = np.zeros(self.world, dtype=np.int64)   # requests sent + replies received, by the transport
        n_id = [seeds]
        remote_fields = []  # (ids, fields dict) received
        rows_src, rows_eid, rows_tgt, edge_parts = [], [], [], []
        num_nodes, num_edges = [int(seeds.size)], []
        seen_sorted = np.sort(seeds)
        frontier = seeds
        L = len(self.num_neighbors)
        for hop in range(L + 1):
            expand = hop < L
            k = self.num_neighbors[hop] if expand else 0
            own = self.part[frontier] == self.rank if frontier.size else np.zeros(0, dtype=bool)
            # requests: frontier nodes held elsewhere (their fields; their samples when expanding)
            req = frontier[~own]
            req_owner = self.part[req]
            o = np.argsort(req_owner, kind="stable")
            req = req[o]
            rcounts = np.bincount(req_owner, minlength=self.world).astype(np.int64)
            if hop > 0:
                asked, acounts = self.transport.a2a(_int_rows(req.reshape(-1, 1)), rcounts, 8)
                measured += self.transport.last_sent
                asked = _from_bytes(asked, torch.zeros(0, dtype=torch.int64)).numpy()
                # replies: node fields, then (expanding) per-node sample counts and the sampled edges
                pos = self.local.pos(asked) if asked.size else np.zeros(0, dtype=np.int64)
                nb, ncount = self.transport.a2a(self.nodes.pack(self.node_fields, pos), acounts, self.nodes.row_bytes)
                measured += self.transport.last_recv
                got_fields = self.nodes.unpack(nb)
                remote_fields.append((req, got_fields))
                if expand:
                    deg, cpos = self.local.sample(asked, k, self.seed, epoch)
                    # per requester: counts of edges = sum of deg over its asked nodes
                    seg_owner = np.repeat(np.arange(self.world), acounts)
                    ecounts = np.bincount(np.repeat(seg_owner, deg), minlength=self.world).astype(np.int64)
                    payload = np.stack([np.repeat(asked, deg), self.local.src[cpos], self.local.eid[cpos]], 1)
                    hb = _int_rows(payload)
                    eb = self.edges.pack(self.edge_fields, self.local.edge_pos[cpos])
                    both = torch.cat([hb, eb], 1)
                    rb, rec = self.transport.a2a(both, ecounts, 24 + self.edges.row_bytes)
                    measured += self.transport.last_recv
                    trip = _from_bytes(rb[:, :24], torch.zeros((0, 3), dtype=torch.int64)).numpy()
                    r_efields = self.edges.unpack(rb[:, 24:])
            if not expand:
                break
            # local samples of owned frontier nodes
            mine = frontier[own]
            deg, cpos = self.local.sample(mine, k, self.seed, epoch)
            tgt = np.repeat(mine, deg)
            src = self.local.src[cpos]
            eid = self.local.eid[cpos]
            efields = {nm: t[torch.from_numpy(self.local.edge_pos[cpos])] for nm, t in self.edge_fields.items()}
            if hop > 0 and trip.size:
                tgt = np.concatenate([tgt, trip[:, 0]])
                src = np.concatenate([src, trip[:, 1]])
                eid = np.concatenate([eid, trip[:, 2]])
                efields = {nm: torch.cat([efields[nm], r_efields[nm]]) for nm in efields}
            # frontier order: edges grouped by target in the frontier's order, edge ids ascending
            fpos = np.empty(frontier.size, dtype=np.int64)
            fo = np.argsort(frontier, kind="stable")
            fpos[fo] = np.arange(frontier.size)
            tpos = fpos[np.searchsorted(frontier[fo], tgt)] if tgt.size else tgt
            eo = np.lexsort((eid, tpos))
            tgt, src, eid = tgt[eo], src[eo], eid[eo]
            efields = {nm: t[torch.from_numpy(eo)] for nm, t in efields.items()}
            rows_src.append(src)
            rows_tgt.append(tgt)
            rows_eid.append(eid)
            edge_parts.append(efields)
            num_edges.append(int(eid.size))
            # new nodes: sources not seen, in order of first appearance
            uniq, first = np.unique(src, return_index=True)
            fresh = ~np.isin(uniq, seen_sorted)
            new = src[np.sort(first[fresh])]
            seen_sorted = np.union1d(seen_sorted, new)
            n_id.append(new)
            num_nodes.append(int(new.size))
            frontier = new
        n_ids = np.concatenate(n_id)
        # node fields in n_id order: local rows from the share, remote ones from the replies
        fields = {}
        own_all = self.part[n_ids] == self.rank
        lpos = self.local.pos(n_ids[own_all]) if own_all.any() else np.zeros(0, dtype=np.int64)
        r_ids = np.concatenate([r for r, _ in remote_fields]) if remote_fields else np.zeros(0, dtype=np.int64)
        ro = np.argsort(r_ids, kind="stable")
        rpos = ro[np.searchsorted(r_ids[ro], n_ids[~own_all])] if (~own_all).any() else np.zeros(0, dtype=np.int64)
        for nm, t in self.node_fields.items():
            out = t.new_empty((n_ids.size,) + tuple(t.shape[1:]))
            out[torch.from_numpy(np.flatnonzero(own_all))] = t[torch.from_numpy(lpos)]
            if remote_fields:
                rem = torch.cat([f[nm] for _, f in remote_fields])
                out[torch.from_numpy(np.flatnonzero(~own_all))] = rem[torch.from_numpy(rpos)]
            fields[nm] = out
        src = np.concatenate(rows_src) if rows_src else np.zeros(0, dtype=np.int64)
        tgt = np.concatenate(rows_tgt) if rows_tgt else np.zeros(0, dtype=np.int64)
        e_id = np.concatenate(rows_eid) if rows_eid else np.zeros(0, dtype=np.int64)
        no = np.argsort(n_ids, kind="stable")
        loc = lambda g: no[np.searchsorted(n_ids[no], g)]  # noqa: E731
        edge_index = np.vstack([loc(src), loc(tgt)]) if e_id.size else np.zeros((2, 0), dtype=np.int64)
        batch = Data(edge_index=torch.from_numpy(edge_index), num_nodes=int(n_ids.size))
        for nm, t in fields.items():
            batch[nm] = t
        for nm in self.edge_fields:
            batch[nm] = torch.cat([p_[nm] for p_ in edge_parts]) if edge_parts else self.edge_fields[nm][:0]
        batch.n_id = torch.from_numpy(n_ids)
        batch.e_id = torch.from_numpy(e_id)
        batch.batch_size = int(seeds.size)
        batch.num_sampled_nodes = num_nodes
        batch.num_sampled_edges = num_edges
        batch.comm_bytes = {"predicted": self._predict(n_ids, num_nodes, tgt),
                            "measured": measured}
        return batch

    def _predict(self, n_ids: np.ndarray, num_nodes: list, tgt: np.ndarray) -> np.ndarray:
        """Bytes this rank sends (8 per remote node asked) and receives (the node's fields; for nodes
        expanded, 24 bytes + edge fields per sampled edge) per peer, from the batch alone."""
        out = np.zeros(self.world, dtype=np.int64)
        remote = self.part[n_ids] != self.rank
        out += np.bincount(self.part[n_ids[remote]], minlength=self.world) * (8 + self.nodes.row_bytes)
        rt = tgt[self.part[tgt] != self.rank] if tgt.size else tgt
        out += np.bincount(self.part[rt], minlength=self.world) * (24 + self.edges.row_bytes)
        return out
