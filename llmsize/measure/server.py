"""The HTTP side of `llmsize measure --server URL`: a running OpenAI-compatible server, reached only at the URL
the user gives. No torch: this module needs the server extra (httpx, httpx-sse, prometheus-client).

- `ServerClient.models()`: GET /v1/models (the OpenAI list; vLLM adds `root` and `max_model_len`).
- `ServerClient.identify()`: which engine answers, from the model list's `owned_by` (vLLM "vllm", SGLang
  "sglang", llama-server "llamacpp", TensorRT-LLM "tensorrt_llm", Ollama "library", LM Studio
  "organization_owner"), else from the endpoints each engine alone serves (llama-server /props, Ollama
  /api/version, SGLang /get_server_info, vLLM /version).
- `ServerClient.prompt_tokens(text)`: the prompt's length in the server's own tokenizer, from the `usage` of a
  one-token completion (no tokenizer is loaded here).
- `ServerClient.stream(...)`: one streamed completion (POST /v1/completions, "stream": true, usage requested,
  `ignore_eos` and `min_tokens` asked for a fixed output length), timed chunk by chunk on this machine's
  monotonic clock. Server-sent events are read by httpx-sse.
- `ServerClient.metrics()`: the server's Prometheus text (/metrics: vLLM, SGLang with --enable-metrics,
  llama-server with --metrics), parsed by prometheus-client; `props()` and `slots()`: llama-server's.
Every failure is a ServerError, one line, naming what the server did.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from llmsize.errors import LlmsizeError, install_hint, shown, shown_path

EXTRA_HINT = install_hint("server", "httpx httpx-sse prometheus-client")
MAX_BODY_BYTES = 8 * 2**20  # a JSON answer (model list, props, metrics) read at most this far
MAX_STREAM_BYTES = 64 * 2**20  # one streamed completion
CONNECT_TIMEOUT_S = 10.0
SIDE_TIMEOUT_S = 5.0  # an optional endpoint (engine probes, /metrics, /props, /slots) waits this long at most
MAX_EXTRA_CHUNKS = 8  # token chunks past max_tokens before a stream counts as not honouring it
MAX_TOKEN_COUNT = 10**8  # a usage count above this is not one (no model holds such a context)
OWNED_BY = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llamacpp", "llama.cpp": "llamacpp",
            "tensorrt_llm": "trtllm", "trtllm": "trtllm", "library": "ollama", "ollama": "ollama",
            "organization_owner": "lmstudio"}
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "llamacpp": "llama.cpp (llama-server)",
                "ollama": "Ollama", "lmstudio": "LM Studio"}


def _json_bytes(payload: dict) -> bytes:
    """A request body as ASCII JSON: a name with a lone surrogate (a server's model id) is escaped, not fatal."""
    return json.dumps(payload).encode("ascii")


class _CappedText:
    """What httpx-sse reads a response through: its text decoded as UTF-8 whatever charset the server names,
    at most MAX_STREAM_BYTES in all, and a ServerError once --timeout passes without a data event (a stream
    of keep-alive comments, which the decoder swallows, is a stall)."""

    def __init__(self, response, client: "ServerClient", where: str, s: "Stream"):
        self.headers = response.headers
        self._r, self._c, self._where, self._s = response, client, where, s
        self.last_event_s = time.perf_counter()

    async def aiter_text(self):
        import codecs

        dec, seen, c = codecs.getincrementaldecoder("utf-8")(errors="replace"), 0, self._c
        async for part in self._r.aiter_bytes():
            seen += len(part)
            if seen > MAX_STREAM_BYTES:
                raise ServerError(f"--server {c.shown}: {self._where}: more than {MAX_STREAM_BYTES // 2**20} MiB "
                                  "streamed.", "Lower --tokens, or check the server.")
            if time.perf_counter() - self.last_event_s > c.timeout_s:
                raise ServerError(f"--server {c.shown}: {self._where}: stalled, no data event for {c.timeout_s:g} s "
                                  f"after {len(self._s.chunk_s)} chunk(s).", "Check the server's log, or raise "
                                                                             "--timeout.")
            yield dec.decode(part)
        yield dec.decode(b"", final=True)


class ServerError(LlmsizeError):
    """The server could not be reached, refused a request, or sent what an OpenAI-compatible server does not."""


def require_http():
    try:
        import httpx
        import httpx_sse  # noqa: F401
        import prometheus_client  # noqa: F401
    except ImportError:
        raise LlmsizeError("`llmsize measure --server` needs httpx, httpx-sse and prometheus-client, which are not "
                           "installed.", EXTRA_HINT) from None
    return httpx


def check_url(url: str) -> str:
    """An http(s) URL with a host (and a valid port), without a trailing slash or /v1 (both are accepted and
    dropped)."""
    bad = ServerError(f"--server `{shown(url)}` is not an http(s) URL of a server.",
                      "Give its base, e.g. http://127.0.0.1:8000 (vLLM) or http://127.0.0.1:8080 (llama-server).")
    text = url.strip()
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number in range
        host = parts.hostname or ""
        host.encode("idna")
    except (ValueError, UnicodeError):
        raise bad from None
    if parts.scheme not in ("http", "https") or not host or "?" in text or "#" in text or not text.isprintable() \
            or parts.port == 0:  # (port 0 is no server's: the connection would be refused)
        raise bad
    base = text.rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


def shown_url(url: str) -> str:
    """The URL as reports and files show it: without a user:password@ part."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()


@dataclass
class Stream:
    """One streamed completion as this machine saw it (perf_counter seconds)."""

    sent_s: float
    chunk_s: list[float] = field(default_factory=list)  # arrival of each chunk that carried a choice
    tokens: int | None = None  # usage.completion_tokens, when the server reported it
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    done: bool = False  # the stream ended with [DONE] or a finish reason
    timings: dict | None = None  # llama-server's own prefill/decode timings (final chunk)
    ended_s: float | None = None

    @property
    def output_tokens(self) -> int:
        return self.tokens if self.tokens is not None else len(self.chunk_s)


def _message(body: bytes) -> str:
    """The error text of an OpenAI-style error body ({"error": {"message"}} / {"message"} / {"detail"})."""
    try:
        d = json.loads(body.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return shown(body.decode("utf-8", "replace").strip() or "(empty body)", 160)
    if isinstance(d, dict):
        e = d.get("error")
        for v in ((e.get("message") if isinstance(e, dict) else e), d.get("message"), d.get("detail")):
            if isinstance(v, str) and v:
                return shown(v, 160)
    return shown(json.dumps(d), 160)


def tls_verify():
    """The certificates an https server is checked against: httpx's bundle, or the environment's own where it names
    one (SSL_CERT_FILE, SSL_CERT_DIR: a private certificate authority), as httpx would read them; the clients read
    nothing else from the environment (trust_env=False: no HTTP_PROXY, ALL_PROXY or .netrc), so requests go to
    the URL given and nowhere else, the API key with them."""
    cafile, capath = os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None
    if cafile is None and capath is None:
        return True
    import ssl

    try:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    except (OSError, ssl.SSLError, ValueError) as e:
        name, value = ("SSL_CERT_FILE", cafile) if cafile else ("SSL_CERT_DIR", capath)
        raise ServerError(f"{name} `{shown_path(value)}`: no certificates read from it ({type(e).__name__}).",
                          f"Point {name} at a PEM bundle (or a folder of them), or unset it.") from None


class ServerClient:
    """Requests to one base URL; follows no redirect and takes no proxy from the environment (nothing beyond the
    URL the user gave is contacted)."""

    def __init__(self, url: str, api_key: str | None = None, timeout_s: float = 120.0):
        self.httpx = require_http()
        self.base = check_url(url)
        self.shown = shown_url(self.base)
        try:
            self.httpx.URL(self.base + "/v1/models")
        except Exception:  # httpx's own parse (IDNA, address ranges): one line like check_url's
            raise ServerError(f"--server `{shown(self.shown)}` is not an http(s) URL of a server.",
                              "Give its base, e.g. http://127.0.0.1:8000.") from None
        self.timeout_s = timeout_s
        # identity: a compressed answer would let a few bytes on the wire decode to gigabytes
        self.headers = {"Accept-Encoding": "identity"}
        if api_key:
            if not all(33 <= ord(ch) < 127 for ch in api_key):  # never echoed: it is a secret
                raise ServerError("--api-key (or LLMSIZE_API_KEY) holds a space, a line end or a character outside "
                                  "ASCII, which an HTTP header cannot carry.",
                                  "Pass the key alone, without the line end a file read may add.")
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.timeout = self.httpx.Timeout(timeout_s, connect=min(CONNECT_TIMEOUT_S, timeout_s))
        self.verify = tls_verify() if urlsplit(self.base).scheme.lower() == "https" else True

    def _client(self, timeout=None):
        """A plain httpx.Client: this client's key, no redirects, nothing from the environment but tls_verify's."""
        return self.httpx.Client(timeout=timeout or self.timeout, headers=self.headers, follow_redirects=False,
                                 trust_env=False, verify=self.verify)

    def async_client(self, streams: int):
        """An httpx.AsyncClient for `streams` streams at once, with this client's key and timeouts."""
        limits = self.httpx.Limits(max_connections=streams + 2, max_keepalive_connections=streams + 2)
        return self.httpx.AsyncClient(timeout=self.timeout, headers=self.headers, limits=limits,
                                      follow_redirects=False, trust_env=False, verify=self.verify)

    # ---------------------------------------------------------------------------------------- plain requests

    def _get(self, path: str, quiet: bool = False):
        """GET path: the body's bytes, or None when quiet and the server has no such endpoint (any 4xx/5xx). A
        quiet GET (an engine's probe, its metrics: optional) waits SIDE_TIMEOUT_S at most, not --timeout: a
        server that never answers them must not hold the run for minutes."""
        limit_s = min(SIDE_TIMEOUT_S, self.timeout_s) if quiet else self.timeout_s
        timeout = self.httpx.Timeout(limit_s, connect=min(CONNECT_TIMEOUT_S, limit_s)) if quiet else self.timeout
        try:
            with self._client(timeout) as c:
                with c.stream("GET", self.base + path) as r:
                    body = self._read(r, MAX_BODY_BYTES, path, limit_s)
        except ServerError:
            if quiet:
                return None
            raise
        except Exception as e:  # httpx's errors, and what its URL and encoding layers raise
            if quiet:
                return None
            raise self._transport(e, path) from None
        if r.status_code != 200:
            if quiet:
                return None
            raise ServerError(f"--server {self.shown}: GET {path} answered HTTP {r.status_code}: {_message(body)}.",
                              self._hint(r.status_code, loaded=False))
        return body

    def _read(self, r, cap: int, path: str, limit_s: float | None = None) -> bytes:
        """The body, at most `cap` bytes (decoded) and within twice `limit_s` (--timeout) in all."""
        out, t0, limit_s = bytearray(), time.perf_counter(), limit_s or self.timeout_s
        for part in r.iter_bytes():
            out += part
            if len(out) > cap:
                raise ServerError(f"--server {self.shown}: {path} sent more than {cap // 2**20} MiB.",
                                  "Check that the URL is an OpenAI-compatible inference server.")
            if time.perf_counter() - t0 > 2 * limit_s:
                raise ServerError(f"--server {self.shown}: {path} took more than {2 * limit_s:g} s to answer.",
                                  "The server is trickling its answer: check its log, or raise --timeout.")
        return bytes(out)

    def _json(self, path: str, quiet: bool = False):
        body = self._get(path, quiet)
        if body is None:
            return None
        try:
            return json.loads(body.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            if quiet:
                return None
            raise ServerError(f"--server {self.shown}: GET {path} did not answer JSON ({_message(body)}).",
                              "Check that the URL is an OpenAI-compatible inference server.") from None

    def _hint(self, status: int, loaded: bool = True) -> str:
        """What to do about an HTTP error; `loaded`: it answered a request of ours (a GET of its lists put no load on
        it, so no load is to blame)."""
        if status in (401, 403):
            return "Pass the server's key with --api-key (or LLMSIZE_API_KEY)."
        if status == 404:
            return "Check the URL and --model (the server lists its models at /v1/models)."
        if 300 <= status < 400:
            return "Give --server the address the server answers at itself (redirects are not followed)."
        if not loaded:
            return "Check the server's log and that it has finished starting."
        return "Check the server's log; lower --context, --tokens or --concurrency if it is out of room."

    def _transport(self, e, path: str) -> ServerError:
        kind = type(e).__name__
        if isinstance(e, self.httpx.ConnectError):
            return ServerError(f"--server {self.shown}: cannot connect ({shown(str(e), 100) or kind}).",
                               "Start the server, or check the host and port.")
        if isinstance(e, self.httpx.TimeoutException):
            return ServerError(f"--server {self.shown}: {path} sent nothing for {self.timeout_s:g} s ({kind}).",
                               "The server stalled or is busy: check its log, or raise --timeout.")
        return ServerError(f"--server {self.shown}: {path} failed ({kind}: {shown(str(e), 100)}).",
                           "Check the server's log.")

    # ---------------------------------------------------------------------------------------- what it serves

    def models(self) -> list[dict]:
        d = self._json("/v1/models")
        data = d.get("data") if isinstance(d, dict) else None
        if not isinstance(data, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in data):
            raise ServerError(f"--server {self.shown}: /v1/models is not an OpenAI model list.",
                              "Check that the URL is an OpenAI-compatible inference server.")
        return data

    def identify(self, listed: dict) -> tuple[str | None, str | None, str, dict | None]:
        """(engine id or None, its version or None, how it was told, llama-server's /props when it is one)."""
        owner = str(listed.get("owned_by") or "").lower()
        engine = OWNED_BY.get(owner)
        how = f"/v1/models owned_by `{shown(owner, 40)}`" if engine else ""
        props = self.props() if engine in (None, "llamacpp") else None
        if props is not None:
            build = props.get("build_info")
            return "llamacpp", shown(build, 60) if isinstance(build, str) else None, how or "/props", props
        probes = (("ollama", "/api/version"), ("sglang", "/get_server_info"), ("vllm", "/version"))
        for eid, path in probes:
            if engine not in (None, eid):
                continue
            d = self._json(path, quiet=True)
            if isinstance(d, dict) and (eid != "sglang" or "version" in d or "tp_size" in d):
                v = d.get("version")
                return eid, shown(v, 60) if isinstance(v, str) else None, how or path, None
        return engine, None, how or "not told", None

    def props(self) -> dict | None:
        """llama-server's /props, when the server is one (it has default_generation_settings)."""
        d = self._json("/props", quiet=True)
        return d if isinstance(d, dict) and isinstance(d.get("default_generation_settings"), dict) else None

    def slots(self) -> list | None:
        d = self._json("/slots", quiet=True)
        return d if isinstance(d, list) else None

    def metrics(self) -> dict[str, float] | None:
        """The Prometheus samples of /metrics, summed over label sets (one model served): name -> value."""
        body = self._get("/metrics", quiet=True)
        if body is None:
            return None
        from prometheus_client.parser import text_string_to_metric_families

        out: dict[str, float] = {}
        try:
            for fam in text_string_to_metric_families(body.decode("utf-8", "replace")):
                for s in fam.samples:
                    if s.name.endswith("_bucket") or s.name.endswith("_created"):
                        continue
                    if math.isfinite(float(s.value)):
                        out[s.name] = out.get(s.name, 0.0) + float(s.value)
        except (ValueError, TypeError, IndexError):
            return None  # not Prometheus text: no metrics, not a failed run
        return out or None

    # ---------------------------------------------------------------------------------------- completions

    def prompt_tokens(self, model: str, text: str) -> int | None:
        """The prompt's token count in the server's tokenizer (usage of a one-token completion), or None."""
        body = self._post_json("/v1/completions", {"model": model, "prompt": text, "max_tokens": 1, "stream": False})
        usage = body.get("usage") if isinstance(body, dict) else None
        n = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None

    def ollama_show(self, model: str) -> dict | None:
        """Ollama's POST /api/show for its model (details.quantization_level, parameter_size), or None."""
        try:
            body = self._post_json("/api/show", {"model": model})
        except ServerError:
            return None
        return body if isinstance(body, dict) else None

    def _post_json(self, path: str, payload: dict):
        try:
            with self._client() as c:
                with c.stream("POST", self.base + path, content=_json_bytes(payload),
                              headers={"Content-Type": "application/json"}) as r:
                    body = self._read(r, MAX_BODY_BYTES, path)
        except ServerError:
            raise
        except Exception as e:
            raise self._transport(e, path) from None
        if r.status_code != 200:
            raise ServerError(f"--server {self.shown}: POST {path} answered HTTP {r.status_code}: {_message(body)}.",
                              self._hint(r.status_code))
        try:
            return json.loads(body.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            raise ServerError(f"--server {self.shown}: POST {path} did not answer JSON ({_message(body)}).",
                              "Check that the URL is an OpenAI-compatible inference server.") from None

    def completion_body(self, model: str, prompt: str, max_tokens: int) -> dict:
        """A streamed completion of exactly max_tokens where the server can be told so: ignore_eos (vLLM,
        SGLang, TensorRT-LLM, llama-server) and min_tokens (vLLM); servers ignore fields they do not know."""
        return {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
                "stream_options": {"include_usage": True}, "ignore_eos": True, "min_tokens": max_tokens}

    async def stream(self, client, body: dict, where: str) -> Stream:
        """POST one streamed completion on an httpx.AsyncClient; every failure a ServerError naming `where`.
        Bounded: at most MAX_STREAM_BYTES read, at most --timeout without a data event (keep-alive comments do
        not count), at most max_tokens + MAX_EXTRA_CHUNKS token chunks."""
        from httpx_sse import EventSource, SSEError

        path = "/v1/completions"
        s = Stream(sent_s=time.perf_counter())
        limit = int(body.get("max_tokens") or 0) + MAX_EXTRA_CHUNKS
        try:
            async with client.stream("POST", self.base + path, content=_json_bytes(body),
                                     headers={"Content-Type": "application/json"}) as r:
                if r.status_code != 200:
                    raw = b""
                    async for part in r.aiter_bytes():
                        raw += part
                        if len(raw) > 65536:
                            break
                    raise ServerError(f"--server {self.shown}: {where}: HTTP {r.status_code}: {_message(raw)}.",
                                      self._hint(r.status_code))
                ctype = r.headers.get("content-type", "")
                if "text/event-stream" not in ctype:
                    raise ServerError(f"--server {self.shown}: {where}: the answer is not a stream (content-type "
                                      f"`{shown(ctype, 60)}`).", "Check that the server streams /v1/completions.")
                capped = _CappedText(r, self, where, s)
                async for event in EventSource(capped).aiter_sse():
                    capped.last_event_s = time.perf_counter()
                    if self._event(s, event.data, where):
                        break
                    if len(s.chunk_s) > limit:
                        raise ServerError(f"--server {self.shown}: {where}: the server streamed more than the "
                                          f"{limit - MAX_EXTRA_CHUNKS} tokens asked (max_tokens).",
                                          "Check that the server honours max_tokens.")
        except ServerError:
            raise
        except SSEError as e:
            raise ServerError(f"--server {self.shown}: {where}: not a server-sent event stream ({shown(str(e), 80)}).",
                              "Check that the server streams /v1/completions.") from None
        except Exception as e:  # httpx's errors, and what its decoding layers raise
            err = self._transport(e, path)
            if isinstance(e, (self.httpx.RemoteProtocolError, self.httpx.ReadError)):
                err = ServerError(f"--server {self.shown}: {where}: the connection closed after {len(s.chunk_s)} "
                                  f"chunk(s) ({type(e).__name__}).", "Check the server's log (a crash, or out of "
                                                                     "memory at this load?).")
            elif isinstance(e, self.httpx.TimeoutException) and s.chunk_s:
                err = ServerError(f"--server {self.shown}: {where}: stalled, nothing for {self.timeout_s:g} s after "
                                  f"{len(s.chunk_s)} chunk(s).", "Check the server's log, or raise --timeout.")
            raise err from None
        s.ended_s = time.perf_counter()
        if not s.done:
            raise ServerError(f"--server {self.shown}: {where}: the stream ended without [DONE] or a finish reason "
                              f"after {len(s.chunk_s)} chunk(s).", "Check the server's log.")
        if not s.chunk_s:
            raise ServerError(f"--server {self.shown}: {where}: the stream carried no token.",
                              "Check the server's log.")
        if s.tokens is not None and not len(s.chunk_s) - 1 <= s.tokens <= limit - MAX_EXTRA_CHUNKS:
            raise ServerError(f"--server {self.shown}: {where}: usage says {s.tokens:,} output tokens where "
                              f"{len(s.chunk_s)} streamed chunks carried tokens (max_tokens "
                              f"{limit - MAX_EXTRA_CHUNKS:,}).", "Check the server's token accounting.")
        return s

    def _event(self, s: Stream, data: str, where: str) -> bool:
        """Read one event into s; True at [DONE]."""
        now = time.perf_counter()
        if data.strip() == "[DONE]":
            s.done = True
            return True
        if not data.strip():
            return False
        try:
            d = json.loads(data)
        except (ValueError, RecursionError):
            raise ServerError(f"--server {self.shown}: {where}: a chunk is not JSON (`{shown(data, 60)}`).",
                              "Check that the server speaks the OpenAI streaming format.") from None
        if not isinstance(d, dict):
            raise ServerError(f"--server {self.shown}: {where}: a chunk is not a JSON object (`{shown(data, 60)}`).",
                              "Check that the server speaks the OpenAI streaming format.")
        if d.get("error"):
            raise ServerError(f"--server {self.shown}: {where}: the server sent an error mid-stream: "
                              f"{_message(data.encode())}.", self._hint(500))
        choices = d.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            c = choices[0]
            text = c.get("text") if isinstance(c.get("text"), str) else None
            finish = c.get("finish_reason") if isinstance(c.get("finish_reason"), str) and c["finish_reason"] \
                else None
            # a token arrived; after the first, an empty text is one too (bytes held back until a character is
            # whole); an empty chunk before any text, or a closing one, is none
            if text or (text is not None and finish is None and s.chunk_s):
                s.chunk_s.append(now)
            if finish:
                s.finish_reason = finish
                s.done = True
        usage = d.get("usage")
        if isinstance(usage, dict):
            for key, attr in (("completion_tokens", "tokens"), ("prompt_tokens", "prompt_tokens")):
                v = usage.get(key)
                if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                    if v > MAX_TOKEN_COUNT:
                        raise ServerError(f"--server {self.shown}: {where}: usage says {shown(v, 40)} {key}.",
                                          "Check the server's token accounting.")
                    setattr(s, attr, v)
        if isinstance(d.get("timings"), dict):
            s.timings = {k: v for k, v in d["timings"].items()
                         if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
        return False
