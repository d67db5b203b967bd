"""One `llmsize measure --server URL` run: the engine a user runs, timed from the client, beside plan's figures.

Steps: options -> what the server serves (model, engine, its props) -> a prompt of --context tokens in the server's
own tokenizer -> a warm-up stream -> for each --concurrency level, that many streams at once, each sending --rounds
requests one after another (a closed loop, as `vllm bench serve --max-concurrency` runs) -> statistics -> plan's
ceiling and expected figures for that model, card and runtime -> the result dict (`measure --save` keys where they
apply: prefill.ttft_s, decode.*, predicted.ceiling_tok_s).

What is measured, per stream: TTFT = first token's arrival - the request's send; inter-token latency (ITL) = the
gaps between chunks that carry a token (as vllm bench serve measures it); its decode rate = (output tokens - 1) /
(last token - first token). Per level: aggregate tok/s = all output tokens / (last stream's end - first send).
Every prompt starts with its own words, so no prefix cache serves one request from another's prompt.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from llmsize import __version__
from llmsize.errors import InvalidValueError, LlmsizeError, shown
from llmsize.measure.server import ENGINE_NAMES, ServerClient, ServerError, Stream, check_url
from llmsize.measure.stats import spread

# common English words that BPE vocabularies hold as one token with their leading space
WORDS = ("time year people way day man thing woman life child world school state family student group country "
         "problem hand part place case week company system program question work government number night point "
         "home water room mother area money story fact month lot right study book eye job word business issue "
         "side kind head house service friend father power hour game line end member law car city name team "
         "minute idea body information back parent face level office door health person art war history party "
         "result change morning reason research girl guy moment air teacher force education").split()
NONCE_WORDS = 6  # the words each prompt starts with, drawn for it alone (no prefix shared between requests)
GGUF_TYPE = re.compile(r"[-_.:](i?q\d[a-z0-9_]*|bf16|f16|f32|mxfp4[a-z0-9_]*)$", re.IGNORECASE)


@dataclass(frozen=True)
class ServerOptions:
    url: str
    model: str | None = None  # the name the server knows; None: its only model
    context: int = 4096  # prompt tokens
    tokens: int = 256  # output tokens per request
    concurrency: tuple[int, ...] = (1,)
    rounds: int = 1
    timeout_s: float = 120.0
    api_key: str | None = None
    gpu: str | None = None  # catalog card for plan's figures
    runtime: str | None = None  # runtime for plan's expected figure; None: the engine the server says it is
    quant: str | None = None  # the served weights' format; None: the file name's or the model's release format
    plan_model: str | None = None  # catalog model; None: the served name matched in the catalog
    tp: int = 1
    backend: str | None = None  # the backend the server's runtime runs on (vulkan: a Vulkan llama-server); None: the
    # card's own


def validate(o: ServerOptions) -> None:
    check_url(o.url)
    if o.tokens < 2:
        raise InvalidValueError(f"--tokens `{o.tokens}`: timing decode needs at least 2 output tokens.",
                                "Pass --tokens 2 or more (256 by default).")
    if not o.concurrency:
        raise InvalidValueError("--concurrency names no level.", "Pass e.g. --concurrency 1,4,16.")


# ------------------------------------------------------------------------------------------ the prompt

def words_sent(words: int) -> int:
    """The words a prompt of `words` is sent with: at least its NONCE_WORDS."""
    return max(words, NONCE_WORDS)


def prompt_text(words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words_sent(words)))


def prompt_slack(target: int) -> int:
    """How far a prompt may land from --context: each request draws its own words, and a tokenizer splits some
    words in two (llama's SPM vocabulary does), so prompts of one run differ by a few tokens; 2%, at least 2."""
    return max(2, target // 50)


def implausible_count(words: int, told: int) -> bool:
    """Whether a server's count of a prompt of `words` words is its accounting, not a tokenizer's: no tokenizer cuts
    a common English word into more than a few tokens, nor joins several into one."""
    return told > 8 * words + 64 or 4 * told + 64 < words


def fit_prompt(client: ServerClient, model: str, target: int) -> tuple[int, int | None]:
    """Words that make a prompt of `target` tokens in the server's tokenizer, and the count it reported (None:
    the server reports no usage, and the words stand for tokens). Three tries, each one prefill."""
    words, told = target, None
    for attempt in range(3):
        sent = words_sent(words)
        told = client.prompt_tokens(model, prompt_text(words, attempt))
        if told is None:
            return max(target - 1, 1), None  # a BOS token beside ~one token a word
        # a count out of a tokenizer's range is the server's accounting: sizing the prompt by it would not converge
        if implausible_count(sent, told):
            raise ServerError(f"--server {client.shown}: usage says a prompt of {sent:,} words is {told:,} tokens.",
                              "Check the server's token accounting.")
        if abs(told - target) <= prompt_slack(target):
            break
        words = max(1, words + (target - told) if attempt else round(words * target / max(told, 1)))
    return words, told


# ------------------------------------------------------------------------------------------ the streams

async def _level(client: ServerClient, model: str, words: int, tokens: int, streams: int, rounds: int,
                 seed: int) -> tuple[list[Stream], float, float]:
    async with client.async_client(streams) as ac:
        async def worker(i: int) -> list[Stream]:
            out = []
            for r in range(rounds):
                body = client.completion_body(model, prompt_text(words, seed + i * rounds + r), tokens)
                out.append(await client.stream(ac, body, f"concurrency {streams}, stream {i + 1}, request {r + 1}"))
            return out

        t0 = time.perf_counter()
        tasks = [asyncio.ensure_future(worker(i)) for i in range(streams)]
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        failed = [t for t in done if t.exception() is not None]
        if failed:
            raise failed[0].exception()
        t1 = time.perf_counter()
    streams_done = [s for t in tasks for s in t.result()]
    sent = words_sent(words)
    odd = next((s for s in streams_done if s.prompt_tokens and implausible_count(sent, s.prompt_tokens)), None)
    if odd is not None:  # the report's prompt and plan's figure beside it would be sized by it
        raise ServerError(f"--server {client.shown}: a streamed completion's usage says its prompt of {sent:,} words "
                          f"was {odd.prompt_tokens:,} tokens (concurrency {streams}).",
                          "Check the server's token accounting.")
    return streams_done, t0, t1


def run_level(client: ServerClient, model: str, words: int, tokens: int, streams: int, rounds: int,
              seed: int) -> tuple[list[Stream], float, float]:
    return asyncio.run(_level(client, model, words, tokens, streams, rounds, seed))


def level_stats(streams: list[Stream], level: int, t0: float, t1: float, tokens: int) -> dict:
    """One concurrency level's figures from its streams."""
    ttft = [s.chunk_s[0] - s.sent_s for s in streams]
    itl = [b - a for s in streams for a, b in zip(s.chunk_s, s.chunk_s[1:])]
    rates = [(s.output_tokens - 1) / (s.chunk_s[-1] - s.chunk_s[0]) for s in streams
             if s.output_tokens > 1 and s.chunk_s[-1] > s.chunk_s[0]]
    out_tokens = sum(s.output_tokens for s in streams)
    chunks = sum(len(s.chunk_s) for s in streams)
    return {
        "level": level, "requests": len(streams), "output_tokens": out_tokens,
        "short_streams": sum(s.output_tokens < tokens for s in streams),
        "tokens_per_chunk": out_tokens / chunks if chunks else None,
        "wall_s": t1 - t0, "aggregate_tok_s": out_tokens / (t1 - t0),
        "tok_s_per_stream": spread(rates), "ttft_s": spread(ttft), "itl_ms": spread(itl, 1e3),
        "prompt_tokens": spread([s.prompt_tokens for s in streams if s.prompt_tokens]),
        "server_timings": _timings(streams),
    }


MAX_SERVER_RATE_TOK_S = 1e8  # a prompt or decode rate beyond this in a server's own timings is not a rate


def _timings(streams: list[Stream]) -> dict | None:
    """llama-server's own figures, per request (its final chunk's `timings`): prompt and decode tok/s, medians."""
    t = [s.timings for s in streams if s.timings]

    def rates(key: str) -> list[float]:  # a rate the server prints that no run has (negative, absurd) is left out
        return [float(x[key]) for x in t if isinstance(x.get(key), (int, float)) and not isinstance(x[key], bool)
                and 0 < x[key] < MAX_SERVER_RATE_TOK_S]

    pre, dec = rates("prompt_per_second"), rates("predicted_per_second")
    if not pre and not dec:
        return None
    return {"prompt_tok_s": spread(pre), "decode_tok_s": spread(dec)}


# ------------------------------------------------------------------------------------------ server metrics

# (what, Prometheus histogram or counter names by engine); a histogram's mean over a level is d(sum) / d(count)
METRIC_MEANS = {
    "ttft_s": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"),
    "itl_s": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
              "sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
    "queue_s": ("vllm:request_queue_time_seconds", "sglang:queue_time_seconds"),
    "prefill_s": ("vllm:request_prefill_time_seconds",),
}
METRIC_COUNTS = {
    "prompt_tokens": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total", "llamacpp:prompt_tokens_total"),
    "generation_tokens": ("vllm:generation_tokens_total", "sglang:generation_tokens_total",
                          "llamacpp:tokens_predicted_total"),
}
LLAMACPP_RATES = {"prompt_tok_s": ("llamacpp:prompt_tokens_total", "llamacpp:prompt_seconds_total"),
                  "decode_tok_s": ("llamacpp:tokens_predicted_total", "llamacpp:tokens_predicted_seconds_total")}


def metrics_backwards(before: dict | None, after: dict | None) -> list[str]:
    """The counters (and histogram sums and counts) that went down, or stopped being numbers, between two scrapes:
    a restart or a reset of the server's counters, whose difference is not what happened."""
    if not before or not after:
        return []
    return sorted(n for n in set(before) & set(after)
                  if not (math.isfinite(before[n]) and math.isfinite(after[n]) and after[n] >= before[n]))


def metric_deltas(before: dict | None, after: dict | None) -> dict | None:
    """What the server's own /metrics say happened between two scrapes; a counter that went backwards
    (metrics_backwards) says nothing."""
    if not before or not after:
        return None
    backwards = set(metrics_backwards(before, after))

    def d(name):
        return after[name] - before[name] if name in after and name in before and name not in backwards else None

    out = {}
    for key, names in METRIC_MEANS.items():
        for n in names:
            ds, dc = d(n + "_sum"), d(n + "_count")
            if ds is not None and dc:
                out[key] = ds / dc
                break
    for key, names in METRIC_COUNTS.items():
        for n in names:
            if d(n) is not None:
                out[key] = d(n)
                break
    for key, (tok, sec) in LLAMACPP_RATES.items():
        if d(tok) is not None and d(sec):
            out[key] = d(tok) / d(sec)
    return out or None


# ------------------------------------------------------------------------------------------ plan beside it

def catalog_model(cat, names: list[str]):
    """The catalog model a served name stands for: its id or alias, its Hugging Face repo, or a file name
    without its GGUF type; None when none matches."""
    from llmsize.errors import UnknownNameError

    tried = []
    for name in names:
        if not name:
            continue
        base = name.rstrip("/").rsplit("/", 1)[-1]
        base = base[:-5] if base.lower().endswith(".gguf") else base
        tried += [name, base, GGUF_TYPE.sub("", base), base.replace(":", "-")]
    by_repo = None
    for cand in dict.fromkeys(tried):
        try:
            return cat.model(cand)
        except UnknownNameError:
            pass
        if by_repo is None:
            by_repo = {(m.hf_repo or "").lower(): m for m in cat.models.all() if m.hf_repo}
        m = by_repo.get(cand.lower())
        if m is not None:
            return m
    return None


def gguf_format(names: list[str]) -> str | None:
    """gguf-q4_k_m from a file or tag name ending in its GGUF type (Qwen3-8B-Q4_K_M.gguf), through the one mapping
    of printed GGUF types to formats (catalog.measurement.format_id)."""
    from llmsize.catalog.measurement import format_id

    for name in names:
        base = (name or "").rstrip("/").rsplit("/", 1)[-1]
        base = base[:-5] if base.lower().endswith(".gguf") else base
        m = GGUF_TYPE.search(base)
        fid = format_id("llamacpp", m.group(1)) if m else None
        if fid and fid.startswith("gguf-"):
            return fid
    return None


def predict(o: ServerOptions, cat, gpu, model_spec, fmt: str | None, runtime: str | None, prompt: int,
            levels_measured: list[int]) -> dict:
    """plan's ceiling and expected figures for the run's model, card and runtime, per level."""
    from llmsize.estimate.expected import expect
    from llmsize.estimate.plan import PlanInputs, make_plan

    runtimes = cat.runtimes.by_id()
    out = {"model": model_spec.id, "gpu": gpu.id, "quant": None, "runtime": None, "levels": {}}
    context = prompt + o.tokens // 2  # the mean cached length over the decode
    for level in levels_measured:
        p = make_plan(model_spec, gpu, PlanInputs(quant=fmt, context_tokens=context, batch=level,
                                                  prompt_tokens=prompt, tp=o.tp, backend=o.backend), search_fit=False)
        e = expect(p, runtimes, runtime)
        out["quant"] = p.fmt.id
        out["runtime"] = e.runtime
        out["backend"] = e.backend
        row = {"ceiling_tok_s": p.decode_ceiling_tok_s, "roofline_tok_s": p.decode_b.tok_s,
               "weights_fit": p.budget.weights_fit}
        if e.expected is None:
            row["reason"] = e.reason
        else:
            x = e.expected
            row.update({"expected_tok_s": x.tok_s, "expected_tok_s_low": x.tok_s_low,
                        "expected_tok_s_high": x.tok_s_high, "expected_aggregate_tok_s": x.aggregate_tok_s,
                        "expected_aggregate_tok_s_low": x.aggregate_tok_s_low,
                        "expected_aggregate_tok_s_high": x.aggregate_tok_s_high, "expected_ttft_s": x.ttft_s,
                        "expected_ttft_s_low": x.ttft_s_low, "expected_ttft_s_high": x.ttft_s_high,
                        "basis": x.basis})
        out["levels"][str(level)] = row
    return out


# ------------------------------------------------------------------------------------------ the run

def _pick_model(listed: list[dict], asked: str | None, base: str) -> dict:
    if asked is not None:
        for m in listed:
            if m["id"] == asked:
                return m
        names = ", ".join(f"`{shown(m['id'], 60)}`" for m in listed[:8]) or "none"
        raise ServerError(f"--server {base}: --model `{shown(asked)}` is not served (it serves {names}).",
                          "Pass one of those names with --model.")
    if len(listed) != 1:
        names = ", ".join(f"`{shown(m['id'], 60)}`" for m in listed[:8])
        raise ServerError(f"--server {base} serves {len(listed)} models" + (f" ({names})" if listed else "") + ".",
                          "Name one with --model." if listed else "Load a model in the server first.")
    return listed[0]


def _ollama_quant(client: ServerClient, model: str) -> str | None:
    """The format of Ollama's model from its /api/show details.quantization_level (Q4_K_M), if it is one."""
    from llmsize.catalog.measurement import format_id

    body = client.ollama_show(model)
    det = body.get("details") if isinstance(body, dict) else None
    q = det.get("quantization_level") if isinstance(det, dict) else None
    return format_id("llamacpp", q) if isinstance(q, str) else None


@dataclass
class _Served:
    """What the server says it serves: the model entry, the engine and its version, llama-server's props."""

    entry: dict
    engine: str | None
    version: str | None
    how: str
    props: dict | None = None
    slots: list | None = None

    @property
    def model(self) -> str:
        return self.entry["id"]


def measure_server(o: ServerOptions, progress=None, cat=None, gpu=None) -> dict:
    """The whole run, step by step: what is served, the prompt, a warm-up, the levels, plan beside them, the
    result. `cat` and `gpu` (a catalog and a GpuSpec, resolved by the CLI before any request) give plan's
    figures; without a card the report says how to get them."""
    validate(o)

    def tick(stage, done=0, total=1):
        if progress:
            progress(stage, done, total)

    client = ServerClient(o.url, o.api_key, o.timeout_s)
    tick("server")
    served = _served(client, o)
    check_room(o, client, served)
    tick("prompt length", 0, 1)
    words, told = fit_prompt(client, served.model, o.context)
    tick("prompt length", 1, 1)
    tick("warm-up", 0, 1)
    # prompts drawn afresh for every run: a server keeps earlier runs' caches (llama-server's slots, vLLM's and
    # SGLang's prefix caches), and a prompt it has seen before would be served from them
    first_seed = random.SystemRandom().randrange(2**40)
    run_level(client, served.model, words, min(8, o.tokens), 1, 1, seed=first_seed)
    tick("warm-up", 1, 1)
    rows = _levels(client, o, served.model, words, first_seed + 1, tick)
    prompt = round(rows[0]["prompt_tokens"]["median"]) if rows[0]["prompt_tokens"] else (told or o.context)
    predicted = _predicted(o, client, cat, gpu, served.entry, served.engine, served.props, prompt, rows)
    result = _result(o, client, served, rows, told, prompt, first_seed, predicted)
    _fractions(result)
    return result


def check_room(o: ServerOptions, client: ServerClient, served: _Served) -> None:
    """Refuse, before any request is timed, a prompt and answer longer than the server says a request may be: vLLM's
    and SGLang's max_model_len in /v1/models, llama-server's context a slot (its /props)."""
    said = [(_count(served.entry.get("max_model_len")), "max_model_len (GET /v1/models)")]
    if served.props is not None:
        gen = served.props.get("default_generation_settings") or {}
        said.append((_count(gen.get("n_ctx")) if isinstance(gen, dict) else None, "context a slot (n_ctx, GET /props)"))
    for limit, what in said:
        if limit is None or o.context + o.tokens <= limit:
            continue
        if limit < NONCE_WORDS + 2:  # no run fits: a prompt of its few words and the 2 output tokens timing needs
            hint = ("Start the server with a longer context (vLLM --max-model-len, SGLang --context-length, "
                    "llama-server -c).")
        elif limit - o.tokens >= NONCE_WORDS:
            hint = f"Lower --context to {limit - o.tokens:,} or less."
        else:
            hint = f"Lower --tokens to {limit - NONCE_WORDS:,} or less, and --context to {NONCE_WORDS}."
        raise InvalidValueError(f"--context {o.context:,} + --tokens {o.tokens:,} is past the server's {what} "
                                f"of {limit:,} tokens: it would refuse the requests.", hint)


def _served(client: ServerClient, o: ServerOptions) -> _Served:
    entry = _pick_model(client.models(), o.model, client.shown)
    engine, version, how, props = client.identify(entry)
    return _Served(entry, engine, version, how, props, client.slots() if engine == "llamacpp" else None)


def _levels(client: ServerClient, o: ServerOptions, model: str, words: int, seed: int, tick) -> list[dict]:
    """Each --concurrency level's streams and statistics, with the server's /metrics differenced over it."""
    before, rows = client.metrics(), []
    for i, level in enumerate(o.concurrency):
        tick("streams", i, len(o.concurrency))
        streams, t0, t1 = run_level(client, model, words, o.tokens, level, o.rounds, seed)
        seed += level * o.rounds
        row = level_stats(streams, level, t0, t1, o.tokens)
        after = client.metrics()
        row["server_metrics"] = metric_deltas(before, after)
        backwards = metrics_backwards(before, after)
        if backwards:
            row["server_metrics_backwards"] = backwards
        before = after
        rows.append(row)
    tick("streams", len(o.concurrency), len(o.concurrency))
    return rows


# A median gap between tokens shorter than any engine's decode step (a step is a forward of the whole model: ~1 ms at
# least, CUDA graphs and a tiny model included): the stream was buffered and its events arrived at once.
BUNCHED_ITL_MS = 0.2


def _notes(o: ServerOptions, rows: list[dict], told: int | None) -> list[str]:
    notes = []
    if told is None:
        notes.append("the server reports no token usage: the prompt is ~1 token a word and the output length is "
                     "counted in streamed chunks")
    elif abs(told - o.context) > prompt_slack(o.context):
        notes.append(f"the prompt came out at {told:,} tokens in the server's tokenizer, not {o.context:,}")
    short = sum(r["short_streams"] for r in rows)
    if short:
        notes.append(f"the output length could not be forced: {short} of {sum(r['requests'] for r in rows)} "
                     f"requests ended before {o.tokens} tokens (the server ignores ignore_eos); figures are over "
                     "the tokens it sent")
    if any((r["tokens_per_chunk"] or 1) > 1.05 for r in rows):
        notes.append("the server streams several tokens a chunk: inter-token latency is per chunk")
    bunched = [r["itl_ms"]["median"] for r in rows if r["itl_ms"] and r["itl_ms"]["median"] < BUNCHED_ITL_MS]
    if bunched:
        notes.append(f"the tokens arrived together (median inter-token gap {min(bunched):.3f} ms, below any decode "
                     "step): a proxy or the server buffered the stream, so the per-stream speed and inter-token "
                     "latency are not the engine's; the aggregate rate and TTFT still hold")
    backwards = sorted({n for r in rows for n in r.get("server_metrics_backwards", [])})
    if backwards:
        notes.append(f"the server's /metrics went backwards during a level (a restart, or its counters reset): "
                     f"{', '.join(shown(n, 60) for n in backwards[:3])}{', ...' if len(backwards) > 3 else ''} "
                     "left out of its figures")
    return notes


def _result(o: ServerOptions, client: ServerClient, served: _Served, rows: list[dict], told: int | None,
            prompt: int, first_seed: int, predicted: dict) -> dict:
    """The run's JSON, with `measure --save`'s keys where they apply (prefill.ttft_s, decode.*)."""
    from llmsize.measure.run import git_commit

    first, entry = rows[0], served.entry
    itl = first["itl_ms"] or {}
    return {
        "command": "measure --server",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "versions": {"llmsize": __version__},
        "server": {"url": client.shown, "model": served.model, "engine": served.engine,
                   "engine_name": ENGINE_NAMES.get(served.engine) if served.engine else None,
                   "engine_told_by": served.how, "version": served.version,
                   "max_model_len": _count(entry.get("max_model_len")),
                   "root": shown(entry["root"], 200) if isinstance(entry.get("root"), str) else None,
                   "llamacpp": _llamacpp_props(served.props, served.slots)},
        "run": {"context_tokens": prompt, "prompt_tokens_requested": o.context, "prompt_tokens_told": told,
                "tokens_requested": o.tokens,
                "output_forced": sum(r["short_streams"] for r in rows) == 0 and told is not None,
                "concurrency": list(o.concurrency), "rounds": o.rounds, "batch": first["level"],
                "timeout_s": o.timeout_s, "prompt_seed": first_seed},
        "prefill": {"ttft_s": first["ttft_s"]["median"], "ttft_s_p10": first["ttft_s"]["p10"],
                    "ttft_s_p90": first["ttft_s"]["p90"], "prompt_tokens": prompt,
                    "prompt_tokens_range": _prompt_range(rows)},
        "decode": {"tok_s": first["tok_s_per_stream"]["median"] if first["tok_s_per_stream"] else None,
                   "ms_per_token_median": itl.get("median"), "ms_per_token_p10": itl.get("p10"),
                   "ms_per_token_p90": itl.get("p90"), "aggregate_tok_s": first["aggregate_tok_s"]},
        "concurrency": rows,
        "predicted": predicted,
        "notes": _notes(o, rows, told),
        "options": {**{k: v for k, v in asdict(o).items() if k != "api_key"}, "url": client.shown},
    }


def _prompt_range(rows: list[dict]) -> list[int] | None:
    """The shortest and longest prompt of the run in the server's count (each request draws its own words)."""
    told = [r["prompt_tokens"] for r in rows if r["prompt_tokens"]]
    if not told:
        return None
    return [round(min(t["p10"] for t in told)), round(max(t["p90"] for t in told))]


def _count(v) -> int | None:
    """A positive whole number the server reports (a bool is not one), else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 2**40 else None


def _llamacpp_props(props, slots) -> dict | None:
    """What llama-server's /props and /slots say of its slots and context, each value of the type it should be."""
    if props is None:
        return None
    gen = props.get("default_generation_settings") or {}
    keep = {"total_slots": _count(props.get("total_slots")), "n_ctx": _count(gen.get("n_ctx")),
            "model_path": shown(props["model_path"], 200) if isinstance(props.get("model_path"), str) else None,
            "build_info": shown(props["build_info"], 60) if isinstance(props.get("build_info"), str) else None}
    if isinstance(slots, list):
        keep["slots"] = len(slots)
        keep["slot_n_ctx"] = [_count(s.get("n_ctx")) for s in slots[:64] if isinstance(s, dict)]
    return {k: v for k, v in keep.items() if v is not None}


def _predicted(o, client, cat, gpu, entry, engine, props, prompt, rows) -> dict:
    if gpu is None or cat is None:
        return {"ceiling_tok_s": None, "reason": "pass --gpu CARD (the card the server runs on) for plan's ceiling "
                                                 "and expected figures"}
    names = [o.plan_model] if o.plan_model else [entry["id"], entry.get("root") if isinstance(entry.get("root"), str)
                                                 else None, (props or {}).get("model_path")]
    spec = cat.model(o.plan_model) if o.plan_model else catalog_model(cat, [n for n in names if isinstance(n, str)])
    if spec is None:
        return {"ceiling_tok_s": None, "reason": f"the served model `{shown(entry['id'], 60)}` is not in the catalog: "
                                                 "pass --plan-model ID (see `llmsize models`)"}
    fmt, fmt_from = o.quant, "--quant" if o.quant else None
    if fmt is None:
        fmt = gguf_format([n for n in names if isinstance(n, str)])
        fmt_from = "the served file's name" if fmt else None
    if fmt is None and engine == "ollama":
        fmt = _ollama_quant(client, entry["id"])
        fmt_from = "Ollama's /api/show" if fmt else None
    runtime = o.runtime or (engine if engine in ("vllm", "sglang", "trtllm", "llamacpp", "ollama", "lmstudio")
                            else None)
    try:
        out = predict(o, cat, gpu, spec, fmt, runtime, prompt, [r["level"] for r in rows])
    except LlmsizeError as e:
        return {"ceiling_tok_s": None, "reason": f"plan could not be made: {e.one_line()}"}
    out["quant_from"] = fmt_from or "the model's release format"
    first = out["levels"][str(rows[0]["level"])]
    out["ceiling_tok_s"] = first["ceiling_tok_s"]
    out["expected_tok_s"] = first.get("expected_tok_s")
    return out


def _fractions(result: dict) -> None:
    """Measured over predicted: per-stream decode over the batch-1 ceiling and expected figure; each level's
    decode rate (streams x the median stream's decode rate: what plan's aggregate at that batch stands for, the
    prompts' time left out) over plan's expected aggregate, and whether it falls inside the expected band."""
    pred = result["predicted"]
    if not pred.get("levels"):
        return
    for row in result["concurrency"]:
        p = pred["levels"][str(row["level"])]
        per = row["tok_s_per_stream"]["median"] if row["tok_s_per_stream"] else None
        row["predicted"] = p
        row["fraction_of_ceiling"] = per / p["ceiling_tok_s"] if per and p["ceiling_tok_s"] else None
        agg = p.get("expected_aggregate_tok_s")
        row["decode_tok_s"] = row["level"] * per if per else None
        row["fraction_of_expected"] = row["decode_tok_s"] / agg if agg and per else None
        lo, hi = p.get("expected_aggregate_tok_s_low"), p.get("expected_aggregate_tok_s_high")
        row["inside_band"] = bool(lo <= row["decode_tok_s"] <= hi) if lo and hi and per else None
        row["band"] = (None if row["inside_band"] is None else "in band" if row["inside_band"] else
                       "above band" if row["decode_tok_s"] > hi else "below band")
    tok = result["decode"]["tok_s"]
    pred["measured_fraction_of_ceiling"] = tok / pred["ceiling_tok_s"] if tok and pred["ceiling_tok_s"] else None
    beyond = [r["level"] for r in result["concurrency"] if (r.get("fraction_of_ceiling") or 0) > 1.05]
    if beyond:  # no engine decodes faster than it can read its weights: the stream was buffered or the card wrong
        result["notes"].append(
            f"at concurrency {', '.join(map(str, beyond))} a stream's decode rate beats the bandwidth ceiling of "
            "the model on the card it was planned on: the server (or a proxy) sent its tokens in bursts, or --gpu "
            "is not the server's card; those decode rates are not measurements of the card")
    exp = pred.get("expected_tok_s")
    pred["measured_fraction_of_expected"] = tok / exp if tok and exp else None
