"""An imported model as a catalog YAML entry (models/ID.yaml), with where every figure came from."""

from __future__ import annotations

from datetime import date

import yaml

from llmsize.catalog.schema import ModelSpec
from llmsize.importer.hf_config import slug


def entry_yaml(im, model_id: str | None = None) -> str:
    spec = im.spec
    if model_id is not None:
        model_id = slug(model_id)
        spec = spec.model_copy(update={"id": model_id})
    data = spec.model_dump(mode="json", exclude_defaults=True)
    data["id"] = spec.id  # keep the key order readable: id first
    ordered = {k: data.pop(k) for k in ("id", "name", "family", "hf_repo", "sources") if k in data}
    ordered.update(data)
    head = [f"# Imported by `llmsize import` on {date.today().isoformat()}.",
            "# Layer groups come from config.json; check them against the architecture before relying on them."]
    head += [f"# note: {n}" for n in im.notes]
    text = "\n".join(head) + "\n" + yaml.safe_dump(ordered, sort_keys=False, width=110, allow_unicode=True)
    assert ModelSpec.model_validate(yaml.safe_load(text)) == spec  # what we write loads back as the same entry
    return text
