"""An imported model as a catalog YAML entry (models/ID.yaml), with where every figure came from."""

from __future__ import annotations

import math
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


RECIPE_TOLERANCE = 0.01  # benchmarks/gguf_sizes.py: llama-quantize's rules land within 1% of published files


def recipe_warning(im) -> str | None:
    """Where an imported GGUF file is not the file llama-quantize's recipe writes for its type (an imatrix or
    "UD" mix of its own): a catalog entry records the type, so plans of the entry size the recipe, not the file."""
    from llmsize.estimate.plan import resolve_format
    from llmsize.estimate.runtimes import gguf_exact
    from llmsize.estimate.weights import weight_bytes

    if im.exact is None or not gguf_exact(im.exact):
        return None
    recipe = weight_bytes(im.spec, *resolve_format(im.spec, None, None)).bytes_total
    gap = im.exact.bytes_total / recipe - 1
    if abs(gap) <= RECIPE_TOLERANCE:
        return None
    return (f"the file holds {_gb(im.exact.bytes_total)} GB where llama-quantize's {im.release.quant} recipe "
            f"writes {_gb(recipe)} GB ({gap:+.1%}): the entry sizes the recipe; plan the file itself for its own bytes")


def _gb(n_bytes: float) -> str:
    """GB (10^9 B) with two decimals, more below 1 GB so that two sizes a percent or more apart print apart (a small
    file's 0.0632 and 0.0600 GB, not 0.06 twice)."""
    gb = n_bytes / 1e9
    return f"{gb:,.{max(2, 2 - math.floor(math.log10(gb))) if gb > 0 else 2}f}"


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
    recipe = recipe_warning(im)
    head += [f"# warning: {printable(w)}" for w in [*getattr(im, "warnings", []), *([recipe] if recipe else [])]]
    head += [f"# note: {printable(n)}" for n in im.notes]
    text = "\n".join(head) + "\n" + yaml.safe_dump(ordered, sort_keys=False, width=110, allow_unicode=True)
    assert ModelSpec.model_validate(yaml.safe_load(text)) == spec  # what we write loads back as the same entry
    return text
