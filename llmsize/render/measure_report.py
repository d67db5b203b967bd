"""`llmsize measure` result dict -> a rich report that fits 100 columns. Torch-free."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from llmsize.errors import printable
from llmsize.units import GB, GiB

PART_LABELS = {
    "nvfp4_packed": "NVFP4 packed weights (4-bit codes)",
    "nvfp4_scales": "NVFP4 scales (fp8 per 16 + fp32 per row)",
    "linear_bf16": "bf16 linear weights",
    "lm_head": "lm_head (tied to the embedding, unquantized)",
    "embedding_rows": "embedding rows looked up",
    "norms": "norms and layer scalars",
    "kv_full": "KV cache, full-attention layers",
    "kv_sliding": "KV cache, sliding-window layers",
}


def _pct(x):
    return "n/a" if x is None else f"{100 * x:.1f}%"


def num(x, fmt="{:,.1f}", unit=""):
    """A figure, or n/a."""
    return "n/a" if x is None else fmt.format(x) + unit


def kv(c: Console, rows, label_width: int = 32):
    """Label and value rows; values as plain text (a card's or a server's names may hold rich markup)."""
    t = Table(box=None, show_header=False, pad_edge=False)
    t.add_column(min_width=label_width)
    t.add_column(overflow="fold")
    for k, v in rows:
        t.add_row(" " + k, Text(printable(str(v))))
    c.print(t)


def _launch(run: dict) -> str:
    """How the kernels were launched: PDL and its mode, the GEMVs' L2 prefetch (launch.py)."""
    if not run.get("pdl"):
        return ""
    mode = run.get("pdl_mode")
    kb = run.get("l2_prefetch_kb")
    return (", programmatic dependent launch" + (f" ({mode})" if mode else "")
            + (f", L2 prefetch {kb} KiB per GEMV program" if kb else ""))


def _lm_head(lm: dict) -> str:
    """How the step ended (run.lm_head_path)."""
    return {"cublas": "cuBLAS GEMM, then soft-cap and argmax in torch",
            "cublas+cap_argmax": "cuBLAS GEMM, then one Triton kernel (soft-cap, greedy tokens)"
            }.get(lm["kernel"], lm["kernel"])


def render_measure(r: dict, c: Console) -> None:
    g, run, dec, ach, pred = r["gpu"], r["run"], r["decode"], r["achieved"], r.get("predicted")
    title = f"llmsize measure: {r['model']['name']} in {run['quant']} on {g['name']}"
    if run["interrupted"]:
        title += f" (interrupted: {run['tokens_measured']} of {run['tokens_requested']} tokens)"
    c.print(title, style="bold")
    c.print("Units: GB = 10^9 B, GiB = 2^30 B, GB/s decimal.", style="dim")

    c.print("\nCard", style="bold")
    if run["device"] == "cuda":
        theo = g.get("theoretical_bandwidth_gb_s")
        cat = (f"{g['catalog_id']} ({g['catalog_name']}): datasheet {g['datasheet_bandwidth_gb_s']:,.1f} GB/s"
               if g.get("catalog_id") else "not in the catalog")
        kv(c, [
            ("name, driver", f"{g['name']}, driver {g.get('driver') or 'n/a'}"),
            ("VRAM total / free", f"{num(g['vram_total_bytes'] and g['vram_total_bytes'] / GiB, '{:.2f}')} GiB / "
                                  f"{num(g['vram_free_bytes'] and g['vram_free_bytes'] / GiB, '{:.2f}')} GiB"),
            ("memory bus, max memory clock", f"{num(g['bus_width_bits'], '{:d}')} bit, "
                                             f"{num(g['max_memory_clock_mhz'], '{:d}')} MHz"),
            ("theoretical bandwidth", f"{num(theo)} GB/s  (2 x clock x bus width / 8)"),
            ("catalog entry", cat),
            ("probed read bandwidth", f"{num(g.get('probed_read_bandwidth_gb_s'))} GB/s = "
                                      f"{_pct(g.get('probe_fraction_of_theoretical'))} of theoretical"),
        ])
    else:
        kv(c, [("device", f"{g['name']}: a small Gemma-4-shaped model in float32 (no GPU figures)")])

    c.print("\nRun", style="bold")
    kv(c, [
        ("weights", r["model"]["source"]),
        ("context, batch", f"{run['context_tokens']:,} tokens, batch {run['batch']}"),
        ("decoded", f"{run['tokens_measured']} timed tokens after {run['warmup_tokens']} warm-up, "
                    f"CUDA graph {'on' if run['cuda_graph'] else 'off'}, GEMV {run['gemv']}"
                    f"{', torch.compile' if run.get('compiled') else ''}"
                    f"{', fused kernels between the GEMVs' if run.get('fused') else ''}"
                    f"{_launch(run)}"),
        *([("lm_head", _lm_head(run["lm_head"]))] if run.get("lm_head") and run["device"] == "cuda" else []),
        *([("GEMV tiles", ", ".join(f"{shape}: {kind}" for shape, kind in run["batch_kernels"].items()))]
          if run.get("batch_kernels") else []),
        *[("self-check", f"{name}: {'passed, used' if ok else 'FAILED on this card'}")
          for name, ok in (run.get("self_checks") or {}).items()],
        *[("--fallback", what) for what in run.get("fallbacks") or []],
    ])

    parts = r["bytes_per_step_parts"]
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=f"Bytes read per decode step (KV at "
              f"{run['mean_attended_positions']:,.0f} attended positions, batch {run['batch']})",
              title_justify="left", title_style="bold")
    t.add_column("part", min_width=44)
    total = r["bytes_per_step"]
    unit, div = ("GB", GB) if total >= 0.1 * GB else ("MB", 1e6)
    t.add_column(unit, justify="right", min_width=12)
    t.add_column("share", justify="right", min_width=8)
    for k, v in parts.items():
        if v:
            t.add_row(PART_LABELS.get(k, k), f"{v / div:.4f}", _pct(v / total))
    t.add_row("total", f"{total / div:.4f}", "", style="bold")
    c.print()
    c.print(t)

    c.print("Speed", style="bold")
    kv(c, [
        ("prefill (time to first token)", f"{r['prefill']['ttft_s'] * 1e3:,.1f} ms for "
                                          f"{r['prefill']['prompt_tokens']:,} tokens"
                                          + (f" x {run['batch']} sequences" if run["batch"] > 1 else "")),
        ("decode, ms per step", f"median {dec['ms_per_token_median']:.3f}  (p10 {dec['ms_per_token_p10']:.3f}, "
                                f"p90 {dec['ms_per_token_p90']:.3f})"),
        ("decode, tokens/s", f"{dec['tok_s']:,.1f} (mean over the run: steps / total time)"
         + (", all sequences" if run["batch"] > 1 else "")),
        *([("  note", dec["timing_note"])] if dec.get("timing_note") else []),
        ("achieved bandwidth", (f"{ach['bandwidth_gb_s']:,.1f}" if ach["bandwidth_gb_s"] >= 1 else
                                f"{ach['bandwidth_gb_s']:.2g}") + " GB/s  (bytes per step x steps/s)"),
        ("  of theoretical / probe / datasheet", f"{_pct(ach['fraction_of_theoretical'])} / "
                                                 f"{_pct(ach['fraction_of_probe'])} / "
                                                 f"{_pct(ach['fraction_of_datasheet'])}"),
    ])
    if pred and pred.get("ceiling_tok_s"):
        c.print("\nWhat `plan` predicted for this card", style="bold")
        rows = [("plan's bytes per step", f"{pred['bytes_per_step'] / GB:.4f} GB ({pred['format']}, "
                                          f"scope {pred['scope']})")]
        for name in ("datasheet", "theoretical", "probe"):
            ceil = pred.get(f"ceiling_tok_s_{name}")
            if ceil:
                rows.append((f"ceiling at {name} bandwidth", f"{ceil:,.1f} tok/s; measured "
                             f"{_pct(pred[f'measured_fraction_of_ceiling_{name}'])} of it"))
        if pred.get("roofline_tok_s"):  # the compute roof too: it binds past plan's ridge batch
            ridge = pred.get("ridge_batch")
            turn = "memory-bound at any batch" if ridge is None else f"compute-bound from batch {ridge:,}"
            rows.append((f"roofline at batch {run['batch']}", f"{pred['roofline_tok_s']:,.1f} tok/s, "
                         f"{pred['roofline_bound']}-bound ({turn} at this length); measured "
                         f"{_pct(pred['measured_fraction_of_roofline'])} of it"))
        kv(c, rows)
