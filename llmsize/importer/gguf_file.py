"""GGUF headers, read without the tensor data, through ggml-org's `gguf` package (gguf-py, the reader llama.cpp's
own scripts use): its GGUFReader memory-maps the file and parses the key/value metadata and the tensor infos; the
tensor data is never touched. Split files (NAME-00001-of-0000N.gguf) are read split by split, the metadata from
the first. A truncated, garbled or hostile header gets a one-line error naming the file. The header is first
walked by its length prefixes (each checked against the bytes left); arrays longer than LONG_ARRAY (a tokenizer's
tokens and merges, which gguf-py parses element by element: 20 s of CPU for Llama 3's) are left out of a sparse
temporary copy that gguf-py parses instead, and kept as their length.

Why gguf-py: it is the format's reference implementation in Python, kept in the llama.cpp repository, so new
tensor types and metadata keys arrive with it; llmsize only adds the checks and the mapping to a model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from llmsize import files
from llmsize.errors import LlmsizeError, shown_path

SPLIT = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
MAX_FILES = 256
# the most tensor infos read: models hold hundreds to a few thousand (DeepSeek-V3 about 1,900; Snowflake Arctic with
# its 128 experts a layer stored apart about 13,500); gguf-py takes about 0.1 ms an entry, so a hostile header of
# 200,000 junk entries took 27 s to refuse
MAX_TENSORS = 65_536
GGUF_VERSIONS = (2, 3)  # what gguf-py and llama.cpp read


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


# GGUF value types (gguf-py's GGUFValueType) and the bytes of each scalar one
_SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY, _UINT32 = 8, 9, 4


@dataclass(frozen=True)
class _Layout:
    """Where a (version 2+) GGUF header's parts lie, from one walk of its length prefixes."""

    long_arrays: tuple[tuple[int, int, str, int], ...]  # (start, end, key, elements) of arrays over LONG_ARRAY
    ti_end: int  # the byte after the last tensor info
    alignment: int

    @property
    def data_offset(self) -> int:
        return -(-self.ti_end // self.alignment) * self.alignment


def _layout(buf, size: int, tensors_n: int, kvs_n: int, where: str, fetched: int | None = None) -> _Layout:
    """Walk the header's key/values and tensor infos by their length prefixes, each length checked against the
    bytes left (a hostile array of 2**40 strings is refused where the reader would allocate for it), and note the
    long arrays (a tokenizer's tokens and merges), which gguf-py parses element by element: 20 s of CPU for Llama
    3's 128,256 tokens and 280,147 merges, which llmsize does not need."""
    pos = 24

    def take(n: int) -> int:
        nonlocal pos
        if n < 0 or pos + n > size:
            raise GgufError(f"{where}: the header runs past the end of the {size:,}-byte file (at byte {pos:,}).",
                            "The file is truncated or damaged: download it again.")
        if fetched is not None and pos + n > fetched:  # a --hub read: within the file, past what is fetched
            raise HeaderBeyond(f"{where}: the header runs past the {fetched:,} bytes fetched.")
        pos += n
        return pos - n

    def uint(n: int) -> int:
        s = take(n)
        return int.from_bytes(buf[s:s + n], "little")

    def skip(vtype: int, depth: int = 0) -> int:
        """Skip a value; an array's element count."""
        if vtype in _SCALAR_BYTES:
            take(_SCALAR_BYTES[vtype])
        elif vtype == _STRING:
            take(uint(8))
        elif vtype == _ARRAY and depth < 4:
            etype, n = uint(4), uint(8)
            if etype in _SCALAR_BYTES:
                take(n * _SCALAR_BYTES[etype])
            else:
                for _ in range(n):
                    skip(etype, depth + 1)
            return n
        else:
            raise GgufError(f"{where}: a metadata value of unknown type {vtype} at byte {pos:,}.",
                            "The file is damaged, or newer than the gguf package: pip install -U gguf.")
        return 0

    long, alignment = [], 32
    for _ in range(kvs_n):
        start = pos
        key_at = take(uint(8))
        key = bytes(buf[key_at:pos]).decode("utf-8", "replace")
        vtype = uint(4)
        value_at = pos
        n = skip(vtype)
        if vtype == _ARRAY and n > LONG_ARRAY:
            long.append((start, pos, key, n))
        if key == "general.alignment" and vtype == _UINT32:
            alignment = int.from_bytes(buf[value_at:value_at + 4], "little") or 32
    for _ in range(tensors_n):
        take(uint(8))  # the name
        take(8 * uint(4))  # its dimensions
        take(12)  # its type and data offset
    return _Layout(tuple(long), pos, alignment)


def _without_long_arrays(buf, lay: _Layout, size: int, tensors_n: int, kvs_n: int) -> Path:
    """A sparse temporary copy of the file whose header leaves the long arrays out (the tensor data not copied:
    only its extent), for gguf-py to parse quickly; the caller removes it."""
    import os
    import tempfile

    kept = kvs_n - len(lay.long_arrays)
    parts, at = [bytes(buf[:8]), tensors_n.to_bytes(8, "little"), kept.to_bytes(8, "little")], 24
    for start, end, _, _ in lay.long_arrays:
        parts.append(bytes(buf[at:start]))
        at = end
    parts.append(bytes(buf[at:lay.ti_end]))
    fd, name = tempfile.mkstemp(suffix=".gguf", prefix="llmsize-header-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(b"".join(parts))
        fh.truncate(sum(len(x) for x in parts) + lay.alignment + (size - lay.data_offset))  # sparse tensor data
    return Path(name)


def read_part(path: Path, where: str | None = None, fetched: int | None = None, name: str | None = None
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
    if version < GGUF_VERSIONS[0]:  # version 1 was dropped from llama.cpp and gguf-py in 2023
        raise GgufError(f"{where}: GGUF version {version}, which llama.cpp and its gguf package no longer read.",
                        "Convert the model again with a current llama.cpp (convert_hf_to_gguf.py).")
    if version > GGUF_VERSIONS[-1]:
        raise GgufError(f"{where}: GGUF version {version}, newer than the {GGUF_VERSIONS[-1]} the gguf package and "
                        "llama.cpp read (or a damaged header).", "Update the gguf package (pip install -U gguf), or "
                        "download the file again.")
    if tensors_n > MAX_TENSORS:
        raise GgufError(f"{where}: its header counts {tensors_n:,} tensors, beyond any model's (llmsize reads at most "
                        f"{MAX_TENSORS:,}).", "The file is damaged or not a model: download it again.")
    if tensors_n * 24 + kvs_n * 12 > size:
        raise GgufError(f"{where}: its header counts {tensors_n:,} tensors and {kvs_n:,} metadata keys, more than "
                        f"its {size:,} bytes can hold.", "The file is damaged: download it again.")
    import mmap

    copy = None
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        lay = _layout(buf, size, tensors_n, kvs_n, where, fetched if fetched is not None and fetched < size
                      else None)
        if lay.long_arrays:
            copy = _without_long_arrays(buf, lay, size, tensors_n, kvs_n)
    try:
        reader = GGUFReader(str(copy or path), "r")
        if fetched is not None and reader.data_offset > fetched:
            raise HeaderBeyond(f"{where}: header of {reader.data_offset:,} bytes, {fetched:,} fetched.")
        meta = {name: _value(f) for name, f in reader.fields.items() if not name.startswith("GGUF.")}
        meta.update({key: ("array", n) for _, _, key, n in lay.long_arrays})
        shift = lay.data_offset - reader.data_offset  # the tensor data's place in the file itself
        align = meta.get("general.alignment", 32)
        tensors = {}
        for t in reader.tensors:
            if isinstance(align, int) and align > 0 and (t.data_offset - reader.data_offset) % align:
                raise GgufError(f"{where}: tensor `{t.name[:80]}`'s data starts {t.data_offset - reader.data_offset:,} "
                                f"bytes into the data, not a multiple of its alignment {align} (llama.cpp refuses "
                                "it).", "The file is damaged: download it again.")
            if 0 in tuple(int(d) for d in t.shape):
                raise GgufError(f"{where}: tensor `{t.name[:80]}` has shape {tuple(int(d) for d in t.shape)}, with "
                                "a dimension of 0.", "The file is damaged: download or convert it again.")
            tensors[t.name] = GgufTensorInfo(t.name, t.tensor_type.name.lower(), tuple(int(d) for d in t.shape),
                                             int(t.n_bytes), name or path.name)
            end = t.data_offset + shift + int(t.n_bytes)
            if end > size:
                raise GgufError(f"{where}: tensor `{t.name[:80]}` ends at byte {end:,}, past the end of the "
                                f"{size:,}-byte file.", "The file is truncated: download it again.")
    except GgufError:
        raise
    except Exception as e:  # gguf-py raises ValueError, IndexError, KeyError, UnicodeDecodeError... on bad headers
        if fetched is not None and fetched < size:
            raise HeaderBeyond(f"{where}: the header does not parse within the {fetched:,} bytes fetched.") from None
        # the header walked (_layout) but gguf-py failed mapping the tensors: their data is cut short or damaged
        raise GgufError(f"{where}: its header parses, its tensor data does not match the tensor infos "
                        f"({e.__class__.__name__}: {str(e)[:120]}).",
                        "The file is damaged or truncated: download it again.") from None
    finally:
        if copy is not None:
            copy.unlink(missing_ok=True)
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
    missing = [p.name for p in want if not files.exists(p)]
    if len(want) == 1 and missing:
        files.is_dir(path, "GGUF file")  # a path the system cannot look up (a name too long) says so, one line
        raise GgufError(f"{shown_path(path)}: no such file.",
                        "Check the path (or name a catalog model: `llmsize models`).")
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
    meta = parts[0][1]
    count, held = meta.get("split.count"), meta.get("split.tensors.count")
    if isinstance(count, int) and count > len(parts):  # llama.cpp's gguf-split writes both keys in every split
        no = meta.get("split.no")  # an integer as gguf-split writes it; a damaged file's is named no further
        which = (f"split {no + 1} of {count}" if isinstance(no, int) and not isinstance(no, bool)
                 else f"one of {count} splits")
        raise GgufError(f"{parts[0][0]}: {which} (its split.count), and "
                        f"only {len(parts)} of the {count} were found by name"
                        + (f" ({len(tensors):,} of its {held:,} tensors)" if isinstance(held, int) else "") + ".",
                        "Keep the splits' names as gguf-split wrote them (NAME-00001-of-0000N.gguf), side by side.")
    return GgufFile(meta, tensors, files)


def has_gguf_magic(path: str | Path) -> bool:
    """Whether `path` is a regular file that starts as a GGUF does (`GGUF`), whatever its name: Ollama keeps its
    models as blobs named by their digest, no extension. False for anything unreadable (its reader says why)."""
    try:
        with files.open_regular(path, "model file") as (f, size):
            return size >= 4 and f.read(4) == b"GGUF"
    except (files.FileError, OSError):
        return False


def read_gguf(path: str | Path) -> GgufFile:
    """Metadata and tensor infos of a GGUF file or of all the splits it belongs to."""
    paths = split_files(files.expand_user(path))
    return merge([(str(p), *read_part(p)) for p in paths], paths)
