"""Paths shared by the kvtk package's tests (run from anywhere: pytest python/tests)."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRACES = ROOT / "traces"
CONVERSATION = TRACES / "mooncake_fast25_conversation_trace.jsonl"
FORMATS = ROOT / "tests" / "data" / "formats"


@pytest.fixture(scope="session")
def kvtk_bin():
    """The kvtk executable of the release build (scripts/test builds it first), or skip."""
    path = pathlib.Path(os.environ.get("KVTK_BIN", ROOT / "build" / "release" / "sim" / "kvtk"))
    if not path.is_file():
        pytest.skip(f"no kvtk executable at {path} (build the release preset or set KVTK_BIN)")
    return str(path)
