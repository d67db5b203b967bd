"""The plan as a terminal report that fits 100 columns, in plain text (render/text.py): no rich on the path
of the command people run most."""

from __future__ import annotations

from llmsize.catalog.schema import STATE_KINDS
from llmsize.estimate.kv import KINDS
from llmsize.estimate.llamacpp_fit import FIT_TARGET_BYTES
from llmsize.estimate.llamacpp_memory import host_tables
from llmsize.estimate.plan import Plan
from llmsize.render.text import Report
from llmsize.units import GB, GiB, column_unit, fmt_binary_auto, fmt_bytes, fmt_bytes_auto, fmt_params, fmt_seconds

COMPONENT_LABELS = {
    "embedding": "embedding", "per_layer_embedding": "per-layer embedding", "lm_head": "lm_head",
    "attention": "attention", "mlp": "MLP",
    "experts": "routed experts", "shared_experts": "shared experts", "router": "routers", "ssm": "SSM / linear attn",
    "norms": "norms & small", "extra": "extra (vision, audio)", "other": "other tensors",
}


def _groups(p: Plan) -> str:
    parts = []
    for g in p.model.layer_groups:
        m = g.mixer
        if m is None:
            mixer = "no mixer"
        elif m.kind in ("full", "sliding"):
            kv = "MQA" if m.num_key_value_heads == 1 else (
                "MHA" if m.num_key_value_heads == m.num_attention_heads else "GQA")
            mixer = f"{m.kind} {kv} {m.num_attention_heads}q/{m.num_key_value_heads}kv x {m.head_dim}"
            if m.kind == "sliding":
                mixer += f" w{m.sliding_window}"
        elif m.kind == "mla":
            mixer = f"MLA latent {m.kv_lora_rank}+{m.qk_rope_head_dim}"
        elif m.kind == "compressed":
            mixer = f"{m.num_attention_heads}q/1kv x {m.head_dim} over a {m.sliding_window}-token window" + (
                f" + a row every {m.compress_ratio}" if m.compress_ratio else "") + (
                f" (top {m.indexer.topk})" if m.indexer else "")
        elif m.kind == "ssm":
            mixer = f"Mamba2 {m.num_heads}x{m.head_dim} state {m.state_size}"
        elif m.kind == "conv":
            mixer = f"short conv {m.conv_dim} x {m.conv_kernel} taps"
        else:
            mixer = f"{'KDA' if m.variant == 'kda' else 'linear attn'} {m.num_value_heads} heads"
        mlp = "" if g.mlp is None else (
            f", dense {g.mlp.intermediate_size}" if g.mlp.kind == "dense"
            else f", MoE {g.mlp.experts_per_token}/{g.mlp.num_experts}"
                 + (f" in a {g.mlp.latent_size} latent" if g.mlp.latent_size else "")
                 + (f" + {g.mlp.num_shared_experts} shared" if g.mlp.num_shared_experts else ""))
        parts.append(f"{g.count} x ({mixer}{mlp})")
    return "; ".join(parts)


def render_plan(p: Plan, width: int = 100, color: bool = False, placement: str | None = None) -> str:
    """The report as text, at most `width` columns. `placement`: how the engine's own placement differs from the
    whole model on the card (llama.cpp's offload), said where the budget and decode are the whole model's."""
    r = Report(width, color)
    gpu, model, inp = p.gpu, p.model, p.inputs
    for w in p.warnings:  # first: this plan is not what the files hold
        r.line(f"Warning: {w}")
    r.title(f"llmsize plan: {model.name} on {gpu.name}")
    r.line("Units: GB = 10^9 B (MB 10^6, KB 10^3), GiB = 2^30 B (MiB 2^20, KiB 2^10), GB/s decimal.", "dim")

    rows = [("memory bandwidth", f"{gpu.bandwidth_gb_s:,.1f} GB/s"),
            ("VRAM", f"{gpu.memory_size:g} {gpu.memory_vendor_unit} (vendor) = {gpu.memory_bytes / GiB:,.2f} GiB = "
                     f"{gpu.memory_bytes / GB:,.2f} GB")]
    if p.peak.precision:
        rows += [("dense peak", f"{p.peak.flop_per_s / 1e12:,.1f} TFLOPS {p.peak.precision}"),
                 ("ridge point", f"{p.ridge_point_flop_per_byte:,.0f} FLOP/byte")]
    else:
        rows.append(("dense peak", "unknown (no TFLOPS figure in the catalog)"))
    if p.comm is not None:
        c = p.comm
        link = f"{c.link.kind}, {c.link.gb_s:,.0f} GB/s per direction" if c.link else "no link"
        rows.append(("cards", f"{c.tp * c.pp} (--tp {c.tp} x --pp {c.pp}) on {c.nodes} node(s); {link}"
                     + (f"; {inp.node_link_gb_s:g} GB/s between nodes" if c.nodes > 1 else "")))
        rows.append(("per card", f"weights {fmt_bytes(p.weights_card.bytes_total)}, KV "
                     f"{fmt_bytes_auto(p.kv_card.bytes_per_token)} per token (figures below are per card from "
                     "'Memory budget' on)"))
        rows.append(("traffic per token", f"{c.bytes_per_card(1, model.hidden_size) / 1e6:,.3f} MB per card "
                     f"({c.allreduces} all-reduces, {fmt_seconds(p.decode_1.comm_time_s)} at batch 1)"))
    r.kv("Card", rows)
    with_embedding = "" if p.params_active_with_embedding == p.params_active else (
        f"; {fmt_params(p.params_active_with_embedding)} with the input embedding")
    r.kv("Model", [("parameters", f"{fmt_params(p.params_total)} total, {fmt_params(p.params_active)} active per "
                                  f"token (input embedding excluded{with_embedding})"),
                   ("layers", f"{model.num_layers}: {_groups(p)}")])

    w, est = p.weights, p.weights_estimate
    src = f", exact from the {p.exact.source}" if est and p.exact is not None else ""
    headers = ["component", "stored"] + (["estimate", "diff"] if est else []) + ["read per token"]

    rel = p.weights_vs_estimate

    def diff(comp):
        return "-" if rel.get(comp) is None else f"{rel[comp]:+.1%}"

    rows = []
    for comp, label in COMPONENT_LABELS.items():
        s, rd = w.stored_bytes[comp], w.read_bytes_per_token[comp]
        e = est.stored_bytes[comp] if est else 0
        if s or rd or e:
            note = " (tied: the embedding)" if comp == "lm_head" and not s and rd else ""
            cells = [label + note, fmt_bytes_auto(s) if s else "-"]
            if est:
                cells += [fmt_bytes_auto(e) if e else "-", diff(comp)]
            rows.append((cells + [fmt_bytes_auto(rd) if rd else "-"], ()))
    mid = [fmt_bytes_auto(est.bytes_total), diff("total")] if est else []
    rows.append((["total", fmt_bytes_auto(w.bytes_total), *mid, fmt_bytes_auto(w.bytes_read_per_token)], ("bold",)))
    rows.append((["", f"= {fmt_binary_auto(w.bytes_total)}", *([""] * len(mid)),
                  f"= {fmt_binary_auto(w.bytes_read_per_token)}"], ("dim",)))
    bits = (f"{w.bits_per_weight:.2f} bits per quantized weight on average" if p.fmt.mix or p.fmt.recipe
            else f"{w.bits_per_weight:g} bits per quantized weight")
    r.table(f"Weights in {p.fmt.id} ({bits}{'' if p.fmt.recipe else f', scope {p.scope}'})",
            headers, rows, note=src.lstrip(", ") + ", next to the estimate" if est else None)
    if p.exact is not None:
        dtypes = ", ".join(f"{k} {fmt_bytes_auto(v)}" for k, v in sorted(p.exact.bytes_by_dtype.items(),
                                                                       key=lambda kv: -kv[1]))
        r.line(f" by dtype: {dtypes}; formats seen: {', '.join(p.exact.formats) or 'none'}", "dim")
    for n in p.notes:
        r.line(f" note: {n}", "yellow")
    if p.exact is not None or p.notes:
        r.line()

    kv = p.kv
    rows = []
    kinds = [k for k in KINDS if kv.layers_by_kind[k]]
    unit = column_unit([kv.bytes_by_kind[k] for k in kinds] + [kv.bytes_per_sequence])
    for kind in kinds:
        per_tok = ("constant" if kind in STATE_KINDS else f"{kv.bytes_per_token_by_kind[kind]:,.0f} B"
                   + (" (to window)" if kind == "sliding" else ""))
        label = "compressed rows" if kind == "compressed" else kind
        rows.append(([label, str(kv.layers_by_kind[kind]), per_tok, fmt_bytes(kv.bytes_by_kind[kind], unit, 3)], ()))
    rows.append((["growing layers / total", "", f"{kv.bytes_per_token:,.0f} B",
                  fmt_bytes(kv.bytes_per_sequence, unit, 3)], ("bold",)))
    pol = f", {inp.kv_policy.label} (a what-if: see the assumptions)" if inp.kv_policy else ""
    r.table(f"KV cache ({inp.kv_dtype}) at {inp.context_tokens:,} tokens{pol}",
            ["layer kind", "layers", "per token", "per sequence"], rows)
    if kv.shared_layers:
        r.line(f" {kv.shared_layers} more layers read an earlier layer's cache and hold none: a decode step reads "
               f"{fmt_bytes(kv.read_bytes, unit, 3)} of the {fmt_bytes(kv.bytes_per_sequence, unit, 3)} held", "dim")
        r.line()
    if kv.topk:
        rows_of = "compressed rows" if kv.layers_by_kind["compressed"] else "tokens' latents"
        keys = ("keys in the K cache's type, as llama.cpp keeps them" if kv.states == "llamacpp" and
                kv.layers_by_kind["compressed"] else "FP8 keys and their scales, whatever the cache dtype")
        r.kv("Sparse attention (DeepSeek's lightning indexer)",
             [("indexer keys", f"{kv.indexer_bytes_per_token:,.0f} B a token of the {kv.bytes_per_token:,.0f} "
                               f"({keys})"),
              ("a decode step reads", f"{fmt_bytes(kv.read_bytes)} of the {fmt_bytes(kv.bytes_per_sequence)} held: "
                                      + (f"every key, at most the top {kv.topk:,} rows of each layer with an indexer, "
                                         "every row of the others, and the windows" if kv.layers_by_kind["compressed"]
                                         else f"every key, the top {kv.topk:,} {rows_of}"))])

    b = p.budget
    if b.engine is not None:  # llama.cpp's own ledger (estimate/llamacpp_budget.py)
        e = b.engine
        rows = [("budget (llama.cpp's ledger)", f"{b.vram_bytes / GiB:,.2f} GiB = {b.budget_bytes / GB:,.2f} GB, "
                                                f"{e.card_basis}"),
                ("- model buffer on the card", f"{b.weights_bytes / GB:,.2f} GB (every layer; the "
                                               f"{host_tables(p.model)}, {e.host_weights_bytes / GB:,.2f} GB, in "
                                               "host memory)"),
                ("- compute buffer, - margin", f"{e.compute_bytes / GB:,.2f} GB, {e.margin_bytes / GB:,.2f} GB "
                                               + (f"({e.margin_bytes / GiB:g} GiB: --fit's --fit-target)"
                                                  if e.margin_bytes == FIT_TARGET_BYTES else
                                                  f"({e.margin_bytes / GiB:.2f} GiB: the --fit-target Ollama sets, "
                                                  "1 GiB and the projector's weights)"))]
        if e.projector_bytes:
            rows.append(("- mmproj (--mmproj)", f"{e.projector_bytes / GB:,.2f} GB ({e.projector_holds}; --fit "
                                                "keeps room for it)"))
    else:
        rows = [("budget", f"{b.vram_bytes / GiB:,.2f} GiB x {b.gpu_util:g} = {b.budget_bytes / GB:,.2f} GB"),
                ("- weights, - overhead", f"{b.weights_bytes / GB:,.2f} GB, {b.overhead_bytes / GB:,.2f} GB "
                                          f"({b.overhead_bytes / GiB:g} GiB)")]
    if b.scores_bytes:
        rows.append(("- attention scores", f"{b.scores_bytes / GB:,.2f} GB (--no-flash-attn: one layer's, "
                                           f"a {p.prompt_tokens:,}-token prompt in one pass)"))
    verdict = "" if b.weights_fit else f"  (the whole model does not fit; {placement})" if placement else \
        "  (does not fit)"
    rows.append(("left for KV cache", fmt_bytes(b.kv_budget_bytes) + verdict))
    if b.weights_fit:
        lim = " (model limit)" if p.max_context.limited_by == "model" else ""
        rows += [("longest context, 1 sequence", f"{p.max_context.tokens:,} tokens{lim}"),
                 (f"sequences at {inp.context_tokens:,} token{'s' * (inp.context_tokens != 1)}",
                  f"{p.max_sequences:,}")]
        if p.kv_pool_tokens is not None:
            kvc = p.kv_card or p.kv
            kinds = [w for k, w in (("sliding", "sliding windows"), ("ssm", "recurrent state"),
                                    ("linear", "recurrent state"), ("conv", "conv state")) if kvc.bytes_by_kind.get(k)]
            what = " and ".join(dict.fromkeys(kinds))
            rows.append(("KV pool", f"{p.kv_pool_tokens:,} tokens of growing cache, shared by all sequences"
                         + (f"; each sequence also holds {fmt_bytes_auto(kvc.fixed_bytes_per_sequence)} that does not "
                            f"grow ({what}) from the same budget" if kinds else "")))
    # an offload asked for (--cpu-moe, --gpu-layers) although the whole model fits: these sections stay the whole
    # model's, and say so; the ledger and Expected below are the placement's
    asked = f" (every layer on the card: the what-if; {placement})" if placement and b.weights_fit else ""
    r.kv("Memory budget" + asked, rows)

    s1, sb = p.decode_1, p.decode_b
    rows = [("bytes read per token", f"{s1.bytes_total / GB:,.3f} GB (weights {s1.weight_bytes / GB:,.3f} + "
                                     f"KV {s1.kv_bytes / GB:,.3f})"),
            ("ceiling, batch 1", f"{p.decode_ceiling_tok_s:,.1f} tok/s = {gpu.bandwidth_gb_s:,.0f} GB/s / "
                                 f"{s1.bytes_total / GB:,.3f} GB")]
    if sb.batch != 1:
        rows.append((f"batch {sb.batch:,}", f"{sb.tok_s:,.0f} tok/s aggregate, {sb.tok_s / sb.batch:,.1f} per "
                                            f"sequence; step {fmt_seconds(sb.step_time_s)} ({sb.bound}-bound)"))
    ct = "unknown" if sb.compute_time_s is None else fmt_seconds(sb.compute_time_s)
    rows.append((f"step at batch {sb.batch:,}", f"max(memory {fmt_seconds(sb.memory_time_s)}, compute {ct})"))
    never = p.ridge_batch is None and p.peak.precision
    rows.append(("turns compute-bound at", "never (memory-bound at any batch)" if never
                 else ("unknown" if p.ridge_batch is None else f"batch {p.ridge_batch:,}")))
    r.kv(("Decode (the whole model on the card; the offload's decode: the ledger and Expected below)" if placement
          else "Decode") if b.weights_fit else "Decode (the whole model on the card, as if it fit)" if placement
         else "Decode (as if the weights fit: they do not)", rows)
    if p.speculative is not None:
        r.kv("Speculative decoding (--spec; the acceptance rate is yours, not measured here)", _spec_rows(p))

    pre = p.prefill
    bound = f" ({pre.bound}-bound)" if pre.bound else ""
    rows = [(f"time to first token, {pre.prompt_tokens:,} tokens", fmt_seconds(pre.ttft_s) + bound),
            ("FLOPs, bytes", f"{pre.flops / 1e12:,.1f} TFLOP, {pre.bytes / GB:,.2f} GB")]
    if pre.scores_bytes:
        rows.append(("attention scores", f"{pre.scores_bytes / GB:,.2f} GB a layer unfused (heads x prompt x prompt "
                                         "x 4 B): " + ("held and moved in memory (--no-flash-attn; in the bytes "
                                                       "above)" if not pre.flash_attn else
                                                       "none in memory with FlashAttention (on-chip tiles)")))
    r.kv("Prefill" if b.weights_fit else "Prefill (the whole model on the card, as if it fit)" if placement
         else "Prefill (as if the weights fit)", rows)

    d = p.diagnosis
    r.title("Diagnosis")
    r.bullets([f"Saturates first: {d.saturates.replace('_', ' ')}. {d.summary}"], " ")
    r.bullets(list(d.levers), "-")
    r.line()
    r.title("Assumptions")
    r.bullets(list(p.assumptions), "-", "dim")
    return r.text()


def _spec_rows(p: Plan) -> list[tuple[str, str]]:
    sd, spec = p.speculative, p.speculative.spec
    left = fmt_bytes(sd.kv_budget_bytes) + ("" if sd.kv_budget_bytes > 0 else "  (the draft does not fit)")
    return [("draft", f"{sd.draft_name}: {spec.k} token(s) a pass, each accepted at {spec.accept:g}: "
                      f"{sd.tokens_per_pass:,.2f} tokens a verify pass"),
            ("draft memory", f"weights {sd.draft_weight_bytes / GB:,.3f} GB, cache "
                             f"{sd.draft_kv_bytes_per_sequence / GB:,.3f} GB a sequence"),
            ("left for KV cache", left),
            (f"sequences at {p.inputs.context_tokens:,} token{'s' * (p.inputs.context_tokens != 1)}",
             f"{sd.max_sequences:,}"),
            ("ceiling, batch 1", f"{sd.ceiling_tok_s:,.1f} tok/s (x{sd.gain:,.2f}) = {sd.tokens_per_pass:,.2f} "
                                 f"tokens / (verify {fmt_seconds(sd.verify_s)} + {spec.k} x draft {fmt_seconds(sd.draft_step_s)})")]
