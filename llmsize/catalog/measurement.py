"""The speed dataset: published measurements under measurements/, one YAML file per source.

Every row is one figure copied as printed (tok/s or ms per token), with the verbatim excerpt it was copied
from; the catalog ids (card_id, model_id) say which catalog entry the printed names are, null where the catalog
has no such entry. Read by benchmarks/fit_speed.py and the tests, never by `plan`.
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from llmsize.catalog.schema import Scope, Strict
from llmsize.errors import CatalogError
from llmsize.files import read_yaml

RuntimeId = Literal["vllm", "sglang", "trtllm", "llamacpp", "mlx", "gpt-fast"]


class Source(Strict):
    url: str = Field(pattern=r"^https?://")
    title: str
    published: date | str | None = None
    where: str
    via: str | None = Field(None, description="when the page was read through a copy: which, and how checked")


class Row(Strict):
    runtime_version: str | None = None
    backend: str | None = None
    card: str
    card_id: str | None = None
    card_any_of: list[str] | None = Field(
        None, min_length=2, description="catalog ids the printed card can be when the source leaves the variant "
        "unsaid (a chip sold with several GPU core counts); used only where the figure does not depend on which")
    gpus: int = Field(1, strict=True, ge=1, le=1024)
    split: Literal["tensor", "pipeline", "layer", "row", "expert"] | None = None
    model: str
    model_id: str | None = None
    shape_of: str | None = Field(None, description="catalog id of a model with the same tensor shapes (a fine-tune, "
                                 "or a release of the same architecture), used for bytes when model_id is null")
    format: str
    scope: Scope | None = Field(
        None, description="which weights the checkpoint's recipe quantizes, where its own quantization config says "
        "(hf_quant_config.json's exclude_modules, compressed-tensors' ignore list; cited in `where`); None: the "
        "release's scope for the release format, else the format's default")
    recipe: str | None = Field(
        None, min_length=1, description="the checkpoint's own format per component (COMPONENT=FORMAT,...: a ModelOpt "
        "MIXED_PRECISION export's quantized_layers, cited in `where`), which prices the row in place of `format` "
        "and `scope`")
    kv_dtype: str | None = Field(None, min_length=1, description="the cache dtype the run kept, as the source "
                                 "prints it (--kv-cache-dtype, kv_cache_dtype), where it says one; None: the runtime's "
                                 "default")
    model_size: str | None = None
    params: str | None = None
    test: str
    kind: Literal["decode", "prefill"]
    batch: int = Field(strict=True, ge=1, le=1 << 20)
    throughput: Literal["per_sequence", "aggregate"] | None = Field(
        None, description="what tok_s counts when batch > 1")
    prompt_tokens: int | None = Field(None, strict=True, ge=0, le=1 << 24)
    input_tokens_total: int | None = Field(None, strict=True, gt=0, le=1 << 40, description="a serving benchmark's "
                                           "printed total of prompt tokens over its requests (with `requests`: "
                                           "the mean prompt, when the dataset drew the lengths)")
    output_tokens_total: int | None = Field(None, strict=True, gt=0, le=1 << 40, description="a serving benchmark's "
                                            "printed total of generated tokens over its requests (with `requests`: "
                                            "the mean output, when the dataset drew the lengths)")
    requests: int | None = Field(None, strict=True, gt=0, le=1 << 30, description="the requests those totals count")
    depth_tokens: int | None = Field(None, strict=True, ge=0, le=1 << 24)
    gen_tokens: int | None = Field(None, strict=True, ge=0, le=1 << 24)
    tok_s: float | None = Field(None, strict=True, gt=0, le=1e9)
    ms_per_token: float | None = Field(None, strict=True, gt=0, le=1e6)
    ttft_ms: float | None = Field(None, strict=True, gt=0, le=1e8)
    ttft_s: float | None = Field(None, strict=True, gt=0, le=1e5, description="a TTFT the source prints in seconds")
    s_per_token: float | None = Field(None, strict=True, gt=0, le=1e3,
                                      description="a time per output token (TPOT, ITL) the source prints in seconds")
    request_s: float | None = Field(None, strict=True, gt=0, le=1e6, description="a whole request's time the "
                                    "source prints in seconds (vLLM's benchmark_latency: the prompt's prefill and "
                                    "gen_tokens steps of the batch), with rate_includes_prefill")
    rate_includes_prefill: bool = Field(False, strict=True, description="tok_s (or request_s) is the generated "
                                        "tokens over the whole request's time, the prompt's prefill included")
    verbatim: str | list[str] = Field(description="the exact excerpt(s) holding the figures")
    where: str | None = None
    url: str | None = Field(None, pattern=r"^https?://", description="the row's own post or comment, if not the file's")
    printed: dict[str, str | int | float] | None = Field(None, description="other columns of the same line")

    @model_validator(mode="after")
    def _figure(self):
        if self.recipe is not None:
            from llmsize.errors import LlmsizeError
            from llmsize.estimate.quant import quant_format

            if "=" not in self.recipe:
                raise ValueError("recipe is COMPONENT=FORMAT,... (a single format goes in `format`)")
            try:
                quant_format(self.recipe)
            except LlmsizeError as e:
                raise ValueError(e.message) from None
            if self.scope is not None:
                raise ValueError("a recipe names each component's format: no scope beside it")
        if self.card_id and self.card_any_of:
            raise ValueError("card_id names the card; card_any_of is for a card the source leaves ambiguous")
        if all(v is None for v in (self.tok_s, self.ms_per_token, self.ttft_ms, self.ttft_s, self.s_per_token,
                                   self.request_s)):
            raise ValueError("a row needs tok_s, ms_per_token or s_per_token, ttft_ms or ttft_s, or request_s")
        if self.request_s is not None and not (self.kind == "decode" and self.gen_tokens and self.rate_includes_prefill
                                               and self.tok_s is None and self.ms_per_token is None
                                               and self.s_per_token is None):
            raise ValueError("request_s is a decode row's whole request: with gen_tokens, rate_includes_prefill, "
                             "and no other decode figure")
        if self.ttft_ms is not None and self.ttft_s is not None or \
                self.ms_per_token is not None and self.s_per_token is not None:
            raise ValueError("give a figure in the unit the source prints it, once (ms or s)")
        if (self.input_tokens_total is None and self.output_tokens_total is None) != (self.requests is None):
            raise ValueError("input_tokens_total or output_tokens_total and requests come together (a mean is "
                             "their ratio)")
        if self.input_tokens_total is not None and self.prompt_tokens is not None:
            raise ValueError("give prompt_tokens or the printed input_tokens_total and requests, not both")
        text = " | ".join(self.verbatim) if isinstance(self.verbatim, list) else self.verbatim
        for v in (self.tok_s, self.ms_per_token, self.ttft_ms, self.ttft_s, self.s_per_token, self.request_s,
                  self.input_tokens_total, self.output_tokens_total, self.requests):
            if v is not None and not figure_in(v, text):
                raise ValueError(f"figure {v} does not appear in the verbatim excerpt {self.verbatim!r}")
        return self

    @property
    def prompt_length(self) -> int | None:
        """The prompt's tokens: as printed, or the mean of a benchmark that drew them (total / requests)."""
        if self.prompt_tokens is not None:
            return self.prompt_tokens
        if self.input_tokens_total is not None and self.requests:
            return max(1, round(self.input_tokens_total / self.requests))
        return None

    @property
    def gen_length(self) -> int | None:
        """The generated tokens a request made: the mean of a benchmark that drew them (output_tokens_total /
        requests), else gen_tokens as set (a drawn run's gen_tokens is its ceiling)."""
        if self.output_tokens_total is not None and self.requests:
            return max(1, round(self.output_tokens_total / self.requests))
        return self.gen_tokens

    @property
    def context_tokens(self) -> int:
        """Mean context over the measured decode (prompt + depth + half the generated tokens), or the prompt."""
        base = (self.prompt_length or 0) + (self.depth_tokens or 0)
        if self.kind == "prefill":
            return max(base, 1)
        return max(base + (self.gen_length or 0) // 2, 1)

    @property
    def step_time_s(self) -> float | None:
        """Seconds per decode step (one token of each sequence), or per prompt for prefill; None if the row
        does not say whether its tok/s is per sequence or aggregate."""
        if self.kind == "prefill":
            if not self.prompt_length:
                return None
            if self.tok_s:
                return self.prompt_length / self.tok_s
            ttft = self.ttft_s if self.ttft_s is not None else self.ttft_ms / 1000 if self.ttft_ms else None
            return ttft if ttft and self.batch == 1 else None
        if self.request_s is not None:  # each sequence of the batch generates gen_tokens in the request's time
            return self.request_s / self.gen_tokens
        if self.tok_s is None and self.ms_per_token is None and self.s_per_token is None:
            return None
        if self.ms_per_token is not None:
            return self.ms_per_token / 1000
        if self.s_per_token is not None:
            return self.s_per_token
        if self.batch == 1 or self.throughput == "per_sequence":
            return 1 / self.tok_s
        if self.throughput == "aggregate":
            return self.batch / self.tok_s
        return None

    @property
    def tok_s_per_sequence(self) -> float | None:
        t = self.step_time_s
        return None if t is None or self.kind == "prefill" else 1 / t


def figure_in(value: float, text: str) -> bool:
    """Whether `value` is printed in `text` (as written: 93.86, 1,401.85, 94.0 or 94)."""
    numbers = {float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", text)}
    return any(abs(n - value) <= 1e-9 * max(1.0, abs(value)) for n in numbers)


class MeasurementFile(Strict):
    source: Source
    runtime: RuntimeId
    rows: list[Row] = Field(min_length=1)


def validated(cls, path: Path, what: str, hint: str):
    """`path`'s YAML as `cls`, or a one-line CatalogError naming the first bad field."""
    try:
        return cls.model_validate(read_yaml(path, what))
    except ValidationError as e:
        first = e.errors()[0]
        raise CatalogError(f"{path}: `{'.'.join(map(str, first['loc']))}`: {first['msg']}", hint) from None


def load_file(path: Path) -> MeasurementFile:
    return validated(MeasurementFile, path, "measurement file",
                     "Fix the row: figures are copied as printed, with their verbatim excerpt.")


def dataset_dir() -> Path:
    """measurements/ of a source checkout (the dataset is not shipped in the wheel)."""
    return Path(__file__).resolve().parent.parent.parent / "measurements"


def load_dataset(folder: Path | None = None) -> dict[str, MeasurementFile]:
    folder = folder or dataset_dir()
    if not folder.is_dir():
        raise CatalogError(f"No measurements folder at {folder}.", "Run from a source checkout of llmsize.")
    return {p.stem: load_file(p) for p in sorted(folder.glob("*.yaml"))}


# Printed weight formats -> llmsize format ids. A GGUF file type (llama-bench prints "Q4_K - Medium") maps to the
# file llama-quantize writes for it (a type per tensor, llmsize.estimate.gguf_mix).
FORMAT_IDS = {
    "q4_0": "gguf-q4_0", "q4_1": "gguf-q4_1", "q5_0": "gguf-q5_0", "q5_1": "gguf-q5_1", "q8_0": "gguf-q8_0",
    "q2_k": "gguf-q2_k", "q2_k_m": "gguf-q2_k", "q2_k_s": "gguf-q2_k_s",
    # the i-quants as llama.cpp names them (llama_model_ftype_name: "IQ2_XXS - 2.0625 bpw", IQ3_M's "IQ3_S mix -
    # 3.66 bpw")
    **{t: f"gguf-{t}" for t in ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq2_m", "iq3_xxs", "iq3_xs",
                                "iq3_s", "iq3_m")},
    "iq3_s mix": "gguf-iq3_m",
    "q3_k_s": "gguf-q3_k_s", "q3_k_m": "gguf-q3_k_m", "q3_k_l": "gguf-q3_k_l",
    "q4_k_s": "gguf-q4_k_s", "q4_k_m": "gguf-q4_k_m", "q5_k_s": "gguf-q5_k_s", "q5_k_m": "gguf-q5_k_m",
    "q6_k": "gguf-q6_k", "iq4_xs": "gguf-iq4_xs", "iq4_nl": "gguf-iq4_nl", "mxfp4_moe": "gguf-mxfp4_moe",
    "f16": "fp16", "fp16": "fp16", "bf16": "bf16", "f32": "fp32", "base": "bf16", "mxfp4": "mxfp4",
    "fp8": "fp8", "int8": "int8", "8-bit": "int8", "nvfp4": "nvfp4", "awq": "awq-int4-g128", "awq int4": "awq-int4-g128", "awq 4-bit": "awq-int4-g128",
    "gptq": "gptq-int4-g128", "gptq-int4": "gptq-int4-g128", "gptq-int8": "gptq-int8-g128",
    "awq-int4": "awq-int4-g128",
    # Intel's AutoRound exports GPTQ's layout (packed INT4, FP16 scale and packed zero per group of 128 by default),
    # which vLLM runs through its GPTQ-Marlin kernels
    "autoround int4": "gptq-int4-g128", "int4 w4a16 (autoround)": "gptq-int4-g128",
}
RUNTIME_FORMAT_IDS = {  # runtime-specific spellings
    "gpt-fast": {"8-bit": "int8", "int8": "int8", "4-bit": "int4-g32-zp", "int4": "int4-g32-zp",
                 "4-bit (g=32)": "int4-g32-zp", "int4 g=32": "int4-g32-zp"},
    "llamacpp": {"mxfp4": "gguf-mxfp4_moe", "q4_k": "ggml-q4_k"},  # a GGUF's "MXFP4" is the MXFP4 MoE file type
    # TensorRT-LLM's FP4 is NVFP4 (its quantization modes: QuantAlgo.NVFP4; the "-FP4" checkpoints it serves, e.g.
    # nvidia/DeepSeek-R1-FP4, are ModelOpt NVFP4)
    "trtllm": {"fp4": "nvfp4"},
    "mlx": {"4-bit": "mlx-4bit", "4bit": "mlx-4bit", "q4": "mlx-4bit", "int4": "mlx-4bit",
            "8-bit": "mlx-8bit", "8bit": "mlx-8bit", "q8": "mlx-8bit", "int8": "mlx-8bit",
            **{k.format(b=b): f"mlx-{b}bit" for b in (2, 3, 5, 6) for k in ("{b}-bit", "{b}bit", "q{b}")},
            # LM Studio's "MLX 4-bit": an mlx-community conversion at mlx_lm.convert's default group of 64
            **{f"mlx {b}-bit": f"mlx-{b}bit" for b in (2, 3, 4, 5, 6, 8)}},
}


def format_id(runtime: str, printed: str) -> str | None:
    key = printed.strip().lower()
    key = re.sub(r"\s*-\s*(medium|small|large)$", lambda m: "_" + m.group(1)[0], key)  # "Q4_K - Medium"
    key = re.sub(r"\s*-\s*[\d.]+\s*bpw$", "", key)  # "IQ4_XS - 4.25 bpw"
    key = {"mxfp4 moe": "mxfp4_moe", "baseline(bfloat16)": "bf16"}.get(key, key)
    found = RUNTIME_FORMAT_IDS.get(runtime, {}).get(key) or FORMAT_IDS.get(key)
    bare = re.sub(r"\s*\([^()]*\)$", "", key)  # "AWQ (4-bit quantization)": a gloss after the name
    return found or (format_id(runtime, bare) if bare != key else None)


SIZE_UNITS = {"gib": 2**30, "gb": 10**9, "mib": 2**20, "mb": 10**6, "bytes": 1}


def printed_bytes(text: str | None) -> float | None:
    """'3.56 GiB' -> bytes ('19704064512 bytes': llama-bench's -o csv and json columns); None when absent or not a
    size."""
    m = re.fullmatch(r"\s*([\d.]+)\s*(GiB|GB|MiB|MB|bytes)\s*", text or "", re.IGNORECASE)
    return float(m.group(1)) * SIZE_UNITS[m.group(2).lower()] if m else None
