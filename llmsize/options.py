"""Every command-line option, defined once, with the range or set of values it accepts.

A value outside it is refused where it enters, with the valid range in the message, the same way whichever
command it is given to (`compare --tp -1` exactly as `plan --tp -1`): NaN and infinities are refused for
every float, closed sets (vendors, segments, layer kinds, sort keys, engines, output formats) are closed,
with a did-you-mean. The commands in llmsize/commands/ take their parameters from these aliases only.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Optional

import typer

from llmsize.errors import not_one_of, shown

INT_MAX = 2**31 - 1  # token counts and sizes: what engines take (int32) and what float arithmetic keeps exact
# the schema's closed sets (tests/test_options.py checks they are the schema's, without importing pydantic here)
VENDORS = ("nvidia", "amd", "apple", "intel")
SEGMENTS = ("consumer", "workstation", "datacenter", "edge", "desktop-soc")
MIXER_KINDS = ("full", "sliding", "mla", "compressed", "ssm", "linear", "conv")
ENGINES = ("vllm", "sglang", "trtllm", "llamacpp", "ollama")  # serving engines + llmsize.estimate.llamacpp_memory
# ggml types a llama.cpp KV cache may use (llmsize.estimate.llamacpp_memory.KV_TYPES)
CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
# llmsize.estimate.speed.RUNTIMES and the aliases users type (Ollama and LM Studio run llama.cpp)
RUNTIME_CHOICES = ("vllm", "sglang", "trtllm", "llamacpp", "mlx", "gpt-fast", "ollama", "lmstudio")
EMIT_ENGINES = ("vllm", "sglang", "llama-server", "ollama")
GPU_SORT_KEYS = ("bandwidth", "memory", "year", "id")
COMPARE_SORT_KEYS = ("ceiling_tok_s", "expected_tok_s", "aggregate_tok_s", "bandwidth_gb_s", "tok_s_per_w",
                     "tok_s_per_kcurrency", "fits", "cards", "memory_gib", "max_context_tokens", "max_sequences",
                     "ttft_s", "expected_ttft_s", "price", "cost", "gpu")
COMPARE_FORMATS = ("table", "json", "csv", "markdown", "html")
SCOPES = ("linear", "experts", "mlp", "all")


def int_range(lo: int, hi: int = INT_MAX):
    """A callback refusing an integer outside [lo, hi]."""
    def check(value):
        if value is not None and not lo <= value <= hi:
            raise typer.BadParameter(f"`{shown(value)}` is not an integer from {lo:,} to {hi:,}")
        return value
    return check


MIN_MEMORY_GB = 0.1  # --memory-gb, --wired-limit-gb: below it no model's buffers fit, and the figures print as 0


def float_range(lo: float, hi: float, lo_open: bool = False, hi_open: bool = False):
    """A callback refusing NaN, infinities and a float outside [lo, hi] (open at lo with lo_open, at hi with
    hi_open)."""
    def check(value):
        if value is None:
            return value
        if (not math.isfinite(value) or value > hi or value < lo or (lo_open and value == lo)
                or (hi_open and value == hi)):
            left, right = "(" if lo_open else "[", ")" if hi_open else "]"
            raise typer.BadParameter(f"`{shown(value)}` is not a finite number in {left}{lo:g}, {hi:g}{right}")
        return value
    return check


def duration(flag: str):
    """A callback reading `2s` or `500ms` into seconds. The unit is required: a bare `33` for a 33 ms TPOT
    target would be read as 33 s and size a fleet a thousand times too small."""
    def check(value):
        if value is None:
            return None
        if re.fullmatch(r"\s*[\d.]+(?:e-?\d+)?\s*", str(value).lower()):
            bare = value.strip()
            if re.fullmatch(r"[0.]+(?:e-?\d+)?", bare):  # a zero, with or without a unit, is no target
                raise typer.BadParameter(f"`{shown(value)}` is no target: give a duration above 0, such as 2s or 33ms")
            raise typer.BadParameter(f"`{shown(value)}` has no unit: give {bare}ms or {bare}s")
        m = re.fullmatch(r"\s*([\d.]+(?:e-?\d+)?)\s*(ms|s)\s*", str(value).lower())
        try:
            seconds = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1) if m else None
        except ValueError:
            seconds = None
        if seconds is None or not math.isfinite(seconds) or not 0 < seconds <= 86400:
            raise typer.BadParameter(f"`{shown(value)}` is not a duration such as 2s or 33ms (more than 0, at "
                                     "most a day)")
        return seconds
    return check


def choice(values: tuple[str, ...], synonyms: dict[str, str] | None = None, why_not: dict[str, str] | None = None):
    """A callback accepting one of `values` (case-insensitive), refusing anything else with not_one_of, or with
    `why_not`'s reason where the value names something real that the option does not offer."""
    def check(value):
        if value is None:
            return value
        v = value.strip().lower()
        if v not in values:
            if why_not and v in why_not:
                raise typer.BadParameter(f"`{v}`: {why_not[v]}; it takes {', '.join(values)}")
            raise typer.BadParameter(not_one_of(value, values, synonyms))
        return v
    return check


# engines a launch line is not written for, and why (plan --emit, fleet --emit)
NO_LAUNCH_LINE = {e: "TensorRT-LLM's launch lines are not written here (--runtime trtllm sizes for it)"
                  for e in ("trtllm", "tensorrt-llm", "tensorrt_llm", "trt-llm")}


def _opt(*names: str, help: str, callback=None, **kw):
    return typer.Option(*names, help=help, callback=callback, **kw)


# ----------------------------------------------------------------------------------------- shared by commands

ModelArg = Annotated[Optional[str], typer.Argument(
    help="Model id or alias (see `llmsize models`), a model folder (config.json + *.safetensors), a config.json "
         "path, or a .gguf file (a split model: its first part).", show_default=False)]
HubOpt = Annotated[Optional[str], _opt("--hub", help="Read ORG/NAME[@REVISION] from the Hugging Face Hub instead: "
                                       "config.json and the safetensors headers only (network, opt-in).",
                                       show_default=False)]
HubFileOpt = Annotated[Optional[str], _opt("--file", help="With --hub: a .gguf file of the repo (the first of its "
                                           "splits): its header and tensor infos only, by range requests.",
                                           show_default=False)]
EstimateOnlyOpt = Annotated[bool, _opt("--estimate-only", help="Plan from config.json even when the safetensors "
                                       "files are incomplete or disagree with it (the report says so first).")]
CatalogOpt = Annotated[Optional[list[Path]], _opt(
    "--catalog", help="Extra catalog folder (holding hardware/ and/or models/); repeatable. Also read from "
    "$LLMSIZE_CATALOG.", show_default=False)]
JsonOpt = Annotated[bool, _opt("--json", help="Print one JSON object instead of tables.")]
PlanFormatOpt = Annotated[str, _opt("--format", help="table, json (as --json) or html (one self-contained page on "
                                    "stdout: the report, key figures, roofline and KV charts).",
                                    callback=choice(("table", "json", "html")))]
GpuOpt = Annotated[str, _opt("--gpu", "-g", help="Card id or alias (see `llmsize gpus`), the name its vendor or "
                              "nvidia-smi gives it (\"NVIDIA H200\"), or `local`: this machine's, detected offline "
                              "(NVML, lspci/sysfs, sysctl).")]
GpusOpt = Annotated[Optional[list[str]], _opt("--gpu", "--gpus", "-g", help="Card id; repeat for several, or give "
                                             "them comma-separated (--gpus h100,h200, as compare takes them).",
                                             show_default=False)]
GpuListOpt = Annotated[Optional[str], _opt("--gpus", help="Comma-separated card ids; default: every card.",
                                           show_default=False)]
_QUANT_HELP = ("Weight format (see `llmsize formats`), or a format per component: "
               "experts=nvfp4-w4a16,attention=fp8,...; default: the model's release format")
QuantOpt = Annotated[Optional[str], _opt("--quant", help=_QUANT_HELP + " (under --runtime ollama or lmstudio the GGUF "
                                         "their library pulls: gguf-q4_k_m, gpt-oss's gguf-mxfp4_moe).")]
# the same option on a command that takes no --runtime (kv, roofline)
QuantNoRuntimeOpt = Annotated[Optional[str], _opt("--quant", help=_QUANT_HELP + ".")]
ScopeOpt = Annotated[Optional[str], _opt("--scope", help="What the format quantizes: linear, experts, mlp or all; "
                                         "default: the release's or the format's.", callback=choice(SCOPES))]
def _one_dtype(value):
    """--kv-dtype names one dtype: a llama.cpp K/V pair of cache types is --cache-type-k / --cache-type-v's. The
    engines' own names for an FP8 cache (fp8_e4m3, fp8_e5m2: quant.KV_DTYPE_ALIASES) are read as fp8."""
    if value is not None and not str(value).strip():  # an empty value was the default silently
        raise typer.BadParameter("it is empty: name a dtype, or drop --kv-dtype for the default")
    if value is not None and "/" in str(value):
        raise typer.BadParameter(f"`{shown(value)}`: llama.cpp's K and V cache types are --cache-type-k and "
                                 "--cache-type-v (with --engine llamacpp)")
    from llmsize.estimate.quant import KV_DTYPE_ALIASES

    return KV_DTYPE_ALIASES.get(str(value).lower(), value) if value is not None else value


KvDtypeOpt = Annotated[str, _opt("--kv-dtype", help="KV cache dtype: bf16, fp16, fp8, nvfp4, int8, fp32 (plan's and "
                                                     "fleet's default: the runtime's, fp16 under llama.cpp and MLX, "
                                                     "else bf16; the other commands': bf16).", callback=_one_dtype)]
LeversOpt = Annotated[bool, _opt("--levers", help="The lever table: each efficiency lever that applies (weight format, "
                                 "KV dtype and policy, batching, speculative decoding, partial offload, more cards, "
                                 "disaggregation, other architectures) as the plan its command gives, before and "
                                 "after, with its caveat.")]
LanguageModelOnlyOpt = Annotated[bool, _opt("--language-model-only", help="Serve a multimodal checkpoint's text "
                                           "alone (vLLM's and SGLang's --language-model-only): its vision and audio "
                                           "towers are not loaded, vLLM profiles no encoder and SGLang takes no "
                                           "multimodal margin.")]
NoFlashAttnOpt = Annotated[bool, _opt("--no-flash-attn", help="Attention without FlashAttention: the prompt's score "
                                     "matrix (heads x prompt x prompt x 4 B, a layer at a time) is held beside the "
                                     "cache and moved in memory (llama.cpp's -fa off).")]
KvPolicyOpt = Annotated[Optional[str], _opt("--kv-policy", help="What-if cap on the tokens each layer caches: "
                                            "streaming:WINDOW+SINKS (StreamingLLM) or budget:N (H2O/SnapKV eviction).",
                                            show_default=False)]
DEFAULT_CONTEXT = 4096  # --context without one
_CONTEXT_HELP = "Tokens per sequence (prompt + output) for the KV cache and decode"
_OLLAMA_CONTEXT = ("Ollama's own by the card's memory, 4k under 23 GiB, 32k to 47 GiB, 256k above, the model's "
                   "limit at most")
# one option, one range; its help says what it means under each command's own options
ContextOpt = Annotated[Optional[int], _opt("--context", help=f"{_CONTEXT_HELP}. Default: {DEFAULT_CONTEXT}.",
                                           callback=int_range(1), show_default=False)]
PlanContextOpt = Annotated[Optional[int], _opt("--context", help=f"{_CONTEXT_HELP}; under --engine llamacpp "
                                               "llama.cpp's -c, which its --parallel slots share (each holds c / np "
                                               "unless --kv-unified); under ollama num_ctx, each slot's. Default: "
                                               f"{DEFAULT_CONTEXT} (--engine ollama: {_OLLAMA_CONTEXT}).",
                                               callback=int_range(1), show_default=False)]
FitContextOpt = Annotated[Optional[int], _opt("--context", help=f"{_CONTEXT_HELP}. Default: {DEFAULT_CONTEXT} "
                                              f"(--runtime ollama: {_OLLAMA_CONTEXT}).", callback=int_range(1),
                                              show_default=False)]
BatchOpt = Annotated[int, _opt("--batch", help="Sequences decoded together.", callback=int_range(1, 2**20))]
PromptOpt = Annotated[Optional[int], _opt("--prompt", help="Prompt tokens for time to first token; default: "
                                          "--context.", callback=int_range(1))]
UsersOpt = Annotated[int, _opt("--users", help="Concurrent sequences (capped by what the cache holds).",
                               callback=int_range(1, 2**24))]
GpuUtilOpt = Annotated[float, _opt("--gpu-util", help="Share of VRAM the engine may use, in (0, 1].",
                                   callback=float_range(0, 1, lo_open=True))]
OverheadOpt = Annotated[Optional[float], _opt("--overhead-gib", help="Runtime overhead per card (activations, CUDA "
                                              "graphs, allocator), GiB; default 1.5, and under llama.cpp its own "
                                              "buffers (its ledger's compute buffer and --fit's 1 GiB margin).",
                                              callback=float_range(0, 65536))]
ComputeOpt = Annotated[Optional[str], _opt("--compute", help="Compute precision for FLOP time: fp32, tf32, bf16, "
                                           "fp16, fp8, int8, fp4; default: the format's native one if the card has "
                                           "it, else bf16.")]
TpOpt = Annotated[int, _opt("--tp", help="Tensor-parallel cards (splits heads, MLPs and the KV cache).",
                            callback=int_range(1, 1024))]
TpAutoOpt = Annotated[Optional[int], _opt("--tp", help="Tensor-parallel cards for every row; default: 1, or the "
                                          "fewest cards that hold the model.", callback=int_range(1, 1024),
                                          show_default=False)]
PpOpt = Annotated[Optional[int], _opt("--pp", help="Pipeline stages (splits the layers); default 1, or --nodes.",
                                      callback=int_range(1, 1024), show_default=False)]
NodesOpt = Annotated[Optional[int], _opt("--nodes", help="Nodes: one pipeline stage per node, --tp within each "
                                         "(sets --pp).", callback=int_range(1, 1024), show_default=False)]
NodeLinkOpt = Annotated[float, _opt("--node-link-gb-s", help="Bandwidth between nodes per GPU and direction, GB/s "
                                    "(400 Gb/s NIC = 50).", callback=float_range(0.01, 1e6))]
VendorOpt = Annotated[Optional[str], _opt("--vendor", help="Only this vendor: " + ", ".join(VENDORS) + ".",
                                          callback=choice(VENDORS))]
SegmentOpt = Annotated[Optional[str], _opt("--segment", help="Only this segment: " + ", ".join(SEGMENTS) + ".",
                                           callback=choice(SEGMENTS))]
ChartOutOpt = Annotated[Optional[Path], _opt("--output", "-o", help="Write a .png or .svg (needs the charts extra); "
                                             "default: a terminal chart.", show_default=False)]

# ----------------------------------------------------------------------------------------- plan's engine options

EmitOpt = Annotated[Optional[str], _opt("--emit", help="Print the serving command this plan corresponds to: vllm, "
                                        "sglang, llama-server, or ollama (Modelfile and environment).",
                                        callback=choice(EMIT_ENGINES, why_not=NO_LAUNCH_LINE), show_default=False)]
EngineOpt = Annotated[Optional[str], _opt("--engine", help="Predict this engine's own memory ledger and KV "
                                          "capacity: vllm, sglang or trtllm (--gpu-util is its fraction), or "
                                          "what llamacpp / ollama print at start-up.",
                                          callback=choice(ENGINES), show_default=False)]
MaxModelLenOpt = Annotated[Optional[int], _opt("--max-model-len", help="Engine max model length (with "
                                               "--engine, or --emit's launch line); default: the model's.", callback=int_range(1), show_default=False)]
MaxBatchedTokensOpt = Annotated[Optional[int], _opt("--max-num-batched-tokens", help="vLLM profiling batch "
                                                    "(with --engine); default: vLLM's for the version and card.",
                                                    callback=int_range(1), show_default=False)]
EngineVersionOpt = Annotated[str, _opt("--engine-version", help="vLLM release you run (e.g. 0.20.0), or v1 "
                                       "(the newest read, 0.34), v1-0.20, v0 (< 0.8); with --engine vllm.")]
BlockSizeOpt = Annotated[Optional[int], _opt("--block-size", help="Engine KV block, tokens (with --engine); default: "
                                            "the engine's for its release and card.", callback=int_range(1, 65536),
                                            show_default=False)]
NonTorchOpt = Annotated[Optional[float], _opt("--non-torch-gib", help="vLLM non-torch memory (CUDA context, NCCL, "
                                              "custom all-reduce) per card, GiB (with --engine); default: 0.3, "
                                              "x --tp under vLLM V0, SGLang and TensorRT-LLM (V1 leaves the "
                                              "communicators outside its budget).",
                                              callback=float_range(0, 1024), show_default=False)]
CudagraphOpt = Annotated[Optional[float], _opt("--cudagraph-gib", help="vLLM V1's CUDA-graph reserve, GiB (with "
                                               "--engine vllm); default 0.3.", callback=float_range(0, 1024), show_default=False)]
# llama.cpp's options, by its own long names (--context stays ours for --ctx-size)
ParallelOpt = Annotated[int, _opt("--parallel", help="llama.cpp server slots (-np); Ollama's OLLAMA_NUM_PARALLEL.",
                                  callback=int_range(1, 256))]
KvUnifiedOpt = Annotated[bool, _opt("--kv-unified", help="llama.cpp: one KV buffer shared by every slot (-kvu; "
                                    "llama-server's default when -np is auto).")]
CacheTypeKOpt = Annotated[str, _opt("--cache-type-k", help="llama.cpp K cache type (-ctk): f16, bf16, q8_0, q5_1, "
                                    "q5_0, q4_1, q4_0, iq4_nl, f32.", callback=choice(CACHE_TYPES))]
CacheTypeVOpt = Annotated[str, _opt("--cache-type-v", help="llama.cpp V cache type (-ctv); a quantized one needs "
                                    "flash attention.", callback=choice(CACHE_TYPES))]
FlashAttnOpt = Annotated[Optional[str], _opt("--flash-attn", help="llama.cpp flash attention (-fa): on, off or auto "
                                             "(= on where the GPU runs the attention). Default: on for llamacpp, and "
                                             "for ollama where the card supports it (OLLAMA_FLASH_ATTENTION unset).",
                                             callback=choice(("on", "off", "auto")), show_default=False)]
UbatchOpt = Annotated[int, _opt("--ubatch-size", help="llama.cpp physical batch (-ub), tokens: its compute "
                                "buffers and, in the expected time to first token, its pipeline over layer-split "
                                "cards and its unfused attention's score matrices.",
                                callback=int_range(1, 1 << 20))]
SwaFullOpt = Annotated[bool, _opt("--swa-full", help="llama.cpp: a full-size cache for sliding-window layers.")]
MmprojOpt = Annotated[Optional[str], _opt("--mmproj", help="llama.cpp: load a vision tower beside the GGUF, on the "
                                          "first GPU, its weights and its encoder's compute buffer in the ledger: an "
                                          "mmproj file (its header is read), or a type (f16, bf16, f32, q8_0) for "
                                          "the model's own tower.", show_default=False)]
GpuLayersOpt = Annotated[Optional[int], _opt("--gpu-layers", help="llama.cpp -ngl: layers on the GPU, the output "
                                             "layer first (it counts as one), then the last repeating layers; "
                                             "default: all.",
                                             callback=int_range(0, 1 << 16), show_default=False)]
NCpuMoeOpt = Annotated[int, _opt("--n-cpu-moe", help="llama.cpp: keep the routed experts of the first N layers in "
                                "host memory (computed by the CPU).", callback=int_range(0, 1 << 16))]
CpuMoeOpt = Annotated[bool, _opt("--cpu-moe", help="llama.cpp: keep every layer's routed experts in host memory.")]
HostMemoryOpt = Annotated[Optional[str], _opt("--host-memory", help="System RAM for the offloaded part: a platform "
                                              "(`llmsize hosts`: epyc-9004, ryzen-9000) or TYPE-RATExCHANNELS: "
                                              "DDR5-6000x2, DDR4-3200x8, LPDDR5X-8000x4 (64-bit channels).",
                                              show_default=False)]
HostBandwidthOpt = Annotated[Optional[float], _opt("--host-bandwidth-gb-s", help="System RAM bandwidth, GB/s "
                                                   "(instead of --host-memory).", callback=float_range(0.1, 1e5),
                                                   show_default=False)]
LlamaFitOpt = Annotated[bool, _opt("--fit", help="llama.cpp: place the model as its --fit would with its 1024 MiB "
                                   "margin (experts, then layers, to the host) and give the largest context.")]
HostRamOpt = Annotated[Optional[float], _opt("--host-ram-gib", help="System RAM free for offloaded weights, GiB: "
                                            "placements needing more are dropped.", callback=float_range(0, 1e6),
                                            show_default=False)]
OnePerModelOpt = Annotated[bool, _opt("--one-per-model/--all-formats", help="One row a model, its highest-quality "
                                      "format that fits whole on the card (offloaded where none does); --all-formats: "
                                      "a row for every format that fits.")]
FIT_SORT_KEYS = ("tok_s", "size")
FitSortOpt = Annotated[str, _opt("--sort", help="tok_s: fastest expected first; size: largest model first (with "
                                 "--min-tok-s: the largest that runs fast enough).", callback=choice(FIT_SORT_KEYS))]
MinTokSOpt = Annotated[Optional[float], _opt("--min-tok-s", help="Drop rows expected below this decode tok/s at "
                                             "batch 1 (and rows without an expected figure).",
                                             callback=float_range(0, 1e6, True), show_default=False)]
WiredLimitOpt = Annotated[Optional[float], _opt("--wired-limit-gb", help="Unified memory: what the GPU may use, GB "
                                               "(10^9 B): llama.cpp's recommendedMaxWorkingSetSize line (MB) / 1,000, "
                                               "or a sysctl iogpu.wired_limit_mb of N MiB as N x 0.0010486; "
                                               "default: Metal's share by RAM.",
                                               callback=float_range(MIN_MEMORY_GB, 1e6), show_default=False)]
MemoryGbOpt = Annotated[Optional[float], _opt("--memory-gb", help="The card's memory, or a Mac's or other unified-"
                                              "memory machine's RAM, as its vendor sells it, GB: the catalog's "
                                              "Apple entries are each chip's largest configuration (an M4 Max of 48 "
                                              "GB: --gpu m4-max --memory-gb 48); bandwidth and compute stay the "
                                              "entry's. Default: the catalog's, or this machine's with --gpu local.",
                                              callback=float_range(MIN_MEMORY_GB, 1e6), show_default=False)]
IslOpt = Annotated[str, _opt("--isl", help="Prompt (input) tokens per request: 3000, a lognormal 3000:p95=12000 "
                             "(median and 95th percentile), or a CSV file of lengths (one a line, or a column isl).")]
OslOpt = Annotated[str, _opt("--osl", help="Output tokens per request: 500, 500:p95=2000, or a CSV file of lengths "
                             "(one a line, or a column osl).")]
FleetUsersOpt = Annotated[Optional[int], _opt("--users", help="Concurrent users.", callback=int_range(1, 1 << 30),
                                              show_default=False)]
RateOpt = Annotated[Optional[float], _opt("--rate", help="Requests per second (instead of --users).",
                                          callback=float_range(0, 1e9, True), show_default=False)]
TtftOpt = Annotated[Optional[str], _opt("--ttft", help="Time-to-first-token target of the mean prompt, its wait in "
                                        "the queue included (--simulate replays the p95): 2s, 500ms.",
                                        callback=duration("--ttft"), show_default=False)]
TpotOpt = Annotated[Optional[str], _opt("--tpot", help="Time per output token target, per user: 33ms.",
                                        callback=duration("--tpot"), show_default=False)]
TokSPerUserOpt = Annotated[Optional[float], _opt("--tok-s-per-user", help="Per-user decode target, tok/s (instead "
                                                 "of --tpot).", callback=float_range(0, 1e6, True),
                                                 show_default=False)]
FleetEmitOpt = Annotated[Optional[str], _opt("--emit", help="Print the launch lines of the best row: vllm (disaggregated: "
                                             "under NVIDIA Dynamo) or sglang (its own P/D).",
                                             callback=choice(("vllm", "sglang"), why_not=NO_LAUNCH_LINE),
                                             show_default=False)]
ModeOpt = Annotated[Optional[str], _opt("--mode", help="With --emit: the launch lines of the best card's aggregated or "
                                      "disaggregated configuration (default: the better of the two, its row).",
                                      callback=choice(("aggregated", "disaggregated")), show_default=False)]
FleetFormatOpt = Annotated[str, _opt("--format", help="table, json, csv, markdown or html (one self-contained page "
                                     "on stdout: tables, inline SVG charts, assumptions).",
                                     callback=choice(("table", "json", "csv", "markdown", "html")))]
ParetoOpt = Annotated[bool, _opt("--pareto", help="Chart each card's throughput per GPU against tokens/s per user "
                                 "(terminal; -o FILE.png|svg for an image).")]
SimulateOpt = Annotated[bool, _opt("--simulate", help="Replay each served row's replica under its share of the "
                                   "load and add its TTFT and TPOT p50/p95/p99 (table and JSON; slower).")]
SharedPrefixOpt = Annotated[float, _opt("--shared-prefix", help="Fraction of prompt tokens served from the prefix "
                                       "cache (0 to below 1).", callback=float_range(0, 1, hi_open=True))]
SpecOpt = Annotated[Optional[str], _opt("--spec", help="Speculative decoding: draft=MODEL,k=4,accept=0.7, or "
                                        "mtp=N (the model's own MTP module proposing N tokens a pass; accept "
                                        "defaults to 0.85).", show_default=False)]
TopOpt = Annotated[int, _opt("--top", help="Show this many rows (JSON has them all).", callback=int_range(1, 10000))]
CalibrateOpt = Annotated[Optional[Path], _opt("--calibrate", help="Your own run: a `llmsize measure --save` file, "
                                              "`llama-bench -o json|jsonl|csv` output or a `vllm bench serve "
                                              "--save-result` JSON; it replaces the fitted constants' level for "
                                              "its runtime.", show_default=False)]
RuntimeOpt = Annotated[Optional[str], _opt("--runtime", help="Expected speed in this runtime: vllm, sglang, trtllm, "
                                           "llamacpp, mlx, gpt-fast (ollama and lmstudio: llama.cpp underneath, the "
                                           "GGUF their library pulls without --quant; ollama: its own placement and "
                                           "default context, as --engine ollama). "
                                           "Default: llamacpp for GGUF formats and Apple cards, mlx for MLX "
                                           "formats, else vllm (fleet: vllm, sglang with --emit sglang, llamacpp "
                                           "when every card is Apple's or an Intel Arc).", callback=choice(RUNTIME_CHOICES),
                                           show_default=False)]

BACKEND_CHOICES = ("cuda", "rocm", "metal", "vulkan")
Fp4KernelOpt = Annotated[Optional[str], _opt("--fp4-kernel", help="FP4 weights' kernel under vLLM or SGLang on an "
                                             "NVIDIA card: native (FP4 tensor cores, W4A4: Blackwell) or marlin "
                                             "(weight-only, 16-bit math: vLLM 0.26's --linear-backend marlin). "
                                             "Default: native where the card has FP4 tensor cores, else marlin.",
                                             callback=choice(("native", "marlin")), show_default=False)]
BackendOpt = Annotated[Optional[str], _opt("--backend", help="The GPU backend the runtime runs on: vulkan for "
                                           "llama.cpp's Vulkan build (also Ollama's and LM Studio's) on an NVIDIA "
                                           "or AMD card. Default: the card's own (cuda, rocm, metal; vulkan on "
                                           "Intel Arc cards).",
                                           callback=choice(BACKEND_CHOICES), show_default=False)]

# ----------------------------------------------------------------------------------------- listing and compare

MinMemoryOpt = Annotated[Optional[float], _opt("--min-memory-gib", help="At least this much VRAM, GiB.",
                                               callback=float_range(0, 1e6))]
GpuSortOpt = Annotated[str, _opt("--sort", help="Sort by: " + ", ".join(GPU_SORT_KEYS) + ".",
                                 callback=choice(GPU_SORT_KEYS))]
FamilyOpt = Annotated[Optional[str], _opt("--family", help="Only this family (llama, gemma4, qwen3_moe...).")]
MIXER_SYNONYMS = {"mamba": "ssm", "mamba2": "ssm", "gqa": "full", "mqa": "full", "mha": "full", "swa": "sliding",
                  "window": "sliding", "deltanet": "linear", "gated-deltanet": "linear", "latent": "mla",
                  "kda": "linear", "shortconv": "conv", "short-conv": "conv", "lfm2": "conv",
                  "csa": "compressed", "hca": "compressed"}
MixerOpt = Annotated[Optional[str], _opt("--mixer", help="Only models with this layer kind: " + ", ".join(MIXER_KINDS)
                                         + ".", callback=choice(MIXER_KINDS, MIXER_SYNONYMS))]
MoeOpt = Annotated[Optional[bool], _opt("--moe/--dense", help="Only mixture-of-experts / only dense.",
                                        show_default=False)]
PricesOpt = Annotated[Optional[Path], _opt("--prices", help="YAML of card prices (none are shipped): `currency: EUR`, "
                                           "`prices:` card id -> price of one card (compare's cost; fleet's cost to "
                                           "buy a row's cards), and `hourly:` card id -> price of one card an hour "
                                           "(fleet's cost an hour, a month and a million tokens).", show_default=False)]
CompareSortOpt = Annotated[str, _opt("--sort", help="Column to rank by: " + ", ".join(COMPARE_SORT_KEYS) + ".",
                                     callback=choice(COMPARE_SORT_KEYS))]
CompareFormatOpt = Annotated[str, _opt("--format", help="table, json, csv, markdown or html (one self-contained "
                                       "page on stdout).",
                                       callback=choice(COMPARE_FORMATS))]
MaxBatchOpt = Annotated[int, _opt("--max-batch", help="Decode points at batch 1, 2, 4 ... up to this.",
                                  callback=int_range(1, 2**20))]
KvUsersOpt = Annotated[int, _opt("--users", help="Sequences whose caches add up (the seeds' 'many users').",
                                 callback=int_range(1, 2**24))]
MaxContextOpt = Annotated[Optional[int], _opt("--max-context", help="Right end of the context axis; default: the "
                                              "model's max_position_embeddings.", callback=int_range(2),
                                              show_default=False)]

# ----------------------------------------------------------------------------------------- import

ImportOutOpt = Annotated[Optional[Path], _opt("--output", "-o", help="Write the catalog entry here (e.g. "
                                              "mycat/models/NAME.yaml); default: print it.", show_default=False)]
IdOpt = Annotated[Optional[str], _opt("--id", help="Catalog id (lower-case letters, digits, '.' and '-'); default: "
                                      "from the file name of -o, else from the model's name.")]
ForceOpt = Annotated[bool, _opt("--force", help="Replace the output file if it exists.")]

# ----------------------------------------------------------------------------------------- measure

MEASURE_MAX_CONTEXT = 262_144  # Gemma 4's max_position_embeddings
MeasureQuantOpt = Annotated[Optional[str], _opt("--quant", help="nvfp4 (Triton dequantizing GEMV, weights packed; the "
                                                "default) or bf16 (cuBLAS baseline). With --server: the served "
                                                "weights' format for plan's figures (see `llmsize formats`); default: "
                                                "the GGUF type in the served file's name, else the model's release "
                                                "format.", show_default=False)]
MeasureContextOpt = Annotated[int, _opt("--context", help="Prompt tokens prefilled before decoding.",
                                        callback=int_range(1, MEASURE_MAX_CONTEXT))]
TokensOpt = Annotated[int, _opt("--tokens", help="Decode steps timed (with --server: output tokens a request, "
                                 "at least 2, an inter-token gap needing two).", callback=int_range(1, 100_000))]
MeasureBatchOpt = Annotated[int, _opt("--batch", help="Sequences decoded together (1-256; above 16, NVFP4 needs "
                                      "--gemv auto or words).", callback=int_range(1, 256))]
DeviceOpt = Annotated[str, _opt("--device", help="cuda, or cpu for a small Gemma-4-shaped model anyone can run.",
                                callback=choice(("cuda", "cpu")))]
CheckpointOpt = Annotated[Optional[Path], _opt("--checkpoint", help="Local Gemma 4 checkpoint folder: NVFP4 "
                                               "(compressed-tensors or ModelOpt) or bf16 (quantized while loading); "
                                               "default: random weights of the exact shapes.", show_default=False)]
GpuIndexOpt = Annotated[int, _opt("--gpu-index", help="Which GPU (NVML/CUDA index).", callback=int_range(0, 255))]
WarmupOpt = Annotated[int, _opt("--warmup", help="Untimed decode steps first (compile, autotune).",
                                callback=int_range(1, 10_000))]
SeedOpt = Annotated[int, _opt("--seed", help="Seed for random weights and the prompt.",
                              callback=int_range(0, 2**32 - 1))]
ProbeOpt = Annotated[bool, _opt("--probe/--no-probe", help="Time a read-bandwidth probe first.")]
GemvOpt = Annotated[str, _opt("--gemv", help="NVFP4 kernel: auto (words if it checks out on the card, else triton), "
                              "words (fp16x2 at batch 1, tensor cores for 2-256 rows), triton (byte-wise, the "
                              "readable fallback, batch 1-16).")]
CompileOpt = Annotated[bool, _opt("--compile/--no-compile", help="torch.compile the decode step before capturing it "
                                  "(fewer, fused kernels between the GEMVs).")]
FusedOpt = Annotated[Optional[bool], _opt("--fused/--no-fused", help="The work between the GEMVs in two to five "
                                          "Triton kernels per layer; default: on a GPU, once they reproduce the "
                                          "eager step there.", show_default=False)]
FallbackOpt = Annotated[bool, _opt("--fallback", help="Where a kernel fails its self-check on the card, measure with "
                                  "the slower path and say so (default: stop, naming the kernel).")]
SaveOpt = Annotated[Optional[Path], _opt("--save", help="Also write the full result as JSON to this file (a new "
                                         "file; --force to replace one).", show_default=False)]


# ----------------------------------------------------------------------------------------- measure --server


MAX_STREAMS = 1024  # measure --server's largest concurrency level


def levels(text: str) -> tuple[int, ...]:
    """`1,4,16` -> (1, 4, 16): sorted, once each, each 1-1024. Raises ValueError with the reason."""
    out = set()
    for part in str(text).split(","):
        p = part.strip()
        if not re.fullmatch(r"[0-9]{1,5}", p) or not 1 <= int(p) <= MAX_STREAMS:  # (ASCII: int() refuses ²)
            raise ValueError(f"`{shown(p, 20)}` is not a number of streams from 1 to {MAX_STREAMS}")
        out.add(int(p))
    return tuple(sorted(out))


def concurrency_levels(value):
    """--concurrency through levels(), refused in one line otherwise."""
    if value is None or isinstance(value, tuple):
        return value
    try:
        return levels(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None


ServerOpt = Annotated[Optional[str], _opt("--server", help="Measure a running OpenAI-compatible server at this URL "
                                          "instead (vLLM, SGLang, TensorRT-LLM, llama-server, Ollama, LM Studio): "
                                          "streamed completions, TTFT, inter-token latency and aggregate tok/s per "
                                          "--concurrency level. Network to that URL only.", show_default=False)]
ServerModelOpt = Annotated[Optional[str], _opt("--model", help="With --server: the served model to request; "
                                               "default: the server's only model.", show_default=False)]
PlanModelOpt = Annotated[Optional[str], _opt("--plan-model", help="With --server: the catalog model plan's figures "
                                             "are for; default: the served name or Hugging Face repo, matched in "
                                             "the catalog.", show_default=False)]
ConcurrencyOpt = Annotated[Optional[str], _opt("--concurrency", help="With --server: streams at once, "
                                               "comma-separated levels (each 1-1024), e.g. 1,4,16.",
                                               callback=concurrency_levels)]
RoundsOpt = Annotated[int, _opt("--rounds", help="With --server: requests each stream sends one after another at "
                                "each level.", callback=int_range(1, 1000))]
ServerTimeoutOpt = Annotated[float, _opt("--timeout", help="With --server: seconds without data before a request "
                                         "counts as stalled.", callback=float_range(0.1, 86400))]
ApiKeyOpt = Annotated[Optional[str], _opt("--api-key", help="With --server: sent as a Bearer token.",
                                          envvar="LLMSIZE_API_KEY", show_default=False)]
