"""llama.cpp's start-up ledger (estimate/llamacpp_memory.py) as report lines and as the JSON `engine` object.
Figures in MiB (2^20 B), the unit llama.cpp's log prints."""

from __future__ import annotations

from llmsize.estimate.mmproj import mmproj_label
from llmsize.render.columns import print_rich
from llmsize.units import GiB

NAMES = {"llamacpp": "llama.cpp", "ollama": "Ollama (llama.cpp underneath)"}
MiB = 2**20


def _offload_dict(led, gpu, off) -> dict:
    devices = []
    for d in led.devices:
        bw = gpu.bandwidth_gb_s if d.name != "CPU" else (off.host.bandwidth_gb_s if off else None)
        read = (off.gpu_read_bytes if d.name != "CPU" else off.host_read_bytes) if off else None
        devices.append({"name": d.name, "layers": d.layers, "output_layer": d.has_output,
                        "weight_bytes": d.model_bytes, "kv_bytes": d.kv_bytes + d.recurrent_bytes,
                        "buffer_bytes": d.compute_bytes, "mmproj_bytes": d.projector_bytes, "bandwidth_gb_s": bw,
                        "read_bytes_per_token": read})
    out = {"devices": devices, "n_cpu_moe": led.settings.n_cpu_moe}
    if off is not None:
        out.update(decode_tok_s=off.decode_tok_s, decode_ceiling_tok_s=off.ceiling_tok_s, crossings=off.crossings,
                   host_memory=off.host.name, host_basis=off.host.basis, prefill_s=off.prefill_s,
                   pcie_gb_s=off.pcie_gb_s, gpu_time_s=off.gpu_time_s, host_time_s=off.host_time_s,
                   host_costing=off.host_costing)  # the host read's costing (the fitted share of its peak)
    return out


def llamacpp_to_dict(plan, gpu) -> dict:
    led, off, fit = plan.ledger, plan.offload, plan.fit
    s = led.settings
    return {
        "name": led.engine,
        "settings": {"ctx_size": s.ctx_size, "parallel": s.parallel, "kv_unified": s.kv_unified,
                     "cache_type_k": s.cache_type_k, "cache_type_v": s.cache_type_v, "flash_attn": s.flash_attn,
                     "ubatch_size": s.ubatch_size, "swa_full": s.swa_full, "gpu_layers": led.gpu_layers},
        "n_ctx": led.n_ctx, "n_ctx_seq": led.n_ctx_seq, "n_stream": led.n_stream,
        "kv_cells": led.cells_full, "kv_cells_swa": led.cells_swa,
        "model_buffer_bytes": {d.name: d.model_bytes for d in led.devices},
        "kv_cache_bytes": led.kv_cache_bytes,
        "kv_cache_bytes_by_device": {d.name: d.kv_bytes for d in led.devices},
        "kv_full_bytes": led.kv_full_bytes, "kv_swa_bytes": led.kv_swa_bytes,
        "recurrent_state_bytes": led.recurrent_bytes,
        "compute_buffer_bytes": {d.name: d.compute_bytes for d in led.devices},
        "mmproj": mmproj_label(s.mmproj) if s.mmproj else None,
        "mmproj_bytes": {d.name: d.projector_bytes for d in led.devices},
        "output_buffer_bytes": led.output_buffer_bytes,
        "offload": _offload_dict(led, gpu, off),
        "gpu_total_bytes": led.gpu_total_bytes, "card_bytes": plan.card_bytes,
        "fits": plan.fits, "tight": plan.tight, "spare_bytes": plan.spare_bytes,
        "max_context_tokens": plan.longest_context_tokens,
        "fit": _fit_dict(fit),
        "notes": list(led.notes),
    }


def _fit_dict(fit) -> dict | None:
    if fit is None:
        return None
    return {"how": fit.how, "gpu_layers": fit.ledger.gpu_layers if fit.how != "none" else None,
            "n_cpu_moe": fit.settings.n_cpu_moe if fit.how != "none" else None, "budget_bytes": fit.budget_bytes,
            "max_context_tokens": fit.max_context_tokens}


def render_llamacpp(plan, gpu, console) -> None:
    led, off, fit = plan.ledger, plan.offload, plan.fit
    from rich import box
    from rich.table import Table

    s = led.settings
    t = Table(title=f"{NAMES.get(led.engine, led.engine)} start-up ledger (MiB, as its log prints)",
              title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, show_header=False, pad_edge=False)
    t.add_column(style="cyan", no_wrap=True, min_width=30)
    t.add_column(overflow="fold", max_width=66)
    mib = lambda b: f"{b / MiB:,.2f} MiB"  # noqa: E731
    unified = "unified" if s.kv_unified else f"{led.n_stream} stream(s)"
    t.add_row("context", f"n_ctx {led.n_ctx:,}, n_ctx_seq {led.n_ctx_seq:,} ({s.parallel} slot(s), {unified}); "
              f"flash attention {'on' if s.flash_attn else 'off'}; ubatch {min(led.n_ctx, s.ubatch_size):,}"
              + (f" (-ub {s.ubatch_size:,}, at most n_ctx)" if s.ubatch_size > led.n_ctx else ""))
    t.add_row("layers on the GPU", f"{led.gpu_layers}/{led.n_layer + 1} (the output layer counts as one"
              + (", and goes first)" if s.output_first else ", and goes last: a build before PR #18148)"))
    for d in led.devices:
        if d.model_bytes or d.name == "CPU":  # at -ngl 0 the GPU holds no weights, only a compute buffer
            t.add_row(f"{d.name} model buffer", mib(d.model_bytes))
    types = f"K {s.cache_type_k}, V {s.cache_type_v}" if led.v_cache else (
        f"K {s.cache_type_k} only: one row for K and V" if led.compressed_cells else
        f"K {s.cache_type_k} only: MLA's latent")
    if led.compressed_cells:  # DeepSeek-V4: no full-length cache; a window and compressed rows a layer
        rows = ", ".join(f"{n:,} rows at ratio {r}" for r, n in led.compressed_cells)
        kv = f"{mib(led.kv_cache_bytes)} ({types}; windows of {led.cells_swa:,} cells, {rows}, indexer keys beside " \
             "the ratio-4 rows)"
    else:
        kv = f"{mib(led.kv_cache_bytes)} ({types}; {led.cells_full:,} cells"
        kv += f", sliding-window layers {led.cells_swa:,} cells)" if led.cells_swa is not None else ")"
    t.add_row("KV cache", kv)
    for d in led.devices:
        if d.kv_bytes:
            t.add_row(f"{d.name} KV buffer", mib(d.kv_bytes))
    if led.recurrent_bytes:
        t.add_row("recurrent state (RS)", mib(led.recurrent_bytes))
    for d in led.devices:
        t.add_row(f"{d.name} compute buffer", mib(d.compute_bytes))
    for d in led.devices:
        if d.projector_bytes:
            t.add_row(f"{d.name} mmproj", f"{mib(d.projector_bytes)} ({mmproj_label(s.mmproj)}: "
                      f"{led.projector_holds})")
    t.add_row("host output buffer", mib(led.output_buffer_bytes))
    card = plan.card_bytes
    verdict = ("does NOT fit" if not plan.fits else
               f"fits, {plan.spare_bytes / GiB:.2f} GiB to spare: under the {plan.margin_bytes / GiB:.3g} GiB "
               "llama.cpp's --fit keeps, tight"
               if plan.tight else "fits")
    t.add_row("GPU total", f"{mib(led.gpu_total_bytes)} ({led.gpu_total_bytes / GiB:.2f} GiB) of the card's "
              f"{card / GiB:.2f} GiB: {verdict} (plus the backend's own context, a few hundred MiB)")
    if plan.longest_context_tokens:
        t.add_row("longest context, as placed", f"{plan.longest_context_tokens:,} tokens (-c; the layers and "
                  f"experts where this placement puts them, with --fit's {plan.margin_bytes / GiB:.3g} GiB margin)")
    if off is not None:
        gb = lambda b: f"{b / 1e9:,.2f} GB"  # noqa: E731
        t.add_row("read per token", f"GPU {gb(off.gpu_read_bytes)}, host {gb(off.host_read_bytes)} "
                  f"({off.host.name}: {off.host.basis}); {off.crossings} device change(s)")
        exp = f"{off.decode_tok_s:,.1f} tok/s expected" if off.decode_tok_s else "no fitted llama.cpp constants here"
        t.add_row("decode, batch 1 (offload)", f"{exp}; ceiling {off.ceiling_tok_s:,.1f} tok/s (every byte at its "
                  f"device's peak). {off.host_costing or 'The host part at the memory peak (no fitted fraction)'}")
        if off.prefill_s:
            t.add_row("prefill (offload)", f"{off.prefill_s * 1000:,.0f} ms for the prompt: the host's weights cross "
                      f"PCIe ({off.pcie_gb_s:.1f} GB/s) once per ubatch of {led.settings.ubatch_size} (of a MoE's "
                      "routed experts, only those its tokens chose); a larger --ubatch-size cuts the crossings")
    if fit is not None:
        t.add_row(f"fit ({plan.margin_bytes / MiB:,.0f} MiB margin)", _fit_words(fit, led.engine))
    for n in led.notes:
        t.add_row("note", n)
    print_rich(console, t)


def _fit_words(fit, engine: str = "llamacpp") -> str:
    budget = f"{fit.budget_bytes / MiB:,.0f} MiB for llama.cpp"
    if fit.how == "none" and fit.ram_bytes:
        return (f"nothing fits in {budget}, and layers left to the CPU come out of the same "
                f"{fit.ram_bytes / GiB:,.0f} GiB of RAM: GPU and host buffers together exceed it")
    if fit.how == "none" and fit.staging_bound:
        return (f"nothing fits in {budget}: with every layer on the host the GPU still stages host weights for a "
                "ubatch's matmuls (op offload); --ubatch-size 16 (below its 32 tokens) or llama.cpp's "
                "--no-op-offload would fit")
    if fit.how == "none":
        return f"nothing fits in {budget}, not even with every layer on the host"
    if fit.how == "as asked":
        where = "as asked"
    elif fit.how == "n_cpu_moe":
        where = f"--n-cpu-moe {fit.settings.n_cpu_moe} (routed experts of the first layers on the host)"
    else:
        where = f"--gpu-layers {fit.ledger.gpu_layers}"
    slots = fit.settings.parallel
    if not fit.max_context_tokens:
        ctx = "; no context of 256 tokens fits beside it"
    elif slots > 1 and engine == "ollama":  # Ollama's num_ctx is each slot's
        ctx = f"; the largest num_ctx with it: {fit.max_slot_tokens:,} tokens a slot ({slots} slots)"
    elif slots > 1:
        ctx = (f"; the largest context with it: {fit.max_context_tokens:,} tokens (-c, shared by {slots} slots: "
               f"{fit.max_slot_tokens:,} each)")
    else:
        ctx = f"; the largest context with it: {fit.max_context_tokens:,} tokens"
    return f"{where} fits in {budget}{ctx}"
