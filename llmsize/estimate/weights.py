"""Weight bytes by component under a format, and the weight bytes one decode step reads.

Bytes read per decoded token (weights part) = every weight the step touches: the lm_head included
(tied or not), the embedding table excluded (one row is gathered), routed experts at the share the
batch routes to (gpt-fast `_get_model_size` leaves out nn.Embedding for the same reason).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from llmsize.catalog.schema import ModelSpec
from llmsize.errors import InvalidValueError
from llmsize.estimate.memo import by_identity
from llmsize.estimate.params import COMPONENTS, GATHERED, Piece, model_pieces, routed_fraction, touched_share
from llmsize.estimate.quant import FORMATS, SCOPES, UNQUANTIZED, QuantFormat

NEVER_QUANTIZED = ("router", "norms", "extra")
EXTRA_BITS = 16


def is_quantized(piece: Piece, scope: str) -> bool:
    """Whether `scope` quantizes this piece (see quant.py for the scopes)."""
    return piece.matrix and component_quantized(piece.component, scope)


def component_quantized(component: str, scope: str) -> bool:
    """Whether `scope` quantizes a matrix of `component` (params.COMPONENTS)."""
    if component in NEVER_QUANTIZED:
        return False
    if scope == "all":
        return True
    if component in (*GATHERED, "lm_head"):
        return False
    if scope == "experts":
        return component == "experts"
    if scope == "mlp":
        return component in ("mlp", "experts", "shared_experts")
    return True


def piece_format(piece: Piece, fmt: QuantFormat, scope: str) -> QuantFormat | None:
    """The format a piece is stored in; None where it stays at fmt.keep_bits. A recipe names one a component (a tied
    lm_head is the embedding: the embedding's), the scope is not read; else the scope says whether `fmt` is it."""
    if fmt.recipe:
        if not piece.matrix or piece.component in NEVER_QUANTIZED:
            return None
        recipe = dict(fmt.recipe)
        part = "embedding" if piece.component == "lm_head" and not piece.stored else piece.component
        if piece.part in recipe:  # a part the recipe names apart (attention_out), else its component's format
            part = piece.part
        fid = recipe.get(part)
        return FORMATS[fid] if fid else None
    return fmt if is_quantized(piece, scope) else None


def piece_bytes(piece: Piece, fmt: QuantFormat, scope: str) -> Fraction:
    f = piece_format(piece, fmt, scope)
    if f is not None:
        return piece.params * f.bits_per_weight / 8 + piece.tensors * f.per_tensor_bytes
    if piece.component == "extra":  # vision towers / MTP modules ship in bf16 whatever the text format
        return Fraction(piece.params * EXTRA_BITS, 8)
    return Fraction(piece.params * fmt.keep_bits, 8)


@dataclass(frozen=True)
class WeightBytes:
    """Weights of one model under one format: stored and read-per-token bytes by component."""

    format_id: str
    scope: str
    bits_per_weight: float
    stored_bytes: dict[str, float]
    read_bytes_per_token: dict[str, float]  # at batch 1
    quantized_params: int
    unquantized_params: int

    @property
    def bytes_total(self) -> float:
        return sum(self.stored_bytes.values())

    @property
    def bytes_read_per_token(self) -> float:
        return sum(self.read_bytes_per_token.values())


def check_scope(scope: str) -> str:
    if scope not in SCOPES:
        raise InvalidValueError(f"Unknown quantization scope `{scope}`.", f"Choose one of: {', '.join(SCOPES)}.")
    return scope


@by_identity(maxsize=256)
def weight_bytes(model: ModelSpec, fmt: QuantFormat, scope: str) -> WeightBytes:
    """Stored bytes per component and bytes read per decoded token at batch 1 (worked out once a model, format and
    scope: `compare` asks for them on every card, a plan for each split it tries; callers read, never change, it).

    Formula: quantized matrices at fmt.bits_per_weight (+ per-tensor scales), everything the scope
    leaves alone at fmt.keep_bits. Counted in bits, converted to bytes once. A recipe prices each component at its
    own format's bits; its bits_per_weight is then their average over the quantized weights.
    """
    check_scope(scope)
    if fmt.mix:
        return _mix_weight_bytes(model, fmt)
    stored: dict[str, Fraction] = defaultdict(Fraction)
    read: dict[str, float] = defaultdict(float)
    q_params = u_params = 0
    q_bits = Fraction(0)
    for p in model_pieces(model):
        b = piece_bytes(p, fmt, scope)
        if p.stored:
            stored[p.component] += b
            f = piece_format(p, fmt, scope)
            if f is not None and f.id not in UNQUANTIZED:
                q_params += p.params
                q_bits += p.params * f.bits_per_weight
            else:
                u_params += p.params
        if p.read:
            read[p.component] += float(b) * routed_fraction(p, batch=1)
    return WeightBytes(
        format_id=fmt.id,
        scope=scope,
        bits_per_weight=float(q_bits / q_params if fmt.recipe and q_params else fmt.bits_per_weight),
        stored_bytes={c: float(stored.get(c, 0)) for c in COMPONENTS},
        read_bytes_per_token={c: read.get(c, 0.0) for c in COMPONENTS},
        quantized_params=q_params,
        unquantized_params=u_params,
    )


def _mix_read(stored: dict[str, int], model: ModelSpec, batch: int, unread: dict[str, int]) -> dict[str, float]:
    """Bytes a decode step reads from a GGUF file's components: the embeddings gathered, not read (a tied one is
    read as the lm_head), routed experts at the share the batch routes to, no extras (a GGUF is the text model), not
    the `unread` bytes (loaded, never used)."""
    moe = next((g.mlp for g in model.layer_groups if g.mlp is not None and g.mlp.kind == "moe"), None)
    read = {c: float(b - unread.get(c, 0)) for c, b in stored.items() if c not in (*GATHERED, "extra")}
    if model.tie_word_embeddings:
        read["lm_head"] = float(stored.get("embedding", 0))
    if moe and "experts" in read:
        read["experts"] *= routed_fraction(Piece("experts", 1, True, routed=(moe.experts_per_token,
                                                                            moe.num_experts)), batch)
    return read


def _mix_weight_bytes(model: ModelSpec, fmt: QuantFormat) -> WeightBytes:
    from llmsize.estimate.gguf_mix import file_mix, mix_bytes

    mix = file_mix(model, fmt.mix)
    stored: dict[str, int] = defaultdict(int)
    q_params = u_params = 0
    q_bytes = 0
    for m in mix:
        stored[m.tensor.component] += m.nbytes
        if m.ggml_type in ("f32", "f16", "bf16"):
            u_params += m.tensor.elements
        else:
            q_params += m.tensor.elements
            q_bytes += m.nbytes
    read = _mix_read(stored, model, 1, mix_bytes(model, fmt.mix, unread=True))
    return WeightBytes(
        format_id=fmt.id, scope="all",
        bits_per_weight=8 * q_bytes / q_params if q_params else float(fmt.bits_per_weight),
        stored_bytes={c: float(stored.get(c, 0)) for c in COMPONENTS},
        read_bytes_per_token={c: read.get(c, 0.0) for c in COMPONENTS},
        quantized_params=q_params, unquantized_params=u_params)


@by_identity(maxsize=256)
def _read_pieces(model: ModelSpec, fmt: QuantFormat, scope: str) -> tuple[tuple[float, Piece], ...]:
    """(bytes, piece) of each piece a decode step reads, worked out once a model, format and scope (a fleet search
    asks for thousands of batches of the same plans)."""
    return tuple((float(piece_bytes(p, fmt, scope)), p) for p in model_pieces(model) if p.read)


def weight_bytes_read(model: ModelSpec, fmt: QuantFormat, scope: str, batch: int) -> float:
    """Weight bytes one decode step of `batch` sequences reads (routed experts: 1-(1-k/E)^B of them)."""
    if fmt.mix:
        return bytes_read_by_batch(model, fmt, scope)(batch)
    return sum(_read_by_key(model, fmt, scope, batch, "all").values())


@by_identity(maxsize=1024)
def bytes_read_by_batch(model: ModelSpec, fmt: QuantFormat, scope: str) -> Callable[[int], float]:
    """weight_bytes_read as a function of the batch, with what does not depend on it (a GGUF file's type per
    tensor, milliseconds for a large model) worked out once: a plan asks for a dozen batches, and its decode and
    prefill models each for the function (`fit` makes a plan for every model and file type)."""
    if fmt.mix:
        from llmsize.estimate.gguf_mix import mix_bytes

        stored, unread = mix_bytes(model, fmt.mix), mix_bytes(model, fmt.mix, unread=True)
        return lambda batch: sum(_mix_read(stored, model, batch, unread).values())
    return lambda batch: weight_bytes_read(model, fmt, scope, batch)


def _read_shares(model: ModelSpec, fmt: QuantFormat, scope: str, batch: int, by: str) -> dict:
    """The shares of the weight bytes a decode step of `batch` sequences reads, by the pieces' key (_share_groups:
    `by` "routed" or "format"). For a GGUF mix (a type per tensor) the shares are taken by parameters, not bytes."""
    totals = _read_by_key(model, fmt, scope, batch, by)
    total = sum(totals.values())
    return {k: v / total for k, v in totals.items()} if total else {}


def _read_by_key(model: ModelSpec, fmt: QuantFormat, scope: str, batch: int, by: str) -> dict:
    """The bytes (a GGUF mix: parameters) a decode step of `batch` sequences reads, by the pieces' key
    (_share_groups): each key's dense part and its routed experts at the share the batch touches."""
    return {k: dense + sum(size * touched_share(share, batch) for share, size in routed)
            for k, dense, routed in _share_groups(model, fmt, scope, by)}


@by_identity(maxsize=256)
def _share_groups(model: ModelSpec, fmt: QuantFormat, scope: str, by: str
                  ) -> tuple[tuple[object, float, tuple[tuple[float, float], ...]], ...]:
    """The pieces a decode step reads summed by key, worked out once a model, format and scope (a fleet search asks
    for thousands of batches): per key, the size every step reads and per routing share k/E the routed experts'.
    The key: none (`by` "all": one group, the step's whole read), whether the piece is a routed expert ("routed"), or
    the format it is stored in ("format": None where it stays at keep_bits or unquantized)."""
    def stored_in(p: Piece) -> str | None:
        f = piece_format(p, fmt, scope)
        return None if f is None or f.id in UNQUANTIZED else f.id

    key = {"all": lambda p: None, "routed": lambda p: p.routed is not None, "format": stored_in}[by]
    groups: dict = {}
    pieces = ((p.params, p) for p in model_pieces(model) if p.read) if fmt.mix else _read_pieces(model, fmt, scope)
    for size, p in pieces:
        group = groups.setdefault(key(p), [0.0, {}])
        if p.routed is None:
            group[0] += size
        else:
            share = p.routed[0] / p.routed[1]
            group[1][share] = group[1].get(share, 0.0) + size
    return tuple((k, dense, tuple(routed.items())) for k, (dense, routed) in groups.items())


def expert_read_fraction(model: ModelSpec, fmt: QuantFormat, scope: str, batch: int) -> float:
    """The routed experts' share of the weight bytes a decode step reads (0 for a dense model)."""
    return _read_shares(model, fmt, scope, batch, "routed").get(True, 0.0)


def read_shares_by_format(model: ModelSpec, fmt: QuantFormat, scope: str, batch: int) -> dict[str | None, float]:
    """The shares of a decode step's weight bytes by the format they are stored in (None: left at keep_bits, the
    lm_head under `linear`; attention, shared experts and the rest under `experts`). A GGUF mix (a ggml type per
    tensor) and a format no narrower than what it keeps are one share: {fmt.id: 1}."""
    if fmt.mix or (not fmt.recipe and fmt.bits_per_weight >= fmt.keep_bits):
        return {fmt.id: 1.0}
    return _read_shares(model, fmt, scope, batch, "format") or {fmt.id: 1.0}


def matmul_params_per_token(model: ModelSpec) -> float:
    """Parameters a decoded token multiplies with (2 FLOPs each): matrices read per token, routed
    experts at k/E. The embedding gather does no multiply-adds."""
    return sum(
        p.params * routed_fraction(p, batch=1)
        for p in model_pieces(model) if (p.read and p.matrix) or p.component == "router"
    )


def expert_params_per_token(model: ModelSpec) -> float:
    """The routed experts' share of matmul_params_per_token: parameters of the k experts a token is routed to."""
    return sum(p.params * routed_fraction(p, batch=1) for p in model_pieces(model) if p.routed is not None)
