"""vLLM's KV-cache layout for DeepSeek-V4 under its FP8 cache (fp8_ds_mla), as vLLM 0.26.0 sizes it: what its log's
"GPU KV cache size" and "Maximum concurrency" come from. Read from vLLM 0.26.0's sources (commit ffd46bfab:
vllm/v1/kv_cache_interface.py, vllm/models/deepseek_v4/attention.py and compressor.py,
vllm/v1/attention/backends/mla/sparse_swa.py, vllm/v1/core/kv_cache_utils.py); the arithmetic is llmsize's.

The caches, each a KV-cache spec of its own (page = one block of one layer, padded up to a multiple of 576 B):
  every layer (and a drafting MTP layer)           its window: blocks of 64 tokens of 584-B rows, sliding over it
  a layer of ratio r                               its rows: blocks of `block_size` tokens, block_size / r rows of 584 B
  a layer with an indexer                          its keys: block_size / r keys of 132 B
  a layer of ratio r                               its compressor's f32 kv and score state: blocks of 4 (r = 4) or
                                                   8 (r = 128) rows of 2 x overlap x head_dim values, sliding over
                                                   overlap x r tokens; an indexer's compressor alike at its key width
The rows and keys form one group; the sliding specs group by (block, window). Each sliding group's pages are padded to
the nearest page size of the first group and its layers are split into groups of at most `tuple` layers, `tuple` being
the count, near the first group's, that pads the least. A block across all groups costs, for each page size, that
size times the most layers any group has of it; a request needs, per group, its pages (ceil(length / block) for the
rows; ceil(min(window - 1 + in-flight tokens, length) / block) + 1 for a sliding spec), weighted by the group's summed
pages and counted in the first group's. DeepSeek-V4-Flash, 256-token blocks, with its MTP layer, 8,192 tokens in
flight: 1,039,680 B a block; a 912,128-token request takes 6,537 blocks (vllm-project/vllm#51041's 1.11x and
1,009,661 tokens from a pool of 7,236 blocks, its "7.01 GiB"; tests/test_deepseek_v4.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from llmsize.catalog.schema import CompressedAttention, ModelSpec
from llmsize.estimate.kv import indexer_bytes_per_token
from llmsize.estimate.quant import COMPRESSED_FP8_PAGE_ALIGN, COMPRESSED_FP8_ROW_BYTES

# the block vLLM takes for it where --block-size is not given: its recipe's (vllm-project/recipes
# models/deepseek-ai/DeepSeek-V4-Flash.yaml @8959cf64 base_args --block-size 256); launch lines pass it on
DSV4_BLOCK_SIZE = 256
WINDOW_BLOCK = 64  # the window cache's block (sparse_swa.py: self.block_size = 64)
STATE_BLOCK = {4: 4, 128: 8}  # a compressor state's block by ratio (compressor.py)
F32 = 4


def _padded(nbytes: int) -> int:
    return -(-nbytes // COMPRESSED_FP8_PAGE_ALIGN) * COMPRESSED_FP8_PAGE_ALIGN


@dataclass(frozen=True)
class Spec:
    block: int  # tokens a block
    window: int | None  # a sliding spec's window; None for the rows and keys
    page: int  # bytes a block of one layer


@dataclass(frozen=True)
class Dsv4Layout:
    groups: tuple[tuple[Spec, ...], ...]  # the first: rows and keys; then the sliding groups, padded
    bytes_per_block: int

    def blocks_per_request(self, length: int, in_flight: int) -> int:
        """Blocks of the first group's a request of `length` tokens takes, with `in_flight` tokens scheduled at once
        (max_num_batched_tokens x the batches in flight)."""
        def pages(s: Spec) -> int:
            if s.window is None:
                return -(-length // s.block)
            return -(-min(s.window - 1 + in_flight, length) // s.block) + 1

        weighted = sum(max(pages(s) for s in g) * sum(s.page for s in g) for g in self.groups)
        return -(-weighted // sum(s.page for s in self.groups[0]))


def is_dsv4(model: ModelSpec) -> bool:
    """Whether every layer of the model is DeepSeek-V4's (the layout below is for nothing else)."""
    return all(isinstance(g.mixer, CompressedAttention) for g in model.layer_groups)


def _specs(model: ModelSpec, block_size: int, mtp_layers: int) -> list[Spec]:
    out = []
    layers = [g.mixer for g in model.layer_stack()] + [None] * mtp_layers  # an MTP layer keeps its window alone
    for m in layers:
        window = m.sliding_window if m is not None else next(
            g.mixer.sliding_window for g in model.layer_groups if isinstance(g.mixer, CompressedAttention))
        out.append(Spec(WINDOW_BLOCK, window, _padded(WINDOW_BLOCK * COMPRESSED_FP8_ROW_BYTES)))
        r = m.compress_ratio if m is not None else None
        if r is None:
            continue
        widen = 2 if m.compress_overlap else 1
        out.append(Spec(block_size, None, _padded(block_size // r * COMPRESSED_FP8_ROW_BYTES)))
        state_block = STATE_BLOCK.get(r, STATE_BLOCK[128])
        out.append(Spec(state_block, widen * r, _padded(state_block * 2 * widen * m.head_dim * F32)))
        if m.indexer is not None and not m.indexer.shared:
            out.append(Spec(block_size, None, _padded(block_size // r * int(indexer_bytes_per_token(m)))))
            out.append(Spec(state_block, widen * r, _padded(state_block * 2 * widen * m.indexer.head_dim * F32)))
    return out


def _least_padding(counts: list[int], low: int) -> int:
    """The layers a group holds at most: from `low` up, the count whose multiples pad `counts` the least (the larger
    on a tie)."""
    best = None
    for d in range(low, max(counts) + 1):
        pad = sum(-c % d for c in counts)
        if best is None or pad < best[0] or pad == best[0]:
            best = (pad, d)
    return best[1] if best else low


def dsv4_layout(model: ModelSpec, block_size: int = DSV4_BLOCK_SIZE, mtp_layers: int = 0) -> Dsv4Layout:
    """vLLM's layout of `model`'s cache in blocks of `block_size` tokens, with `mtp_layers` drafting layers."""
    specs = _specs(model, block_size, mtp_layers)
    first = [s for s in specs if s.window is None]
    sliding: dict[tuple[int, int], list[Spec]] = {}
    for s in specs:
        if s.window is not None:
            sliding.setdefault((s.block, s.window), []).append(s)
    most = [Counter(s.page for s in g).most_common(1)[0][1] for g in [first, *sliding.values()]]
    per_group = _least_padding(most, most[0])
    sizes = sorted({s.page for s in first})
    groups: list[tuple[Spec, ...]] = [tuple(first)]
    for g in sliding.values():
        by_page: dict[int, list[Spec]] = {}
        for s in g:
            padded = Spec(s.block, s.window, next(p for p in sizes if p >= s.page))
            by_page.setdefault(padded.page, []).append(padded)
        rows = list(zip(*by_page.values()))  # one spec of each padded size a row
        n = -(-len(rows) // per_group)
        groups += [tuple(s for row in rows[i::n] for s in row) for i in range(n)]
    widest: Counter = Counter()
    for g in groups:
        for page, k in Counter(s.page for s in g).items():
            widest[page] = max(widest[page], k)
    return Dsv4Layout(tuple(groups), sum(page * k for page, k in widest.items()))
