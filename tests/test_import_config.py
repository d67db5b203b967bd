"""config.json import: every config in shared/reference/hf-configs maps; counts match the catalog and the
official figures; quantization configs give the right format and scope; bad configs get one-line errors."""

import json
import shutil
from pathlib import Path

import pytest

from llmsize.estimate.flops import decode_flops_per_token
from llmsize.estimate.kv import kv_bytes
from llmsize.estimate.params import model_pieces, params_active, params_comparable_to_official
from llmsize.importer.config_fields import ConfigError
from llmsize.importer.hf_config import map_config
from llmsize.importer.source import import_model

# a copy of shared/reference/hf-configs (real config.json files; provenance in its SOURCES.yaml), shipped
# with the tests so that they run from a clean clone
CONFIGS = Path(__file__).resolve().parent / "data" / "hf-configs"
ALL = sorted(p for p in CONFIGS.glob("*.json") if "hf_quant_config" not in p.name)

# config -> the catalog entry hand-written from the same config (models/*.yaml, each with its sources)
TWINS = {
    "Qwen__Qwen2.5-7B-Instruct": "qwen2.5-7b", "Qwen__Qwen3-8B": "qwen3-8b", "Qwen__Qwen3-30B-A3B": "qwen3-30b-a3b",
    "Qwen__Qwen3-30B-A3B-FP8": "qwen3-30b-a3b", "deepseek-ai__DeepSeek-V2-Lite-Chat": "deepseek-v2-lite",
    "deepseek-ai__DeepSeek-V3": "deepseek-v3", "google__gemma-3-27b-it": "gemma-3-27b",
    "google__gemma-4-26B-A4B": "gemma-4-26b-a4b", "meta-llama__Llama-2-70b-hf": "llama-2-70b",
    "meta-llama__Llama-2-7b-hf": "llama-2-7b", "meta-llama__Llama-3.1-70B-Instruct": "llama-3.1-70b",
    "meta-llama__Meta-Llama-3.1-70B": "llama-3.1-70b", "meta-llama__Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "meta-llama__Meta-Llama-3.1-8B": "llama-3.1-8b", "meta-llama__Meta-Llama-3-8B": "llama-3-8b",
    "microsoft__Phi-3-mini-4k-instruct": "phi-3-mini", "mistralai__Mistral-7B-v0.1": "mistral-7b",
    "mistralai__Mixtral-8x7B-v0.1": "mixtral-8x7b", "nvidia__Llama-3.1-70B-Instruct-FP8": "llama-3.1-70b",
    "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": "nemotron-3-nano-30b-a3b",
    "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4": "nemotron-3-nano-30b-a3b",
    "openai__gpt-oss-20b": "gpt-oss-20b", "openai__gpt-oss-120b": "gpt-oss-120b",
    "tiiuae__falcon-7b-instruct": "falcon-7b",
    "Qwen__Qwen3.6-27B": "qwen3.6-27b", "Qwen__Qwen3.6-35B-A3B": "qwen3.6-35b-a3b", "Qwen__Qwen3.5-27B": "qwen3.5-27b",
    "Qwen__Qwen3.5-35B-A3B": "qwen3.5-35b-a3b",
    "Qwen__Qwen3.5-9B": "qwen3.5-9b", "Qwen__Qwen2.5-14B": "qwen2.5-14b", "Qwen__Qwen2.5-0.5B": "qwen2.5-0.5b",
    "meta-llama__Meta-Llama-3.1-405B": "llama-3.1-405b", "deepseek-ai__DeepSeek-V3.2": "deepseek-v3.2",
    "microsoft__bitnet-b1.58-2B-4T": "bitnet-b1.58-2b-4t", "google__gemma-2-9b-it": "gemma-2-9b",
    "mistralai__Mistral-7B-Instruct-v0.3": "mistral-7b-v0.3", "google__gemma-2-2b-it": "gemma-2-2b",
    "microsoft__phi-4": "phi-4", "moonshotai__Kimi-K2-Instruct": "kimi-k2", "moonshotai__Kimi-K2.5": "kimi-k2.5",
    "MiniMaxAI__MiniMax-M2.5": "minimax-m2.5", "meta-llama__Llama-4-Scout-17B-16E-Instruct": "llama-4-scout",
    "meta-llama__Llama-4-Maverick-17B-128E-Instruct": "llama-4-maverick",
    "zai-org__GLM-5": "glm-5", "zai-org__GLM-5-FP8": "glm-5", "Qwen__Qwen3.5-397B-A17B": "qwen3.5-397b-a17b",
    "Qwen__Qwen3.5-122B-A10B": "qwen3.5-122b-a10b", "Qwen__Qwen3-Coder-480B-A35B-Instruct": "qwen3-coder-480b-a35b",
    "mistralai__Mixtral-8x22B-v0.1": "mixtral-8x22b", "MiniMaxAI__MiniMax-M2.7": "minimax-m2.7",
    "zai-org__GLM-5.2": "glm-5.2", "zai-org__GLM-4.5-Air": "glm-4.5-air", "nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8": "nemotron-3-super-120b-a12b",
    "nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16": "nemotron-3-ultra-550b-a55b",
    # Nemotron 3.5 Lightning has Nemotron 3 Nano's shapes, its layers given as layers_block_type
    "nvidia__NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4": "nemotron-3-nano-30b-a3b",
    # nvidia's NVFP4 export of Qwen3.6-35B-A3B: Qwen's text_config, a ModelOpt MIXED_PRECISION recipe
    "nvidia__Qwen3.6-35B-A3B-NVFP4": "qwen3.6-35b-a3b",
    # Qwen3-VL's text model is Qwen3-30B-A3B's, QK norm included (text_config, model_type qwen3_vl_moe_text)
    "Qwen__Qwen3-VL-30B-A3B-Instruct": "qwen3-30b-a3b",
    "google__gemma-4-E2B-it": "gemma-4-e2b", "google__gemma-4-E4B-it": "gemma-4-e4b",
    "deepseek-ai__deepseek-coder-6.7b-instruct": "deepseek-coder-6.7b", "EleutherAI__gpt-j-6b": "gpt-j-6b",
    "moonshotai__Kimi-Linear-48B-A3B-Instruct": "kimi-linear-48b-a3b",
    "deepseek-ai__DeepSeek-V4-Flash": "deepseek-v4-flash",
    "allenai__Olmo-3.1-32B-Instruct": "olmo-3.1-32b",
    "meta-models__Muse-Glimmer-30B": "muse-glimmer-30b",
    "moonshotai__Kimi-K3": "kimi-k3",
}


def _decoder(spec):
    return sum(p.params for p in model_pieces(spec) if p.stored and p.component != "extra")


def test_every_shared_config_is_covered():
    assert len(ALL) == 72
    assert {p.stem for p in ALL} - set(TWINS) == {
        "deepseek-ai__DeepSeek-V4-Pro",  # tests/test_deepseek_v4.py: no published count to 1% to catalog it with
        "Qwen__Qwen3-235B-A22B", "Qwen__Qwen3-235B-A22B-FP8", "nvidia__Gemma-4-31B-IT-NVFP4",
        "nvidia__Nemotron-H-56B-Base-8K", "1bitLLM__bitnet_b1_58-large"}  # tests/test_ternary.py: llama.cpp's published TQ1_0 / TQ2_0 sizes


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_config_imports_and_matches_its_catalog_twin(path, catalog):
    im = import_model(path, read_headers=False)
    twin = TWINS.get(path.stem)
    if twin is None:
        return
    cat = catalog.model(twin)
    # the same decoder, counted the same way: equal to the parameter
    assert _decoder(im.spec) == _decoder(cat)
    assert params_active(im.spec) == params_active(cat)
    assert im.spec.tie_word_embeddings == cat.tie_word_embeddings
    # and within 1% of the official count once the catalog's extras (vision towers) are added back
    extras = sum(x.params for x in cat.extra if x.in_official_count)
    assert params_comparable_to_official(im.spec) + extras == pytest.approx(cat.params_official, rel=0.01)


@pytest.mark.parametrize("stem, total_b, active_b", [
    # Qwen/Qwen3-235B-A22B model card: "235B in total and 22B activated"
    ("Qwen__Qwen3-235B-A22B", 235, 22),
    # NVIDIA Nemotron-H-56B-Base-8K model card: a 56B-parameter hybrid Mamba-Transformer
    ("nvidia__Nemotron-H-56B-Base-8K", 56, 56),
])
def test_models_outside_the_catalog_match_their_model_cards(stem, total_b, active_b):
    spec = import_model(CONFIGS / f"{stem}.json", read_headers=False).spec
    assert params_comparable_to_official(spec) / 1e9 == pytest.approx(total_b, rel=0.01)
    assert params_active(spec) / 1e9 == pytest.approx(active_b, rel=0.03)


def test_qwen35_hybrids_map_their_layer_types():
    """Qwen3.6-27B: 64 layers, layer_types three gated delta-net layers (16 key heads, 48 value heads of 128,
    conv 4, F32 state) then one gated full-attention layer (24 heads, 4 KV heads of 256); Qwen3.6-35B-A3B: 40
    layers of 256 routed experts (8 a token) and one gated shared expert. An unknown model_type whose layer_types
    holds such layers is refused, not mapped as a plain decoder."""
    spec = import_model(CONFIGS / "Qwen__Qwen3.6-27B.json", read_headers=False).spec
    kinds = [g.mixer.kind for g in spec.layer_groups for _ in range(g.count)]
    assert kinds.count("linear") == 48 and kinds.count("full") == 16
    lin = next(g.mixer for g in spec.layer_groups if g.mixer.kind == "linear")
    full = next(g.mixer for g in spec.layer_groups if g.mixer.kind == "full")
    assert (lin.num_key_heads, lin.num_value_heads, lin.key_head_dim, lin.value_head_dim, lin.conv_kernel,
            lin.state_dtype) == (16, 48, 128, 128, 4, "fp32")
    assert (full.num_attention_heads, full.num_key_value_heads, full.head_dim, full.output_gate,
            full.qk_norm) == (24, 4, 256, True, True)
    moe = import_model(CONFIGS / "Qwen__Qwen3.6-35B-A3B.json", read_headers=False).spec
    mlp = moe.layer_groups[0].mlp
    assert (mlp.num_experts, mlp.experts_per_token, mlp.num_shared_experts, mlp.shared_expert_gate) == (256, 8, 1, True)
    assert sum(g.count for g in moe.layer_groups) == 40


# Hugging Face safetensors totals (every tensor of the checkpoint), as printed: Qwen3.5-27B, -35B-A3B, -122B-A10B,
# -397B-A17B in github AlexsJones/llmfit scripts/scrape_hf_models.py's FALLBACKS list (file index id 55778153074);
# Qwen3.5-9B and Qwen3.6-27B in a public log of Hub API calls (id 61762937035: "safetensors.total: ... 9B 9653104368 |
# Qwen3.6-27B 27781427952"); Qwen3.6-35B-A3B in a public evidence file (id 71127054961: "safetensors.total=35951822704")
HUB_TOTALS = {"Qwen__Qwen3.5-27B": 27_781_427_952, "Qwen__Qwen3.5-122B-A10B": 125_086_497_008,
              "Qwen__Qwen3.5-397B-A17B": 403_397_928_944, "Qwen__Qwen3.5-9B": 9_653_104_368,
              "Qwen__Qwen3.6-27B": 27_781_427_952, "Qwen__Qwen3.6-35B-A3B": 35_951_822_704,
              "Qwen__Qwen3.5-35B-A3B": 35_951_822_704}


@pytest.mark.parametrize("stem, total", HUB_TOTALS.items(), ids=list(HUB_TOTALS))
def test_qwen35_checkpoints_add_up_to_the_hubs_count_with_their_tower_and_mtp_layer(stem, total):
    """The text decoder, the vision tower and the MTP layer, each counted from config.json, add up to the checkpoint's
    published parameter count to the parameter: the two extras are what the text part leaves out."""
    spec = import_model(CONFIGS / f"{stem}.json", read_headers=False).spec
    tower, mtp = spec.extra
    assert "vision" in tower.name and tower.loaded and not tower.in_official_count
    assert "multi-token-prediction" in mtp.name and not mtp.loaded
    assert _decoder(spec) + tower.params + mtp.params == total


def test_qwen35_27b_tower_and_mtp_layer_by_hand():
    """Qwen3.5-27B (hidden 5120; vision_config depth 27, width 1152, MLP 4304, out 5120, merge 2, patch 16 x 16 x 2,
    2,304 positions, no deepstack). Tower: patch_embed 3 x 2 x 16 x 16 x 1152 + 1152 = 1,770,624; pos_embed
    2304 x 1152 = 2,654,208; a block 4 x 1152 + (1152 x 3456 + 3456) + (1152^2 + 1152) + (1152 x 4304 + 4304)
    + (4304 x 1152 + 1152) = 15,239,504, x 27 = 411,466,608; merger (m = 4608) 2 x 1152 + (4608^2 + 4608) +
    (4608 x 5120 + 5120) = 44,838,656: 460,730,096 (transformers 5.23's Qwen3_5VisionModel on the meta device
    counts the same). MTP layer: q 5120 x (24 x 256 x 2, the output gate) = 62,914,560, k and v 2 x 5120 x 1024 =
    10,485,760, o 6144 x 5120 = 31,457,280, q/k norms 512, MLP 3 x 5120 x 17408 = 267,386,880, 2 norms 10,240;
    fc 10240 x 5120 = 52,428,800 and 3 norms 15,360: 424,699,392."""
    tower, mtp = import_model(CONFIGS / "Qwen__Qwen3.5-27B.json", read_headers=False).spec.extra
    assert tower.params == 1_770_624 + 2_654_208 + 27 * 15_239_504 + 44_838_656 == 460_730_096
    assert mtp.params == (62_914_560 + 10_485_760 + 31_457_280 + 512 + 267_386_880 + 10_240 + 52_428_800
                          + 15_360) == 424_699_392


def test_qwen3_vl_tower_has_its_deepstack_mergers():
    """Qwen3-VL-30B-A3B's tower merges features after blocks 8, 16 and 24 (deepstack_visual_indexes) through three
    more mergers, each with its LayerNorm over the merged 4608: 3 x (2 x 4608 + 4608^2 + 4608 + 4608 x 2048 + 2048)
    = 3 x 30,686,720 beside the final merger's 2 x 1152 + 21,238,272 + 9,439,232 = 30,679,808; with patch_embed,
    pos_embed and 27 blocks as Qwen3.5's: 538,631,408 (transformers 5.23's Qwen3VLMoeVisionModel counts the same)."""
    (tower,) = import_model(CONFIGS / "Qwen__Qwen3-VL-30B-A3B-Instruct.json", read_headers=False).spec.extra
    assert tower.params == 1_770_624 + 2_654_208 + 27 * 15_239_504 + 30_679_808 + 3 * 30_686_720 == 538_631_408


def test_glm_45_air_adds_up_to_its_checkpoint_with_its_nextn_layer():
    """GLM-4.5-Air's MTP layer, stored as DeepSeek-V3's is past the decoder (model.layers.46): a MoE decoder layer
    like the last (2,341,492,864), eh_proj 8192 x 4096 = 33,554,432, three norms 12,288, and its own embedding and
    output head copies 2 x 151,552 x 4,096 = 1,241,513,984: 3,616,573,568, which with the decoder's 106,852,251,264
    makes the checkpoint's 110,468,824,832 (its Hugging Face total as a public model table copies it, file index id
    70911651117). A drafter takes the target's embedding and lm_head (draft_params: the rest)."""
    (mtp,) = import_model(CONFIGS / "zai-org__GLM-4.5-Air.json", read_headers=False).spec.extra
    assert mtp.params == 2_341_492_864 + 33_554_432 + 12_288 + 1_241_513_984 == 3_616_573_568
    assert mtp.draft_params == 3_616_573_568 - 1_241_513_984 and not mtp.loaded
    spec = import_model(CONFIGS / "zai-org__GLM-4.5-Air.json", read_headers=False).spec
    assert _decoder(spec) + mtp.params == 110_468_824_832


# meta-llama/Llama-4-Scout-17B-16E-Instruct's and Maverick's vision_config, as public copies of their config.json
# print it (read via the file index: ids 41112263523, 68383952491); tests/data's copies of the two keep the text part
LLAMA4_VISION = {"hidden_act": "gelu", "hidden_size": 1408, "image_size": 336, "intermediate_size": 5632,
                 "model_type": "llama4_vision_model", "multi_modal_projector_bias": False, "norm_eps": 1e-05,
                 "num_attention_heads": 16, "num_channels": 3, "num_hidden_layers": 34, "patch_size": 14,
                 "pixel_shuffle_ratio": 0.5, "projector_dropout": 0.0, "projector_input_dim": 4096,
                 "projector_output_dim": 4096, "rope_theta": 10000, "vision_feature_layer": -1,
                 "vision_feature_select_strategy": "default", "vision_output_dim": 4096}


@pytest.mark.parametrize("stem, total", [
    # the checkpoints' Hugging Face totals: Scout's in a public model table (id 70911651117), Maverick's in Fireworks'
    # billing export documentation ("Llama 4 Maverick Basic,401583781376", id 16519339830)
    ("meta-llama__Llama-4-Scout-17B-16E-Instruct", 108_641_793_536),
    ("meta-llama__Llama-4-Maverick-17B-128E-Instruct", 401_583_781_376),
])
def test_llama4_adds_up_to_its_checkpoint_with_its_vision_tower(tmp_path, stem, total):
    """Llama 4's tower (h 1408, MLP 5632, 34 layers, 336 px in patches of 14): patch_embedding 3 x 14^2 x 1408 =
    827,904; class embedding 1,408; positions (24^2 + 1) x 1408 = 812,416; two LayerNorms 5,632; a layer 4 x
    (1408^2 + 1408) + (1408 x 5632 + 5632) + (5632 x 1408 + 1408) + 4 x 1408 = 23,807,872, x 34 = 809,467,648; the
    pixel-shuffle adapter 5632 x 4096 + 4096^2 = 39,845,888; the projector 4096 x 5120 = 20,971,520: 871,932,416
    (transformers 5.23 counts the same), which with either decoder makes its checkpoint's total."""
    raw = json.loads((CONFIGS / f"{stem}.json").read_text())
    spec = import_model(_write(tmp_path, {**raw, "vision_config": LLAMA4_VISION}), read_headers=False).spec
    (tower,) = spec.extra
    assert tower.params == 827_904 + 1_408 + 812_416 + 5_632 + 34 * 23_807_872 + 39_845_888 + 20_971_520
    assert _decoder(spec) + tower.params == total


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_a_towers_vision_config_is_its_catalog_twins(path, catalog):
    """The vision_config attributes SGLang sizes its margin by (schema.VisionConfigKeys), as the importer reads them
    and the catalog records them by hand: Qwen3.5/3.6's tower counts its blocks as `depth` (num_hidden_layers null),
    Gemma 3's SigLIP and Gemma 4's tower give num_hidden_layers 27, 1,152 wide."""
    twin = TWINS.get(path.stem)
    towers = [x for x in import_model(path, read_headers=False).spec.extra if x.vision_config is not None]
    recorded = [x.vision_config for x in catalog.model(twin).extra if x.vision_config is not None] if twin else []
    if not (towers and recorded):  # Qwen3-VL-30B-A3B's twin is the text model Qwen3-30B-A3B
        return
    (tower,), (recorded,) = towers, recorded
    assert tower.vision_config == recorded
    # Muse Glimmer's encoder has no shape llama.cpp's mmproj sizing knows (no encoder entry)
    assert (recorded.num_hidden_layers is None) == (tower.encoder is not None and tower.encoder.kind == "qwen_vl")


def test_layer_types_say_which_layers_slide_whatever_the_model_type(tmp_path):
    """OLMo 3 (model_type olmo3) slides three layers in four (layer_types; transformers Olmo3Attention takes the
    window on "sliding_attention" layers only): 64 layers import as 48 sliding + 16 full, not 64 sliding, so the
    full layers' cache grows with the context. Without layer_types Olmo3Config's default does the same (every fourth
    layer full), and an unknown type's window applies to every layer (as Mistral's)."""
    types = (["sliding_attention"] * 3 + ["full_attention"]) * 16
    base = {"model_type": "olmo3", "architectures": ["Olmo3ForCausalLM"], "vocab_size": 100278, "hidden_size": 5120,
            "intermediate_size": 27648, "num_hidden_layers": 64, "num_attention_heads": 40, "num_key_value_heads": 8,
            "max_position_embeddings": 65536, "sliding_window": 4096, "tie_word_embeddings": False,
            "torch_dtype": "bfloat16"}
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**base, "layer_types": types}))
    spec = import_model(p, read_headers=False).spec
    kinds = [(g.count, g.mixer.kind) for g in spec.layer_groups]
    assert kinds == [(48, "sliding"), (16, "full")] and spec.layer_pattern == [0, 0, 0, 1]
    p.write_text(json.dumps(base))
    im = import_model(p, read_headers=False)
    assert [(g.count, g.mixer.kind) for g in im.spec.layer_groups] == [(48, "sliding"), (16, "full")]
    assert any("Olmo3Config's default" in n for n in im.notes)
    p.write_text(json.dumps({**base, "model_type": "my_decoder", "architectures": ["MyDecoderForCausalLM"]}))
    spec = import_model(p, read_headers=False).spec
    assert [(g.count, g.mixer.kind) for g in spec.layer_groups] == [(64, "sliding")]


def test_muse_glimmer_adds_up_to_its_checkpoint_with_its_perception_encoder():
    """meta-models/Muse-Glimmer-30B's model.safetensors.index.json declares total_parameters 29,776,626,688, and
    runtime inspections print 1,852,639,744 of them in model.vision_tower (models/muse-glimmer-30b.yaml). By hand,
    the text model's layer: qkv 6656 x (32 + 2 x 2) x 128 = 30,670,848, o 4096 x 6656 and the output gate
    6656 x 4096 = 27,262,976 each, MLP 3 x 6656 x 19,968 = 398,721,024, four norms 26,624: 483,944,448; x 52
    + the final norm 6,656 + embedding and lm_head 2 x 202,048 x 6,656 = 27,854,780,928 (the q/k and embedding
    norms have no weight). The encoder: conv1_linear 1,176 x 1,536, a 1,024-row position table, ln_pre and ln_post,
    50 blocks of 36,985,088 = 1,852,639,744; the adapter 6,144 x 4,096 + 4,096^2 and the projection 4,096 x 6,656:
    69,206,016."""
    im = import_model(CONFIGS / "meta-models__Muse-Glimmer-30B.json", read_headers=False)
    text = sum(p.params for p in model_pieces(im.spec) if p.stored and p.component != "extra")
    (tower,) = im.spec.extra
    assert (text, tower.params) == (27_854_780_928, 1_852_639_744 + 69_206_016)
    assert text + tower.params == 29_776_626_688
    from llmsize.estimate.plan import resolve_format
    from llmsize.estimate.weights import weight_bytes
    # BF16: the checkpoint index's total_size, 59,553,253,376 B (a public breakdown quotes it; RESULTS.md)
    assert weight_bytes(im.spec, *resolve_format(im.spec, "bf16", "all")).bytes_total == 59_553_253_376
    assert [(g.count, g.mixer.kind, g.mixer.output_gate) for g in im.spec.layer_groups] == [
        (39, "sliding", True), (13, "full", True)]
    assert (tower.vision_config.num_hidden_layers, tower.vision_config.hidden_size) == (50, 1536)


def test_olmo_norms_its_whole_query_and_key_and_adds_up_to_the_published_count(tmp_path):
    """OLMo 3.1 32B: two public reports that instantiate allenai/Olmo-3.1-32B-Instruct print 32,233,522,176
    parameters (file ids 58383447664 and 69538756725 in the public code index; models/olmo-3.1-32b.yaml). By hand:
    a layer's q 5120 x 5120 = 26,214,400, k and v 5120 x 1024 = 5,242,880 each, o 26,214,400, MLP
    3 x 5120 x 27,648 = 424,673,280, two layer norms 10,240, q_norm 5,120 and k_norm 1,024 (the whole projections,
    transformers Olmo3Attention): 487,604,224; x 64 = 31,206,670,336, + the final norm 5,120 + embedding and
    lm_head 2 x 100,278 x 5,120 = 1,026,846,720: 32,233,522,176. Per-head norms (2 x 128) would be 393,216 short.
    OLMo 2 has the same layers and no window."""
    path = CONFIGS / "allenai__Olmo-3.1-32B-Instruct.json"
    spec = import_model(path, read_headers=False).spec
    assert sum(p.params for p in model_pieces(spec) if p.stored) == 32_233_522_176
    assert all(g.extra_params == (40 + 8) * 128 and not g.mixer.qk_norm for g in spec.layer_groups)
    raw = json.loads(path.read_text())
    raw = {k: v for k, v in raw.items() if k not in ("layer_types", "sliding_window")}
    (tmp_path / "config.json").write_text(json.dumps({**raw, "model_type": "olmo2",
                                                      "architectures": ["Olmo2ForCausalLM"]}))
    im = import_model(tmp_path / "config.json", read_headers=False)
    assert [(g.count, g.mixer.kind) for g in im.spec.layer_groups] == [(64, "full")]
    assert sum(p.params for p in model_pieces(im.spec) if p.stored) == 32_233_522_176
    assert not any("not known to llmsize" in n for n in im.notes)


def test_gemma4_vision_tower_is_counted_where_its_linears_are_plain():
    """Gemma 4 26B-A4B's tower (27 layers 1152 wide, MLP 4304, 16 heads of 72, patches of 16): the position table 2 x
    10,240 x 1152 = 23,592,960; the patch projection 768 x 1152 = 884,736; a layer 4 x 1152^2 + 2 x 72 + 3 x 1152 x
    4304 + 4 x 1152 = 20,187,792, x 27 = 545,070,384; the embedder 1152 x 2816 = 3,244,032: 572,792,112 (transformers
    5.23's Gemma4VisionModel and Gemma4MultimodalEmbedder count the same). E2B's tower, of clipped linears beside an
    audio tower, is not counted, and its note says so."""
    (tower,) = import_model(CONFIGS / "google__gemma-4-26B-A4B.json", read_headers=False).spec.extra
    assert tower.params == 23_592_960 + 884_736 + 27 * 20_187_792 + 3_244_032 == 572_792_112
    e2b = import_model(CONFIGS / "google__gemma-4-E2B-it.json", read_headers=False)
    assert not e2b.spec.extra and any("not counted" in n for n in e2b.notes)


def test_gemma3_siglip_tower_is_counted_as_the_catalog_counts_it(catalog, tmp_path):
    """google/gemma-3-27b-it's SigLIP tower and projector, counted from its vision_config, are the catalog's hand count
    (models/gemma-3-27b.yaml: 416,866,032 + [1152, 5376] + 1152 = 423,060,336), so the import no longer says the tower
    is left out; a SigLIP with a pooling head (vision_use_head true), which Gemma 3 has not, is refused."""
    im = import_model(CONFIGS / "google__gemma-3-27b-it.json", read_headers=False)
    (tower,) = im.spec.extra
    assert tower.params == catalog.model("gemma-3-27b").extra[0].params == 416_866_032 + 1152 * 5376 + 1152
    assert not any("vision tower" in n for n in im.notes)
    raw = json.loads((CONFIGS / "google__gemma-3-27b-it.json").read_text())
    raw["vision_config"]["vision_use_head"] = True
    with pytest.raises(ConfigError, match="vision_use_head is not false"):
        import_model(_write(tmp_path, raw), read_headers=False)


@pytest.mark.parametrize("change, match", [
    ({"vision_config": [1, 2]}, "vision_config is"),
    ({"vision_config": {"depth": "27"}}, "depth is the string '27'; expected an integer"),
    ({"vision_config": {"depth": 0}}, "depth is '0'"),
    ({"vision_config": {"deepstack_visual_indexes": 3}}, "deepstack_visual_indexes is '3', not a list"),
    ({"text_config": {"mtp_num_hidden_layers": -1}}, "mtp_num_hidden_layers is '-1'"),
    # a field left to transformers' default that cannot be this model's (the merger feeds the 5120-wide text model)
    ({"vision_config": {"out_hidden_size": None}}, "out_hidden_size is 3584 \\(transformers' default"),
    ({"vision_config": {"out_hidden_size": 4096}}, "out_hidden_size is 4096 \\(given\\), not the text model's"),
    ({"vision_config": {"hidden_size": 2**39}}, "more than any checkpoint holds"),
])
def test_a_bad_vision_config_or_mtp_count_is_a_one_line_error(tmp_path, change, match):
    raw = json.loads((CONFIGS / "Qwen__Qwen3.5-27B.json").read_text())
    for key, value in change.items():  # into the real block, a None taking the field out
        merged = {**raw[key], **value} if isinstance(value, dict) else value
        raw[key] = {k: v for k, v in merged.items() if v is not None} if isinstance(merged, dict) else merged
    p = _write(tmp_path, raw)
    with pytest.raises(ConfigError, match=match) as e:
        import_model(p, read_headers=False)
    assert "\n" not in e.value.one_line()


def test_mtp_layers_with_embeddings_of_their_own_are_said_to_be_left_out(tmp_path):
    raw = json.loads((CONFIGS / "Qwen__Qwen3.5-27B.json").read_text())
    raw["text_config"]["mtp_use_dedicated_embeddings"] = True
    im = import_model(_write(tmp_path, raw), read_headers=False)
    assert any("mtp_use_dedicated_embeddings" in n for n in im.notes)
    raw["text_config"]["mtp_num_hidden_layers"] = 0  # none: no extra, no note
    im = import_model(_write(tmp_path, raw), read_headers=False)
    assert [x.name for x in im.spec.extra] == ["vision tower + merger (vision_config)"]
    assert not any("mtp_use_dedicated_embeddings" in n for n in im.notes)


def test_an_unknown_hybrid_is_refused(tmp_path):
    import json as _json

    raw = _json.loads((CONFIGS / "Qwen__Qwen3.6-27B.json").read_text())
    raw["text_config"]["model_type"] = "qwen9_hybrid_text"
    raw["model_type"] = "qwen9_hybrid"
    (tmp_path / "config.json").write_text(_json.dumps(raw))
    with pytest.raises(Exception, match="linear_attention"):
        import_model(tmp_path / "config.json", read_headers=False)


def test_kimi_k3_adds_up_to_its_published_size_and_checkpoint():
    """Kimi K3 (tests/data/hf-configs/moonshotai__Kimi-K3.json; SGLang 0.5.23 models/kimi_k3.py): a KDA layer with a
    full-rank output gate, hidden 7,168, 96 heads of 128: q/k/v/g and o 5 x 88,080,384, f_a and f_b 128 x (7,168 +
    12,288), b 96 x 7,168, the convs 3 x 12,288 x 4, A_log 96, dt_bias 12,288, o_norm 128: 443,740,384 (69 of them);
    an MLA layer: q_a 1,536 x 7,168, its norm, q_b 1,536 x 96 x 192, kv_a 7,168 x 576, its norm, kv_b 512 x 96 x 256,
    o and the output gate 2 x 88,080,384: 232,196,096 (24); a MoE layer: 896 experts of 3 x 3,584 x 3,072 in the
    latent, its down and up projections 2 x 7,168 x 3,584, its norm 3,584, the router 7,168 x 896 + 896, one shared
    MLP of 3 x 7,168 x 6,144 (92 of them); the dense layer 3 x 7,168 x 33,792; each layer 4 norms and two [1, 7,168]
    residual projections; at the top 3 x 7,168 and the untied embedding and lm_head: 2,779,484,476,000, and the
    tower and projector 447,358,976: 2,779,931,834,976, NVIDIA's "2.8T total / 104B activated" (104,189,612,640
    without the input embedding). Its routed experts MXFP4 (4.25 bits), the rest BF16: 1,560,838,075,584 B, the
    published 1.56 TB. A KDA layer's state: 96 x 128 x 128 x 4 B + 3 x 36,864 x 2 B = 6,512,640 B."""
    im = import_model(CONFIGS / "moonshotai__Kimi-K3.json", read_headers=False)
    spec = im.spec
    assert _decoder(spec) == 2_779_484_476_000 and spec.extra[0].params == 447_358_976
    assert params_active(spec) == 104_189_612_640
    assert (im.release.quant, im.release.scope) == ("mxfp4", "experts")
    from llmsize.estimate.plan import resolve_format
    from llmsize.estimate.weights import weight_bytes
    assert weight_bytes(spec, *resolve_format(spec, "mxfp4", "experts")).bytes_total == 1_560_838_075_584
    kv = kv_bytes(spec, 4096, "bf16")
    assert kv.bytes_per_token_by_kind["mla"] == 24 * 576 * 2
    assert kv.bytes_by_kind["linear"] == 69 * (96 * 128 * 128 * 4 + 3 * 36_864 * 2)
    groups = [(g.count, g.mixer.kind, g.mlp.kind) for g in spec.layer_groups]
    assert groups == [(1, "linear", "dense"), (68, "linear", "moe"), (24, "mla", "moe")]
    assert all(g.mixer.gate_full_rank for g in spec.layer_groups if g.mixer.kind == "linear")
    assert all(g.mixer.q_lora_rank == 1536 and g.mixer.output_gate for g in spec.layer_groups if g.mixer.kind == "mla")


def test_kimi_k25s_moonvit_is_counted_as_sglang_builds_it(tmp_path):
    """Kimi K2.5's MoonViT (SGLang 0.5.23 models/kimi_k25.py; its config names neither norms nor biases, so
    KimiK25VisionConfig's: LayerNorms, biases, the patchmerger projector): per block two LayerNorms 4 x 1,152, qkv
    1,152 x 3,456 + 3,456, proj 1,152^2 + 1,152, fc0 and fc1 2 x 1,152 x 4,304 + 4,304 + 1,152: 15,239,504, x 27;
    the patch Conv2d 3 x 14^2 x 1,152 + 1,152, the 64 x 64 table, the final LayerNorm: 416,866,032 (the card's
    "400M"); the projector's LayerNorm, 4,608^2 + 4,608 and 4,608 x 7,168 + 7,168: 54,277,888. A projector of
    another name is refused in one line."""
    raw = json.loads((CONFIGS / "moonshotai__Kimi-K2.5.json").read_text())
    (tower,) = import_model(CONFIGS / "moonshotai__Kimi-K2.5.json", read_headers=False).spec.extra
    assert tower.params == 416_866_032 + 54_277_888
    (tmp_path / "config.json").write_text(json.dumps({**raw, "vision_config": {**raw["vision_config"],
                                                                              "mm_projector_type": "mlp3"}}))
    with pytest.raises(ConfigError, match="mm_projector_type is 'mlp3'"):
        import_model(tmp_path / "config.json", read_headers=False)


def test_a_kimi_linear_config_that_cannot_be_read_is_one_line(tmp_path):
    raw = json.loads((CONFIGS / "moonshotai__Kimi-K3.json").read_text())
    for where, key, value, says in [("linear_attn_config", "use_full_rank_gate", "yes", "use_full_rank_gate is"),
                                    (None, "routed_expert_hidden_size", [3584], "routed_expert_hidden_size is"),
                                    (None, "attn_res_block_size", 0, "attn_res_block_size is"),
                                    (None, "mla_use_output_gate", "true", "mla_use_output_gate is")]:
        bad = json.loads(json.dumps(raw))
        (bad["text_config"][where] if where else bad["text_config"])[key] = value
        (tmp_path / "config.json").write_text(json.dumps(bad))
        with pytest.raises(ConfigError, match=says):
            import_model(tmp_path / "config.json", read_headers=False)


@pytest.mark.parametrize("stem, quant, scope", [
    ("openai__gpt-oss-20b", "mxfp4", "experts"),              # modules_to_not_convert: self_attn, router
    ("Qwen__Qwen3-30B-A3B-FP8", "fp8-block128", "linear"),    # weight_block_size [128, 128]; norms/gates kept
    ("deepseek-ai__DeepSeek-V3", "fp8-block128", "linear"),
    ("nvidia__Gemma-4-31B-IT-NVFP4", "nvfp4", "mlp"),         # every self_attn excluded
    ("meta-llama__Llama-2-7b-hf", "fp16", "all"),             # torch_dtype float16
    ("meta-llama__Llama-3.1-8B-Instruct", "bf16", "all"),
])
def test_release_format_from_the_config(stem, quant, scope):
    im = import_model(CONFIGS / f"{stem}.json", read_headers=False)
    assert (im.release.quant, im.release.scope) == (quant, scope)
    assert (im.spec.release.quant, im.spec.release.scope) == (quant, scope)


@pytest.mark.parametrize("stem, hq, quant, scope, kv", [
    ("nvidia__Llama-3.1-70B-Instruct-FP8", None, "fp8", "linear", "fp8"),
    # attention kept in 16 bits in its 6 layers, Mamba-2 in 6 of 23: each component as most of its layers are
    ("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", None, "experts=nvfp4,shared_experts=nvfp4,ssm=nvfp4", "all",
     "fp8"),
    # nvidia's exports beside the base model's config.json (the same layers). Every layer's
    # model.language_model.layers.N.mlp* (Gemma 4's dense MLP beside its experts), router* and self_attn*: read with
    # the multimodal prefix, only the routed experts are NVFP4 (scope mlp when the probe names lacked the prefix)
    ("google__gemma-4-26B-A4B", "nvidia__Gemma-4-26B-A4B-NVFP4", "nvfp4", "experts", "fp8"),
    # every layer's linear_attn* or self_attn* and mlp.shared_expert*: routed experts only (was mlp)
    ("Qwen__Qwen3.5-122B-A10B", "nvidia__Qwen3.5-122B-A10B-NVFP4", "nvfp4", "experts", "fp8"),
])
def test_modelopt_folder_reads_hf_quant_config(tmp_path, stem, hq, quant, scope, kv):
    shutil.copy(CONFIGS / f"{stem}.json", tmp_path / "config.json")
    shutil.copy(CONFIGS / f"{hq or stem}.hf_quant_config.json", tmp_path / "hf_quant_config.json")
    im = import_model(tmp_path)
    assert (im.release.quant, im.release.scope, im.release.kv_cache_dtype) == (quant, scope, kv)
    assert any("SGLang's default cache takes it" in n for n in im.notes)
    # the spec keeps it: vLLM's and SGLang's default cache dtype ('auto') reads a ModelOpt checkpoint's FP8 scheme
    assert (im.spec.release.kv_cache, im.spec.release.kv_cache_from) == ("fp8", "modelopt")


def test_a_checkpoints_fp8_cache_is_the_serving_engines_default(run_cli, tmp_path):
    """nvidia/Gemma-4-31B-IT-NVFP4 declares an FP8 KV cache (kv_cache_scheme, 8-bit float): vLLM (0.14 on,
    utils/torch_utils.py resolve_kv_cache_dtype_string) and SGLang (configure_kv_cache_dtype) resolve --kv-cache-dtype
    auto to it, so the plan under either keeps an FP8 cache unless told; llama.cpp's is its own f16; the same
    model's shape in another format (another checkpoint) keeps the engine's 16-bit default. A compressed-tensors
    scheme is SGLang's default, not vLLM's."""
    from llmsize.catalog.loader import Catalog
    from llmsize.estimate.runtimes import runtime_kv_dtype

    def kv(*args):
        code, out, err = run_cli("plan", "gemma-4-31b-nvfp4", "--gpu", "h100", *args, "--json")
        assert code == 0, err
        return json.loads(out)["inputs"]["kv_dtype"]

    assert (kv(), kv("--runtime", "sglang"), kv("--runtime", "llamacpp", "--quant", "gguf-q4_k_m")) == \
        ("fp8", "fp8", "fp16")
    assert kv("--quant", "bf16") == "bf16" and kv("--kv-dtype", "bf16") == "bf16"
    m = Catalog().model("gemma-4-31b-nvfp4")
    ct = m.model_copy(update={"release": m.release.model_copy(update={"kv_cache_from": "compressed-tensors"})})
    assert (runtime_kv_dtype("vllm", ct), runtime_kv_dtype("sglang", ct)) == ("bf16", "fp8")


def test_nemotron_nano_nvfp4_partial_exclusions_are_reported(tmp_path):
    """nvidia's Nemotron 3 Nano NVFP4 keeps its 6 attention layers and 6 of its 23 Mamba-2 layers in 16 bits. Once
    priced with every linear layer in NVFP4 (the scope's default, with a note); now each component as most of its
    layers are: attention in 16 bits, the Mamba-2 projections in NVFP4, and the note names the 6 exceptions."""
    stem = "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
    shutil.copy(CONFIGS / f"{stem}.json", tmp_path / "config.json")
    shutil.copy(CONFIGS / f"{stem}.hf_quant_config.json", tmp_path / "hf_quant_config.json")
    im = import_model(tmp_path)
    assert (im.release.quant, im.release.scope) == ("experts=nvfp4,shared_experts=nvfp4,ssm=nvfp4", "all")
    assert any(n.startswith("ssm: the ignore list keeps it in 16 bits in 6 of its 23 layers; priced as nvfp4")
               for n in im.notes)


def _write(tmp_path, obj, name="config.json"):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


def test_infinity_in_json_is_accepted(tmp_path):
    raw = json.loads((CONFIGS / "meta-llama__Llama-2-7b-hf.json").read_text())
    text = json.dumps(raw)[:-1] + ', "max_grad_norm": Infinity}'
    im = import_model(_write(tmp_path, text), read_headers=False)
    assert im.spec.num_layers == 32


@pytest.mark.parametrize("dtype, said", [("float3", "dtype `float3` in config.json is not one of"),
                                         (None, "no dtype in config.json: bf16 assumed"), ("bfloat16", None)])
def test_a_dtype_it_cannot_read_is_said_not_silently_bf16(tmp_path, dtype, said):
    raw = json.loads((CONFIGS / "meta-llama__Llama-2-7b-hf.json").read_text())
    raw.pop("torch_dtype", None)
    raw.pop("dtype", None)
    if dtype:
        raw["torch_dtype"] = dtype
    im = import_model(_write(tmp_path, raw), read_headers=False)
    assert im.spec.release.quant == "bf16"
    notes = " ".join(im.notes)
    assert (said in notes) if said else "bf16 assumed" not in notes


def test_an_fp8_block_other_than_128_is_priced_with_128s_scales_and_said(tmp_path):
    raw = {"model_type": "llama", **CORE, "quantization_config": {"quant_method": "fp8", "weight_block_size": [64, 64]}}
    im = import_model(_write(tmp_path, raw), read_headers=False)
    assert im.spec.release.quant == "fp8-block128"
    assert any("weight_block_size [64, 64] priced as 128x128" in n for n in im.notes)


def test_unknown_model_type_with_standard_fields_is_generic_and_says_so(tmp_path):
    raw = {"model_type": "brand_new", "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
           "num_key_value_heads": 2, "intermediate_size": 4096, "vocab_size": 1000}
    im = import_model(_write(tmp_path, raw), read_headers=False)
    assert im.generic and "not known to llmsize" in im.notes[0]
    assert im.spec.layer_groups[0].mixer.num_key_value_heads == 2


@pytest.mark.parametrize("extra,needle", [
    ({"model_type": "bert", "architectures": ["BertForMaskedLM"]}, r"an encoder-only model \(BertForMaskedLM\)"),
    ({"model_type": "xlm-roberta", "architectures": ["XLMRobertaForSequenceClassification"]}, "encoder-only"),
    ({"model_type": "brand_new_t5", "is_encoder_decoder": True}, "an encoder-decoder"),
])
def test_an_encoder_config_is_refused_not_sized_as_a_decoder(tmp_path, extra, needle):
    """bert-base's config.json (110 M parameters, no causal decoder) had planned as a generic decoder of 160 M
    parameters with a decode speed; an unknown type with encoder heads (and no ...ForCausalLM beside them) or
    is_encoder_decoder is refused. A decoder of a known head beside them is still generic (the test above)."""
    raw = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
           "vocab_size": 30522, "max_position_embeddings": 512, **extra}
    with pytest.raises(ConfigError, match=needle):
        import_model(_write(tmp_path, raw), read_headers=False)
    both = {**raw, "model_type": "brand_new", "architectures": ["NewForCausalLM", "NewForSequenceClassification"],
            "is_encoder_decoder": False}
    assert import_model(_write(tmp_path, both), read_headers=False).generic


def test_unknown_model_type_without_fields_lists_what_it_needs(tmp_path):
    with pytest.raises(ConfigError, match=r"config\.json: model_type 'mystery' is not known and the config lacks "
                                          r"num_hidden_layers, num_attention_heads, intermediate_size"):
        import_model(_write(tmp_path, {"model_type": "mystery", "hidden_size": 8, "vocab_size": 10}))


CORE = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
        "vocab_size": 100}


@pytest.mark.parametrize("content, match", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "top level is not a JSON object"),
    # a block of side 0 was priced as per-tensor FP8 beside a note saying 128x128
    ({"model_type": "llama", **CORE, "quantization_config": {"quant_method": "fp8", "weight_block_size": [0, 0]}},
     r"weight_block_size \[0, 0\] is not two positive block sides"),
    ({"model_type": "llama", "num_hidden_layers": "many"},
     "num_hidden_layers is the string 'many'; expected an integer"),
    ({"model_type": "llama", **CORE, "num_attention_heads": 7, "num_key_value_heads": 2, "head_dim": 16},
     "invalid at"),
    ({"model_type": "llama", **CORE, "num_attention_heads": 7}, "hidden_size 64 is not a multiple of "
     "num_attention_heads 7"),
    ({"model_type": "gemma4", "num_hidden_layers": 2, "layer_types": ["full_attention"], "hidden_size": 8,
      "intermediate_size": 8, "num_attention_heads": 1, "vocab_size": 4}, "layer_types has 1 entries"),
    ({"model_type": "nemotron_h", "hybrid_override_pattern": "X*", "num_hidden_layers": 2, "hidden_size": 8,
      "vocab_size": 4}, "unknown layer 'X'"),
    ({"model_type": "llama", **CORE, "quantization_config": {"quant_method": "hqq"}},
     "method 'hqq' is not supported"),
])
def test_bad_configs_are_one_line_errors_naming_the_file(tmp_path, content, match):
    p = _write(tmp_path, content)
    with pytest.raises(ConfigError, match=match) as e:
        import_model(p, read_headers=False)
    assert str(p) in e.value.one_line() and "\n" not in e.value.one_line()


def test_fuzzed_configs_fail_only_with_one_line_errors(tmp_path):
    """1,100 seeded mutations of the shared configs (keys dropped, values replaced by wrong types, huge or
    negative numbers, nested junk): each imports or raises an LlmsizeError naming the file; nothing else."""
    import random

    from llmsize.errors import LlmsizeError
    rng = random.Random(7)
    bases = [json.loads(p.read_text()) for p in ALL]
    junk = [None, -1, 0, 10**12, 2.5, "x", [], {}, [1, "a"], {"a": None}, True, float("inf")]
    p = tmp_path / "config.json"
    errors = 0
    for i in range(1100):
        raw = json.loads(json.dumps(rng.choice(bases)))
        target = raw.get("text_config") if isinstance(raw.get("text_config"), dict) and rng.random() < .7 else raw
        for _ in range(rng.randint(1, 3)):
            keys = list(target)
            if not keys:
                break
            k = rng.choice(keys)
            if rng.random() < 0.4:
                del target[k]
            else:
                target[k] = rng.choice(junk)
        p.write_text(json.dumps(raw))
        try:
            import_model(p, read_headers=False)
        except LlmsizeError as e:
            assert str(p) in e.one_line() and "\n" not in e.one_line()
            errors += 1
    assert 100 < errors < 1100


def test_gemma2_slides_every_other_layer_and_ties_its_embedding(tmp_path):
    """google/gemma-2-9b-it's config.json has neither layer_types nor tie_word_embeddings: Gemma2Config slides
    every other layer, the first one first, and ties. Parameters by hand: per layer q 3584 x 4096 = 14,680,064,
    k and v 3584 x 2048 = 7,340,032 each, o 14,680,064, MLP 3 x 3584 x 14,336 = 154,140,672, 4 norms 14,336:
    198,195,200; x 42 + the final norm 3,584 = 8,324,201,984 (without the embedding), + the tied
    embedding 256,000 x 3,584 = 917,504,000: 9,241,705,984."""
    spec = import_model(CONFIGS / "google__gemma-2-9b-it.json", read_headers=False).spec
    assert spec.tie_word_embeddings
    kinds = [(g.count, g.mixer.kind, getattr(g.mixer, "sliding_window", None)) for g in spec.layer_groups]
    assert kinds == [(21, "sliding", 4096), (21, "full", None)]
    assert sum(p.params for p in model_pieces(spec) if p.stored) == 9_241_705_984
    raw = json.loads((CONFIGS / "google__gemma-2-9b-it.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**raw, "num_hidden_layers": 3, "tie_word_embeddings": False,
                                                      "layer_types": ["full_attention", "full_attention",
                                                                      "sliding_attention"]}))
    spec = import_model(tmp_path / "config.json", read_headers=False).spec  # what the file says wins
    assert not spec.tie_word_embeddings
    assert [(g.count, g.mixer.kind) for g in spec.layer_groups] == [(2, "full"), (1, "sliding")]


def _kinds(spec) -> list[str]:
    return [f"{g.mixer.kind if g.mixer else '-'}/{g.mlp.kind if g.mlp else '-'}" for g in spec.layer_stack()]


@pytest.mark.parametrize("path", [p for p in ALL if p.stem in TWINS], ids=lambda p: p.stem)
def test_the_layers_stack_in_the_configs_order(path, catalog):
    """Each layer's kind in stack order, as the config lists them (layer_types, Gemma's every sixth global layer,
    gpt-oss's alternation, Qwen3.5's full attention every fourth layer), is the catalog twin's: llama.cpp's -ngl
    takes the last layers, so which kind sits where decides the cache on each device (an audit saw six full
    layers' cache on the card for Gemma 3 12B at -ngl 7, where llama.cpp puts five sliding and one full)."""
    im = import_model(path, read_headers=False)
    assert _kinds(im.spec) == _kinds(catalog.model(TWINS[path.stem]))


def test_gemma3_12b_at_ngl_7_caches_five_sliding_layers_and_one_full_on_the_card(catalog):
    """By hand: 8 KV heads x 256 x (K + V) x 2 B = 8,192 B a token a layer. At -c 32768 a full layer holds 32,768
    cells (256 MiB), a sliding one PAD(1,024 + 512, 256) = 1,536 (12 MiB). -ngl 7 is the output and layers 42-47:
    42-46 slide and 47 is global (every sixth), 5 x 12 + 256 = 316 MiB on the card, where the groups taken in
    file order put six global layers there (1,536 MiB)."""
    from llmsize.estimate.llamacpp_memory import LlamaCppSettings, gguf_file_tensors, llamacpp_ledger

    m = catalog.model("gemma-3-12b")
    led = llamacpp_ledger(m, catalog.gpu("rtx4060ti16"), gguf_file_tensors(m, "gguf-q4_k_m"),
                          LlamaCppSettings(ctx_size=32768, gpu_layers=7))
    assert led.gpu.kv_bytes == 316 * 2**20


UNSUPPORTED = Path(__file__).parent / "data" / "hf-configs-unsupported"


@pytest.mark.parametrize("stem, says", [
    # MiMo-V2-Flash: 256 routed experts, sliding layers with heads of their own
    ("XiaomiMiMo__MiMo-V2-Flash", "model_type 'mimo_v2_flash' is not known and its config has n_routed_experts = 256"),
])
def test_configs_of_layers_the_importer_does_not_model_are_refused_not_read_as_dense(stem, says, run_cli):
    """A config whose layers route to experts, recur or split their heads in ways no mapper models is refused in
    one line, exit 2, where it used to import as a much smaller dense model."""
    path = UNSUPPORTED / f"{stem}.json"
    with pytest.raises(ConfigError) as e:
        import_model(path, read_headers=False)
    assert says in e.value.message
    code, out, err = run_cli("import", str(path))
    assert code == 2 and says in err and "Traceback" not in err and not out


def test_kimi_and_minimax_configs_import_as_their_published_sizes():
    """Kimi K2 (model_type kimi_k2: DeepSeek-V3's layers, 384 experts) and MiniMax-M2.5 (minimax_m2: GQA + 256
    experts, no shared one) import with their experts; Kimi K2.5's text model sits in text_config, its experts in
    INT4 groups of 32 (compressed-tensors): 4.5 bits, not a group of 128's 4.125."""
    k2 = import_model(CONFIGS / "moonshotai__Kimi-K2-Instruct.json", read_headers=False).spec
    k25 = import_model(CONFIGS / "moonshotai__Kimi-K2.5.json", read_headers=False).spec
    mm = import_model(CONFIGS / "MiniMaxAI__MiniMax-M2.5.json", read_headers=False).spec
    # "one trillion total parameters and 32 billion active per forward pass" (https://vercel.com/ai-gateway/models/
    # kimi-k2/faq); counted from the config: 1,026.4 B, 31.7 B active without the input embedding
    assert params_comparable_to_official(k2) == params_comparable_to_official(k25) == pytest.approx(1.026e12, rel=1e-3)
    assert params_active(k2) == pytest.approx(32e9, rel=0.02)
    # its ignore list keeps attention, the shared experts and the dense first layer's MLP in 16 bits
    # (re:.*self_attn.*, re:.*shared_experts.*, re:.*mlp\\.(gate|up|gate_up|down)_proj.*): only the routed experts
    # are INT4, and the checkpoint is ~595 GB (594.2 GB here), not the 589.8 GB of an MLP scope
    assert (k25.release.quant, k25.release.scope) == ("int4-g32", "experts")
    # "230 billion total parameters with 10 billion active parameters" (SGLang's MiniMax-M2 docs,
    # https://docs.sglang.io/docs/basic_usage/minimax_m2, for M2, M2.1 and M2.5); the Hub lists M2.5 at 229B
    assert params_comparable_to_official(mm) == pytest.approx(229e9, rel=0.01)
    assert params_active(mm) == pytest.approx(10e9, rel=0.05)
    assert mm.release.quant == "fp8-block128"


def test_glm_5_imports_as_deepseek_v32_layers_at_its_published_size():
    """GLM-5 (model_type glm_moe_dsa) was refused as an unknown type with latent attention: it is DeepSeek-V3.2's
    layers at other widths (vLLM's GlmMoeDsaForCausalLM is a DeepseekV2ForCausalLM; mlx-lm's glm_moe_dsa Model
    subclasses its DeepSeek-V3.2 one). "744B parameters (40B active)" (zai-org/GLM-5 README.md @218be52)."""
    glm = import_model(CONFIGS / "zai-org__GLM-5.json", read_headers=False).spec
    assert params_comparable_to_official(glm) == pytest.approx(744e9, rel=0.005)
    assert params_active(glm) == pytest.approx(40e9, rel=0.05)
    # every layer MLA with the sparse-attention indexer; three dense layers (first_k_dense_replace 3)
    assert sum(g.count for g in glm.layer_groups) == 78
    assert all(g.mixer.kind == "mla" and (g.mixer.indexer.n_heads, g.mixer.indexer.head_dim,
                                          g.mixer.indexer.topk) == (32, 128, 2048) for g in glm.layer_groups)
    assert sum(g.count for g in glm.layer_groups if g.mlp.kind == "dense") == 3
    # a cached token, a layer: the latent 512 + 64 in bf16 (1,152 B) and the indexer's FP8 key with one FP32
    # scale per 128 values (128 + 4 B)
    assert kv_bytes(glm, 1, "bf16").bytes_per_token == 78 * (1152 + 132)


def test_glm_5_fp8_keeps_only_norms_routers_and_the_indexer_projection_in_16_bits():
    """GLM-5-FP8's modules_to_not_convert names self_attn.indexers_proj and self_attn.indexer.k_norm in every layer:
    they are the indexer's few weights, not attention's projections. Read as attention, they made the scope `mlp`
    (attention in 16 bits: 13.6 GB more than its FP8, 27.2 GB against 13.6)."""
    im = import_model(CONFIGS / "zai-org__GLM-5-FP8.json", read_headers=False)
    assert im.spec.release.quant == "fp8-block128"
    assert im.spec.release.scope != "mlp"
    assert not any("attention" in n for n in im.notes)


def test_glm_5_2_layers_that_reuse_a_top_k_hold_no_indexer():
    """GLM-5.2's indexer_types: 21 'full' layers run the indexer, 57 'shared' ones reuse the top-k of the last full
    layer (IndexCache, arXiv 2603.12201): vLLM builds no Indexer there (deepseek_v2.py, from index_topk_freq 4 and
    index_skip_topk_offset 3), so no indexer weights and no indexer key cache; attention still reads 2,048 tokens."""
    glm5 = import_model(CONFIGS / "zai-org__GLM-5.json", read_headers=False).spec
    im = import_model(CONFIGS / "zai-org__GLM-5.2.json", read_headers=False)
    spec = im.spec
    shared = sum(g.count for g in spec.layer_groups if g.mixer.indexer.shared)
    assert shared == 57 and sum(g.count for g in spec.layer_groups) == 78
    assert all(g.mixer.indexer.topk == 2048 for g in spec.layer_groups)
    assert any("57 of 78 layers reuse an earlier layer's top-k" in n for n in im.notes)
    # a cached token: 78 latents (576 bf16 values, 1,152 B) and 21 indexer keys (128 FP8 + one FP32 scale)
    assert kv_bytes(spec, 1, "bf16").bytes_per_token == 78 * 1152 + 21 * 132
    # GLM-5's count less 57 indexers: wq_b 2048 x 32 x 128, wk 6144 x 128, weights_proj 6144 x 32, k_norm 2 x 128
    one = 2048 * 32 * 128 + 6144 * 128 + 6144 * 32 + 2 * 128
    assert _decoder(glm5) - _decoder(spec) == 57 * one
    # at 100,000 cached tokens a decode step scores them in 21 layers (32 heads x 128 x 2 FLOPs a token), not 78; both
    # attend to 2,048 in every layer; the indexers' matrices are 2 FLOPs a weight
    scoring = 2 * 32 * 128 * 100_000
    assert decode_flops_per_token(glm5, 100_000) - decode_flops_per_token(spec, 100_000) == pytest.approx(
        57 * scoring + 2 * 57 * (one - 2 * 128), rel=1e-9)  # the k_norm multiplies nothing
    # without indexer_types, vLLM's rule from the period and offset picks the same layers
    raw = json.loads((CONFIGS / "zai-org__GLM-5.2.json").read_text())
    del raw["indexer_types"]
    assert map_config(raw, "config.json").fields["layer_groups"] == \
        map_config(json.loads((CONFIGS / "zai-org__GLM-5.2.json").read_text()), "config.json").fields["layer_groups"]


def test_latent_moe_experts_work_at_the_latent_width():
    """Nemotron 3 Super and Ultra (LatentMoE, arXiv 2601.18089): the routed experts read and write a latent of
    moe_latent_size, which fc1_latent_proj and fc2_latent_proj enter and leave at the hidden size. Refused before
    (read at full width, Super was 458.6 B); now 120.7 B and 549.3 B, the 120B-A12B and 550B-A55B of their names."""
    sup = import_model(CONFIGS / "nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8.json", read_headers=False).spec
    ultra = import_model(CONFIGS / "nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16.json", read_headers=False).spec
    assert params_comparable_to_official(sup) == pytest.approx(120e9, rel=0.01)
    assert params_active(sup) == pytest.approx(12e9, rel=0.02)
    assert params_comparable_to_official(ultra) == pytest.approx(550e9, rel=0.01)
    assert params_active(ultra) == pytest.approx(55e9, rel=0.01)
    moe = next(g for g in sup.layer_groups if g.mlp is not None and g.mlp.kind == "moe")
    assert (moe.mlp.latent_size, moe.mlp.num_experts, moe.mlp.experts_per_token) == (1024, 512, 22)
    pieces = {p.component: p.params for p in model_pieces(sup.model_copy(update={"layer_groups": [moe]}))}
    # one layer: 512 experts x (up 1024 x 2688 + down 2688 x 1024), non-gated (relu^2); the two latent projections
    # 2 x 4096 x 1024, read by every token; a shared expert of 5,376 at the hidden size
    assert pieces["experts"] == 40 * 512 * 2 * 1024 * 2688
    assert pieces["mlp"] == 40 * 2 * 4096 * 1024
    assert pieces["shared_experts"] == 40 * 2 * 4096 * 5376
    # Ultra's config lists its 108 layers as layers_block_type words, not a hybrid_override_pattern
    assert sum(g.count for g in ultra.layer_groups) == 108


def test_a_plan_of_a_latent_moe_says_its_latent(run_cli):
    code, out, _ = run_cli("plan", "nemotron-3-super-120b-a12b", "--gpu", "b200")
    assert code == 0 and "MoE 22/512 in a 1024 latent + 1 shared" in " ".join(out.split())


def test_llama_4_configs_import_with_their_experts_and_chunked_layers():
    """Llama 4 (llama4_text) before its mapping was read as a generic dense decoder: Scout 11.1 B of ~109 B. "17B
    active parameters out of ~400B total, with 128 experts" / "out of ~109B total, using just 16 experts"
    (https://huggingface.co/docs/transformers/model_doc/llama4), the totals with the vision tower, which the text
    config does not describe (mlx-community's text-only conversions list 108B and 401B). Three of four layers attend
    within 8,192-token chunks, every 4th globally; Maverick routes every other layer."""
    imported = import_model(CONFIGS / "meta-llama__Llama-4-Scout-17B-16E-Instruct.json", read_headers=False)
    scout = imported.spec
    mav = import_model(CONFIGS / "meta-llama__Llama-4-Maverick-17B-128E-Instruct.json", read_headers=False).spec
    assert any("vision tower not in config.json's text part" in n for n in imported.notes)
    assert params_comparable_to_official(scout) == pytest.approx(108e9, rel=0.01)
    assert params_comparable_to_official(mav) == pytest.approx(401e9, rel=0.01)
    # 48 x (attention 62.9 M + one routed and one shared expert of 3 x 5120 x 8192) + the lm_head: 16.1 B, the
    # "17B active" less the vision tower's share
    assert params_active(scout) == pytest.approx(17e9, rel=0.06)
    for spec, moe_layers in ((scout, 48), (mav, 24)):
        kinds = [(g.mixer.kind, g.mlp.kind, g.count) for g in spec.layer_groups]
        assert sum(n for m, _, n in kinds if m == "full") == 12 and sum(n for m, _, n in kinds if m == "sliding") == 36
        assert sum(n for _, k, n in kinds if k == "moe") == moe_layers
        assert all(g.mixer.sliding_window == 8192 for g in spec.layer_groups if g.mixer.kind == "sliding")


def _mutated(tmp_path, stem, edit):
    raw = json.loads((CONFIGS / f"{stem}.json").read_text())
    edit(raw.get("text_config", raw) if stem.startswith("meta-llama__Llama-4") or "Kimi-K2.5" in stem else raw)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return path


@pytest.mark.parametrize("stem, edit, says", [
    # a Llama 4 layer list that names no layer, or a layer twice; a RoPE flag not 0 or 1
    ("meta-llama__Llama-4-Maverick-17B-128E-Instruct", lambda t: t.update(moe_layers=[1, 3, 100]),
     "moe_layers holds 100"),
    ("meta-llama__Llama-4-Maverick-17B-128E-Instruct", lambda t: t.update(moe_layers=[1, 1]), "a repeated index"),
    ("meta-llama__Llama-4-Scout-17B-16E-Instruct", lambda t: t.update(no_rope_layers=[2] * 48), "not 0 or 1"),
    # Kimi K2 without its routed experts was a 32.7 B dense model
    ("moonshotai__Kimi-K2-Instruct", lambda t: t.pop("n_routed_experts"), "n_routed_experts"),
    # a wrapper whose text model is not an object
    ("moonshotai__Kimi-K2.5", None, "text_config is 'x'"),
    # compressed-tensors fields of the wrong type, or a width it has no format for
    ("moonshotai__Kimi-K2.5", lambda t: t["quantization_config"]["config_groups"]["group_0"]["weights"].update(
        symmetric="false"), "symmetric 'false'"),
    ("moonshotai__Kimi-K2.5", lambda t: t["quantization_config"]["config_groups"]["group_0"]["weights"].update(
        num_bits=2), "pack-quantized with 2-bit weights"),
    # GLM-5.2's indexer list: one short, a word it does not know, a first layer with no top-k to reuse; a period of 0
    ("zai-org__GLM-5.2", lambda c: c.update(indexer_types=c["indexer_types"][:-1]),
     "indexer_types is not one of 'full' or 'shared' for"),
    ("zai-org__GLM-5.2", lambda c: c["indexer_types"].__setitem__(5, "half"), "(it holds 'half')"),
    ("zai-org__GLM-5.2", lambda c: c["indexer_types"].__setitem__(0, "shared"), "starts with a 'shared' layer"),
    ("zai-org__GLM-5.2", lambda c: (c.pop("indexer_types"), c.update(index_topk_freq=0)), "index_topk_freq 0"),
    # Nemotron 3 Ultra's layer words: one unknown, a string, none at all; a negative latent
    ("nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", lambda c: c["layers_block_type"].__setitem__(3, "transformer"),
     "layers_block_type holds 'transformer'"),
    ("nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", lambda c: c.update(layers_block_type="mamba"),
     "layers_block_type is 'mamba', not a list"),
    ("nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", lambda c: c.pop("layers_block_type"),
     "neither hybrid_override_pattern nor layers_block_type"),
    ("nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", lambda c: c.update(moe_latent_size=-5),
     "latent_size (latent_size = -5): Input should be greater than 0"),
    # Kimi Linear's linear_attn_config: absent, a layer named twice or past the stack, layers left out, a bad size
    ("moonshotai__Kimi-Linear-48B-A3B-Instruct", lambda c: c.pop("linear_attn_config"),
     "linear_attn_config is None, not an object"),
    ("moonshotai__Kimi-Linear-48B-A3B-Instruct", lambda c: c["linear_attn_config"]["kda_layers"].append(1),
     "kda_layers is [1, 2"),
    ("moonshotai__Kimi-Linear-48B-A3B-Instruct", lambda c: c["linear_attn_config"]["full_attn_layers"].append(28),
     "not layer numbers from 1 to 27"),
    ("moonshotai__Kimi-Linear-48B-A3B-Instruct", lambda c: c["linear_attn_config"]["full_attn_layers"].pop(),
     "do not name each of the 27 layers once"),
    ("moonshotai__Kimi-Linear-48B-A3B-Instruct", lambda c: c["linear_attn_config"].update(head_dim="128"),
     "not whole counts from 1 to 65,536"),
])
def test_impossible_layer_lists_and_fields_are_refused(tmp_path, run_cli, stem, edit, says):
    if edit is None:
        raw = json.loads((CONFIGS / f"{stem}.json").read_text())
        raw["text_config"] = "x"
        path = tmp_path / "config.json"
        path.write_text(json.dumps(raw))
    else:
        path = _mutated(tmp_path, stem, edit)
    out_file = tmp_path / "out.yaml"
    code, out, err = run_cli("import", str(path), "-o", str(out_file))
    assert code == 2 and says in err and "Traceback" not in err and not out_file.exists()


@pytest.mark.parametrize("edit, quant", [
    (lambda w: w.update(num_bits=8), "int8"),  # 8-bit packed integers are not INT4
    (lambda w: w.update(symmetric=False), "int4-g32-zp"),  # a zero point per group too
    (lambda w: w.update(group_size=64, symmetric=False), "int4-g128-zp"),
])
def test_compressed_tensors_weights_take_their_width_and_zero_points(tmp_path, edit, quant):
    path = _mutated(tmp_path, "moonshotai__Kimi-K2.5",
                    lambda t: edit(t["quantization_config"]["config_groups"]["group_0"]["weights"]))
    assert import_model(path, read_headers=False).spec.release.quant == quant


def test_meta_llamas_empty_no_rope_layers_is_the_default(tmp_path):
    """meta-llama's own Llama 4 configs carry "no_rope_layers": [], which transformers reads as its default."""
    path = _mutated(tmp_path, "meta-llama__Llama-4-Scout-17B-16E-Instruct", lambda t: t.update(no_rope_layers=[]))
    spec = import_model(path, read_headers=False).spec
    assert sum(g.count for g in spec.layer_groups if g.mixer.kind == "full") == 12


@pytest.mark.parametrize("field, value", [("kv_lora_rank", 512), ("num_experts_per_tok", 8),
                                          ("shared_expert_intermediate_size", 5632)])
def test_an_unknown_type_with_latent_attention_or_expert_fields_is_refused(tmp_path, field, value):
    raw = json.loads((CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json").read_text())
    raw.update(model_type="somenew", **{field: value})
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ConfigError) as e:
        import_model(path, read_headers=False)
    assert f"its config has {field} = {value}" in e.value.message


def test_kimi_linears_kda_and_mla_layers_add_up_to_its_checkpoint(catalog):
    """Kimi-Linear-48B-A3B (vLLM kimi_linear.py, layers/kda.py): linear_attn_config's 1-based kda_layers hold Kimi
    Delta Attention (20), the others MLA without a q LoRA (7: layers 4, 8, ..., 24 and 27, 0-based 3, 7, ... 26);
    layer 0 dense. Its count is the checkpoint's safetensors total to the parameter, 49,122,681,728 (a KDA layer
    39,514,272: q/k/v 3 x 2304 x 4096, f and g gates 2 x (128 x 2304 + 4096 x 128), b_proj 32 x 2304, o_proj
    4096 x 2304, convs 3 x 4096 x 4, A_log 32, dt_bias 4096, o_norm 128). A KDA layer's state is a gated delta-net's
    of the same heads: vLLM keeps its conv in BF16 and its recurrent state in FP32 (kda_state_dtype), 3 x 3 x 4096 x
    2 + 32 x 128 x 128 x 4 = 2,170,880 B; a Gated DeltaNet's recurrent state there is BF16."""
    from llmsize.estimate.engines import vllm_state_bytes

    spec = import_model(CONFIGS / "moonshotai__Kimi-Linear-48B-A3B-Instruct.json", read_headers=False).spec
    mixers = [g.mixer for i in spec.layer_pattern or [] for g in [spec.layer_groups[i]]]
    kinds = "".join("K" if m.kind == "linear" else "M" for m in mixers)
    assert kinds == "KKKM" * 6 + "KKM"
    assert params_comparable_to_official(spec) == 49_122_681_728 == catalog.model("kimi-linear").params_official
    kda = mixers[0]
    assert (kda.variant, kda.gate_rank, kda.num_value_heads, kda.value_head_dim) == ("kda", 128, 32, 128)
    assert vllm_state_bytes(kda) == 2_170_880
    gdn = kda.model_copy(update={"variant": "gated_deltanet", "gate_rank": None})
    assert vllm_state_bytes(gdn) == 3 * 3 * 4096 * 2 + 32 * 128 * 128 * 2
    assert spec.layer_groups[0].mlp.kind == "dense" and spec.max_position_embeddings == 1_048_576


def _granite(**fields):
    """A granitemoehybrid config of Granite 4.0 H Tiny's published shapes (IBM's disclosure and the Ollama library's
    GGUF metadata: models/granite-4.0-h-tiny.yaml), attention at layers 5, 15, 25 and 35."""
    types = ["attention" if i in (5, 15, 25, 35) else "mamba" for i in range(40)]
    return {"model_type": "granitemoehybrid", "vocab_size": 100352, "hidden_size": 1536, "intermediate_size": 512,
            "shared_intermediate_size": 1024, "num_hidden_layers": 40, "num_attention_heads": 12,
            "num_key_value_heads": 4, "num_local_experts": 64, "num_experts_per_tok": 6, "mamba_n_heads": 48,
            "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2,
            "tie_word_embeddings": True, "max_position_embeddings": 131072, "layer_types": types, **fields}


def test_granite_hybrids_map_every_layer_with_its_experts_and_shared_mlp(catalog):
    """Granite 4.0 (transformers modeling_granitemoehybrid.py): every layer, Mamba-2 or attention, runs routed
    experts and one shared SwiGLU MLP beside them; IBM's disclosed counts are reproduced to the parameter: H Tiny
    6,939,037,248, H Small 32,207,337,984 (its entry). The dense ones (num_local_experts 0: H 1B) run the shared MLP
    alone; Granite 4.0 Micro is the type with every layer attention and its unused mamba_* fields left in."""
    tiny = map_config(_granite(), "config.json")
    groups = tiny.fields["layer_groups"]
    assert [g["count"] for g in groups] == [36, 4] and groups[0]["mixer"]["kind"] == "ssm"
    assert groups[0]["mlp"] == {"kind": "moe", "num_experts": 64, "experts_per_token": 6, "moe_intermediate_size": 512,
                                "num_shared_experts": 1, "shared_intermediate_size": 1024}
    assert groups[1]["mixer"] == {"kind": "full", "num_attention_heads": 12, "num_key_value_heads": 4, "head_dim": 128}
    from llmsize.catalog.schema import ModelSpec

    def count(m):
        return params_comparable_to_official(ModelSpec(id="x", name="x", family="x", sources=["x"], params_official=1,
                                                       params_official_source="x", params_official_includes="x",
                                                       release={"quant": "bf16"}, **m.fields))
    assert count(tiny) == 6_939_037_248 == catalog.model("granite-4.0-h-tiny").params_official
    small = catalog.model("granite-4.0-h-small")
    assert params_comparable_to_official(small) == small.params_official == 32_207_337_984
    dense = map_config(_granite(num_local_experts=0, num_experts_per_tok=0, intermediate_size=4096,
                                shared_intermediate_size=4096), "config.json")
    assert {g["mlp"]["kind"] for g in dense.fields["layer_groups"]} == {"dense"}
    assert count(dense) == 1_461_538_368 == catalog.model("granite-4.0-h-1b").params_official
    micro = map_config(_granite(hidden_size=2560, num_attention_heads=40, num_key_value_heads=8, num_local_experts=0,
                                intermediate_size=8192, shared_intermediate_size=8192, mamba_d_head="auto",
                                layer_types=["attention"] * 40), "config.json")
    assert [g["mixer"]["kind"] for g in micro.fields["layer_groups"]] == ["full"]
    # 40 x (attention 2560 x 2560 x 2 + 2 x 2560 x 512, SwiGLU 3 x 2560 x 8192, two norms) + 100352 x 2560 + 2560
    assert count(micro) == 40 * (2 * 2560 * 2560 + 2 * 2560 * 512 + 3 * 2560 * 8192 + 2 * 2560) + 100352 * 2560 + 2560


@pytest.mark.parametrize("edit, says", [
    (lambda c: c["layer_types"].__setitem__(3, "linear_attention"), "layer_types is ['mamba'"),
    (lambda c: c.update(layer_types=["mamba"] * 39), "for each of the 40 layers"),
    (lambda c: c.update(mamba_d_head=60), "mamba_d_head 60 x mamba_n_heads 48 is not mamba_expand x hidden_size"),
    (lambda c: c.update(num_local_experts="64"), "num_local_experts is '64'"),
    # absent or false, the class's own default would fill in: a dense reading of a MoE model had followed
    (lambda c: c.pop("num_local_experts"), "num_local_experts is None, not a whole count"),
    (lambda c: c.update(num_local_experts=False), "num_local_experts is False, not a whole count"),
    (lambda c: c.update(mamba_conv_bias="false"), "mamba_conv_bias is 'false'; expected true or false"),
    (lambda c: c.update(mamba_n_groups=5), "mamba_n_heads 48 is not a multiple of mamba_n_groups 5"),
])
def test_a_granite_config_that_cannot_be_read_is_one_line(tmp_path, run_cli, edit, says):
    raw = _granite()
    edit(raw)
    _refused_in_one_line(tmp_path, run_cli, raw, says)


def _refused_in_one_line(tmp_path, run_cli, raw: dict, says: str) -> None:
    """`llmsize import` of the config `raw`: exit 2, one line that says `says`, no traceback."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    code, out, err = run_cli("import", str(path))
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def _ernie(**fields):
    """ERNIE-4.5-21B-A3B's shapes as transformers' Ernie4_5_MoeConfig defaults give them
    (models/ernie-4.5-21b-a3b.yaml)."""
    return {"model_type": "ernie4_5_moe", "vocab_size": 103424, "hidden_size": 2560, "intermediate_size": 12288,
            "num_hidden_layers": 28, "num_attention_heads": 20, "num_key_value_heads": 4,
            "max_position_embeddings": 131072, "tie_word_embeddings": True, "use_bias": False,
            "moe_intermediate_size": 1536, "moe_k": 6, "moe_num_experts": 64, "moe_num_shared_experts": 2,
            "moe_layer_start_index": 1, "moe_layer_end_index": -1, "moe_layer_interval": 1, **fields}


def test_ernie_45_routes_from_its_start_index_and_adds_up_to_its_checkpoint(catalog):
    """ERNIE 4.5 MoE (transformers modular_ernie4_5_moe.py, vLLM ernie45_moe.py): layer i routes when (i + 1) %
    moe_layer_interval == 0 and start <= i <= end (-1: the last): 21B-A3B's layer 0 is dense (12,288), 1-27 route 6
    of 64 experts of 1,536 beside two shared ones (one MLP of 3,072) and the router's correction bias. Its count is
    the Hugging Face safetensors total of the Thinking release, 21,825,437,888: 103,424 x 2,560 tied + 28 x (attention
    2 x 2560^2 + 2 x 2560 x 512, two norms) + 3 x 2560 x 12288 + 27 x (64 x 3 x 2560 x 1536 + 3 x 2560 x 3072 + 2560 x
    64 + 64) + 2,560."""
    m = map_config(_ernie(), "config.json")
    groups = m.fields["layer_groups"]
    assert [g["count"] for g in groups] == [1, 27] and groups[0]["mlp"] == {"kind": "dense", "intermediate_size": 12288,
                                                                            "bias": False}
    assert groups[1]["mlp"]["num_shared_experts"] == 2 and groups[1]["mlp"]["router_bias"]
    entry = catalog.model("ernie-4.5-21b-a3b")
    assert params_comparable_to_official(entry) == entry.params_official == 21_825_437_888
    every_other = map_config(_ernie(moe_layer_interval=2, moe_layer_start_index=0, moe_layer_end_index=20),
                             "config.json")
    assert every_other.fields["layer_groups"][1]["count"] == 10  # layers 1, 3, ..., 19


@pytest.mark.parametrize("edit, says", [
    ({"moe_layer_interval": 0}, "moe_layer_interval is 0, not a whole count from 1 to 28"),
    ({"moe_layer_start_index": 30}, "moe_layer_start_index is 30, not a whole count from -1 to 28"),
    ({"moe_layer_start_index": 20, "moe_layer_end_index": 10}, "route none of the 28 layers"),
    ({"moe_k": 65}, "experts_per_token cannot exceed num_experts"),
])
def test_an_ernie_config_that_cannot_be_read_is_one_line(tmp_path, run_cli, edit, says):
    _refused_in_one_line(tmp_path, run_cli, _ernie(**edit), says)


def _lfm2(**fields):
    """LFM2-700M's config.json as LiquidAI's own PR branch of it lists its fields (refs/pr/8, rendered on the Hub):
    the old layout, full_attn_idxs and block_ff_dim, no intermediate_size."""
    return {"model_type": "lfm2", "architectures": ["Lfm2ForCausalLM"], "block_auto_adjust_ff_dim": True,
            "block_dim": 1536, "block_ff_dim": 10240, "block_ffn_dim_multiplier": 1.0, "block_multiple_of": 256,
            "conv_L_cache": 3, "conv_bias": False, "conv_dim": 1536, "conv_dim_out": 1536,
            "full_attn_idxs": [2, 5, 8, 10, 12, 14], "hidden_size": 1536, "max_position_embeddings": 128000,
            "num_attention_heads": 24, "num_heads": 24, "num_hidden_layers": 16, "num_key_value_heads": 8,
            "torch_dtype": "bfloat16", "vocab_size": 65536, **fields}


def test_lfm2s_short_convs_and_mlp_width_add_up_to_its_cards(catalog):
    """LFM2 (transformers modeling_lfm2.py): block_ff_dim wins over intermediate_size and, auto-adjusted, becomes
    int(2/3 of it) rounded up to block_multiple_of: 700M's 10240 -> 6826 -> 6912. Ten conv layers (in_proj 1536 ->
    3 x 1536, a 3-tap depthwise conv, out_proj) and six attention layers (24 heads of 64, 8 KV heads, q and k norms)
    add up to the card's 742,489,344; the 1.2B and 350M entries to theirs (1,170,340,608; 354,483,968). A conv layer
    holds 2 x 1536 values a sequence: BF16 in vLLM (the model dtype), F32 in llama.cpp."""
    from llmsize.catalog.schema import ModelSpec
    from llmsize.estimate.engines import vllm_state_bytes
    from llmsize.estimate.llamacpp_memory import layer_caches

    m = map_config(_lfm2(), "config.json")
    groups = m.fields["layer_groups"]
    assert [g["count"] for g in groups] == [10, 6] and groups[0]["mlp"]["intermediate_size"] == 6912
    assert groups[0]["mixer"] == {"kind": "conv", "conv_dim": 1536, "conv_kernel": 3, "bias": False}
    spec = ModelSpec(id="x", name="x", family="x", sources=["x"], params_official=1, params_official_source="x",
                     params_official_includes="x", release={"quant": "bf16"}, **m.fields)
    assert params_comparable_to_official(spec) == 742_489_344
    for mid, count in (("lfm2-1.2b", 1_170_340_608), ("lfm2-350m", 354_483_968)):
        entry = catalog.model(mid)
        assert params_comparable_to_official(entry) == entry.params_official == count
    conv = spec.layer_groups[0].mixer
    assert vllm_state_bytes(conv) == 2 * 1536 * 2
    assert {c.state_bytes for c in layer_caches(spec) if c.state_bytes} == {2 * 1536 * 4}
    # the same model in the layout transformers 5 writes: layer_types, and an LFM2-MoE's dense lead and experts
    new = {k: v for k, v in _lfm2().items() if k != "full_attn_idxs"}
    new["layer_types"] = ["full_attention" if i in (2, 5, 8, 10, 12, 14) else "conv" for i in range(16)]
    assert map_config(new, "config.json").fields["layer_groups"] == groups
    moe = map_config({**new, "model_type": "lfm2_moe", "intermediate_size": 7168, "num_dense_layers": 2,
                      "num_experts": 32, "num_experts_per_tok": 4, "moe_intermediate_size": 1792,
                      "use_expert_bias": True}, "config.json").fields["layer_groups"]
    assert [(g["count"], g["mlp"]["kind"]) for g in moe] == [(2, "dense"), (6, "moe"), (8, "moe")]
    assert moe[1]["mlp"]["router_bias"] and moe[0]["mlp"]["intermediate_size"] == 7168


@pytest.mark.parametrize("edit, says", [
    ({"full_attn_idxs": [2, 16]}, "full_attn_idxs is [2, 16], not layer indices from 0 to 15"),
    ({"conv_L_cache": 1}, "conv_L_cache is 1, not a whole count from 2"),
    ({"block_ff_dim": "big"}, "block_ff_dim is 'big', not a whole count"),
    ({"block_multiple_of": 0}, "block_multiple_of 0 cannot size the MLP"),
    ({"layer_types": ["conv"] * 15 + ["mamba"]}, "layer_types has an unknown kind 'mamba'"),
    ({"conv_bias": "false"}, "conv_bias is 'false'; expected true or false"),  # it had read as true
    ({"block_auto_adjust_ff_dim": "false"}, "block_auto_adjust_ff_dim is 'false'; expected true or false"),
    ({"conv_L_cache": 2048}, "conv_L_cache is 2048, not a whole count from 2 to 1,024"),
])
def test_an_lfm2_config_that_cannot_be_read_is_one_line(tmp_path, run_cli, edit, says):
    _refused_in_one_line(tmp_path, run_cli, _lfm2(**edit), says)


FP8_LINEAR = {"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {"group_0": {
    "targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "dynamic": False,
                                       "symmetric": True}}}}


@pytest.mark.parametrize("raw, ignore, kept", [
    (_granite(), "re:.*mamba.*", "ssm"),  # Granite 4.0's mamba.in_proj / out_proj
    (_granite(), "re:.*shared_mlp.*", "shared_experts"),
    (_lfm2(), "re:.*\\.conv\\..*", "ssm"),  # LFM2's conv.in_proj / out_proj
    (_lfm2(), "re:.*feed_forward.*", "mlp"),  # LFM2's feed_forward.w1 / w2 / w3
])
def test_a_quantized_checkpoint_that_keeps_a_hybrids_mixer_in_16_bits_says_so(tmp_path, raw, ignore, kept):
    """An FP8 export whose ignore list keeps Granite's Mamba layers, its shared MLP, or LFM2's short convs or MLPs in
    BF16 (compressed-tensors `ignore`): the module names the recipe is probed with are the architecture's own, so
    the part stays out of the FP8 recipe; it had been priced in FP8 (the probes knew mixer.in_proj, mlp.gate_proj)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**raw, "torch_dtype": "bfloat16",
                                "quantization_config": {**FP8_LINEAR, "ignore": ["lm_head", ignore]}}))
    quant = import_model(path, read_headers=False).spec.release.quant
    assert "=" in quant and f"{kept}=" not in quant, quant


def test_a_checkpoints_tensors_are_filed_by_the_layer_they_sit_in():
    """Kimi Linear keeps a KDA layer's projections under self_attn. as its MLA layers keep theirs: by the layer they are
    the recurrent mixer's (ssm) or attention; Granite 4.0's shared_mlp is a shared expert beside routed ones and the
    MLP without; LFM2's conv.* and Granite's mamba.* are the mixer's. A Kimi GGUF's attn_* in a KDA layer likewise."""
    from llmsize.importer.exact import component
    from llmsize.importer.gguf_model import component as gguf_component

    kimi = (("linear", "dense"), ("linear", "moe"), ("linear", "moe"), ("mla", "moe"))
    assert component("model.layers.0.self_attn.q_proj.weight", 4, kimi) == "ssm"
    assert component("model.layers.1.self_attn.f_b_proj.weight", 4, kimi) == "ssm"
    assert component("model.layers.1.self_attn.o_norm.weight", 4, kimi) == "norms"
    assert component("model.layers.3.self_attn.q_proj.weight", 4, kimi) == "attention"
    granite = (("ssm", "moe"), ("full", "dense"))
    assert component("model.layers.0.shared_mlp.input_linear.weight", 2, granite) == "shared_experts"
    assert component("model.layers.1.shared_mlp.output_linear.weight", 2, granite) == "mlp"
    assert component("model.layers.0.mamba.in_proj.weight", 2, granite) == "ssm"
    assert component("model.layers.0.mamba.dt_bias", 2, granite) == "ssm"
    assert component("model.layers.0.block_sparse_moe.input_linear.weight", 2, granite) == "experts"
    assert {component(f"model.layers.0.conv.{n}.weight", 2) for n in ("in_proj", "conv", "out_proj")} == {"ssm"}
    assert gguf_component("blk.0.attn_q.weight", 4, frozenset({0})) == "ssm"
    assert gguf_component("blk.3.attn_q.weight", 4, frozenset({0})) == "attention"


def test_kimi_linears_mtp_layers_are_noted_and_trtllms_ledger_says_it_leaves_states_out(run_cli):
    """A Kimi Linear config with num_nextn_predict_layers says the checkpoint holds them, uncounted, as ERNIE's and
    DeepSeek's do; TensorRT-LLM's ledger of a hybrid says its state pool is not modelled, as vLLM's and SGLang's say
    how they hold theirs."""
    raw = json.loads((CONFIGS / "moonshotai__Kimi-Linear-48B-A3B-Instruct.json").read_text())
    assert any("1 multi-token-prediction layer(s)" in n
               for n in map_config({**raw, "num_nextn_predict_layers": 1}, "config.json").notes)
    for model, says in (("granite-4.0-h-tiny", True), ("llama-3.1-8b", False)):
        code, out, err = run_cli("plan", model, "--gpu", "h100", "--engine", "trtllm")
        assert code == 0, err
        assert ("TensorRT-LLM's pool for them is not modelled" in out.replace("\n    ", " ")) == says


def test_an_out_of_range_size_is_named_by_its_field_and_value(tmp_path, run_cli):
    """A size the schema bounds (an MLP of 2^30 values) is refused at its schema path and, beside it, the field and
    the value the config gave, where the message had named the path alone."""
    raw = json.loads((Path(__file__).parent / "data" / "hf-configs" / "meta-llama__Llama-3.1-8B-Instruct.json")
                     .read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**raw, "intermediate_size": 2**30}))
    code, out, err = run_cli("import", str(path))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "layer_groups.0.mlp.dense.intermediate_size (intermediate_size = 1073741824)" in err


@pytest.mark.parametrize("name, prefix_lm", [("google__gemma-4-26B-A4B", True), ("nvidia__Gemma-4-31B-IT-NVFP4", True),
                                             ("google__gemma-4-E4B-it", False), ("google__gemma-3-27b-it", False)])
def test_a_gemma_4_with_bidirectional_vision_attention_is_a_prefix_lm(name, prefix_lm):
    """text_config.use_bidirectional_attention 'vision' in a multimodal config (vLLM's
    Gemma4ModelArchConfigConvertor.is_mm_prefix_lm): the E models' is null."""
    assert import_model(CONFIGS / f"{name}.json", read_headers=False).spec.vision_prefix_lm is prefix_lm
