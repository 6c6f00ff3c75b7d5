"""What graph traversals (BFS, SSSP, WCC, PageRank) read from a plan, and the
one frontier exchange they share.

**Which program.** A traversal of A (edge u → v for every nonzero A[u, v])
runs on the plan's program of ``A^T`` — the ``backward`` program (the
``forward`` one itself when A is symmetric: the plan then records
``backward: same-as-forward``). On rank r that program holds the rows of
``A^T`` of r's own vertices (their **in-edges**) with columns local + ghost,
and its send lists say which of r's vertices each peer holds as a ghost. So
"owner computes": the owner of v decides v's parent / distance / label, and
the only exchange a level needs is owner → ghost holders of the state of
frontier vertices (the direction of the SpMM exchange, the same (vertex,
peer) pairs):

* top-down: the holder of ghost u expands u's column of its local ``A^T``
  block (a CSC view: the local rows v with an edge u → v);
* bottom-up: each unvisited own v scans its row of ``A^T`` (its in-edges)
  for a frontier vertex — the ghosts' frontier bits came by the same exchange.

No "ghost discovered → owner" (transpose) exchange is needed for 1D, for
directed or undirected graphs alike. (2D adds the fold: see :mod:`.bfs`.)

**The exchange is a chain of steps** (:attr:`RankGraph.steps`,
:func:`exchange_chain`): the program's gather/alltoallv pairs before its spmm,
each reading the buffer the previous one appended to (``in`` ⊂ h1 ⊂ h2 …).
1D and 2D plans have one step; a routed plan (:mod:`partplan.layouts.routed`) has
one per route step — A (owner → monitor, family ``dom``), B (monitor →
monitor across domains, ``cross``), C (monitor → readers, ``dom``), nested
levels more. At each step a sender flags the rows of its send list whose
state is set (own rows, or rows an earlier step brought, with the flag and
value they came with) and the receiver appends them to the next buffer; the
last buffer's rows are the columns the local block indexes.

**Exchange modes.** Per (sender, receiver) pair and level the sender has c
flagged entries in a send list of s rows and w value bytes per entry:
sparse = c·(4 + w) bytes (uint32 positions in the list, then values), dense =
⌈s/8⌉ + c·w bytes (a bitmap over the list, then values). The smaller is sent
(ties: dense, except c = 0: nothing). Counts go first (one int64 per peer);
the receiver derives each pair's mode and size from them, so the payload is
one uint8 all-to-all-v (per step) whose bytes the comm counters measure.
BFS's 2D fold has one format instead (:func:`exchange_fold`): per pair a
bitmap over the u entries the sender may still flag (⌈u/8⌉ bytes), then the
values of the entries the previous level's fold flagged (c_prev·w); u and
c_prev are counted on both sides at the end of the previous level — no count
exchange, no mode.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import PlanError
from ..program.exchange import segments
from ..program.plan import RankPlan, program_steps
from ..program.steps import AllToAllV, Copy, Gather, ScatterAdd, Spmm, step_op

POS_BYTES = 4  # a sparse entry's position in the send list (uint32)


def traversal_program(manifest: dict) -> str:
    """Name of the plan's program of ``A^T`` (see the module docstring)."""
    b = manifest.get("backward")
    if b == "same-as-forward":
        return "forward"
    if b == "separate":
        return "backward"
    raise PlanError("the plan has no program of A^T (backward = "
                    f"{b!r}): rebuild it with `partplan plan ... --backward separate` (or auto) or from a symmetric graph")


CAPABILITIES = ("bfs", "analytics", "stealing", "routes", "fold")
_WHAT = {"bfs": "BFS", "analytics": "PageRank, WCC, SSSP, label propagation and matching", "stealing": "frontier stealing",
         "routes": "routed traversals", "fold": "2D traversals"}
#: what to plan instead, per missing capability
_INSTEAD = {"bfs": "plan the graph with --layout 1d, 2d:RxC or routed:domain:D",
            "analytics": "plan the graph with --layout 1d, 2d:RxC or routed:domain:D",
            "stealing": "use a 1d plan, or run without --steal",
            "routes": "plan the graph with --layout routed:domain:D", "fold": "plan the graph with --layout 2d:RxC"}


def check_layout(manifest: dict, needs: str | tuple[str, ...] = "analytics", *, job: str | None = None):
    """The plan's :class:`~partplan.layouts.Layout` if it declares every
    capability in ``needs`` (names of :data:`CAPABILITIES`: ``bfs``,
    ``analytics``, ``stealing``, ...) and has conformal ownership; else one
    PlanError naming ``job`` (default: what the capability covers), the layout
    and the layouts to use instead."""
    from ..layouts import layout_from_manifest
    needs = (needs,) if isinstance(needs, str) else tuple(needs)
    bad = [c for c in needs if c not in CAPABILITIES]
    if bad:
        raise PlanError(f"unknown layout capability {bad[0]!r}; one of {', '.join(CAPABILITIES)}")
    lay = layout_from_manifest(manifest)
    for c in needs:
        if not getattr(lay, c, False):
            what = job if job is not None and c == needs[0] else _WHAT[c]
            why = f" ({lay.traversal_refusal})" if c in ("bfs", "analytics") else ""   # the reason is a traversal's
            raise PlanError(f"{what} cannot run on this plan: its layout {manifest['layout']} does not support it"
                            f"{why}; {_INSTEAD[c]}")
    if manifest.get("ownership", "conformal") != "conformal":
        raise PlanError("graph traversals need conformal ownership (the plan has decoupled owners)")
    return lay


@dataclass
class Segments:
    """One alltoallv step's send lists on one rank: ``idx`` rows of the source
    buffer grouped by destination group-rank (``send_counts``), and
    ``recv_counts`` rows expected per source group-rank (appended to the next
    buffer in that order)."""

    family: str
    idx: np.ndarray
    send_counts: np.ndarray
    recv_counts: np.ndarray
    silent: bool = False  # the step has no (rank, peer) pair on any rank (from the manifest): skip it

    def __post_init__(self):
        self.send_off = np.concatenate([[0], np.cumsum(self.send_counts)]).astype(np.int64)
        self.recv_off = np.concatenate([[0], np.cumsum(self.recv_counts)]).astype(np.int64)
        self._dev: dict = {}

    def on(self, device):
        """(``idx``, ``send_off``) as int64 tensors on ``device`` (copied once per device)."""
        key = str(device)
        if key not in self._dev:
            import torch
            # copies (the arrays may be read-only views of a shard: torch warns on those)
            self._dev[key] = (torch.tensor(self.idx, device=device), torch.tensor(self.send_off, device=device))
        return self._dev[key]

    @property
    def nrecv(self) -> int:
        """Rows this step appends to the receiver's buffer."""
        return int(self.recv_off[-1])

    def reversed(self, src_idx: np.ndarray) -> "Segments":
        """The transpose exchange (receiver → sender, the same rows per pair in
        the same order): the receiver sends rows ``src_idx`` (one per received
        row, receive order) of its own buffer; received rows line up with ``idx``."""
        return Segments(self.family, np.asarray(src_idx, dtype=np.int64), self.recv_counts, self.send_counts,
                        self.silent)


@dataclass
class RankGraph:
    """One rank's part of ``A^T`` from a 1D, routed or 2D plan.

    ids : global ids of own vertices (positions 0..nl-1 of every state array).
    ext_ids : global ids of the columns (own, then every row the expand steps
        append: 1D the ghosts; routed the rows of each step's buffer, some only
        forwarded, some twice).
    row_ids : global ids of the block's rows (1D / routed: ``ids``; 2D: the partial rows
        of the rank's grid row that its block touches).
    indptr, indices, data : CSR of the block (row i = in-edges of row_ids[i]),
        columns are ext positions, sorted by global id inside each row.
    cindptr, crows, cdata : the same block as CSC (column c = out-edges of
        ext_ids[c] that end at the block's rows).
    steps : the expand, a chain of alltoallv steps over accumulating buffers
        (``in`` ⊂ h1 ⊂ h2 ...; 1D and 2D: one step — world / the grid column;
        routed: A, B, C, ... through the domain monitors). Step k sends rows of
        the buffer after step k − 1 and appends what it receives.
    fold : 2D only: partial rows → their owner in the grid row (``idx`` over
        block rows); ``fold_pos`` own position of each received row;
        ``self_src``/``self_dst`` block rows that are own rows and their own positions.
    """

    rank: int
    ids: np.ndarray
    ext_ids: np.ndarray
    row_ids: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray | None
    cindptr: np.ndarray
    crows: np.ndarray
    cdata: np.ndarray | None
    steps: list[Segments]
    fold: Segments | None = None
    fold_pos: np.ndarray | None = None
    self_src: np.ndarray | None = None
    self_dst: np.ndarray | None = None

    @property
    def expand(self) -> Segments:
        """The one expand step of a 1D / 2D plan (routed plans have a chain: ``steps``)."""
        if len(self.steps) != 1:
            raise PlanError(f"this plan's expand is a chain of {len(self.steps)} steps (routed); "
                            f"the caller needs a 1d plan")
        return self.steps[0]

    @property
    def nl(self) -> int:
        return int(self.ids.size)

    @property
    def fold_idx(self) -> np.ndarray | None:
        """2D: the block rows the fold sends (``fold.idx``); None otherwise."""
        return None if self.fold is None else self.fold.idx

    @property
    def next_(self) -> int:
        return int(self.ext_ids.size)

    @property
    def nrows(self) -> int:
        return int(self.row_ids.size)


def _positions(ids: np.ndarray, want: np.ndarray, what: str) -> np.ndarray:
    o = np.argsort(ids, kind="stable")
    k = np.minimum(np.searchsorted(ids, want, sorter=o), max(ids.size - 1, 0))
    pos = o[k] if ids.size else k
    if want.size and (ids.size == 0 or not np.array_equal(ids[pos], want)):
        raise PlanError(what)
    return pos


def _segments(rp: RankPlan, gather: dict, a2a: dict) -> Segments:
    return Segments(a2a["group"], np.asarray(rp[f"{gather['id']}.idx"], dtype=np.int64),
                    np.asarray(rp[f"{a2a['id']}.send_counts"], dtype=np.int64),
                    np.asarray(rp[f"{a2a['id']}.recv_counts"], dtype=np.int64), silent=not a2a.get("pairs"))


def program_parts(manifest: dict, program: str) -> tuple[list[tuple[dict, dict]], dict, list[dict]]:
    """(the expand chain: (gather, alltoallv) pairs before the spmm, the spmm step,
    the steps after it — 2D's fold) of ``program``. Each gather reads the buffer
    the previous alltoallv appended to (1D / 2D: ``in`` → ``ext``; routed:
    ``in`` → h1 → h2 ...), and the spmm reads the last one; anything else is one PlanError."""
    steps = program_steps(manifest, program)
    ops = [step_op(st) for st in steps]  # the registry's classes, not op strings
    if Spmm not in ops:
        raise PlanError(f"the {program} program has no spmm step")
    k = ops.index(Spmm)
    pre = [st for st in steps[:k] if step_op(st) is not Copy]
    chain, held = [], "in"
    for g, a in zip(pre[::2], pre[1::2]):
        if step_op(g) is not Gather or step_op(a) is not AllToAllV or g["src"] != held or a["dst_row"] != held:
            raise PlanError(f"the {program} program's exchange is not a chain of gather/alltoallv steps over "
                            f"accumulating buffers (step {g['id']}); graph traversals cannot run it")
        chain.append((g, a))
        held = a["dst"]
    if len(pre) % 2 or steps[k]["src"] != held:
        raise PlanError(f"the {program} program's spmm does not read the buffer its exchange fills")
    return chain, steps[k], steps[k + 1:]


def program_ext_ids(rp: RankPlan, chain: list[tuple[dict, dict]], program: str) -> np.ndarray:
    """Global ids of the rows of the buffer the spmm reads: own, then what each step appended."""
    return np.concatenate([np.asarray(rp.in_ids(program), dtype=np.int64)]
                          + [np.asarray(rp[f"{a['id']}.recv_ids"], dtype=np.int64) for _, a in chain])


def rank_graph(manifest: dict, rp: RankPlan, program: str) -> RankGraph:
    """Build a :class:`RankGraph` from rank ``rp``'s shard (1D, routed or 2D plan)."""
    chain, sp, post = program_parts(manifest, program)
    s = sp["id"]
    two_d = bool(post)
    ids = np.asarray(rp.in_ids(program), dtype=np.int64)
    rows = np.asarray(rp[f"{s}.row_ids"], dtype=np.int64)
    ext = program_ext_ids(rp, chain, program)
    ip = np.asarray(rp[f"{s}.indptr"], dtype=np.int64)
    ix = np.asarray(rp[f"{s}.indices"], dtype=np.int64)
    dat = np.asarray(rp[f"{s}.data"], dtype=np.float64) if rp.has(f"{s}.data") else None
    nrow = ip.size - 1
    r_of = np.repeat(np.arange(nrow, dtype=np.int64), np.diff(ip))
    if two_d:
        row_ids = rows
    else:  # 1D / routed: block rows are the own rows (possibly in another order)
        row_ids = ids
        if not np.array_equal(rows, ids):
            r_of = _positions(ids, rows, f"rank {rp.rank}: the {program} program computes rows it does not hold")[r_of]
    o = np.lexsort((ext[ix], r_of))  # rows, then ascending global column id
    r_s, c_s = r_of[o], ix[o]
    d_s = None if dat is None else dat[o]
    nr = row_ids.size
    indptr = np.concatenate([[0], np.cumsum(np.bincount(r_s, minlength=nr))]).astype(np.int64)
    oc = np.lexsort((r_s, c_s))
    cindptr = np.concatenate([[0], np.cumsum(np.bincount(c_s, minlength=ext.size))]).astype(np.int64)
    rg = RankGraph(rp.rank, ids, ext, row_ids, indptr, c_s.copy(), d_s, cindptr, r_s[oc].copy(),
                   None if d_s is None else d_s[oc].copy(), [_segments(rp, g, a) for g, a in chain])
    if two_d:
        g2 = [st for st in post if step_op(st) is Gather][0]
        a2 = [st for st in post if step_op(st) is AllToAllV][0]
        sa_self, sa_recv = [st["id"] for st in post if step_op(st) is ScatterAdd][:2]
        rg.fold = _segments(rp, g2, a2)
        rg.self_dst = np.asarray(rp[f"{sa_self}.idx"], dtype=np.int64)
        rg.self_src = np.asarray(rp[f"{sa_self}.src_idx"], dtype=np.int64)
        rg.fold_pos = np.asarray(rp[f"{sa_recv}.idx"], dtype=np.int64)
    return rg


# ----------------------------------------------------------------------------- the exchange
def _as_comm(comm, a: np.ndarray):
    """numpy for LocalComm, a CPU/CUDA tensor for TorchComm."""
    if hasattr(comm, "torch"):
        t = comm.torch.from_numpy(np.ascontiguousarray(a))
        return t.to(comm.device) if comm.device.type == "cuda" else t
    return a


def _to_np(x) -> np.ndarray:
    return x.cpu().numpy() if hasattr(x, "cpu") else np.asarray(x)


def pair_bytes(c: np.ndarray, s: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sparse bytes, dense bytes, dense chosen?) per pair for c flagged
    entries of s-row send lists with w value bytes per entry."""
    c, s = np.asarray(c, dtype=np.int64), np.asarray(s, dtype=np.int64)
    sparse = c * (POS_BYTES + w)
    dense = np.where(c > 0, (s + 7) // 8 + c * w, 0)  # c = 0: the counts said so; nothing is sent in either mode
    use_dense = (c > 0) & (dense <= sparse)
    return sparse, dense, use_dense


@dataclass
class ExchangeStats:
    """One exchange summed over this process's local ranks: payload bytes sent
    (the chosen modes), what all-sparse and all-dense would have cost, and the
    pairs sent dense / sparse (nonempty ones)."""

    bytes: int = 0
    sparse_bytes: int = 0
    dense_bytes: int = 0
    dense_pairs: int = 0
    sparse_pairs: int = 0
    messages: int = 0
    per_rank: dict = field(default_factory=dict)  # global rank -> [bytes sent, messages sent]
    by_family: dict = field(default_factory=dict)  # group family ("world", "dom", "cross", "col", ...) -> [bytes, messages]

    def add(self, other: "ExchangeStats") -> "ExchangeStats":
        out = ExchangeStats(*(a + b for a, b in zip(self.vector().astype(np.int64).tolist(),
                                                     other.vector().astype(np.int64).tolist())))
        for src, dst in ((self.per_rank, out.per_rank), (other.per_rank, out.per_rank),
                         (self.by_family, out.by_family), (other.by_family, out.by_family)):
            for r, (b, m) in src.items():
                cur = dst.setdefault(r, [0, 0])
                cur[0] += b
                cur[1] += m
        return out

    def family_vector(self, families: list[str]) -> np.ndarray:
        """float64[2F]: bytes sent per family of ``families``, then messages per family."""
        v = np.zeros(2 * len(families))
        for k, f in enumerate(families):
            b, m = self.by_family.get(f, (0, 0))
            v[k], v[len(families) + k] = b, m
        return v

    def rank_vector(self, p: int) -> np.ndarray:
        """float64[2p]: bytes sent per global rank, then messages per rank (zeros for other processes' ranks)."""
        v = np.zeros(2 * p)
        for r, (b, m) in self.per_rank.items():
            v[r], v[p + r] = b, m
        return v

    def vector(self) -> np.ndarray:
        return np.array([self.bytes, self.sparse_bytes, self.dense_bytes, self.dense_pairs,
                         self.sparse_pairs, self.messages], dtype=np.float64)


def _is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch")


def _wants_tensors(comm) -> bool:
    """The comm exchanges torch tensors (TorchComm, or a LocalComm with a device)."""
    return hasattr(comm, "torch") or getattr(comm, "device", None) is not None


def _alltoallv_bytes(comm, family: str, sends: list, send_bytes: list, recv_bytes: list, dev, what: str) -> list:
    """One all-to-all-v of uint8 device tensors (one per local rank), received as uint8 tensors on
    ``dev``: directly through a tensor comm, else across a numpy comm's boundary (zero-copy views of
    CPU tensors)."""
    import torch
    if _wants_tensors(comm):
        outs = [torch.empty(int(r.sum()), dtype=torch.uint8, device=dev) for r in recv_bytes]
        comm.alltoallv(family, sends, send_bytes, recv_bytes, outs, what=what)
        return outs
    outs_np = [np.empty(int(r.sum()), np.uint8) for r in recv_bytes]
    comm.alltoallv(family, [s.cpu().numpy() for s in sends], send_bytes, recv_bytes, outs_np, what=what)
    return [torch.from_numpy(o).to(dev) for o in outs_np]


def _tally(st: ExchangeStats, comm, segs: list[Segments], counts: list, peer_c: list, w: int):
    """Add the chosen modes' bytes of every local rank to ``st``; returns (bytes
    sent per peer, bytes received per peer, dense sent?, dense received?) per rank."""
    rank_of = list(comm.local)
    sc_bytes, rc_bytes, dns, rdns = [], [], [], []
    for i, sg in enumerate(segs):
        c = counts[i]
        sp, de, dn = pair_bytes(c, sg.send_counts, w)
        nb = np.where(dn, de, sp)
        st.bytes += int(nb.sum())
        st.sparse_bytes += int(sp.sum())
        st.dense_bytes += int(de.sum())
        st.dense_pairs += int(np.count_nonzero(dn))
        st.sparse_pairs += int(np.count_nonzero((~dn) & (c > 0)))
        st.messages += int(np.count_nonzero(nb))
        st.per_rank[int(rank_of[i])] = [int(nb.sum()), int(np.count_nonzero(nb))]
        fam = st.by_family.setdefault(sg.family, [0, 0])
        fam[0] += int(nb.sum())
        fam[1] += int(np.count_nonzero(nb))
        rsp, rde, rdn = pair_bytes(peer_c[i], sg.recv_counts, w)
        sc_bytes.append(nb)
        rc_bytes.append(np.where(rdn, rde, rsp))
        dns.append(dn)
        rdns.append(rdn)
    return sc_bytes, rc_bytes, dns, rdns


def _flag_layout(seglen: np.ndarray, c: np.ndarray, dn: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The byte layout of one rank's flag message (:func:`_pack_flags`, :func:`_unpack_flags`): per
    peer the flag bytes (a dense peer's bitmap of its ``seglen`` rows, a sparse one's ``c`` uint32
    positions, 0 without flagged rows), where the peer's bytes start (flags, then ``w`` value bytes
    per flagged row), and the total."""
    fb = np.where(c > 0, np.where(dn, (seglen + 7) // 8, POS_BYTES * c), 0)
    tb = fb + w * c
    return fb, np.cumsum(tb) - tb, int(tb.sum())


def _pack_flags(f: np.ndarray, send_off: np.ndarray, c: np.ndarray, dn: np.ndarray, vals, w: int) -> np.ndarray:
    """The bytes one rank sends in :func:`exchange_flags`: per peer j with ``c[j]`` flagged rows, in
    peer order, its flags — dense (``dn[j]``): the bitmap of its send segment (numpy's bit order,
    the last byte zero-padded); sparse: uint32 positions within the segment — then the flagged
    rows' values (``w`` bytes each, ``vals`` over the whole send list), in position order. Built by
    index arithmetic over every peer at once (a loop over peers would cost k^2 Python steps at k ranks)."""
    seglen = np.diff(send_off)
    fb, boff, total = _flag_layout(seglen, c, dn, w)
    buf = np.zeros(total, np.uint8)
    p = np.flatnonzero(f)                                                     # grouped by peer (ascending)
    peer = np.repeat(np.arange(c.size), c)
    nth = np.arange(p.size) - np.repeat(np.cumsum(c) - c, c)                  # rank within its peer's rows
    sp = ~dn[peer]
    if sp.any():
        dst = boff[peer[sp]] + POS_BYTES * nth[sp]
        buf[(dst[:, None] + np.arange(POS_BYTES)).ravel()] = \
            (p[sp] - send_off[peer[sp]]).astype("<u4").view(np.uint8)
    dj = np.flatnonzero(dn)
    if dj.size:
        nb = (seglen[dj] + 7) // 8
        bits = np.zeros(int(8 * nb.sum()), dtype=bool)                        # each segment padded to bytes
        bits[segments(np.cumsum(8 * nb) - 8 * nb, seglen[dj])] = f[segments(send_off[dj], seglen[dj])]
        buf[segments(boff[dj], nb)] = np.packbits(bits)
    if w and p.size:
        dst = boff[peer] + fb[peer] + w * nth
        buf[(dst[:, None] + np.arange(w)).ravel()] = np.ascontiguousarray(vals[p]).view(np.uint8).reshape(-1)
    return buf


def _unpack_flags(buf: np.ndarray, recv_off: np.ndarray, rc: np.ndarray, rdn: np.ndarray, nrecv: int, vdt,
                  w: int) -> tuple[np.ndarray, np.ndarray | None]:
    """What :func:`_pack_flags` of every peer gives one receiver: (flags bool[nrecv] in receive
    order, values or None), ``rc[j]`` rows flagged by peer j, dense per ``rdn``."""
    s = np.diff(recv_off)
    fb, boff, _ = _flag_layout(s, rc, rdn, w)
    got = np.zeros(nrecv, dtype=bool)
    hits, owners = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    sj = np.flatnonzero((rc > 0) & ~rdn)
    if sj.size:
        raw = buf[segments(boff[sj], POS_BYTES * rc[sj])]
        hits.append(raw.view("<u4").astype(np.int64) + np.repeat(recv_off[sj], rc[sj]))
        owners.append(np.repeat(sj, rc[sj]))
    dj = np.flatnonzero(rdn)
    if dj.size:
        nb = (s[dj] + 7) // 8
        bits = np.unpackbits(buf[segments(boff[dj], nb)]).astype(bool)
        keep = segments(np.cumsum(8 * nb) - 8 * nb, s[dj])                     # each segment's own bits
        on = np.flatnonzero(bits[keep])
        hits.append(segments(recv_off[dj], s[dj])[on])
        owners.append(np.repeat(dj, s[dj])[on])
    hit, owner = np.concatenate(hits), np.concatenate(owners)
    got[hit] = True
    if vdt is None:
        return got, None
    gv = np.zeros(nrecv, dtype=vdt)
    vj = np.flatnonzero(rc > 0)
    if vj.size:
        order = np.argsort(owner, kind="stable")          # peer order, each peer's rows in its order
        raw = buf[segments(boff[vj] + fb[vj], w * rc[vj])]
        gv[hit[order]] = raw.view(vdt)
    return got, gv


def exchange_flags(comm, segs: list[Segments], masks: list, values: list | None,
                   nrecv: list[int], what: str = "frontier") -> tuple[list, list, ExchangeStats]:
    """Send, for every local rank i, the rows ``segs[i].idx`` of its source
    buffer whose ``masks[i]`` is set (with ``values[i][row]`` if values is
    given, an array of one fixed dtype) to the peers the send lists name;
    returns (received flags: bool[nrecv[i]] in receive order, received values
    or None, stats). ``nrecv[i]`` = rows the receive side holds (sum of recv_counts).

    numpy masks / values: packed on the host. torch tensors (the ``torch``
    kernels): counted and packed on their device — flag counts per peer by a
    cumsum there, only the counts (one int64 per peer) go to the host; the
    sparse positions, dense bitmaps (:func:`~.kernels.torchk.packbits`, numpy's
    bit order) and values are packed on the device into the same bytes as the
    host path and sent as one uint8 all-to-all-v; the received flags and values
    stay on the device."""
    if masks and _is_tensor(masks[0]):
        return _exchange_flags_torch(comm, segs, masks, values, nrecv, what)
    st = ExchangeStats()
    vdt = None if values is None else np.asarray(values[0]).dtype
    w = 0 if vdt is None else vdt.itemsize
    if all(sg.silent for sg in segs):  # the plan has no pair at all in this step (e.g. one rank): no collective
        return ([np.zeros(k, dtype=bool) for k in nrecv],
                None if vdt is None else [np.zeros(k, dtype=vdt) for k in nrecv], st)
    counts, flagged = [], []
    for i, sg in enumerate(segs):
        f = np.asarray(masks[i], dtype=bool)[sg.idx]
        flagged.append(f)
        csum = np.concatenate([[0], np.cumsum(f, dtype=np.int64)])
        counts.append(csum[sg.send_off[1:]] - csum[sg.send_off[:-1]])
    peer_c = comm.exchange_counts(segs[0].family, counts)
    sc_bytes, rc_bytes, dns, rdns = _tally(st, comm, segs, counts, peer_c, w)
    sends = [_pack_flags(flagged[i], sg.send_off, counts[i], dns[i],
                         None if values is None else np.asarray(values[i])[sg.idx], w)
             for i, sg in enumerate(segs)]
    outs = [np.empty(int(rb.sum()), np.uint8) for rb in rc_bytes]
    touts = outs if not hasattr(comm, "torch") else [_as_comm(comm, o) for o in outs]
    comm.alltoallv(segs[0].family, [_as_comm(comm, s) for s in sends], sc_bytes, rc_bytes, touts, what=what)
    if hasattr(comm, "torch"):
        outs = [_to_np(o) for o in touts]  # torch.from_numpy shares memory on CPU; copy back from CUDA
    flags_out, vals_out = [], []
    for i, sg in enumerate(segs):
        got, gv = _unpack_flags(outs[i], sg.recv_off, np.asarray(peer_c[i], dtype=np.int64), rdns[i], nrecv[i],
                                vdt, w)
        flags_out.append(got)
        vals_out.append(gv)
    return flags_out, (None if vdt is None else vals_out), st


def _exchange_flags_torch(comm, segs, masks, values, nrecv, what, counts=None, peer_out=None):
    """:func:`exchange_flags` on device tensors (same counts, modes and bytes).
    ``counts``: the flag counts per peer of every local rank when the caller
    already has them on the host (then nothing here copies device data to the
    host); ``peer_out``: a list that receives the counts each peer sends."""
    import torch

    from .kernels.torchk import from_u32, nonzero_n, packbits, u32_bytes, unpackbits, view_as
    dev = masks[0].device
    st = ExchangeStats()
    vdt = None if values is None else values[0].dtype
    w = 0 if vdt is None else torch.empty(0, dtype=vdt).element_size()
    if all(sg.silent for sg in segs):
        return ([torch.zeros(k, dtype=torch.bool, device=dev) for k in nrecv],
                None if vdt is None else [torch.zeros(k, dtype=vdt, device=dev) for k in nrecv], st)
    flagged, cts = [], []
    for i, sg in enumerate(segs):
        idx, soff = sg.on(dev)
        f = masks[i][idx]
        if counts is None:
            csum = torch.cat([torch.zeros(1, dtype=torch.int64, device=dev), torch.cumsum(f, 0, dtype=torch.int64)])
            cts.append(csum[soff[1:]] - csum[soff[:-1]])
        flagged.append(f)
    if counts is None:
        allc = torch.cat(cts).cpu().numpy()  # the one device → host copy: one int64 per (local rank, peer)
        cut = np.cumsum([0] + [sg.send_counts.size for sg in segs])
        counts = [allc[cut[i]:cut[i + 1]] for i in range(len(segs))]
    counts = [np.asarray(c, dtype=np.int64) for c in counts]
    peer_c = comm.exchange_counts(segs[0].family, counts)
    if peer_out is not None:
        peer_out.extend(peer_c)
    sc_bytes, rc_bytes, dns, rdns = _tally(st, comm, segs, counts, peer_c, w)
    sends = []
    for i, sg in enumerate(segs):
        c, dn = counts[i], dns[i]
        tot = int(c.sum())
        if tot == 0:
            sends.append(torch.zeros(0, dtype=torch.uint8, device=dev))
            continue
        f = flagged[i]
        pos = nonzero_n(f, tot)  # flagged list positions, grouped by peer (the list is); no sync: tot is known
        cst = np.concatenate([[0], np.cumsum(c)])
        vb = None
        if values is not None:
            idx, _ = sg.on(dev)
            vb = values[i][idx[pos]].contiguous().view(torch.uint8).reshape(tot, w)
        parts = []
        for j in np.flatnonzero(c):  # loop over peers
            lo, hi = int(sg.send_off[j]), int(sg.send_off[j + 1])
            parts.append(packbits(f[lo:hi]) if dn[j] else u32_bytes(pos[cst[j]:cst[j + 1]] - lo))
            if vb is not None:
                parts.append(vb[cst[j]:cst[j + 1]].reshape(-1))
        sends.append(torch.cat(parts))
    outs = _alltoallv_bytes(comm, segs[0].family, sends, sc_bytes, rc_bytes, dev, what)
    flags_out, vals_out = [], []
    for i, sg in enumerate(segs):
        got = torch.zeros(nrecv[i], dtype=torch.bool, device=dev)
        gv = None if vdt is None else torch.zeros(nrecv[i], dtype=vdt, device=dev)
        c, rdn = peer_c[i], rdns[i]
        buf, pos = outs[i], 0
        for j in np.flatnonzero(c):  # loop over peers
            lo, s, cj = int(sg.recv_off[j]), int(sg.recv_counts[j]), int(c[j])
            if rdn[j]:
                nb = (s + 7) // 8
                bits = unpackbits(buf[pos:pos + nb], s)
                pos += nb
                got[lo:lo + s] = bits
                if gv is not None:
                    vals = view_as(buf[pos:pos + w * cj], vdt)
                    k = (torch.cumsum(bits, 0, dtype=torch.int64) - 1).clamp_(min=0)
                    gv[lo:lo + s] = torch.where(bits, vals[k], gv[lo:lo + s])
            else:
                hit = lo + from_u32(buf[pos:pos + 4 * cj])
                pos += 4 * cj
                got[hit] = True
                if gv is not None:
                    gv[hit] = view_as(buf[pos:pos + w * cj], vdt)
            if gv is not None:
                pos += w * cj
        flags_out.append(got)
        vals_out.append(gv)
    return flags_out, (None if vdt is None else vals_out), st


@dataclass
class FoldCarry:
    """What one local rank's BFS fold (:func:`exchange_fold`) carries from one
    level to the next. As sender: ``avail`` (bool over its send list: the
    entries it may still propose — not proposed before, not known visited, at
    the end of the last level) and ``u_send`` (their count per peer, host
    int64); ``pflags`` / ``pvals`` (the last fold's flags over the list and
    the candidate ids there) and ``c_send`` (the flags' count per peer). As
    receiver: the same sets seen from the owner — ``ravail`` (bool over its
    receive list: the entries whose holder may still propose them), ``u_recv``,
    ``pgot`` (the last fold's flags received) and ``c_recv``. Host counts are
    numpy; the rest numpy arrays or device tensors. Both ends of a pair hold
    the same sets by construction: a holder's known rows are its proposals
    and what the visited sync sent it, both of which the owner saw."""

    avail: object
    u_send: np.ndarray
    pflags: object
    pvals: object
    c_send: np.ndarray
    ravail: object
    u_recv: np.ndarray
    pgot: object
    c_recv: np.ndarray

    @classmethod
    def start(cls, sg: "Segments", vdt, device=None) -> "FoldCarry":
        """Before a search's first level: every entry available, nothing flagged
        (numpy when ``device`` is None, else tensors on it; ``vdt`` the value dtype)."""
        ns, nr = int(sg.idx.size), int(sg.nrecv)
        s = np.asarray(sg.send_counts, np.int64).copy()
        r = np.asarray(sg.recv_counts, np.int64).copy()
        zs, zr = np.zeros(s.size, np.int64), np.zeros(r.size, np.int64)
        if device is None:
            return cls(np.ones(ns, bool), s, np.zeros(ns, bool), np.zeros(ns, vdt), zs,
                       np.ones(nr, bool), r, np.zeros(nr, bool), zr)
        import torch
        return cls(torch.ones(ns, dtype=torch.bool, device=device), s,
                   torch.zeros(ns, dtype=torch.bool, device=device), torch.zeros(ns, dtype=vdt, device=device), zs,
                   torch.ones(nr, dtype=torch.bool, device=device), r,
                   torch.zeros(nr, dtype=torch.bool, device=device), zr)


def fold_pair_bytes(u: np.ndarray, c_prev: np.ndarray, w: int) -> np.ndarray:
    """Bytes per pair of :func:`exchange_fold`: the bitmap over the pair's
    available entries (⌈u/8⌉) and the values of the entries the previous fold
    flagged (``c_prev``·w)."""
    u, c = np.asarray(u, dtype=np.int64), np.asarray(c_prev, dtype=np.int64)
    return (u + 7) // 8 + c * w


def _tally_fold(st: ExchangeStats, comm, segs: list[Segments], carry: list, w: int):
    """:func:`_tally` for :func:`exchange_fold`'s one format (a bitmap pair, no
    sparse alternative: its bytes count in both figures); returns (bytes sent,
    bytes received) per pair of every local rank."""
    rank_of = list(comm.local)
    sb, rb = [], []
    for i, sg in enumerate(segs):
        nb = fold_pair_bytes(carry[i].u_send, carry[i].c_send, w)
        b, m = int(nb.sum()), int(np.count_nonzero(nb))
        st.bytes += b
        st.sparse_bytes += b
        st.dense_bytes += b
        st.dense_pairs += m
        st.messages += m
        st.per_rank[int(rank_of[i])] = [b, m]
        fam = st.by_family.setdefault(sg.family, [0, 0])
        fam[0] += b
        fam[1] += m
        sb.append(nb)
        rb.append(fold_pair_bytes(carry[i].u_recv, carry[i].c_recv, w))
    return sb, rb


def exchange_fold(comm, segs: list[Segments], flags: list, carry: list, vdt,
                  what: str = "fold") -> tuple[list, list, ExchangeStats]:
    """The BFS fold of a 2D plan, every size known on both hosts before it is
    sent: per (sender, receiver) pair, the bitmap of this level's flags
    (``flags[i]``: bool over the send list, ``segs[i].idx`` order) over the
    pair's available entries (``carry[i]``: :class:`FoldCarry`; a flag outside
    them is not sent — the caller flags only available entries), then the
    values of the entries the previous call flagged. Returns (flags received:
    bool[nrecv] in receive order, the values of the previous call's received
    flags: ``vdt[nrecv]`` at ``carry[i].pgot``, 0 elsewhere, stats). No count
    exchange and nothing read from the device; updating ``carry`` for the next
    call is the caller's. numpy arrays (packed on the host) or torch tensors
    (packed on their device, the same bytes: :func:`~.kernels.torchk.packbits`,
    numpy's bit order)."""
    st = ExchangeStats()
    tensors = bool(flags) and _is_tensor(flags[0])
    w = _torch_itemsize(vdt) if tensors else np.dtype(vdt).itemsize
    nrecv = [int(sg.nrecv) for sg in segs]
    if all(sg.silent for sg in segs):
        if tensors:
            import torch
            dev = flags[0].device
            return ([torch.zeros(k, dtype=torch.bool, device=dev) for k in nrecv],
                    [torch.zeros(k, dtype=vdt, device=dev) for k in nrecv], st)
        return [np.zeros(k, dtype=bool) for k in nrecv], [np.zeros(k, dtype=vdt) for k in nrecv], st
    sb, rb = _tally_fold(st, comm, segs, carry, w)
    if tensors:
        return _exchange_fold_torch(comm, segs, flags, carry, vdt, w, sb, rb, what) + (st,)
    sends = []
    for i, sg in enumerate(segs):
        c = carry[i]
        bits = np.asarray(flags[i], dtype=bool)[np.asarray(c.avail, dtype=bool)]  # grouped by peer (the list is)
        pv = np.asarray(c.pvals)[np.asarray(c.pflags, dtype=bool)]
        ust, cst = np.concatenate([[0], np.cumsum(c.u_send)]), np.concatenate([[0], np.cumsum(c.c_send)])
        parts = []
        for j in np.flatnonzero(sb[i]):  # loop over peers
            parts.append(np.packbits(bits[ust[j]:ust[j + 1]]).view(np.uint8))
            parts.append(np.ascontiguousarray(pv[cst[j]:cst[j + 1]]).view(np.uint8))
        sends.append(np.concatenate(parts) if parts else np.zeros(0, np.uint8))
    outs = [np.empty(int(r.sum()), np.uint8) for r in rb]
    touts = outs if not hasattr(comm, "torch") else [_as_comm(comm, o) for o in outs]
    comm.alltoallv(segs[0].family, [_as_comm(comm, s) for s in sends], sb, rb, touts, what=what)
    if hasattr(comm, "torch"):
        outs = [_to_np(o) for o in touts]
    got_l, val_l = [], []
    for i, sg in enumerate(segs):
        c = carry[i]
        bits, vals = [], []
        buf, pos = outs[i], 0
        for j in np.flatnonzero(rb[i]):
            u, cj = int(c.u_recv[j]), int(c.c_recv[j])
            nb = (u + 7) // 8
            bits.append(np.unpackbits(buf[pos:pos + nb], count=u).astype(bool))
            pos += nb
            vals.append(buf[pos:pos + w * cj])
            pos += w * cj
        got = np.zeros(nrecv[i], dtype=bool)
        gv = np.zeros(nrecv[i], dtype=vdt)
        if bits:  # every pair with bytes: its bitmap (maybe empty) and values (maybe none)
            got[np.flatnonzero(np.asarray(c.ravail, dtype=bool))] = np.concatenate(bits)
            gv[np.flatnonzero(np.asarray(c.pgot, dtype=bool))] = np.concatenate(vals).view(vdt)
        got_l.append(got)
        val_l.append(gv)
    return got_l, val_l, st


def _torch_itemsize(dt) -> int:
    import torch
    return torch.empty(0, dtype=dt).element_size()


def _exchange_fold_torch(comm, segs, flags, carry, vdt, w, sb, rb, what):
    """:func:`exchange_fold` on device tensors: (flags received, values)."""
    import torch

    from .kernels.torchk import nonzero_n, packbits, unpackbits, view_as
    dev = flags[0].device
    sends = []
    for i, sg in enumerate(segs):
        c = carry[i]
        bits = flags[i][nonzero_n(c.avail, int(c.u_send.sum()))]
        tot = int(c.c_send.sum())
        vb = c.pvals[nonzero_n(c.pflags, tot)].contiguous().view(torch.uint8).reshape(-1) if tot else None
        ust, cst = np.concatenate([[0], np.cumsum(c.u_send)]), np.concatenate([[0], np.cumsum(c.c_send)]) * w
        parts = []
        for j in np.flatnonzero(sb[i]):  # loop over peers
            if c.u_send[j]:
                parts.append(packbits(bits[int(ust[j]):int(ust[j + 1])]))
            if c.c_send[j]:
                parts.append(vb[int(cst[j]):int(cst[j + 1])])
        sends.append(torch.cat(parts) if parts else torch.zeros(0, dtype=torch.uint8, device=dev))
    outs = _alltoallv_bytes(comm, segs[0].family, sends, sb, rb, dev, what)
    got_l, val_l = [], []
    for i, sg in enumerate(segs):
        c = carry[i]
        nr = int(sg.nrecv)
        got = torch.zeros(nr, dtype=torch.bool, device=dev)
        gv = torch.zeros(nr, dtype=vdt, device=dev)
        bits, vals = [], []
        buf, pos = outs[i], 0
        for j in np.flatnonzero(rb[i]):  # loop over peers
            u, cj = int(c.u_recv[j]), int(c.c_recv[j])
            nb = (u + 7) // 8
            if u:
                bits.append(unpackbits(buf[pos:pos + nb], u))
            pos += nb
            if cj:
                vals.append(buf[pos:pos + w * cj])
            pos += w * cj
        if bits:
            got[nonzero_n(c.ravail, int(c.u_recv.sum()))] = torch.cat(bits)
        if vals:
            gv[nonzero_n(c.pgot, int(c.c_recv.sum()))] = view_as(torch.cat(vals), vdt)
        got_l.append(got)
        val_l.append(gv)
    return got_l, val_l


def _cat(parts: list):
    if _is_tensor(parts[0]):
        import torch
        return torch.cat(parts)
    return np.concatenate(parts)


def exchange_chain(comm, chains: list[list[Segments]], masks: list, values: list | None,
                   what: str = "frontier") -> tuple[list, list, ExchangeStats]:
    """:func:`exchange_flags` along a chain of steps (``chains[i]``: local rank
    i's :attr:`RankGraph.steps`): step k sends the flagged rows of the buffer
    after step k − 1 (own rows, then what steps 1..k − 1 brought, each with the
    flag and value it arrived with) and appends what it receives. Returns the
    flags (and values) of every appended row (``ext[nl:]`` of the
    :class:`RankGraph`) and the stats of all steps (``by_family`` per family).
    A 1D or 2D plan's chain is one step. numpy arrays or device tensors alike."""
    if not chains[0]:  # no rank pair communicates (e.g. a routed plan of a partition that cuts no edge)
        return ([m[:0].bool() if _is_tensor(m) else np.zeros(0, dtype=bool) for m in masks],
                None if values is None else [v[:0] for v in values], ExchangeStats())
    if len(chains[0]) == 1:
        return exchange_flags(comm, [c[0] for c in chains], masks, values, [c[0].nrecv for c in chains], what)
    fl = [[m if _is_tensor(m) else np.asarray(m, dtype=bool)] for m in masks]
    vl = None if values is None else [[v if _is_tensor(v) else np.asarray(v)] for v in values]
    st = ExchangeStats()
    for k in range(len(chains[0])):
        segs = [c[k] for c in chains]
        bufm = [_cat(f) if len(f) > 1 else f[0] for f in fl]
        bufv = None if vl is None else [_cat(v) if len(v) > 1 else v[0] for v in vl]
        got, vals, s = exchange_flags(comm, segs, bufm, bufv, [sg.nrecv for sg in segs],
                                      what=f"{what}, step {k + 1} ({segs[0].family})")
        st = st.add(s)
        for i in range(len(chains)):
            fl[i].append(got[i])
            if vl is not None:
                vl[i].append(vals[i])
    return ([_cat(f[1:]) for f in fl], None if vl is None else [_cat(v[1:]) for v in vl], st)


def exchange_chain_counted(comm, chains: list[list[Segments]], masks: list, counts0: list,
                           what: str = "frontier", later: list | None = None) -> tuple[list, ExchangeStats, list]:
    """:func:`exchange_chain` of device flags (no values) when the first step's
    flag counts per peer (``counts0``: int64 per local rank, host) are already
    known — the BFS level's one device → host copy brought them — so the first
    step copies nothing to the host; each later step of a routed chain counts
    what it forwards on the device (one copy per step), unless ``later`` gives
    those counts too (per later step, per local rank: int64 per peer — BFS's
    owners count them, :meth:`~.bfs.BfsEngine._fan_out`). Returns (flags of the
    appended rows per local rank, stats, received counts per step: per step a
    list over local ranks of int64 per peer — the rows each peer flagged)."""
    import torch
    fl = [[m] for m in masks]
    st, recv = ExchangeStats(), []
    multi = len(chains[0]) > 1
    for k in range(len(chains[0])):
        segs = [c[k] for c in chains]
        bufm = [torch.cat(f) if len(f) > 1 else f[0] for f in fl]
        peer: list = []
        got, _, s = _exchange_flags_torch(comm, segs, bufm, None, [sg.nrecv for sg in segs],
                                          f"{what}, step {k + 1} ({segs[0].family})" if multi else what,
                                          counts=counts0 if k == 0 else None if later is None else later[k - 1],
                                          peer_out=peer)
        if not peer:  # a silent step: nothing moved
            peer = [np.zeros(sg.recv_counts.size, dtype=np.int64) for sg in segs]
        recv.append(peer)
        st = st.add(s)
        for i in range(len(chains)):
            fl[i].append(got[i])
    return [torch.cat(f[1:]) if len(f) > 2 else f[1] for f in fl], st, recv


def world_sum(comm, vecs: list) -> np.ndarray:
    """Sum of small float64 vectors over all ranks (one per local rank given);
    no collective on a one-rank job."""
    if comm.world == 1:
        return np.asarray(vecs[0], dtype=np.float64)
    return comm.allreduce_world([np.asarray(v, dtype=np.float64) for v in vecs], "sum")[0]


def gather_global(comm, parts_ids: list[np.ndarray], parts_vals: list[np.ndarray], n: int,
                  fill: float) -> np.ndarray:
    """A length-n float64 vector in vertex order from every rank's own entries
    (an all-reduce: max over ``fill``-initialised copies; ``fill`` must be below
    every value). Exact for integers below 2**53."""
    vecs = []
    for ids, v in zip(parts_ids, parts_vals):
        x = np.full(n, fill, dtype=np.float64)
        x[ids] = v
        vecs.append(x)
    if len(vecs) > 1 or comm.world == 1:  # LocalComm: combine locally (an all-reduce of p copies would cost p·n)
        return np.max(np.stack(vecs), axis=0)
    return comm.allreduce_world(vecs, "max")[0]
