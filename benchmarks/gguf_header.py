"""Time reading a GGUF header with a real-sized tokenizer (Llama 3's: 128,256 tokens, 280,147 merges) through
llmsize's reader (llmsize.importer.gguf_file.read_gguf) against gguf-py's GGUFReader on the same file. The file is
written to a temporary folder with gguf's writer (two tiny layers, no real weights) and removed after.

    python benchmarks/gguf_header.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gguf import GGUFReader, GGUFWriter  # noqa: E402

from llmsize.importer.gguf_file import read_gguf  # noqa: E402

TOKENS, MERGES = 128_256, 280_147  # Meta-Llama-3's tokenizer


def write(path: Path) -> None:
    w = GGUFWriter(str(path), "llama")
    for key, value in (("block_count", 2), ("embedding_length", 256), ("context_length", 8192),
                       ("feed_forward_length", 512), ("attention.head_count", 4), ("attention.head_count_kv", 2)):
        w.add_uint32(f"llama.{key}", value)
    w.add_uint32("general.file_type", 1)
    w.add_array("tokenizer.ggml.tokens", [f"token{i}" for i in range(TOKENS)])
    w.add_array("tokenizer.ggml.token_type", [1] * TOKENS)
    w.add_array("tokenizer.ggml.merges", [f"a{i} b{i}" for i in range(MERGES)])
    w.add_tensor("token_embd.weight", np.zeros((TOKENS // 256, 256), dtype=np.float16))
    for i in range(2):
        for name, shape in (("attn_q", (256, 256)), ("attn_k", (128, 256)), ("attn_v", (128, 256)),
                            ("attn_output", (256, 256)), ("ffn_gate", (512, 256)), ("ffn_up", (512, 256)),
                            ("ffn_down", (256, 512))):
            w.add_tensor(f"blk.{i}.{name}.weight", np.zeros(shape, dtype=np.float16))
        for name in ("attn_norm", "ffn_norm"):
            w.add_tensor(f"blk.{i}.{name}.weight", np.zeros(256, dtype=np.float32))
    w.add_tensor("output_norm.weight", np.zeros(256, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    runs = ap.parse_args().runs
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "llama3-tokenizer.gguf"
        write(path)
        ours = timed(lambda: read_gguf(path), runs)
        theirs = timed(lambda: GGUFReader(str(path), "r"), max(1, runs // 3))
    print(f"GGUF header with {TOKENS:,} tokens and {MERGES:,} merges")
    print(f"{'reader':<28}{'runs':>6}{'median s':>10}{'min s':>8}")
    print(f"{'llmsize read_gguf':<28}{len(ours):>6}{statistics.median(ours):>10.2f}{min(ours):>8.2f}")
    print(f"{'gguf-py GGUFReader alone':<28}{len(theirs):>6}{statistics.median(theirs):>10.2f}{min(theirs):>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
