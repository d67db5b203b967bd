"""SGLang's KV pools for DeepSeek-V4 (mem_cache/deepseek_v4_memory_pool.py DeepSeekV4TokenToKVPool), as SGLang 0.5.23
sizes them on its default path (model_executor/pool_configurator.py DSV4PoolConfigurator: the FlashMLA V4 layout of
kernels/ops/attention/dsv4/kv_layout.py, ratio mode, no HiSparse, no online C128 compression, FP32 compressor
states); the arithmetic is llmsize's. What its log's "DSV4 memory calculation: bytes_per_full_token=..." and
"max_total_num_tokens=..." come from.

Every pool is in pages of 256 tokens (the DeepSeek-V4 hook's page_size), each page padded to a multiple of 576 B
(quant.COMPRESSED_FP8_PAGE_ALIGN) of 584-B rows (448 FP8 + 64 BF16 RoPE values + 8 B of scales):
    window pool (SWA)   every layer, swa tokens = swa_full_tokens_ratio (0.1 for DeepSeek-V4) x the full tokens,
                        shared by the running requests (not sized per request); 585 B a row once padded
    ratio-4 layers      full / 4 rows of 585 B (64-row pages) and full / 4 indexer keys of 132 B (128 FP8 + a
                        4-B scale), and per window token a ring of 8 compressor-state rows a 256-token page
                        (16 under speculative decoding), 2 x 2 x head_dim + 2 x 2 x indexer head_dim FP32 values
    ratio-128 layers    full / 128 rows of 864 B (2-row pages of 1,728 B), and their compressor states apart, a
                        ring of 128 rows (256 speculative) for each of max_running_requests + 1 slots, 2 x head_dim
                        FP32 values a row: a fixed term
so that
    bytes_per_full_token = ratio x (585 x L + ring4 / 256 x (16 x head_dim + 16 x indexer_dim) x L4)
                           + (585 + 132) / 4 x L4 + 864 / 128 x L128          (x (L + 1) / L when drafting)
    fixed                = ceil(((R + 1) x ring128 + ring128 + 1) / 128) x 128 x 2 x head_dim x 4 B x L128
    max_total_num_tokens = floor((available - fixed) / bytes_per_full_token) rounded down to 256
with L the layers, L4 / L128 those of ratio 4 / 128 and R max_running_requests (256, the hook's default for the
family). DeepSeek-V4-Flash: 7,086.75 B a full token and 2.53 GiB fixed; -Pro 10,115.25 B and 3.92 GiB. Releases
before 0.5.15 charged the ratio-128 states per window token instead (15,897.45 B a token for Flash in 0.5.13), and
0.5.12 counted the MTP layer's entry among the layers; those are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmsize.catalog.schema import CompressedAttention, ModelSpec
from llmsize.estimate.kv import indexer_bytes_per_token
from llmsize.estimate.quant import COMPRESSED_FP8_PAGE_ALIGN, COMPRESSED_FP8_ROW_BYTES

PAGE_TOKENS = 256  # the DeepSeek-V4 hook's page_size (128 on Ascend NPUs, not modelled)
SWA_FULL_TOKENS_RATIO = 0.1  # DSV4_DEFAULT_SWA_FULL_TOKENS_RATIO
MAX_RUNNING_REQUESTS = 256  # the hook's max_running_requests where none is given
F32 = 4  # SGLANG_DSV4_COMPRESS_STATE_DTYPE's default, float32


def ring_rows(ratio: int, drafting: bool) -> int:
    """get_compress_state_ring_size: a request's compressor-state ring."""
    return (16 if ratio == 4 else 256) if drafting else (8 if ratio == 4 else 128)


def row_bytes(page_tokens: int) -> float:
    """A row's bytes in a page of `page_tokens` rows padded to the engines' alignment (KVLayout.page_bytes /
    page_size)."""
    align = COMPRESSED_FP8_PAGE_ALIGN
    return -(-page_tokens * COMPRESSED_FP8_ROW_BYTES // align) * align / page_tokens


@dataclass(frozen=True)
class SglangDsv4Pools:
    bytes_per_full_token: float
    fixed_bytes: int  # the ratio-128 layers' compressor states for max_running_requests + 1 slots
    swa_ratio: float
    window_tokens: int  # the window a request keeps in the SWA pool (and a page it may straddle)

    def full_tokens(self, available_bytes: float) -> int:
        """max_total_num_tokens from the memory left for the pools (0 when the fixed term takes it all)."""
        if available_bytes <= self.fixed_bytes:
            return 0
        return int((available_bytes - self.fixed_bytes) / self.bytes_per_full_token) // PAGE_TOKENS * PAGE_TOKENS

    def swa_tokens(self, full_tokens: int) -> int:
        return int(full_tokens * self.swa_ratio) // PAGE_TOKENS * PAGE_TOKENS

    def requests(self, full_tokens: int, length: int, max_running: int = MAX_RUNNING_REQUESTS) -> float:
        """Requests of `length` tokens the pools hold at once: the full tokens (pages of 256), the window pool (a
        window and a page each, SGLang's own floor for one request: validate_swa_pool_size) and the running cap."""
        paged = -(-length // PAGE_TOKENS) * PAGE_TOKENS
        return min(full_tokens / paged, self.swa_tokens(full_tokens) / (self.window_tokens + PAGE_TOKENS),
                   float(max_running))


def sglang_dsv4_pools(model: ModelSpec, drafting: bool = False, swa_ratio: float = SWA_FULL_TOKENS_RATIO,
                      max_running: int = MAX_RUNNING_REQUESTS) -> SglangDsv4Pools:
    """The pools' per-token and fixed bytes for `model`'s layers (one pipeline stage's, as the card holds them);
    `drafting`: an MTP or EAGLE draft runs (wider rings, and its layer charged as (L + 1) / L)."""
    mixers = [g.mixer for g in model.layer_stack() if isinstance(g.mixer, CompressedAttention)]
    layers = len(mixers)
    per_swa_token = row_bytes(PAGE_TOKENS) * layers
    per_full_token = 0.0
    fixed = 0
    for m in mixers:
        if m.compress_ratio == 4:
            indexer_dim = m.indexer.head_dim if m.indexer is not None else 0
            per_swa_token += ring_rows(4, drafting) / PAGE_TOKENS * (2 * 2 * m.head_dim + 2 * 2 * indexer_dim) * F32
            # an indexer key of 128 FP8 values and a 4-B scale (get_dsv4_indexer_bytes_per_token(128, fp4=False))
            per_full_token += (row_bytes(PAGE_TOKENS // 4) + indexer_bytes_per_token(m)) / 4
        elif m.compress_ratio is not None:
            ring = ring_rows(128, drafting)
            per_full_token += row_bytes(PAGE_TOKENS // m.compress_ratio) / m.compress_ratio
            rows = -(-((max_running + 1) * ring + ring + 1) // 128) * 128
            fixed += rows * 2 * m.head_dim * F32
    inflate = (layers + 1) / layers if drafting and layers else 1.0
    window = max((m.sliding_window for m in mixers), default=0)
    return SglangDsv4Pools((swa_ratio * per_swa_token + per_full_token) * inflate, fixed, swa_ratio, window)
