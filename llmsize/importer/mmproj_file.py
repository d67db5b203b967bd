"""An mmproj file's header (general.architecture "clip": the vision tower convert_hf_to_gguf.py --mmproj writes beside
a GGUF model), read through the same GGUF reader as a model file (importer/gguf_file.py, no tensor data): the
tensors' bytes, exactly, and the vision encoder's shape where its keys give it all (clip.vision.embedding_length,
feed_forward_length, attention.head_count, patch_size; image_size for Gemma 3's and Llama 4's encoders,
spatial_merge_size for Qwen's), for estimate/mmproj.py."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from llmsize.errors import InvalidValueError, shown
from llmsize.estimate.mmproj import MmprojFile
from llmsize.files import exists, expand_user, is_dir
from llmsize.importer.gguf_file import GgufError, read_gguf

HINT = "Give the path of the mmproj-*.gguf file beside the model's GGUF, or a type (--mmproj f16) for its own tower."
# clip.projector_type -> the encoder kind whose warm-up image clip.cpp takes (estimate/mmproj.py); others: unknown
PROJECTOR_KINDS = {"gemma3": "siglip", "qwen2vl_merger": "qwen_vl", "qwen2.5vl_merger": "qwen_vl",
                   "qwen3vl_merger": "qwen_vl", "llama4": "llama4"}


def _encoder(meta: dict, path):
    """The header's vision encoder (a VisionEncoder), or None where a key it needs is missing or not a count; one
    beyond any encoder's size (an image of 100,000 pixels a side) refused, naming the key."""
    from pydantic import ValidationError

    from llmsize.catalog.schema import VisionEncoder

    kind = PROJECTOR_KINDS.get(str(meta.get("clip.projector_type") or meta.get("clip.vision.projector_type") or ""))
    if kind is None:
        return None
    fields = {"hidden_size": "clip.vision.embedding_length", "intermediate_size": "clip.vision.feed_forward_length",
              "num_heads": "clip.vision.attention.head_count", "patch_size": "clip.vision.patch_size"}
    if kind in ("siglip", "llama4"):
        fields["image_size"] = "clip.vision.image_size"
    if kind == "qwen_vl":
        fields["merge"] = "clip.vision.spatial_merge_size"
    values = {k: meta.get(key) for k, key in fields.items()}
    if any(not isinstance(v, int) or isinstance(v, bool) for v in values.values()):
        return None
    if any(v <= 0 for v in values.values()):
        return None
    try:
        return VisionEncoder(kind=kind, **values)
    except ValidationError as e:
        field = str(e.errors()[0]["loc"][0])
        raise GgufError(f"--mmproj {shown(path)}: {fields[field]} is {values[field]:,}, beyond any vision encoder's.",
                        HINT) from None


def read_mmproj(path: str | Path) -> MmprojFile:
    """The mmproj file's bytes and encoder; a GGUF that is not one (a model file given by mistake) is refused."""
    p = expand_user(path)
    if is_dir(p, "--mmproj"):  # (a path the system cannot look up is one line too)
        raise GgufError(f"--mmproj {shown(path)}: a folder, not a file.", HINT)
    if not exists(p):
        raise GgufError(f"--mmproj {shown(path)}: no such file.", HINT)
    try:
        g = read_gguf(path)
    except GgufError as e:  # the reader's words are a model file's: its message, the mmproj's hint
        raise GgufError(f"--mmproj: {e.message}", HINT) from None
    if g.arch != "clip":
        raise GgufError(f"--mmproj {shown(path)}: its general.architecture is {shown(g.arch or 'missing')!r}, not "
                        "'clip': not an mmproj file.", HINT)
    by_type = Counter()
    for t in g.tensors.values():
        if len(t.shape) >= 2:
            by_type[t.ggml_type] += t.nbytes
    file_type = by_type.most_common(1)[0][0] if by_type else "f32"
    dim = g.metadata.get("clip.vision.projection_dim")
    return MmprojFile(str(path), sum(t.nbytes for t in g.tensors.values()), sum(t.numel for t in g.tensors.values()),
                      file_type, _encoder(g.metadata, path),
                      dim if isinstance(dim, int) and not isinstance(dim, bool) and dim > 0 else None)


def mmproj_source(value: str | None):
    """--mmproj's value as the plan takes it: a file's header (a name ending in .gguf, or any file: Ollama's blobs
    have no extension), else a type
    (estimate/mmproj.check_mmproj_type), else None."""
    if value is None:
        return None
    from llmsize.estimate.mmproj import MMPROJ_BITS, check_mmproj_type

    v = value.strip()
    if not v:  # Path("") is the current folder
        raise InvalidValueError("--mmproj is empty.", "Give a type (f16, bf16, f32, q8_0) or an mmproj file's path.")
    if v.lower() not in MMPROJ_BITS and (v.lower().endswith(".gguf") or exists(expand_user(v))):
        return read_mmproj(v)  # a file (an Ollama blob has no extension)
    return check_mmproj_type(value)
