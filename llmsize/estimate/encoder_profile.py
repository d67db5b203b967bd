"""What vLLM's start-up profile of a multimodal model's vision encoder adds to the activation peak it sizes the KV
cache by (V1 gpu_model_runner.profile_run, "Encoder cache will be initialized with a budget of N tokens, and profiled
with M image items of the maximum feature size"): the encoder runs once on M dummy images of the processor's largest
size, M = the encoder budget (max(max_num_batched_tokens, an image's tokens)) / an image's tokens, and its outputs
stay in the encoder cache while the text model's dummy forward runs; its intermediates are freed before that
forward, so the profiled peak is the larger of the two forwards' peaks, over the cached outputs (peak_with).

The encoder's peak, a patch at a time in 16 bits: an MLP block's input and its norm, the fc1 output and its
activation (2 h + 2 i), beside the patch's pixel values (3 x temporal x patch^2); then the encoder cache, an image
token at the text model's width. Sized for Qwen3-VL-style towers (Qwen3.5, Qwen3.6), whose processor's largest image
is known (QWEN_VL_MAX_PIXELS); other towers' processors are not read here (encoder_profile returns None)."""

from __future__ import annotations

from dataclasses import dataclass

from llmsize.catalog.schema import ExtraParams, ModelSpec
from llmsize.estimate.runtime_model import vision_tower_of

ACT_BYTES = 2
# Qwen3-VL's and Qwen3.5's image processor: size {"longest_edge": 16777216}, patches of 16 merged 2 x 2, so its largest
# image is 16,777,216 / 32^2 = 16,384 tokens; the vLLM logs of Qwen3.5 / 3.6 / 3.8 checkpoints print "a budget of
# 16384 tokens, and profiled with 1 image items" (and 4,096 / 8,192 where mm_processor_kwargs max_pixels is 4,194,304
# / 8,388,608: github malaiwah/qwen38-27b-exl3 receipts, vLLM 0.11.2)
QWEN_VL_MAX_PIXELS = 16_777_216
QWEN_VL_TEMPORAL_PATCH = 2  # Qwen3VLVisionConfig temporal_patch_size: an image is two identical frames


@dataclass(frozen=True)
class EncoderProfile:
    items: int  # dummy images profiled
    tokens: int  # their tokens (the encoder budget's whole images)
    patches: int
    peak_bytes: float  # the encoder's forward, a patch at a time
    cache_bytes: float  # its outputs held in the encoder cache

    def peak_with(self, text_peak_bytes: float) -> float:
        """The profile's activation peak beside the text model's dummy forward of `text_peak_bytes`."""
        return max(text_peak_bytes, self.peak_bytes) + self.cache_bytes


def profiled_tower(model: ModelSpec) -> ExtraParams | None:
    """The loaded vision tower vLLM profiles, where its shape and processor are known here (Qwen3-VL-style)."""
    return next((x for x in model.extra if x.loaded and x.encoder is not None and x.encoder.kind == "qwen_vl"), None)


def unprofiled_tower(model: ModelSpec) -> ExtraParams | None:
    """A loaded vision tower of encoder blocks whose profile is not sized here (its processor's largest input not
    read); not an embedder without blocks of its own (Gemma 4 12B's, whose vision_config has no num_hidden_layers)."""
    tower = vision_tower_of(model) if profiled_tower(model) is None else None
    blocks = tower is not None and (tower.encoder is not None or tower.vision_config.num_hidden_layers)
    return tower if blocks else None


def encoder_profile(model: ModelSpec, batched_tokens: int, tp: int = 1,
                    max_pixels: int = QWEN_VL_MAX_PIXELS) -> EncoderProfile | None:
    """The encoder's share of vLLM's profiled activation peak on a card, or None where the model has no tower sized
    here; with tensor parallelism the encoder's MLP is split over the cards (its fc1 output a card's share)."""
    tower = profiled_tower(model)
    if tower is None:
        return None
    e = tower.encoder
    side = e.patch_size * e.merge
    per_item = max(1, max_pixels // (side * side))
    items = max(batched_tokens, per_item) // per_item
    tokens = items * per_item
    patches = tokens * e.merge * e.merge
    per_patch = 2 * e.hidden_size + 2 * e.intermediate_size / tp + 3 * QWEN_VL_TEMPORAL_PATCH * e.patch_size ** 2
    return EncoderProfile(items, tokens, patches, patches * per_patch * ACT_BYTES,
                          tokens * model.hidden_size * ACT_BYTES)
