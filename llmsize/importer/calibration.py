"""--calibrate FILE: a run the user already made, read from the file their tool wrote.

Formats (recognised by content, not by name):
- `llmsize measure --save` JSON (gpu.catalog_id, run.context_tokens, run.batch, decode.tok_s), and that of
  `llmsize measure --server` (server.engine, predicted.gpu / .model / .quant, prefill.ttft_s);
- `llama-bench -o json` (a list of tests: n_prompt, n_gen, n_depth, avg_ts, model_size, gpu_info, backends) and
  `-o jsonl` (one such object per line), `-o csv` (the same fields as columns) - llama.cpp tools/llama-bench;
- `vllm bench serve --save-result` JSON (median_tpot_ms, mean_ttft_ms, output_throughput, total_input_tokens,
  num_prompts, max_concurrency) - vllm/benchmarks/serve.py.
Each becomes a Run: what was measured (decode tok/s per sequence, prefill), at which batch and context, on which
card and model when the file says. llmsize.estimate.expected turns it into a calibration through the model.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

from llmsize.errors import InvalidValueError, shown
from llmsize.estimate.runtimes import printed_backend
from llmsize.files import read_text

MAX_BYTES = 16 * 2**20
MAX_BATCH = 2**20  # sequences decoding at once in one run (the dataset's rows allow as many)
MAX_CONTEXT_TOKENS = 2**24  # tokens of one sequence
MAX_MODEL_BYTES = 2**44  # a model file's bytes (16 TiB: ten times the largest open checkpoints)


@dataclass(frozen=True)
class Run:
    tool: str  # "llmsize measure", "llama-bench", "vllm bench serve"
    decode_tok_s: float  # per sequence
    batch: int
    context_tokens: int  # mean context over the decode
    prefill_tok_s: float | None = None
    prompt_tokens: int | None = None
    ttft_s: float | None = None
    card: str | None = None  # as the file names it
    card_id: str | None = None  # when the file carries a catalog id
    model: str | None = None
    model_id: str | None = None
    weight_bytes: float | None = None  # the model file's size, when printed
    runtime: str | None = None
    quant: str | None = None
    flash_attn: bool | None = None  # llama-bench's flash_attn column (None: not given, or auto)
    backend: str | None = None  # "vulkan": llama-bench's `backends` says Vulkan; None: the card's own
    unmodeled_backend: str | None = None  # llama-bench's `backends` as printed where it names none of those (SYCL)
    native_backend: str | None = None  # "cuda", "rocm", "metal": llama-bench's `backends` names the card's own


def _bad(path: Path, why: str) -> InvalidValueError:
    return InvalidValueError(f"--calibrate `{path}`: {why}.",
                             "Give a `llmsize measure --save` file, `llama-bench -o json|jsonl|csv` output, or a "
                             "`vllm bench serve --save-result` JSON.")


def _num(v, path: Path, key: str, integer: bool = False):
    if isinstance(v, bool) or isinstance(v, (list, dict)):
        raise _bad(path, f"`{key}` is not a number")
    try:
        x = int(v) if integer else float(v)
    except (TypeError, ValueError, OverflowError):
        raise _bad(path, f"`{key}` is not a number ({str(v)[:40]!r})") from None
    if not (x == x and abs(x) < 1e15) or x < 0:
        raise _bad(path, f"`{key}` is out of range ({x!r})")
    return x


def _flash_attn(v) -> bool | None:
    """llama-bench's flash_attn: true/false in JSON, 1/0 in CSV; on/off/auto since flash_attn_type."""
    if isinstance(v, bool):
        return v
    return {"1": True, "true": True, "on": True, "0": False, "false": False, "off": False}.get(str(v).lower())


# llama-bench's `backends` column (ggml's backend registry names, comma-separated): a GPU backend each, the card's
# own ones by the backend id they are here; BLAS and RPC ride along with another (or with the CPU)
LLAMA_BENCH_NATIVE = {"cuda": "cuda", "rocm": "rocm", "hip": "rocm", "metal": "metal", "mtl": "metal"}
LLAMA_BENCH_RIDERS = {"blas", "rpc"}


def _backends(v, path: Path) -> tuple[str | None, str | None, str | None]:
    """(Vulkan, a backend without a group, the card's own backend named) from llama-bench's `backends`: one backend
    named beside BLAS or RPC, else refused; a run on those alone (the CPU's BLAS, another machine's RPC) and one on
    any backend but CUDA, ROCm, Metal and Vulkan have no group."""
    if v is None or v == "":
        return None, None, None
    if not isinstance(v, str):
        raise _bad(path, f"`backends` is not a backend name ({str(v)[:40]!r})")
    names = [n for n in re.split(r"[,\s]+", v) if n and n[0].isalpha()]  # "CUDA 12.4", "Vulkan (PR)"
    gpu = {n.lower(): n for n in names if n.lower() not in LLAMA_BENCH_RIDERS}
    if len(gpu) > 1:
        raise _bad(path, f"`backends` names {len(gpu)} backends ({shown(v, 60)}), and which ran is not in the file; "
                         "calibrate with a build of one GPU backend")
    if not gpu:  # the CPU's (BLAS), or another machine's (RPC)
        return None, shown(",".join(names), 40), None
    (low, name), = gpu.items()
    vulkan, unmodeled = printed_backend(name)  # the one reading of a backend's name, rows' and files'
    if vulkan or unmodeled or low in LLAMA_BENCH_NATIVE:
        return vulkan, unmodeled, LLAMA_BENCH_NATIVE.get(low)
    return None, shown(name, 40), None  # a backend printed_backend does not name (Kompute, WebGPU ...): no group


def _llama_bench(tests: list[dict], path: Path) -> Run:
    """The tg test (n_gen > 0, n_prompt 0) gives decode, the pp test (n_prompt > 0, n_gen 0) prefill."""
    keys = {"n_prompt", "n_gen", "avg_ts"}
    if not tests or not all(isinstance(t, dict) and keys <= set(t) for t in tests):
        raise _bad(path, "not llama-bench output (no n_prompt, n_gen, avg_ts)")
    tg = [t for t in tests if _num(t["n_gen"], path, "n_gen", True) > 0 and
          _num(t["n_prompt"], path, "n_prompt", True) == 0]
    pp = [t for t in tests if _num(t["n_prompt"], path, "n_prompt", True) > 0 and
          _num(t["n_gen"], path, "n_gen", True) == 0]
    if not tg:
        raise _bad(path, "no token-generation test (-n) in it; calibration needs a tg row")
    t = tg[0]
    depth = _num(t.get("n_depth", 0) or 0, path, "n_depth", True)
    n_gen = _num(t["n_gen"], path, "n_gen", True)
    ts = _num(t["avg_ts"], path, "avg_ts")
    if ts <= 0:
        raise _bad(path, "avg_ts is 0")
    prompt = _num(pp[0]["n_prompt"], path, "n_prompt", True) if pp else None
    prefill_ts = _num(pp[0]["avg_ts"], path, "avg_ts") if pp else None
    if prefill_ts is not None and prefill_ts <= 0:
        raise _bad(path, "the prompt test's avg_ts is 0")
    _in_range(path, ts, 1, {"n_depth": depth, "n_gen": n_gen, "n_prompt": prompt or 0}, "avg_ts")
    size = t.get("model_size")
    weight_bytes = _num(size, path, "model_size") if size not in (None, "") else None
    if weight_bytes is not None and not 0 < weight_bytes <= MAX_MODEL_BYTES:
        raise _bad(path, f"model_size is {weight_bytes:,.0f} bytes; a model file holds 1 to {MAX_MODEL_BYTES:,}")
    return Run(
        tool="llama-bench", decode_tok_s=ts, batch=1, context_tokens=max(1, depth + n_gen // 2),
        prefill_tok_s=prefill_ts, prompt_tokens=prompt,
        card=str(t.get("gpu_info") or "") or None, model=str(t.get("model_type") or "") or None,
        weight_bytes=weight_bytes, runtime="llamacpp",
        flash_attn=_flash_attn((pp[0] if pp else t).get("flash_attn")),
        **dict(zip(("backend", "unmodeled_backend", "native_backend"), _backends(t.get("backends"), path))))


def _vllm_serve(d: dict, path: Path) -> Run:
    tpot_key = "median_tpot_ms" if d.get("median_tpot_ms") else "mean_tpot_ms"  # the key read, as errors name it
    tpot = d.get(tpot_key)
    if tpot is None:
        raise _bad(path, "no median_tpot_ms / mean_tpot_ms in it")
    tpot_s = _num(tpot, path, tpot_key) / 1000
    if tpot_s <= 0:
        raise _bad(path, "its time per output token is 0 (median_tpot_ms / mean_tpot_ms)")
    prompts = _num(d.get("num_prompts") or d.get("completed") or 1, path, "num_prompts", True) or 1
    prompt = int(_num(d.get("total_input_tokens", 0), path, "total_input_tokens") / prompts)
    out = int(_num(d.get("total_output_tokens", 0), path, "total_output_tokens") / prompts)
    conc = d.get("max_concurrency")
    if conc:
        batch = int(_num(conc, path, "max_concurrency", True))
    else:  # Little's law: sequences decoding at once = output tokens per second x seconds per output token, at
        # most the requests the run made
        batch = max(1, min(round(_num(d.get("output_throughput", 0), path, "output_throughput") * tpot_s),
                           int(prompts)))
    ttft_key = "median_ttft_ms" if d.get("median_ttft_ms") else "mean_ttft_ms"
    ttft = d.get(ttft_key)
    _in_range(path, 1 / tpot_s, max(batch, 1), {"the mean prompt (total_input_tokens / num_prompts)": prompt,
                                               "the mean output (total_output_tokens / num_prompts)": out},
              f"1 / {tpot_key}", "max_concurrency" if conc else f"the batch (output_throughput x {tpot_key})")
    return Run(tool="vllm bench serve", decode_tok_s=1 / tpot_s, batch=max(batch, 1),
               context_tokens=max(1, prompt + out // 2), prompt_tokens=prompt or None,
               ttft_s=_num(ttft, path, ttft_key) / 1000 if ttft else None,
               model=str(d.get("model_id") or "") or None, runtime=str(d.get("backend") or "vllm"))


def _in_range(path: Path, tok_s: float, batch: int, lengths: dict[str, int], tok_s_key: str = "decode.tok_s",
              batch_key: str = "run.batch") -> None:
    """A run's figures within what a run can have, each named (by the file's own key) when it is not."""
    if tok_s <= 0:
        raise _bad(path, f"{tok_s_key} is {tok_s:g}; a run decodes above 0")
    if not 1 <= batch <= MAX_BATCH:
        raise _bad(path, f"{batch_key} is {batch:,}; a run has 1 to {MAX_BATCH:,} sequences")
    for key, n in lengths.items():
        if n > MAX_CONTEXT_TOKENS:
            raise _bad(path, f"{key} is {n:,}; a sequence holds at most {MAX_CONTEXT_TOKENS:,} tokens")


def _measure(d: dict, path: Path) -> Run:
    run, dec, gpu = d.get("run"), d.get("decode"), d.get("gpu") or {}
    if not isinstance(run, dict) or not isinstance(dec, dict) or not isinstance(gpu, dict) \
            or not {"batch", "context_tokens"} <= set(run) or "tok_s" not in dec:
        raise _bad(path, "not a complete `llmsize measure --save` file")
    if run.get("device") != "cuda":
        raise _bad(path, "a --device cpu run has no GPU figures")
    tok_s = _num(dec["tok_s"], path, "decode.tok_s")
    batch = _num(run["batch"], path, "run.batch", True)
    ctx = _num(run["context_tokens"], path, "run.context_tokens", True)
    _in_range(path, tok_s, batch, {"run.context_tokens": ctx})
    card_id, name = gpu.get("catalog_id"), gpu.get("name")
    card_id = card_id if isinstance(card_id, str) else None
    name = name if isinstance(name, str) else None
    model = d.get("model") if isinstance(d.get("model"), dict) else {}
    quant = run.get("quant") if isinstance(run.get("quant"), str) else None
    return Run(tool="llmsize measure", decode_tok_s=tok_s / batch, batch=batch, context_tokens=max(ctx, 1),
               card=name, card_id=card_id, model=model.get("name") if isinstance(model.get("name"), str) else None,
               model_id="gemma-4-12b", quant=quant)  # measure runs Gemma 4 12B


SERVER_RUNTIME = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm", "llamacpp": "llamacpp",
                  "ollama": "llamacpp", "lmstudio": "llamacpp"}


def _str(v) -> str | None:
    return v if isinstance(v, str) and v else None


def _server(d: dict, path: Path) -> Run:
    """`llmsize measure --server --save`: the first level's per-stream decode rate and TTFT, on the card and
    model plan's figures were for (when --gpu was given and the model was found)."""
    run, dec, pre, srv = d.get("run"), d.get("decode"), d.get("prefill") or {}, d.get("server")
    pred = d.get("predicted") if isinstance(d.get("predicted"), dict) else {}
    if not all(isinstance(x, dict) for x in (run, dec, pre, srv)) or dec.get("tok_s") is None \
            or not {"batch", "context_tokens", "tokens_requested"} <= set(run):
        raise _bad(path, "not a complete `llmsize measure --server --save` file")
    tok_s = _num(dec["tok_s"], path, "decode.tok_s")
    batch = _num(run["batch"], path, "run.batch", True)
    prompt = _num(run["context_tokens"], path, "run.context_tokens", True)
    out = _num(run["tokens_requested"], path, "run.tokens_requested", True)
    _in_range(path, tok_s, batch, {"run.context_tokens": prompt, "run.tokens_requested": out})
    ttft = pre.get("ttft_s")
    return Run(tool="llmsize measure --server", decode_tok_s=tok_s, batch=batch,
               context_tokens=max(1, prompt + out // 2), prompt_tokens=prompt or None,
               ttft_s=_num(ttft, path, "prefill.ttft_s") if ttft is not None else None,
               card_id=_str(pred.get("gpu")), model=_str(srv.get("model")), model_id=_str(pred.get("model")),
               runtime=SERVER_RUNTIME.get(srv.get("engine")) if isinstance(srv.get("engine"), str) else None,
               quant=_str(pred.get("quant")))


def read_run(path: Path) -> Run:
    text = read_text(path, MAX_BYTES, "--calibrate")
    stripped = text.lstrip()
    data = None
    if stripped.startswith(("{", "[")):
        try:
            data = json.loads(text)
        except RecursionError:
            raise _bad(path, "JSON nested too deeply to read") from None
        except ValueError:
            lines = [ln for ln in text.splitlines() if ln.strip()]
            try:
                data = [json.loads(ln) for ln in lines]  # llama-bench -o jsonl
            except RecursionError:
                raise _bad(path, "JSON nested too deeply to read") from None
            except ValueError:
                raise _bad(path, "not valid JSON") from None
    if data is None:
        try:
            rows = list(csv.DictReader(io.StringIO(text)))
        except csv.Error:
            raise _bad(path, "neither JSON nor CSV") from None
        if rows and "avg_ts" in rows[0]:
            return _llama_bench(rows, path)
        if not stripped:
            raise _bad(path, "an empty file")
        if "," not in text.splitlines()[0]:  # one column or none: a YAML or text file, not a table
            raise _bad(path, "neither JSON nor a llama-bench CSV")
        raise _bad(path, "a CSV without llama-bench's columns")
    if isinstance(data, list):
        return _llama_bench(data, path)
    if isinstance(data, dict) and "server" in data and "decode" in data:
        return _server(data, path)
    if isinstance(data, dict) and "decode" in data and "run" in data:
        return _measure(data, path)
    if isinstance(data, dict) and ("median_tpot_ms" in data or "mean_tpot_ms" in data):
        return _vllm_serve(data, path)
    raise _bad(path, "not a format llmsize knows")
