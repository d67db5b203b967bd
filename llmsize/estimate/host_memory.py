"""Host (system) memory bandwidth, for the part of a model llama.cpp leaves in RAM.

A configuration is written TYPE-RATExCHANNELS: DDR5-6000x2 is dual-channel DDR5 at 6,000 MT/s. A channel is 64
bits wide, the width of a DDR4 DIMM channel and of a DDR5 DIMM's two 32-bit subchannels together (JEDEC JESD79-4
and JESD79-5), so its peak is MT/s x 8 B: DDR5-6000x2 = 6000e6 x 8 x 2 = 96.0 GB/s. An LPDDR bus is given in
64-bit units too: a 256-bit LPDDR5X-8000 bus is LPDDR5X-8000x4 = 256 GB/s. Peaks, in GB (10^9 B) per second.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmsize.catalog.loader import normalize
from llmsize.errors import InvalidValueError

# (any count of digits up to nine: a rate or a channel count out of range is said as such, not as another form)
SPEC = re.compile(r"^(?P<type>(?:lp)?ddr[345]x?)-(?P<rate>[0-9]{1,9})x(?P<channels>[0-9]{1,9})$", re.IGNORECASE)
CHANNEL_BYTES = 8  # 64 bits per channel
RATE_RANGE = {"ddr3": (800, 2400), "ddr4": (1600, 5333), "ddr5": (3200, 12800), "lpddr4": (1600, 4800),
              "lpddr4x": (1600, 4800), "lpddr5": (4800, 6400), "lpddr5x": (6400, 10700)}


@dataclass(frozen=True)
class HostMemory:
    name: str
    bandwidth_gb_s: float
    basis: str

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_gb_s * 1e9


def from_spec(h) -> HostMemory:
    """A catalog platform (hosts/*.yaml)."""
    how = "as the vendor prints it" if h.bandwidth_printed else "peak"
    return HostMemory(h.id, h.bandwidth_gb_s, f"{h.name}: {h.channels} x {h.memory_type}-{h.data_rate_mt_s}, "
                                              f"{h.bandwidth_gb_s:.1f} GB/s {how}")


def parse_host_memory(text: str, platforms: dict | None = None) -> HostMemory:
    """`DDR5-6000x2` -> 96.0 GB/s, or a platform of the catalog by id or alias (`epyc-9004`); a one-line error
    naming the value otherwise."""
    key = normalize(text)  # as the catalog reads every name: Ryzen 9000, ryzen9000, ryzen-9000
    if platforms and key in platforms:
        return from_spec(platforms[key])
    m = SPEC.match(text.strip())
    if not m:
        import difflib

        ids = {normalize(h.id): h.id for h in (platforms or {}).values()}
        near = [ids[n] for n in difflib.get_close_matches(key, sorted(ids), n=2, cutoff=0.7)]
        raise InvalidValueError(f"--host-memory {text!r}: not TYPE-RATExCHANNELS nor a platform llmsize knows."
                                + (f" Did you mean {' or '.join(f'`{n}`' for n in near)}?" if near else ""),
                                "e.g. DDR5-6000x2 (dual-channel desktop), DDR4-3200x8, LPDDR5X-8000x4 (256-bit), "
                                "a platform from `llmsize hosts` (epyc-9004), or --host-bandwidth-gb-s.")
    kind, rate, channels = m.group("type").lower(), int(m.group("rate")), int(m.group("channels"))
    lo, hi = RATE_RANGE.get(kind, (0, 0))
    if not lo <= rate <= hi:
        raise InvalidValueError(f"--host-memory {text}: {rate} MT/s is not a {kind.upper()} data rate "
                                f"({lo}-{hi} MT/s).", "Check the modules' rating (e.g. DDR5-6000).")
    if not 1 <= channels <= 24:
        raise InvalidValueError(f"--host-memory {text}: {channels} channels is outside 1-24.",
                                "Count 64-bit channels: 2 on a desktop, 8-12 on a server socket.")
    bw = rate * 1e6 * CHANNEL_BYTES * channels / 1e9
    return HostMemory(f"{kind.upper()}-{rate}x{channels}", bw, f"{rate} MT/s x 8 B x {channels} channel(s) = {bw:.1f} GB/s peak")


def host_memory(spec: str | None, bandwidth_gb_s: float | None, platforms: dict | None = None) -> HostMemory | None:
    """--host-bandwidth-gb-s, else --host-memory; `platforms` maps ids and aliases to catalog entries."""
    if spec is not None and not spec.strip():
        raise InvalidValueError("--host-memory is empty.", "Give a host memory such as DDR5-6000x2 or a platform "
                                "(`llmsize hosts`), or drop --host-memory.")
    if bandwidth_gb_s is not None and spec:
        raise InvalidValueError(f"--host-memory {spec} and --host-bandwidth-gb-s {bandwidth_gb_s:g} both give the "
                                "host's bandwidth.", "Give one of them.")
    if bandwidth_gb_s is not None:
        return HostMemory(f"{bandwidth_gb_s:g} GB/s", bandwidth_gb_s, "given by --host-bandwidth-gb-s")
    return parse_host_memory(spec, platforms) if spec else None


def platforms(entries) -> dict:
    """The catalog's host platforms by their ids and aliases as catalog.loader.normalize reads names."""
    return {normalize(name): h for h in entries for name in (h.id, *h.aliases)}
