"""A model folder or config.json on disk -> a ModelSpec plan can use, with notes and (given safetensors)
the exact weight bytes. Torch-free: safetensors headers are parsed as JSON, tensor data is never read."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from llmsize import files
from llmsize.catalog.schema import ModelSpec
from llmsize.errors import printable, shown
from llmsize.importer.config_fields import BAD_VALUE, ConfigError
from llmsize.importer.hf_config import map_config, slug, text_part
from llmsize.importer.quant_config import Release, release_from
from llmsize.importer.safetensors_header import PartialCheckpoint


@dataclass
class Imported:
    spec: ModelSpec
    release: Release
    notes: list[str] = field(default_factory=list)
    generic: bool = False
    exact: object | None = None  # llmsize.importer.exact.ExactWeights when safetensors headers were read
    warnings: list[str] = field(default_factory=list)  # printed first: the plan is not what the files hold


def read_json(path: Path) -> dict:
    """A config file: regular, at most 20 MiB, JSON (Python's json accepts the Infinity / NaN some configs
    carry), through llmsize.files."""
    try:
        return files.read_json(path, "config")
    except files.FileError as e:
        raise ConfigError(e.message, e.hint) from None


def _spec_error(where: Path, err: ValidationError) -> ConfigError:
    e = err.errors()[0]
    loc = ".".join(str(x) for x in e["loc"])
    hint = ("Check the GGUF file against the model's repository (or give the catalog id of a model with its shapes)."
            if str(where).lower().endswith(".gguf") else None)
    field = e["loc"][-1] if e["loc"] else None  # the config's own name for most of the schema's fields
    value = (f" ({field} = {shown(repr(e['input']), 40)})" if isinstance(field, str) and "input" in e
             and not isinstance(e["input"], dict | list) else "")
    return ConfigError(f"{where}: the mapped model is invalid at {loc}{value}: {e['msg']}.", hint)


def build(raw: dict, hf_quant: dict | None, cfg_where: str, quant_where: str, folder_name: str,
          sources: list[str], tensors: dict | None, files: list, estimate_only: bool = False) -> Imported:
    """config (+ quant config) (+ header tensors) -> Imported. Shared by local folders and --hub. Headers
    that cannot be the whole checkpoint (exact.check_complete) stop the import, unless `estimate_only`:
    then they are set aside and the plan says so first."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{cfg_where}: the top level is not a JSON object.")
    mapped = map_config(raw, cfg_where)
    try:
        release = release_from(raw, hf_quant, mapped.fields, quant_where)
    except BAD_VALUE as e:
        raise ConfigError(f"{quant_where}: the quantization config has an unexpected value "
                          f"({e.__class__.__name__}: {e}).") from None
    text = text_part(raw)
    # a folder's name is a user's value like the config's: shown, never sent raw to a terminal (an escape sequence)
    name = printable(str(raw.get("_name_or_path") or text.get("_name_or_path") or folder_name or "imported-model"))
    model_type = str(text.get("model_type") or raw.get("model_type") or "unknown")
    hf_repo = name if name.count("/") == 1 and not name.startswith((".", "/")) else None
    try:
        spec = ModelSpec(
            id=slug(name.split("/")[-1]), name=name, family=model_type, hf_repo=hf_repo, sources=sources,
            params_official=1, params_official_source="placeholder", params_official_includes="placeholder",
            release=release.as_yaml(), **mapped.fields)
    except ValidationError as e:
        raise _spec_error(cfg_where, e) from None
    from llmsize.estimate.params import params_comparable_to_official

    spec = spec.model_copy(update={
        "params_official": params_comparable_to_official(spec),
        "params_official_source": "counted by llmsize from config.json (no official figure given)",
        "params_official_includes": "text decoder as described by config.json " + (
            f"({' and '.join(x.name for x in spec.extra)} counted apart, under extra)" if spec.extra
            else "(no vision/audio towers, no MTP)")})
    out = Imported(spec, release, list(mapped.notes) + release.notes, mapped.generic, None)
    if tensors is not None:
        from llmsize.importer.exact import check_complete, exact_weights

        exact = exact_weights(tensors, files, spec)
        problem = check_complete(exact, spec, str(Path(cfg_where).parent))
        if problem and not estimate_only:
            raise PartialCheckpoint(problem, "Download every shard, or pass --estimate-only to plan from "
                                    "config.json alone.")
        if problem:
            out.warnings.append(f"Sized from config.json alone (--estimate-only), not from the files: {problem}")
            return out
        out.exact = exact
        out.spec = spec.model_copy(update={
            "params_official": out.exact.params_total,
            "params_official_source": "counted by llmsize from the safetensors headers",
            "params_official_includes": "every tensor in the checkpoint (vision/audio towers and MTP "
                                        "layers included, scales excluded)",
            # the towers and MTP layers config.json describes are in that count
            "extra": [x.model_copy(update={"in_official_count": True}) for x in spec.extra],
            "sources": sources + [str(f) for f in files]})
        out.notes += out.exact.notes
    return out


def import_model(path: str | Path, read_headers: bool = True, estimate_only: bool = False) -> Imported:
    """Import a model folder (config.json [+ hf_quant_config.json] [+ *.safetensors]) or a config.json.
    A folder whose shards are not all there is refused, unless `estimate_only` (planned from config.json,
    and the warning says which shards are missing)."""
    path = files.expand_user(path)
    if path.suffix.lower() == ".gguf":
        return import_gguf(path)
    if files.is_dir(path, "model"):
        folder, cfg_path = path, path / "config.json"
        ggufs = sorted(folder.glob("*.gguf")) if not os.path.lexists(cfg_path) else []
        if ggufs:  # a folder of GGUF files has no config.json: the file is the model
            raise ConfigError(f"{path}: no config.json, and {len(ggufs)} GGUF file(s) ({ggufs[0].name}"
                              f"{', ...' if len(ggufs) > 1 else ''}).",
                              f"Pass the GGUF file itself: `llmsize plan {ggufs[0]} ...` (a split model: its first "
                              "part).")
    elif os.path.lexists(path):
        from llmsize.importer.gguf_file import has_gguf_magic

        if has_gguf_magic(path):  # a GGUF without the extension (an Ollama blob)
            return import_gguf(path)
        folder, cfg_path = path.parent, path
        read_headers = False
    else:
        raise ConfigError(f"{path}: no such file or folder.",
                          "Give a model folder (config.json + *.safetensors) or a config.json file.")
    raw = read_json(cfg_path)
    hq_path = folder / "hf_quant_config.json"
    hf_quant = read_json(hq_path) if folder == path and os.path.lexists(hq_path) else None
    sources = [str(cfg_path.resolve())] + ([str(hq_path.resolve())] if hf_quant is not None else [])
    tensors, paths, warning = None, [], None
    has_index = os.path.lexists(folder / "model.safetensors.index.json")
    if read_headers and (has_index or any(folder.glob("*.safetensors"))):
        from llmsize.importer.safetensors_header import read_folder

        try:
            tensors, paths = read_folder(folder)
        except PartialCheckpoint as e:
            if not estimate_only:
                raise
            warning = f"Sized from config.json alone (--estimate-only), not from the files: {e.message}"
    # a model's folder names it; a config file saved under another name (org__name.json) names it by its stem
    label = folder.name if cfg_path.name == "config.json" else cfg_path.stem
    out = build(raw, hf_quant, str(cfg_path), str(hq_path if hf_quant is not None else cfg_path), label,
                sources, tensors, paths, estimate_only)
    if warning:
        out.warnings.insert(0, warning)
    return out


def _gguf_release(g) -> Release:
    """The file type llama-quantize wrote (general.file_type), as an llmsize format id."""
    from llmsize.estimate.gguf_blocks import FILE_TYPES
    from llmsize.estimate.quant import FORMATS, LLAMACPP_CONVERTED, block_format

    code = g.metadata.get("general.file_type")
    name = None
    if isinstance(code, int):
        try:
            from gguf import LlamaFileType

            name = LlamaFileType(code).name.removeprefix("MOSTLY_").removeprefix("ALL_").lower()
        except ValueError:
            name = None
    if name in FILE_TYPES:
        return Release(f"gguf-{name}", "all", "general.file_type")
    if name in ("f16", "bf16", "f32"):  # a converter's file: the type and the block are one
        return Release(block_format(name), "all", "general.file_type")
    by_type = {}
    for t in g.tensors.values():
        by_type[t.ggml_type] = by_type.get(t.ggml_type, 0) + t.nbytes
    converted = [block_format(t) for t in by_type if block_format(t) in LLAMACPP_CONVERTED]
    if name in LLAMACPP_CONVERTED or (name is None and converted):
        # a checkpoint the converter wrote in its own format (an NVFP4 one: its matrices NVFP4, the rest 16-bit)
        return Release(name or converted[0], "linear", "general.file_type" if name else "GGUF tensor types")
    # another file type or none recorded: the block type holding most bytes
    top = max(by_type, key=by_type.get)
    fid = block_format(top)
    if fid is None:
        fid = min((f for f in FORMATS if f.startswith("ggml-")),
                  key=lambda f: abs(float(FORMATS[f].bits_per_weight) - 8 * by_type[top] / sum(
                      t.numel for t in g.tensors.values() if t.ggml_type == top)))
    return Release(fid, "all", "GGUF tensor types", notes=[
        f"file type {name or code!r} has no llmsize format: the speed model treats it as {fid} (its bytes are the "
        "file's own)"])


def import_gguf(path: str | Path) -> Imported:
    """A .gguf file (or the first of its splits): the model from its metadata and tensor infos, the exact bytes
    from the tensor infos; tensor data is never read."""
    from llmsize.importer.gguf_file import read_gguf

    g = read_gguf(path)
    return _from_gguf(g, Path(path).name, [str(Path(p).resolve()) for p in g.files])


def import_hub_gguf(spec: str, filename: str) -> Imported:
    """--hub ORG/NAME --file NAME.gguf: the header and tensor infos by range requests (opt-in network)."""
    from llmsize.importer.hub import fetch_gguf

    g, label = fetch_gguf(spec, filename)
    return _from_gguf(g, filename.split("/")[-1], [f"hub:{label}/{u.rsplit('/', 1)[-1]}" for u in g.files])


def _from_gguf(g, file_name: str, sources: list[str]) -> Imported:
    from llmsize.estimate.params import shared_cache_layers
    from llmsize.importer.exact import check_complete
    from llmsize.importer.gguf_model import exact_from_gguf, model_fields

    fields, notes = model_fields(g)
    release = _gguf_release(g)
    stem = file_name.removesuffix(".gguf")
    m = re.match(r"^(.*)-\d{5}-of-\d{5}$", stem)
    stem = m.group(1) if m else stem
    name = printable(str(g.metadata.get("general.name") or stem))
    try:
        spec = ModelSpec(id=slug(stem), name=name, family=g.arch.replace("-", ""), hf_repo=None,
                         sources=sources, params_official=1,
                         params_official_source="placeholder", params_official_includes="placeholder",
                         release=release.as_yaml(), **fields)
    except ValidationError as e:
        raise _spec_error(Path(str(g.files[0])), e) from None
    moe = next((x.mlp for x in spec.layer_groups if x.mlp is not None and x.mlp.kind == "moe"), None)
    exact = exact_from_gguf(g, spec.num_layers, spec.tie_word_embeddings,
                            (moe.experts_per_token, moe.num_experts) if moe else None,
                            shared_cache_layers(spec))
    problem = check_complete(exact, spec, sources[0])
    if problem:
        raise ConfigError(problem.replace("safetensors headers", "GGUF tensors").replace("config.json",
                                                                                        "its metadata"),
                          "The file's tensors do not match its metadata: damaged metadata, or a variant of the "
                          "architecture llmsize does not map.")
    spec = spec.model_copy(update={
        "params_official": exact.params_total,
        "params_official_source": "counted by llmsize from the GGUF tensor infos",
        "params_official_includes": "every tensor in the file (the text model; a vision tower is a separate file)"})
    out = Imported(spec, release, notes + release.notes, False, exact)
    out.notes.append(f"read from GGUF ({g.arch}, {len(g.tensors)} tensors in {len(g.files)} file(s)); "
                     f"weights by type: " + ", ".join(f"{k} {v / 1e6:,.1f} MB" for k, v in sorted(
                         exact.bytes_by_dtype.items(), key=lambda kv: -kv[1])[:4]))
    return out


def import_hub(spec: str, estimate_only: bool = False) -> Imported:
    """--hub ORG/NAME[@REVISION]: config.json and safetensors headers over HTTP (opt-in network)."""
    from llmsize.importer.hub import fetch

    raw, hf_quant, tensors, urls, label = fetch(spec)
    sources = [f"hub:{label}/config.json"] + ([f"hub:{label}/hf_quant_config.json"] if hf_quant else [])
    return build(raw, hf_quant, f"{label}/config.json", f"{label}/{'hf_quant_config' if hf_quant else 'config'}.json",
                 label.split("@")[0].split("/")[-1], sources, tensors, urls, estimate_only)
