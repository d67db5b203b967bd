"""An mmproj file's header (general.architecture "clip": the vision tower convert_hf_to_gguf.py --mmproj writes beside
a GGUF model), read through the same GGUF reader as a model file (importer/gguf_file.py, no tensor data): the
tensors' bytes, exactly, and the vision encoder's shape where its keys give it all (clip.vision.embedding_length,
feed_forward_length, attention.head_count, patch_size; image_size for Gemma 3's and Llama 4's encoders,
spatial_merge_size for Qwen's), for estimate/mmproj.py."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from llmsize.estimate.mmproj import MmprojFile
from llmsize.importer.gguf_file import GgufError, read_gguf

# clip.projector_type -> the encoder kind whose warm-up image clip.cpp takes (estimate/mmproj.py); others: unknown
PROJECTOR_KINDS = {"gemma3": "siglip", "qwen2vl_merger": "qwen_vl", "qwen2.5vl_merger": "qwen_vl",
                   "qwen3vl_merger": "qwen_vl", "llama4": "llama4"}


def _encoder(meta: dict):
    """The header's vision encoder (a VisionEncoder), or None where a key it needs is missing or not a width."""
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
    try:
        return VisionEncoder(kind=kind, **values)
    except ValidationError:
        return None


def read_mmproj(path: str | Path) -> MmprojFile:
    """The mmproj file's bytes and encoder; a GGUF that is not one (a model file given by mistake) is refused."""
    if not Path(path).expanduser().is_file():
        raise GgufError(f"--mmproj {path}: no such file.", "Give the path of the mmproj-*.gguf file, or a type "
                        "(--mmproj f16) to size the model's own tower.")
    g = read_gguf(path)
    if g.arch != "clip":
        raise GgufError(f"--mmproj {path}: its general.architecture is {g.arch or 'missing'!r}, not 'clip': not an "
                        "mmproj file.", "Give the mmproj-*.gguf file beside the model's GGUF, or a type (--mmproj "
                        "f16) to size the model's own tower.")
    if not g.tensors:
        raise GgufError(f"--mmproj {path}: the file holds no tensors.", "Give the mmproj-*.gguf file itself.")
    by_type = Counter()
    for t in g.tensors.values():
        if len(t.shape) >= 2:
            by_type[t.ggml_type] += t.nbytes
    file_type = by_type.most_common(1)[0][0] if by_type else "f32"
    return MmprojFile(str(path), sum(t.nbytes for t in g.tensors.values()), sum(t.numel for t in g.tensors.values()),
                      file_type, _encoder(g.metadata))


def mmproj_source(value: str | None):
    """--mmproj's value as the plan takes it: a file's header (a name ending in .gguf), else a type
    (estimate/mmproj.check_mmproj_type), else None."""
    if value is None:
        return None
    if value.strip().lower().endswith(".gguf"):
        return read_mmproj(value.strip())
    from llmsize.estimate.mmproj import check_mmproj_type

    return check_mmproj_type(value)
