"""Request lengths as a distribution, for fleet's --isl and --osl: a fixed count, a lognormal given by its median
and 95th percentile (`3000:p95=12000`), or the lengths of a CSV file. The cache holds the long tail, not the mean,
so fleet sizes with the distribution's points, its spread and its p99.

    lognormal: ln X ~ N(mu, sigma^2), median = e^mu, p95 = e^(mu + 1.6449 sigma)  =>  sigma = ln(p95 / median) / 1.6449
    points: POINTS equally likely values, each the mean of the distribution over its slice of probability
    [i / POINTS, (i + 1) / POINTS), lengths past the p99 taken as the p99 (the longest request a replica is sized to
    take: fleet's --emit sets p99 + p99 as the context), so no point exceeds it. They keep the mean of that
    distribution (a slice's midpoint quantile instead fell 3-4% under it for a lognormal of p95 / median = 4: its
    tail lies in the last slice) and give its variance and any mean of a function of the length. A lognormal
    slice's mean: E[X; a < Z < b] = e^(mu + sigma^2 / 2) (Phi(b - sigma) - Phi(a - sigma)) with Z the standard
    normal of ln X, below the p99's z; above it, the p99 times the slice's probability there; a CSV's: its sorted
    lengths, each at most the p99, integrated over the slice.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

from llmsize.errors import InvalidValueError, shown

POINTS = 16
Z95 = NormalDist().inv_cdf(0.95)  # 1.6449
MAX_TOKENS = 1 << 24
COUNT = re.compile(r"\d{1,8}")  # a CSV cell of tokens
CSV_LIMIT_BYTES = 8 << 20  # ~1.5 million lengths: any real request log sample; its quantiles are what count


@dataclass(frozen=True)
class Lengths:
    """Token counts of requests: `points` equally likely values (sorted), and the tail a cache must hold."""
    points: tuple[int, ...]
    p95: int
    p99: int
    described: str

    @property
    def mean(self) -> float:
        return sum(self.points) / len(self.points)

    @property
    def variance(self) -> float:
        m = self.mean
        return sum((x - m) ** 2 for x in self.points) / len(self.points)

    @property
    def fixed(self) -> bool:
        return len(set(self.points)) == 1


def fixed(tokens: int) -> Lengths:
    return Lengths((tokens,) * POINTS, tokens, tokens, f"{tokens:,}")


def _tokens(x: float) -> int:
    return max(1, min(MAX_TOKENS, round(x)))


def _lognormal(median: float, p95: float) -> Lengths:
    sigma = math.log(p95 / median) / Z95
    n, z = NormalDist(math.log(median), sigma), NormalDist()
    q = lambda p: _tokens(math.exp(n.inv_cdf(p)))  # noqa: E731
    mean = math.exp(math.log(median) + sigma ** 2 / 2)
    edges = [-math.inf] + [z.inv_cdf(i / POINTS) for i in range(1, POINTS)] + [math.inf]
    cdf = lambda x: 0.0 if x == -math.inf else 1.0 if x == math.inf else z.cdf(x)  # noqa: E731
    z99, cap = z.inv_cdf(0.99), math.exp(n.inv_cdf(0.99))

    def slice_mean(a: float, b: float) -> float:  # of min(X, p99) over a < Z < b, times POINTS
        below = mean * (cdf(min(b, z99) - sigma) - cdf(a - sigma)) if a < z99 else 0.0
        above = cap * (cdf(b) - cdf(max(a, z99))) if b > z99 else 0.0
        return (below + above) * POINTS
    pts = tuple(_tokens(slice_mean(a, b)) for a, b in zip(edges, edges[1:]))
    return Lengths(pts, q(0.95), q(0.99), f"lognormal, median {median:,.0f}, p95 {p95:,.0f}")


def _quantile(sorted_vals: list[int], p: float) -> int:
    return sorted_vals[min(len(sorted_vals) - 1, int(p * len(sorted_vals)))]


def _slice_means(sorted_vals: list[int]) -> tuple[int, ...]:
    """The sample's mean over each of the POINTS slices of its probability: the integral of its quantile function
    (a step of 1 / n a length) over [i / POINTS, (i + 1) / POINTS), times POINTS."""
    n = len(sorted_vals)
    prefix = [0]
    for v in sorted_vals:
        prefix.append(prefix[-1] + v)

    def integral(t: float) -> float:  # of the quantile function from 0 to t
        k = min(n, int(t * n))
        return prefix[k] / n + ((t - k / n) * sorted_vals[k] if k < n else 0.0)
    return tuple(_tokens((integral((i + 1) / POINTS) - integral(i / POINTS)) * POINTS) for i in range(POINTS))


def _from_csv(path: Path, column: str, option: str) -> Lengths:
    from llmsize.files import read_text

    text = read_text(path, CSV_LIMIT_BYTES, f"{option} file").lstrip("\ufeff")  # a spreadsheet's byte-order mark
    import csv
    import io

    # (line number, cells) of the lines that hold anything: blank lines carry nothing. Lines end in \n, \r\n or a
    # lone \r (universal newlines: the csv module refuses a bare \r inside an unquoted field)
    try:
        rows = [(n, r) for n, r in enumerate(csv.reader(io.StringIO(text, newline=None), strict=True), start=1)
                if (r[0].strip() if len(r) == 1 else any(c.strip() for c in r))]  # (one cell: ~1.5 M lines)
    except csv.Error as e:  # what the csv module cannot read strictly (a quote left open, text after a quote)
        raise InvalidValueError(f"{option} {shown(path)}: not a CSV file ({e}).", "Give one length a line, or a "
                                f"column named {column}.") from None
    if not rows:
        raise InvalidValueError(f"{option} {path}: the file is empty.", "Give one length a line, or a column "
                                f"named {column}.")
    head = [h.strip().lower() for h in rows[0][1]]
    # a first cell that is a number (100.5, -3) is a bad length on line 1, not a header: the loop below says so
    if column not in head and not re.fullmatch(r"[-+]?[\d.]+(?:e[-+]?\d+)?", head[0] if head else ""):
        raise InvalidValueError(f"{option} {path}: its header ({', '.join(h[:20] for h in head[:6])}) has no "
                                f"`{column}` column.", f"Name the column {column}, or give one length a line.")
    if head.count(column) > 1:
        raise InvalidValueError(f"{option} {path}: its header names `{column}` {head.count(column)} times.",
                                f"Keep one column named {column}.")
    if column not in head and any(len(r) > 1 and sum(1 for c in r if c.strip()) > 1 for _, r in rows):
        # (3000,500 a line with no header: the prompts' and the answers' lengths? which one --isl means is unsaid)
        raise InvalidValueError(f"{option} {path}: its lines hold several values and no header names them.",
                                "Name the columns in a first line (isl,osl), or give one length a line.")
    col, body = (head.index(column), rows[1:]) if column in head else (0, rows)
    vals = []
    for n, r in body:
        cell = r[col].strip() if col < len(r) else ""
        if not COUNT.fullmatch(cell) or not 1 <= int(cell) <= MAX_TOKENS:
            raise InvalidValueError(f"{option} {path}, line {n}: `{cell[:40]}` is not a token count from 1 to "
                                    f"{MAX_TOKENS:,}.", f"Give whole token counts, one a line (or a column named "
                                    f"{column}).")
        vals.append(int(cell))
    if not vals:
        raise InvalidValueError(f"{option} {path}: no lengths in the file.", "Give one length a line.")
    s = sorted(vals)
    p99 = _quantile(s, 0.99)
    return Lengths(_slice_means([min(x, p99) for x in s]), _quantile(s, 0.95), p99,
                   f"{len(s):,} length{'s' if len(s) != 1 else ''} from {path.name}")


def parse_lengths(text: str, option: str) -> Lengths:
    """`3000`, `3000:p95=12000` (a lognormal: median 3,000, 95th percentile 12,000) or a CSV file of lengths (one
    a line, or the column named like the option: isl or osl)."""
    t = text.strip()
    if not t:
        raise InvalidValueError(f"{option} is empty.", f"Give tokens ({option} 3000), a median and 95th percentile "
                                f"({option} 3000:p95=12000) or a CSV file of lengths.")
    if re.fullmatch(r"\d+\s*:\s*p\d+\s*=.*", t.lower()) and not re.fullmatch(r"\d+\s*:\s*p95\s*=.*", t.lower()):
        raise InvalidValueError(f"{option} `{t[:60]}`: only the 95th percentile is read.",
                                f"e.g. {option} 3000:p95=12000 (median 3,000, p95 12,000).")
    if re.fullmatch(r"\d{1,30}", t):  # a count past MAX_TOKENS is out of range, not "not a length"
        n = int(t)
        if not 1 <= n <= MAX_TOKENS:
            raise InvalidValueError(f"{option} `{t}` is out of range.", f"Give 1 to {MAX_TOKENS:,} tokens.")
        return fixed(n)
    m = re.fullmatch(r"(\d{1,30}):p95=(\d{1,30})", t.replace(" ", "").lower())
    if m:
        median, p95 = int(m.group(1)), int(m.group(2))
        if not 1 <= median <= MAX_TOKENS or not 1 <= p95 <= MAX_TOKENS:
            raise InvalidValueError(f"{option} `{t}` is out of range.", f"Give 1 to {MAX_TOKENS:,} tokens.")
        if p95 < median:
            raise InvalidValueError(f"{option} `{t}`: the 95th percentile is below the median.",
                                    f"e.g. {option} {median}:p95={median * 4}.")
        return fixed(median) if p95 == median else _lognormal(median, p95)
    from llmsize.files import exists

    if t.lower().endswith(".csv") or exists(t):  # (a name too long for a path is not a file: not a length)
        return _from_csv(Path(t), option.lstrip("-"), option)
    raise InvalidValueError(f"{option} `{t[:60]}` is not a length.", f"Give tokens ({option} 3000), a median and "
                            f"95th percentile ({option} 3000:p95=12000) or a CSV file of lengths.")
