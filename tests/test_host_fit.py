"""The host side of a partial offload: published CPU-only llama.cpp runs (measurements/host/), the share of the
memory's peak they reach (benchmarks/fit_host.py), and runtimes/llamacpp.yaml's `host` block that holds it."""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

import pytest
import yaml

from llmsize.catalog.host_measurement import HostRow, load_host_dataset, load_host_file
from llmsize.errors import CatalogError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import fit_host  # noqa: E402


def test_every_host_file_loads_with_its_figures_verbatim():
    data = load_host_dataset()
    assert len(data) >= 3 and sum(len(f.rows) for f in data.values()) >= 12
    for stem, f in data.items():  # the schema checked each figure against its excerpt and each row's bytes
        assert f.runtime == "llamacpp" and f.source.url.startswith("https://"), stem
        assert len({r.cpu for r in f.rows}) <= 2, stem  # a source is one or two machines, held out together


def test_a_row_fraction_by_hand(catalog):
    """Llama 3.1 8B Q4_K_M on a Core i7-8700 with two channels of DDR4-2400 (38.4 GB/s peak) at 4.22 tok/s: the
    file's bytes a token reads (the token embedding one row, so below the 4.92 GB file) x 4.22 / 38.4 GB/s."""
    obs = [o for o in fit_host.host_observations(catalog) if o.row.model.startswith("Meta-Llama-3.1-8B")]
    assert len(obs) == 1
    o = obs[0]
    assert o.peak_bytes_per_s == pytest.approx(2400e6 * 8 * 2)
    assert o.bytes_from == "catalog" and 4.4e9 < o.read_bytes < 4.921e9
    assert o.fraction == pytest.approx(o.read_bytes * 4.22 / 38.4e9)
    # a model the catalog lacks reads its printed file size (Phi-4 14B Q4_K_M, "8.43 GiB")
    phi = next(o for o in fit_host.host_observations(catalog) if o.row.model == "Phi-4 14B")
    assert phi.bytes_from == "printed size" and phi.read_bytes == pytest.approx(8.43 * 2**30)


def test_the_fraction_is_the_median_of_the_sources_medians_and_held_out_by_source(catalog):
    obs = fit_host.host_observations(catalog)
    by = {}
    for o in obs:
        by.setdefault(o.source, []).append(o.fraction)
    assert fit_host.fraction_of(obs) == pytest.approx(statistics.median(statistics.median(v) for v in by.values()))
    for o, ratio in fit_host.held_out(obs):  # each source predicted from the others only
        others = [x for x in obs if x.source != o.source]
        assert ratio == pytest.approx(o.fraction / fit_host.fraction_of(others))


def test_runtimes_llamacpp_holds_the_fit(catalog):
    """runtimes/llamacpp.yaml's `host` is what fit_host gives today (benchmarks/fit_speed.py --write writes it),
    and the plan's constants carry it."""
    from llmsize.estimate.runtimes import constants

    host = yaml.safe_load((ROOT / "runtimes" / "llamacpp.yaml").read_text())["host"]
    fit = fit_host.fit_host(catalog)
    assert host["eta_bandwidth"] == fit["eta_bandwidth"] and host["held_out"] == fit["held_out"]
    assert host["sources"] == [f"measurements/host/{s}.yaml" for s in fit["sources"]]
    assert 0.3 < host["eta_bandwidth"] < 0.9
    spec = {r.id: r for r in catalog.runtimes.all()}["llamacpp"]
    for be in ("cuda", "rocm", "metal"):
        c = constants(spec, be)
        assert c.eta_host == host["eta_bandwidth"] and "CPU-only llama.cpp runs" in c.host_basis


@pytest.mark.parametrize("change,needle", [
    ({"tok_s": 29.74}, "does not appear in the verbatim"),
    ({"host_memory": "DDR9-5600x12"}, "DDR9"),
    ({"model_size": None}, "a catalog model"),
])
def test_a_bad_host_row_is_refused(tmp_path, change, needle):
    f = ROOT / "measurements" / "host" / "ahelpme-epyc9554-phi4.yaml"
    doc = yaml.safe_load(f.read_text())
    doc["rows"][0].update(change)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(CatalogError, match=needle):
        load_host_file(bad)


def test_host_rows_state_their_channels_or_say_how_they_were_read():
    """A row's channels are those the source states, or the platform's where it names only the rate and type (and
    the row says so): the fraction is of a peak the source's own words give."""
    for f in load_host_dataset().values():
        for r in f.rows:
            assert isinstance(r, HostRow)
            n = int(r.host_memory.rsplit("x", 1)[1])
            stated = re.search(rf"\b{n}\b", r.memory_stated) or (n == 2 and "dual" in r.memory_stated.lower())
            assert stated or r.channels_from, (r.cpu, r.memory_stated)
