"""What the commands share: the console and its width, the catalog, JSON output, a card by name (or this
machine's), the model a command names (a catalog id, a path, or --hub), and the options several commands parse
alike."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

from llmsize.errors import InvalidValueError, UnknownNameError, shown
from llmsize.options import DEFAULT_CONTEXT
from llmsize.units import GB, GiB

MIN_WIDTH, MAX_WIDTH = 60, 100  # reports are laid out for 60 to 100 columns, whatever the terminal says
WIDE_WIDTH = 160  # a table of many columns (compare with prices, fleet) takes a wider terminal's columns


def term_width(cap: int = MAX_WIDTH) -> int:
    """The terminal's columns, held between MIN_WIDTH and `cap`."""
    return max(MIN_WIDTH, min(shutil.get_terminal_size((MAX_WIDTH, 24)).columns, cap))


def make_console(cap: int = MAX_WIDTH):
    """A rich console on the standard output, term_width(cap) wide."""
    from rich.console import Console

    width = term_width(cap)
    return Console(width=width, highlight=False, soft_wrap=False)


def load_catalog(dirs: list[Path] | None):
    from llmsize.catalog.loader import Catalog

    return Catalog(dirs)


def print_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


def llamacpp_constants(gpu, cat):
    """llama.cpp's fitted constants for the card's backend, None where the catalog has no llama.cpp entry or the card
    no backend."""
    from llmsize.estimate.runtimes import backend, constants

    spec = cat.runtimes.by_id().get("llamacpp")
    return constants(spec, backend(gpu), gpu) if spec is not None and backend(gpu) else None


def find_card(cat, name: str, memory_gb: float | None = None):
    """A catalog card, or with `local` this machine's, detected offline and said on stderr; with the memory the
    user gives it (--memory-gb) where given."""
    return find_local_card(cat, name, memory_gb)[0]


def find_local_card(cat, name: str, memory_gb: float | None = None):
    """(card, this machine's RAM in bytes or None): the RAM only with `local`, where it was read; the card with
    the memory the user gives it (--memory-gb: GpuSpec.with_memory_gb) where given."""
    if name.strip().lower() != "local":
        g, ram = cat.gpu(name), None
    else:
        from llmsize.importer.local_machine import detect

        found = detect(cat.hardware.all())
        sys.stderr.write(f"--gpu local: {found.found} -> {found.gpu.id}\n")
        g, ram = found.gpu, found.host_ram_bytes
    return (g.with_memory_gb(memory_gb) if memory_gb is not None else g), ram


def variant_note(cat, name: str, g, memory_gb: float | None) -> str | None:
    """Where the card name typed took one of a card's memory variants without saying a size: which, and the others'
    ids (catalog.match.sibling_note); None for `local`, with --memory-gb, or where the name says it."""
    if memory_gb is not None or name.strip().lower() == "local":
        return None
    from llmsize.catalog.match import sibling_note

    return sibling_note(name, g, cat.hardware)


def host_memory_of(spec, bandwidth_gb_s, cat):
    from llmsize.estimate.host_memory import host_memory, platforms

    return host_memory(spec, bandwidth_gb_s, platforms(cat.hosts.all()) if spec else None)


def one_format(as_json: bool, fmt: str) -> str:
    """The output --json or --format asks for ("json" with --json), refused where they ask for two."""
    if as_json and fmt not in ("table", "json"):
        raise InvalidValueError(f"--json and --format {fmt} ask for two outputs.", "Give one of them.")
    return "json" if as_json else fmt


def model_default_context(m) -> tuple[int, str | None]:
    """The context a plan sizes when --context is not given (plan.default_context of DEFAULT_CONTEXT), and why."""
    from llmsize.estimate.plan import default_context

    return default_context(m, DEFAULT_CONTEXT)


def gib_bytes(gib: float | None) -> float | None:
    """An option given in GiB, in bytes; None where it was not given."""
    return None if gib is None else gib * GiB


def gb_bytes(gb: float | None) -> float | None:
    """An option given in GB (10^9 B), in bytes; None where it was not given."""
    return None if gb is None else gb * GB


NODE_LINK_GB_S = 50.0  # --node-link-gb-s's default: a 400 Gb/s NIC per GPU


def pipeline_stages(pp: int | None, nodes: int | None, node_link_gb_s: float = NODE_LINK_GB_S) -> int:
    """--pp, or one stage per node with --nodes; both must agree, and a link between nodes is for several."""
    if pp is not None and nodes is not None and pp != nodes:
        raise InvalidValueError(f"--pp {pp} and --nodes {nodes} disagree: --nodes puts one pipeline stage on "
                                "each node.", "Give one of them.")
    if node_link_gb_s != NODE_LINK_GB_S and (nodes or 1) == 1:
        raise InvalidValueError(f"--node-link-gb-s {node_link_gb_s:g} sizes the link between nodes, and this plan "
                                "is one node.", "Add --nodes N (one pipeline stage a node), or drop --node-link-gb-s.")
    return pp if pp is not None else (nodes or 1)


# what each command that takes a model or --hub shows as an example when given neither (or both)
MODEL_EXAMPLES = {"plan": "llmsize plan gemma-4-12b --gpu h200",
                   "compare": "llmsize compare gemma-4-12b --vendor nvidia",
                   "roofline": "llmsize roofline gemma-4-12b --gpu h200", "kv": "llmsize kv llama-3.1-8b",
                   "import": "llmsize import ./my-model -o my-model.yaml"}


def import_source(model: str | None, hub: str | None, estimate_only: bool = False, hub_file: str | None = None,
                   command: str = "plan"):
    """An Imported for a path or --hub, None for a catalog name."""
    if (model is None) == (hub is None):
        what = "a checkpoint (a folder, config.json or .gguf file)" if command == "import" else \
            "a model (catalog id or path)"
        raise InvalidValueError(f"Give {what} or --hub ORG/NAME, not both or neither.",
                                f"e.g. `{MODEL_EXAMPLES[command]}` or `--hub google/gemma-3-27b-it`.")
    if hub_file is not None and hub is None:
        raise InvalidValueError(f"--file `{hub_file}` needs --hub ORG/NAME.",
                                "For a local file, pass its path as the model: `llmsize plan ./model.gguf ...`.")
    if hub is not None and hub_file is not None:
        from llmsize.importer.source import import_hub_gguf

        return import_hub_gguf(hub, hub_file)
    if hub is not None:
        from llmsize.importer.source import import_hub

        return import_hub(hub, estimate_only)
    if is_path(model):
        from llmsize.importer.source import import_model

        return import_model(model, estimate_only=estimate_only)
    return None


def warn_import(im) -> None:
    """An import's warnings (the plan is not what the files hold), before anything else is printed."""
    for w in (im.warnings if im is not None else []):
        sys.stderr.write(f"Warning: {w}\n")


def named_model(cat, model: str | None, hub: str | None = None, estimate_only: bool = False,
                hub_file: str | None = None, command: str = "plan"):
    """The model a command names: a catalog id, or a checkpoint imported from a path or --hub (its warnings said
    first)."""
    im = import_source(model, hub, estimate_only, hub_file, command=command)
    warn_import(im)
    return im.spec if im is not None else catalog_model(cat, model)


# ORG/NAME as the Hub spells a repo id
HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")


def catalog_model(cat, name: str):
    """A catalog model by id or alias; where none is, the hint also says how to plan a model the catalog lacks (its
    files, or --hub where the name is shaped like a Hub repo id)."""
    try:
        return cat.model(name)
    except UnknownNameError as e:
        hub = f"--hub {name}" if HUB_NAME.match(name.strip()) else "--hub ORG/NAME"
        hint = (f"{e.hint[:-1]}; a model the catalog lacks is read from its folder, config.json or .gguf file, or "
                f"from the Hub with `{shown(hub, 200)}` (network).")
        raise UnknownNameError(e.message, hint) from None


def is_path(name: str) -> bool:
    """A model argument naming something on disk (or shaped like a path) is imported, not looked up."""
    return os.path.exists(name) or name.endswith((".json", ".gguf")) or name.startswith((".", "/", "~"))


def card_list(cat, text: str | None) -> list:
    """--gpus: every card of the catalog when not given; else the named ones, none empty ("" or "a,,b" is refused:
    an empty list read as every card would size hundreds of cards nobody named)."""
    if text is None:
        return cat.hardware.all()
    items = [x.strip() for x in text.split(",")]
    if not any(items):
        raise InvalidValueError("--gpus is empty.", "Name cards (see `llmsize gpus`), or drop --gpus for every card.")
    if not all(items):
        raise InvalidValueError(f"--gpus {text!r} has an empty item.", "Separate card ids with single commas.")
    cards = {}  # a card named twice (an id and its alias) is one row
    for x in items:
        g = cat.gpu(x)
        cards.setdefault(g.id, g)
    return list(cards.values())


def refuse_cache(rid: str | None, flag: str, kv_dtype: str | None, instead: str | None = None) -> None:
    """A serving engine or llama.cpp named by `flag` cannot store its cache in `kv_dtype`: refused (a what-if needs
    no engine; `instead`: what else the hint offers, by default dropping `flag` for the what-if)."""
    from llmsize.estimate.capacity import LLAMACPP_RUNTIMES
    from llmsize.estimate.quant import runtime_kv_refusal
    from llmsize.estimate.runtimes import RUNTIME_NAMES

    if rid not in ("vllm", "sglang", "trtllm", *LLAMACPP_RUNTIMES) or not kv_dtype:
        return
    refused = runtime_kv_refusal(rid, kv_dtype)
    if refused:
        llama = rid in LLAMACPP_RUNTIMES  # its quantized caches (q8_0, q4_0 ...) are plan's --cache-type-k/-v
        otherwise = instead or f"drop {flag} for the format's what-if"
        more = (" (`plan --cache-type-k q8_0 --cache-type-v q8_0 --flash-attn on` prices llama.cpp's quantized "
                "caches)") if llama else ""
        raise InvalidValueError(
            f"--kv-dtype {kv_dtype} with {flag}: {RUNTIME_NAMES['llamacpp' if llama else rid]} does not store its "
            f"cache in {kv_dtype.lower()}.", f"Give --kv-dtype {', '.join(refused[1])}, or {otherwise}{more}.")


def filtered_cards(cat, gpus: str | None, vendor: str | None, segment: str | None) -> list:
    """--gpus (card_list: every card when not given), less those of another --vendor or --segment; none left is
    refused."""
    cards = card_list(cat, gpus)
    if vendor:
        cards = [g for g in cards if g.vendor.lower() == vendor]
    if segment:
        cards = [g for g in cards if g.segment == segment]
    if not cards:
        raise InvalidValueError("No card matches these filters.", "Loosen --vendor / --segment / --gpus.")
    return cards


def fleet_prices(path: Path, cat, cards: list) -> tuple[str, dict[str, float] | None, dict[str, float] | None]:
    """fleet's --prices: (currency, card id -> price of a card-hour, card id -> price of a card), the sections the
    file has, refused where they price none of `cards`."""
    from llmsize.catalog.prices import load_fleet_prices

    currency, hourly, bought = load_fleet_prices(path, cat)
    if not any(g.id in (hourly or {}) or g.id in (bought or {}) for g in cards):
        raise InvalidValueError(f"--prices `{path}` has no price for the cards sized "
                                f"({', '.join(g.id for g in cards[:6])}{', ...' if len(cards) > 6 else ''}).",
                                "Add their `hourly:` prices (a card-hour's) or `prices:` (a card's), or drop --prices.")
    return currency, hourly, bought


def card_prices(path: Path, cat, cards: list, hourly: bool = False) -> tuple[str, dict[str, float]]:
    """--prices read (catalog.prices.load_prices: a card's price, or with `hourly` a card-hour's), refused where it
    prices none of `cards`: (currency, card id -> price)."""
    from llmsize.catalog.prices import load_prices

    currency, prices = load_prices(path, cat, "hourly") if hourly else load_prices(path, cat)
    if not any(g.id in prices for g in cards):
        what, verb, field = ("hourly price", "sized", "`hourly:` prices") if hourly else ("price", "compared",
                                                                                         "`prices:`")
        raise InvalidValueError(f"--prices `{path}` has no {what} for the cards {verb} "
                                f"({', '.join(g.id for g in cards[:6])}{', ...' if len(cards) > 6 else ''}).",
                                f"Add their {field}, or drop --prices.")
    return currency, prices
