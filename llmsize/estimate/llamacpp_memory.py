"""llama.cpp's own memory ledger: the buffers its start-up log prints, sized the way its source sizes them.

Context (src/llama-context.cpp, since ggml-org/llama.cpp PR 17046, November 2025):
    n_ctx     = PAD(-c, 256)
    n_ctx_seq = n_ctx                          with --kv-unified (one stream shared by every slot)
              = PAD(n_ctx / --parallel, 256)   otherwise, and n_ctx = n_ctx_seq x --parallel (one stream a slot)
KV cache (src/llama-kv-cache.cpp), for every layer that caches, on that layer's device:
    K = n_stream x cells x row(type_k, n_embd_k_gqa(layer))
    V = n_stream x cells x row(type_v, n_embd_v_gqa(layer)), or n_embd_v_gqa_max of all layers without flash
        attention, when layers' V widths differ (the transposed V cache is padded: [TAG_V_CACHE_VARIABLE])
    row(type, n) = n / block x block bytes (f16 2 B per value, q8_0 34 B per 32, q4_0 18 B per 32, ...)
    cells = n_ctx_seq; a sliding-window layer's cache (src/llama-kv-cache-iswa.cpp) has
            PAD(min(n_ctx_seq, n_swa x (unified ? n_parallel : 1) + n_ubatch), 256) cells, or n_ctx_seq with
            --swa-full. A quantized V cache needs flash attention (llama_context refuses it otherwise).
Recurrent state (src/llama-memory-recurrent.cpp), f32, one cell a slot: R = (conv_kernel - 1) x conv channels,
    S = the SSM / delta-rule state.
DeepSeek-V4 (src/llama-kv-cache-dsv4.cpp @035aa95b, a stream a slot whatever -kvu): every layer a K-only sliding
    cache of head_dim values (the sliding-window rule above); a layer of ratio r also PAD(ceil(n_ctx_seq / r), 256)
    K-only compressed rows of head_dim, and with an indexer as many of its key width, all of type_k; and a
    compressor state a slot, f32, kv and score planes of (overlap ? 2 : 1) x r rows x (overlap ? 2 : 1) x width
    (the indexer's alike): counted with the recurrent states. At -c 131072, f16, DeepSeek-V4-Flash: window 32.25,
    ratio-4 rows 672, ratio-128 rows 20, indexer keys 168 MiB (ggml-org/llama.cpp#25468's log).
Output buffer (llama_context::output_reserve): n_vocab x 4 B for each of --parallel sequences, on the host.
Model buffers (src/llama-model.cpp load_tensors): the token embedding stays on the host ("there is very little
    benefit to offloading the input layer"); -ngl N counts the output layer as layer n_layer and takes it first,
    then the last N - 1 repeating layers (i_gpu_start = n_layer + 1 - N; PR #18148, "offload output layer to GPU
    first", merged 2025-12-17); builds before it took the last N repeating layers (i_gpu_start = n_layer - N) and
    the output only when N > n_layer (LlamaCppSettings.output_first=False). A tied embedding is loaded a second time
    as the output (TENSOR_DUPLICATED) on the output's device.
Compute buffers (the scheduler's worst-case reservation of a ubatch of min(n_ctx, n_ubatch) tokens), f32:
    GPU  = n_tokens x 4 x max(n_vocab + n_embd            the logits and the hidden state beside them,
                              2 x n_ff + 2 x n_embd,      the widest MLP's gate and up,
                              n_head x n_kv + 3 n_embd + 2 n_embd_kv)  without flash attention: the scores
    host = n_tokens x 4 x (n_kv of each cache kind (the KQ masks) + 2 x n_embd (the input embedding))
The GPU and host compute terms were checked against logged buffers (tests/test_llamacpp_memory.py): with flash
attention the logits term is exact to the printed 0.01 MiB on Qwen3-4B, Qwen3.6-27B and Gemma 4 12B; without it
the scores term is within 6% (Pythia 2.8B). With part of the model on the CPU the output's logits move to the
host and the GPU's buffer is a lower bound: for a ubatch of 32 tokens or more the scheduler runs host weights'
matmuls on the GPU, copying each weight into the GPU's compute buffer (op offload), sized here where it dominates:
at -ngl 0 the output matrix with the logits and hidden state (exact on one log), with routed experts on the host
the largest expert matrix with its matmul's input and output (a lower bound). DeepSeek-V4's layers reserve their
indexer's scores and their attention against the whole compressed caches (_dsv4_compute), and their masks are the
host's inputs in place of a full cache's.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import accumulate

from llmsize.catalog.schema import GpuSpec, ModelSpec
from llmsize.errors import InvalidValueError
from llmsize.estimate.gguf_blocks import GGML_BLOCKS
from llmsize.estimate.kv import llamacpp_state_bytes
from llmsize.estimate.memo import by_identity
from llmsize.estimate.prefill import widest_heads
from llmsize.estimate.quant import FORMATS, LLAMACPP_KV_TYPES, NEAREST_GGUF

ENGINES = ("llamacpp", "ollama")
# ggml types a KV cache may use (quant.LLAMACPP_KV_TYPES): (values per block, bytes per block)
KV_TYPES = {t: GGML_BLOCKS[t] for t in LLAMACPP_KV_TYPES}
CTX_PAD = 256  # GGML_PAD(n_ctx, 256) and GGML_PAD(n_ctx_seq, 256)
SWA_PAD = 256  # "the SWA cache is always padded to 256 for performance" (ggml-org/llama.cpp#17037)
F32 = 4
OP_OFFLOAD_MIN_BATCH = 32  # ggml-backend's op offload: a batch of this many tokens runs host weights' ops on the GPU
BACKEND_NAME = {"NVIDIA": "CUDA0", "AMD": "ROCm0", "Apple": "Metal", "Intel": "SYCL0"}
LAYER = re.compile(r"^blk\.(\d+)\.")
EXPERTS = re.compile(r"^blk\.\d+\.ffn_(up|down|gate|gate_up)_exps\.")  # --n-cpu-moe's override pattern


# tables a token gathers a row of, kept in host memory (the input layer: "there is very little benefit to offloading
# the input layer"; llama-arch.cpp LLM_TENSOR_PER_LAYER_TOKEN_EMBD is LLM_TENSOR_LAYER_INPUT)
GATHERED_TENSORS = ("token_embd.weight", "per_layer_token_embd.weight")
# the output layer's tensors: on the GPU with it (-ngl's first layer); Gemma 3n's AltUp projections are output-layer
# tensors too (llama-arch.cpp: LLM_TENSOR_ALTUP_PROJ, LLM_TENSOR_ALTUP_UNEMBD_PROJ are LLM_TENSOR_LAYER_OUTPUT), and
# DeepSeek-V4's head hyper-connection (output_hc_base, _fn, _scale) sits beside output_norm
OUTPUT_TENSORS = ("output.", "output_norm.", "altup_proj.", "altup_unembd_proj.", "output_hc_")
# outside the blocks but loaded with block 0 (llama-arch.cpp: LLM_TENSOR_LAYER_REPEATING, created with block id 0)
BLOCK0_TENSORS = ("per_layer_model_proj.weight", "per_layer_proj_norm.weight")


def host_tables(model: ModelSpec) -> str:
    """What GATHERED_TENSORS are for this model, as reports name them."""
    return "token and per-layer embeddings" if model.per_layer_input is not None else "token embedding"


def gathered_bytes(tensors: list[tuple[str, int]]) -> int:
    """The bytes of the file's gathered tables (GATHERED_TENSORS): in host memory, never multiplied."""
    return sum(b for n, b in tensors if n in GATHERED_TENSORS)


@lru_cache(maxsize=1 << 16)
def tensor_block(name: str) -> tuple[int, bool]:
    """A GGUF tensor's block index (-1 outside the blocks: embedding, output) and whether it is one of the
    routed experts' matrices (EXPERTS); parsed once per name, which every file type of a model shares."""
    if name in BLOCK0_TENSORS:
        return 0, False
    m = LAYER.match(name)
    return (int(m.group(1)), bool(EXPERTS.match(name))) if m else (-1, False)


@dataclass(frozen=True)
class LlamaCppSettings:
    """llama-server's options, by their long names."""

    ctx_size: int  # -c
    parallel: int = 1  # -np
    kv_unified: bool = False  # -kvu
    cache_type_k: str = "f16"  # -ctk
    cache_type_v: str = "f16"  # -ctv
    flash_attn: bool = True  # -fa on|off ("auto" turns it on where the GPU runs every layer's attention)
    ubatch_size: int = 512  # -ub
    swa_full: bool = False  # --swa-full
    gpu_layers: int | None = None  # -ngl; None: every layer and the output
    n_cpu_moe: int = 0  # --n-cpu-moe: the routed experts of the first N layers stay in host memory (--cpu-moe: all)
    output_first: bool = True  # -ngl's first layer is the output (llama.cpp since PR #18148); False: a build before
    # DeepSeek-V4's lightning indexer as one op (GGML_OP_LIGHTNING_INDEXER: PR #24231, its CUDA kernel PR #25545, mid
    # July 2026); False: a build before, whose indexer scored every compressed row with every indexer head at once
    fused_indexer: bool = True
    mmproj: object = None  # --mmproj: a file type or a read file (estimate/mmproj.py); None: none loaded
    mmproj_host: bool = False  # --no-mmproj-offload: the projector on the CPU (Ollama's under an explicit num_gpu)


def gpu_placement(n_layer: int, s: LlamaCppSettings) -> tuple[int, int, bool]:
    """(-ngl as counted, of n_layer + 1; the first repeating layer on the GPU; whether the output layer is there)."""
    ngl = n_layer + 1 if s.gpu_layers is None else min(s.gpu_layers, n_layer + 1)
    if s.output_first:  # llama-model.cpp: i_gpu_start = max(n_layer + 1 - ngl, 0); the output is layer n_layer
        return ngl, min(n_layer, n_layer + 1 - ngl), ngl >= 1
    return ngl, n_layer - min(ngl, n_layer), ngl > n_layer


@dataclass(frozen=True)
class LayerCache:
    """What one layer caches per token (values), or its constant recurrent state (bytes per sequence)."""

    k: int = 0
    v: int = 0
    sliding_window: int | None = None  # tokens, for a sliding-window layer
    state_bytes: int = 0  # recurrent layers: R + S per sequence, f32; DeepSeek-V4's compressor states
    compress_ratio: int | None = None  # DeepSeek-V4: tokens a compressed row of k values (K only)
    index_k: int = 0  # DeepSeek-V4: its indexer's key values a compressed row


@dataclass(frozen=True)
class Device:
    name: str  # as the log names the buffer's backend: CUDA0, ROCm0, Metal, CPU
    layers: int  # repeating layers placed here
    has_output: bool
    model_bytes: int
    kv_bytes: int
    recurrent_bytes: int
    compute_bytes: int
    projector_bytes: int = 0  # the mmproj's weights and its encoder's compute buffer (estimate/mmproj.py)

    @property
    def total_bytes(self) -> int:
        """Everything llama.cpp allocates on this device."""
        return self.model_bytes + self.kv_bytes + self.recurrent_bytes + self.compute_bytes + self.projector_bytes


@dataclass(frozen=True)
class LlamaCppLedger:
    engine: str  # llamacpp | ollama
    settings: LlamaCppSettings
    n_ctx: int
    n_ctx_seq: int
    n_stream: int
    cells_full: int
    cells_swa: int | None  # None: no sliding-window layer
    kv_full_bytes: int
    kv_swa_bytes: int
    recurrent_bytes: int
    output_buffer_bytes: int
    devices: list[Device]
    gpu_layers: int  # of n_layer + 1 (the output counts)
    n_layer: int
    notes: list[str] = field(default_factory=list)
    v_cache: bool = True  # some caching layer keeps a V cache (MLA's keep the latent in K alone)
    compressed_cells: tuple[tuple[int, int], ...] = ()  # DeepSeek-V4: (ratio, rows a stream) of its compressed caches
    projector_holds: str = ""  # what the mmproj rows hold, in words (mmproj.projector_holds); "" without one

    @property
    def i_gpu_start(self) -> int:
        """The first repeating layer on the GPU (n_layer: none)."""
        return gpu_placement(self.n_layer, self.settings)[1]

    @property
    def output_on_gpu(self) -> bool:
        return gpu_placement(self.n_layer, self.settings)[2]

    @property
    def kv_cache_bytes(self) -> int:
        return self.kv_full_bytes + self.kv_swa_bytes

    @property
    def gpu(self) -> Device | None:
        return next((d for d in self.devices if d.name != "CPU"), None)

    @property
    def gpu_total_bytes(self) -> int:
        d = self.gpu
        return d.total_bytes if d else 0


def row_bytes(cache_type: str, n: int) -> int:
    per, nbytes = KV_TYPES[cache_type]
    return n // per * nbytes


def _pad(x: int, to: int) -> int:
    return -(-x // to) * to


def layer_caches(model: ModelSpec) -> list[LayerCache]:
    """One entry per layer, in order. MLA caches the latent alone: K = kv_lora_rank + rope dims and no V cache
    (llama.cpp PR #19067, "kv-cache : support V-less cache", 2026-01-24: V is read from K's latent part; builds
    before it also stored V = kv_lora_rank, almost twice the bytes)."""
    out = []
    for g in model.layer_stack():
        m = g.mixer
        if m is None or getattr(m, "kv_shared", False):  # a shared layer reads an earlier layer's cache
            c = LayerCache()
        elif m.kind in ("full", "sliding"):
            k = m.num_key_value_heads * m.head_dim
            c = LayerCache(k=k, v=k, sliding_window=m.sliding_window if m.kind == "sliding" else None)
        elif m.kind == "mla":
            c = LayerCache(k=m.kv_lora_rank + m.qk_rope_head_dim, v=0)
        elif m.kind == "compressed":
            c = _compressed_cache(m)
        else:  # Mamba-2, a delta-rule layer, LFM2's short conv: F32 states (kv.llamacpp_state_bytes)
            c = LayerCache(state_bytes=llamacpp_state_bytes(m))
        out.append(c)
    return out


def _compressed_cache(m) -> LayerCache:
    """A DeepSeek-V4 layer's caches in llama.cpp (module docstring): its K-only window, its compressed rows and
    indexer keys, and its compressors' f32 kv and score states."""
    r = m.compress_ratio
    if r is None:
        return LayerCache(k=m.head_dim, v=0, sliding_window=m.sliding_window)
    widen = 2 if m.compress_overlap else 1
    index_k = m.indexer.head_dim if m.indexer is not None and not m.indexer.shared else 0
    state = 2 * widen * r * widen * (m.head_dim + index_k) * F32
    return LayerCache(k=m.head_dim, v=0, sliding_window=m.sliding_window, state_bytes=state, compress_ratio=r,
                      index_k=index_k)


@dataclass(frozen=True)
class CacheRuns:
    """A model's layer caches grouped by kind: each distinct LayerCache with the (ascending) indices of its layers,
    so that a ledger sums a few groups, not every layer, for each placement the fit search tries."""

    n_layer: int
    runs: tuple[tuple[LayerCache, tuple[int, ...]], ...]
    n_swa: int | None  # the widest sliding window, tokens; None: no sliding-window layer
    v_max: int  # the widest V row of any layer
    variable_v: bool  # the caching layers' V widths differ


@by_identity()
def cache_runs(model: ModelSpec) -> CacheRuns:
    caches = layer_caches(model)
    runs: dict[LayerCache, list[int]] = {}
    for il, c in enumerate(caches):
        runs.setdefault(c, []).append(il)
    swa = [c.sliding_window for c in runs if c.sliding_window]
    return CacheRuns(len(caches), tuple((c, tuple(ils)) for c, ils in runs.items()), max(swa) if swa else None,
                     max((c.v for c in runs), default=0), len({c.v for c in runs if c.k}) > 1)


def context_cells(s: LlamaCppSettings) -> tuple[int, int, int]:
    """(n_ctx, n_ctx_seq, streams) as llama.cpp pads and splits -c among its slots."""
    n_ctx = _pad(s.ctx_size, CTX_PAD)
    if s.kv_unified or s.parallel == 1:
        return n_ctx, n_ctx, 1
    n_ctx_seq = _pad(n_ctx // s.parallel, CTX_PAD)
    return n_ctx_seq * s.parallel, n_ctx_seq, s.parallel


def _widest_ff(model: ModelSpec) -> int:
    widths = [0]
    for g in model.layer_groups:
        if g.mlp is None:
            continue
        if g.mlp.kind == "dense":
            widths.append(g.mlp.intermediate_size)
        else:
            shared = g.mlp.num_shared_experts * (g.mlp.shared_intermediate_size or g.mlp.moe_intermediate_size)
            widths.append(max(g.mlp.experts_per_token * g.mlp.moe_intermediate_size, shared))
    return max(widths)


def on_gpu(name: str, n_layer: int, i_gpu_start: int, output_on_gpu: bool, n_cpu_moe: int) -> bool:
    """Where llama.cpp loads a tensor: its layer's device, the routed experts of the first n_cpu_moe layers on
    the host (common/arg.cpp: --n-cpu-moe N overrides blk.0..N-1 ffn_(up|down|gate)_exps to the CPU buffer)."""
    il, expert = tensor_block(name)
    if il >= 0:
        if il < n_cpu_moe and expert:
            return False
        return i_gpu_start <= il < n_layer  # a layer past block_count (MTP) stays with the host
    if name.startswith(OUTPUT_TENSORS):
        return output_on_gpu
    return False  # the token embedding and anything outside the layers


@dataclass(frozen=True)
class FileLayout:
    """A GGUF file's tensors by where llama.cpp can put them (on_gpu's cases), summed once per file: the blocks'
    bytes as running totals, so that any range of blocks is two subtractions."""

    blocks: tuple[int, ...]  # the block indices (blk.N.*) the file has, ascending
    experts_upto: tuple[int, ...]  # experts_upto[i]: the routed experts' bytes of blocks[:i]
    rest_upto: tuple[int, ...]  # rest_upto[i]: the blocks' other bytes, blocks[:i]
    output_bytes: int  # output.* and output_norm.*: on the GPU when the output layer is
    embd_bytes: int  # token_embd.weight
    host_bytes: int  # everything else outside the blocks (the embedding included): always on the host
    has_output: bool  # an output.weight of its own (else the embedding is tied and loaded again as the output)
    expert_max_upto: tuple[int, ...] = (0,)  # expert_max_upto[i]: the largest routed-expert tensor of blocks[:i]

    def largest_expert_below(self, end: int) -> int:
        """The bytes of the largest routed-expert tensor (a whole ffn_*_exps matrix) of the blocks below `end`."""
        return self.expert_max_upto[bisect_left(self.blocks, end)]

    @property
    def has_experts(self) -> bool:
        return self.experts_upto[-1] > 0

    def block_bytes(self, first: int, end: int) -> tuple[int, int]:
        """(routed experts' bytes, the rest's bytes) of the blocks with first <= index < end."""
        lo, hi = bisect_left(self.blocks, first), bisect_left(self.blocks, end)
        if hi <= lo:
            return 0, 0
        return self.experts_upto[hi] - self.experts_upto[lo], self.rest_upto[hi] - self.rest_upto[lo]


@by_identity(maxsize=1024)
def file_layout(tensors: list[tuple[str, int]]) -> FileLayout:
    """The file's tensors read once: the fit search asks for dozens of placements of the same file."""
    layers: dict[int, list[int]] = {}
    widest: dict[int, int] = {}  # the largest routed-expert tensor of each block
    output = embd = host = 0
    for name, nbytes in tensors:
        il, expert = tensor_block(name)
        if il >= 0:
            layers.setdefault(il, [0, 0])[0 if expert else 1] += nbytes
            if expert:
                widest[il] = max(widest.get(il, 0), nbytes)
        elif name.startswith(OUTPUT_TENSORS):
            output += nbytes
        else:
            host += nbytes
            embd += nbytes if name == "token_embd.weight" else 0
    blocks = tuple(sorted(layers))
    return FileLayout(blocks, tuple(accumulate((layers[il][0] for il in blocks), initial=0)),
                      tuple(accumulate((layers[il][1] for il in blocks), initial=0)), output, embd, host,
                      any(name == "output.weight" for name, _ in tensors),
                      tuple(accumulate((widest.get(il, 0) for il in blocks), max, initial=0)))


def _placement(tensors: list[tuple[str, int]], n_layer: int, i_gpu_start: int, output_on_gpu: bool,
               n_cpu_moe: int = 0) -> tuple[int, int]:
    """(GPU bytes, host bytes) of the model's tensors, placed as on_gpu places each; a file without an output
    matrix of its own (tied) loads its embedding again as the output."""
    f = file_layout(tensors)
    # the blocks i_gpu_start <= il < n_layer are on the GPU, but for the routed experts of the first n_cpu_moe
    _, rest = f.block_bytes(i_gpu_start, n_layer)
    experts, _ = f.block_bytes(max(i_gpu_start, n_cpu_moe), n_layer)
    gpu = experts + rest
    host = f.host_bytes + f.experts_upto[-1] + f.rest_upto[-1] - gpu  # each block's bytes are on one side or the other
    gpu, host = (gpu + f.output_bytes, host) if output_on_gpu else (gpu, host + f.output_bytes)
    if not f.has_output and output_on_gpu:
        gpu += f.embd_bytes  # the embedding, loaded again as the output layer
    return gpu, host


def llamacpp_ledger(model: ModelSpec, gpu: GpuSpec, tensors: list[tuple[str, int]], s: LlamaCppSettings,
                    engine: str = "llamacpp") -> LlamaCppLedger:
    """The ledger of one llama.cpp context on one GPU. `tensors` are the GGUF file's (name, bytes)."""
    for opt, t in (("--cache-type-k", s.cache_type_k), ("--cache-type-v", s.cache_type_v)):
        if t not in KV_TYPES:
            raise InvalidValueError(f"{opt} {t}: not a KV cache type llama.cpp takes.",
                                    f"Choose one of: {', '.join(KV_TYPES)}.")
    if KV_TYPES[s.cache_type_v][0] > 1 and not s.flash_attn:
        raise InvalidValueError(f"--cache-type-v {s.cache_type_v} needs flash attention: llama.cpp refuses a "
                                "quantized V cache without it.", "Add --flash-attn on, or use an f16 V cache.")
    runs = cache_runs(model)
    n_layer, v_max, variable_v = runs.n_layer, runs.v_max, runs.variable_v
    notes: list[str] = []
    n_ctx, n_ctx_seq, n_stream = context_cells(s)
    if n_ctx != s.ctx_size:
        notes.append(f"-c {s.ctx_size} becomes n_ctx {n_ctx} (padded to {CTX_PAD}"
                     + (f", then {n_ctx_seq} per slot x {s.parallel})" if n_stream > 1 else ")"))
    ngl, i_gpu_start, output_on_gpu = gpu_placement(n_layer, s)
    cells_swa = None
    if runs.n_swa is not None:
        cells_swa = n_ctx_seq if s.swa_full else _pad(
            min(n_ctx_seq, runs.n_swa * (s.parallel if s.kv_unified else 1) + s.ubatch_size), SWA_PAD)
    kv_gpu = kv_host = kv_full = kv_swa = rec_gpu = rec_host = 0
    compressed: dict[int, int] = {}
    for c, ils in runs.runs:  # layers from i_gpu_start on are on the GPU
        n_gpu = len(ils) - bisect_left(ils, i_gpu_start)
        n_host = len(ils) - n_gpu
        if c.compress_ratio:  # DeepSeek-V4's rows (with the growing cache) and compressor states (with the states)
            streams = max(1, s.parallel)
            rows = _pad(-(-n_ctx_seq // c.compress_ratio), SWA_PAD)
            compressed[c.compress_ratio] = rows
            b = streams * rows * (row_bytes(s.cache_type_k, c.k) + row_bytes(s.cache_type_k, c.index_k))
            kv_full += len(ils) * b
            kv_gpu, kv_host = kv_gpu + n_gpu * b, kv_host + n_host * b
            b = c.state_bytes * streams
            rec_gpu, rec_host = rec_gpu + n_gpu * b, rec_host + n_host * b
            c = replace(c, state_bytes=0, compress_ratio=None, index_k=0)  # then its window, as any sliding layer's
        if c.state_bytes:
            b = c.state_bytes * max(1, s.parallel)
            rec_gpu, rec_host = rec_gpu + n_gpu * b, rec_host + n_host * b
            continue
        if not c.k:
            continue
        cells = cells_swa if c.sliding_window else n_ctx_seq
        v = v_max if (variable_v and not s.flash_attn) else c.v
        b = n_stream * cells * (row_bytes(s.cache_type_k, c.k) + row_bytes(s.cache_type_v, v))
        if c.sliding_window:
            kv_swa += len(ils) * b
        else:
            kv_full += len(ils) * b
        kv_gpu, kv_host = kv_gpu + n_gpu * b, kv_host + n_host * b
    if variable_v and not s.flash_attn:
        notes.append(f"layers' V widths differ and flash attention is off: the V cache is padded to {v_max} "
                     "values a token in every layer")
    model_gpu, model_host = _placement(tensors, n_layer, i_gpu_start, output_on_gpu, s.n_cpu_moe)
    if s.n_cpu_moe and not file_layout(tensors).has_experts:
        flag = "--cpu-moe" if s.n_cpu_moe >= n_layer else f"--n-cpu-moe {s.n_cpu_moe}"
        notes.append(f"{flag}: the model has no routed-expert tensors; nothing moves")
    # compute buffers: one ubatch of the worst case
    n_tok = min(n_ctx, s.ubatch_size)
    h = model.hidden_size
    n_kv = [n_ctx_seq]
    if cells_swa is not None:
        n_kv.append(cells_swa)
    kv_width = max((c.k for c, _ in runs.runs), default=0)
    logits = model.vocab_size + h
    ffn = 2 * _widest_ff(model) + 2 * h
    dsv4 = _dsv4_compute(model, s, n_tok, cells_swa or 0, compressed) if compressed else None
    scores = 0 if s.flash_attn or dsv4 else widest_heads(model) * max(n_kv) + 3 * h + 2 * kv_width
    gpu_compute = n_tok * F32 * max((logits if output_on_gpu else 0), ffn, scores) if ngl else 0
    host_compute = n_tok * F32 * (sum(n_kv) + 2 * h + (0 if output_on_gpu else logits))
    if dsv4 is not None:  # its masks are its caches' (host inputs), not a full cache's; its attention's peak
        host_compute = n_tok * F32 * (2 * h + (0 if output_on_gpu else logits)) + dsv4[1]
        if ngl and any(c.index_k and len(ils) > bisect_left(ils, i_gpu_start) for c, ils in runs.runs):
            gpu_compute = max(gpu_compute, dsv4[0])
    # -ngl 0 on a GPU build: the scheduler still runs a ubatch's big matmuls on the GPU, copying their host weights
    # there (ggml-backend's op offload, on by default; --no-op-offload turns it off), the output matmul the
    # widest: the GPU's compute buffer holds that matrix, its logits and the hidden state (Qwen3-4B Q6_K at -ngl 0
    # on a GTX 1660 Ti, build 5285: 304.28 + 296.75 + 5.00 = 606.03 MiB, as logged), the host's the rest
    staged = not ngl and n_tok >= OP_OFFLOAD_MIN_BATCH and gpu.vendor != "Apple"
    if staged:
        f = file_layout(tensors)
        out_w = max(0, f.output_bytes - F32 * h) if f.has_output else f.embd_bytes
        gpu_compute = out_w + n_tok * F32 * logits
        host_compute = n_tok * F32 * (sum(n_kv) + 2 * h)
        notes.append("-ngl 0: the GPU still runs a ubatch's large matmuls, copying their weights there (op offload; "
                     "--no-op-offload keeps them on the CPU): its compute buffer holds the output matrix and the "
                     "logits")
    # routed experts left in host memory (--n-cpu-moe, or layers on the CPU): a ubatch of 32 tokens or more runs
    # their matmuls on the GPU too, each layer's expert matrix copied into its compute buffer (op offload), so the
    # buffer holds at least the largest such matrix and its matmul's f32 input and output (n_tok x top-k x (expert
    # width + hidden)). A lower bound: Qwen3-Coder-Next with 47 layers' experts on the host (build 8233) logs
    # 583.69 MiB, this 470 (a 420 MiB Q6_K ffn_down_exps and 50 MiB); llama.cpp#24175 logs 42 MiB at -b 16 and
    # 7-7.5 GB from -b 32 for Nemotron 3 Ultra's experts
    host_experts = max(i_gpu_start, s.n_cpu_moe)
    if (ngl or staged) and host_experts and n_tok >= OP_OFFLOAD_MIN_BATCH and gpu.vendor != "Apple":
        widest = file_layout(tensors).largest_expert_below(host_experts)
        moe = [g.mlp for g in model.layer_groups if g.mlp is not None and g.mlp.kind == "moe"]
        if widest and moe:
            k = max(m.experts_per_token for m in moe)
            inter = max(m.moe_intermediate_size for m in moe)
            staged_experts = widest + n_tok * F32 * k * (inter + h)
            if staged_experts > gpu_compute:
                gpu_compute = staged_experts
                notes.append(f"routed experts in host memory: the GPU's compute buffer holds a staged expert matrix "
                             f"({widest / 2**20:,.0f} MiB) for a ubatch's matmul (op offload; --no-op-offload keeps "
                             "them on the CPU): at least that")
    if ngl and (i_gpu_start > 0 or not output_on_gpu):
        notes.append("part of the model is on the CPU: the GPU's compute buffer is a lower bound (the scheduler "
                     "stages host weights on the GPU for batches of 32 tokens or more)")
    gname = BACKEND_NAME.get(gpu.vendor, "GPU0")
    proj_gpu, proj_host, proj_holds = _projector_place(model, s)
    devices = []
    if ngl or staged or proj_gpu:
        devices.append(Device(gname, n_layer - i_gpu_start, output_on_gpu, model_gpu, kv_gpu, rec_gpu, gpu_compute,
                              proj_gpu))
    devices.append(Device("CPU", i_gpu_start, not output_on_gpu, model_host, kv_host, rec_host, host_compute,
                          proj_host))
    output = s.parallel * model.vocab_size * F32
    return LlamaCppLedger(engine, s, n_ctx, n_ctx_seq, n_stream, n_ctx_seq, cells_swa, kv_full, kv_swa,
                          rec_gpu + rec_host, output, devices, ngl, n_layer, notes,
                          any(c.v for c, _ in runs.runs if c.k), projector_holds=proj_holds,
                          compressed_cells=tuple(sorted(compressed.items())))


def _dsv4_compute(model: ModelSpec, s: LlamaCppSettings, n_tok: int, n_raw: int, compressed: dict[int, int]
                  ) -> tuple[int, int]:
    """DeepSeek-V4's compute buffer in llama.cpp (src/models/deepseek4.cpp, src/llama-kv-cache-dsv4.cpp): (the GPU's
    peak over a layer with an indexer, the mask inputs in host memory), for a ubatch of n_tok tokens reserved
    against the caches' whole capacity: n_raw window cells, n_csa rows at ratio 4 (as many indexer keys), n_hca at
    ratio 128. The masks are f16 with flash attention (PR #25370), else f32. With a layer's indexer, alive at once:
        fused indexer (PR #24231)   its scores [n_csa, T] f32, the indexer's and the top-k's masks (fill, add,
                                    concat: n_csa x T x (2 + m + max(4, 3 m)) B), the window and ratio-128 masks
        before it                   the scores of every indexer head [n_csa, T, heads] f32 and their permuted copy
                                    (2 x n_csa x T x heads x 4 B), its f32 mask and the other masks
    and, with flash attention, the window and compressed rows gathered (n_raw + n_csa) x head_dim in the K type;
    without it their scores [n_raw + n_csa, T, n_heads] f32, computed before the indexer runs; and the layer's
    queries, hyper-connection streams and hidden state, f32. Before the fused indexer, at 1,048,576 tokens and
    ubatch 512 with flash attention: 66,690 MiB, where unslothai/unsloth PR #6940's log failed to allocate
    67,094.60 MiB (-0.6%)."""
    m = next(g.mixer for g in model.layer_groups if g.mixer is not None and g.mixer.kind == "compressed"
             and g.mixer.indexer is not None and g.mixer.compress_ratio in compressed)
    n_csa, n_hca = compressed[m.compress_ratio], sum(r for k, r in compressed.items() if k != m.compress_ratio)
    mask = 2 if s.flash_attn else F32
    kb = row_bytes(s.cache_type_k, m.head_dim) / m.head_dim
    acts = n_tok * F32 * (m.num_attention_heads * m.head_dim + (model.hyper_connections or 1) * model.hidden_size
                          + model.hidden_size)
    if s.fused_indexer:
        indexer = n_csa * n_tok * (2 + mask + max(F32, 3 * mask))
        lid_mask = 2
    else:
        indexer = 2 * n_csa * n_tok * m.indexer.n_heads * F32 + n_csa * n_tok * F32 + n_csa * n_tok * mask \
            + n_tok * F32 * m.indexer.n_heads * m.indexer.head_dim
        lid_mask = F32
    rows = n_raw + n_csa
    attention = rows * m.head_dim * kb if s.flash_attn else rows * n_tok * m.num_attention_heads * F32
    gpu = int(indexer + (n_raw + n_hca) * n_tok * mask + attention + acts)
    host = (n_raw + n_csa + n_hca) * n_tok * mask + n_csa * n_tok * lid_mask
    return gpu, host


def _nvfp4_file(model: ModelSpec, scope: str) -> list[tuple[str, int]]:
    """An NVFP4 checkpoint as convert_hf_to_gguf.py writes it (ggml PR #19769 repacks ModelOpt's E2M1 weights and
    E4M3 scales into ggml's NVFP4 blocks; llama-quantize does not make the type): the matrices `scope` quantizes in
    NVFP4 (36 B per 64 weights), the rest as the checkpoint holds them, 16 bits, vectors in F32. A row that is not a
    multiple of 64 fits no block: 16 bits."""
    from llmsize.estimate.gguf_mix import file_tensors
    from llmsize.estimate.weights import component_quantized

    per, nbytes = GGML_BLOCKS["nvfp4"]
    out = []
    for t in file_tensors(model):
        if t.f32:
            out.append((t.name, t.elements * 4))
        elif component_quantized(t.component, scope) and t.ne0 % per == 0:
            out.append((t.name, t.elements // per * nbytes))
        else:
            out.append((t.name, t.elements * 2))
    return out


def _projector_place(model: ModelSpec, s: LlamaCppSettings) -> tuple[int, int, str]:
    """(GPU bytes, host bytes) of the mmproj and its encoder's buffers: on the first GPU whatever -ngl (clip.cpp
    picks its own device), on the host with --no-mmproj-offload (s.mmproj_host); and what they hold, in words."""
    if not s.mmproj:
        return 0, 0, ""
    from llmsize.estimate.mmproj import projector, projector_holds

    p = projector(model, s.mmproj, s.flash_attn)
    return (0, p.total_bytes, projector_holds(p)) if s.mmproj_host else (p.total_bytes, 0, projector_holds(p))


def gguf_file_tensors(model: ModelSpec, format_id: str, scope: str | None = None) -> list[tuple[str, int]]:
    """(name, bytes) of the GGUF file llama.cpp would load for a catalog model in `format_id`: the file
    llama-quantize writes for a GGUF file type, the converter's F16/BF16/F32 file (norms kept in F32), or its file of
    an NVFP4 checkpoint (`scope`: the matrices the checkpoint holds in NVFP4; None: the format's default)."""
    from llmsize.estimate.runtime_model import text_model

    # (one file for a model and its text model: gguf_mix)
    return _gguf_file_tensors(text_model(model), format_id, scope if format_id == "nvfp4" else None)


@by_identity(maxsize=512)
def _gguf_file_tensors(model: ModelSpec, format_id: str, scope: str | None) -> list[tuple[str, int]]:
    from llmsize.estimate.gguf_mix import file_mix, file_tensors

    if format_id.startswith("gguf-"):
        return [(m.tensor.name, m.nbytes) for m in file_mix(model, format_id.removeprefix("gguf-"))]
    if format_id.startswith("ggml-"):  # one block type in every matrix (the format's meaning), vectors in F32
        per, nbytes = GGML_BLOCKS[format_id.removeprefix("ggml-")]
        return [(t.name, t.elements * 4 if t.f32 else -(-t.elements // per) * nbytes) for t in file_tensors(model)]
    if format_id == "nvfp4":
        return _nvfp4_file(model, scope or FORMATS["nvfp4"].default_scope)
    width = {"fp16": 2, "bf16": 2, "fp32": 4}.get(format_id)
    if width is None:  # the nearest GGUF file type to suggest
        near = NEAREST_GGUF.get(format_id, "gguf-q4_k_m")
        raise InvalidValueError(f"{model.id} in {format_id}: llama.cpp loads GGUF files, and {format_id} is not a "
                                "GGUF file type.", f"Add --quant {near} (or another "
                                "gguf-* type, bf16, fp16), or plan a .gguf file.")
    return [(t.name, t.elements * (4 if t.f32 else width)) for t in file_tensors(model)]
