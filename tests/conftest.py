import os
from pathlib import Path

import pytest

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
