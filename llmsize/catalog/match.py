"""Find the catalog entry for a card from the name its driver reports (NVML), e.g. 'NVIDIA H200' -> h200-sxm.

Torch-free. The model number (h200, a100, 5060, l40s, t4) must appear in the entry's name, id or aliases,
and the qualifiers that split one chip into products (Ti, SUPER, NVL, Ada, PRO, PCIe...) must agree both ways;
among several candidates the one whose memory is closest to the reported total wins (A100 40GB vs 80GB),
within 10%. No match is a normal answer: the card is "not in the catalog".
"""

from __future__ import annotations

import re

from llmsize.catalog.schema import GpuSpec

# "pcie" splits H100/A100 PCIe from SXM, whose NVML names carry no form factor ("NVIDIA H100 80GB HBM3")
QUALIFIERS = {"ti", "super", "nvl", "ada", "pro", "max", "ultra", "mobile", "laptop", "pcie", "sff", "server",
              "fhhl",  # the full-height half-length V100 (lower clocks and bandwidth) is not the SXM2 card
              "xt", "xtx", "gre"}  # AMD's: an RX 6800 is not the 6800 XT, nor a 7900 GRE the XT
# words a name typed by hand may carry that no entry needs to (the vendor, its brands, "GPU")
GENERIC_WORDS = {"nvidia", "amd", "apple", "intel", "geforce", "radeon", "instinct", "tesla", "quadro", "graphics",
                 "gpu", "card"}
MEMORY_TOLERANCE = 0.10  # drivers report up to 6.3% less than the vendor's size (ECC); an RTX 3080 12 GB is not
# the 10 GB card (20% apart), nor an A100 40 GB the 80 GB one
_NOISE = re.compile(r"^(\d+gb|sxm\d*|hbm\d*e?|pcie|gddr\d*x?)$")


def name_tokens(text: str) -> set[str]:
    """The words and numbers of a card's name, lower-case ("NVIDIA A100-SXM4-80GB": nvidia, a100, sxm4, 80gb)."""
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _card_tokens(g: GpuSpec) -> set[str]:
    """Every word of a card's name, id and aliases."""
    return name_tokens(" ".join([g.name, g.id.replace("-", " "), *g.aliases]))


def _model_numbers(tokens: set[str]) -> set[str]:
    return {t for t in tokens if re.search(r"\d", t) and not _NOISE.match(t)}


def gpu_candidates(reported_name: str, gpus: list[GpuSpec]) -> list[GpuSpec]:
    """The catalog cards whose names carry the reported name's model numbers and qualifiers (Ti, SUPER, ...):
    several where one chip is sold with several memory sizes (an RTX 5060 Ti of 16 or 8 GB)."""
    want = name_tokens(reported_name)
    numbers, quals = _model_numbers(want), want & QUALIFIERS
    if not numbers:
        return []
    candidates = []
    for g in gpus:
        have = _card_tokens(g)
        # the product's qualifiers are its name's and id's: an alias may name its architecture ("blackwell-ultra" for
        # the B300, whose driver reports "NVIDIA B300 SXM6 AC")
        if numbers <= have and (name_tokens(f"{g.name} {g.id.replace('-', ' ')}") & QUALIFIERS) == quals:
            candidates.append(g)
    return candidates


def unknown_words(typed: str, g: GpuSpec) -> list[str]:
    """The words of a name typed by hand that card `g`'s names, ids and aliases do not carry, less its memory size,
    form factor and the vendor's generic words ("fake" in "fake h200", "nosuch" in "nosuch-h100")."""
    have = _card_tokens(g)
    return sorted(t for t in name_tokens(typed) - have - GENERIC_WORDS if not _NOISE.match(t))


def named_cards(typed: str, gpus: list[GpuSpec]) -> list[GpuSpec]:
    """The cards a name typed by hand names (gpu_candidates) whose names carry every other word typed
    (unknown_words: a word none carries names another card), narrowed where several share its model number to the
    one whose names carry every word typed ("AMD Radeon RX 7900 XTX", nvidia-smi's "NVIDIA A100-SXM4-80GB")."""
    found = [g for g in gpu_candidates(typed, gpus) if not unknown_words(typed, g)]
    whole = [g for g in found if name_tokens(typed) <= _card_tokens(g)] if len(found) > 1 else []
    return whole if len(whole) == 1 else found


def typed_memory_gb(typed: str) -> set[int]:
    """The memory sizes a name typed by hand states ("RTX 3080 12GB": {12}; none in "RTX 3080")."""
    return {int(t[:-2]) for t in name_tokens(typed) if re.fullmatch(r"\d+gb", t)}


def typed_memory_words(typed: str) -> str:
    return " or ".join(f"{n} GB" for n in sorted(typed_memory_gb(typed)))


def of_typed_memory(typed: str, cards: list[GpuSpec]) -> list[GpuSpec]:
    """The cards whose memory is a size the typed name states, all of them where it states none: an RTX 3080 12GB,
    a 48 GB RTX 4090 or a 32 GB M2 Max is none of the catalog's cards of that name, whose sizes differ. A size in
    the card's own names is its name, not its memory (the GH200 480GB, a 96 GB GPU beside 480 GB of LPDDR5X)."""
    sizes = typed_memory_gb(typed)
    return [g for g in cards if not sizes or round(g.memory_size) in sizes
            or all(f"{n}gb" in _card_tokens(g) for n in sizes)]


_MEMORY_IN_NAME = re.compile(r"\s*\b\d+\s?GB\b", re.I)


def memory_siblings(card: GpuSpec, shelf) -> list[GpuSpec]:
    """The catalog's cards that differ from `card` by their memory alone (its name without the size: the RTX 4060 Ti
    8GB beside the 16GB), read from the few files whose ids start as its does (not the whole shelf, a plan's start)."""
    from llmsize.files import read_text

    def base(name: str) -> str:
        return _MEMORY_IN_NAME.sub("", name.strip().strip("'\"")).strip().lower()

    key = base(card.name)
    out = []
    for stem, path in shelf.files.items():
        if stem == card.id or stem[:5] != card.id[:5]:
            continue
        named = re.search(r"(?m)^name:\s*(.+?)\s*$", read_text(path, 1 << 20, "catalog file"))  # its name line:
        if named and base(named.group(1)) == key:  # the file parsed only where it names the same card
            other = shelf.load(stem)
            if base(other.name) == key and other.memory_size != card.memory_size:
                out.append(other)
    return out


def sibling_note(typed: str, card: GpuSpec, shelf) -> str | None:
    """Where a name typed without a memory size took one of a card's memory variants: which it took and the others'
    ids (`--gpu rtx4060ti` is the 16 GB card; an 8 GB owner plans rtx4060ti8); None where the name says the size or
    the card has no such sibling."""
    size = round(card.memory_size)
    if str(size) in re.findall(r"\d+", typed) or typed.strip().lower() == card.id and re.search(r"\d+gb$", card.id):
        return None
    others = memory_siblings(card, shelf)
    if not others:
        return None
    return (f"--gpu {typed.strip()}: the {card.memory_size:g} {card.memory_vendor_unit} card ({card.id}); "
            + ", ".join(f"the {o.memory_size:g} {o.memory_vendor_unit} one is {o.id}" for o in others))


def match_gpu(reported_name: str, reported_memory_bytes: int | None, gpus: list[GpuSpec]) -> GpuSpec | None:
    candidates = gpu_candidates(reported_name, gpus)
    if not candidates:
        return None
    if reported_memory_bytes is None:
        return candidates[0] if len(candidates) == 1 else None

    def distance(g: GpuSpec) -> float:
        return abs(g.memory_driver_bytes - reported_memory_bytes) / reported_memory_bytes

    best = min(candidates, key=distance)
    return best if distance(best) <= MEMORY_TOLERANCE else None
