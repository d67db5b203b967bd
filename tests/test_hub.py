"""--hub against a local HTTP server the test starts (HF_ENDPOINT), never the internet: only config.json and
the safetensors headers travel, by range requests, with HF_TOKEN as a bearer token."""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from stfiles import tiny_llama_folder

pytest.importorskip("huggingface_hub")


class Hub:
    """Serves ROOT/<org>/<name>/<file> at /<org>/<name>/resolve/<rev>/<file>, honouring single ranges."""

    def __init__(self, root, honour_ranges=True):
        self.root, self.honour_ranges, self.log = root, honour_ranges, []
        self.token = None  # when set, requests without this bearer token get 401
        self.claimed_total = None  # when set, what Content-Range says the file's size is (a lying server)
        self.redirect_to = None  # when set, every request is redirected there (a CDN that is down)
        self.paths = []  # every path asked for, answered or not
        hub = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                hub.paths.append(self.path)
                if hub.redirect_to:
                    self.send_response(302)
                    self.send_header("Location", hub.redirect_to)
                    self.end_headers()
                    return
                if hub.token and self.headers.get("authorization") != f"Bearer {hub.token}":
                    self.send_response(401)
                    self.end_headers()
                    return
                m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", self.path)
                f = hub.root / m.group(1) / m.group(3) if m else None
                if f is None or not f.is_file():
                    self.send_response(404)
                    self.end_headers()
                    return
                data = f.read_bytes()
                rng = self.headers.get("range")
                entry = {"file": m.group(3), "rev": m.group(2), "range": rng,
                         "auth": self.headers.get("authorization")}
                if rng and hub.honour_ranges:
                    a, b = map(int, re.match(r"bytes=(\d+)-(\d+)", rng).groups())
                    body = data[a:b + 1]
                    self.send_response(206)
                    total = len(data) if hub.claimed_total is None else hub.claimed_total
                    self.send_header("Content-Range", f"bytes {a}-{a + len(body) - 1}/{total}")
                else:
                    body = data
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                entry["sent"] = len(body)
                hub.log.append(entry)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # a short poll: shutdown() waits for the next one (the default 0.5 s, at every test's end)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self):
        self.server.shutdown()


@pytest.fixture()
def hub(tmp_path, monkeypatch):
    h = Hub(tmp_path / "repos")
    monkeypatch.setenv("HF_ENDPOINT", h.url)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    yield h
    h.close()


def test_plan_from_the_hub_reads_headers_only(hub, run_cli, monkeypatch):
    folder = tiny_llama_folder(hub.root / "acme" / "tiny", "ct-nvfp4", shards=2)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    code, out, err = run_cli("plan", "--hub", "acme/tiny@v1", "--gpu", "h200", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["weights"]["source"] == "safetensors headers"
    _, local, _ = run_cli("plan", str(folder), "--gpu", "h200", "--json")
    assert d["weights"]["bytes_by_component"] == json.loads(local)["weights"]["bytes_by_component"]
    shards = [e for e in hub.log if e["file"].endswith(".safetensors")]
    assert shards and all(e["range"] for e in shards) and all(e["rev"] == "v1" for e in hub.log)
    for f in {e["file"] for e in shards}:  # per shard: 8 bytes, then the header, never the data
        sent = sum(e["sent"] for e in shards if e["file"] == f)
        assert sent < (folder / f).stat().st_size
    assert all(e["auth"] == "Bearer hf_test_token" for e in hub.log)


def test_import_from_the_hub_writes_an_entry(hub, run_cli, tmp_path):
    tiny_llama_folder(hub.root / "acme" / "tiny", "bf16")
    (tmp_path / "cat" / "models").mkdir(parents=True)
    code, out, err = run_cli("import", "--hub", "acme/tiny", "-o", str(tmp_path / "cat" / "models" / "t.yaml"))
    assert code == 0, err
    text = (tmp_path / "cat" / "models" / "t.yaml").read_text()
    assert "hub:acme/tiny@main/config.json" in text


def test_server_ignoring_ranges_is_cut_off(hub, run_cli):
    tiny_llama_folder(hub.root / "acme" / "tiny", "bf16")
    hub.honour_ranges = False
    code, out, err = run_cli("plan", "--hub", "acme/tiny", "--gpu", "h200")
    assert code == 2 and "Content-Range" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("repo, code_want, needle", [
    ("acme/missing", 2, "acme/missing@main/config.json: HTTP 404"),
    ("not a repo", 2, "--hub `not a repo` is not a repo id"),
    ("../../etc", 2, "is not a repo id"),
])
def test_hub_errors_are_one_line(hub, run_cli, repo, code_want, needle):
    code, out, err = run_cli("plan", "--hub", repo, "--gpu", "h200")
    assert code == code_want and needle in err and len(err.strip().splitlines()) == 1


def test_unreachable_endpoint(run_cli, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    code, out, err = run_cli("plan", "--hub", "acme/tiny", "--gpu", "h200")
    assert code == 2 and "cannot reach http://127.0.0.1:9" in err


@pytest.mark.parametrize("endpoint", ["notaurl", "ftp://x", "http://", "https:// spaced"])
def test_an_endpoint_that_is_no_url_is_refused_before_any_request(run_cli, monkeypatch, endpoint):
    """HF_ENDPOINT=notaurl said "cannot reach :// (redirected there by notaurl)" (a hostile-input pass, 2026-12-05)."""
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    code, out, err = run_cli("plan", "--hub", "acme/tiny", "--gpu", "h200")
    assert code == 2 and f"HF_ENDPOINT `{endpoint}` is not an http(s) URL" in err and len(err.splitlines()) == 1


def test_gated_repo_needs_hf_token(hub, run_cli, monkeypatch):
    tiny_llama_folder(hub.root / "acme" / "gated", "bf16")
    hub.token = "hf_secret"
    code, out, err = run_cli("plan", "--hub", "acme/gated", "--gpu", "h200")
    assert code == 2 and "access denied (HTTP 401)" in err and "HF_TOKEN" in err
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    code, out, err = run_cli("plan", "--hub", "acme/gated", "--gpu", "h200", "--json")
    assert code == 0, err


def _gguf(path, vocab=4096, h=4096):
    """A GGUF whose tensor data (an embedding of vocab x h in Q4_K, 9.4 MB) outweighs the first 8 MiB range."""
    np = pytest.importorskip("numpy")
    gguf = pytest.importorskip("gguf")
    from gguf import GGML_QUANT_SIZES
    from gguf import GGMLQuantizationType as Q

    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), "llama")
    for k, v in {"block_count": 1, "embedding_length": h, "context_length": 4096, "attention.head_count": 32,
                 "attention.head_count_kv": 8}.items():
        w.add_uint32(f"llama.{k}", v)
    w.add_uint32("general.file_type", 15)

    def add(name, ne, ty=Q.Q4_K):
        blk, size = GGML_QUANT_SIZES[ty]
        w.add_tensor(name, np.zeros(tuple(reversed(ne[1:])) + (ne[0] // blk * size,), dtype=np.uint8), raw_dtype=ty)

    add("token_embd.weight", (h, vocab))
    add("blk.0.attn_q.weight", (h, h))
    add("blk.0.attn_k.weight", (h, h // 4))
    add("blk.0.attn_v.weight", (h, h // 4))
    add("blk.0.attn_output.weight", (h, h))
    add("blk.0.ffn_gate.weight", (h, 1024))
    add("blk.0.ffn_up.weight", (h, 1024))
    add("blk.0.ffn_down.weight", (1024, h))
    for n in ("blk.0.attn_norm.weight", "blk.0.ffn_norm.weight", "output_norm.weight"):
        w.add_tensor(n, np.zeros(h, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_gguf_on_the_hub_is_read_by_its_header_only(hub, run_cli, tmp_path):
    f = _gguf(hub.root / "acme" / "tiny-gguf" / "tiny-Q4_K_M.gguf")
    code, out, err = run_cli("plan", "--hub", "acme/tiny-gguf", "--file", "tiny-Q4_K_M.gguf", "--gpu", "rtx4090",
                             "--json")
    assert code == 0, err
    d = json.loads(out)
    _, local, _ = run_cli("plan", str(f), "--gpu", "rtx4090", "--json")
    assert d["weights"]["bytes_by_component"] == json.loads(local)["weights"]["bytes_by_component"]
    assert d["weights"]["format"] == "gguf-q4_k_m"
    reqs = [e for e in hub.log if e["file"].endswith(".gguf")]
    assert reqs and all(e["range"] for e in reqs)
    assert sum(e["sent"] for e in reqs) < f.stat().st_size  # the tensor data stayed on the server


def test_a_gguf_on_a_server_ignoring_ranges_is_cut_off(hub, run_cli):
    _gguf(hub.root / "acme" / "tiny-gguf" / "tiny.gguf")
    hub.honour_ranges = False
    code, out, err = run_cli("plan", "--hub", "acme/tiny-gguf", "--file", "tiny.gguf", "--gpu", "rtx4090")
    assert code == 2 and "Content-Range" in err and len(err.strip().splitlines()) == 1


def test_an_index_naming_a_path_out_of_the_repo_is_refused(hub, run_cli):
    """A shard name of the remote index is a file of the repo: `../` would send HF_TOKEN to other paths."""
    root = hub.root / "acme" / "tiny"
    tiny_llama_folder(root, "bf16")
    (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "../../etc/x.safetensors"}}))
    code, out, err = run_cli("plan", "--hub", "acme/tiny", "--gpu", "h200")
    assert code == 2 and "is not a .safetensors file of the repository" in err and len(err.strip().splitlines()) == 1
    assert not any(".." in e["file"] for e in hub.log)


@pytest.mark.parametrize("total", ["9" * 40, str(2**62), "0"])
def test_a_gguf_size_no_file_has_is_one_line(hub, run_cli, total):
    """Content-Range's total sizes a sparse local copy: 40 digits overflowed it (a traceback), 2^62 failed as
    'File too large'."""
    _gguf(hub.root / "acme" / "tiny-gguf" / "tiny.gguf")
    hub.claimed_total = total
    code, out, err = run_cli("plan", "--hub", "acme/tiny-gguf", "--file", "tiny.gguf", "--gpu", "rtx4090")
    assert code == 2 and "which no model file has" in err and len(err.strip().splitlines()) == 1


def test_hub_asks_the_endpoint_for_the_repos_files_only(hub):
    """huggingface_hub fetches {HF_ENDPOINT}/api/agent-harnesses on its own unless telemetry is off: --hub turns it
    off (a fresh interpreter, where huggingface_hub reads the setting at import), so only the repo's files go out."""
    import os
    import subprocess
    import sys

    tiny_llama_folder(hub.root / "acme" / "tiny", "bf16")
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_TELEMETRY"}
    r = subprocess.run([sys.executable, "-m", "llmsize", "plan", "--hub", "acme/tiny", "--gpu", "h200"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert hub.paths and all(p.startswith("/acme/tiny/resolve/") for p in hub.paths), hub.paths


def test_a_redirect_to_a_host_that_is_down_names_that_host(hub, run_cli):
    hub.redirect_to = "http://127.0.0.1:9/cdn/config.json"  # the discard port: nothing listens
    code, out, err = run_cli("plan", "--hub", "acme/tiny", "--gpu", "h200")
    assert code == 2 and f"cannot reach http://127.0.0.1:9 (redirected there by {hub.url})" in err


def test_file_without_hub_is_one_line(run_cli):
    code, out, err = run_cli("plan", "llama-3-8b", "--file", "x.gguf", "--gpu", "rtx4090")
    assert code == 2 and "--file `x.gguf` needs --hub" in err


def test_a_mixed_precision_checkpoint_on_the_hub_plans_as_its_recipe(hub, run_cli):
    """nvidia's Qwen3.6-35B-A3B NVFP4 (its config.json and hf_quant_config.json, tests/data/hf-configs): --hub reads
    both and plans the ModelOpt MIXED_PRECISION recipe, a format per component (tests/test_recipe.py)."""
    import shutil
    from pathlib import Path

    src = Path(__file__).parent / "data" / "hf-configs"
    repo = hub.root / "nvidia" / "Qwen3.6-35B-A3B-NVFP4"
    repo.mkdir(parents=True)
    shutil.copy(src / "nvidia__Qwen3.6-35B-A3B-NVFP4.json", repo / "config.json")
    shutil.copy(src / "nvidia__Qwen3.6-35B-A3B-NVFP4.hf_quant_config.json", repo / "hf_quant_config.json")
    code, out, err = run_cli("plan", "--hub", "nvidia/Qwen3.6-35B-A3B-NVFP4", "--gpu", "rtx5090", "--json")
    assert code == 0, err
    assert json.loads(out)["weights"]["format"] == ("experts=nvfp4-w4a16,shared_experts=nvfp4-w4a16,attention=fp8,"
                                                    "ssm=fp8,lm_head=nvfp4-w4a16")
    assert any(e["file"] == "hf_quant_config.json" for e in hub.log)


def test_a_config_that_is_no_json_says_where_to_look(hub, run_cli):
    """An endpoint (a proxy) answering with an error page where config.json should be: one line, and what to check."""
    (hub.root / "acme" / "page").mkdir(parents=True)
    (hub.root / "acme" / "page" / "config.json").write_text("<html>Bad gateway</html>")
    code, out, err = run_cli("plan", "--hub", "acme/page", "--gpu", "h200")
    assert code == 2 and "not valid JSON" in err and "HF_ENDPOINT" in err and len(err.strip().splitlines()) == 1
