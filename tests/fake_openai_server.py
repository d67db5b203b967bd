"""A small OpenAI-compatible streaming server on the loopback, for `llmsize measure --server` tests.

It tokenizes by whitespace (a prompt of n words is n + 1 tokens: a BOS), waits `ttft_s` + `prefill_s_per_token` x
prompt tokens before the first token, then sends one token every `itl_s` (each stream on its own thread, so k
streams at once give k times the rate). `mode` makes it misbehave: "http500", "stall" (stops after `after` tokens
and holds the connection), "malformed" (a chunk that is not JSON after `after` tokens), "close" (drops the
connection after `after` tokens), "eos" (finish_reason stop after `after` tokens, whatever ignore_eos says),
"no_usage" (no usage anywhere), "not_stream" (answers one JSON body), "two_per_chunk" (two tokens a chunk),
"huge_usage" (usage claims 10^30 output tokens), "endless" (three times max_tokens), "comments" (keep-alive comments
only, after `after` tokens, for 3 s), "rot13" (names a charset it does not use), "empty_first" (an empty chunk
at once, the first token after ttft_s), "tiny_usage" (usage says every prompt is 1 token), "stall_probes" (every
GET but /v1/models waits 6 s before it answers), "redirect" (answers completions with a 302 elsewhere),
"models500" (/v1/models answers HTTP 500), "bunched" (every token's event at once, at the end, in one write: a
buffering proxy), "stream_usage_absurd" (a streamed completion's usage says its prompt was 10^8 tokens; the
one-token count is right), "metrics_reset" (vLLM's /metrics counters go down as requests are served: each scrape's
below the one before, as counters that start again on a restart). `max_model_len` is what the fake vLLM lists in
/v1/models.
`engine` picks what it looks like: "vllm" (owned_by vllm, /version, vLLM's /metrics), "llamacpp" (owned_by
llamacpp, /props, /slots, timings in the last chunk, llama-server's /metrics), "ollama" (owned_by library,
/api/version, /api/show), or "plain" (owned_by nobody, nothing else).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Behaviour:
    model: str = "Qwen/Qwen3-8B"
    models: list[str] | None = None  # several served models
    engine: str = "vllm"
    ttft_s: float = 0.02
    prefill_s_per_token: float = 0.0
    itl_s: float = 0.01
    mode: str = "ok"
    after: int = 3
    max_model_len: int = 32768
    requests: list[dict] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    open_streams: int = 0  # streams being answered now
    max_open_streams: int = 0  # the most at once: what proves a client ran its streams side by side


def _prompt_tokens(prompt) -> int:
    return len(str(prompt).split()) + 1


def _prometheus(metrics: dict[str, float], model: str | None) -> str:
    """Prometheus text as the engines write it: # TYPE lines, histograms with a +Inf bucket, vLLM's labels."""
    label = f'{{model_name="{model}"}}' if model else ""
    lines, typed = [], set()
    for k, v in sorted(metrics.items()):
        if k.endswith(("_sum", "_count")):
            fam = k.rsplit("_", 1)[0]
            if fam not in typed:
                typed.add(fam)
                lines += [f"# HELP {fam} A histogram.", f"# TYPE {fam} histogram",
                          f'{fam}_bucket{{le="+Inf"{"," + label[1:-1] if label else ""}}} '
                          f'{metrics.get(fam + "_count", 0)}']
        elif k.endswith("_total"):
            lines += [f"# HELP {k[:-6]} A counter.", f"# TYPE {k[:-6]} counter"]
        lines.append(f"{k}{label} {v}")
    return "\n".join(lines) + "\n"


class FakeServer:
    def __init__(self, behaviour: Behaviour | None = None):
        self.b = behaviour or Behaviour()
        b = self.b

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _json(self, status: int, obj) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _text(self, text: str) -> None:
                data = text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if b.mode == "stall_probes" and self.path != "/v1/models":
                    time.sleep(6)
                owner = {"vllm": "vllm", "llamacpp": "llamacpp", "ollama": "library", "plain": "someone"}[b.engine]
                if self.path == "/v1/models" and b.mode == "models500":
                    return self._json(500, {"error": {"message": "engine not ready"}})
                if self.path == "/v1/models":
                    names = b.models if b.models is not None else [b.model]
                    extra = {"root": b.model, "max_model_len": b.max_model_len} if b.engine == "vllm" else {}
                    return self._json(200, {"object": "list", "data": [
                        {"id": n, "object": "model", "owned_by": owner, **extra} for n in names]})
                if self.path == "/version" and b.engine == "vllm":
                    return self._json(200, {"version": "0.11.0"})
                if self.path == "/api/version" and b.engine == "ollama":
                    return self._json(200, {"version": "0.12.3"})
                if self.path == "/props" and b.engine == "llamacpp":
                    return self._json(200, {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 4,
                                            "model_path": "/models/Qwen3-8B-Q4_K_M.gguf",
                                            "build_info": "b6500-abcdef0"})
                if self.path == "/slots" and b.engine == "llamacpp":
                    return self._json(200, [{"id": i, "n_ctx": 2048, "is_processing": False} for i in range(4)])
                if self.path == "/metrics" and b.engine in ("vllm", "llamacpp"):
                    with b.lock:
                        shown = dict(b.metrics)
                    if b.mode == "metrics_reset":  # every counter lower at each scrape than at the one before
                        shown = {k: -v for k, v in shown.items()}
                    labelled = b.model if b.engine == "vllm" else None
                    return self._text(_prometheus(shown, labelled))
                return self._json(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                if self.path == "/api/show" and b.engine == "ollama":
                    return self._json(200, {"details": {"quantization_level": "Q4_K_M", "parameter_size": "8.2B"}})
                if self.path != "/v1/completions":
                    return self._json(404, {"error": {"message": "not found"}})
                with b.lock:
                    b.requests.append(body)
                names = b.models if b.models is not None else [b.model]
                if body.get("model") not in names:
                    return self._json(404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}})
                if b.mode == "http500":
                    return self._json(500, {"error": {"message": "CUDA out of memory"}})
                if b.mode == "redirect":  # a proxy that sends the client elsewhere
                    self.send_response(302)
                    self.send_header("Location", "http://127.0.0.1:9/v1/completions")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                prompt = _prompt_tokens(body.get("prompt", ""))
                want = int(body.get("max_tokens") or 16)
                usage = None if b.mode == "no_usage" else {"prompt_tokens": 1 if b.mode == "tiny_usage" else prompt}
                if not body.get("stream") or b.mode == "not_stream":
                    time.sleep(b.ttft_s)
                    out = {"choices": [{"text": " x", "index": 0, "finish_reason": "length"}]}
                    if usage is not None:
                        out["usage"] = {**usage, "completion_tokens": 1}
                    return self._json(200, out)
                with b.lock:
                    b.open_streams += 1
                    b.max_open_streams = max(b.max_open_streams, b.open_streams)
                try:
                    self._stream(body, prompt, want, usage)
                finally:
                    with b.lock:
                        b.open_streams -= 1

            def _chunk(self, data: str) -> None:
                raw = f"data: {data}\n\n".encode()
                if b.mode == "bunched" and getattr(self, "held", None) is not None:  # kept for one write at the end
                    self.held.append(raw)
                    return
                self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
                self.wfile.flush()

            def _stream(self, body, prompt, want, usage):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream" + ("; charset=rot13" if b.mode == "rot13" else ""))
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                t0 = time.perf_counter()
                if b.mode == "empty_first":
                    self._chunk(json.dumps({"choices": [{"index": 0, "text": "", "finish_reason": None}]}))
                time.sleep(b.ttft_s + b.prefill_s_per_token * prompt)
                if b.mode == "endless":
                    want *= 3
                t1 = time.perf_counter()
                self.held = [] if b.mode == "bunched" else None
                sent, finish = 0, "length"
                per = 2 if b.mode == "two_per_chunk" else 1
                while sent < want:
                    if sent >= b.after and b.mode in ("stall", "malformed", "close", "eos", "comments"):
                        if b.mode == "comments":
                            for _ in range(60):
                                raw = b": keep-alive\n\n"
                                self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
                                self.wfile.flush()
                                time.sleep(0.05)
                            return
                        if b.mode == "stall":
                            time.sleep(5)
                            return
                        if b.mode == "malformed":
                            self._chunk('{"choices": [ nope')
                            break
                        if b.mode == "close":
                            self.wfile.flush()
                            self.connection.shutdown(socket.SHUT_RDWR)
                            self.close_connection = True
                            return
                        finish = "stop"
                        break
                    k = min(per, want - sent)
                    sent += k
                    last = sent >= want
                    self._chunk(json.dumps({"object": "text_completion", "model": body["model"], "choices": [
                        {"index": 0, "text": " tok" * k, "finish_reason": "length" if last else None}]}))
                    if not last:
                        time.sleep(b.itl_s * k)
                if b.mode == "eos":
                    self._chunk(json.dumps({"choices": [{"index": 0, "text": "", "finish_reason": finish}]}))
                if self.held:  # every token's event in one chunk of the HTTP stream, as a buffering proxy sends them
                    raw, self.held = b"".join(self.held), None
                    self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
                    self.wfile.flush()
                t2 = time.perf_counter()
                tail = {"choices": [], "model": body["model"]}
                if usage is not None and (body.get("stream_options") or {}).get("include_usage"):
                    tail["usage"] = {**usage, "completion_tokens": 10**30 if b.mode == "huge_usage" else sent}
                    if b.mode == "stream_usage_absurd":
                        tail["usage"]["prompt_tokens"] = 10**8
                if b.engine == "llamacpp":
                    tail["timings"] = {"prompt_n": prompt, "prompt_per_second": prompt / max(t1 - t0, 1e-6),
                                       "predicted_n": sent, "predicted_per_second": sent / max(t2 - t1, 1e-6)}
                self._chunk(json.dumps(tail))
                self._chunk("[DONE]")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                with b.lock:
                    m = b.metrics
                    if b.engine == "vllm":
                        for k, v in (("vllm:time_to_first_token_seconds_sum", t1 - t0),
                                     ("vllm:time_to_first_token_seconds_count", 1),
                                     ("vllm:inter_token_latency_seconds_sum", (t2 - t1)),
                                     ("vllm:inter_token_latency_seconds_count", max(sent - 1, 0)),
                                     ("vllm:prompt_tokens_total", prompt), ("vllm:generation_tokens_total", sent)):
                            m[k] = m.get(k, 0) + v
                    elif b.engine == "llamacpp":
                        for k, v in (("llamacpp:prompt_tokens_total", prompt), ("llamacpp:prompt_seconds_total",
                                                                                t1 - t0),
                                     ("llamacpp:tokens_predicted_total", sent),
                                     ("llamacpp:tokens_predicted_seconds_total", t2 - t1)):
                            m[k] = m.get(k, 0) + v

        class Quiet(ThreadingHTTPServer):
            def handle_error(self, request, client_address):  # a client that hung up mid-stream: expected here
                pass

        self.server = Quiet(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        # serve_forever looks for shutdown() between polls: its default 0.5 s poll made each test wait ~0.5 s
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
