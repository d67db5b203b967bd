"""What a serving engine does by default with a replica's requests: how many it runs at once (its batch cap) and how
many prompt tokens one forward takes (its prefill chunk). Fleet sizes a replica with these, as the engine launched
without tuning flags would run it; each figure is read from the engine's source, cited where it is set.

    vLLM (vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults, OpenAI server; estimate/engines.py
        v1_defaults, which the vLLM ledger uses too; the newest release read): a card of >= 160 GiB runs
        max_num_seqs 1024 and max_num_batched_tokens 16384 (from 0.28.0), one of >= 70 GiB that is not an A100
        1024 and 8192; any other card 256 and 2048.
    SGLang (0.5.23, sglang/srt/arg_groups/memory_hook.py, chunked_prefill_size by the card's nvidia-smi total):
        2048 under 20 GiB, 4096 under 60 GiB, 8192 under 160 GiB, else 16384 (the 20-35 GiB band moved from 2048 in
        0.5.20); its running requests are bounded by the cache pool, not by a default cap. Its mem_fraction_static
        when not given: sglang_defaults.sglang_mem_fraction.
    TensorRT-LLM (tensorrt_llm/bench/build/tuning.py, finetune_setting, what trtllm-bench and its published
        tables use): batch = min(requests the cache holds, 4096) / pp rounded up (to 32 under 256, 128 under 1,024,
        else 256; at least 64); tokens = min(batch x (1 + ISL / OSL), 32768) rounded up (to 256 under 4,096,
        512 under 8,192, else 1,024; at least 2,048). Both are a micro-batch's: with pp stages it keeps pp
        micro-batches in flight (estimate/replica.replica_timing), so a replica runs pp x batch requests.
    Other runtimes: no cap, 8192 tokens a forward.

What a running request holds in the cache: TensorRT-LLM's default capacity scheduler (GUARANTEED_NO_EVICT,
tensorrt_llm/llmapi/llm_args.py SchedulerConfig) admits a request only when blocks for its whole ISL + OSL are
free, so a replica holds as many requests as ISL + OSL tokens each fit; vLLM and SGLang admit on the blocks in use
(and preempt when they run out), so at a steady state a request holds ISL + OSL / 2 on average.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmsize.catalog.schema import GpuSpec
from llmsize.estimate.sglang_defaults import sglang_chunked_prefill

DEFAULT_PREFILL_TOKENS = 8192


@dataclass(frozen=True)
class ServingDefaults:
    max_batch: int | None  # requests a replica runs at once, all its micro-batches; None: as many as the cache holds
    prefill_tokens: int  # prompt tokens one forward (one micro-batch's) takes


def _round_up(x: float, step: int) -> int:
    return step * math.ceil(x / step)


def _trtllm(kv_requests: int, isl: int, osl: int, pp: int) -> ServingDefaults:
    raw_bs = min(kv_requests, 4096) / pp
    bs = (max(64, _round_up(raw_bs, 32)) if raw_bs < 256 else
          _round_up(raw_bs, 128) if raw_bs < 1024 else _round_up(raw_bs, 256))
    raw_tok = min(raw_bs * (1 + isl / max(1, osl)), 32768)
    tok = (max(2048, _round_up(raw_tok, 256)) if raw_tok < 4096 else
           _round_up(raw_tok, 512) if raw_tok < 8192 else _round_up(raw_tok, 1024))
    return ServingDefaults(bs * pp, tok)


def held_context_tokens(runtime: str, isl: int, osl: int) -> int:
    """Cache tokens a running request holds when the engine counts how many it admits."""
    return isl + osl if runtime == "trtllm" else isl + osl // 2


def serving_defaults(runtime: str, gpu: GpuSpec, kv_requests: int, isl: int, osl: int,
                     pp: int = 1, engine_version: str = "v1", model=None) -> ServingDefaults:
    """The engine's defaults for one replica on `gpu` whose cache holds `kv_requests` requests of isl + osl
    (`engine_version`: vLLM's, vllm_release.vllm_profile's names or a release; v1 the newest read; `model`, where
    its own raises vLLM's batch: vllm_release.prefix_lm_floor)."""
    if runtime == "vllm":
        from llmsize.estimate.engines import cuda_total_bytes
        from llmsize.estimate.vllm_release import effective_release, v1_defaults

        tokens, seqs = v1_defaults(gpu, cuda_total_bytes(gpu)[0], offline=False,
                                   release=effective_release(engine_version), model=model)
        return ServingDefaults(seqs, tokens)
    if runtime == "sglang":
        return ServingDefaults(None, sglang_chunked_prefill(gpu))
    if runtime == "trtllm":
        return _trtllm(kv_requests, isl, osl, pp)
    return ServingDefaults(None, DEFAULT_PREFILL_TOKENS)
