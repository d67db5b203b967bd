"""safetensors headers, read without the tensor data: an 8-byte little-endian length, then that many bytes
of JSON {name: {dtype, shape, data_offsets}} (huggingface/safetensors format spec). Every field is checked
against the file, so a truncated, garbled or hostile file gets a one-line error naming it."""

from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import dataclass
from math import prod
from pathlib import Path

from llmsize import files
from llmsize.errors import LlmsizeError

MAX_HEADER_BYTES = 100 * 2**20  # the safetensors library refuses larger headers too
# safetensors Dtype enum -> bits per element
DTYPE_BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "I16": 16, "U16": 16,
              "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64,
              "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}


class HeaderError(LlmsizeError):
    """A safetensors file or index that does not parse or does not add up."""

    default_hint = "Check the .safetensors files and their index (download them again if damaged)."


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    file: str

    @property
    def numel(self) -> int:
        return prod(self.shape)


def check_length(n: int, size: int, where: str) -> None:
    """The 8-byte header length against the limit and the file size."""
    if n == 0 or n > MAX_HEADER_BYTES:
        raise HeaderError(f"{where}: header length {n:,} bytes is out of range (1 to {MAX_HEADER_BYTES:,}).",
                          "The file is not safetensors, or is damaged.")
    if 8 + n > size:
        raise HeaderError(f"{where}: header length {n:,} bytes runs past the end of the {size:,}-byte file.",
                          "The file is truncated: download it again.")


def parse_header(blob: bytes, size: int, where: str, file_name: str) -> dict[str, TensorInfo]:
    """The JSON header (without its 8-byte length) of a `size`-byte file -> tensors, every field checked."""
    try:
        header = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise HeaderError(f"{where}: header is not valid JSON ({e.__class__.__name__}).",
                          "The file is damaged: download it again.") from None
    if not isinstance(header, dict):
        raise HeaderError(f"{where}: header is not a JSON object.")
    data_bytes = size - 8 - len(blob)
    out: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        out[name] = _entry(where, name, entry, data_bytes, file_name)
    return out


def read_header(path: Path) -> dict[str, TensorInfo]:
    """The header of one file: opened as a regular file only (llmsize.files), its length checked against the
    file's size before the JSON is read."""
    path = Path(path)
    try:
        with files.open_regular(path, "safetensors file") as (f, size):
            head = f.read(8)
            if len(head) < 8:
                raise HeaderError(f"{path}: {size} bytes, too short for a safetensors header.")
            (n,) = struct.unpack("<Q", head)
            check_length(n, size, str(path))
            blob = f.read(n)
            if len(blob) < n:
                raise HeaderError(f"{path}: the header is cut short ({len(blob):,} of {n:,} bytes).",
                                  "The file is truncated: download it again.")
    except files.FileError as e:
        raise HeaderError(e.message, e.hint) from None
    except OSError as e:
        raise HeaderError(f"{path}: not readable ({e.strerror or e.__class__.__name__}).") from None
    return parse_header(blob, size, str(path), path.name)


def _entry(where: str, name: str, entry, data_bytes: int, file_name: str) -> TensorInfo:
    def bad(what):
        return HeaderError(f"{where}: tensor {name!r}: {what}.", "The file is damaged or not safetensors.")

    if not isinstance(entry, dict):
        raise bad("entry is not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise bad(f"unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise bad(f"shape {shape!r} is not a list of non-negative integers")
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]):
        raise bad(f"data_offsets {offsets!r} are not [begin, end] with 0 <= begin <= end")
    bits = prod(shape) * DTYPE_BITS[dtype]
    nbytes = (bits + 7) // 8
    if offsets[1] - offsets[0] != nbytes:
        raise bad(f"{dtype} {shape} needs {nbytes:,} bytes but data_offsets span {offsets[1] - offsets[0]:,}")
    if offsets[1] > data_bytes:
        raise bad(f"data_offsets end at {offsets[1]:,}, past the {data_bytes:,} bytes of data in the file")
    return TensorInfo(name, dtype, tuple(shape), nbytes, file_name)


SHARD_NAME = re.compile(r"^(?P<stem>.+)-(?P<i>\d{5})-of-(?P<n>\d{5})\.safetensors$")


def missing_shards(names: list[str]) -> list[str]:
    """Shards that names such as `model-00002-of-00004.safetensors` say exist but are not among `names`."""
    want: dict[tuple[str, str], int] = {}
    have = set(names)
    for name in names:
        m = SHARD_NAME.match(name)
        if m:
            want[(m["stem"], m["n"])] = int(m["n"])
    return [f"{stem}-{i:05d}-of-{n}.safetensors" for (stem, n), count in sorted(want.items())
            for i in range(1, count + 1) if f"{stem}-{i:05d}-of-{n}.safetensors" not in have]


class PartialCheckpoint(HeaderError):
    """Shards that the index or the shard names announce are not in the folder."""


def read_folder(folder: Path) -> tuple[dict[str, TensorInfo], list[Path]]:
    """Every tensor of a checkpoint folder: through model.safetensors.index.json when present (each shard
    it names must exist), else every *.safetensors file, all of them when their names say `-of-0000N`.
    Returns (tensors, files read)."""
    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    weight_map = None
    if os.path.lexists(index):
        try:
            raw = files.read_json(index, "safetensors index", files.INDEX_LIMIT_BYTES)
        except files.FileError as e:
            raise HeaderError(e.message, e.hint) from None
        weight_map = raw.get("weight_map") if isinstance(raw, dict) else None
        if not isinstance(weight_map, dict):
            raise HeaderError(f"{index}: not a safetensors index (no weight_map object).")
        shards = sorted(set(map(str, weight_map.values())))
        for s in shards:
            if "/" in s or "\\" in s or s.startswith("."):
                raise HeaderError(f"{index}: shard name {s!r} points outside the folder.")
        absent = [s for s in shards if not os.path.lexists(folder / s)]
        paths = [folder / s for s in shards]
    else:
        paths = sorted(folder.glob("*.safetensors"))
        absent = missing_shards([p.name for p in paths])
    if absent:
        where = f"{index} lists" if weight_map is not None else "the shard names announce"
        shown = ", ".join(absent[:3]) + (f" and {len(absent) - 3} more" if len(absent) > 3 else "")
        raise PartialCheckpoint(f"{folder}: {len(absent)} shard(s) that {where} are missing: {shown}.",
                                "Download every shard, or pass --estimate-only to plan from config.json alone.")
    tensors: dict[str, TensorInfo] = {}
    for f in paths:
        for name, t in read_header(f).items():
            if name in tensors:
                raise HeaderError(f"{f}: tensor {name!r} is also in {tensors[name].file}.")
            tensors[name] = t
    if weight_map is not None:
        missing = set(weight_map) - set(tensors)
        if missing:
            raise HeaderError(f"{index}: {len(missing)} tensor(s) it lists are in no shard, "
                              f"e.g. {sorted(missing)[0]!r}.")
    return tensors, paths
