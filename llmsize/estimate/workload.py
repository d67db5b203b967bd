"""What a fleet serves: the workload (request lengths, load, latency targets, prefix caching) and speculative
decoding's parameters. Pure data and parsing; the sizing is estimate/fleet.py."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from llmsize.catalog.schema import ModelSpec
from llmsize.errors import InvalidValueError
from llmsize.estimate.lengths import Lengths
from llmsize.estimate.lengths import fixed as fixed_lengths
from llmsize.estimate.speculative import Spec, check_spec, parse_spec


@dataclass(frozen=True)
class Workload:
    isl: int  # prompt tokens per request
    osl: int  # output tokens per request
    users: int | None = None  # concurrent users
    rate: float | None = None  # requests per second
    ttft_s: float | None = None  # target
    tpot_s: float | None = None  # target, seconds per output token per user
    shared_prefix: float = 0.0  # fraction of prompt tokens served from the prefix cache
    spec: Spec | None = None  # speculative decoding
    isl_lengths: Lengths | None = None  # the prompts' distribution (isl is its mean); None: all of isl tokens
    osl_lengths: Lengths | None = None
    node_link_gb_s: float = 50.0  # per GPU between nodes: disaggregated serving's cache move, pipeline hand-offs
    quant: str | None = None  # the weights' format the replicas serve (a format id); None: the model's release
    language_model_only: bool = False  # a multimodal checkpoint's text served alone: no tower on the cards

    @property
    def tok_s_per_user(self) -> float | None:
        """The TPOT target as a user's decode rate (--tok-s-per-user), None without one."""
        return None if self.tpot_s is None else 1 / self.tpot_s

    def lengths(self) -> tuple[Lengths, Lengths]:
        return self.isl_lengths or fixed_lengths(self.isl), self.osl_lengths or fixed_lengths(self.osl)

    @property
    def spread(self) -> bool:
        return not all(d.fixed for d in self.lengths())

    def longest_tokens(self) -> int:
        """The request a replica must still hold: the p99 prompt and the p99 answer."""
        i, o = self.lengths()
        return i.p99 + o.p99

    @functools.cached_property  # (the admission searches ask for it thousands of times)
    def life_cs2(self) -> float:
        """Squared coefficient of variation of a request's time in a replica, taken as proportional to its answer's
        length (the decode steps are most of it)."""
        o = self.lengths()[1]
        return o.variance / o.mean ** 2

    @functools.cached_property
    def prefill_cs2(self) -> float:
        """Squared coefficient of variation of a prompt's prefill, taken as proportional to its length."""
        i = self.lengths()[0]
        return i.variance / i.mean ** 2

    def check(self, model: ModelSpec | None = None) -> None:
        if model is not None and self.longest_tokens() > model.max_position_embeddings:
            longest = "a request" if not self.spread else "the p99 request"
            raise InvalidValueError(f"{longest.capitalize()} of {self.longest_tokens():,} tokens (prompt and answer) "
                                    f"exceeds {model.name}'s context of {model.max_position_embeddings:,} tokens.",
                                    "Shorten --isl / --osl (or their p95; by default 3000 and 500), or pick a model "
                                    "with a longer context.")
        if model is not None and self.spec is not None:
            check_spec(self.spec, model)
        if self.tpot_s is not None and not 0 < self.tpot_s <= 86400:
            raise InvalidValueError(f"A TPOT target of {self.tpot_s:g} s is out of range.",
                                    "Give --tpot from 1 us to a day, or --tok-s-per-user above 1 / 86,400.")
        if not 0 <= self.shared_prefix < 1:
            raise InvalidValueError(f"--shared-prefix {self.shared_prefix:g} is not a fraction in [0, 1).",
                                    "e.g. --shared-prefix 0.4: 40% of prompt tokens served from the cache.")
        if (self.users is None) == (self.rate is None):
            raise InvalidValueError("Give the load as --users N or --rate R (requests per second), one of them.",
                                    "e.g. --users 400, or --rate 20.")


def workload_from_options(isl: str, osl: str, users: int | None, rate: float | None, ttft_s: float | None,
                          tpot_s: float | None, tok_s_per_user: float | None, shared_prefix: float,
                          spec: str | None, catalog, node_link_gb_s: float = 50.0) -> Workload:
    """fleet's options as a Workload: the lengths parsed (isl and osl are their means), a per-user rate turned into
    its TPOT target, the --spec text parsed."""
    from llmsize.estimate.lengths import parse_lengths

    isl_d, osl_d = parse_lengths(isl, "--isl"), parse_lengths(osl, "--osl")
    if tpot_s is None and tok_s_per_user:
        tpot_s = 1 / tok_s_per_user
    if not (math.isfinite(node_link_gb_s) and node_link_gb_s > 0):
        raise InvalidValueError(f"--node-link-gb-s `{node_link_gb_s}` must be a finite number above 0.",
                                "Give the per-GPU bandwidth between nodes, e.g. 50 for a 400 Gb/s NIC.")
    return Workload(round(isl_d.mean), round(osl_d.mean), users, rate, ttft_s, tpot_s, shared_prefix,
                    parse_spec(spec, catalog) if spec is not None else None, isl_d, osl_d, node_link_gb_s)
