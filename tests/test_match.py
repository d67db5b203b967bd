"""Catalog matching of driver-reported card names (NVML nvmlDeviceGetName + memory total)."""

import re

import pytest

from llmsize.catalog.match import match_gpu


@pytest.mark.parametrize("name, mem, want", [
    # H200: name and total from shared/reference/h200-measurements.md (NVML on a live H200)
    ("NVIDIA H200", 150_754_820_096, "h200-sxm"),
    ("NVIDIA GeForce RTX 5060 Ti", 17_094_475_776, "rtx5060ti"),
    ("NVIDIA GeForce RTX 4060 Ti", 17_175_150_592, "rtx4060ti16"),
    # nvml.md trap 7: marketed capacities vs reported totals
    ("NVIDIA A100-SXM4-80GB", 85_899_345_920, "a100-80gb-sxm"),
    ("NVIDIA A100-SXM4-40GB", 42_949_672_960, "a100-40gb-sxm"),
    ("NVIDIA H100 80GB HBM3", 85_520_809_984, "h100-sxm"),
    ("NVIDIA H100 NVL", 100_485_038_080, "h100-nvl"),
    ("Tesla T4", 16_106_127_360, "t4"),
    ("NVIDIA RTX 6000 Ada Generation", 51_527_024_640, "rtx6000ada"),
    ("NVIDIA RTX A6000", 51_050_250_240, "rtxa6000"),
    ("NVIDIA GeForce RTX 4090", 25_757_220_864, "rtx4090"),
    ("NVIDIA GeForce RTX 3080", 10_737_418_240, "rtx3080"),
    ("NVIDIA RTX 4000 Ada Generation", 21_470_642_176, "rtx4000ada"),
    ("Tesla P40", 24_032_378_880, "tesla-p40"),
    # the three RTX PRO 6000 Blackwell boards, by the names their rows print (Server: 1597 GB/s, the others 1792)
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", None, "rtxpro6000"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", None, "rtxpro6000-maxq"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", None, "rtxpro6000-server"),
    ("NVIDIA A10G", None, "a10g"),                 # AWS's GA102, not the A10
    ("Tesla V100-PCIE-16GB", None, "v100-pcie-16gb"),
    ("NVIDIA GeForce RTX 4070", None, "rtx4070"),  # not the Ti nor the SUPER
    ("NVIDIA GeForce GTX 1080", None, "gtx1080"),
    ("NVIDIA GeForce RTX 2060", None, "rtx2060"),
    # NVML's name on a B300 (public logs: "8x NVIDIA B300 SXM6 AC (275 GB each)"); "Blackwell Ultra" is its
    # architecture, an alias, not a qualifier the driver's name lacks
    ("NVIDIA B300 SXM6 AC", None, "b300"),
])
def test_known_cards(catalog, name, mem, want):
    got = match_gpu(name, mem, catalog.hardware.all())
    assert got is not None and got.id == want


@pytest.mark.parametrize("name, mem", [
    ("NVIDIA GeForce RTX 2080", 8_589_934_592),   # not in the catalog
    ("NVIDIA GeForce RTX 4070 SUPER", 12_884_901_888),  # a 4070 SUPER is not a 4070 Ti SUPER, nor a 4070
    ("NVIDIA H200", 8_000_000_000),               # memory far from any H200
    ("NVIDIA RTX 4000 SFF Ada Generation", 21_470_642_176),  # the 70 W SFF part (320 GB/s), not the RTX 4000 Ada
    ("NVIDIA GeForce RTX 3080", 12_884_901_888),  # the 12 GB RTX 3080 (384-bit) is not the 10 GB entry
    ("Tesla V100-FHHL-16GB", None),  # the full-height half-length V100 (lower clocks), not the SXM2 or PCIe card
    ("Some Accelerator", None),
])
def test_unknown_cards_are_not_forced(catalog, name, mem):
    assert match_gpu(name, mem, catalog.hardware.all()) is None


@pytest.mark.parametrize("typed, words", [
    ("nosuch-h100", "named with `nosuch`"),       # a made-up word beside a model number: not the H100 silently
    ("fake h200", "named with `fake`"),
    ("AMD Radeon RX 6800", "Unknown GPU"),        # the RX 6800 is not the 6800 XT (XT a qualifier, both ways)
    ("RX 5700", "Unknown GPU"),
    ("AMD Radeon RX 7700 XT", "Unknown GPU"),     # 12 GB at 432 GB/s: not the 7800 XT nor the 7600 XT
])
def test_a_typed_name_with_a_word_no_card_carries_is_refused(catalog, typed, words):
    """Cards typed by hand (--gpu, --gpus): every word must be the card's, but for its vendor's generic words, its
    memory size and form factor; a name that only shares a model number planned on another card (rc 0)."""
    from llmsize.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match=re.escape(words)):
        catalog.gpu(typed)


@pytest.mark.parametrize("typed, want", [
    ("NVIDIA GH200 480GB", "gh200"),              # CUDA's name: 480 GB is the Grace side's LPDDR5X, the GPU's 96 GB
    ("NVIDIA B300 SXM6 AC", "b300"),              # NVML's name
    ("NVIDIA Jetson AGX Orin 64GB", "jetson-agx-orin-64gb"),  # the catalog's own name, which has no model number
    ("AMD Instinct MI300X", "mi300x"), ("Tesla T4", "t4"), ("NVIDIA H100 80GB HBM3", "h100-sxm"),
])
def test_typed_names_drivers_print_still_name_their_card(catalog, typed, want):
    assert catalog.gpu(typed).id == want


def test_every_cards_own_names_name_it(catalog):
    for g in catalog.hardware.all():
        for name in (g.name, g.id, *g.aliases):
            assert catalog.gpu(name).id == g.id, name


def test_cards_once_taken_for_others_are_their_own_entries_now(catalog):
    """The RTX 5060 and the RX 7900 GRE had no entries: the tests above refused them as not the 5060 Ti, nor the
    7900 XT or XTX. With their own entries (2026-12-07) they are named as themselves, by the driver's name and
    memory or by hand."""
    gs = catalog.hardware.all()
    assert match_gpu("NVIDIA GeForce RTX 5060", 8_589_934_592, gs).id == "rtx5060"
    assert match_gpu("NVIDIA GeForce RTX 5060 Ti", 8_589_934_592, gs).id == "rtx5060ti8"
    assert catalog.gpu("AMD Radeon RX 7900 GRE").id == "rx7900gre"
    assert catalog.gpu("RX 7900 XT").id == "rx7900xt"


def test_a_name_that_takes_one_memory_variant_says_which_and_names_the_others(catalog):
    """`--gpu rtx4060ti` is the 16 GB card; an owner of the 8 GB one read 16 GB figures without a word. The note
    names the variant taken and the others' ids, where the typed name states no size; the few files whose ids start
    as the card's are read, not the shelf."""
    from llmsize.catalog.match import sibling_note

    note = lambda typed: sibling_note(typed, catalog.gpu(typed), catalog.hardware)  # noqa: E731
    assert note("rtx4060ti") == "--gpu rtx4060ti: the 16 GB card (rtx4060ti16); the 8 GB one is rtx4060ti8"
    assert note("RTX 3060") == "--gpu RTX 3060: the 12 GB card (rtx3060); the 8 GB one is rtx3060-8gb"
    assert note("a100").endswith("the 40 GB one is a100-40gb-sxm")
    for typed in ("rtx4060ti16", "RTX 4060 Ti 16GB", "rtx4090", "h100", "m4-max"):
        assert note(typed) is None, typed
