"""Seeded fuzz test of the whole command line: every command, every kind of input, one contract.

The contract (from the CLI's own promise, llmsize.errors): whatever the arguments, files and environment, a
run ends within TIME_LIMIT_S seconds and MEMORY_LIMIT bytes of address space in one of two ways:
  * exit 0 with output (stdout, or the file it was asked to write), JSON output being strict JSON
    (no NaN / Infinity), or
  * exit 2 with exactly one line on stderr, starting with "Error:", and no traceback.
Anything else fails the case: exit 1 or another code, an uncaught exception, a timeout, a signal, a
MemoryError, several stderr lines, stdout empty on success. And nothing outside the case's own folder is
created or changed: the tracked files of the tree, the pytest tmp folders and the current directory are
snapshotted before and after; a destination that was not written must be left as it was; no `.partial`
temporary file is left behind.

What is generated (CASES cases, default 2,400; weights in GENERATORS), seeded by SEED so a failing case
reproduces from its number alone (each case draws from random.Random(f"{SEED}:{index}")):
  ids        catalog ids for plan/compare/roofline/kv/show: valid ids and aliases, typos, garbage, unicode
             (RTL, zero-width, combining, emoji, full-width, lone surrogates from non-UTF-8 argv), very long.
  numbers    every numeric option of plan, compare, roofline, kv, gpus (and measure in `measure`): NaN, +-inf,
             negative, zero, 1e308, 1e309, 5e-324, 10**400, 400- and 5,000-digit ints, int32/int64 edges,
             hex, underscores, non-ASCII digits, and random values inside the accepted ranges.
  choices    every string option (quant, kv-dtype, kv-policy, spec, compute, scope, emit, engine, engine-version,
             vendor, segment, sort, format, family, mixer, --moe/--dense, --levers, --no-flash-attn) with valid, near
             and garbage values.
  paths      a model path / --catalog / --prices / --calibrate that is a FIFO, a char device made with
             mknod inside the case folder (null 1,3, zero 1,5, full 1,7; as root only), a folder, a chmod 000
             file, symlinks to devices, dangling and looping symlinks, names too long, `~` (HOME = case folder).
  configs    the real config.json files of tests/data/hf-configs mutated: keys deleted, null, wrong types,
             bools for ints, huge/negative/zero/NaN numbers, deep nesting, truncation, non-UTF-8, BOM, lone
             surrogates, with a mutated hf_quant_config.json too; through import, plan, compare, roofline, kv.
  safetensors  tiny checkpoints from stfiles (bf16, NVFP4, FP8, GPTQ, AWQ, bnb, gpt-oss MXFP4, sharded)
             with headers truncated, garbled, huge lengths, wrong shapes/offsets/dtypes, bad indexes.
  catalog    --catalog folders (or $LLMSIZE_CATALOG) with shipped hardware/ and models/ YAML mutated:
             NaN/inf/negative numbers, wrong types, duplicate keys, ids and aliases, non-UTF-8, alias bombs,
             deep nesting, special files; through gpus, models, show, plan, compare, roofline, kv.
  prices     compare --prices files: currency and prices mutated.
  calibrate  plan --calibrate files: `measure --save`-shaped JSON mutated.
  outputs    -o of import/roofline/kv and --save of measure: FIFOs, devices, folders, symlinks, existing
             files (with and without --force), missing folders, names too long, a file-size limit (disk full).
  measure    --device cpu only: invalid values, tiny valid runs (--tokens 2 --context 8 --warmup 1
             --no-probe), --checkpoint folders with mutated Gemma 4 configs. Skipped without torch.
  serving    fleet on one to three cards (a valid model, --users or --rate or neither, lengths fixed, lognormal or
             from a CSV that may be hostile, TTFT/TPOT targets, runtimes, formats, --spec, --emit, --simulate) and
             fit on one card (runtimes, host memory, numbers), with valid, near and garbage values.
  cli        no arguments, --version, --help of each command, unknown commands and options, missing values,
             odd COLUMNS, --hub (HF_ENDPOINT points at a closed local port: no network is used).

How it runs fast: the parent imports llmsize (and torch when measure cases run) once, builds each command's
options, loads the shipped catalog and runs a few valid commands (_preimport: caches only), then forks one child
per case, WORKERS at a time (2,400 cases: 68 s wall, 60 s user + 49 s system, 2026-12-02, this test alone on
two cores, `/usr/bin/time python -m pytest -n 0 tests/test_fuzz.py`).
The cases that need no torch run from a fresh interpreter that never imports it
(`python tests/test_fuzz.py BASE IO_DIR INDICES`, _plain_batch): a fork of a process holding torch costs each
case tens of ms of page tables (2,400 cases, one process: 131 s user + 90 s system CPU; split: 126 s + 52 s,
2026-12-02, this test alone on two cores, `/usr/bin/time python -m pytest -n 0 tests/test_fuzz.py`). A case of
another kind that needs torch (`measure --save` among the outputs) is deferred by that interpreter to the one
that holds torch: its child would import torch itself, 1.7 s each (122 s -> 92 s wall, 106 s user + 49 s system,
same command). The child
sets its limits (RLIMIT_AS, RLIMIT_CORE, optionally RLIMIT_FSIZE, a faulthandler watchdog), its cwd, HOME and
TMPDIR (the case folder), redirects fds 1 and 2 to files, calls llmsize.cli.main(argv) and _exits with its
status (99 for an uncaught exception, whose traceback is printed).

Knobs (environment): LLMSIZE_FUZZ_SEED, LLMSIZE_FUZZ_CASES, LLMSIZE_FUZZ_ONLY (comma-separated generator
names, or case numbers), LLMSIZE_FUZZ_KEEP=1 (keep every case folder).
"""

from __future__ import annotations

import copy
import faulthandler
import importlib
import importlib.util
import io
import json
import math
import os
import random
import re
import resource
import select
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from stfiles import TINY, tiny_gpt_oss_folder, tiny_llama_folder, write_safetensors

import llmsize

ROOT = Path(llmsize.__file__).resolve().parent.parent  # the tree under test
HF_CONFIGS = ROOT / "tests" / "data" / "hf-configs"

SEED = int(os.environ.get("LLMSIZE_FUZZ_SEED", "20261201"))
CASES = int(os.environ.get("LLMSIZE_FUZZ_CASES", "2400"))
WORKERS = 2
TIME_LIMIT_S = 20  # per case: the faulthandler watchdog, then SIGKILL from the parent 10 s later
MEMORY_LIMIT = 3 * 2**30  # RLIMIT_AS per case (torch alone maps ~0.7 GiB)
SHOW = int(os.environ.get("LLMSIZE_FUZZ_SHOW", "20"))  # failures printed in full

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
HAVE_TORCH = importlib.util.find_spec("torch") is not None


# ============================================================================================ the case

@dataclass
class Case:
    index: int
    kind: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # added to (or, with value None, removed from) the base
    fsize: int | None = None  # RLIMIT_FSIZE in bytes (simulates a full disk for writes)
    torch: bool = False  # needs torch (measure)
    outputs: list[str] = field(default_factory=list)  # destinations the command may write (relative to folder)
    json_out: bool = False  # stdout must be strict JSON on success
    folder: Path | None = None
    before: dict = field(default_factory=dict)  # destination -> lstat signature before the run


def sig(p: Path):
    """What a path is, for 'unchanged' checks: None if absent, else (kind, inode, size, mtime)."""
    try:
        st = os.lstat(p)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        return ("error", e.errno)
    return (stat.S_IFMT(st.st_mode), st.st_ino, st.st_size, st.st_mtime_ns)


# ============================================================================================ pools

def _catalog_names():
    from llmsize.catalog.loader import Catalog

    cat = Catalog()
    gpus = [(g.id, list(g.aliases)) for g in cat.hardware.all()]
    models = [(m.id, list(m.aliases)) for m in cat.models.all()]
    return gpus, models, sorted({m.family for m in cat.models.all()}), [h.id for h in cat.hosts.all()]


GPUS, MODELS, FAMILIES, HOST_IDS = _catalog_names()
GPU_IDS = [g for g, _ in GPUS]
MODEL_IDS = [m for m, _ in MODELS]
GPU_NAMES = GPU_IDS + [a for _, al in GPUS for a in al]
MODEL_NAMES = MODEL_IDS + [a for _, al in MODELS for a in al]


def _formats():
    from llmsize.estimate.quant import FORMATS, KV_DTYPE_BYTES

    return list(FORMATS), list(KV_DTYPE_BYTES)


QUANTS, KV_DTYPES = _formats()
COMPUTE = ["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]
UNICODE_BITS = ["\u202e", "\u200b", "\u200d", "\u0301", "\ufeff", "😀", "ｈ２００", "İ", "ß", "Ω", "\u00a0",
                "\udcff", "\udc80", "\ud800", "\t", "\n", "\r", "\x1b[31m", "%s", "{0}", "$(x)", "`", "'", '"', "\\",
                "..", "/", "~", "*", "?", "[", "]", "\x7f", "\x01"]
GARBAGE = ["", " ", "-", "--", "-x", "--gpu", "=", "nan", "inf", "None", "null", "true", "0", "-1", "1e400",
           ".", "..", "/", "~", "~root", "~/", "a" * 300, "a/" * 200, "x" * 5000, "CON", "aux", "*", "?", "[a-z]",
           "%n%n", "{}", "[]", "{{x}}", "h200" * 100, "llama-3.1-8b/", "./", ".json", "x.json", "/nonexistent/x",
           "~nosuchuser-llmsize/x.gguf"]

BAD_FLOATS = ["nan", "NaN", "-nan", "inf", "-inf", "+inf", "Infinity", "-Infinity", "1e308", "-1e308", "1e309",
              "5e-324", "-5e-324", "1e-300", "0", "-0", "-0.0", "-1", "1.0000001", "65536.0001", "1e6", "1e6.1",
              "0x1p3", "1_0", "", " ", "abc", "1,5", "١", "１", str(10**400), "9" * 400, "-" + "9" * 400, "9" * 5000,
              "0.0" + "0" * 400 + "1"]
BAD_INTS = ["-1", "0", "-0", "1", "2", "3", "nan", "inf", "-inf", "1e3", "1.5", "1.0", "0x10", "0o7", "0b1", "1_000",
            " 7", "7 ", "+7", "", "abc", "١٢", "１２", str(2**31 - 1), str(2**31), str(2**32), str(2**32 - 1),
            str(2**63),
            str(2**64), str(-(2**63)), str(10**400), "9" * 400, "-" + "9" * 400, "9" * 5000, str(2**20), str(2**20 + 1),
            str(2**24), str(2**24 + 1), "1024", "1025", "65536", "65537", "262144", "262145", "100000", "100001",
            "10000", "10001", "255", "256", "257", "16", "17"]


def typo(rng: random.Random, s: str) -> str:
    s = list(s) or ["x"]
    for _ in range(rng.randint(1, 3)):
        op, i = rng.randrange(5), rng.randrange(len(s))
        if op == 0:
            del s[i]
        elif op == 1:
            s.insert(i, rng.choice("abcdefghijklmnopqrstuvwxyz0123456789-._ "))
        elif op == 2:
            s[i] = s[i].upper()
        elif op == 3 and i + 1 < len(s):
            s[i], s[i + 1] = s[i + 1], s[i]
        else:
            s.insert(i, rng.choice(UNICODE_BITS))
        s = s or ["x"]
    return "".join(s)


def unicode_junk(rng: random.Random, n: int | None = None) -> str:
    n = n or rng.randint(1, 12)
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.3:
            out.append(rng.choice(UNICODE_BITS))
        elif r < 0.6:
            out.append(chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x2fff), rng.randint(0x3000, 0xffff),
                                       rng.randint(0x10000, 0x10ffff)])))
        else:
            out.append(chr(rng.randint(0x61, 0x7a)))
    s = "".join(out).replace("\x00", "")
    return s if s else "x"


def pick_name(rng: random.Random, names: list[str]) -> str:
    """A catalog name: valid (id or alias, maybe re-spelled), typo, garbage, unicode, very long."""
    r = rng.random()
    base = rng.choice(names)
    if r < 0.35:
        return base
    if r < 0.45:
        return rng.choice([base.upper(), base.replace("-", " "), base.replace("-", ""), f" {base} ", base + "\t",
                           base.replace("-", "_"), base.title(), base.replace(".", "")])
    if r < 0.65:
        return typo(rng, base)
    if r < 0.8:
        return rng.choice(GARBAGE)
    if r < 0.93:
        return rng.choice([unicode_junk(rng), base + unicode_junk(rng, 2), unicode_junk(rng, 1) + base])
    raw = os.fsdecode(bytes(rng.randrange(1, 256) for _ in range(rng.randint(1, 20))))  # non-UTF-8 argv bytes
    return rng.choice([base * rng.randint(20, 400), "x" * rng.choice([255, 256, 4096, 4097, 100_000]), raw])


def num(rng: random.Random, kind: str, lo: float, hi: float) -> str:
    """A value for a numeric option: a bad or edge one, or a random one inside [lo, hi]."""
    r = rng.random()
    if r < 0.45:
        return rng.choice(BAD_INTS if kind == "int" else BAD_FLOATS + BAD_INTS[:20])
    if r < 0.6:
        return str(int(lo) if kind == "int" else lo) if rng.random() < 0.5 else str(int(hi) if kind == "int" else hi)
    if kind == "int":  # log-uniform over the range
        return str(max(int(lo), min(int(hi), int(2 ** rng.uniform(0, math.log2(max(hi, 2)))))))
    return repr(rng.choice([rng.uniform(lo, hi), lo + (hi - lo) * rng.random() ** 8, 10 ** rng.uniform(-320, 0) * hi]))


# ============================================================================================ files

def mkfifo(p: Path) -> Path:
    if os.path.lexists(p):  # drawn twice in one case
        p.unlink()
    os.mkfifo(p)
    return p


def mkdev(p: Path, minor: int) -> Path:
    """A char device node inside the case folder (1,3 null; 1,5 zero; 1,7 full); a FIFO when not root."""
    if os.path.lexists(p):  # drawn twice in one case
        p.unlink()
    try:
        os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except (PermissionError, OSError):
        os.mkfifo(p)
    return p


def special(rng: random.Random, d: Path, name: str) -> Path:
    """`name` inside d made into something that is not a readable regular file."""
    p = d / name
    if os.path.lexists(p):
        rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    k = rng.randrange(11)
    if k == 0:
        mkfifo(p)
    elif k in (1, 2, 3):
        mkdev(p, (3, 5, 7)[k - 1])
    elif k == 4:
        p.mkdir()
    elif k == 5:
        p.write_text('{"model_type": "llama"}')
        p.chmod(0)
    elif k == 6:
        os.symlink(mkdev(d / f".dev-{name}", rng.choice((3, 5, 7))), p)
    elif k == 7:
        os.symlink(d / "nowhere" / name, p)  # dangling
    elif k == 8:
        os.symlink(p.name, p)  # a loop
    elif k == 9:
        os.symlink(mkfifo(d / f".fifo-{name}"), p)
    else:
        p.write_bytes(b"")
    return p


def mutate_value(rng: random.Random, v):
    """A replacement for one JSON/YAML value: wrong type, edge number, nesting, or junk."""
    choices = [None, True, False, 0, -1, 1, 2, -(2**63), 2**63, 2**64, 10**30, 10**400, 1.5, -0.0, 1e308, -1e308,
               5e-324, float("nan"), float("inf"), float("-inf"), "", "x", "1024", "nan", "\udcff", "\ud800",
               [], {}, [1, 2], {"a": 1}, [[[[[]]]]], "a" * 10_000, unicode_junk(rng)]
    try:  # near the old value (int(nan), float(10**400) and such raise: then the generic ones only)
        if isinstance(v, bool):
            choices += [not v, 1, 0, "true"]
        elif isinstance(v, int):
            choices += [v * 2**40, -v, v + 1, v - 1, str(v), v * 1000, v // 3, True, float(v)]
        elif isinstance(v, float):
            choices += [-v, str(v), 0.0, v * 1e300, int(v)]
        elif isinstance(v, str):
            choices += [v.upper(), v + "x", typo(rng, v), 123] + ([v * 50] if len(v) < 1000 else [])
        elif isinstance(v, list):
            choices += [v[:-1], v[1:], [None] * len(v), list(reversed(v)), dict(enumerate(v))]
            choices += [v * 1000, v + v] if len(v) < 100 else []
        elif isinstance(v, dict):
            choices += [list(v), {k: None for k in v}]
    except (OverflowError, ValueError):
        pass
    return rng.choice(choices)


def paths_in(obj, prefix=()):
    """Every (path) to a value inside nested dicts/lists."""
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += paths_in(v, prefix + (k,))
    elif isinstance(obj, list) and len(obj) <= 64:
        for i, v in enumerate(obj):
            out += paths_in(v, prefix + (i,))
    return out


def mutate_tree(rng: random.Random, obj, n: int):
    """n random edits of a JSON/YAML tree: delete a key, replace a value, add a key, nest deeply."""
    obj = copy.deepcopy(obj)
    for _ in range(n):
        ps = [p for p in paths_in(obj) if p]
        if not ps:
            break
        p = rng.choice(ps)
        parent = obj
        for k in p[:-1]:
            parent = parent[k]
        key, op = p[-1], rng.random()
        if op < 0.3 and isinstance(parent, dict):
            del parent[key]
        elif op < 0.35 and isinstance(parent, dict):
            parent[rng.choice(["layer_types", "quantization_config", "text_config", "num_experts", "n_routed_experts",
                               "head_dim", "sliding_window", "rope_scaling", "kv_lora_rank", "__proto__", "id",
                               "aliases", unicode_junk(rng)])] = mutate_value(rng, 1)
        elif op < 0.38:  # deep nesting, written out by undeep() when the tree is serialized
            parent[key] = f"DEEP:{rng.choice([50, 500, 5000, 100_000])}"
        else:
            parent[key] = mutate_value(rng, parent[key])
    return obj


def undeep(text: str) -> str:
    """Each DEEP:n marker -> n nested lists (JSON and YAML flow syntax alike)."""
    return re.sub(r"""["']?DEEP:(\d+)["']?""", lambda m: "[" * int(m.group(1)) + "0" + "]" * int(m.group(1)), text)


def dump_json(rng: random.Random, obj) -> bytes:
    """JSON text (NaN/Infinity allowed, as Python writes them), sometimes damaged at the byte level."""
    try:
        text = json.dumps(obj, ensure_ascii=rng.random() < 0.5)
    except (ValueError, RecursionError):
        text = json.dumps(obj, ensure_ascii=True, check_circular=False)
    data = undeep(text).encode("utf-8", "surrogatepass")
    r = rng.random()
    if r < 0.06:
        data = data[:rng.randrange(len(data) + 1)]
    elif r < 0.09:
        data = b"\xef\xbb\xbf" + data  # BOM
    elif r < 0.12:
        i = rng.randrange(len(data) + 1)
        data = data[:i] + bytes([rng.choice([0xff, 0xfe, 0xc3, 0x80, 0x00])]) + data[i:]
    elif r < 0.14:
        data = b"[" * 100_000 + b"]" * 100_000
    elif r < 0.16:
        data = rng.choice([b"", b"null", b"[]", b"1", b'"x"', b"NaN", b"{", b'{"a": 1, "a": 2}',
                           b'{"x": ' + b"9" * 5000 + b"}", b'{"x": 1e999999}'])
    return data


def hf_config(rng: random.Random) -> tuple[dict, str]:
    files = sorted(p for p in HF_CONFIGS.glob("*.json") if not p.name.endswith(".hf_quant_config.json"))
    if rng.random() < 0.2:
        return dict(TINY), "tiny"
    p = rng.choice(files)
    return json.loads(p.read_text()), p.stem


def write_config_folder(rng: random.Random, d: Path, name="model") -> Path:
    """A model folder with a mutated real config.json (and sometimes a mutated hf_quant_config.json)."""
    folder = d / name
    folder.mkdir()
    raw, stem = hf_config(rng)
    raw = mutate_tree(rng, raw, rng.choice([0, 1, 1, 2, 3, 6]))
    (folder / "config.json").write_bytes(dump_json(rng, raw))
    hq = HF_CONFIGS / f"{stem}.hf_quant_config.json"
    if hq.exists() and rng.random() < 0.7:
        (folder / "hf_quant_config.json").write_bytes(
            dump_json(rng, mutate_tree(rng, json.loads(hq.read_text()), rng.choice([0, 1, 2]))))
    elif rng.random() < 0.1:
        special(rng, folder, "hf_quant_config.json")
    return folder


def tiny_checkpoint(rng: random.Random, d: Path) -> Path:
    folder = d / "ckpt"
    if rng.random() < 0.15:
        tiny_gpt_oss_folder(folder)
    else:
        layout = rng.choice(["bf16", "ct-nvfp4", "modelopt-nvfp4", "fp8", "gptq", "awq", "ct-int4", "bnb-nf4"])
        tiny_llama_folder(folder, layout, shards=rng.choice([1, 1, 2, 3]))
    return folder


def mutate_safetensors(rng: random.Random, f: Path) -> None:
    data = f.read_bytes()
    try:  # a file an earlier mutation already broke gets byte-level damage only
        (n,) = struct.unpack("<Q", data[:8])
        header, rest = data[8:8 + n], data[8 + n:]
        obj = json.loads(header)
        k = rng.randrange(12) if isinstance(obj, dict) and len(obj) > 1 else rng.randrange(4)
    except (struct.error, ValueError, RecursionError):  # RecursionError: an earlier mutation nested it deeply
        n, header, rest, k = 0, b"", b"", rng.choice([0, 3])
    if not data:
        return
    if k == 0:
        f.write_bytes(data[:rng.randrange(len(data))])  # truncated
    elif k == 1:
        f.write_bytes(struct.pack("<Q", rng.choice([0, 1, 7, n + 1, len(data), 2**31, 2**32, 2**63, 2**64 - 1,
                                                    100 * 2**20, 100 * 2**20 + 1])) + data[8:])
    elif k == 2:
        h = bytearray(header)
        for _ in range(rng.randint(1, 8)):
            h[rng.randrange(len(h))] = rng.randrange(256)
        f.write_bytes(data[:8] + bytes(h) + rest)
    elif k == 3:
        f.write_bytes(data[:4])
    else:
        name = rng.choice([x for x in obj if x != "__metadata__"] or list(obj))
        e = obj[name] if isinstance(obj[name], dict) else {}
        e.setdefault("shape", [1])
        if k == 4:
            e["shape"] = rng.choice([[-1], [2**62, 2**62], [1.5], ["4"], [None], 7, [], [0], [10**400],
                                     [True, 2], e["shape"] + [1], e["shape"][::-1], [2**64]])
        elif k == 5:
            e["data_offsets"] = rng.choice([[5, 1], [0], [0, 1, 2], [-8, 0], [0, 2**64], [0, 10**400], "0-8",
                                            [1.5, 2], [0, len(rest) + 1], None])
        elif k == 6:
            e["dtype"] = rng.choice(["F128", "bf16", "", None, 8, "F4", "F8_E8M0", "BOOL", "U64"])
        elif k == 7:
            obj[name] = rng.choice([None, [], "x", 1, {"dtype": "F32"}])
        elif k == 8:
            obj["__metadata__"] = rng.choice([None, [], "x", {"format": 1}, {"total_size": 10**400}])
        elif k == 9:
            obj = rng.choice([[], "x", None, 1, {}])
        elif k == 10:
            obj = mutate_tree(rng, obj, rng.randint(1, 4))
        else:
            obj[unicode_junk(rng)] = dict(e)
        blob = undeep(json.dumps(obj)).encode("utf-8", "surrogatepass")
        blob += b" " * (-len(blob) % 8)
        f.write_bytes(struct.pack("<Q", len(blob)) + blob + rest)


# ============================================================================================ generators
# Each takes (rng, d: the case folder) and returns (argv, extras) where extras may set env, fsize, outputs,
# json_out, torch. Paths in argv are relative to d (the child's cwd) or absolute inside d.

PLAN_NUM = [("--context", "int", 1, 2**31 - 1), ("--batch", "int", 1, 2**20), ("--prompt", "int", 1, 2**31 - 1),
            ("--gpu-util", "float", 0, 1), ("--overhead-gib", "float", 0, 65536), ("--tp", "int", 1, 1024),
            ("--pp", "int", 1, 1024), ("--nodes", "int", 1, 1024), ("--node-link-gb-s", "float", 0, 1e6),
            ("--max-model-len", "int", 1, 2**31 - 1), ("--max-num-batched-tokens", "int", 1, 2**31 - 1),
            ("--block-size", "int", 1, 65536), ("--non-torch-gib", "float", 0, 1024),
            ("--cudagraph-gib", "float", 0, 1024)]
COMPARE_NUM = [("--context", "int", 1, 2**31 - 1), ("--users", "int", 1, 2**24), ("--gpu-util", "float", 0, 1),
               ("--overhead-gib", "float", 0, 65536), ("--tp", "int", 1, 1024), ("--pp", "int", 1, 1024),
               ("--nodes", "int", 1, 1024), ("--node-link-gb-s", "float", 0, 1e6)]
ROOF_NUM = [("--context", "int", 1, 2**31 - 1), ("--max-batch", "int", 1, 2**20)]
KV_NUM = [("--users", "int", 1, 2**24), ("--max-context", "int", 2, 2**31 - 1)]
GPUS_NUM = [("--min-memory-gib", "float", 0, 1e6)]
MEASURE_NUM = [("--context", "int", 1, 262144), ("--tokens", "int", 1, 100_000), ("--batch", "int", 1, 256),
               ("--gpu-index", "int", 0, 255), ("--warmup", "int", 1, 10_000), ("--seed", "int", 0, 2**32 - 1)]


def valid_model(rng):
    return rng.choice(MODEL_NAMES)


def valid_gpu(rng):
    return rng.choice(GPU_NAMES)


def opt(rng, name, value):
    """--name value, or --name=value."""
    return [f"{name}={value}"] if rng.random() < 0.2 else [name, value]


def gen_ids(rng, d):
    cmd = rng.choice(["plan", "plan", "compare", "roofline", "kv", "show", "show", "models"])
    if cmd == "plan":
        return ["plan", pick_name(rng, MODEL_NAMES), "--gpu", pick_name(rng, GPU_NAMES)], {}
    if cmd == "compare":
        argv = ["compare", pick_name(rng, MODEL_NAMES)]
        if rng.random() < 0.6:
            argv += ["--gpus", ",".join(pick_name(rng, GPU_NAMES) for _ in range(rng.randint(0, 4)))
                     + rng.choice(["", ",", ",,", " , "])]
        return argv, {}
    if cmd == "roofline":
        argv = ["roofline", pick_name(rng, MODEL_NAMES)]
        for _ in range(rng.randint(0, 3)):
            argv += ["--gpu", pick_name(rng, GPU_NAMES)]
        return argv, {}
    if cmd == "kv":
        return ["kv", pick_name(rng, MODEL_NAMES)], {}
    if cmd == "models":
        return ["models", "--family", pick_name(rng, FAMILIES)], {}
    argv = ["show", pick_name(rng, GPU_NAMES + MODEL_NAMES)] + (["--json"] if rng.random() < 0.3 else [])
    return argv, {"json_out": "--json" in argv}


def gen_numbers(rng, d):
    cmd = rng.choice(["plan", "plan", "plan", "compare", "roofline", "kv", "gpus"])
    table = {"plan": PLAN_NUM, "compare": COMPARE_NUM, "roofline": ROOF_NUM, "kv": KV_NUM, "gpus": GPUS_NUM}[cmd]
    argv = {"plan": ["plan", valid_model(rng), "--gpu", valid_gpu(rng)], "compare": ["compare", valid_model(rng)],
            "roofline": ["roofline", valid_model(rng), "--gpu", valid_gpu(rng)], "kv": ["kv", valid_model(rng)],
            "gpus": ["gpus"]}[cmd]
    if cmd == "compare" and rng.random() < 0.7:  # every card is slow: usually a few
        argv += ["--gpus", ",".join(rng.sample(GPU_IDS, rng.randint(1, 4)))]
    if cmd == "plan" and rng.random() < 0.4:
        argv += ["--engine", rng.choice(["vllm", "sglang", "trtllm"])]
    for name, kind, lo, hi in rng.sample(table, min(len(table), rng.choice([1, 1, 2, 3, 5]))):
        argv += opt(rng, name, num(rng, kind, lo, hi))
    json_out = False
    if cmd in ("plan", "gpus") and rng.random() < 0.4:
        argv.append("--json")
        json_out = True
    if cmd == "compare" and rng.random() < 0.4:
        argv += ["--format", "json"]
        json_out = True
    return argv, {"json_out": json_out}


def gen_choices(rng, d):
    def val(pool):
        r = rng.random()
        v = rng.choice(pool)
        if r < 0.55:
            return v
        if r < 0.7:
            return rng.choice([v.upper(), f" {v} ", typo(rng, v)])
        return rng.choice(GARBAGE[:30] + [unicode_junk(rng)])

    cmd = rng.choice(["plan", "plan", "plan", "compare", "roofline", "kv", "gpus", "models", "formats"])
    json_out = False
    if cmd == "plan":
        argv = ["plan", valid_model(rng), "--gpu", valid_gpu(rng)]
        for o, pool in rng.sample([("--quant", QUANTS), ("--kv-dtype", KV_DTYPES), ("--compute", COMPUTE),
                                   ("--scope", ["linear", "experts", "mlp", "all"]), ("--emit", ["vllm", "sglang"]),
                                   ("--engine", ["vllm", "sglang", "trtllm"]),
                                   ("--kv-policy", ["streaming:4092+4", "budget:2048", "streaming:1+0", "budget:1",
                                                    "streaming:0+4", "budget:2048+4", "h2o:512"]),
                                   ("--spec", ["draft=llama-3.2-1b,k=4,accept=0.7", "mtp=1,accept=0.85",
                                               "draft=qwen3-0.6b,k=16,accept=1", "draft=tinyllama-1.1b,accept=0",
                                               "mtp=2", "k=4,accept=0.7", "draft=,accept=0.5"]),
                                   ("--engine-version", ["v1", "v0", "v1-0.20", "0.20.0", "0.8.0", "0.21.1",
                                                         "vllm==0.10.1", "0.0.0", "999.999.999", "0.7.99",
                                                         "1e400", "0." + "9" * 500, "v2", "-1"])],
                                  rng.randint(1, 4)):
            argv += opt(rng, o, val(pool))
        if rng.random() < 0.3:
            argv += rng.choice([["--json"], ["--estimate-only"], ["--tp", "2"], ["--nodes", "2"], ["--context", "1"],
                                ["--levers", "--json"], ["--no-flash-attn"], ["--no-flash-attn", "--flash-attn", "on"]])
            json_out = "--json" in argv
    elif cmd == "compare":
        argv = ["compare", valid_model(rng), "--gpus", ",".join(rng.sample(GPU_IDS, rng.randint(1, 3)))]
        for o, pool in rng.sample([("--quant", QUANTS), ("--kv-dtype", KV_DTYPES),
                                   ("--vendor", ["nvidia", "amd", "apple", "intel"]),
                                   ("--segment", ["consumer", "workstation", "datacenter", "edge", "desktop-soc"]),
                                   ("--sort", ["ceiling_tok_s", "aggregate_tok_s", "bandwidth_gb_s", "tok_s_per_w",
                                               "tok_s_per_kcurrency", "fits", "cards", "memory_gib",
                                               "max_context_tokens", "max_sequences", "ttft_s", "price", "gpu"]),
                                   ("--format", ["table", "json", "csv", "markdown"])], rng.randint(1, 4)):
            argv += opt(rng, o, val(pool))
        json_out = argv[-1] == "json"
    elif cmd == "roofline":
        argv = ["roofline", valid_model(rng), "--gpu", valid_gpu(rng), "--quant", val(QUANTS), "--kv-dtype",
                val(KV_DTYPES)]
    elif cmd == "kv":
        argv = ["kv", valid_model(rng), "--quant", val(QUANTS)]
    elif cmd == "gpus":
        argv = ["gpus", "--vendor", val(["nvidia", "amd", "apple", "intel"]), "--sort",
                val(["bandwidth", "memory", "year", "id"])]
        if rng.random() < 0.5:
            argv += ["--segment", val(["consumer", "workstation", "datacenter", "edge", "desktop-soc"])]
    elif cmd == "models":
        argv = ["models"]
        if rng.random() < 0.6:
            argv += ["--mixer", val(["full", "sliding", "mla", "ssm", "linear", "mamba", "gqa", "swa", "latent"])]
        if rng.random() < 0.5:
            argv += ["--family", val(FAMILIES)]
        if rng.random() < 0.4:
            argv.append(rng.choice(["--moe", "--dense"]))
    else:
        argv = ["formats"]
    if cmd in ("gpus", "models", "formats") and rng.random() < 0.5:
        argv.append("--json")
        json_out = True
    return argv, {"json_out": json_out}


def gen_paths(rng, d):
    """Inputs that are not regular files: as the model path, --catalog, --prices, --calibrate."""
    where = rng.choice(["model", "model", "folder-config", "catalog", "catalog-file", "prices", "calibrate",
                        "path-name", "import"])
    if where in ("model", "import"):
        p = special(rng, d, rng.choice(["config.json", "m.json", "model"]))
        arg = rng.choice([p.name, str(p), "./" + p.name])
    elif where == "folder-config":
        folder = d / "m"
        folder.mkdir()
        special(rng, folder, rng.choice(["config.json", "config.json", "hf_quant_config.json",
                                         "model.safetensors", "model.safetensors.index.json"]))
        if not (folder / "config.json").exists() and not os.path.islink(folder / "config.json"):
            (folder / "config.json").write_text(json.dumps(TINY))
        arg = "m"
    elif where == "path-name":
        arg = rng.choice(["~/cfg.json", "~", "~nobody/x.json", "cfg.json/", "./" + "a" * 300, "/" + "b/" * 3000,
                          "./" + "c" * 255 + ".json", ".", "..", "./\udcff.json", "\u202econfig.json",
                          "x" * 5000 + ".json", "./-", "/proc/self/fd/0"[:0] + "./nope/config.json",
                          "x" * 5000 + ".gguf", "~nosuchuser-llmsize/x.json", "~nosuchuser-llmsize/m.gguf",
                          "./" + "d" * 300 + "-00001-of-00002.gguf"])
        if arg.startswith("~/"):
            (d / "cfg.json").write_text(json.dumps(TINY))
    if where in ("model", "folder-config", "path-name", "import"):
        cmd = "import" if where == "import" else rng.choice(["plan", "compare", "roofline", "kv", "import"])
        argv = {"plan": ["plan", arg, "--gpu", valid_gpu(rng)], "compare": ["compare", arg, "--gpus", "h100,l4"],
                "roofline": ["roofline", arg, "--gpu", valid_gpu(rng)], "kv": ["kv", arg],
                "import": ["import", arg]}[cmd]
        return argv, {}
    if where == "catalog":
        c = d / "cat"
        c.mkdir()
        sub = rng.choice(["hardware", "models"])
        special(rng, c, sub)  # hardware/ or models/ itself special
        if rng.random() < 0.5:
            (c / ("models" if sub == "hardware" else "hardware")).mkdir()
            special(rng, c / ("models" if sub == "hardware" else "hardware"),
                    rng.choice(["h200-sxm.yaml", "x.yaml", "llama-3.1-8b.yaml"]))
        argv = rng.choice([["gpus"], ["models"], ["show", "h200"], ["plan", "llama-3.1-8b", "--gpu", "x"]])
        return _with_catalog(rng, argv, "cat")
    if where == "catalog-file":
        p = special(rng, d, "catdir")
        argv = rng.choice([["gpus"], ["models", "--json"], ["show", "l4"]])
        return _with_catalog(rng, argv, p.name)
    if where == "prices":
        p = special(rng, d, "prices.yaml")
        return ["compare", valid_model(rng), "--gpus", "h100,l4", "--prices", p.name], {}
    p = special(rng, d, "cal.json")
    return ["plan", valid_model(rng), "--gpu", valid_gpu(rng), "--calibrate", p.name], {}


def _with_catalog(rng, argv, path):
    """--catalog PATH, or $LLMSIZE_CATALOG."""
    if rng.random() < 0.25:
        return argv, {"env": {"LLMSIZE_CATALOG": path}}
    return argv + ["--catalog", path], {}


def gen_configs(rng, d):
    folder = write_config_folder(rng, d)
    arg = rng.choice(["model", "./model", str(folder), "model/config.json", str(folder / "config.json"), "model/"])
    cmd = rng.choice(["import", "import", "plan", "plan", "compare", "roofline", "kv"])
    gpu = valid_gpu(rng)
    argv = {"import": ["import", arg], "plan": ["plan", arg, "--gpu", gpu],
            "compare": ["compare", arg, "--gpus", ",".join(rng.sample(GPU_IDS, 2))],
            "roofline": ["roofline", arg, "--gpu", gpu], "kv": ["kv", arg]}[cmd]
    extras = {}
    if cmd == "plan" and rng.random() < 0.5:
        argv += rng.choice([["--json"], ["--engine", "vllm"], ["--emit", "vllm"], ["--emit", "sglang"],
                            ["--quant", rng.choice(QUANTS)], ["--kv-dtype", rng.choice(KV_DTYPES)], ["--tp", "8"],
                            ["--engine", "sglang", "--json"], ["--context", "1"], ["--context", str(2**31 - 1)]])
        extras["json_out"] = "--json" in argv
    if cmd == "import" and rng.random() < 0.3:
        argv += rng.choice([["--id", rng.choice(["my-model", "X", "a" * 300, "..", "-", unicode_junk(rng)])],
                            ["--estimate-only"]])
    return argv, extras


def gen_safetensors(rng, d):
    folder = tiny_checkpoint(rng, d)
    shards = sorted(folder.glob("*.safetensors"))
    for _ in range(rng.choice([0, 1, 1, 1, 2])):
        mutate_safetensors(rng, rng.choice(shards))
    r = rng.random()
    index = folder / "model.safetensors.index.json"
    if r < 0.12 and index.exists():
        index.write_bytes(dump_json(rng, mutate_tree(rng, json.loads(index.read_text()), rng.randint(1, 3))))
    elif r < 0.17 and index.exists():
        wm = json.loads(index.read_text())
        wm["weight_map"][next(iter(wm["weight_map"]))] = rng.choice(["../x.safetensors", "/etc/x", ".hidden",
                                                                     "nope.safetensors", "a\\b", "", "\udcff"])
        index.write_text(json.dumps(wm))
    elif r < 0.22:
        special(rng, folder, rng.choice(["model.safetensors", "model-00009-of-00009.safetensors", "x.safetensors"])
                if not (folder / "model.safetensors").exists() else "extra.safetensors")
    elif r < 0.26:
        shards[-1].unlink()  # a missing shard
    elif r < 0.30:
        write_safetensors(folder / "extra.safetensors", {"model.layers.0.mlp.up_proj.weight": ("BF16", (128, 64))})
    elif r < 0.34:
        cfg = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_bytes(dump_json(rng, mutate_tree(rng, cfg, rng.randint(1, 2))))
    cmd = rng.choice(["import", "import", "plan", "roofline", "kv", "compare"])
    argv = {"import": ["import", "ckpt"], "plan": ["plan", "ckpt", "--gpu", valid_gpu(rng)],
            "roofline": ["roofline", "ckpt", "--gpu", "h200"], "kv": ["kv", "ckpt"],
            "compare": ["compare", "ckpt", "--gpus", "h200,rtx5090"]}[cmd]
    if rng.random() < 0.35:
        argv.append("--estimate-only")
    return argv, {}


def yaml_text_mutation(rng, text: str) -> bytes:
    """Damage a catalog YAML file at the text level."""
    lines = text.splitlines()
    k = rng.randrange(12)
    if k == 0 and lines:  # a duplicate key
        i = rng.randrange(len(lines))
        lines.insert(i, lines[rng.randrange(len(lines))])
    elif k == 1:
        return text.encode() + b"\nnotes: caf\xe9\n"
    elif k == 2:
        bomb = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
        for j in range(1, 9):
            bomb.append(f"{chr(97 + j)}: &{chr(97 + j)} [*{chr(96 + j)},*{chr(96 + j)},*{chr(96 + j)},"
                        f"*{chr(96 + j)},*{chr(96 + j)},*{chr(96 + j)},*{chr(96 + j)},*{chr(96 + j)},*{chr(96 + j)}]")
        return ("\n".join(bomb) + "\n" + text).encode() if rng.random() < 0.5 else (text + "\nsources: *i\n").encode()
    elif k == 3:
        return (text + "\nnotes: " + "[" * rng.choice([100, 1000, 50_000]) + "]" * 10 + "\n").encode()
    elif k == 4:
        return text.encode()[:rng.randrange(len(text) + 1)]
    elif k == 5:
        return ("\t" + text).encode()
    elif k == 6:
        return (text + "\n---\nid: other\n").encode()
    elif k == 7:
        return rng.choice([b"", b"~", b"[]", b"- 1\n- 2\n", b"x", b"!!python/object/apply:os.system ['true']",
                           b"id: !!binary aGVsbG8=\n", b"%YAML 9.9\n---\nid: x\n", b"a" * (2 * 2**20)])
    elif k == 8:  # numbers -> NaN, infinities, negative, huge, hex, YAML 1.1 oddities
        odd = ['.nan', '.inf', '-.inf', '-1', '0', '1e308', '1e400', str(10**400), '0x10', '1_000', 'yes', '~']
        return re.sub(r"(?m)^(\w+): (\d+(\.\d+)?)$", lambda m: f"{m.group(1)}: {rng.choice(odd)}", text,
                      count=rng.randint(1, 3)).encode()
    elif k == 9:
        return text.replace("\n", "\r\n").encode()
    elif k == 10:
        return ("<<: {id: zzz}\n" + text).encode()
    return "\n".join(lines).encode()


def yaml_data_mutation(rng, data) -> bytes:
    data = mutate_tree(rng, data, rng.randint(1, 3))
    try:
        return undeep(yaml.safe_dump(data, allow_unicode=rng.random() < 0.5)).encode("utf-8", "surrogatepass")
    except Exception:  # a value safe_dump cannot write: JSON is YAML too
        return undeep(json.dumps(data)).encode("utf-8", "surrogatepass")


def gen_catalog(rng, d):
    c = d / "cat"
    (c / "hardware").mkdir(parents=True)
    (c / "models").mkdir()
    for kind, ids in (("hardware", GPU_IDS), ("models", MODEL_IDS)):
        for stem in rng.sample(ids, rng.randint(0, 3)):
            text = (ROOT / kind / f"{stem}.yaml").read_text()
            r = rng.random()
            if r < 0.45:
                blob = yaml_data_mutation(rng, yaml.safe_load(text))
            elif r < 0.85:
                blob = yaml_text_mutation(rng, text)
            else:
                blob = text.encode()
            name = stem if rng.random() < 0.85 else rng.choice(["zz-" + stem, stem.upper(), stem + ".bak",
                                                                  "a" * 250, "\udcff"])
            try:
                (c / kind / f"{name}.yaml").write_bytes(blob)
            except (OSError, UnicodeEncodeError):
                (c / kind / f"x{rng.randrange(99)}.yaml").write_bytes(blob)
        if rng.random() < 0.15:  # a new entry whose alias is another card's id (or its own id twice)
            base = yaml.safe_load((ROOT / kind / f"{rng.choice(ids)}.yaml").read_text())
            base["id"] = "zz-new"
            base["aliases"] = rng.choice([[rng.choice(ids)], ["zz-new"], ["x", "x"], [""], [" "], ["ZZ New"]])
            (c / kind / "zz-new.yaml").write_text(yaml.safe_dump(base))
        if rng.random() < 0.08:
            special(rng, c / kind, rng.choice(ids) + ".yaml")
    m, g = rng.choice(MODEL_IDS + ["zz-new"]), rng.choice(GPU_IDS + ["zz-new"])
    argv = rng.choice([["gpus"], ["gpus", "--json"], ["models"], ["models", "--json"], ["show", g], ["show", m],
                       ["show", m, "--json"], ["plan", m, "--gpu", g], ["plan", m, "--gpu", g, "--json"],
                       ["compare", m, "--gpus", f"{g},h100"], ["roofline", m, "--gpu", g], ["kv", m],
                       ["models", "--moe"], ["gpus", "--sort", "year"]])
    json_out = "--json" in argv
    if rng.random() < 0.2:
        return argv, {"env": {"LLMSIZE_CATALOG": rng.choice(["cat", str(c), f"cat{os.pathsep}nope", os.pathsep,
                                                             f"{c}{os.pathsep}{c}"])}, "json_out": json_out}
    argv += ["--catalog", rng.choice(["cat", str(c), "cat/"])]
    if rng.random() < 0.1:
        argv += ["--catalog", rng.choice(["cat", "nope", ""])]
    return argv, {"json_out": json_out}


def gen_prices(rng, d):
    cards = rng.sample(GPU_NAMES, rng.randint(1, 4))
    data = {"currency": "EUR", "prices": {c: rng.choice([1000, 2300.5, 27000]) for c in cards}}
    r = rng.random()
    if r < 0.5:
        blob = yaml_data_mutation(rng, data)
    elif r < 0.75:
        blob = yaml_text_mutation(rng, yaml.safe_dump(data))
    elif r < 0.85:
        v = rng.choice([".nan", ".inf", "-.inf", "-1", "0", "1e308", "1e400", str(10**400), "true", "null", "'5'",
                        "[1]", "{a: 1}", "0x10", "1_000", "5e-324"])
        blob = f"currency: EUR\nprices:\n  {cards[0]}: {v}\n".encode()
    else:
        blob = yaml.safe_dump(data).encode()
    (d / "prices.yaml").write_bytes(blob)
    ids = ",".join(dict.fromkeys(c for c in rng.sample(GPU_IDS, 2) + cards))
    argv = ["compare", valid_model(rng), "--gpus", ids if rng.random() < 0.8 else ids.split(",")[0],
            "--prices", "prices.yaml"]
    argv += rng.choice([[], ["--sort", "tok_s_per_kcurrency"], ["--sort", "price"], ["--format", "csv"],
                        ["--format", "json"], ["--format", "markdown"], ["--users", "64"]])
    return argv, {"json_out": "json" in argv}


CALIBRATE = {"command": "measure", "gpu": {"name": "NVIDIA H200", "catalog_id": "h200-sxm"},
             "model": {"name": "Gemma 4 12B"},
             "run": {"device": "cuda", "quant": "nvfp4", "context_tokens": 4096, "batch": 1},
             "decode": {"tok_s": 123.4},
             "achieved": {"fraction_of_datasheet": 0.7, "fraction_of_theoretical": 0.68}}


def gen_calibrate(rng, d):
    data = json.loads(json.dumps(CALIBRATE))
    r = rng.random()
    if r < 0.6:
        data = mutate_tree(rng, data, rng.randint(1, 3))
    elif r < 0.8:
        key = rng.choice(["tok_s"])
        data["decode"][key] = rng.choice([float("nan"), float("inf"), -1, 0, 1.5, 1.5000001, 1e-300, 5e-324,
                                             True, "0.7", None, 10**400, [0.7]])
    (d / "cal.json").write_bytes(dump_json(rng, data))
    argv = ["plan", valid_model(rng), "--gpu", valid_gpu(rng), "--calibrate", "cal.json"]
    argv += rng.choice([[], ["--json"], ["--engine", "vllm"], ["--engine", "trtllm", "--json"]])
    return argv, {"json_out": "--json" in argv}


def destination(rng, d, suffix: str) -> tuple[str, list[str], int | None]:
    """(-o value, extra args, RLIMIT_FSIZE): a destination of every awkward kind."""
    k = rng.randrange(16)
    name = "out" + suffix
    if k == 0:
        return name, [], None  # a new file: must be written
    if k == 1:
        (d / name).write_text("old")
        return name, rng.choice([[], ["--force"]]), None
    if k == 2:
        return str(special(rng, d, name)), rng.choice([[], ["--force"]]), None
    if k == 3:
        return "nope/" + name, [], None
    if k == 4:
        return "a" * 300 + suffix, [], None
    if k == 5:
        (d / "f").write_text("x")
        return "f/" + name, [], None
    if k == 6:
        return rng.choice([name + "/", ".", "..", "", "/", suffix, "./" + suffix]), [], None
    if k == 7:
        return name, rng.choice([[], ["--force"]]), rng.choice([1, 100, 4096])  # the disk fills up
    if k == 8:
        if not os.path.lexists(d / name):
            os.symlink("target" + suffix, d / name)
        if rng.random() < 0.5:
            (d / ("target" + suffix)).write_text("t")
        return name, rng.choice([[], ["--force"]]), None
    if k == 9:
        sub = d / "ro"
        sub.mkdir(exist_ok=True)  # a case may draw two destinations
        sub.chmod(0o555)
        return "ro/" + name, [], None
    if k == 10:
        return rng.choice(["out.txt", "out", "out.YAML", "out.Png", "out.yaml.bak", "out.svg.png", ".yaml", "o.jpg",
                           "\udcff" + suffix, "\u202e" + suffix, " " + suffix, "-o" + suffix]), [], None
    if k == 11:
        return str(d / ("abs" + suffix)), [], None
    if k == 12:
        return "~/home" + suffix, [], None
    if k == 13:
        (d / name).write_text("old")
        (d / name).chmod(0o444)
        return name, ["--force"], None
    if k == 14:
        if not os.path.lexists(d / "full"):
            mkdev(d / "full", 7)
        return "full", ["--force"], None
    return "x" * 255 + suffix, [], None


def gen_outputs(rng, d):
    cmd = rng.choice(["import", "import", "import", "import", "roofline", "kv", "measure"])
    if cmd == "import":
        (d / "cfg.json").write_text(json.dumps(TINY if rng.random() < 0.5 else hf_config(rng)[0]))
        dest, extra, fsize = destination(rng, d, ".yaml")
        argv = ["import", "cfg.json", "-o", dest] + extra
        if rng.random() < 0.2:
            argv += ["--id", rng.choice(["out", "other", "OUT", Path(dest).stem])]
        return argv, {"outputs": [dest], "fsize": fsize}
    suffix = rng.choice([".png", ".svg"])
    dest, extra, fsize = destination(rng, d, suffix)
    if cmd == "roofline":
        return ["roofline", rng.choice(["llama-3.1-8b", "qwen3-8b"]), "--gpu", "h200", "-o", dest], \
            {"outputs": [dest], "fsize": fsize}
    if cmd == "kv":
        return ["kv", rng.choice(["llama-3.1-8b", "gemma-4-12b", "deepseek-v3"]), "-o", dest], \
            {"outputs": [dest], "fsize": fsize}
    dest, extra, fsize = destination(rng, d, ".json")
    return ["measure", "--device", "cpu", "--tokens", "2", "--context", "8", "--warmup", "1", "--no-probe",
            "--save", dest] + extra + rng.choice([[], ["--json"]]), \
        {"outputs": [dest], "fsize": fsize, "torch": True, "json_out": False}


GEMMA4_TINY_CONFIG = {
    "model_type": "gemma4_unified", "architectures": ["Gemma4UnifiedForConditionalGeneration"],
    "text_config": {"model_type": "gemma4_unified_text", "vocab_size": 512, "hidden_size": 128,
                    "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
                    "num_global_key_value_heads": 1, "global_head_dim": 64, "sliding_window": 8,
                    "rms_norm_eps": 1e-6, "final_logit_softcapping": 30.0, "attention_k_eq_v": True,
                    "tie_word_embeddings": True,
                    "layer_types": ["sliding_attention", "sliding_attention", "full_attention"] * 2,
                    "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1e6},
                                        "sliding_attention": {"rope_theta": 1e4}}}}


def gen_measure(rng, d):
    base = ["measure", "--device", "cpu", "--tokens", "2", "--context", "8", "--warmup", "1", "--no-probe"]
    r = rng.random()
    extras = {"torch": True}
    if r < 0.5:  # one bad value (these are refused before any work)
        name, kind, lo, hi = rng.choice(MEASURE_NUM)
        v = rng.choice(BAD_INTS)
        cheap = {"--context": 64, "--tokens": 4, "--batch": 4, "--warmup": 2}.get(name, hi)
        try:
            n = int(v) if len(v) < 40 else None
        except ValueError:
            n = None
        if n is not None and cheap < n <= hi:
            v = str(hi + 1)  # valid but too slow to run here: make it invalid instead
        argv = base + opt(rng, name, v)
    elif r < 0.65:  # string options
        argv = base + rng.choice([["--quant", rng.choice(["nvfp4", "bf16", "fp8", "BF16", "", "x"])],
                                  ["--gemv", rng.choice(["auto", "words", "triton", "dot", "pairs", "x", "", "AUTO"])],
                                  ["--fused"], ["--no-fused"], ["--device", rng.choice(["gpu", "CPU",
                                                                                                       "", "cpu "])]])
    elif r < 0.75:  # tiny valid runs
        argv = base + rng.choice([[], ["--json"], ["--quant", "bf16"], ["--batch", "2"], ["--seed", str(2**32 - 1)],
                                  ["--context", "1"], ["--tokens", "1"]])
        extras["json_out"] = "--json" in argv
    else:  # --checkpoint: a mutated Gemma 4 config, a special config, or no config
        ck = d / "ckpt"
        ck.mkdir()
        k = rng.random()
        if k < 0.7:
            cfg = mutate_tree(rng, GEMMA4_TINY_CONFIG, rng.choice([0, 1, 1, 2, 3]))
            (ck / "config.json").write_bytes(dump_json(rng, cfg))
            if rng.random() < 0.3:
                (ck / "hf_quant_config.json").write_bytes(dump_json(rng, rng.choice(
                    [{"quantization": {"quant_algo": "NVFP4"}}, {"quantization": None}, [], {"quantization": "x"}])))
            if rng.random() < 0.5:
                (ck / "model.safetensors").write_bytes(rng.choice([b"", b"\x08" + b"\0" * 7 + b"{}      ",
                                                                   os.urandom(64)]))
        elif k < 0.9:  # the loader's own reads: a FIFO must not hang it, a device must not fill memory
            r2 = rng.random()
            mkfifo(ck / "config.json") if r2 < 0.3 else mkdev(ck / "config.json", 5) if r2 < 0.5 else \
                special(rng, ck, "config.json")
        arg = rng.choice(["ckpt", str(ck), "ckpt/config.json", "nope"])
        argv = base + ["--checkpoint", arg] + rng.choice([[], ["--quant", "bf16"]])
    return argv, extras


FLEET_NUM = [("--users", "int", 1, 2**24), ("--rate", "float", 0, 1e9), ("--tok-s-per-user", "float", 0, 1e4),
             ("--shared-prefix", "float", 0, 1), ("--node-link-gb-s", "float", 0, 1e6)]
FIT_NUM = [("--context", "int", 1, 2**31 - 1), ("--host-bandwidth-gb-s", "float", 0.1, 1e5),
           ("--host-ram-gib", "float", 0.1, 1e5), ("--wired-limit-gb", "float", 0.1, 1e5),
           ("--memory-gb", "float", 0.1, 1e5), ("--min-tok-s", "float", 0.01, 1e5), ("--top", "int", 1, 10_000)]
RUNTIMES = ["vllm", "sglang", "trtllm", "llamacpp", "mlx", "gpt-fast", "ollama", "lmstudio"]
LENGTHS = ["3000", "500", "1", "3000:p95=12000", "500:p95=2000", "100:p95=100", "1:p95=2", "lengths.csv"]
BAD_LENGTHS = ["3000:p95=1000", "0", "-5", "3000:p95=", ":p95=4", "3000:p99=4000", "3000:p95=1e400", "1e3",
               "3000:p95=2000:p95=9"]
DURATIONS = ["2s", "500ms", "33ms", "10s", "100ms", "5ms"]
BAD_DURATIONS = ["1us", "0s", "-1s", "nan", "infs", "1e400s", "2", "2 s", "2h", "86401s", "1e-300s"]
SPECS = ["draft=llama-3.2-1b,k=4,accept=0.7", "mtp=1", "mtp=2,accept=0.6", "draft=qwen3-0.6b,k=16,accept=1",
         "draft=llama-3.2-1b,k=1,accept=0"]
HOST_MEMORY = ["DDR5-6000x2", "DDR4-3200x8", "LPDDR5X-8000x4"]
BAD_HOST_MEMORY = ["DDR5-0x2", "DDR5-6000x0", "DDR9-1x1", "DDR5-6000", "x2"]


def lengths_csv(rng, d: Path) -> None:
    """A CSV of request lengths for --isl / --osl lengths.csv: valid, hostile, or a special file."""
    r = rng.random()
    p = d / "lengths.csv"
    if r < 0.5:
        rows = [str(rng.choice([1, 2, 300, 3000, 12000, rng.randint(1, 20000)])) for _ in range(rng.randint(1, 60))]
        p.write_text(rng.choice(["", "isl\n", "osl\n", "isl,osl\n"]) + "\n".join(rows) + "\n")
    elif r < 0.85:
        text = "\n".join(rng.choice(["0", "-5", "nan", "inf", "1e400", "3.5", "x", "", " ", "1,2,3", "isl", "osl",
                                     "9" * 400, str(2**24 + 1), unicode_junk(rng)]) for _ in range(rng.randint(0, 8)))
        p.write_bytes(text.encode("utf-8", "surrogatepass"))  # (lone surrogates: bytes that are not UTF-8)
    elif r < 0.93:
        p.write_bytes(os.urandom(rng.randint(0, 256)))
    else:
        special(rng, d, "lengths.csv")


def gen_serving(rng, d):
    """fleet (on one to three cards: the whole catalog takes seconds) and fit: half the cases with every value valid
    and the options combined as they may be (what they reach is the estimator), half with near and garbage
    values."""
    hostile = rng.random() < 0.5

    def val(pool, bad=()):
        v = rng.choice(pool)
        r = rng.random() if hostile else 0.0
        if r < 0.5:
            return v
        return rng.choice(bad) if bad and r < 0.7 else typo(rng, v) if r < 0.85 else \
            rng.choice(GARBAGE[:30] + [unicode_junk(rng)])

    def number(kind, lo, hi):
        if hostile:
            return num(rng, kind, lo, hi)
        x = lo + (hi - lo) * rng.random() ** 6  # mostly small values, as people give them
        return str(max(1, round(x))) if kind == "int" else repr(min(hi, max(x, lo, 0.01)))

    if rng.random() < 0.12:  # (fit sizes every catalog model: a second or two where it runs)
        return _fit_case(rng, val, number)
    argv = ["fleet", valid_model(rng) if not hostile or rng.random() < 0.8 else pick_name(rng, MODEL_NAMES),
            "--gpus", ",".join(rng.sample(GPU_IDS, rng.randint(1, 3)))]
    load = rng.choice(["users", "rate"] + ["neither", "both"] * hostile)
    if load in ("users", "both"):
        argv += ["--users", number("int", 1, 2000)]
    if load in ("rate", "both"):
        argv += ["--rate", rng.choice(["0.5", "20", "1e6", number("float", 0.01, 1e4)])]
    pools = [("--isl", LENGTHS, BAD_LENGTHS), ("--osl", LENGTHS, BAD_LENGTHS), ("--ttft", DURATIONS, BAD_DURATIONS),
             ("--runtime", RUNTIMES, ()), ("--quant", QUANTS, ()), ("--kv-dtype", KV_DTYPES, ()),
             ("--spec", SPECS, ("k=4", "draft=,accept=0.5", "mtp=0", "draft=nope,k=4"))]
    pools.append(rng.choice([("--tpot", DURATIONS, BAD_DURATIONS), ("--tok-s-per-user", ["10", "30", "100"], ("0",))]))
    for o, pool, bad in rng.sample(pools, rng.randint(0, 4)):
        argv += opt(rng, o, val(pool, bad))
    nums = [x for x in FLEET_NUM if hostile or x[0] in ("--shared-prefix", "--node-link-gb-s")]
    for name, kind, lo, hi in rng.sample(nums, rng.choice([0, 0, 1, 2])):
        argv += opt(rng, name, number(kind, lo, hi))
    if "lengths.csv" in argv or any(a.endswith("=lengths.csv") for a in argv):
        lengths_csv(rng, d)
    json_out = False
    view = rng.random()
    if view < 0.15:  # the launch lines of the best row (alone: no other view)
        argv += ["--emit", val(["vllm", "sglang"])]
        if rng.random() < 0.5:
            argv += ["--mode", val(["aggregated", "disaggregated"])]
    else:
        fmt = rng.choice(["json", "json", "table", None] + ["csv", "markdown", "html"] * (view > 0.3))
        argv += ["--format", fmt] if fmt else []
        json_out = fmt == "json"
        if fmt in ("json", "table", None) and rng.random() < 0.1:
            argv.append("--simulate")
    if hostile and rng.random() < 0.2:  # the combinations fleet refuses
        argv += rng.choice([["--mode", "aggregated"], ["--emit", "vllm", "--json"], ["--simulate", "--format", "csv"],
                            ["--pareto"], ["--users", "8"]])
    return argv, {"json_out": json_out and "--emit" not in argv}


def _fit_case(rng, val, number):
    argv = ["fit", "--gpu", valid_gpu(rng) if rng.random() < 0.9 else pick_name(rng, GPU_NAMES)]
    for o, pool, bad in rng.sample([("--runtime", RUNTIMES, ()), ("--host-memory", HOST_IDS + HOST_MEMORY,
                                                                   BAD_HOST_MEMORY),
                                    ("--sort", ["tok_s", "size"], ()), ("--mmproj", ["f16", "q8_0"], ("mmproj.gguf",))],
                                   rng.randint(0, 2)):
        argv += opt(rng, o, val(pool, bad))
    for name, kind, lo, hi in rng.sample(FIT_NUM, rng.choice([0, 1, 1, 2])):
        argv += opt(rng, name, number(kind, lo, hi))
    if rng.random() < 0.3:
        argv.append("--all-formats")
    json_out = rng.random() < 0.4
    return argv + ["--json"] * json_out, {"json_out": json_out}


def gen_cli(rng, d):
    cmds = ["plan", "compare", "roofline", "kv", "gpus", "models", "show", "formats", "import", "measure"]
    k = rng.randrange(12)
    extras: dict = {}
    if k == 0:
        argv = rng.choice([[], ["--version"], ["-h"], ["--help"], ["--version", "plan"], ["plan"], ["compare"],
                           ["roofline"], ["kv"], ["show"], ["import"], ["nope"], ["PLAN"], ["--"], ["-"], [""]])
    elif k == 1:
        argv = [rng.choice(cmds), rng.choice(["-h", "--help"])]
    elif k == 2:  # (not measure: `measure --json` alone would run the full decode on a GPU)
        argv = [rng.choice(cmds[:-1]), rng.choice(["--nope", "-z", "--gpu", "--catalog", "--json=1", "--json", "-o",
                                              "--quant", "--context", "--hub", "--tp", "--", "--moe=yes"])]
    elif k == 3:
        argv = ["plan", "llama-3.1-8b", "--gpu", "h200", rng.choice(["--gpu", "--context", "-o", "--tp", "--nope"])]
    elif k == 4:
        argv = ["plan", "llama-3.1-8b", "llama-3-8b", "--gpu", "h200"]
    elif k == 5:  # --hub: refused, or a connection refused by a closed local port (never the network)
        cmd = rng.choice(["plan", "import", "compare", "kv", "roofline"])
        hub = rng.choice(["Qwen/Qwen3-8B", "Qwen/Qwen3-8B@main", "a/b@" + "x" * 300, "a", "a/b/c", "../x", "/x",
                          "a/..", "", "@", "a/b@", unicode_junk(rng), "x" * 5000, "-/-", "org/name@\udcff"])
        argv = {"plan": ["plan", "--hub", hub, "--gpu", "h200"], "import": ["import", "--hub", hub],
                "compare": ["compare", "--hub", hub, "--gpus", "h100"], "kv": ["kv", "--hub", hub],
                "roofline": ["roofline", "--hub", hub, "--gpu", "l4"]}[cmd]
        if rng.random() < 0.2:
            argv.insert(1, "llama-3.1-8b")  # both a model and --hub
    elif k == 6:  # the terminal width is an input too
        argv = rng.choice([["plan", valid_model(rng), "--gpu", valid_gpu(rng)], ["gpus"], ["models"],
                           ["kv", valid_model(rng)], ["roofline", valid_model(rng), "--gpu", valid_gpu(rng)],
                           ["formats"], ["show", valid_gpu(rng)], ["compare", valid_model(rng), "--gpus", "h100,l4"],
                           ["plan", valid_model(rng), "--gpu", valid_gpu(rng), "--engine", "vllm"]])
        extras["env"] = {"COLUMNS": rng.choice(["0", "1", "2", "5", "10", "-5", "abc", "100000", "", "1e3"]),
                         "LINES": rng.choice(["0", "1", "-1", "x", "24"])}
    elif k == 7:
        argv = ["show", rng.choice(GPU_NAMES + MODEL_NAMES), rng.choice(["extra", "--json", "--catalog"])]
    elif k == 8:
        argv = [rng.choice(["gpus", "models", "formats"]), rng.choice(["--json", "--json", "--json --json", "x"])]
        argv = argv[:1] + argv[1].split()
        extras["json_out"] = True
    elif k == 9:
        argv = ["plan", "--gpu", "h200", rng.choice(["--", "-"]), rng.choice(["llama-3.1-8b", "-x", "--json"])]
    elif k == 10:
        argv = rng.choice([["gpus"], ["models"], ["plan", "llama-3.1-8b", "--gpu", "h200"]])
        extras["env"] = {"LLMSIZE_CATALOG": rng.choice(["", os.pathsep, "nope", "/", "~", "\udcff", "a" * 5000,
                                                        ".", f".{os.pathsep}."])}
    else:
        argv = ["plan", valid_model(rng), "--gpu", valid_gpu(rng), "--tp", "2", "--pp", rng.choice(["2", "3"]),
                "--nodes", rng.choice(["2", "3"])]
    return argv, extras


GENERATORS = {  # name -> (generator, weight)
    "ids": (gen_ids, 14), "numbers": (gen_numbers, 16), "choices": (gen_choices, 10), "paths": (gen_paths, 9),
    "configs": (gen_configs, 14), "safetensors": (gen_safetensors, 9), "catalog": (gen_catalog, 10),
    "prices": (gen_prices, 4), "calibrate": (gen_calibrate, 3), "outputs": (gen_outputs, 5),
    "measure": (gen_measure, 3), "cli": (gen_cli, 5), "serving": (gen_serving, 6),
}


def _draw_kind(rng: random.Random) -> str:
    names = list(GENERATORS)
    only = [x for x in os.environ.get("LLMSIZE_FUZZ_ONLY", "").split(",") if x in GENERATORS]
    return rng.choices(only or names, weights=[GENERATORS[n][1] for n in (only or names)])[0]


def case_kind(index: int) -> str:
    """The generator case `index` is drawn from (make_case's first draw), without writing its files."""
    return _draw_kind(random.Random(f"{SEED}:{index}"))


def make_case(index: int, base: Path) -> Case:
    """Case `index`, its files written into a fresh folder under `base` (deterministic given SEED)."""
    rng = random.Random(f"{SEED}:{index}")
    kind = _draw_kind(rng)
    d = base / f"c{index:05d}"
    d.mkdir()
    argv, extras = GENERATORS[kind][0](rng, d)
    case = Case(index, kind, [a for a in argv], folder=d, **{k: v for k, v in extras.items() if k != "env"})
    case.env = extras.get("env", {})
    if "--emit" in argv or any(a.startswith("--emit=") for a in argv):
        case.json_out = False  # --emit prints the serving command, whatever --json says
    case.argv = [a.replace("\x00", "") for a in case.argv]  # no NUL can come from a real command line
    case.before = {o: sig(_dest(case, o)) for o in case.outputs}
    return case


# ============================================================================================ the runner

def _preimport(torch_needed: bool) -> None:
    """What the commands import lazily, imported once in the parent so each forked child does not pay it."""
    mods = ["llmsize.cli", "llmsize.catalog.loader", "llmsize.catalog.prices", "llmsize.estimate.plan",
            "llmsize.estimate.compare", "llmsize.estimate.engines", "llmsize.estimate.expected",
            "llmsize.estimate.speed", "llmsize.importer.calibration",
            "llmsize.estimate.charts", "llmsize.render.plan_report", "llmsize.render.plan_json",
            "llmsize.render.compare_table", "llmsize.render.listing", "llmsize.render.charts",
            "llmsize.render.engine_report", "llmsize.render.emit", "llmsize.render.text",
            "llmsize.importer.source", "llmsize.importer.catalog_entry", "llmsize.importer.safetensors_header",
            "llmsize.importer.exact", "llmsize.importer.hub", "rich.console", "rich.table", "rich.progress",
            "huggingface_hub", "matplotlib", "matplotlib.pyplot"]
    if torch_needed:
        mods += ["torch", "llmsize.measure.run", "llmsize.measure.gemma4", "llmsize.measure.checkpoint",
                 "llmsize.render.measure_report", "safetensors"]
    if "matplotlib" in sys.modules or importlib.util.find_spec("matplotlib"):
        import matplotlib

        matplotlib.use("Agg")
    for m in mods:
        try:
            importlib.import_module(m)
        except Exception:  # an extra that is not installed: the child meets it as a user would
            pass
    # built once here, inherited by every fork: each command's click options (cli.click_command) and the shipped
    # catalog's entries (loader.load_entry: pydantic's validators and each file's parse). A child still reads and
    # checks every file it loads; only the same text under the same file name is not parsed again, so a mutated
    # copy is parsed and validated afresh.
    from llmsize import cli
    from llmsize.catalog.loader import Catalog

    try:
        for name in [None, *cli.command_names()]:
            cli.click_command(name)
        cat = Catalog()
        for shelf in (cat.hardware, cat.models, cat.runtimes, cat.hosts):
            shelf.all()
    except Exception:  # a speed-up only: the children build and load these themselves either way
        pass
    # and one valid run of the common commands, output discarded: typer's type adapter per option, rich's and the
    # estimators' first-use set-up. Caches only: a child's own input is parsed, validated and computed afresh.
    _quietly([["plan", "llama-3.1-8b", "--gpu", "h100-sxm"], ["plan", "qwen3-30b-a3b", "--gpu", "rtx4090", "--quant",
              "gguf-q4_k_m", "--json"], ["kv", "llama-3.1-8b"], ["roofline", "llama-3.1-8b", "--gpu", "h100-sxm"],
              ["gpus"], ["models"], ["show", "h200"], ["plan", "--help"]])


def _quietly(argvs: list[list[str]]) -> None:
    """Run llmsize commands in this process with stdout and stderr sent to /dev/null (at the descriptors: the
    batch's own stdout carries its result)."""
    from llmsize.cli import main

    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        for argv in argvs:
            try:
                main(argv)
            except (SystemExit, Exception):  # the exit, or a failure the cases themselves will meet
                pass
            sys.stdout.flush()
            sys.stderr.flush()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (null, *saved):
            os.close(fd)


def base_env(d: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(d), "TMPDIR": str(d), "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8", "COLUMNS": "100", "LINES": "40", "MPLBACKEND": "Agg", "MPLCONFIGDIR": str(d / ".mpl"),
            "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(d / ".hf"), "HF_HUB_DISABLE_TELEMETRY": "1",
            "TRITON_CACHE_DIR": str(d / ".triton"), "TYPER_STANDARD_TRACEBACK": "1"}


class Child:
    """A running case: its pid, pipes for stdout and stderr, what they gave so far."""

    def __init__(self, case: Case, pid: int, out_fd: int, err_fd: int, hang: Path):
        self.case, self.pid, self.hang, self.started = case, pid, hang, time.monotonic()
        self.fds = {out_fd: bytearray(), err_fd: bytearray()}
        self.out_fd, self.err_fd = out_fd, err_fd
        self.status: int | None = None
        self.exited = False


def spawn(case: Case, io_dir: Path) -> Child:
    """Fork a child running the case; stdout and stderr come back through pipes (no file-size limit on them)."""
    hang = io_dir / f"{case.index:05d}.hang"
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads: the child only runs main()
        pid = os.fork()
    if pid:
        os.close(out_w)
        os.close(err_w)
        for fd in (out_r, err_r):
            os.set_blocking(fd, False)
        return Child(case, pid, out_r, err_r, hang)
    code = 97
    try:  # the child: never return into pytest
        os.setsid()  # its own process group: the parent can end whatever it starts
        os.close(out_r)
        os.close(err_r)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.close(out_w)
        os.close(err_w)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        d = case.folder
        env = base_env(d)
        for k, v in case.env.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        os.environ.clear()
        os.environ.update(env)
        os.chdir(d)
        tempfile.tempdir = str(d)
        # what Python gives a program under a UTF-8 locale: strict stdout, backslashreplace stderr
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="strict")
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                      line_buffering=True)
        sys.argv = ["llmsize", *case.argv]
        hang_f = open(hang, "w")
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
        if case.fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (case.fsize, case.fsize))
        faulthandler.dump_traceback_later(TIME_LIMIT_S, exit=True, file=hang_f)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        if case.torch:
            import torch

            torch.set_num_threads(1)
        code = 0
        try:
            from llmsize.cli import main

            main(list(case.argv))
        except SystemExit as e:
            c = e.code
            code = 0 if c is None else c if isinstance(c, int) else 98
        except BaseException:  # noqa: BLE001 (anything else is a failure the report shows)
            traceback.print_exc()
            code = 99
        faulthandler.cancel_dump_traceback_later()
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
            except BaseException:  # noqa: BLE001 (e.g. an unencodable character left in the buffer)
                os.write(2, traceback.format_exc().encode("utf-8", "backslashreplace"))
                code = 96
    except BaseException:  # noqa: BLE001
        try:
            os.write(2, traceback.format_exc().encode("utf-8", "backslashreplace"))
        except BaseException:  # noqa: BLE001
            pass
        code = 97
    finally:
        os._exit(code & 0xFF if isinstance(code, int) else 98)


def _strict_json(text: str) -> str | None:
    def refuse(name):
        raise ValueError(f"{name} in JSON output")

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError as e:
        return str(e).splitlines()[0][:100]
    return None


def _dest(case: Case, o: str) -> Path:
    """Where destination `o` of a case lies (HOME and cwd are the case folder)."""
    if o.startswith("~/"):
        return case.folder / o[2:]
    return Path(o) if os.path.isabs(o) else case.folder / o


def judge(case: Case, status: int | None, out: bytes, err: bytes, hang: bytes) -> str | None:
    """None if the case kept the contract, else a one-line reason."""
    errt = err.decode("utf-8", "backslashreplace")
    lines = errt.rstrip("\n").split("\n") if errt else []
    if status is None:
        return "killed by the parent (no exit after the time limit)"
    if hang.strip():
        return f"timeout after {TIME_LIMIT_S} s"
    if os.WIFSIGNALED(status):
        return f"killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
    code = os.WEXITSTATUS(status)
    if "MemoryError" in errt:
        return f"MemoryError (exit {code})"
    if "Traceback (most recent call last)" in errt:
        return f"traceback (exit {code})"
    leftovers = [p.name for p in case.folder.rglob("*.partial")] if case.folder.exists() else []
    if leftovers:
        return f"left a temporary file behind: {leftovers[0]}"
    for o in case.outputs:
        before, now = case.before.get(o), sig(_dest(case, o))
        if before and now and before[0] == now[0] == stat.S_IFDIR:  # `-o ..`: a folder other cases write in too
            before, now = before[:2], now[:2]
        if code != 0 and now != before:
            return f"exit {code} but the destination `{o}` changed ({before} -> {now})"
        if before is not None and before[0] != stat.S_IFREG and now != before:
            return f"a destination that is not a regular file was replaced: `{o}`"
    if code == 0:
        wrote = [o for o in case.outputs if sig(_dest(case, o)) not in (None, case.before.get(o))
                 and stat.S_ISREG(os.lstat(_dest(case, o)).st_mode)]
        if not out.strip() and not wrote:
            return "exit 0 without output"
        if case.json_out and out.strip():
            bad = _strict_json(out.decode("utf-8", "replace"))
            if bad:
                return f"exit 0 with invalid JSON on stdout ({bad})"
        return None
    if code != 2:
        return f"exit {code}"
    if len(lines) != 1:
        return f"exit 2 with {len(lines)} stderr lines"
    if not lines[0].startswith("Error:"):
        return "exit 2, stderr does not start with `Error:`"
    return None


def signature(reason: str, err: str) -> str:
    """A failure's cause, for grouping: the reason, the exception and the innermost llmsize frame; for an
    error message on several lines, why it has several."""
    if reason.startswith("exit 2 with"):
        if err.startswith("\n"):
            return reason + ": a blank line before `Error:`"
        return reason + ": a value the user gave, echoed with its newline"
    if "timeout" in reason:  # faulthandler's dump: innermost frame first
        frames = re.findall(r'File "([^"]*llmsize/[^"]*)", line (\d+) in (\w+)', err)
        where = f"{frames[0][0].split('llmsize/')[-1]}:{frames[0][1]} {frames[0][2]}" if frames else "?"
        return f"{reason}: stuck at {where}"
    if "traceback" in reason or "MemoryError" in reason:
        frames = re.findall(r'File "([^"]*llmsize/[^"]*)", line (\d+), in (\w+)', err)
        names = re.findall(r"(?m)^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning))\b", err)
        exc = names[-1] if names else "?"
        where = f"{frames[-1][0].split('llmsize/')[-1]}:{frames[-1][1]} {frames[-1][2]}" if frames else "?"
        return f"{reason}: {exc} at {where}"
    return reason if not reason.startswith("exit 2 with") else reason + ": " + re.sub(r"\d+", "N", err[:60])


def snapshot_tree() -> dict:
    """(mtime, inode, size) of every tracked file of the tree, plus the listing of the current directory."""
    try:
        names = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True,
                               timeout=30).stdout.decode().split("\0")
    except (OSError, subprocess.SubprocessError):
        names = [str(p.relative_to(ROOT)) for sub in ("llmsize", "hardware", "models", "tests")
                 for p in (ROOT / sub).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    snap = {n: sig(ROOT / n) for n in names if n}
    snap["<cwd>"] = sorted(os.listdir("."))
    return snap


def listing(d: Path) -> dict:
    return {p.name: sig(p) for p in d.iterdir()}


def rmtree(p: Path) -> None:
    def fix(func, path, _exc):
        try:
            os.chmod(os.path.dirname(path), 0o755)
            os.chmod(path, 0o755)
        except OSError:
            pass
        try:
            func(path)
        except OSError:
            pass

    shutil.rmtree(p, onerror=fix)


def selected_indices() -> list[int]:
    only = os.environ.get("LLMSIZE_FUZZ_ONLY", "")
    nums = [int(x) for x in only.split(",") if x.strip().isdigit()]
    return nums or list(range(CASES))


OUTPUT_CAP = 4 * 2**20  # bytes kept of a case's stdout or stderr (the rest is read and dropped)


def run_cases(base: Path, io_dir: Path, indices: list[int], defer_torch: bool = False):
    """Run the cases WORKERS at a time; yields (case, status or None if killed, stdout, stderr, hang file).
    With defer_torch, a case that needs torch is not run: its status is "deferred" (for the batch that holds it)."""
    running: list[Child] = []
    todo = iter(indices)
    exhausted = False
    try:
        while True:
            while not exhausted and len(running) < WORKERS:
                i = next(todo, None)
                if i is None:
                    exhausted = True
                    break
                case = make_case(i, base)
                if case.torch and defer_torch:
                    yield case, "deferred", b"", b"", b""
                    continue
                if case.torch and not HAVE_TORCH:
                    yield case, "skipped", b"", b"", b""
                    continue
                running.append(spawn(case, io_dir))
            if not running:
                return
            fds = [fd for c in running for fd in c.fds]
            ready = select.select(fds, [], [], 0.02)[0] if fds else []
            for c in running:
                for fd in list(c.fds):
                    if fd in ready:
                        try:
                            chunk = os.read(fd, 1 << 16)
                        except BlockingIOError:
                            continue
                        if not chunk:  # EOF
                            os.close(fd)
                            c.fds.pop(fd)
                            c.__dict__.setdefault("done", {})[fd] = True
                            continue
                        buf = c.__dict__.setdefault("bufs", {}).setdefault(fd, bytearray())
                        if len(buf) < OUTPUT_CAP:
                            buf += chunk
            for c in list(running):
                if not c.exited:
                    got, status = os.waitpid(c.pid, os.WNOHANG)
                    if got:
                        c.exited, c.status = True, status
                        c.exit_time = time.monotonic()
                        _killpg(c.pid)  # whatever it started (a git, a compiler) ends with it
                    elif time.monotonic() - c.started > TIME_LIMIT_S + 10:
                        _killpg(c.pid)
                        os.waitpid(c.pid, 0)
                        c.exited, c.status = True, None
                        c.exit_time = time.monotonic()
                if c.exited and (not c.fds or time.monotonic() - c.exit_time > 2):
                    for fd in c.fds:
                        os.close(fd)
                    bufs = c.__dict__.get("bufs", {})
                    hang = c.hang.read_bytes() if c.hang.exists() else b""
                    c.hang.unlink(missing_ok=True)
                    running.remove(c)
                    yield c.case, c.status, bytes(bufs.get(c.out_fd, b"")), bytes(bufs.get(c.err_fd, b"")), hang
    finally:  # the test failed in the middle: leave no child behind
        for c in running:
            _killpg(c.pid)
            try:
                os.waitpid(c.pid, 0)
            except ChildProcessError:
                pass


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_batch(base: Path, io_dir: Path, indices: list[int], defer_torch: bool = False) -> dict:
    """Run the cases and judge each; what test_fuzz_cli reports, as plain data (a batch may run in another
    process: the cases that need no torch run from a fresh interpreter, whose forks are cheap). With
    defer_torch, the cases that need torch are listed under "deferred", not run (a child of the fresh interpreter
    would import torch itself: 1.7 s each)."""
    t0 = time.monotonic()
    out_ = {"ran": 0, "skipped": 0, "codes": {}, "kinds": {}, "failures": [], "notes": [], "kept": [], "deferred": []}
    for case, status, out, err, hang in run_cases(base, io_dir, indices, defer_torch):
        if status == "deferred":
            out_["deferred"].append(case.index)
        elif status == "skipped":
            out_["skipped"] += 1
        if status in ("skipped", "deferred"):
            rmtree(case.folder)
            continue
        out_["ran"] += 1
        out_["kinds"][case.kind] = out_["kinds"].get(case.kind, 0) + 1
        reason = judge(case, status, out, err, hang)
        code = "killed" if status is None else (os.WEXITSTATUS(status) if os.WIFEXITED(status) else "signal")
        out_["codes"][str(code)] = out_["codes"].get(str(code), 0) + 1
        def seen() -> dict:
            return {"index": case.index, "kind": case.kind, "describe": describe(case), "folder": str(case.folder)}
        if not reason and status and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and \
                re.search(rb"(?i)(?<![\w.-])[-+]?(nan|inf)(?![\w])", out) and not re.search(r"(?i)nan|inf", " ".join(
                    case.argv)):
            out_["notes"].append(seen())
        if reason:
            text_err = (err + hang).decode("utf-8", "backslashreplace")
            out_["failures"].append({**seen(), "reason": reason, "err": text_err,
                                     "signature": signature(reason, text_err),
                                     "out": out.decode("utf-8", "backslashreplace")[-300:]})
        if reason or os.environ.get("LLMSIZE_FUZZ_KEEP") == "1":
            out_["kept"].append(case.folder.name)
        else:
            rmtree(case.folder)
    out_["elapsed_s"] = time.monotonic() - t0
    return out_


def _plain_batch(base: Path, io_dir: Path, indices: list[int]) -> dict:
    """run_batch in a fresh interpreter that imports no torch (`python tests/test_fuzz.py`): forking a process
    that holds torch costs each case tens of ms of page tables."""
    # the llmsize under test, as this process imported it (`python -m pytest` puts the tree on sys.path ahead of
    # an installed copy; a script's sys.path would not)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    r = subprocess.run([sys.executable, __file__, str(base), str(io_dir), ",".join(map(str, indices))],
                       capture_output=True, timeout=3600, cwd=os.getcwd(), env=env)
    assert r.returncode == 0, r.stderr.decode("utf-8", "backslashreplace")[-3000:]
    return json.loads(r.stdout)


@pytest.mark.slow
def test_fuzz_cli(tmp_path_factory):
    """Run every case; fail with a summary of the failures grouped by cause. The cases that need no torch run
    from a fresh interpreter (_plain_batch), the measure cases here, after torch is imported."""
    base = tmp_path_factory.mktemp("fuzz")
    outer = base.parent
    io_dir = outer / (base.name + "-io")  # the watchdogs' files, outside the cases' folders
    io_dir.mkdir()
    indices = selected_indices()
    kinds_of = {i: case_kind(i) for i in indices}
    with_torch = [i for i in indices if kinds_of[i] == "measure"]
    plain = [i for i in indices if kinds_of[i] != "measure"]  # and what it defers: another kind's torch cases

    tree_before = snapshot_tree()
    outer_before = {k: v for k, v in listing(outer).items() if k not in (base.name, io_dir.name)}
    batches = [_plain_batch(base, io_dir, plain)] if plain else []
    with_torch = sorted(with_torch + [i for b in batches for i in b["deferred"]])
    if with_torch:
        _preimport(HAVE_TORCH)
        from llmsize.cli import main  # noqa: F401  (imported once, before any fork)
        batches.append(run_batch(base, io_dir, with_torch))
    ran, skipped = sum(b["ran"] for b in batches), sum(b["skipped"] for b in batches)
    codes, kinds = {}, {}
    for b in batches:
        for mine, theirs in ((codes, b["codes"]), (kinds, b["kinds"])):
            for k, n in theirs.items():
                mine[k] = mine.get(k, 0) + n
    failures = [f for b in batches for f in b["failures"]]
    notes = [n for b in batches for n in b["notes"]]
    kept = {k for b in batches for k in b["kept"]}
    elapsed = sum(b["elapsed_s"] for b in batches)

    # nothing outside the cases' folders was created or changed
    tree_after = snapshot_tree()
    changed = sorted(k for k in set(tree_before) | set(tree_after) if tree_before.get(k) != tree_after.get(k))
    outer_after = {k: v for k, v in listing(outer).items() if k not in (base.name, io_dir.name)}
    outer_changed = sorted(k for k in set(outer_before) | set(outer_after) if outer_before.get(k) != outer_after.get(k))
    stray = sorted(set(os.listdir(base)) - kept) + sorted(os.listdir(io_dir))

    summary = [f"fuzz: seed {SEED}, {ran} cases run ({skipped} skipped: no torch) in {elapsed:.1f} s; by kind "
               f"{dict(sorted(kinds.items()))}; exit codes {dict(sorted(codes.items(), key=str))}; "
               f"{len(failures)} failed"]
    groups: dict[str, list] = {}
    for f in failures:
        groups.setdefault(f["signature"], []).append(f)
    for sig_, fs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        c = fs[0]
        summary.append(f"  [{len(fs)}x] {sig_}\n      e.g. case {c['index']} ({c['kind']}): {c['describe']}")
    if notes:
        summary.append(f"  note: {len(notes)} successful runs print a bare nan/inf, e.g. case {notes[0]['index']}: "
                       f"{notes[0]['describe']}")
    summary.append("first failures in full:")
    for f in failures[:SHOW]:
        tail = "\n      ".join(_short(x, 300) for x in f["err"].strip().splitlines()[-6:])
        summary.append(f"--- case {f['index']} ({f['kind']}): {f['reason']}\n    {f['describe']}\n"
                       f"    folder: {f['folder']}\n    stderr tail: {tail}")
    if changed:
        summary.append(f"tracked files or the cwd changed: {changed[:20]}")
    if outer_changed or stray:
        summary.append(f"created or changed outside the case folders: {outer_changed[:20]} {stray[:20]}")
    text = "\n".join(summary)
    print(text)
    shutil.rmtree(io_dir, ignore_errors=True)
    assert not failures and not changed and not outer_changed and not stray, text
    assert ran + skipped == len(indices), f"{len(indices)} cases drawn, {ran + skipped} run or skipped"


def describe(c: Case) -> str:
    return (f"llmsize {_shell(c.argv)}" + (f"  [env {', '.join(f'{k}={_short(str(v), 60)}' for k, v in c.env.items())}]"
                                             if c.env else "") + (f"  [RLIMIT_FSIZE {c.fsize}]" if c.fsize else ""))


def _short(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n // 2] + f"...<{len(s)} chars>..." + s[-20:]


def _shell(argv: list[str]) -> str:
    import shlex

    out = []
    for a in argv:
        a2 = a if len(a) <= 120 else a[:60] + f"...<{len(a)} chars>"
        try:
            raw = a2.encode("utf-8", "surrogateescape")  # bytes of a non-UTF-8 argument, as given
        except UnicodeEncodeError:  # a lone surrogate that stands for no byte
            raw = a2.encode("utf-8", "backslashreplace")
        out.append(shlex.quote(raw.decode("utf-8", "backslashreplace")))
    return " ".join(out)


if __name__ == "__main__":  # _plain_batch: python tests/test_fuzz.py BASE IO_DIR INDEX,INDEX,...
    _preimport(False)  # llmsize.cli and the commands' lazy imports, once, before any fork
    assert "torch" not in sys.modules, "the plain batch must not hold torch"
    print(json.dumps(run_batch(Path(sys.argv[1]), Path(sys.argv[2]), [int(x) for x in sys.argv[3].split(",")],
                               defer_torch=True)))
