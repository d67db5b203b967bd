"""Units. GB = 10^9 B (bandwidth, and every "GB" we print); GiB = 2^30 B.

Counting is done in bits and bytes; conversion to a human unit happens only when printing.
"""

GB = 10**9
GiB = 2**30
TB = 10**12
MB = 10**6
TFLOPS = 10**12


def bits_to_bytes(bits: float) -> float:
    return bits / 8


def gb(nbytes: float) -> float:
    """Bytes -> GB (10^9)."""
    return nbytes / GB


def gib(nbytes: float) -> float:
    """Bytes -> GiB (2^30)."""
    return nbytes / GiB


def fmt_seconds(s: float | None, ms_digits: int = 2) -> str:
    """A time: milliseconds under a second (`ms_digits` decimals), else seconds to 2; "unknown" for None."""
    if s is None:
        return "unknown"
    return f"{s * 1e3:,.{ms_digits}f} ms" if s < 1 else f"{s:,.2f} s"


def fmt_bytes(nbytes: float | None, unit: str = "GB", digits: int = 2) -> str:
    """Format bytes in GB (default) or GiB/MB/KB, always naming the unit."""
    if nbytes is None:
        return "n/a"
    scale = {"GB": GB, "GiB": GiB, "MB": MB, "KB": 10**3, "KiB": 2**10, "MiB": 2**20, "B": 1}[unit]
    return f"{nbytes / scale:,.{digits}f} {unit}"


def fmt_bytes_auto(nbytes: float | None) -> str:
    """Pick GB, MB or KB (all decimal) so the number reads well."""
    if nbytes is None:
        return "n/a"
    if abs(nbytes) >= 0.1 * GB:
        return fmt_bytes(nbytes, "GB")
    if abs(nbytes) >= 0.1 * MB:
        return fmt_bytes(nbytes, "MB")
    return fmt_bytes(nbytes, "KB", 1)


def fmt_binary_auto(nbytes: float) -> str:
    """Pick GiB, MiB or KiB so the number reads well (a checkpoint of a few MB is not 0.00 GiB)."""
    if abs(nbytes) >= 0.1 * GiB:
        return fmt_bytes(nbytes, "GiB")
    if abs(nbytes) >= 0.1 * 2**20:
        return fmt_bytes(nbytes, "MiB")
    return fmt_bytes(nbytes, "KiB", 1)


def column_unit(values: list[float]) -> str:
    """One decimal unit for a whole column (GB, MB or KB), picked by its largest value, so a column never mixes
    units."""
    top = max((abs(v) for v in values if v is not None), default=0.0)
    return "GB" if top >= 0.1 * GB else ("MB" if top >= 0.1 * MB else "KB")


def fmt_tokens(n: float | None) -> str:
    if n is None:
        return "n/a"
    return f"{n:,.0f}"


def fmt_tokens_k(n: int) -> str:
    """A token count for a narrow column: thousands as K (K = 1,000) from 10,000 up ("262K"), exact below."""
    return f"{n / 1000:,.0f}K" if n >= 10000 else f"{n:,}"


def fmt_params(n: float) -> str:
    if n >= 1e9:
        return f"{n / 1e9:,.2f} B"
    return f"{n / 1e6:,.1f} M"
