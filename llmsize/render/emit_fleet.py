"""Launch lines for a fleet row (estimate/fleet.py) on serving stacks users already run, never one of ours.

Aggregated: one replica's `vllm serve` (--tensor-parallel-size, --max-model-len, --max-num-seqs,
--enable-expert-parallel for a MoE) or `python -m sglang.launch_server` (--tp-size, --context-length,
--max-running-requests, --ep-size), started `replicas` times behind any load balancer; pipeline stages
(--pipeline-parallel-size, --pp-size) within a node, or one a node with the engine's multi-node launch. A DEP
replica (attention data parallel, experts split over its n cards): vLLM's `--data-parallel-size n --enable-expert-parallel`
(docs.vllm.ai, the DeepSeek-V3 recipe's DP8+EP; each rank is its own engine core, so --max-num-seqs is a rank's
share of the batch: docs/serving/data_parallel_deployment.md), SGLang's `--tp-size n --dp-size n
--enable-dp-attention` (docs.sglang.io, "DP, DPA and SGLang DP Router"; --max-running-requests is the replica's,
divided among its ranks by the scheduler). Disaggregated: SGLang's
own P/D (`--disaggregation-mode prefill|decode`, its router `python -m sglang_router.launch_router
--pd-disaggregation --prefill URL --decode URL`, docs.sglang.io advanced_features/pd_disaggregation), or vLLM's
workers under NVIDIA Dynamo (`python -m dynamo.vllm --disaggregation-mode prefill|decode` with the NIXL KV
connector, `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'`, docs.nvidia.com/dynamo).

What the rows were sized with goes on the lines too. FP8 weights (--quant fp8) of a 16-bit release: both
engines' `--quantization fp8` (quantized on loading); another format than the release's: a comment asks for a
checkpoint in it. An FP8 cache (--kv-dtype): vLLM's `--kv-cache-dtype fp8`
(`fp8_ds_mla` as named), SGLang's `--kv-cache-dtype fp8_e4m3` (`fleet` refuses a cache dtype the engine does not
take). Speculative decoding (--spec): vLLM's `--speculative-config` JSON, `{"model": DRAFT,
"num_speculative_tokens": k, "method": "draft_model"}` for a draft model and `{"method": "mtp",
"num_speculative_tokens": k}` for the model's own MTP layers (docs.vllm.ai, features/speculative_decoding:
draft_model, mtp); SGLang's `--speculative-algorithm STANDALONE --speculative-draft-model-path DRAFT` for a draft
model and `--speculative-algorithm EAGLE` for MTP (its DeepSeek recipe), with `--speculative-num-steps k
--speculative-eagle-topk 1 --speculative-num-draft-tokens k+1`: a chain of k proposed tokens, as the fleet costs it
(docs.sglang.io, advanced_features/speculative_decoding).
"""

from __future__ import annotations

import json
import shlex

from llmsize.estimate.fleet import stage_nodes
from llmsize.estimate.runtime_model import vision_tower_of
from llmsize.estimate.vllm_dsv4 import DSV4_BLOCK_SIZE


def node_launch(engine: str, nodes: int, what: str) -> tuple[list[str], list[str]]:
    """The comment lines and the flags of a server (`what`) whose cards span `nodes` nodes: vLLM over a Ray cluster
    started first (its multi-node serving: the line run on the head node), SGLang's line run on every node with its
    rank (--nnodes, --node-rank, --dist-init-addr); none on one node."""
    if nodes <= 1:
        return [], []
    if engine == "vllm":
        return [f"# {what} spans {nodes} nodes: start a Ray cluster over them first (vLLM's multi-node serving), "
                "then run the line on its head node"], []
    return ([f"# {what} spans {nodes} nodes: run the line on each, RANK 0 to {nodes - 1}"],
            ["--nnodes", str(nodes), "--node-rank", "RANK", "--dist-init-addr", "HEAD_HOST:5000"])

NIXL = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


# --kv-dtype -> the engine's --kv-cache-dtype (16-bit: its auto); plan's and fleet's launch lines both use it
ENGINE_KV = {"vllm": {"fp8": "fp8", "fp8_ds_mla": "fp8_ds_mla"}, "sglang": {"fp8": "fp8_e4m3"}}


# flags a family's checkpoints take in an engine beyond what a plan sizes: DeepSeek-V4 under vLLM in its recipe's
# blocks (vllm-project/recipes models/deepseek-ai/DeepSeek-V4-Flash.yaml @8959cf64, base_args: --trust-remote-code
# --kv-cache-dtype fp8 --block-size 256; the first two come from the catalog and the plan)
FAMILY_ARGS = {("vllm", "deepseek_v4"): ["--block-size", str(DSV4_BLOCK_SIZE)]}


def family_args(model, engine: str) -> list[str]:
    """The engine's flags for the model's family (FAMILY_ARGS), none for most."""
    return list(FAMILY_ARGS.get((engine, model.family), []))


def remote_code_args(model) -> list[str]:
    """--trust-remote-code where the catalog says the checkpoint loads code from its repository (vLLM and SGLang name
    the flag alike)."""
    return ["--trust-remote-code"] if model.trust_remote_code else []


def _weights_extras(model, quant: str | None) -> tuple[list[str], list[str]]:
    """The weights' format the rows were sized with, where it is not the release's: FP8 as both engines quantize a
    16-bit checkpoint on loading (`--quantization fp8`: vLLM's dynamic FP8, SGLang's); any other format needs a
    checkpoint in it, said in a comment."""
    remote = remote_code_args(model)
    if quant is None or quant == model.release.quant:
        return remote, []
    if quant == "fp8" and model.release.quant in ("bf16", "fp16", "fp32"):
        return ["--quantization", "fp8"] + remote, []
    return remote, [f"# the rows were sized with weights in {quant}: give a {quant} checkpoint of {model.id} in "
                    "place of the model named below"]


def _engine_extras(engine: str, kv_dtype: str, spec) -> tuple[list[str], list[str]]:
    """The flags that carry the cache dtype and the speculative decoding the rows were sized with, and comments
    for what the engine cannot be told."""
    flags, notes = [], []
    kv = kv_dtype.lower()
    table = ENGINE_KV[engine]
    if kv in table:  # any other is 16-bit: the fleet refuses a cache dtype the engine does not take
        flags += ["--kv-cache-dtype", table[kv]]
    return flags + spec_flags(engine, spec), notes


def spec_flags(engine: str, spec) -> list[str]:
    """The engine's flags for speculative decoding as a plan or fleet was sized with it (--spec), none without."""
    if spec is None:
        return []
    if engine == "vllm":
        cfg = ({"model": spec.draft.hf_repo or spec.draft.id, "num_speculative_tokens": spec.k,
                "method": "draft_model"} if spec.draft is not None else
               {"method": "mtp", "num_speculative_tokens": spec.k})
        return ["--speculative-config", json.dumps(cfg)]
    return ((["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path",
              spec.draft.hf_repo or spec.draft.id] if spec.draft is not None else
             ["--speculative-algorithm", "EAGLE"])
            + ["--speculative-num-steps", str(spec.k), "--speculative-eagle-topk", "1",
               "--speculative-num-draft-tokens", str(spec.k + 1)])


def _placement_note(row, engine: str) -> list[str]:
    """Where replicas (or workers) of fewer than 8 cards share a node: each on its own cards and port, as the line
    alone would start them all on the first cards and one port."""
    slots = row.shared_node_slots()
    if slots is None:
        return []
    fit, (first, second) = slots
    if engine == "vllm":
        how = (f"CUDA_VISIBLE_DEVICES={first} ... --port 8000, CUDA_VISIBLE_DEVICES={second} ... --port 8001, "
               "and so on (HIP_VISIBLE_DEVICES on AMD cards)")
    else:
        how = f"--base-gpu-id 0 --port 30000, --base-gpu-id {second.split(',')[0]} --port 30001, and so on"
    return [f"# up to {fit} of these on a node of 8, each on its own {row.cards_per_worker} card(s) and port: {how}"
            + ("; a load balancer over the replicas' endpoints" if row.mode == "aggregated" else "")]


def text_alone_args(model, language_model_only: bool) -> list[str]:
    """vLLM's (>= 0.18) and SGLang's --language-model-only where the plan serves a multimodal model's text alone
    (the towers never built); nothing for a model without a vision tower."""
    return ["--language-model-only"] if language_model_only and vision_tower_of(model, loaded=False) else []


def _util(flag: str, row) -> list[str]:
    """The engine's memory share as the rows were sized with it (SGLang's own default differs by card and tp)."""
    return [flag, f"{row.gpu_util:g}"] if row.gpu_util is not None else []


def fleet_command(model, row, engine: str, max_model_len: int, kv_dtype: str = "bf16", spec=None,
                  quant: str | None = None, language_model_only: bool = False) -> str:
    """max_model_len: the longest request a replica must take (isl + osl, or the p99 prompt and answer); kv_dtype,
    spec (speculative.Spec), quant (the weights' format id) and language_model_only (the text served alone): what
    the rows were sized with, passed on to the engine."""
    name = model.hf_repo or model.id
    extras, extra_notes = _engine_extras(engine, kv_dtype, spec)
    wflags, wnotes = _weights_extras(model, quant)
    extras, extra_notes = wflags + family_args(model, engine) + extras, wnotes + extra_notes
    extras += text_alone_args(model, language_model_only)
    ctx = str(max_model_len)
    moe = row.ep > 1
    dp = row.dp or 1
    shape = (f"dp {dp} + ep {dp} (attention data parallel, experts split)" if dp > 1 else
             f"tp {row.tp}{f' x pp {row.pp}' if row.pp > 1 else ''}")
    head = [f"# {row.card}: {row.cards_total} card(s), {row.nodes} node(s) of 8; "
            + (f"{row.replicas} replica(s) of {shape}, batch {row.batch_per_replica} each"
               + (f" on average, up to {row.running_cap} admitted at once (Poisson arrivals)"
                  if row.running_cap != row.batch_per_replica else "")
               if row.mode == "aggregated" else
               f"{row.prefill_workers} prefill + {row.decode_workers} decode worker(s) of {shape}, decode batch "
               f"{row.batch_per_replica}")]
    if not model.hf_repo:
        head.append(f"# {model.id} has no hf_repo in the catalog: put the checkpoint path or repo id in place of it")
    head += extra_notes + _placement_note(row, engine)
    if engine == "vllm":
        par = ["--data-parallel-size", str(dp)] if dp > 1 else ["--tensor-parallel-size", str(row.tp)]
        seqs = -(-row.running_cap // dp)  # each data-parallel rank is its own engine core and scheduler
        base = par + (["--pipeline-parallel-size", str(row.pp)] if row.pp > 1 else []) + [
            "--max-model-len", ctx, "--max-num-seqs", str(seqs)] + _util("--gpu-memory-utilization", row) + (
            ["--enable-expert-parallel"] if moe else []) + extras
        head += node_launch("vllm", stage_nodes(row.tp, row.pp) or 1, "a replica")[0]
        if row.mode == "aggregated":
            return "\n".join(head + [f"# start {row.replicas} of:", shlex.join(["vllm", "serve", name] + base)])
        lines = head + ["# NVIDIA Dynamo: a frontend, then the workers (each on its own cards)",
                        shlex.join(["python", "-m", "dynamo.frontend"]),
                        f"# {row.prefill_workers} x prefill:",
                        shlex.join(["python", "-m", "dynamo.vllm", "--model", name, *base, "--disaggregation-mode",
                                    "prefill", "--kv-transfer-config", NIXL]),
                        f"# {row.decode_workers} x decode:",
                        shlex.join(["python", "-m", "dynamo.vllm", "--model", name, *base, "--disaggregation-mode",
                                    "decode", "--kv-transfer-config", NIXL])]
        return "\n".join(lines)
    base = ["--tp-size", str(row.tp * dp)] + (["--dp-size", str(dp), "--enable-dp-attention"] if dp > 1 else []) + [
        "--context-length", ctx, "--max-running-requests", str(row.running_cap)] + _util("--mem-fraction-static", row)
    if row.pp > 1:
        base += ["--pp-size", str(row.pp)]
    notes, flags = node_launch("sglang", stage_nodes(row.tp, row.pp) or 1, "a replica")
    head += notes
    base += flags
    base += (["--ep-size", str(row.tp * dp)] if moe else []) + extras
    launch = ["python", "-m", "sglang.launch_server", "--model-path", name, *base]
    if row.mode == "aggregated":
        return "\n".join(head + [f"# start {row.replicas} of:", shlex.join(launch)])
    return "\n".join(head + [
        f"# {row.prefill_workers} x prefill:", shlex.join(launch + ["--disaggregation-mode", "prefill"]),
        f"# {row.decode_workers} x decode:", shlex.join(launch + ["--disaggregation-mode", "decode"]),
        "# the router, with one --prefill / --decode URL per worker:",
        shlex.join(["python", "-m", "sglang_router.launch_router", "--pd-disaggregation", "--prefill",
                    "http://PREFILL_HOST:30000", "--decode", "http://DECODE_HOST:30000"])])
