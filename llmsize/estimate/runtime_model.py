"""What a runtime runs of a model where it departs from the model's own definition.

mlx-lm's Gemma 2 (mlx_lm/models/gemma2.py, ml-explore/mlx-lm @8dc64492 and @1245c2ec) departs in three ways:
- no sliding window: every layer keeps a full cache and attends all of it, where transformers' Gemma2Config windows
  every other layer to 4,096 tokens (its Gemma 3 and Gemma 4 keep their windows: RotatingKVCache);
- attention in separate ops, GQA by broadcasting: queries [B, kv_heads, repeats, L, D] @ keys [B, kv_heads, 1, D, S]
  is a batched matmul whose broadcast dimension makes each of a KV head's `repeats` query heads its own product, so
  a decode step reads each cached K and V row once per query head of its group (n_heads / n_kv_heads times), where a
  fused attention kernel reads it once;
- the same unfused ops write each prompt chunk's score matrix and read it back several times
  (MLX_GEMMA2_SCORE_TRAFFIC).
Under mlx-lm the plan costs that run: the sliding layers' cache, its decode reads and the prompt's attention grow
with the whole context, the decode's cache reads are multiplied by the group size, and the prompt's time to first
token carries its score traffic (step_inputs.prompt_score_bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmsize.catalog.schema import AttentionBase, ExtraParams, FullAttention, ModelSpec, SlidingAttention
from llmsize.estimate.kv import kv_bytes
from llmsize.estimate.memo import by_identity


@dataclass(frozen=True)
class Departure:
    keeps_window: bool  # False: sliding-window layers run as full attention
    kv_read_per_query_head: bool  # True: a decode step reads each cached row once per query head of its group
    note: str  # what the report says
    # unfused attention over a prompt: the score matrices of each chunk of prompt_chunk_tokens go through memory,
    # score_traffic_bytes moved a score (0: fused attention, no such traffic)
    prompt_chunk_tokens: int = 0
    score_traffic_bytes: int = 0


# mlx-lm's prompt: generate_step feeds it prefill_step_size = 2,048 tokens at a time (mlx_lm/generate.py). Its Gemma 2
# attention moves each score through memory in fp16 (the activations' dtype): the QK^T matmul writes it (2 B); the
# soft-cap's divide, tanh and multiply each read and write it (12 B); the mask's where reads and writes it (4 B);
# softmax reads and writes it (4 B); the PV matmul reads it (2 B): 24 B a score
MLX_PREFILL_STEP_TOKENS = 2048
MLX_GEMMA2_SCORE_TRAFFIC = 24

# (runtime, model family) -> how the runtime runs that family
DEPARTURES = {
    ("mlx", "gemma2"): Departure(
        keeps_window=False, kv_read_per_query_head=True, prompt_chunk_tokens=MLX_PREFILL_STEP_TOKENS,
        score_traffic_bytes=MLX_GEMMA2_SCORE_TRAFFIC,
        note="mlx-lm runs Gemma 2 without its sliding window and with unfused, broadcast GQA attention "
             "(mlx_lm/models/gemma2.py): every layer keeps a full cache, a decode step reads it once per query head "
             "and a prompt's attention scores go through memory, as costed here"),
}


def departure(runtime: str, model: ModelSpec) -> Departure | None:
    """How `runtime` departs from `model`'s definition, or None where it runs the model as defined."""
    return DEPARTURES.get((runtime, model.family.lower()))


def run_model(model: ModelSpec, d: Departure | None) -> ModelSpec:
    """The model as the runtime runs it: without its sliding window where the runtime keeps none."""
    return unwindowed(model) if d is not None and not d.keeps_window else model


@by_identity()
def unwindowed(model: ModelSpec) -> ModelSpec:
    """The model with every sliding-window layer turned into full attention (same heads, same weights); one object
    per model, so that what is kept per model object (shard_model, weight_bytes) is found again."""
    groups = []
    for g in model.layer_groups:
        m = g.mixer
        if isinstance(m, SlidingAttention):
            fields = m.model_dump(exclude={"sliding_window"})
            m = FullAttention(**{**fields, "kind": "full"})
        groups.append(g.model_copy(update={"mixer": m}))
    return model.model_copy(update={"layer_groups": groups})


def kv_read_factor(model: ModelSpec, d: Departure | None, context_tokens: int, kv_dtype: str) -> float:
    """Bytes a decode step reads of the cache per byte cached: 1, or where the runtime reads a KV head once per
    query head, each attention layer's group size (n_heads / n_kv_heads) weighted by its share of the cache read
    (other layers' state, read once, at 1). By hand, Gemma 2 9B: 16 query heads on 8 KV heads in every layer, 2."""
    if d is None or not d.kv_read_per_query_head:
        return 1.0
    total = weighted = 0.0
    for g in model.layer_groups:
        m = g.mixer
        nbytes = kv_bytes(model.model_copy(update={"layer_groups": [g]}), context_tokens, kv_dtype).read_bytes
        total += nbytes
        weighted += nbytes * (m.num_attention_heads / m.num_key_value_heads if isinstance(m, AttentionBase) else 1)
    return weighted / total if total else 1.0


# runtimes that run a model's text part only, and where its towers go: llama.cpp's GGUF holds the text model, a vision
# or audio tower being a separate mmproj file (convert_hf_to_gguf.py --mmproj writes it; llama-server loads it only
# with --mmproj); mlx-lm's multimodal wrappers build the language model alone and their sanitize drops the tower's
# weights (mlx_lm/models/gemma3.py, qwen3_vl.py: weights.pop("vision_tower"), weights.pop("multi_modal_projector"));
# Ollama and LM Studio run GGUFs too, and load a vision model's projector beside them, which the plans leave out (as
# a GGUF mix's weights do: gguf_mix) and say so
TEXT_ONLY = {"llamacpp": "a GGUF holds the text model, the tower a separate mmproj file loaded with --mmproj; "
                         "--mmproj f16, or the file, sizes it",
             "ollama": "a GGUF holds the text model; Ollama loads a vision model's projector beside it from a blob "
                       "of its own, which this plan leaves out: --mmproj f16, or the blob's path, sizes it",
             "lmstudio": "a GGUF holds the text model; LM Studio loads an mmproj file beside it where the model "
                         "folder has one, which this plan leaves out: --mmproj f16, or the file, sizes it",
             "mlx": "mlx-lm builds the language model alone and drops the tower's weights as it loads"}


# (runtime, model family) pairs whose engine builds the tower only when asked: SGLang turns multimodal off for
# Llama4ForConditionalGeneration unless --enable-multimodal (srt/configs/model_config.py, mm_disabled_models) and its
# Llama 4 builds the vision model only with it (srt/models/mllama4.py: has_vision = has_vision_weights and
# enable_multimodal), as public copies of both files print them. Gemma 3 is in the same list, but its model builds
# and loads the SigLIP tower either way (srt/models/gemma3_mm.py @017f5d47: SiglipVisionModel in __init__, no
# enable_multimodal test), so its plans keep the tower
TEXT_BY_DEFAULT = {("sglang", "llama4"): "SGLang serves Llama 4 text-only unless --enable-multimodal, building no "
                                         "vision model: srt/models/mllama4.py"}


LANGUAGE_MODEL_ONLY = "served text alone: --language-model-only"


def vision_tower_of(model: ModelSpec, loaded: bool = True) -> ExtraParams | None:
    """The model's vision tower (an extra with an image encoder's shape or a vision_config recorded), the one the
    runtime loads where `loaded`, or None."""
    return next((x for x in model.extra if (x.loaded or not loaded)
                 and (x.encoder is not None or x.vision_config is not None)), None)


def towers_left_out(runtime: str, model: ModelSpec, language_model_only: bool = False) -> str | None:
    """Why `runtime` leaves `model`'s loaded extras (its vision or audio tower) out of memory, or None where it loads
    them or the model has none; `language_model_only`: the user serves its text alone (vLLM's and SGLang's
    --language-model-only build no tower)."""
    if not any(x.loaded for x in model.extra):
        return None
    return (TEXT_ONLY.get(runtime) or TEXT_BY_DEFAULT.get((runtime, base_family(model)))
            or (LANGUAGE_MODEL_ONLY if language_model_only else None))


def base_family(model: ModelSpec) -> str:
    """The model's family as config.json's model_type names the whole checkpoint: less a `_text` suffix
    (qwen3_5_text, a Qwen3.5 entry's text model, is qwen3_5; llama4_text is llama4)."""
    return model.family.lower().removesuffix("_text")


def held_model(runtime: str, model: ModelSpec, language_model_only: bool = False) -> ModelSpec:
    """The model as `runtime` holds it in memory: its text model under a text-only runtime (TEXT_ONLY) or where its
    text is served alone, else itself."""
    return text_model(model) if towers_left_out(runtime, model, language_model_only) else model


@by_identity(maxsize=1024)  # (one object per model: the GGUF caches key on it, gguf_mix.file_tensors)
def text_model(model: ModelSpec) -> ModelSpec:
    """The model as a text-only runtime holds it (TEXT_ONLY): every extra out of memory; one object per model, as
    unwindowed."""
    if not any(x.loaded for x in model.extra):
        return model
    return model.model_copy(update={"extra": [x.model_copy(update={"loaded": False}) for x in model.extra]})
