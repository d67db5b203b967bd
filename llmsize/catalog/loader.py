"""Find, load and validate catalog entries.

Search path, first match wins (so a user's file overrides a shipped one with the same id):
  1. each `--catalog DIR` given on the command line,
  2. each directory in $LLMSIZE_CATALOG (os.pathsep-separated),
  3. the catalog shipped in the wheel (llmsize/_catalog/), or the repository root in a source checkout.
A catalog directory holds `hardware/*.yaml` and/or `models/*.yaml`; the file stem is the entry id.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError

from llmsize.catalog.schema import GpuSpec, HostSpec, ModelSpec, RuntimeSpec
from llmsize.errors import CatalogError, UnknownNameError, shown
from llmsize.files import YAML_LIMIT_BYTES, FileError, is_dir, parse_yaml, read_text

ENV_VAR = "LLMSIZE_CATALOG"
KINDS = {"hardware": GpuSpec, "models": ModelSpec, "runtimes": RuntimeSpec, "hosts": HostSpec}
LIST_COMMAND = {"hardware": "llmsize gpus", "models": "llmsize models", "runtimes": "llmsize runtimes",
                "hosts": "llmsize hosts"}
WORD = {"hardware": "GPU", "models": "model", "runtimes": "runtime", "hosts": "host memory"}

T = TypeVar("T", bound=BaseModel)


def builtin_dirs() -> list[Path]:
    """The shipped catalog: inside the wheel, or the repository root for a source checkout."""
    package = Path(__file__).resolve().parent.parent
    shipped = package / "_catalog"
    if (shipped / "hardware").is_dir():
        return [shipped]
    return [package.parent]


def search_path(extra_dirs: list[Path] | None = None) -> list[Path]:
    """The user's folders (each once), then the shipped catalog (unless a user folder is it)."""
    dirs = [Path(d) for d in (extra_dirs or [])]
    env = os.environ.get(ENV_VAR, "")
    dirs += [Path(d) for d in env.split(os.pathsep) if d.strip()]
    out, seen = [], set()
    for d in dirs + builtin_dirs():
        if not is_dir(d, "catalog folder"):
            raise CatalogError(
                f"Catalog directory `{d}` {'is a file, not a folder' if d.exists() else 'does not exist'}.",
                f"Pass a folder holding hardware/ and/or models/ (via --catalog or ${ENV_VAR}).",
            )
        if d in dirs and not any((d / kind).is_dir() for kind in KINDS):  # a user's folder, e.g. mycat/hardware
            raise CatalogError(f"Catalog directory `{d}` holds none of {', '.join(k + '/' for k in KINDS)}.",
                               "Pass the folder above them (mycat, not mycat/hardware), via --catalog or "
                               f"${ENV_VAR}.")
        key = d.resolve()
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def normalize(name: str) -> str:
    """Spellings users type: 'RTX 5060 Ti', 'rtx-5060-ti', 'H200' all reduce to letters and digits."""
    return re.sub(r"[^a-z0-9.]", "", name.lower()).replace(".", "")


def _format_validation_error(path: Path | str, err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:3]:
        loc = ".".join(str(x) for x in e["loc"])
        got = e.get("input")
        got_txt = "" if isinstance(got, (dict, list)) or got is None else f" (got {got!r})"
        parts.append(f"`{loc or '<top>'}`: {e['msg']}{got_txt}")
    more = f" (+{len(err.errors()) - 3} more)" if len(err.errors()) > 3 else ""
    return f"{path}: " + "; ".join(parts) + more + "."


def load_entry(path: Path, schema: type[T]) -> T:
    """Parse one YAML file into `schema`, or raise CatalogError naming the file and the key. The file is read
    as llmsize.files reads every input: a regular file only, size-capped, duplicate keys and alias bombs
    refused."""
    try:
        text = read_text(path, YAML_LIMIT_BYTES, "catalog file")
    except FileError as e:
        raise CatalogError(e.message, e.hint) from None
    key = (path.stem, text, schema)
    entry = _PARSED.get(key)
    if entry is None:
        entry = _parse_entry(str(path), path.stem, text, schema)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[key] = entry
    return entry


# entries already made, by (stem, text, schema): a file whose stem and text are unchanged makes the same entry
# wherever it lies, and entries are frozen, so it is parsed and validated once per process (a process that
# loads the catalog again, or a fork whose parent loaded it); a file that fails is parsed, and fails, each time
_PARSED: dict[tuple, BaseModel] = {}
_PARSED_MAX = 4096


def _parse_entry(where: str, stem: str, text: str, schema: type[T]) -> T:
    try:
        data = parse_yaml(text, where, "catalog file")
    except FileError as e:
        raise CatalogError(e.message, e.hint) from None
    if not isinstance(data, dict):
        raise CatalogError(f"{where}: expected a mapping of keys, got {type(data).__name__}.",
                           "Fix the file (a catalog entry is `key: value` lines), or move it off the catalog path.")
    try:
        entry = schema.model_validate(data)
    except ValidationError as e:
        raise CatalogError(_format_validation_error(where, e),
                           "Fix the file or move it off the catalog path.") from None
    if entry.id != stem:
        raise CatalogError(f"{where}: `id` is `{entry.id}` but the file is named `{stem}.yaml`.",
                           "The file stem must equal the id.")
    return entry


class _ById(Mapping):
    """A shelf's entries by id, loaded on first read (Shelf.by_id)."""

    def __init__(self, shelf: Shelf):
        self._shelf = shelf

    def __getitem__(self, key: str):
        if key not in self._shelf.files:
            raise KeyError(key)
        return self._shelf.load(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._shelf.files)

    def __len__(self) -> int:
        return len(self._shelf.files)


class Shelf(Generic[T]):
    """All entries of one kind (hardware or models) along the search path."""

    def __init__(self, kind: str, dirs: list[Path]):
        self.kind = kind
        self.schema: type[T] = KINDS[kind]  # type: ignore[assignment]
        self.dirs = dirs
        self.builtin = {d.resolve() for d in builtin_dirs()}
        self._cache: dict[str, T] = {}
        self._checked = False
        self._user_stems: set[str] = set()  # ids whose file lies in a user's folder (files)

    @cached_property
    def files(self) -> dict[str, Path]:
        """id -> file. A user's file overrides the shipped one of the same id (that is what the search path is
        for); the same id in two of the user's folders, or two ids that read the same once case, dashes and
        dots are ignored (`rtx-5090`, `rtx5090`), are ambiguous: an error naming both files."""
        found: dict[str, Path] = {}
        norms: dict[str, str] = {}
        for d in self.dirs:
            sub = d / self.kind
            if not is_dir(sub, "catalog folder"):
                continue
            shipped = d.resolve() in self.builtin
            for p in sorted(sub.glob("*.yaml"), key=lambda p: p.name):  # one folder's: its names' order
                stem = p.stem
                if stem in found:
                    if shipped:
                        continue  # overridden by the user's file
                    raise CatalogError(f"{self.kind} id `{stem}` is defined twice: {found[stem]} and {p}.",
                                       "Keep one of them, or rename one (the file stem is the id).")
                norm = normalize(stem)
                other = norms.get(norm)
                if other is not None:
                    raise CatalogError(f"{self.kind} ids `{other}` ({found[other]}) and `{stem}` ({p}) are the "
                                       "same name once case, dashes and dots are ignored.", "Rename one of them.")
                found[stem] = p
                norms[norm] = stem
                if not shipped:
                    self._user_stems.add(stem)
        return found

    def load(self, stem: str) -> T:
        if stem not in self._cache:
            self._cache[stem] = load_entry(self.files[stem], self.schema)
        return self._cache[stem]

    def by_id(self) -> Mapping[str, T]:
        """id -> entry, each file parsed when its id is first read (a plan reads one runtime's file, not all):
        the same entries as {e.id: e for e in all()}, and the same refusal of a user's clashing names."""
        if self.has_user_files:
            self.all()
        return _ById(self)

    def all(self) -> list[T]:
        entries = [self.load(stem) for stem in self.files]
        self._check_names(entries)
        return entries

    def _check_names(self, entries: list[T]) -> None:
        """Every id and alias names one entry: an alias another entry also answers to (a copied card keeping
        the aliases of the shipped one) is an error naming both files, not a silent takeover."""
        if self._checked:
            return
        owner: dict[str, tuple[str, str]] = {}  # normalized name -> (entry id, how it is named)
        for e in entries:
            for name in [e.id, *e.aliases]:
                key = normalize(name)
                if not key:
                    raise CatalogError(f"{self.files[e.id]}: alias `{name}` has no letter or digit.",
                                       "Remove it.")
                prev = owner.get(key)
                if prev is not None and prev[0] != e.id:
                    raise CatalogError(
                        f"{self.kind}: `{name}` of {self.files[e.id]} also names `{prev[0]}` ({prev[1]} in "
                        f"{self.files[prev[0]]}).", "Remove or change the alias in one of the files.")
                owner.setdefault(key, (e.id, "its id" if name == e.id else f"alias `{name}`"))
        self._checked = True

    @cached_property
    def has_user_files(self) -> bool:
        """Whether a user's folder holds an entry of this kind: then a lookup by id checks every name first."""
        return any(stem in self._user_stems for stem in self.files)  # (files fills _user_stems)

    def get(self, name: str) -> T:
        key = name.strip().lower()
        if self.has_user_files:  # a user's copy that keeps a shipped entry's aliases is refused however it is named
            self.all()
        if key in self.files:
            return self.load(key)
        norm = normalize(key)
        for stem in self.files:
            if normalize(stem) == norm:
                return self.load(stem)
        # aliases need every entry parsed (and checked for clashes); only reached when the id was not typed exactly
        names: dict[str, str] = {}
        for entry in self.all():
            names[entry.id] = entry.id
            for alias in entry.aliases:
                names.setdefault(alias, entry.id)
        for entry in self.all():  # a model's Hugging Face repo id (what --emit lines print) names it too
            if getattr(entry, "hf_repo", None):
                names.setdefault(entry.hf_repo.lower(), entry.id)
        for alias, stem in names.items():
            if normalize(alias) == norm:
                return self.load(stem)
        for entry in self.all():  # suggested by its display name too ("nvidia h2000" is near "NVIDIA H200 SXM 141GB")
            if getattr(entry, "name", None):
                names.setdefault(entry.name, entry.id)
        self._unknown(name, names)

    def _unknown(self, name: str, names: dict[str, str]):
        by_norm = {normalize(n): names[n] for n in names}
        bare = re.sub(rf"^(?:{'|'.join(VENDOR_WORDS)})\W*", "", name.strip(), flags=re.I)  # "NVIDIA H2000" as "H2000"
        typed = [normalize(t)[:200] for t in dict.fromkeys((name, bare))]
        close = list(dict.fromkeys(c for t in typed for c in difflib.get_close_matches(t, list(by_norm), n=3,
                                                                                     cutoff=0.6)))
        close = sorted(close, key=lambda c: -max(difflib.SequenceMatcher(None, t, c).ratio() for t in typed))[:3]
        ids = list(dict.fromkeys(by_norm[c] for c in close))
        word = WORD[self.kind]
        suggestion = f" Did you mean {', '.join(f'`{i}`' for i in ids)}?" if ids else ""
        raise UnknownNameError(
            f"Unknown {word} `{shown(name)}`.{suggestion}",
            f"Run `{LIST_COMMAND[self.kind]}` to see them all.",
        )


VENDOR_WORDS = ("nvidia", "amd", "intel", "apple")  # a name typed as its vendor spells it, for suggestions


class Catalog:
    def __init__(self, extra_dirs: list[Path] | None = None):
        self.dirs = search_path(extra_dirs)
        self.hardware: Shelf[GpuSpec] = Shelf("hardware", self.dirs)
        self.models: Shelf[ModelSpec] = Shelf("models", self.dirs)
        self.runtimes: Shelf[RuntimeSpec] = Shelf("runtimes", self.dirs)
        self.hosts: Shelf[HostSpec] = Shelf("hosts", self.dirs)

    def gpu(self, name: str) -> GpuSpec:
        """A card by its id or an alias, else by the name its vendor or driver gives it ("NVIDIA H200", "NVIDIA H100
        80GB HBM3", the catalog's own "NVIDIA H100 SXM5 80GB"): the one card whose model number and qualifiers it
        carries (catalog.match), refused in one line where it names several."""
        try:
            return self.hardware.get(name)
        except UnknownNameError:
            from llmsize.catalog.match import (
                gpu_candidates,
                named_cards,
                of_typed_memory,
                typed_memory_gb,
                typed_memory_words,
                unknown_words,
            )

            same = [g for g in self.hardware.all() if g.name.lower() == " ".join(name.lower().split())]
            if len(same) == 1:  # the catalog's own name, typed as listed (a Jetson's has no model number)
                return same[0]
            found = named_cards(name, self.hardware.all())
            near = gpu_candidates(name, self.hardware.all()) if not found else []
            if near:  # its model number is a card's, another word is no card's of that number
                extra = unknown_words(name, near[0])
                raise UnknownNameError(
                    f"`{shown(name)}`: no catalog card of that model number is named with `{extra[0]}` ("
                    + ", ".join(f"`{g.id}`: {g.name}" for g in near) + ").",
                    "Name one of them by its id if it is yours, or add your card to hardware/ (README, \"Add a card "
                    "or a model\").") from None
            sized = of_typed_memory(name, found)
            if found and not sized:
                apple = all(g.vendor == "Apple" for g in found)  # one chip, sold with several amounts of RAM
                raise UnknownNameError(
                    f"`{shown(name)}`: no catalog card of that name has {typed_memory_words(name)}: "
                    + ", ".join(f"`{g.id}` ({g.name}, {g.memory_size:g} {g.memory_vendor_unit})" for g in found) + ".",
                    f"For a Mac of that RAM: --gpu {found[-1].id} --memory-gb {min(typed_memory_gb(name))} (plan, "
                    "fit)." if apple else "Name one of them by its id if it is yours, or add your card to hardware/ "
                    "(README, \"Add a card or a model\").") from None
            found = sized
            if len(found) == 1:
                return found[0]
            if not found:
                raise
            raise UnknownNameError(f"`{shown(name)}` names {len(found)} cards: "
                                   f"{', '.join(f'`{g.id}` ({g.name})' for g in found)}.",
                                   "Name one of them by its id.") from None

    def model(self, name: str) -> ModelSpec:
        return self.models.get(name)
