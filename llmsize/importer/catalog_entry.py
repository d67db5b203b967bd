"""An imported model as a catalog YAML entry (models/ID.yaml), with where every figure came from."""

from __future__ import annotations

import re
from datetime import date

import yaml

from llmsize.catalog.schema import ModelSpec
from llmsize.errors import InvalidValueError, printable, shown
from llmsize.importer.hf_config import slug

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")  # ModelSpec.id's pattern
MAX_ID_CHARS = 120


def check_id(model_id: str, what: str = "--id") -> str:
    """A catalog id as the schema accepts it, refused before anything is written otherwise."""
    if not ID_PATTERN.match(model_id) or len(model_id) > MAX_ID_CHARS:
        raise InvalidValueError(f"{what} `{shown(model_id, MAX_ID_CHARS)}` is not a catalog id: lower-case letters, "
                                f"digits, '.' and '-', starting with a letter or digit, at most {MAX_ID_CHARS} "
                                "characters.", f"e.g. `{slug(model_id)[:MAX_ID_CHARS]}`.")
    return model_id


def entry_yaml(im, model_id: str | None = None) -> str:
    spec = im.spec
    if model_id is not None:
        spec = spec.model_copy(update={"id": check_id(model_id)})
    data = spec.model_dump(mode="json", exclude_defaults=True)
    data["id"] = spec.id  # keep the key order readable: id first
    ordered = {k: data.pop(k) for k in ("id", "name", "family", "hf_repo", "sources") if k in data}
    ordered.update(data)
    gguf = getattr(im.release, "method", "").startswith(("general.file_type", "GGUF"))
    head = [f"# Imported by `llmsize import` on {date.today().isoformat()}.",
            f"# Layer groups come from {'the GGUF tensors and metadata' if gguf else 'config.json'}; "
            "check them against the architecture before relying on them."]
    head += [f"# warning: {printable(w)}" for w in getattr(im, "warnings", [])]  # a comment stays one line
    head += [f"# note: {printable(n)}" for n in im.notes]
    text = "\n".join(head) + "\n" + yaml.safe_dump(ordered, sort_keys=False, width=110, allow_unicode=True)
    assert ModelSpec.model_validate(yaml.safe_load(text)) == spec  # what we write loads back as the same entry
    return text
