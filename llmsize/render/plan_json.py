"""A plan as one JSON object: inputs echoed, units in key names (bytes, _gb_s, _tok_s, _s, _flops)."""

from __future__ import annotations

from llmsize import __version__
from llmsize.estimate.params import ACTIVE_DEFINITION, params_by_component
from llmsize.estimate.plan import Plan


def _r(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else round(x, nd)


def _sig(x: float | None, digits: int = 9) -> float | None:
    """To significant digits, not decimals: a 0.2183 tok/s ceiling must not print as 0.218, below what it bounds."""
    return None if x is None else float(f"{x:.{digits}g}")


def plan_to_dict(p: Plan) -> dict:
    gpu, model, inp = p.gpu, p.model, p.inputs
    s1, sb = p.decode_1, p.decode_b
    groups = []
    for g in model.layer_groups:
        groups.append({
            "count": g.count,
            "mixer": g.mixer.kind if g.mixer else None,
            "mlp": g.mlp.kind if g.mlp else None,
            "sliding_window": getattr(g.mixer, "sliding_window", None),
            "num_key_value_heads": getattr(g.mixer, "num_key_value_heads", None),
            "head_dim": getattr(g.mixer, "head_dim", None),
        })
    return {
        "llmsize_version": __version__,
        "inputs": {
            "model": model.id, "gpu": gpu.id, "quant": p.fmt.id, "quant_scope": p.scope,
            "kv_dtype": inp.kv_dtype, "context_tokens": inp.context_tokens, "batch": inp.batch,
            "prompt_tokens": p.prompt_tokens, "gpu_util": inp.gpu_util, "gpu_util_given": p.gpu_util_given,
            "overhead_bytes": None if inp.overhead_bytes is None else int(inp.overhead_bytes),
            "compute_precision": p.peak.precision, "fp4_kernel": inp.fp4_kernel, "memory_gb": inp.memory_gb,
        },
        "gpu": {
            "id": gpu.id, "name": gpu.name, "bandwidth_gb_s": gpu.bandwidth_gb_s,
            "memory_bytes": gpu.memory_bytes, "memory_size": gpu.memory_size,
            "memory_vendor_unit": gpu.memory_vendor_unit,
            "compute_precision": p.peak.precision, "peak_tflops": _r(p.peak.flop_per_s and p.peak.flop_per_s / 1e12),
            "ridge_point_flop_per_byte": _r(p.ridge_point_flop_per_byte, 3),
        },
        "model": {
            "id": model.id, "name": model.name, "params_total": p.params_total, "params_active": p.params_active,
            "params_active_with_embedding": p.params_active_with_embedding,
            "params_active_definition": ACTIVE_DEFINITION,
            "params_by_component": params_by_component(model), "layers": model.num_layers, "layer_groups": groups,
        },
        "weights": {
            "format": p.fmt.id, "scope": p.scope, "bits_per_weight": p.weights.bits_per_weight,
            "bytes_total": round(p.weights.bytes_total), "bytes_read_per_token": round(p.weights.bytes_read_per_token),
            "bytes_by_component": {k: round(v) for k, v in p.weights.stored_bytes.items()},
            "bytes_read_per_token_by_component": {k: round(v) for k, v in p.weights.read_bytes_per_token.items()},
            "source": p.exact.source if p.exact is not None else "estimate",
            "estimate": None if p.weights_estimate is None else {
                "bytes_total": round(p.weights_estimate.bytes_total),
                "bytes_read_per_token": round(p.weights_estimate.bytes_read_per_token),
                "bytes_by_component": {k: round(v) for k, v in p.weights_estimate.stored_bytes.items()},
            },
            "exact": None if p.exact is None else {
                "bytes_by_dtype": dict(p.exact.bytes_by_dtype), "formats": list(p.exact.formats),
                "params_total": p.exact.params_total, "files": [str(f) for f in p.exact.files],
            },
        },
        "notes": list(p.notes),
        "warnings": list(p.warnings),
        "parallel": None if p.comm is None else {
            "tp": p.comm.tp, "pp": p.comm.pp, "cards": p.comm.tp * p.comm.pp, "nodes": p.comm.nodes,
            "link": p.comm.link.kind if p.comm.link else None,
            "link_gb_s": p.comm.link.gb_s if p.comm.link else None,
            "allreduces_per_token": p.comm.allreduces,
            "comm_bytes_per_token_per_card": round(p.comm.bytes_per_card(1, model.hidden_size)),
            "comm_time_s_batch_1": p.decode_1.comm_time_s,
            "weights_bytes_per_card": round(p.weights_card.bytes_total),
            "kv_bytes_per_token_per_card": round(p.kv_card.bytes_per_token),
            "kv_bytes_per_sequence_per_card": round(p.kv_card.bytes_per_sequence),
        },
        "fit": None if p.fit is None else {"tp": p.fit.tp, "pp": p.fit.pp, "cards": p.fit.cards,
                                           "ceiling_tok_s": p.fit.ceiling_tok_s,
                                           "weights_bytes_per_card": round(p.fit.weights_per_card_bytes)},
        "kv": {
            "dtype": inp.kv_dtype, "context_tokens": inp.context_tokens,
            "policy": None if inp.kv_policy is None else {
                "name": inp.kv_policy.label, "kind": inp.kv_policy.kind, "window": inp.kv_policy.window,
                "sinks": inp.kv_policy.sinks, "budget": inp.kv_policy.budget,
                "cap_tokens": inp.kv_policy.cap_tokens, "full_prompt": inp.kv_policy.full_prompt,
                "caveat": inp.kv_policy.caveat()},
            "bytes_per_token": round(p.kv.bytes_per_token),
            "bytes_per_token_by_kind": {k: round(v) for k, v in p.kv.bytes_per_token_by_kind.items()},
            "bytes_per_sequence": round(p.kv.bytes_per_sequence),
            "read_bytes_per_sequence": round(p.kv.read_bytes), "shared_cache_layers": p.kv.shared_layers,
            "indexer_bytes_per_token": round(p.kv.indexer_bytes_per_token), "sparse_topk": p.kv.topk,
            "bytes_per_sequence_by_kind": {k: round(v) for k, v in p.kv.bytes_by_kind.items()},
            "layers_by_kind": p.kv.layers_by_kind,
        },
        "capacity": {
            "budget_bytes": round(p.budget.budget_bytes), "weights_bytes": round(p.budget.weights_bytes),
            "overhead_bytes": round(p.budget.overhead_bytes), "kv_budget_bytes": round(p.budget.kv_budget_bytes),
            "scores_bytes": round(p.budget.scores_bytes),
            "basis": "generic" if p.budget.engine is None else f"{p.budget.engine.engine}_ledger",
            "engine_compute_buffer_bytes": None if p.budget.engine is None else p.budget.engine.compute_bytes,
            "engine_margin_bytes": None if p.budget.engine is None else p.budget.engine.margin_bytes,
            "engine_mmproj_bytes": None if p.budget.engine is None else p.budget.engine.projector_bytes,
            "host_weights_bytes": None if p.budget.engine is None else p.budget.engine.host_weights_bytes,
            "weights_fit": p.budget.weights_fit,
            "max_context_tokens": p.max_context.tokens, "max_context_limited_by": p.max_context.limited_by,
            "max_concurrent_sequences": p.max_sequences, "kv_pool_tokens": p.kv_pool_tokens,
        },
        "decode": {
            "ceiling_tok_s": _sig(p.decode_ceiling_tok_s),
            "bytes_read_per_token": round(s1.bytes_total),
            "batch": sb.batch, "step_bytes": round(sb.bytes_total), "step_flops": sb.flops,
            "step_memory_time_s": _r(sb.memory_time_s, 9), "step_compute_time_s": _r(sb.compute_time_s, 9),
            "step_time_s": _r(sb.step_time_s, 9), "aggregate_tok_s": _sig(sb.tok_s),
            "per_sequence_tok_s": _sig(sb.tok_s / sb.batch), "bound": sb.bound,
            "ridge_batch": p.ridge_batch,
        },
        "speculative": None if p.speculative is None else _spec_dict(p.speculative),
        "prefill": {
            "prompt_tokens": p.prompt_tokens, "flops": p.prefill.flops, "bytes": round(p.prefill.bytes),
            "compute_time_s": _r(p.prefill.compute_time_s, 9), "memory_time_s": _r(p.prefill.memory_time_s, 9),
            "ttft_s": _r(p.prefill.ttft_s, 9), "bound": p.prefill.bound,
            "flash_attn": p.prefill.flash_attn, "unfused_scores_bytes": round(p.prefill.scores_bytes),
        },
        "diagnosis": {
            "saturates": p.diagnosis.saturates, "summary": p.diagnosis.summary, "levers": p.diagnosis.levers,
            "shortfall_bytes": round(p.diagnosis.shortfall_bytes), "cards_needed": p.diagnosis.cards_needed,
        },
        "assumptions": p.assumptions,
    }


def _spec_dict(sd) -> dict:
    return {"spec": sd.spec.label, "draft": sd.spec.draft.id if sd.spec.draft else None, "k": sd.spec.k,
            "accept": sd.spec.accept, "tokens_per_pass": _r(sd.tokens_per_pass, 4),
            "draft_weight_bytes": round(sd.draft_weight_bytes),
            "draft_kv_bytes_per_sequence": round(sd.draft_kv_bytes_per_sequence),
            "kv_budget_bytes": round(sd.kv_budget_bytes), "max_concurrent_sequences": sd.max_sequences,
            "verify_time_s": _r(sd.verify_s, 9), "draft_step_time_s": _r(sd.draft_step_s, 9),
            "ceiling_tok_s": _sig(sd.ceiling_tok_s), "gain": _r(sd.gain, 4)}
