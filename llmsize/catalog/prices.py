"""User-supplied card prices for `llmsize compare --prices FILE` and `llmsize fleet --prices FILE` (none are
shipped or invented).

    currency: EUR          # any label; printed as given
    prices:                # card id or alias -> price of one card (compare: per currency)
      h100-sxm: 27000
      rtx5090: 2300
    hourly:                # card id or alias -> price of one card-hour (fleet: cost per month and per token)
      h100-sxm: 2.10
"""

from __future__ import annotations

import math
import re
import unicodedata
from pathlib import Path

from llmsize.errors import CatalogError, LlmsizeError, shown
from llmsize.files import read_yaml

PRICE_MIN, PRICE_MAX = 1e-3, 1e12  # per card, in any currency: a range in which every division stays finite


def load_prices(path: Path, catalog, key: str = "prices") -> tuple[str, dict[str, float]]:
    """(currency, card id -> price of one card, or of one card-hour with key="hourly"). Every value is checked: a
    finite positive number, a known card, each card once (an alias and its id are the same card)."""
    data = read_yaml(path, "--prices")
    what = "card id -> price" if key == "prices" else "card id -> price of one card-hour"
    if isinstance(data, dict) and data.get(key) == {}:
        raise CatalogError(f"--prices `{path}`: `{key}:` is empty.", f"Give it {what} for the cards asked about.")
    if not isinstance(data, dict) or not isinstance(data.get(key), dict):
        raise CatalogError(f"--prices `{path}`: expected a mapping with a `{key}:` mapping of {what}.",
                           "See `llmsize compare --help` / `llmsize fleet --help` for the format.")
    unknown = sorted(str(k) for k in data if k not in ("currency", "prices", "hourly"))
    if unknown:
        raise CatalogError(f"--prices `{path}`: unknown key `{unknown[0]}`.",
                           "Only `currency:`, `prices:` and `hourly:`.")
    currency = data.get("currency", "currency")
    if currency is None or currency == "":
        raise CatalogError(f"--prices `{path}`: `currency:` is empty.", "Use a label such as EUR or USD, or drop the "
                           "key.")
    # letters, digits and currency signs only: the label goes into Markdown and HTML headers as it is
    if not isinstance(currency, str) or not 0 < len(currency) <= 16 or \
            not all(ch.isalnum() or ch in " $.-" or unicodedata.category(ch) == "Sc" for ch in currency):
        raise CatalogError(f"--prices `{path}`: currency {str(currency)[:40]!r} is not a short label (letters, "
                           "digits and currency signs, at most 16).", "Use a label such as EUR or USD.")
    for other in ("prices", "hourly"):  # the section not asked for is checked too: one file, one verdict
        if other != key and other in data:
            if not isinstance(data[other], dict):
                raise CatalogError(f"--prices `{path}`: `{other}:` is not a mapping of card id -> price.",
                                   "See `llmsize compare --help` / `llmsize fleet --help` for the format.")
            _section(path, data[other], other, catalog)
    return currency, _section(path, data[key], key, catalog)


def _section(path: Path, section: dict, key: str, catalog) -> dict[str, float]:
    """One section of the file (prices or hourly), card id -> price, each value checked."""
    out: dict[str, float] = {}
    named: dict[str, str] = {}
    for name, value in section.items():
        label = str(name)[:60]
        try:
            number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        except OverflowError:  # a 400-digit integer
            number = None
        if number is None or not math.isfinite(number) or not PRICE_MIN <= number <= PRICE_MAX:
            # YAML 1.1 (PyYAML's) reads 2e3 and 1e5 as text, a float only with a point and a signed exponent
            text_float = isinstance(value, str) and re.fullmatch(r"[0-9]+[eE][0-9]+", value.strip())
            raise CatalogError(f"--prices `{path}`: price of `{shown(label)}` is {shown(repr(value), 40)}; expected a "
                               f"number from {PRICE_MIN:g} to {PRICE_MAX:,.0f}"
                               + (f" (YAML reads {value.strip()} as text: write {float(value):.1f})" if text_float
                                  and PRICE_MIN <= float(value) <= PRICE_MAX else "") + ".",
                               "Give the price of one card." if key == "prices" else "Give the price of one card-hour.")
        try:
            gpu = catalog.gpu(str(name))
        except CatalogError:
            raise
        except LlmsizeError as e:  # UnknownNameError carries its own did-you-mean
            raise CatalogError(f"--prices `{path}`: {e.message}", e.hint) from None
        if gpu.id in out:
            raise CatalogError(f"--prices `{path}`: `{label}` and `{named[gpu.id]}` are the same card "
                               f"({gpu.id}).", "Keep one price per card.")
        out[gpu.id], named[gpu.id] = number, label
    return out


def load_fleet_prices(path: Path, catalog) -> tuple[str, dict[str, float] | None, dict[str, float] | None]:
    """fleet's prices: (currency, card id -> price of one card-hour, card id -> price of one card), either section
    absent as None, at least one given (load_prices checks each)."""
    data = read_yaml(path, "--prices")
    if not isinstance(data, dict) or not any(isinstance(data.get(k), dict) for k in ("hourly", "prices")):
        raise CatalogError(f"--prices `{path}`: expected a mapping with an `hourly:` mapping of card id -> price of "
                           "one card-hour, or a `prices:` mapping of card id -> price of one card.",
                           "See `llmsize fleet --help` for the format.")
    currency, hourly = load_prices(path, catalog, "hourly") if "hourly" in data else (None, None)
    # an empty `prices: {}` beside hourly prices is none (load_prices checked the section beside the one it read)
    currency, bought = load_prices(path, catalog, "prices") if data.get("prices") or hourly is None \
        else (currency, None)
    return currency, hourly, bought
