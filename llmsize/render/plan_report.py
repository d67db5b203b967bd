"""The plan as a terminal report that fits 100 columns. rich is imported inside the function."""

from __future__ import annotations

from llmsize.estimate.plan import Plan
from llmsize.units import GB, GiB, fmt_bytes, fmt_bytes_auto, fmt_params

COMPONENT_LABELS = {
    "embedding": "embedding", "lm_head": "lm_head", "attention": "attention", "mlp": "MLP",
    "experts": "routed experts", "shared_experts": "shared experts", "router": "routers", "ssm": "SSM / linear attn",
    "norms": "norms & small", "extra": "extra (vision, MTP)", "other": "other tensors",
}


def _time(s: float | None) -> str:
    if s is None:
        return "unknown"
    return f"{s * 1e3:,.2f} ms" if s < 1 else f"{s:,.2f} s"


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
        elif m.kind == "ssm":
            mixer = f"Mamba2 {m.num_heads}x{m.head_dim} state {m.state_size}"
        else:
            mixer = f"linear attn {m.num_value_heads} heads"
        mlp = "" if g.mlp is None else (
            f", dense {g.mlp.intermediate_size}" if g.mlp.kind == "dense"
            else f", MoE {g.mlp.experts_per_token}/{g.mlp.num_experts}"
                 + (f" + {g.mlp.num_shared_experts} shared" if g.mlp.num_shared_experts else ""))
        parts.append(f"{g.count} x ({mixer}{mlp})")
    return "; ".join(parts)


def render_plan(p: Plan, console) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    def table(title: str) -> Table:
        t = Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD,
                  show_header=False, pad_edge=False, expand=False)
        t.add_column(style="cyan", no_wrap=True, min_width=30)
        t.add_column(overflow="fold", max_width=66)
        return t

    gpu, model, inp = p.gpu, p.model, p.inputs
    console.print(Text(f"llmsize plan: {model.name} on {gpu.name}", style="bold"))
    console.print("Units: GB = 10^9 B, GiB = 2^30 B, GB/s decimal.", style="dim")

    t = table("Card")
    t.add_row("memory bandwidth", f"{gpu.bandwidth_gb_s:,.1f} GB/s")
    t.add_row("VRAM", f"{gpu.memory_size:g} {gpu.memory_vendor_unit} (vendor) = "
              f"{gpu.memory_bytes / GiB:,.2f} GiB = {gpu.memory_bytes / GB:,.2f} GB")
    if p.peak.precision:
        t.add_row("dense peak", f"{p.peak.flop_per_s / 1e12:,.1f} TFLOPS {p.peak.precision}")
        t.add_row("ridge point", f"{p.ridge_point_flop_per_byte:,.0f} FLOP/byte")
    else:
        t.add_row("dense peak", "unknown (no TFLOPS figure in the catalog)")
    if p.comm is not None:
        c = p.comm
        link = f"{c.link.kind}, {c.link.gb_s:,.0f} GB/s per direction" if c.link else "no link"
        t.add_row("cards", f"{c.tp * c.pp} (--tp {c.tp} x --pp {c.pp}) on {c.nodes} node(s); {link}"
                  + (f"; {inp.node_link_gb_s:g} GB/s between nodes" if c.nodes > 1 else ""))
        t.add_row("per card", f"weights {fmt_bytes(p.weights_card.bytes_total)}, KV "
                  f"{fmt_bytes_auto(p.kv_card.bytes_per_token)} per token (figures below are per card from "
                  "'Memory budget' on)")
        t.add_row("traffic per token", f"{c.bytes_per_card(1, model.hidden_size) / 1e6:,.3f} MB per card "
                  f"({c.allreduces} all-reduces, {_time(p.decode_1.comm_time_s)} at batch 1)")
    console.print(t)

    t = table("Model")
    t.add_row("parameters", f"{fmt_params(p.params_total)} total, {fmt_params(p.params_active)} active per token")
    t.add_row("layers", f"{model.num_layers}: {_groups(p)}")
    console.print(t)

    w, est = p.weights, p.weights_estimate
    src = ", exact from the safetensors headers" if est else ""
    t = Table(title=f"Weights in {p.fmt.id} ({w.bits_per_weight:g} bits per quantized weight, scope {p.scope}{src})",
              title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, min_width=80)
    t.add_column("component", style="cyan")
    t.add_column("stored", justify="right")
    if est:
        t.add_column("estimate", justify="right")
        t.add_column("diff", justify="right")
    t.add_column("read per token", justify="right")

    def diff(a, b):
        return "-" if not b else f"{(a - b) / b:+.1%}"

    for comp, label in COMPONENT_LABELS.items():
        s, r = w.stored_bytes[comp], w.read_bytes_per_token[comp]
        e = est.stored_bytes[comp] if est else 0
        if s or r or e:
            note = " (tied: the embedding)" if comp == "lm_head" and not s and r else ""
            cells = [fmt_bytes_auto(s) if s else "-"]
            if est:
                cells += [fmt_bytes_auto(e) if e else "-", diff(s, e) if s and e else "-"]
            t.add_row(label + note, *cells, fmt_bytes_auto(r) if r else "-")
    mid = [fmt_bytes(est.bytes_total), diff(w.bytes_total, est.bytes_total)] if est else []
    t.add_row("total", fmt_bytes(w.bytes_total), *mid, fmt_bytes(w.bytes_read_per_token), style="bold")
    t.add_row("", f"= {w.bytes_total / GiB:,.2f} GiB", *([""] * len(mid)), f"= {w.bytes_read_per_token / GiB:,.2f} GiB",
              style="dim")
    console.print(t)
    if p.exact is not None:
        dtypes = ", ".join(f"{k} {fmt_bytes_auto(v)}" for k, v in sorted(p.exact.bytes_by_dtype.items(),
                                                                       key=lambda kv: -kv[1]))
        console.print(f" by dtype: {dtypes}; formats seen: {', '.join(p.exact.formats) or 'none'}", style="dim")
    for n in p.notes:
        console.print(f" note: {n}", style="yellow")

    kv = p.kv
    t = Table(title=f"KV cache ({inp.kv_dtype}) at {inp.context_tokens:,} tokens", title_justify="left",
              title_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, min_width=80)
    t.add_column("layer kind", style="cyan")
    t.add_column("layers", justify="right")
    t.add_column("per token", justify="right")
    t.add_column("per sequence", justify="right")
    for kind in ("full", "sliding", "mla", "ssm", "linear"):
        if kv.layers_by_kind[kind]:
            per_tok = ("constant" if kind in ("ssm", "linear") else fmt_bytes_auto(kv.bytes_per_token_by_kind[kind])
                       + (" (to window)" if kind == "sliding" else ""))
            t.add_row(kind, str(kv.layers_by_kind[kind]), per_tok, fmt_bytes_auto(kv.bytes_by_kind[kind]))
    t.add_row("growing layers / total", "", fmt_bytes_auto(kv.bytes_per_token), fmt_bytes_auto(kv.bytes_per_sequence),
              style="bold")
    console.print(t)

    b = p.budget
    t = table("Memory budget")
    t.add_row("budget", f"{b.vram_bytes / GiB:,.2f} GiB x {b.gpu_util:g} = {b.budget_bytes / GB:,.2f} GB")
    t.add_row("- weights, - overhead", f"{b.weights_bytes / GB:,.2f} GB, {b.overhead_bytes / GB:,.2f} GB "
              f"({b.overhead_bytes / GiB:g} GiB)")
    t.add_row("left for KV cache", fmt_bytes(b.kv_budget_bytes) + ("" if b.weights_fit else "  (does not fit)"))
    if b.weights_fit:
        lim = " (model limit)" if p.max_context.limited_by == "model" else ""
        t.add_row("longest context, 1 sequence", f"{p.max_context.tokens:,} tokens{lim}")
        t.add_row(f"sequences at {inp.context_tokens:,} tokens", f"{p.max_sequences:,}")
        if p.kv_pool_tokens is not None:
            t.add_row("KV pool", f"{p.kv_pool_tokens:,} tokens of growing cache, shared by all sequences")
    console.print(t)

    s1, sb = p.decode_1, p.decode_b
    t = table("Decode" if b.weights_fit else "Decode (as if the weights fit: they do not)")
    t.add_row("bytes read per token", f"{s1.bytes_total / GB:,.3f} GB (weights {s1.weight_bytes / GB:,.3f} + "
              f"KV {s1.kv_bytes / GB:,.3f})")
    t.add_row("ceiling, batch 1", f"{p.decode_ceiling_tok_s:,.1f} tok/s = {gpu.bandwidth_gb_s:,.0f} GB/s / "
              f"{s1.bytes_total / GB:,.3f} GB")
    if sb.batch != 1:
        t.add_row(f"batch {sb.batch:,}", f"{sb.tok_s:,.0f} tok/s aggregate, {sb.tok_s / sb.batch:,.1f} per "
                  f"sequence; step {_time(sb.step_time_s)} ({sb.bound}-bound)")
    ct = "unknown" if sb.compute_time_s is None else _time(sb.compute_time_s)
    t.add_row(f"step at batch {sb.batch:,}", f"max(memory {_time(sb.memory_time_s)}, compute {ct})")
    never = p.ridge_batch is None and p.peak.precision
    t.add_row("turns compute-bound at", "never (memory-bound at any batch)" if never
              else ("unknown" if p.ridge_batch is None else f"batch {p.ridge_batch:,}"))
    console.print(t)

    pre = p.prefill
    t = table("Prefill" if b.weights_fit else "Prefill (as if the weights fit)")
    bound = f" ({pre.bound}-bound)" if pre.bound else ""
    t.add_row(f"time to first token, {pre.prompt_tokens:,} tokens", _time(pre.ttft_s) + bound)
    t.add_row("FLOPs, bytes", f"{pre.flops / 1e12:,.1f} TFLOP, {pre.bytes / GB:,.2f} GB")
    console.print(t)

    d = p.diagnosis
    console.print(Text("Diagnosis", style="bold"))
    console.print(_bullets([Text.assemble(("Saturates first: ", ""), (d.saturates.replace("_", " "), "bold"),
                                          f". {d.summary}")], " "))
    console.print(_bullets([Text(lever) for lever in d.levers], "-"))
    console.print()
    console.print(Text("Assumptions", style="bold"))
    console.print(_bullets([Text(a, style="dim") for a in p.assumptions], "-"))


def _bullets(lines, mark: str):
    """Hanging-indent list, so wrapped lines stay under their bullet."""
    from rich.table import Table

    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=3, justify="right")
    grid.add_column(ratio=1)
    for line in lines:
        grid.add_row(mark, line)
    return grid
