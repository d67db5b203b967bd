"""Opt-in network: `--hub REPO_ID[@REVISION]` reads config.json (and hf_quant_config.json if there) and only
the safetensors headers, with HTTP range requests through huggingface_hub (its URLs, its session, its auth
headers: HF_TOKEN is honoured; HF_ENDPOINT selects the server). No tensor data is downloaded: each header
costs two ranged GETs (8 bytes, then the JSON), and a server that ignores the range is cut off."""

from __future__ import annotations

import json
import os
import re
import struct

from llmsize.errors import InvalidValueError, LlmsizeError, install_hint, shown
from llmsize.importer.safetensors_header import (
    MAX_HEADER_BYTES,
    HeaderError,
    TensorInfo,
    check_length,
    parse_header,
)

HUB_HINT = install_hint("hub", "huggingface_hub")
MAX_JSON_BYTES = 20 * 2**20
_REPO = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


class HubError(LlmsizeError):
    """The Hub (or the HF_ENDPOINT server) could not give what we asked for."""


def parse_repo(spec: str) -> tuple[str, str]:
    repo, _, rev = spec.partition("@")
    if not _REPO.match(repo) or ".." in repo:
        raise InvalidValueError(f"--hub `{spec}` is not a repo id.", "Use ORG/NAME or ORG/NAME@REVISION.")
    if "@" in spec and not rev.strip():  # `ORG/NAME@` names no revision: not read as main in silence
        raise InvalidValueError(f"--hub `{spec}` names no revision after @.",
                                "Give ORG/NAME@REVISION (a branch, tag or commit), or drop the @ for main.")
    return repo, rev or "main"


class _Client:
    def __init__(self, repo: str, revision: str):
        # --hub reads config.json and headers, nothing else: no telemetry, and none of huggingface_hub's own calls
        # (it fetches {HF_ENDPOINT}/api/agent-harnesses unless telemetry is off); read when it is first imported
        os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        try:
            from huggingface_hub import hf_hub_url
            from huggingface_hub.utils import build_hf_headers, get_session
        except ImportError:
            raise LlmsizeError("--hub needs huggingface_hub, which is not installed.", HUB_HINT) from None
        self.repo, self.revision = repo, revision
        self.endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
        if not re.fullmatch(r"https?://[^/\s?#]+(/\S*)?", self.endpoint):  # before any request: "notaurl" was
            # reported as "cannot reach ://"
            raise InvalidValueError(f"HF_ENDPOINT `{shown(os.environ['HF_ENDPOINT'], 80)}` is not an http(s) URL.",
                                    "Set it to the server's address (https://huggingface.co by default), or unset it.")
        self._url, self._headers, self._session = hf_hub_url, build_hf_headers(), get_session()

    def url(self, filename: str) -> str:
        return self._url(self.repo, filename, revision=self.revision, endpoint=self.endpoint)

    def get(self, filename: str, limit: int, byte_range: tuple[int, int] | None = None,
            missing_ok: bool = False) -> tuple[bytes, int | None] | None:
        """GET at most `limit` bytes; returns (body, total file size from Content-Range or None)."""
        headers = dict(self._headers)
        if byte_range:
            headers["range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
        where = f"{self.repo}@{self.revision}/{filename}"
        try:
            with self._session.stream("GET", self.url(filename), headers=headers, timeout=30,
                                      follow_redirects=True) as r:
                if r.status_code == 404 and missing_ok:
                    return None
                if r.status_code in (401, 403):
                    raise HubError(f"{where}: access denied (HTTP {r.status_code}).",
                                   "Set HF_TOKEN to a token that can read this repo.")
                if r.status_code >= 400:
                    raise HubError(f"{where}: HTTP {r.status_code}.", "Check the repo id, revision and file.")
                body = bytearray()
                for chunk in r.iter_bytes():
                    body += chunk
                    if len(body) > limit:  # a server ignoring the range: stop, never download the weights
                        if byte_range:
                            body = body[:limit]
                            break
                        raise HubError(f"{where}: larger than {limit:,} bytes.")
                total = None
                cr = r.headers.get("content-range", "")
                m = re.match(r"bytes \d+-\d+/(\d+)", cr)
                if m:
                    total = int(m.group(1))
                elif byte_range is None or r.status_code == 200:
                    total = int(r.headers.get("content-length") or len(body)) if byte_range is None else None
                return bytes(body), total
        except LlmsizeError:
            raise
        except Exception as e:  # connection refused, DNS, timeouts: httpx/requests error types vary
            there = _failed_host(e, self.endpoint)
            raise HubError(f"{where}: cannot reach {there} ({e.__class__.__name__}).",
                           "Check the network, or HF_ENDPOINT.") from None

    def json(self, filename: str, missing_ok: bool = False):
        got = self.get(filename, MAX_JSON_BYTES, missing_ok=missing_ok)
        if got is None:
            return None
        try:
            return json.loads(got[0].decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise HubError(f"{self.repo}@{self.revision}/{filename}: not valid JSON ({e.__class__.__name__}).",
                           "Check the repo and revision, or HF_ENDPOINT (a proxy's error page is not the file).") \
                from None

    def header(self, filename: str) -> dict[str, TensorInfo]:
        where = f"{self.repo}@{self.revision}/{filename}"
        head, total = self.get(filename, 8, (0, 7))
        if len(head) < 8:
            raise HeaderError(f"{where}: too short for a safetensors header.")
        if total is None:
            raise HubError(f"{where}: the server did not answer the range request with a Content-Range.",
                           "llmsize reads headers only; it needs a server that honours ranges.")
        (n,) = struct.unpack("<Q", head[:8])
        check_length(n, total, where)
        blob, _ = self.get(filename, min(n, MAX_HEADER_BYTES), (8, 8 + n - 1))
        if len(blob) != n:
            raise HeaderError(f"{where}: got {len(blob):,} of the {n:,} header bytes.")
        return parse_header(blob, total, where, filename)


def fetch(spec: str) -> tuple[dict, dict | None, dict[str, TensorInfo] | None, list[str], str]:
    """(config.json, hf_quant_config.json or None, tensors or None, files read, 'repo@revision')."""
    repo, rev = parse_repo(spec)
    c = _Client(repo, rev)
    raw = c.json("config.json")
    hf_quant = c.json("hf_quant_config.json", missing_ok=True)
    index = c.json("model.safetensors.index.json", missing_ok=True)
    if index is not None:
        wm = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(wm, dict):
            raise HeaderError(f"{repo}@{rev}/model.safetensors.index.json: no weight_map object.")
        files = sorted(set(map(str, wm.values())))
        for f in files:  # a shard is a file of the repo, never a path out of it (the token goes with each request)
            if f.startswith(("/", ".")) or "\\" in f or ".." in f.split("/") or not f.endswith(".safetensors"):
                raise HeaderError(f"{repo}@{rev}/model.safetensors.index.json: shard name {shown(f, 80)!r} is not a "
                                  ".safetensors file of the repository.",
                                  "Check the repository's index, or plan a local copy.")
    else:
        files = ["model.safetensors"]
        if c.get("model.safetensors", 8, (0, 7), missing_ok=True) is None:
            return raw, hf_quant, None, [], f"{repo}@{rev}"
    tensors: dict[str, TensorInfo] = {}
    for f in files:
        for name, t in c.header(f).items():
            tensors[name] = t
    return raw, hf_quant, tensors, [f"{c.url(f)}" for f in files], f"{repo}@{rev}"


def _failed_host(e: Exception, endpoint: str) -> str:
    """Where a request failed: the endpoint, or the host a redirect sent it to (httpx's error keeps its request)."""
    try:
        url = e.request.url  # httpx.RequestError; a RuntimeError where it has none
        host = f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port else "")
    except Exception:
        return endpoint
    return endpoint if host == endpoint.rstrip("/") else f"{host} (redirected there by {endpoint})"


MAX_GGUF_HEADER_BYTES = 256 * 2**20  # tokenizer arrays make GGUF headers large; tensor data is never asked for
MAX_GGUF_FILE_BYTES = 16 * 2**40  # one .gguf file (a split) of any model: its size as a server announces it


def fetch_gguf(spec: str, filename: str):
    """A .gguf of the repo (every split when `filename` is NAME-00001-of-0000N.gguf): its header and tensor infos
    by range requests of 8 MiB, then 32, 128, 256 MiB until the header parses, into a sparse local copy that holds
    no tensor data. Returns (GgufFile, 'repo@revision')."""
    import tempfile
    from pathlib import Path

    from llmsize.importer.gguf_file import GgufError, HeaderBeyond, merge, read_part, split_names

    repo, rev = parse_repo(spec)
    if not filename.endswith(".gguf") or ".." in filename or filename.startswith("/"):
        raise InvalidValueError(f"--file `{filename}` is not a .gguf file name.", "e.g. --file Model-Q4_K_M.gguf")
    c = _Client(repo, rev)
    folder, _, base = filename.rpartition("/")
    names = [f"{folder}/{n}" if folder else n for n in split_names(base, f"{repo}@{rev}/{filename}")]
    parts = []
    with tempfile.TemporaryDirectory(prefix="llmsize-gguf-") as tmp:
        local = Path(tmp) / "header.gguf"
        for name in names:
            where = f"{repo}@{rev}/{name}"
            want = 8 * 2**20
            while True:
                body, total = c.get(name, want, (0, want - 1))
                if total is None:
                    raise HubError(f"{where}: the server did not answer the range request with a Content-Range.",
                                   "llmsize reads headers only; it needs a server that honours ranges.")
                if not 0 < total <= MAX_GGUF_FILE_BYTES:
                    raise HubError(f"{where}: the server gives its size as {shown(str(total), 30)} bytes, which no "
                                   f"model file has (at most {MAX_GGUF_FILE_BYTES // 2**40} TiB).",
                                   "Check HF_ENDPOINT and the repository, or plan a local copy.")
                with open(local, "wb") as fh:
                    fh.truncate(total)  # sparse: only the fetched prefix is real
                    fh.write(body)
                try:
                    meta, tensors = read_part(local, where, len(body) if len(body) < total else None, name)
                    break
                except HeaderBeyond:
                    if want >= MAX_GGUF_HEADER_BYTES or len(body) >= total:
                        raise GgufError(f"{where}: header larger than {MAX_GGUF_HEADER_BYTES:,} bytes.",
                                        "The file is not a GGUF model, or is damaged.") from None
                    want *= 4
            parts.append((where, meta, tensors))
    return merge(parts, [c.url(n) for n in names]), f"{repo}@{rev}"
