"""launch.py's settings: PDL and the L2 prefetch are GPU-only and read from the environment."""

import pytest

torch = pytest.importorskip("torch")

from llmsize.measure import launch  # noqa: E402


def test_nothing_on_the_cpu_whatever_the_environment(monkeypatch):
    monkeypatch.setenv("LLMSIZE_PDL", "2")
    monkeypatch.setenv("LLMSIZE_PREFETCH_KB", "64")
    cpu = torch.device("cpu")
    assert launch.pdl_mode(cpu) == launch.PDL_OFF and not launch.pdl(cpu) and launch.prefetch_bytes(cpu) == 0
    assert launch.launch_opts(launch.PDL_OFF) == {"PDL": 0}
    assert launch.launch_opts(launch.PDL_EARLY) == {"PDL": 2, "launch_pdl": True}


class _FakeCuda:
    type = "cuda"


@pytest.mark.parametrize("pdl_env, kb_env, cc, mode, nbytes", [
    (None, None, 9, launch.PDL_OFF, 0),  # the default, Hopper included: off (faster on an H200, launch.py)
    ("2", None, 9, launch.PDL_EARLY, 32 * 1024),  # early: 32 KiB per program unless LLMSIZE_PREFETCH_KB says
    ("1", None, 9, launch.PDL_WAIT_FIRST, 0),  # prefetch only before a wait that lets the kernel start early
    ("0", "64", 9, launch.PDL_OFF, 0),
    ("2", "0", 9, launch.PDL_EARLY, 0),
    ("2", "1024", 10, launch.PDL_EARLY, 1024 * 1024),
    ("2", None, 8, launch.PDL_OFF, 0),  # Ampere has no griddepcontrol
])
def test_modes(monkeypatch, pdl_env, kb_env, cc, mode, nbytes):
    for var, val in (("LLMSIZE_PDL", pdl_env), ("LLMSIZE_PREFETCH_KB", kb_env)):
        if val is None:
            monkeypatch.delenv(var, raising=False)
        else:
            monkeypatch.setenv(var, val)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (cc, 0))
    assert launch.pdl_mode(_FakeCuda()) == mode
    assert launch.prefetch_bytes(_FakeCuda()) == nbytes


@pytest.mark.parametrize("var, val", [("LLMSIZE_PDL", "3"), ("LLMSIZE_PREFETCH_KB", "2048"),
                                      ("LLMSIZE_PREFETCH_KB", "x")])
def test_bad_values_raise(monkeypatch, var, val):
    monkeypatch.setenv(var, val)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    with pytest.raises(ValueError, match=var):
        launch.prefetch_bytes(_FakeCuda())
