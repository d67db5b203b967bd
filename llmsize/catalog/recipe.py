"""A recipe's text, a format per component (`experts=nvfp4-w4a16,attention=fp8,lm_head=nvfp4-w4a16`): its parts,
checked for form, and the one order its id lists them in (llmsize.estimate.quant prices it)."""

from __future__ import annotations

from llmsize.errors import InvalidValueError, shown

# the components a recipe may name (estimate.params.COMPONENTS less those no format quantizes), in the order its id
# lists them and that picks its primary format: the experts' where it has them, else the dense MLP's, and so on
RECIPE_PARTS = ("experts", "mlp", "shared_experts", "attention", "attention_out", "ssm", "lm_head", "embedding")
# attention_out: the attention output projection (o_proj), which follows `attention` where a recipe does not name it


def check_components(components) -> None:
    bad = [c for c in components if c not in RECIPE_PARTS]
    if bad or not components:
        raise InvalidValueError(f"Recipe component `{shown(bad[0], 40) if bad else ''}` is not one a format can "
                                "quantize.",
                                f"Name components among: {', '.join(RECIPE_PARTS)} (e.g. experts=nvfp4,attention=fp8).")


def recipe_parts(text: str) -> dict[str, str]:
    """COMPONENT=FORMAT,... -> {component: format as written, stripped}."""
    parts: dict[str, str] = {}
    for item in text.split(","):
        c, eq, fid = item.partition("=")
        c = c.strip().lower()
        if not eq or not c or not fid.strip():
            raise InvalidValueError(f"Recipe part `{shown(item.strip(), 60)}` is not COMPONENT=FORMAT.",
                                    "Write a recipe as e.g. experts=nvfp4-w4a16,attention=fp8,lm_head=nvfp4-w4a16.")
        if c in parts:
            raise InvalidValueError(f"Recipe names `{shown(c, 40)}` twice.", "Give each component one format.")
        parts[c] = fid.strip()
    check_components(parts)
    return parts


def recipe_text(text: str) -> str:
    """The recipe as its id writes it: components in RECIPE_PARTS order, format ids in lower case."""
    parts = recipe_parts(text)
    return ",".join(f"{c}={parts[c].lower()}" for c in RECIPE_PARTS if c in parts)
