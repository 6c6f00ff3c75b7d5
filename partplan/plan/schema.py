"""Plan format constants and the list of shard fields (the source of plans/SCHEMA.md).

A plan is a directory ``NAME.plan/`` with ``manifest.json``, ``partition.arrow``
(global arrays) and ``rank-00000.arrow`` ... (one Arrow IPC file per rank).
Each Arrow file holds ONE record batch of ONE row; every field is a column of
type ``large_list<int64>`` (or ``large_list<float64>``) whose single list is the
array — so arrays of different lengths share one file and are read zero-copy
from a memory map (``pyarrow.memory_map`` + ``pyarrow.ipc.open_file``).
"""
from __future__ import annotations

FORMAT = "partplan-plan"
FORMAT_VERSION = 1
SUPPORTED_VERSIONS = (1,)
LAYOUTS = ("1d", "1.5d", "2d")
MANIFEST = "manifest.json"
PARTITION_FILE = "partition.arrow"


def shard_name(rank: int) -> str:
    """File name of rank ``rank``'s shard."""
    return f"rank-{rank:05d}.arrow"


# name: (dtype, layouts, description) — units: "rows" are rows of H / Z,
# "ranks" are global ranks unless "group-rank" is said.
SHARD_FIELDS: dict[str, tuple[str, str, str]] = {
    "row_ids": ("int64", "all", "global ids of the rows of the local CSR, ascending (1d/1.5d: the rows of Z "
                                "this rank's block computes; 2d: rows with a nonzero in this grid block)"),
    "h_ids": ("int64", "all", "global ids of the rows of H held here, ascending = head of H_ext "
                              "(1d conformal: = row_ids; 1d decoupled: rows with owner == rank; 1.5d: the block's "
                              "rows, replicated on its c ranks; 2d: vector entries with part == rank)"),
    "halo_ids": ("int64", "all", "global ids of the ghost rows = tail of H_ext, ordered by source group-rank "
                                 "then global id (all_to_all_single output order)"),
    "indptr": ("int64", "all", "local CSR row pointers, len(row_ids) + 1"),
    "indices": ("int64", "all", "local CSR columns in [0, len(h_ids) + len(halo_ids)): < len(h_ids) = held "
                                "row position, else len(h_ids) + halo slot. Within a row the order is the "
                                "global CSR order (ascending global column), not ascending local id"),
    "data": ("float64", "all", "local CSR values (absent for a pattern graph: all ones)"),
    "send_idx": ("int64", "all", "positions into h_ids of the rows sent, grouped by destination group-rank, "
                                 "ascending global id inside a group"),
    "send_counts": ("int64", "all", "rows sent to each group-rank of a2a_group (self = 0)"),
    "recv_counts": ("int64", "all", "rows received from each group-rank of a2a_group (self = 0); "
                                    "sum = len(halo_ids)"),
    "a2a_group": ("int64", "all", "global ranks of the forward all-to-all group, by group-rank "
                                  "(1d: all ranks; 1.5d: column group {x·c + l}; 2d: grid column {x·C + b})"),
    "bwd_halo_ids": ("int64", "1d", "backward A^T @ G: ghost rows of G, ordered by source rank then global id "
                                    "(present when A is not symmetric or ownership is decoupled)"),
    "bwd_indptr": ("int64", "1d", "backward local CSR of rows row_ids of A^T"),
    "bwd_indices": ("int64", "1d", "backward local columns in [0, len(row_ids) + len(bwd_halo_ids))"),
    "bwd_data": ("float64", "1d", "backward values (A^T), absent for a pattern graph"),
    "bwd_send_idx": ("int64", "1d", "backward: positions into row_ids of the G rows sent"),
    "bwd_send_counts": ("int64", "1d", "backward rows sent per rank"),
    "bwd_recv_counts": ("int64", "1d", "backward rows received per rank"),
    "reduce_group": ("int64", "1.5d", "global ranks of the c replicas of this block (all-reduce SUM of partial Z)"),
    "stage_src": ("int64", "1.5d", "stage schedule: source block (= a2a group-rank) of each stage, nearest first; "
                                   "the own block (local columns) is a stage with no halo"),
    "stage_halo_start": ("int64", "1.5d", "first halo slot of each stage"),
    "stage_halo_count": ("int64", "1.5d", "halo rows of each stage"),
    "row_group": ("int64", "2d", "global ranks of this grid row {a·C + y}, by group-rank y (fold group)"),
    "fold_send_idx": ("int64", "2d", "positions into row_ids of partial rows sent, grouped by destination "
                                     "group-rank, ascending global id inside a group"),
    "fold_send_counts": ("int64", "2d", "partial rows sent to each row_group member"),
    "fold_recv_counts": ("int64", "2d", "partial rows received from each row_group member"),
    "fold_recv_idx": ("int64", "2d", "positions into h_ids to add each received partial row to "
                                     "(source order, ascending global id)"),
    "fold_self_src": ("int64", "2d", "positions into row_ids of partial rows this rank owns itself"),
    "fold_self_dst": ("int64", "2d", "matching positions into h_ids"),
}

PARTITION_FIELDS: dict[str, tuple[str, str]] = {
    "part": ("int64", "row block of every vertex (int64[n])"),
    "owner": ("int64", "decoupled ownership only: rank holding row j of H (int64[n])"),
    "perm": ("int64", "old → new vertex id: rank 0's held rows first (ascending old id), then rank 1, ..."),
}
