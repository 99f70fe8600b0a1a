"""pytest set-up for the Python package: the module comes from the build tree
(<build>/python, the build `scripts/build.sh release` makes; NEARDUP_BUILD
names another) unless NEARDUP_INSTALLED=1 asks for the installed one; the
CLI the parity tests compare against is <build>/neardup."""

import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("NEARDUP_BUILD", ROOT / "build")).resolve()
if os.environ.get("NEARDUP_INSTALLED") != "1":
    sys.path.insert(0, str(BUILD / "python"))


@pytest.fixture(scope="session")
def root():
    return ROOT


@pytest.fixture(scope="session")
def cli():
    path = BUILD / "neardup"
    if not path.exists():
        pytest.fail(f"{path} is missing: scripts/build.sh release first")
    return path


@pytest.fixture(scope="session")
def sample_docs():
    """data/sample/docs.jsonl as (raw JSON id, text) pairs, in file order."""
    import json
    docs = []
    with open(ROOT / "data" / "sample" / "docs.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                doc = json.loads(line)
                docs.append((json.dumps(doc["id"], ensure_ascii=False), doc["text"]))
    return docs
