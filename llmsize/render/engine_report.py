"""An engine ledger (estimate/engines.py) as report lines and as the JSON `engine` object."""

from __future__ import annotations

from llmsize.render.columns import print_rich
from llmsize.units import GiB

NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}


def ledger_to_dict(led) -> dict:
    return {
        "name": led.name, "version": led.version, "total_bytes": led.total_bytes, "total_source": led.total_source,
        "budget_bytes": round(led.budget_bytes), "weights_bytes": round(led.weights_bytes),
        "non_torch_bytes": round(led.non_torch_bytes), "activation_peak_bytes": round(led.activation_peak_bytes),
        "cudagraph_bytes": round(led.cudagraph_bytes),
        "kv_cache_bytes": round(led.kv_cache_bytes), "block_bytes": round(led.block_bytes),
        "kv_blocks": led.kv_blocks, "kv_cache_tokens": led.kv_cache_tokens, "max_model_len": led.max_model_len,
        "max_num_batched_tokens": led.max_num_batched_tokens, "max_concurrency": led.max_concurrency,
        "running_concurrency": led.running_concurrency, "requests_at_once": led.requests_at_once,
        "state_slots": led.state_slots,
        "min_gpu_util": None if led.min_fraction is None else round(led.min_fraction, 4),
        "gpu_util": led.gpu_util,
        "fits_one_request": led.fits_one_request,
        "steps": [{"label": label, "bytes": round(nbytes)} for label, nbytes in led.steps],
        "assumptions": list(led.assumptions),
    }


def render_ledger(led, console) -> None:
    from rich import box
    from rich.table import Table

    t = Table(title=f"{NAMES.get(led.name, led.name)} memory ledger ({led.version})", title_justify="left",
              title_style="bold", box=box.SIMPLE_HEAD, show_header=False, pad_edge=False)
    t.add_column(style="cyan", no_wrap=True, min_width=30)
    t.add_column(overflow="fold", max_width=66)
    g = lambda b: f"{b / GiB:,.2f} GiB"  # noqa: E731  engines print GiB
    t.add_row("total (CUDA)", g(led.total_bytes))
    for label, nbytes in led.steps:  # the engine's own order, from its total to the cache
        if nbytes or not label.startswith("-"):
            t.add_row(label, g(nbytes))
    refuse = ""
    if led.kv_cache_bytes < 0:  # no length helps: the lines above exceed what the engine budgets
        refuse = "  (negative: the lines above exceed the engine's budget; it does not start at any length)"
    elif not led.fits_one_request and led.name == "sglang" and led.kv_cache_tokens > 0:
        refuse = "  (too small for one request: SGLang caps a request at its tokens)"
    elif not led.fits_one_request and led.min_fraction is not None:
        refuse = (f"  (too small for one request: refuses to start below {led.min_fraction:.4f})"
                  if led.min_fraction <= 1 else "  (too small for one request at any utilization: lower "
                  "--max-model-len)")
    t.add_row("KV cache", g(led.kv_cache_bytes) + refuse)
    groups = f" over {led.kv_groups} KV-cache groups" if led.kv_groups > 1 else ""
    t.add_row("blocks", f"{led.kv_blocks:,} of {led.block_bytes / 2**20:,.2f} MiB{groups}")
    t.add_row("GPU KV cache size", f"{led.kv_cache_tokens:,} tokens (as the engine logs it)")
    held_by = led.requests_held_by
    t.add_row("max concurrency", f"{led.max_concurrency:.2f}x for {led.max_model_len:,} tokens per request"
              + (" (as the engine logs it)" if held_by else ""))
    if held_by:
        why = {"window": "past their prefill (a sliding group keeps its window)",
               "states": "(the states' pool holds no more)"}[held_by]
        t.add_row("running at once", f"{led.requests_at_once:.2f} requests of {led.max_model_len:,} tokens {why}")
    print_rich(console, t)
    for a in led.assumptions:
        console.print(f"  - {a}", style="dim")
