"""User-supplied card prices for `llmsize compare --prices FILE` (none are shipped or invented).

    currency: EUR          # any label; printed as given
    prices:                # card id or alias -> price of one card
      h100-sxm: 27000
      rtx5090: 2300
"""

from __future__ import annotations

from pathlib import Path

import yaml

from llmsize.errors import CatalogError


def load_prices(path: Path, catalog) -> tuple[str, dict[str, float]]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogError(f"{path}: not found.", "Give a YAML file with `currency:` and `prices:`.") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise CatalogError(f"{path}: not readable YAML ({e.__class__.__name__}).") from None
    if not isinstance(data, dict) or not isinstance(data.get("prices"), dict):
        raise CatalogError(f"{path}: expected a mapping with a `prices:` mapping of card id -> price.")
    currency = str(data.get("currency") or "currency")
    out: dict[str, float] = {}
    for name, value in data["prices"].items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise CatalogError(f"{path}: price of `{name}` is {value!r}; expected a positive number.")
        try:
            gpu = catalog.gpu(str(name))
        except CatalogError:
            raise
        except Exception as e:  # UnknownNameError carries its own did-you-mean
            raise CatalogError(f"{path}: {getattr(e, 'message', e)}", getattr(e, "hint", None)) from None
        out[gpu.id] = float(value)
    return currency, out
