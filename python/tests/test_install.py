"""`pip install ./python` into a fresh venv, offline (--no-index: pip may not
fetch anything), then the suite again against the installed package."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.skipif(os.environ.get("NEARDUP_INSTALLED") == "1", reason="already testing an installed copy")
def test_pip_install_offline_into_a_venv(tmp_path):
    venv = tmp_path / "venv"
    # Debian's pip refuses to install into the system (PEP 668): a venv that
    # sees the system's numpy and pytest.
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = dict(os.environ, JOBS=os.environ.get("JOBS", "2"), PIP_NO_INDEX="1")
    subprocess.run([str(python), "-m", "pip", "install", "--no-index", "-q", str(ROOT / "python")],
                   check=True, env=env, stdout=sys.stderr)
    where = subprocess.run([str(python), "-c", "import neardup; print(neardup.__file__)"], cwd=tmp_path,
                           check=True, capture_output=True, text=True).stdout
    assert where.startswith(str(venv))
    tests = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "python" / "tests")],
                           cwd=tmp_path, env=dict(env, NEARDUP_INSTALLED="1"), capture_output=True, text=True)
    assert tests.returncode == 0, tests.stdout[-3000:]
