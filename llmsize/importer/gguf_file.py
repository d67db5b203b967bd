"""GGUF headers, read without the tensor data, through ggml-org's `gguf` package (gguf-py, the reader llama.cpp's
own scripts use): its GGUFReader memory-maps the file and parses the key/value metadata and the tensor infos; the
tensor data is never touched. Split files (NAME-00001-of-0000N.gguf) are read split by split, the metadata from
the first. A truncated, garbled or hostile header gets a one-line error naming the file.

Why gguf-py: it is the format's reference implementation in Python, kept in the llama.cpp repository, so new
tensor types and metadata keys arrive with it; llmsize only adds the checks and the mapping to a model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from llmsize import files
from llmsize.errors import LlmsizeError

SPLIT = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
MAX_FILES = 256


class GgufError(LlmsizeError):
    """A GGUF file that does not parse or does not add up."""


@dataclass(frozen=True)
class GgufTensorInfo:
    name: str
    ggml_type: str  # lower case: q4_k, f16, mxfp4, ...
    shape: tuple[int, ...]  # ne0 (row length) first, as stored
    nbytes: int
    file: str

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass
class GgufFile:
    metadata: dict[str, object]  # scalars and short arrays as Python values; long arrays as their length
    tensors: dict[str, GgufTensorInfo]
    files: list = field(default_factory=list)  # local paths, or URLs for --hub

    @property
    def arch(self) -> str:
        return str(self.metadata.get("general.architecture") or "")

    def get(self, key: str, default=None):
        """`{arch}.key` (or a full key starting with `general.` / `tokenizer.`)."""
        full = key if key.startswith(("general.", "tokenizer.", "split.")) else f"{self.arch}.{key}"
        return self.metadata.get(full, default)


LONG_ARRAY = 4096  # arrays longer than this (the tokenizer's tokens, merges) are kept as their length only


def _value(f):
    from gguf import GGUFValueType

    if f.types and f.types[0] == GGUFValueType.ARRAY:
        if len(f.data) > LONG_ARRAY:
            return ("array", len(f.data))
        return [v.item() if hasattr(v, "item") else v for v in f.contents()]
    v = f.contents()
    return v.item() if hasattr(v, "item") else v


class HeaderBeyond(GgufError):
    """The header runs past the bytes fetched so far (a --hub read asks for more)."""


def _read_one(path: Path, where: str | None = None, fetched: int | None = None, name: str | None = None
              ) -> tuple[dict, dict[str, GgufTensorInfo]]:
    """`fetched`: only the first `fetched` bytes of the file are real (a sparse copy of a remote header);
    `name`: the file's own name when `path` is such a copy."""
    where = where or str(path)
    try:
        from gguf import GGUFReader
    except ImportError:
        raise GgufError(f"{where}: reading GGUF files needs the `gguf` package.", "pip install gguf") from None
    try:
        size = files.require_regular(path, "GGUF file")
    except files.FileError as e:
        raise GgufError(e.message, e.hint) from None
    if size < 24:
        raise GgufError(f"{where}: {size} bytes is too short for a GGUF header (24 bytes at least).",
                        "The file is truncated or not GGUF: download it again.")
    with open(path, "rb") as fh:
        head = fh.read(24)
    if head[:4] != b"GGUF":
        raise GgufError(f"{where}: not a GGUF file (its first bytes are not `GGUF`).",
                        "Give a .gguf file written by llama.cpp's tools.")
    version, tensors_n, kvs_n = int.from_bytes(head[4:8], "little"), *(int.from_bytes(head[i:i + 8], "little")
                                                                         for i in (8, 16))
    # a header's counts cannot promise more entries than the file holds (a tensor info is 24 bytes at least: name
    # length, dimension count, type, offset; a key/value 12: key length and value type): refused before the reader
    # walks them (2**62 tensors took it 4 s to fail)
    if version >= 2 and tensors_n * 24 + kvs_n * 12 > size:
        raise GgufError(f"{where}: its header counts {tensors_n:,} tensors and {kvs_n:,} metadata keys, more than "
                        f"its {size:,} bytes can hold.", "The file is damaged: download it again.")
    try:
        reader = GGUFReader(str(path), "r")
        if fetched is not None and reader.data_offset > fetched:
            raise HeaderBeyond(f"{where}: header of {reader.data_offset:,} bytes, {fetched:,} fetched.")
        meta = {name: _value(f) for name, f in reader.fields.items() if not name.startswith("GGUF.")}
        tensors = {}
        for t in reader.tensors:
            tensors[t.name] = GgufTensorInfo(t.name, t.tensor_type.name.lower(), tuple(int(d) for d in t.shape),
                                             int(t.n_bytes), name or path.name)
            if t.data_offset + int(t.n_bytes) > size:
                raise GgufError(f"{where}: tensor `{t.name[:80]}` ends at byte {t.data_offset + int(t.n_bytes):,}, "
                                f"past the end of the {size:,}-byte file.", "The file is truncated: download it again.")
    except GgufError:
        raise
    except Exception as e:  # gguf-py raises ValueError, IndexError, KeyError, UnicodeDecodeError... on bad headers
        if fetched is not None and fetched < size:
            raise HeaderBeyond(f"{where}: the header does not parse within the {fetched:,} bytes fetched.") from None
        raise GgufError(f"{where}: the GGUF header does not parse ({e.__class__.__name__}: {str(e)[:120]}).",
                        "The file is damaged or truncated: download it again.") from None
    return meta, tensors


def split_names(file_name: str, where: str) -> list[str]:
    """NAME-0000k-of-0000N.gguf -> the names of all N splits; any other name alone."""
    m = SPLIT.match(file_name)
    if not m:
        return [file_name]
    count = int(m.group("count"))
    if not 1 <= count <= MAX_FILES:
        raise GgufError(f"{where}: split count {count} is out of range (1 to {MAX_FILES}).")
    return [f"{m.group('stem')}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]


def split_files(path: Path) -> list[Path]:
    """The splits of NAME-0000k-of-0000N.gguf, all of them, checked present; a single file alone."""
    want = [path.with_name(n) for n in split_names(path.name, str(path))]
    missing = [p.name for p in want if not p.exists()]
    if len(want) == 1 and missing:
        raise GgufError(f"{path}: no such file.", "Check the path (or name a catalog model: `llmsize models`).")
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise GgufError(f"{path}: {len(missing)} of its {len(want)} splits {verb} missing (first: {missing[0]}).",
                        "Download every split into the same folder.")
    return want


def merge(parts: list[tuple[str, dict, dict[str, GgufTensorInfo]]], files: list) -> GgufFile:
    """(where, metadata, tensors) of each split -> one file: the first split's metadata, every tensor once."""
    tensors: dict[str, GgufTensorInfo] = {}
    for where, _, more in parts:
        dup = set(more) & set(tensors)
        if dup:
            raise GgufError(f"{where}: tensor `{sorted(dup)[0][:80]}` is also in an earlier split.",
                            "The splits are not of one model: download them again.")
        tensors.update(more)
    if not tensors:
        raise GgufError(f"{parts[0][0]}: the GGUF holds no tensors.", "Give a model file, not a vocabulary-only GGUF.")
    return GgufFile(parts[0][1], tensors, files)


def read_gguf(path: str | Path) -> GgufFile:
    """Metadata and tensor infos of a GGUF file or of all the splits it belongs to."""
    paths = split_files(Path(path).expanduser())
    return merge([(str(p), *_read_one(p)) for p in paths], paths)
