"""Catalog schemas: what a card and a model may look like. pydantic v2, extra="forbid" everywhere,
so a typo such as `num_kv_head:` fails loudly with the file and the key.

Model dimensions are named as in Hugging Face config.json (hidden_size, num_key_value_heads, ...).
A model is embeddings + ordered layer groups + lm_head; each group has a count, a mixer (attention,
MLA, SSM or linear attention, or none) and an MLP (dense, MoE, or none).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from llmsize.catalog.recipe import recipe_text
from llmsize.errors import LlmsizeError

GiB = 2**30
INT32_MAX = 2**31 - 1
# a PCIe link in a card's interconnect text ("PCIe 5.0 x16", "PCIe Gen4 x8"): its generation and lanes (read by
# llmsize.estimate.parallel, checked here)
PCIE_LINK = re.compile(r"PCIe\s*(?:Gen)?\s*(\d)(?:\.0)?\s*x(\d+)")
# A peak in TFLOPS: finite, at least a GFLOPS (pydantic's strict float: a bool or a string is no number); the
# floors on rates keep every time an estimate divides by them finite (a subnormal rate would overflow to inf)
Tflops = Annotated[float, Field(strict=True, ge=1e-3, le=1e6)]


class Strict(BaseModel):
    """Every entry: unknown keys are errors; numbers are numbers (strict: `true` is not 1, "8" is not 8), finite
    (no .inf or .nan) and within bounds generous enough for any real model or card, so no figure overflows an
    estimate downstream."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, allow_inf_nan=False)


# --------------------------------------------------------------------------- hardware

Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")


class DenseTflops(Strict):
    """Dense peak per precision, TFLOPS (int8 in TOPS). Never the 2:4-sparse figure. null = unknown."""

    fp32: Tflops | None = None
    tf32: Tflops | None = None
    bf16: Tflops | None = None
    fp16: Tflops | None = None
    fp8: Tflops | None = None
    int8: Tflops | None = None
    fp4: Tflops | None = None

    def get(self, precision: str) -> float | None:
        return getattr(self, precision)


class GpuSpec(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    vendor: Literal["NVIDIA", "AMD", "Apple", "Intel"]
    segment: Literal["consumer", "workstation", "datacenter", "edge", "desktop-soc"]
    aliases: list[str] = []
    memory_size: float = Field(strict=True, le=1e6, gt=0, description="capacity as the vendor writes it")
    memory_vendor_unit: Literal["GB", "GiB"] = Field(description="the unit the vendor prints")
    memory_counts_as: Literal["GiB", "GB"] = Field(
        "GiB",
        description="how llmsize turns memory_size into bytes: DRAM capacities are binary, so a "
        "vendor's '16 GB' card holds 16 GiB of devices",
    )
    memory_reported_bytes: int | None = Field(
        None, strict=True, gt=0, le=2**50, description="total as the driver reports it (NVML/torch), when sourced"
    )
    memory_cuda_bytes: int | None = Field(
        None, strict=True, gt=0, le=2**50,
        description="total as CUDA reports it (cudaMemGetInfo, torch.cuda.mem_get_info): what vLLM multiplies by "
        "gpu_memory_utilization; a little below the NVML total; when sourced"
    )
    memory_type: str | None = None
    bus_width_bits: int | None = Field(None, strict=True, le=2**16, gt=0)
    data_rate_gbps: float | None = Field(None, strict=True, le=1e3, gt=0, description="per-pin Gb/s")
    bandwidth_gb_s: float = Field(strict=True, le=1e6, ge=1, description="vendor peak DRAM bandwidth, decimal GB/s")
    dense_tflops: DenseTflops
    tdp_w: float | None = Field(None, strict=True, le=1e5, gt=0)
    interconnect: str | None = None
    compute_capability: str | None = Field(None, pattern=r"^\d{1,2}\.\d$",
                                           description="NVIDIA's CUDA compute capability (engines pick kernels by it)")
    llvm_target: str | None = Field(None, pattern=r"^gfx[0-9a-f]{3,4}$",
                                    description="AMD's LLVM target name (ROCm builds its kernels per target)")
    year: int = Field(strict=True, ge=2010, le=2030)
    sources: list[str] = Field(min_length=1)
    notes: str | None = None

    @field_validator("aliases")
    @classmethod
    def _lower(cls, v: list[str]) -> list[str]:
        return [a.lower() for a in v]

    @field_validator("interconnect")
    @classmethod
    def _link_rates(cls, v: str | None) -> str | None:
        """A link figure the estimates divide by (llmsize.estimate.parallel reads "NVLink 4: 900 GB/s"): at least
        1 GB/s."""
        for number, unit in re.findall(r"([\d.]+)\s*(TB/s|GB/s)", v or ""):
            try:
                gb_s = float(number) * (1000 if unit == "TB/s" else 1)
            except ValueError:
                raise ValueError(f"`{number} {unit}` is not a rate: write it as 900 GB/s") from None
            if gb_s < 1:
                raise ValueError(f"a link of {number} {unit} is below 1 GB/s: give the link's rate in GB/s")
        for _, lanes in PCIE_LINK.findall(v or ""):
            if int(lanes) < 1:
                raise ValueError(f"a PCIe link of x{lanes} has no lanes: give its width, e.g. PCIe 4.0 x16")
        return v

    @property
    def memory_nominal_bytes(self) -> int:
        unit = GiB if self.memory_counts_as == "GiB" else 10**9
        return int(round(self.memory_size * unit))

    @property
    def memory_bytes(self) -> int:
        """The capacity plan and compare size with, one rule for every card: the vendor's figure read as
        memory_counts_as (DRAM is binary: a "16 GB" card holds 16 GiB of devices). The driver's total, sourced
        for some cards only (memory_reported_bytes), is a little less; mixing the two in one table would
        compare cards on two bases."""
        return self.memory_nominal_bytes

    def with_memory_gb(self, memory_gb: float) -> GpuSpec:
        """This card with the memory a user gives (--memory-gb): a Mac's RAM, where the catalog's Apple entry is
        the chip's largest configuration, or a card sold in several sizes. The size is the vendor's (GB), read as
        every size is (memory_counts_as: DRAM is binary); the driver's and CUDA's totals, of the catalog's size, no
        longer hold and are dropped."""
        return self.model_copy(update={"memory_size": memory_gb, "memory_vendor_unit": "GB",
                                       "memory_reported_bytes": None, "memory_cuda_bytes": None})

    @property
    def memory_driver_bytes(self) -> int:
        """What the driver reports (NVML) where sourced, else the nominal capacity: for matching a live card."""
        return self.memory_reported_bytes or self.memory_nominal_bytes

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_gb_s * 1e9

    @property
    def cc(self) -> tuple[int, int] | None:
        """The CUDA compute capability as (major, minor), for comparisons; None where the catalog has none."""
        if not self.compute_capability:
            return None
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)


# --------------------------------------------------------------------------- model: mixers

Bias = Literal["none", "qkv", "all"]


class AttentionBase(Strict):
    num_attention_heads: int = Field(strict=True, le=2**16, gt=0)
    num_key_value_heads: int = Field(strict=True, le=2**16, gt=0)
    head_dim: int = Field(strict=True, le=2**16, gt=0)
    k_eq_v: bool = Field(False, description="no v_proj: V comes from the K projection (Gemma 4 full layers)")
    qk_norm: bool = Field(False, description="per-head RMSNorm weights on q and k (head_dim each)")
    bias: Bias = "none"
    sinks: bool = Field(False, description="one learned sink logit per head (gpt-oss)")
    output_gate: bool = Field(False, description="q_proj also emits a sigmoid gate per head (Qwen3-Next)")
    kv_shared: bool = Field(False, description="the layer attends over an earlier layer's cache and caches nothing "
                            "(Gemma 4 E2B/E4B's last num_kv_shared_layers; transformers modeling_gemma4.py "
                            "is_kv_shared_layer); its k/v projections, where the checkpoint keeps them, go unused")

    @model_validator(mode="after")
    def _heads_divide(self):
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        return self


class FullAttention(AttentionBase):
    """MHA, GQA or MQA, set by num_key_value_heads. KV grows with every token."""

    kind: Literal["full"]


class SlidingAttention(AttentionBase):
    """Attention over the last `sliding_window` tokens: KV capped at the window."""

    kind: Literal["sliding"]
    sliding_window: int = Field(strict=True, le=INT32_MAX, gt=0)


class SparseIndexer(Strict):
    """DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2): per layer, one FP8 key of head_dim values a
    token, scored by n_heads query heads against every cached token; the layer's attention then reads the topk
    best tokens' latents only (config.json index_n_heads, index_head_dim, index_topk)."""

    n_heads: int = Field(strict=True, le=2**16, gt=0, description="index_n_heads")
    head_dim: int = Field(strict=True, le=2**16, gt=0, description="index_head_dim")
    topk: int = Field(strict=True, le=INT32_MAX, gt=0, description="index_topk: tokens each query attends to")
    shared: bool = Field(False, description="the layer reuses the top-k an earlier layer's indexer picked "
                         "(GLM-5.2's indexer_types 'shared'; IndexCache, arXiv 2603.12201): it attends to topk tokens "
                         "but holds no indexer weights, caches no indexer key and scores nothing")


class MlaAttention(Strict):
    """DeepSeek multi-head latent attention: caches kv_lora_rank + qk_rope_head_dim values per token (and, with a
    sparse indexer, its key)."""

    kind: Literal["mla"]
    num_attention_heads: int = Field(strict=True, le=2**16, gt=0)
    q_lora_rank: int | None = Field(None, strict=True, le=2**16, gt=0)
    kv_lora_rank: int = Field(strict=True, le=2**16, gt=0)
    qk_nope_head_dim: int = Field(strict=True, le=2**16, gt=0)
    qk_rope_head_dim: int = Field(strict=True, le=2**16, gt=0)
    v_head_dim: int = Field(strict=True, le=2**16, gt=0)
    output_gate: bool = Field(False, description="g_proj (hidden -> heads x v_head_dim) gates the attention's output "
                              "with a sigmoid before o_proj (Kimi K3's mla_use_output_gate)")
    sliding_window: int | None = Field(None, strict=True, le=INT32_MAX, gt=0, description="tokens cached at most: "
                                       "a KV policy's what-if (estimate/kv_policy.py); no released MLA model has one")
    indexer: SparseIndexer | None = None


class CompressedAttention(Strict):
    """DeepSeek-V4's attention (DeepSeek-AI 2026, DeepSeek-V4 technical report; the tensor layout antirez/ds4 ds4.c
    weights_validate_layout checks @8d57664 and llama.cpp's LLM_ARCH_DEEPSEEK4 creates): one KV head of
    head_dim values, K = V, RoPE on its last qk_rope_head_dim, a learned sink a query head; every layer attends over
    a window of its last sliding_window tokens, and a layer of compress_ratio r also over one compressed entry (of
    head_dim) every r tokens, made by a compressor (wkv and wgate [hidden -> head_dim, twice that where the windows
    overlap], a positional bias ape, a norm). With an indexer (r = 4 in the releases) the query reads only the topk
    entries the indexer's keys (one a compressed entry, compressed alike) score best; without one (r = 128) every
    entry. Queries come through a low-rank q (q_lora_rank), outputs through o_groups low-rank projections (wo_a:
    each group's heads -> o_lora_rank; wo_b: o_groups x o_lora_rank -> hidden)."""

    kind: Literal["compressed"]
    num_attention_heads: int = Field(strict=True, le=2**16, gt=0)
    head_dim: int = Field(strict=True, le=2**16, gt=0, description="the one KV head's width, K = V (512)")
    qk_rope_head_dim: int = Field(strict=True, le=2**16, gt=0)
    q_lora_rank: int = Field(strict=True, le=2**16, gt=0)
    o_groups: int = Field(strict=True, le=2**16, gt=0)
    o_lora_rank: int = Field(strict=True, le=2**16, gt=0)
    sliding_window: int = Field(strict=True, le=INT32_MAX, gt=0, description="tokens every layer attends to in full")
    compress_ratio: int | None = Field(None, strict=True, ge=2, le=2**20, description="tokens per compressed entry "
                                       "(config compress_ratios, 0 there: None, the window alone)")
    compress_overlap: bool = Field(False, description="the compressor's windows overlap (twice its width: at ratio 4 "
                                   "in ds4.c's, llama.cpp's and vLLM's implementations, `coff = ratio == 4 ? 2 : 1`)")
    indexer: SparseIndexer | None = Field(None, description="the compressed entries' sparse selection (r = 4)")

    @model_validator(mode="after")
    def _shapes(self):
        if self.num_attention_heads % self.o_groups:
            raise ValueError(f"num_attention_heads ({self.num_attention_heads}) must be a multiple of o_groups "
                             f"({self.o_groups})")
        if self.compress_ratio is None and (self.indexer is not None or self.compress_overlap):
            raise ValueError("an indexer or an overlapping compressor needs a compress_ratio")
        if self.qk_rope_head_dim > self.head_dim:
            raise ValueError(f"qk_rope_head_dim ({self.qk_rope_head_dim}) exceeds head_dim ({self.head_dim})")
        return self


class Mamba2Mixer(Strict):
    """Mamba2 SSM layer: constant conv state + recurrent state per sequence."""

    kind: Literal["ssm"]
    num_heads: int = Field(strict=True, le=2**16, gt=0, description="mamba_num_heads")
    head_dim: int = Field(strict=True, le=2**16, gt=0, description="mamba_head_dim")
    state_size: int = Field(strict=True, le=2**16, gt=0, description="ssm_state_size")
    n_groups: int = Field(strict=True, le=2**16, gt=0)
    conv_kernel: int = Field(strict=True, le=2**10, gt=0)
    conv_bias: bool = True
    state_dtype: Literal["fp32", "bf16", "fp16"] = Field(
        "bf16", description="dtype of the recurrent state (config mamba_ssm_cache_dtype)"
    )


class LinearAttention(Strict):
    """Delta-rule linear attention: constant recurrent + conv state per sequence. Gated DeltaNet (Qwen3-Next,
    Qwen3.5/3.6), or Kimi Delta Attention (Kimi Linear), whose state has the same shape (vLLM mamba_utils.py
    MambaStateShapeCalculator.kda_state_shape: a conv state over q, k and v, heads x d_k x d_v recurrent) and whose
    weights differ (`variant`)."""

    kind: Literal["linear"]
    num_key_heads: int = Field(strict=True, le=2**16, gt=0)
    num_value_heads: int = Field(strict=True, le=2**16, gt=0)
    key_head_dim: int = Field(strict=True, le=2**16, gt=0)
    value_head_dim: int = Field(strict=True, le=2**16, gt=0)
    conv_kernel: int = Field(strict=True, le=2**10, gt=0)
    state_dtype: Literal["fp32", "bf16", "fp16"] = "fp32"
    variant: Literal["gated_deltanet", "kda"] = Field("gated_deltanet", description=(
        "gated_deltanet: in_proj_qkvz and in_proj_ba, a decay and a beta per head (transformers "
        "Qwen3NextGatedDeltaNet); kda: q/k/v projections with a short conv each, a forget gate per key channel and an "
        "output gate through low-rank f_a/f_b and g_a/g_b of `gate_rank`, a beta per head (vLLM "
        "model_executor/layers/kda.py KimiDeltaAttention)"))
    gate_rank: int | None = Field(None, strict=True, le=2**16, gt=0, description="kda: the rank of f_a/f_b and "
                                  "g_a/g_b (Kimi Linear: its head_dim, 128)")
    gate_full_rank: bool = Field(False, description="kda: the output gate is one g_proj (hidden -> value heads x "
                                 "value_head_dim), the forget gate staying low-rank (Kimi K3's use_full_rank_gate)")

    @model_validator(mode="after")
    def _kda_rank(self):
        if (self.variant == "kda") != (self.gate_rank is not None):
            raise ValueError("gate_rank is given for variant kda, and only for it")
        if self.gate_full_rank and self.variant != "kda":
            raise ValueError("gate_full_rank is a kda layer's")
        return self


class ShortConvMixer(Strict):
    """Liquid AI LFM2's gated short convolution (transformers modeling_lfm2.py Lfm2ShortConv @0096ba4f; vLLM
    model_executor/layers/mamba/short_conv.py): in_proj hidden -> 3 x conv_dim (B, C, x), a depthwise causal conv of
    conv_kernel taps over B * x, C times its output, out_proj conv_dim -> hidden. A sequence keeps the conv's last
    conv_kernel - 1 inputs (vLLM short_conv_state_shape: (L - 1) x conv_dim; llama.cpp n_embd_r = n_embd x
    (L_cache - 1)): a constant state, no KV cache."""

    kind: Literal["conv"]
    conv_dim: int = Field(strict=True, le=2**20, gt=0, description="conv_dim (LFM2: hidden_size)")
    conv_kernel: int = Field(strict=True, le=2**10, gt=1, description="conv_L_cache: the conv's taps")
    bias: bool = Field(False, description="conv_bias: in_proj, conv and out_proj biases")


Mixer = Annotated[
    FullAttention | SlidingAttention | MlaAttention | CompressedAttention | Mamba2Mixer | LinearAttention
    | ShortConvMixer,
    Field(discriminator="kind"),
]
# mixer kinds whose cache is a constant state a sequence, not KV that grows with its tokens
STATE_KINDS = ("ssm", "linear", "conv")


# --------------------------------------------------------------------------- model: MLPs


class DenseMlp(Strict):
    kind: Literal["dense"]
    intermediate_size: int = Field(strict=True, le=2**24, gt=0)
    gated: bool = Field(True, description="gate/up/down (SwiGLU, GeGLU) rather than up/down")
    bias: bool = False


class MoeMlp(Strict):
    """Routed experts (all resident) + optional shared experts that every token uses."""

    kind: Literal["moe"]
    num_experts: int = Field(strict=True, le=2**16, gt=0)
    experts_per_token: int = Field(strict=True, le=2**16, gt=0)
    moe_intermediate_size: int = Field(strict=True, le=2**24, gt=0)
    gated: bool = True
    bias: bool = False
    router_bias: bool = False
    num_shared_experts: int = Field(0, strict=True, le=2**10, ge=0)
    shared_intermediate_size: int | None = Field(
        None, strict=True, gt=0, le=2**24, description="per shared expert; defaults to moe_intermediate_size"
    )
    shared_expert_gate: bool = Field(False, description="a [1, hidden] sigmoid gate on the shared expert")
    latent_size: int | None = Field(
        None, strict=True, gt=0, le=2**24,
        description="moe_latent_size: the routed experts work at this width, not the hidden size (LatentMoE, arXiv "
                    "2601.18089; Nemotron 3 Super and Ultra): every token runs fc1_latent_proj (hidden -> latent) "
                    "before them and fc2_latent_proj (latent -> hidden) after; router and shared experts stay at "
                    "the hidden size")
    latent_norm: bool = Field(False, description="an RMSNorm of latent_size on the experts' summed output before "
                              "it leaves the latent (Kimi K3's latent_moe_use_norm)")

    @model_validator(mode="after")
    def _topk(self):
        if self.experts_per_token > self.num_experts:
            raise ValueError("experts_per_token cannot exceed num_experts")
        return self


Mlp = Annotated[DenseMlp | MoeMlp, Field(discriminator="kind")]


class LayerGroup(Strict):
    count: int = Field(strict=True, le=2**16, gt=0)
    mixer: Mixer | None = None
    mlp: Mlp | None = None
    norms: int = Field(2, strict=True, le=2**10, ge=0,
                       description="hidden_size-long norm vectors per layer (weights, biases)")
    extra_params: int = Field(0, strict=True, le=2**40, ge=0,
                              description="small per-layer tensors not covered above (layer_scalar)")
    note: str | None = None

    @model_validator(mode="after")
    def _not_empty(self):
        if self.mixer is None and self.mlp is None:
            raise ValueError("a layer group needs a mixer, an mlp, or both")
        return self


Width = Annotated[int, Field(strict=True, gt=0, le=2**20)]


class VisionEncoder(Strict):
    """A vision tower's shape as an image encoder runs it (its config.json vision_config): what llama.cpp's mmproj
    sizes its compute buffer by (estimate/mmproj.py)."""

    kind: Literal["siglip", "qwen_vl", "gemma4", "llama4"] = Field(description=(
        "the tower's design: Gemma 3's SigLIP, Qwen3-VL / Qwen3.5's, Gemma 4's, Llama 4's; it sets the image "
        "llama.cpp warms the encoder up with"))
    hidden_size: Width
    intermediate_size: Width
    num_heads: Width
    patch_size: int = Field(strict=True, gt=0, le=1024)
    image_size: int | None = Field(None, strict=True, gt=0, le=16384,
                                   description="pixels a side of the native image (siglip, llama4)")
    merge: int = Field(1, strict=True, gt=0, le=64, description="patches merged a side into one token "
                                                               "(spatial_merge_size, pooling_kernel_size)")

    @model_validator(mode="after")
    def _native_size(self):
        if self.kind in ("siglip", "llama4") and self.image_size is None:
            raise ValueError(f"a {self.kind} encoder needs image_size (its native image, pixels a side)")
        return self


class VisionConfigKeys(Strict):
    """Two attributes of a checkpoint's vision_config as its config class holds them (the config.json's keys, or the
    class's defaults where a key is absent), null where the class has no such attribute: Qwen3-VL's and Qwen3.5's
    count their blocks as `depth`; Gemma 4 12B's embedder has neither. SGLang sizes a multimodal model's memory
    margin by them (estimate/sglang_defaults.vlm_factor)."""

    num_hidden_layers: int | None = Field(strict=True, ge=1, le=4096)
    hidden_size: int | None = Field(strict=True, ge=1, le=2**20)


class ExtraParams(Strict):
    """Parameters outside the decoder stack (vision tower, MTP head). Stored, never read per token."""

    name: str
    params: int = Field(strict=True, le=10**16, ge=0)
    in_official_count: bool
    loaded: bool = Field(True, description="engines load it by default, so it takes memory")
    layers: int | None = Field(None, strict=True, ge=1, le=2**16, description=(
        "of an MTP module, its decoder layers (None: one); a draft of k tokens runs them in turn"))
    draft_params: int | None = Field(None, strict=True, ge=0, le=10**16, description=(
        "of an MTP module, the parameters an engine loads to draft with it, where it takes some from the target "
        "(vLLM shares the target's embedding and lm_head with an MTP draft); None: all of params"))
    encoder: VisionEncoder | None = Field(None, description="of a vision tower, its shape as an image encoder")
    vision_config: VisionConfigKeys | None = Field(None, description=(
        "of a vision tower, its vision_config's num_hidden_layers and hidden_size (None: not recorded)"))
    note: str | None = None


class ActiveOfficial(Strict):
    """A vendor's stated active parameters per token, as printed, and what it counts."""

    params: int = Field(strict=True, gt=0, le=10**16)
    printed: str = Field(description="the figure as the vendor prints it, e.g. 3.61B")
    counts_embedding: bool = Field(description="whether the vendor's figure includes the input embedding table")
    source: str


# which weights a quantized format covers: every linear layer, the routed experts only, the MLPs (experts, shared
# and dense), or every matrix (embedding and lm_head too)
Scope = Literal["linear", "experts", "mlp", "all"]


class ReleaseFormat(Strict):
    quant: str = Field(description="format id from `llmsize formats`, or a recipe (COMPONENT=FORMAT,...)")
    scope: Scope = "linear"
    note: str | None = None
    kv_cache: Literal["fp8"] | None = Field(None, description="the KV-cache format the checkpoint's quantization "
                                            "config declares (ModelOpt's kv_cache_quant_algo or kv_cache_scheme, "
                                            "compressed-tensors' kv_cache_scheme), with scales for it")
    kv_cache_from: Literal["modelopt", "compressed-tensors"] | None = Field(
        None, description="the quantization config that declares kv_cache: vLLM's default cache dtype takes a "
        "ModelOpt one, SGLang's either (runtimes.runtime_kv_dtype)")

    @field_validator("quant")
    @classmethod
    def _recipe_in_its_own_order(cls, v: str) -> str:
        """A recipe written in any order is the one recipe (its id lists the components in one order)."""
        if "=" not in v:
            return v
        try:
            return recipe_text(v)
        except LlmsizeError as e:
            raise ValueError(e.message) from None


class PerLayerInput(Strict):
    """Per-layer embeddings (Gemma 4 E2B/E4B, transformers modeling_gemma4.py): a second table gives each token a
    `hidden_size`-wide vector per layer, [vocab_size, layers x hidden_size] (embed_tokens_per_layer), gathered one
    row a token like the input embedding; the hidden state is projected to the same width (per_layer_model_projection
    [layers x hidden_size, model hidden], one norm of hidden_size); each layer gates it in (per_layer_input_gate
    [hidden_size, model hidden], per_layer_projection [model hidden, hidden_size], post_per_layer_input_norm)."""

    hidden_size: int = Field(strict=True, le=2**16, gt=0, description="hidden_size_per_layer_input")
    vocab_size: int = Field(strict=True, le=2**24, gt=0, description="vocab_size_per_layer_input")


class AltUp(Strict):
    """Gemma 3n's alternating updates (AltUp, arXiv 2301.13310; transformers modeling_gemma3n.py): the hidden state
    is `num_inputs` streams, one of which (the active one) runs each layer's attention and MLP; the others are mixed
    in by small per-layer coefficients. The model projects into and out of the extra streams (altup_projections,
    altup_unembed_projections: 2 x (num_inputs - 1) [hidden, hidden]); each layer holds correction_coefs
    [n, n], prediction_coefs [n x n, n], modality_router [n, hidden], router_norm and correct_output_scale [hidden].
    The KV cache is the active stream's: AltUp does not widen it."""

    num_inputs: int = Field(strict=True, ge=2, le=64, description="altup_num_inputs")


class ModelSpec(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    family: str
    hf_repo: str | None = None
    trust_remote_code: bool = Field(False, description="the checkpoint's config or tokenizer loads code from its "
                                    "repository: vLLM and SGLang need --trust-remote-code (a source in `sources`)")
    aliases: list[str] = []
    sources: list[str] = Field(min_length=1)
    params_official: int = Field(strict=True, le=10**16, gt=0)
    params_official_source: str
    params_official_includes: str = Field(description="what the official count covers")
    params_active_official: ActiveOfficial | None = None
    release: ReleaseFormat
    vocab_size: int = Field(strict=True, le=2**24, gt=0)
    hidden_size: int = Field(strict=True, le=2**20, gt=0)
    tie_word_embeddings: bool
    final_norms: int = Field(1, strict=True, le=2**10, ge=0)
    max_position_embeddings: int = Field(strict=True, le=INT32_MAX, gt=0)
    layer_groups: list[LayerGroup] = Field(min_length=1)
    layer_pattern: list[int] | None = Field(
        None, min_length=1, max_length=2**16, description="the groups' layers in stack order: one period of group "
        "indices, repeated and cut to the layer count (Gemma 3: [0, 0, 0, 0, 0, 1], a global layer after five "
        "local ones); None: each group's layers follow the previous group's")
    extra: list[ExtraParams] = []
    vision_prefix_lm: bool = Field(False, description=(
        "a multimodal checkpoint whose text model attends to an image's or video's tokens both ways (config.json "
        "text_config.use_bidirectional_attention 'vision': Gemma 4), so an engine keeps one item in one forward"))
    per_layer_input: PerLayerInput | None = None
    altup: AltUp | None = None
    hyper_connections: int | None = Field(None, strict=True, ge=2, le=64, description=(
        "DeepSeek-V4's manifold-constrained hyper-connections (config hc_mult; DeepSeek-V4 technical report): the "
        "residual stream is this many hidden-size streams; before its attention and before its MLP each layer mixes "
        "them through fn [streams x hidden -> 2 streams + streams^2], base [2 streams + streams^2] and scale [3], "
        "and the head folds them into one through fn [streams x hidden -> streams], base [streams], scale [1]"))
    laurel_rank: int | None = Field(None, strict=True, ge=1, le=2**16, description="Gemma 3n's learned augmented "
                                    "residual (LAuReL) in every layer: linear_left [rank, hidden], linear_right "
                                    "[hidden, rank], post_laurel_norm [hidden]")
    notes: str | None = None

    @property
    def num_layers(self) -> int:
        return sum(g.count for g in self.layer_groups)

    @property
    def is_moe(self) -> bool:
        """Whether any layer routes tokens to experts."""
        return any(g.mlp is not None and g.mlp.kind == "moe" for g in self.layer_groups)

    def layer_stack(self) -> list[LayerGroup]:
        """Each layer's group, in stack order (what llama.cpp's -ngl splits and a GGUF file's blk.N numbers)."""
        if self.layer_pattern is None:
            return [g for g in self.layer_groups for _ in range(g.count)]
        period = self.layer_pattern
        return [self.layer_groups[period[i % len(period)]] for i in range(self.num_layers)]

    @model_validator(mode="after")
    def _pattern_counts(self):
        if self.layer_pattern is None:
            return self
        if not all(isinstance(i, int) and 0 <= i < len(self.layer_groups) for i in self.layer_pattern):
            raise ValueError(f"layer_pattern names a group outside 0..{len(self.layer_groups) - 1}")
        n, period = self.num_layers, self.layer_pattern
        if len(period) > n:
            raise ValueError(f"layer_pattern has {len(period)} entries for {n} layers")
        counts = [0] * len(self.layer_groups)
        for i in range(n):
            counts[period[i % len(period)]] += 1
        if counts != [g.count for g in self.layer_groups]:
            raise ValueError(f"layer_pattern repeated over {n} layers gives the groups {counts} layers, where their "
                             f"counts say {[g.count for g in self.layer_groups]}")
        return self

    @model_validator(mode="after")
    def _shared_caches_have_a_source(self):
        """A layer that reads an earlier layer's cache needs one: a layer of its attention kind before it that
        keeps its own (transformers modeling_gemma4.py: the last such layer before the shared ones)."""
        seen: set[str] = set()
        for i, g in enumerate(self.layer_stack()):
            m = g.mixer
            if getattr(m, "kv_shared", False) and m.kind not in seen:
                raise ValueError(f"layer {i} shares an earlier layer's cache (kv_shared) but no earlier {m.kind} "
                                 "layer keeps one")
            if m is not None and not getattr(m, "kv_shared", False):
                seen.add(m.kind)
        return self

    @field_validator("aliases")
    @classmethod
    def _lower(cls, v: list[str]) -> list[str]:
        return [a.lower() for a in v]


# --------------------------------------------------------------------------- host memory (partial offload)


class HostSpec(Strict):
    """A platform's system memory at its fastest supported configuration: what the offloaded part of a model
    streams from. Channels are 64 bits wide (an LPDDR bus is counted in 64-bit units)."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    segment: Literal["desktop", "workstation", "server", "soc"]
    aliases: list[str] = []
    memory_type: str
    channels: int = Field(strict=True, ge=1, le=64)
    data_rate_mt_s: int = Field(strict=True, ge=400, le=20000)
    bandwidth_gb_s: float = Field(strict=True, ge=1, le=1e5, description="peak, decimal GB/s")
    bandwidth_printed: bool = Field(description="the vendor prints the figure; else channels x MT/s x 8 B")
    sources: list[str] = Field(min_length=1)
    notes: str | None = None

    @model_validator(mode="after")
    def _peak(self):
        peak = self.channels * self.data_rate_mt_s * 8 / 1000
        if abs(self.bandwidth_gb_s - peak) > 0.01 * peak:
            raise ValueError(f"bandwidth_gb_s {self.bandwidth_gb_s} is not {self.channels} channels x "
                             f"{self.data_rate_mt_s} MT/s x 8 B = {peak:.1f} GB/s")
        return self


# --------------------------------------------------------------------------- runtimes (fitted speed constants)

Fraction01 = Annotated[float, Field(strict=True, gt=0, le=1)]
Seconds = Annotated[float, Field(strict=True, ge=0, le=10)]


class HeldOut(Strict):
    """Leave-one-source-out error of the group's rows: |predicted - measured| / measured."""

    rows: int = Field(strict=True, ge=0)
    median_abs_error: float = Field(strict=True, ge=0)
    p90_abs_error: float = Field(strict=True, ge=0)
    band_coverage: float = Field(strict=True, ge=0, le=1)


class HostHeldOut(Strict):
    rows: int = Field(strict=True, ge=0)
    median_abs_error: float = Field(strict=True, ge=0)
    p90_abs_error: float = Field(strict=True, ge=0)


class HostFit(Strict):
    """The share of the host memory's peak bandwidth a CPU decode reaches (benchmarks/fit_host.py), for the layers
    and experts a partial offload leaves on the host."""

    eta_bandwidth: Fraction01
    rows: int = Field(strict=True, ge=1)
    sources: list[str] = Field(min_length=1, description="measurements/host/ files")
    held_out: HostHeldOut
    band: tuple[float, float] = Field(description="held-out measured / predicted, lowest and highest")


class RdnaStreaming(Strict):
    """A pooled fit's streaming fractions on AMD's RDNA cards (gfx11, gfx12), fitted at a further cost of their own
    beside CDNA's (expected.stream_family): the engines' kernels there are written apart."""

    eta_weights: dict[str, Fraction01]
    eta_weights_default: Fraction01
    eta_kv: Fraction01
    rows_decode: int = Field(ge=0, description="the fit's decode rows on RDNA cards")
    sources: int = Field(ge=0)
    cards: list[str] = []


class SpeedGroup(Strict):
    """One runtime on one backend (cuda, rocm, metal, vulkan): the step-time constants of llmsize.estimate.speed."""

    eta_weights: dict[str, Fraction01] = Field(description="fraction of bandwidth streaming weights, by format class")
    eta_weights_default: Fraction01
    eta_kv: Fraction01 = Field(description="fraction of bandwidth reading the KV cache (attention at depth)")
    t_layer_s: Seconds
    t_step_s: Seconds
    t_moe_layer_s: Seconds = 0.0
    alu_ops_per_weight: float = Field(0.0, ge=0, le=1000, description="vector ops to unpack one quantized weight")
    attn_cost: float = Field(0.0, ge=0, le=1000, description="FP32-rate FLOPs per attention FLOP at decode")
    tile_cost: float = Field(0.0, ge=0, le=1000, description="dense-peak FLOPs per tile matmul FLOP at decode")
    mm_cost: float = Field(0.0, ge=0, le=1000, description="dense-peak FLOPs per matmul FLOP of the step at decode")
    t_step_v0_s: Seconds = Field(0.0, description="a step's wait for the CPU between GPU steps: an older engine "
                                 "generation's (vLLM V0, llama.cpp before b6327) and SGLang 0.5.7-0.5.13's without "
                                 "its overlap scheduler on a hybrid (expected.without_overlap): dataset covariates")
    t_expert_launch_s: Seconds = Field(0.0, description="a launch of an older engine's per-expert MoE kernel "
                                       "(GPTQ/AWQ experts through Marlin, vLLM up to 0.8.4): published rows only")
    expert_read_cost: float = Field(0.0, ge=0, le=100, description="extra time per routed-expert byte, in units of "
                                    "its time at full bandwidth (many small expert matrices stream below a dense one)")
    t_layer_floor_s: Seconds = Field(0.0, description="the least time one layer's decode kernels take, however few "
                                     "bytes they read (overlaps the weights' read: launch-bound small models)")
    t_act_quant_layer_s: Seconds = Field(0.0, description="per layer, the kernels that quantize activations for "
                                         "FP8/FP4 tensor-core GEMMs (speed.act_quant_time_s)")
    t_recurrent_layer_s: Seconds = Field(0.0, description="per recurrent (SSM, linear-attention) layer, the fixed "
                                         "cost of its chain of small kernels beside its bytes (0 where no hybrid's "
                                         "rows pin it)")
    t_shared_expert_layer_s: Seconds = Field(0.0, description="per MoE layer with a shared expert, the fixed cost of "
                                             "that expert's kernels (its matmuls, activation, sum) beside its bytes")
    t_prefill_layer_s: Seconds = Field(0.0, description="a serving engine's extra cost per layer of a prefill forward, "
                                       "a layer of PrefillInputs.launch_layers (vLLM's and SGLang's eager forward in "
                                       "kernel launches, nine a Llama layer: estimate/launches.py)")
    prefill_consumer_factor: float = Field(1.0, ge=0.5, le=2.0, description="a consumer card's prompt fraction over "
                                           "the other segments' (above its rated boost clock), at most its rated peak")
    moe_matmul_cost: float = Field(1.0, ge=1, le=100, description="a routed expert FLOP's cost in dense FLOPs "
                                   "(grouped GEMMs of a few rows per expert)")
    t_seq_s: Seconds = Field(0.0, description="a decode step's cost per sequence beyond the first")
    prefill_expert_read_cost: float = Field(0.0, ge=0, le=100, description="a prompt's routed-expert byte, each "
                                            "forward's read, in units of its time at full bandwidth")
    alpha_s: dict[Literal["nvlink", "xgmi", "pcie", "network"], Seconds] = {}
    eta_prefill: dict[str, Fraction01] = Field({}, description="fraction of the dense peak in prefill, by class")
    eta_prefill_default: Fraction01 | None = None
    band: tuple[float, float] = Field(description="held-out measured/predicted, p5 and p95 (decode)")
    prefill_band: tuple[float, float] | None = None
    rows_decode: int = Field(strict=True, ge=0)
    hybrid_rows_decode: int = Field(0, strict=True, ge=0, description="of which, decode rows of models with recurrent "
                                    "(SSM, linear-attention) layers, which price a recurrent layer's own cost")
    shared_expert_rows_decode: int = Field(0, strict=True, ge=0, description="of which, decode rows whose steps carry "
                                           "a shared expert's cost (StepInputs.shared_expert_layers)")
    rows_prefill: int = Field(strict=True, ge=0)
    cards: list[str] = []
    decode_held_out: HeldOut | None = None
    prefill_held_out: HeldOut | None = None
    borrowed: str | None = Field(None, description="why these constants are another group's (no rows of its own)")
    own_moe: str | None = Field(None, description="the runtime's own further cost a routed-expert layer on this "
                                "backend, beside its pool's, and the rows that fitted it (benchmarks/fit_speed.py)")
    rdna: RdnaStreaming | None = Field(None, description="on AMD's RDNA cards, where the pooled fit streams their "
                                       "bytes at a further cost of their own")
    runtimes: list[str] = Field([], description="the runtimes whose rows the fit used (its own, pooled, borrowed)")
    row_backends: list[Literal["cuda", "rocm", "metal", "vulkan"]] = Field(
        [], description="the backends of the rows the fit used (another's where the group borrowed them)")
    own_decode_held_out: HeldOut | None = Field(
        None, description="the held-out error of the decode rows this runtime ran, where the fit used others' too; "
        "the band is theirs from MIN_ROWS_OWN of them (benchmarks/fit_speed.py)")

    @model_validator(mode="after")
    def _band(self):
        for b in (self.band, self.prefill_band):
            if b is not None and not 0 < b[0] <= 1 <= b[1] <= 10:
                raise ValueError(f"band {b} must be 0 < low <= 1 <= high <= 10")
        return self


class RuntimeSpec(Strict):
    id: Literal["vllm", "sglang", "trtllm", "llamacpp", "mlx", "gpt-fast"]
    name: str
    aliases: list[str] = []
    backends: dict[Literal["cuda", "rocm", "metal", "vulkan"], SpeedGroup]
    fitted: str = Field(description="date, dataset commit and command of the fit")
    sources: list[str] = Field(min_length=1, description="the dataset files the constants were fitted on")
    host: HostFit | None = Field(None, description="llama.cpp: the host side of a partial offload")
    notes: str | None = None
