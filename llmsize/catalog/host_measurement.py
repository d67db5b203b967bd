"""The host-memory dataset: published CPU-only llama.cpp decode runs whose source states the memory (type, rate and
populated channels), under measurements/host/, one YAML file per source.

Every row is one figure copied as printed (tok/s), with the verbatim excerpt it was copied from. It gives the share
of the host memory's peak bandwidth a CPU decode reaches (benchmarks/fit_speed.py fits one fraction over the rows:
runtimes/llamacpp.yaml `host`), which the partial-offload model (estimate/offload.py) applies to the layers and
experts left on the host. Read by benchmarks/fit_speed.py and the tests, never by `plan`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from llmsize.catalog.measurement import Source, dataset_dir, figure_in, validated
from llmsize.catalog.schema import Strict
from llmsize.errors import LlmsizeError


class HostRow(Strict):
    cpu: str
    memory_stated: str = Field(description="the source's own words on the memory, verbatim")
    host_memory: str = Field(description="the memory as TYPE-RATExCHANNELS (llmsize's --host-memory), channels the "
                             "populated 64-bit channels: as stated, or the platform's where the source names it")
    channels_from: str | None = Field(None, description="how the channel count was read where the source does not "
                                      "print it (the platform's channels)")
    threads: int | None = Field(None, strict=True, ge=1, le=4096)
    model: str
    model_id: str | None = None
    shape_of: str | None = Field(None, description="catalog id of a model with the same tensor shapes")
    format: str
    model_size: str | None = Field(None, description="the file's size as printed; the bytes a token reads where the "
                                   "catalog has no such model")
    test: str
    tok_s: float = Field(strict=True, gt=0, le=1e6)
    runtime_version: str | None = None
    verbatim: str | list[str]
    url: str | None = Field(None, pattern=r"^https?://")
    notes: str | None = None

    @model_validator(mode="after")
    def _figure(self):
        text = " | ".join(self.verbatim) if isinstance(self.verbatim, list) else self.verbatim
        if not figure_in(self.tok_s, text):
            raise ValueError(f"figure {self.tok_s} does not appear in the verbatim excerpt {self.verbatim!r}")
        from llmsize.estimate.host_memory import parse_host_memory

        try:
            parse_host_memory(self.host_memory)
        except LlmsizeError as e:
            raise ValueError(e.message) from None
        if self.model_id is None and self.shape_of is None and self.model_size is None:
            raise ValueError("a row needs a catalog model (model_id or shape_of) or the file's printed model_size")
        return self


class HostFile(Strict):
    source: Source
    runtime: str = Field(pattern="^llamacpp$")
    rows: list[HostRow] = Field(min_length=1)


def host_dir() -> Path:
    return dataset_dir() / "host"


def load_host_file(path: Path) -> HostFile:
    return validated(HostFile, path, "host measurement file",
                     "Fix the row: figures are copied as printed, with their verbatim excerpt and the memory stated.")


def load_host_dataset(folder: Path | None = None) -> dict[str, HostFile]:
    folder = folder or host_dir()
    return {p.stem: load_host_file(p) for p in sorted(folder.glob("*.yaml"))} if folder.is_dir() else {}
