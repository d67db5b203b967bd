"""What a fleet serves: the workload (request lengths, load, latency targets, prefix caching) and speculative
decoding's parameters. Pure data and parsing; the sizing is estimate/fleet.py."""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmsize.catalog.schema import ModelSpec
from llmsize.errors import InvalidValueError
from llmsize.estimate.lengths import Lengths
from llmsize.estimate.lengths import fixed as fixed_lengths


@dataclass(frozen=True)
class Spec:
    """Speculative decoding: k tokens proposed a pass by a draft model (or the model's own MTP layers), each
    accepted with probability `accept`."""

    k: int
    accept: float
    draft: ModelSpec | None = None  # None: MTP (a layer of the target proposes)

    def tokens_per_pass(self) -> float:
        """E = (1 - a^(k+1)) / (1 - a): expected tokens a target pass yields with k drafted tokens accepted
        i.i.d. at rate a (Leviathan, Kalman, Matias 2023, "Fast Inference from Transformers via Speculative
        Decoding", eq. 1)."""
        a = self.accept
        return self.k + 1 if a >= 1 else (1 - a ** (self.k + 1)) / (1 - a)


def parse_spec(text: str, catalog) -> Spec:
    """`draft=MODEL,k=4,accept=0.7` or `mtp=1,accept=0.8` (k = the MTP layers)."""
    fields = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not value.strip():
            raise InvalidValueError(f"--spec {text!r}: `{part}` is not key=value.",
                                    "e.g. --spec draft=llama-3.2-1b,k=4,accept=0.7 or --spec mtp=1,accept=0.8.")
        fields[key.strip().lower()] = value.strip()
    unknown = sorted(set(fields) - {"draft", "k", "accept", "mtp"})
    if unknown:
        raise InvalidValueError(f"--spec: unknown key `{unknown[0]}`.", "Keys: draft, k, accept, mtp.")
    if ("draft" in fields) == ("mtp" in fields):
        raise InvalidValueError("--spec needs draft=MODEL or mtp=N, one of them.", "e.g. --spec mtp=1,accept=0.8.")
    try:
        accept = float(fields.get("accept", ""))
        k = int(fields.get("mtp") or fields.get("k") or 4)
    except ValueError:
        raise InvalidValueError(f"--spec {text!r}: accept must be a number and k / mtp a whole number.",
                                "e.g. accept=0.7, k=4.") from None
    if not (0 <= accept <= 1 and math.isfinite(accept)) or not 1 <= k <= 16:
        raise InvalidValueError(f"--spec {text!r}: accept must be in [0, 1] and k (or mtp) from 1 to 16.",
                                "e.g. accept=0.7, k=4.")
    return Spec(k, accept, catalog.model(fields["draft"]) if "draft" in fields else None)


def _check_spec(spec: Spec, model: ModelSpec) -> None:
    """A draft must be a smaller model with the target's tokenizer (its vocabulary); MTP needs the target's own
    multi-token-prediction module (the catalog lists it among the model's extra parameters)."""
    d = spec.draft
    if d is None:
        if not any("multi-token-prediction" in e.name.lower() for e in model.extra):
            raise InvalidValueError(f"--spec mtp: {model.name} has no multi-token-prediction module in the catalog.",
                                    "Use a draft model instead: --spec draft=MODEL,k=4,accept=0.7.")
        return
    if d.id == model.id:
        raise InvalidValueError(f"--spec draft={d.id} is the target model itself.", "Pick a smaller draft model.")
    if d.params_official >= model.params_official:
        raise InvalidValueError(f"--spec draft={d.id} ({d.params_official / 1e9:,.1f}B) is not smaller than "
                                f"{model.name} ({model.params_official / 1e9:,.1f}B).", "Pick a smaller draft model.")
    if d.vocab_size != model.vocab_size:
        raise InvalidValueError(f"--spec draft={d.id} has a vocabulary of {d.vocab_size:,} tokens, {model.name} "
                                f"{model.vocab_size:,}: a draft must share the target's tokenizer.",
                                "Pick a draft of the same family (e.g. Llama 3.2 1B for Llama 3.1).")


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

    def lengths(self) -> tuple[Lengths, Lengths]:
        return self.isl_lengths or fixed_lengths(self.isl), self.osl_lengths or fixed_lengths(self.osl)

    @property
    def spread(self) -> bool:
        return not all(d.fixed for d in self.lengths())

    def longest_tokens(self) -> int:
        """The request a replica must still hold: the p99 prompt and the p99 answer."""
        i, o = self.lengths()
        return i.p99 + o.p99

    @property
    def prefill_cs2(self) -> float:
        """Squared coefficient of variation of a prompt's prefill, taken as proportional to its length."""
        i = self.lengths()[0]
        return i.variance / i.mean ** 2

    def check(self, model: ModelSpec | None = None) -> None:
        if model is not None and self.longest_tokens() > model.max_position_embeddings:
            longest = "a request" if not self.spread else "the p99 request"
            raise InvalidValueError(f"{longest.capitalize()} of {self.longest_tokens():,} tokens (prompt and answer) "
                                    f"exceeds {model.name}'s context of {model.max_position_embeddings:,} tokens.",
                                    "Shorten --isl / --osl (or their p95), or pick a model with a longer context.")
        if model is not None and self.spec is not None:
            _check_spec(self.spec, model)
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
                    parse_spec(spec, catalog) if spec else None, isl_d, osl_d, node_link_gb_s)
