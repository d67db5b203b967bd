import os
import subprocess
import sys
from pathlib import Path

# One pytest-xdist worker a core (pyproject's addopts): torch's OpenMP pool would start one thread a core in each
# worker, and its threads spin waiting for work between the small ops of the interpreted kernels; one thread a
# worker took the full suite from 283.7 s wall and 545 s of CPU to 222.6 s and 430 s (`/usr/bin/time python -m
# pytest -p no:cacheprovider`, 2 workers, 2 cores, 2026-12-04). Set before torch is first imported (the workers
# import this file first); a single process (-n 0) keeps torch's default.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

from llmsize.catalog.loader import Catalog

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    os.environ.pop("LLMSIZE_CATALOG", None)
    return Catalog()


@pytest.fixture()
def run_cli(capsys, monkeypatch):
    """Run the CLI in-process through its real entry point; returns (exit_code, stdout, stderr)."""
    from llmsize.cli import main

    monkeypatch.setenv("COLUMNS", "100")

    def run(*args: str):
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def assert_one_line_error(code: int, err: str) -> None:
    """The contract for every expected failure: exit 2, one line on stderr starting `Error: `, no traceback."""
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("Error: ") and "Traceback" not in err, err


def cli_without(modules: list[str], argv: list[str]) -> subprocess.CompletedProcess:
    """Run the CLI in a fresh interpreter where `modules` cannot be imported (a missing extra)."""
    hide = "; ".join(f"sys.modules[{m!r}] = None" for m in modules)
    probe = f"import sys; {hide}\nfrom llmsize.cli import main\nmain({argv!r})"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)


def pytest_collection_modifyitems(config, items):
    """The `slow` tests first, so that the pytest-xdist workers start the longest ones at once instead of one
    worker meeting them last, when the others have finished; the order is the same in every worker."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
