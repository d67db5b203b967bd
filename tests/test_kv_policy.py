"""KV policies as what-ifs (llmsize/estimate/kv_policy.py): StreamingLLM's window and sinks, H2O/SnapKV's budget."""

from __future__ import annotations

import json

import pytest

from llmsize.errors import InvalidValueError
from llmsize.estimate.flops import prefill_flops
from llmsize.estimate.kv import kv_bytes
from llmsize.estimate.kv_policy import capped_model, parse_kv_policy
from llmsize.estimate.params import params_total
from llmsize.estimate.plan import PlanInputs, make_plan


def test_streaming_caps_every_layer_at_window_plus_sinks(catalog):
    """Llama 3.1 8B caches 2 (K, V) x 8 KV heads x 128 x 2 B = 4,096 B a token a layer, 131,072 B a token over
    32 layers: 4,294,967,296 B at 32,768 tokens. streaming:4092+4 keeps 4,096 of them a layer: 536,870,912 B, at
    any context past 4,096 (and the same below it); the weights are the model's."""
    m = catalog.model("llama-3.1-8b")
    p = parse_kv_policy("streaming:4092+4")
    assert (p.kind, p.window, p.sinks, p.cap_tokens, p.full_prompt) == ("streaming", 4092, 4, 4096, False)
    c = capped_model(m, p)
    assert kv_bytes(m, 32768, "bf16").bytes_per_sequence == 4_294_967_296
    assert kv_bytes(c, 32768, "bf16").bytes_per_sequence == 536_870_912 == kv_bytes(c, 10**6, "bf16").bytes_per_sequence
    assert kv_bytes(c, 1000, "bf16").bytes_per_sequence == kv_bytes(m, 1000, "bf16").bytes_per_sequence == 131_072_000
    assert params_total(c) == params_total(m)


def test_a_window_keeps_the_smaller_cap_and_mla_and_state_layers_follow(catalog):
    """Gemma 4 12B's sliding layers (window 1,024) keep their window under streaming:4092+4 and take the cap under
    budget:512; its full layers take the cap. DeepSeek-V3's MLA layers cache (512 + 64) x 2 B = 1,152 B a token,
    61 layers: 4,096 tokens a layer under the cap. A hybrid's recurrent state does not change."""
    g4 = catalog.model("gemma-4-12b")
    assert {g.mixer.kind for g in g4.layer_groups} == {"full", "sliding"}
    assert {g.mixer.sliding_window for g in g4.layer_groups if g.mixer.kind == "sliding"} == {1024}
    for spec, windows in (("streaming:4092+4", {1024, 4096}), ("budget:512", {512})):
        c = capped_model(g4, parse_kv_policy(spec))
        assert {g.mixer.kind for g in c.layer_groups} == {"sliding"}
        assert {g.mixer.sliding_window for g in c.layer_groups} == windows, spec
    ds = capped_model(catalog.model("deepseek-v3"), parse_kv_policy("streaming:4092+4"))
    assert kv_bytes(ds, 32768, "bf16").bytes_per_sequence == 61 * 1152 * 4096
    nx = catalog.model("qwen3-next-80b-a3b")
    cn = capped_model(nx, parse_kv_policy("budget:2048"))
    full, capped = kv_bytes(nx, 65536, "bf16"), kv_bytes(cn, 65536, "bf16")
    assert capped.bytes_by_kind["linear"] == full.bytes_by_kind["linear"] > 0
    assert capped.bytes_by_kind["sliding"] == full.bytes_by_kind["full"] * 2048 / 65536


def test_a_plan_under_each_policy(catalog):
    """On an RTX 4090 at 32,768 tokens: streaming caps the cache, so more sequences fit, decode reads 0.537 GB of
    cache instead of 4.29, the longest context is the model's limit, and the prompt's attention runs through the
    window (fewer FLOPs); budget:2048 keeps 2,048 tokens a layer but prefills the whole prompt (the same FLOPs as
    no policy) and holds its whole cache, so the longest prompt is what it was."""
    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("rtx4090")
    base = make_plan(m, g, PlanInputs(context_tokens=32768))
    st = make_plan(m, g, PlanInputs(context_tokens=32768, kv_policy=parse_kv_policy("streaming:4092+4")))
    bu = make_plan(m, g, PlanInputs(context_tokens=32768, kv_policy=parse_kv_policy("budget:2048")))
    assert base.kv.bytes_per_sequence == 8 * st.kv.bytes_per_sequence == 16 * bu.kv.bytes_per_sequence
    assert bu.max_sequences > st.max_sequences > base.max_sequences >= 1
    assert st.max_sequences == int(st.budget.kv_budget_bytes // st.kv.bytes_per_sequence)
    assert st.max_context.limited_by == "model" and bu.max_context == base.max_context
    assert st.decode_1.kv_bytes == pytest.approx(536_870_912) and base.decode_1.kv_bytes == pytest.approx(4_294_967_296)
    assert st.decode_ceiling_tok_s > base.decode_ceiling_tok_s
    assert bu.prefill.flops == base.prefill.flops == prefill_flops(m, 32768) > st.prefill.flops
    assert st.prefill.flops == prefill_flops(capped_model(m, parse_kv_policy("streaming:4092+4")), 32768)
    assert any("Caveat" in a and "older than the window" in a for a in st.assumptions)
    assert any("Caveat" in a and "evicted tokens are lost" in a for a in bu.assumptions)


@pytest.mark.parametrize("text", ["streaming:4096", "streaming:0+4", "budget:0", "budget:1+2", "snapkv:2048",
                                  "streaming:-1+4", "budget:", "budget:99999999999", "streaming:4092+4+4", ""])
def test_a_bad_policy_is_one_line(text):
    with pytest.raises(InvalidValueError) as e:
        parse_kv_policy(text)
    assert "--kv-policy" in e.value.message and "\n" not in e.value.message


def test_the_cli_takes_it_and_says_what_it_costs(run_cli):
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4090", "--context", "32768", "--kv-policy",
                             "streaming:4092+4", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["kv"]["policy"]["name"] == "streaming:4092+4" and d["kv"]["policy"]["cap_tokens"] == 4096
    assert d["kv"]["bytes_per_sequence"] == 536_870_912 and "older than the window" in d["kv"]["policy"]["caveat"]
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4090", "--kv-policy", "budget:2048")
    assert code == 0 and "budget:2048 (a what-if" in out and "evicted tokens are lost" in out
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "rtx4090", "--kv-policy", "h2o:10")
    assert code == 2 and "--kv-policy 'h2o:10'" in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2
