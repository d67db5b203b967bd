"""`llmsize import`: a checkpoint (folder, config.json, GGUF file, or --hub) as a catalog entry."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from llmsize.commands.shared import import_source, is_path, warn_import
from llmsize.errors import InvalidValueError, shown_path
from llmsize.options import (
    EstimateOnlyOpt,
    ForceOpt,
    HubFileOpt,
    HubOpt,
    IdOpt,
    ImportOutOpt,
)


def import_(
    path: Annotated[Optional[str], typer.Argument(help="Model folder (config.json [+ hf_quant_config.json] "
                                                   "[+ *.safetensors]), a config.json file, or a .gguf file "
                                                   "(the first of its splits).",
                                                   show_default=False)] = None,
    hub: HubOpt = None,
    hub_file: HubFileOpt = None,
    output: ImportOutOpt = None,
    model_id: IdOpt = None,
    force: ForceOpt = False,
    estimate_only: EstimateOnlyOpt = False,
):
    """Turn a local checkpoint, config.json or GGUF file into a catalog entry, with its sources.

    Examples:

    \b
      llmsize import ./Llama-3.1-8B-Instruct -o mycat/models/my-llama.yaml
      llmsize import ./config.json
      llmsize import ./Qwen3-8B-Q4_K_M.gguf -o mycat/models/qwen3-8b-q4.yaml
      llmsize import --hub Qwen/Qwen3-8B -o mycat/models/qwen3-8b.yaml
    """
    from llmsize.files import check_output, write_output
    from llmsize.importer.catalog_entry import check_id, entry_yaml, recipe_warning

    if path is not None and not path.strip():  # (a Path of '' would read as the current folder)
        raise InvalidValueError("The checkpoint path is empty.", "Give a model folder, a config.json or a .gguf file.")
    if path is not None and not is_path(path):
        raise InvalidValueError(f"`{shown_path(path)}` is not a file or folder.",
                                "Give a model folder or a config.json.")
    if model_id is not None:  # the id given, before a file name is made of it
        check_id(model_id, "--id")
    if output is not None:  # the destination and the id it gives are checked before anything is read
        if not output.name or str(output) == ".":  # `-o ''` (a Path of it reads as the current folder)
            raise InvalidValueError("-o names no file.",
                                    "Give the catalog file to write, e.g. -o mycat/models/ID.yaml.")
        if output.name == ".yaml":  # a dot file to pathlib, whose suffix is then ''
            raise InvalidValueError(f"-o `{output}` names no id before .yaml.",
                                    "Catalog files are `ID.yaml`, e.g. -o mycat/models/my-model.yaml.")
        if output.suffix != ".yaml":
            raise InvalidValueError(f"-o `{output}` must end in .yaml.", "Catalog files are `ID.yaml`.")
        check_output(output, "-o", force)
        model_id = model_id or output.stem
        if output.stem != model_id:
            raise InvalidValueError(f"-o `{output}` and --id `{model_id}` differ: a catalog file is named after its "
                                    "id.", f"Write it to {output.with_name(model_id + '.yaml')}, or drop --id.")
        check_id(model_id, "-o")
    im = import_source(path, hub, estimate_only, hub_file, command="import")
    warn_import(im)
    if (recipe := recipe_warning(im)) is not None:
        sys.stderr.write(f"Warning: {recipe}\n")
    text = entry_yaml(im, model_id)
    if output is None:
        sys.stdout.write(text)
        return
    write_output(output, text, "-o", force)
    from llmsize.catalog.loader import builtin_dirs

    if any((d / "models" / f"{model_id}.yaml").is_file() for d in builtin_dirs()):
        sys.stderr.write(f"Warning: `{model_id}` is a shipped model's id: under --catalog this file replaces the "
                         "shipped entry; give another id (-o or --id) to keep both.\n")
    if output.parent.name == "models":  # a catalog folder's models/ shelf
        hint = f"plan it with `llmsize plan {model_id} --gpu CARD --catalog {output.parent.parent}`"
    else:
        hint = (f"to plan it by id, put it in a catalog folder's models/ (say mycat/models/{output.name}) and "
                f"pass `--catalog mycat`")
    sys.stderr.write(f"Wrote {output} (id {model_id}); {hint}.\n")
