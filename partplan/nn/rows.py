"""The rows of one rank of a 1D conformal plan, in the order the PyG bridge takes them (numpy only):
what :class:`partplan.nn.Halo`, the shares (:mod:`partplan.nn.shares`) and the neighbour loader share."""
from __future__ import annotations

import numpy as np

from ..errors import PlanError
from ..program.plan import program_steps

__all__ = ["RankRows", "exchange_step", "positions"]


def exchange_step(name: str, m: dict) -> dict:
    """The forward program's one alltoallv, after checking the program is a 1D one:
    ``ext = [in; received]``, ``out = spmm(ext)``, ``in == out`` rows."""
    try:
        steps = program_steps(m, "forward")
    except PlanError:
        raise PlanError(f"{name}: the plan has no forward program") from None
    ops = [st.get("op") for st in steps]
    a2a = [st for st in steps if st.get("op") == "alltoallv"]
    ok = (set(ops) <= {"copy", "gather", "alltoallv", "spmm"} and len(a2a) <= 1
          and ops.count("gather") == len(a2a) and ops.count("spmm") == 1
          and all(st.get("src") == "in" for st in steps if st.get("op") in ("copy", "gather")))
    if not ok or (a2a and (a2a[0].get("src") != "send" or a2a[0].get("dst_row") not in ("in", None))):
        raise PlanError(f"{name}: Halo needs a 1D plan (layout 1d: each rank's rows plus the rows it "
                        f"receives); this plan's layout is {m.get('layout')!r} (steps {', '.join(map(str, ops))}); "
                        f"build it with layout='1d'")
    return a2a[0] if a2a else {}


class RankRows:
    """One rank's rows of a 1D conformal plan.

    Attributes
    ----------
    rank : the rank.
    num_local : rows this rank holds (and computes).
    local_ids : int64 global ids of those rows, in the order ``op(x)`` takes
        them: the rows sent to peers first (in send order), then the others.
    halo_ids : int64 global ids of the rows it receives, in order (they follow
        the local rows in ``op(x)``).
    idx, send_counts, recv_counts, family : the forward exchange's send rows
        (positions in ``local_ids``), counts per peer and process-group family.
    plan_receives : some rank of the plan receives rows (the exchange's ``pairs``): what every rank
        knows alike, where ``num_halo`` is this rank's own.
    """

    def __init__(self, name: str, m: dict, shard, step: dict):
        self.rank = int(shard.rank)
        self.plan_receives = any(isinstance(pr, list) and pr and isinstance(pr[-1], int) and pr[-1] > 0
                                 for pr in step.get("pairs") or ())
        ids_in = np.asarray(shard.in_ids("forward"), dtype=np.int64)
        ids_out = np.asarray(shard.out_ids("forward"), dtype=np.int64)
        if not np.array_equal(ids_in, ids_out):
            raise PlanError(f"{name}: rank {self.rank} holds rows it does not compute (ownership "
                            f"{m.get('ownership')!r}); Halo needs a conformal 1D plan (ownership='conformal')")
        self.local_ids = np.array(ids_in)  # writable (torch.from_numpy warns on a read-only map)
        self.num_local = int(ids_in.size)
        if step:
            sid = step["id"]
            self.idx = np.array(shard[f"{gather_id(m)}.idx"], dtype=np.int64)
            self.send_counts = np.asarray(shard[f"{sid}.send_counts"], dtype=np.int64)
            self.recv_counts = np.asarray(shard[f"{sid}.recv_counts"], dtype=np.int64)
            self.halo_ids = np.array(shard[f"{sid}.recv_ids"], dtype=np.int64)
            self.family = step["group"]
        else:
            self.idx = self.halo_ids = np.zeros(0, dtype=np.int64)
            self.send_counts = self.recv_counts = np.zeros(0, dtype=np.int64)
            self.family = None
        if self.idx.size != int(self.send_counts.sum()) or self.halo_ids.size != int(self.recv_counts.sum()) \
                or (self.idx.size and (self.idx.min() < 0 or self.idx.max() >= self.num_local)):
            raise PlanError(f"{name}: rank {self.rank}: the forward exchange's arrays disagree with its counts")
        self._sent_rows_first()

    @property
    def num_halo(self) -> int:
        return int(self.halo_ids.size)

    @property
    def row_ids(self) -> np.ndarray:
        """The global id of each of the rank's rows in its exchange's order: locals, then halo rows."""
        return np.concatenate([self.local_ids, self.halo_ids])

    def _sent_rows_first(self) -> None:
        """Order the local rows as the send buffer lists them (each row at its
        first appearance), then the rows never sent. When no row goes to two
        peers (always at p = 2) the send buffer is then ``x[:len(idx)]``, a
        view: the exchange sends from ``x`` without gathering a copy
        (``contiguous_send``)."""
        rows, first = np.unique(self.idx, return_index=True)   # each sent row, its first position in idx
        sent = rows[np.argsort(first, kind="stable")]
        unsent = np.ones(self.num_local, dtype=bool)
        unsent[sent] = False
        perm = np.concatenate([sent, np.flatnonzero(unsent)])
        new_pos = np.empty(self.num_local, dtype=np.int64)
        new_pos[perm] = np.arange(self.num_local, dtype=np.int64)
        self.local_ids = self.local_ids[perm]
        self.idx = new_pos[self.idx]
        self.contiguous_send = bool(np.array_equal(self.idx, np.arange(self.idx.size)))




def gather_id(m: dict) -> str:
    steps = program_steps(m, "forward")
    gathers = [st["id"] for st in steps if st.get("op") == "gather" and st.get("dst") == "send"]
    if len(gathers) != 1:
        raise PlanError(f"the forward program has {len(gathers)} gathers into the send buffer, not one")
    return gathers[0]


def positions(n: int, local_ids: np.ndarray, halo_ids: np.ndarray) -> np.ndarray:
    """int64[n]: each vertex's row in ``cat([local rows, halo rows])`` (Halo's indexing), -1 for the
    vertices this rank neither holds nor receives."""
    pos = np.full(n, -1, dtype=np.int64)
    pos[halo_ids] = np.arange(local_ids.size, local_ids.size + halo_ids.size, dtype=np.int64)
    pos[local_ids] = np.arange(local_ids.size, dtype=np.int64)
    return pos
