#!/usr/bin/env python3
"""Runs the examples of README.md and docs/*.md, so the docs cannot drift.

Which blocks run is written in the Markdown itself, by an HTML comment on
the line before the fenced block:

  <!-- doctest -->          a ```console block: lines starting with "$ " are
                            commands (bash, stdout and stderr together), the
                            lines after each are its expected output. An
                            expected line may contain "..." (matches any
                            text); a line that is only "..." matches any
                            number of lines. The command must exit 0 unless
                            the expected output ends with "[exit N]".
  <!-- doctest: run -->     a ```sh block run as one bash script (set -e);
                            it must exit 0.
  <!-- doctest: serve -->   the same, with `neardup serve` started first on a
                            free loopback port over a fresh data directory;
                            $B is its base URL. Stopped (SIGTERM) afterwards.
  <!-- doctest: serve-console -->  a console block with such a server.
  <!-- doctest: python -->  a ```python block run as one script by Debian's
                            python3 (it has numpy) with the built module on
                            PYTHONPATH (build/python); it must exit 0.
                            Counted as not run when the build has no module.
  <!-- doctest: python-serve -->  the same with a server, its URL in $B.

Every block runs in a fresh temporary directory holding links to the
repository's data/, docs/, examples/, scripts/ and build/, with build/ on
PATH, so `neardup ...` and `./build/neardup ...` both work and outputs never
land in the checkout. Blocks without a marker are not run (benchmark
recipes, long jobs); the summary counts them.

Usage: scripts/doctest_docs.py [--build DIR] [FILE.md ...]   (exit 1 on any failure)
"""
import argparse
import contextlib
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARK = re.compile(r"<!--\s*doctest(?::\s*([\w-]+))?\s*-->")
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
TIMEOUT = 120
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def blocks(path):
    """Yields (line, kind, lang, body) for every fenced block; kind is None
    for an unmarked block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].lstrip().startswith("```"):
                yield i + 1, "malformed-fence", "", [lines[i]]
            i += 1
            continue
        start, lang = i, m.group(2)
        j = i + 1
        while j < len(lines) and not FENCE.match(lines[j]):
            # Text after a closing fence (docs/SCALING.md had "``` `--stats-json` adds ...") makes
            # it no fence, to Markdown too: the block ran on and every block after it shifted.
            if lines[j].lstrip().startswith("```"):
                yield j + 1, "malformed-fence", "", [lines[j]]
            j += 1
        mark = MARK.search(lines[start - 1]) if start > 0 else None
        kind = (mark.group(1) or "console") if mark else None
        yield start + 1, kind, lang, lines[start + 1:j]
        i = j + 1


@contextlib.contextmanager
def sandbox(build, serve):
    """A fresh work directory with the tree linked in, and a server when asked: (dir, extra env).
    Both are gone afterwards; the links are unlinked, never followed."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="neardup-doctest-"))
    extra, proc = {}, None
    try:
        for name in ("data", "docs", "examples", "scripts"):
            (d / name).symlink_to(ROOT / name)
        (d / "build").symlink_to(build)
        if serve:
            proc, extra["B"] = start_server(build, d)
        yield d, extra
    finally:
        stop_server(proc)
        shutil.rmtree(d, ignore_errors=True)


def env_for(build, extra=None):
    env = dict(os.environ)
    env["PATH"] = f"{build}:{env['PATH']}"
    env.update(extra or {})
    return env


def line_matches(pattern, actual):
    if "..." not in pattern:
        return pattern.rstrip() == actual.rstrip()
    parts = [re.escape(p) for p in pattern.rstrip().split("...")]
    return re.fullmatch(".*".join(parts), actual.rstrip()) is not None


def output_matches(expected, actual):
    """Matches lines, where a line "..." eats any number of actual lines."""
    def match(e, a):
        if e == len(expected):
            return a == len(actual)
        if expected[e].strip() == "...":
            return any(match(e + 1, k) for k in range(a, len(actual) + 1))
        return a < len(actual) and line_matches(expected[e], actual[a]) and match(e + 1, a + 1)
    return match(0, 0)


def parse_console(body):
    """[(command, expected lines, expected exit code)]"""
    steps = []
    for line in body:
        if line.startswith("$ "):
            steps.append([line[2:], [], 0])
        elif steps:
            steps[-1][1].append(line)
    for s in steps:
        m = re.fullmatch(r"\[exit (\d+)\]", s[1][-1].strip()) if s[1] else None
        if m:
            s[2] = int(m.group(1))
            s[1].pop()
    return steps


def run_console(body, build, serve=False):
    with sandbox(build, serve) as (d, extra):
        for cmd, expected, code in parse_console(body):
            p = subprocess.run(["bash", "-c", cmd], cwd=d, env=env_for(build, extra), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=TIMEOUT, text=True)
            actual = p.stdout.splitlines()
            if p.returncode != code or not output_matches(expected, actual):
                return (f"$ {cmd}\n  exit {p.returncode} (expected {code})\n  expected:\n    " +
                        "\n    ".join(expected) + "\n  got:\n    " + "\n    ".join(actual))
        return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(build, d):
    port = free_port()
    log = open(d / "serve.log", "w")
    proc = subprocess.Popen([str(build / "neardup"), "serve", "--data", str(d / "serve-data"), "--init",
                             "--listen", f"127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            urllib.request.urlopen(base + "/healthz", timeout=1).read()
            return proc, base
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("neardup serve did not start: " + (d / "serve.log").read_text())


def stop_server(proc):
    if proc:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def run_script(body, build, serve, python=False):
    command = [PYTHON, "-c"] if python else ["bash", "-e", "-o", "pipefail", "-c"]
    with sandbox(build, serve) as (d, extra):
        if python:
            extra["PYTHONPATH"] = str(build / "python")
        p = subprocess.run(command + ["\n".join(body)], cwd=d,
                           env=env_for(build, extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=TIMEOUT, text=True)
    if p.returncode != 0:
        return f"exit {p.returncode}\n  output:\n    " + "\n    ".join(p.stdout.splitlines()[-30:])
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    build = pathlib.Path(args.build).resolve()
    files = [pathlib.Path(f).resolve() for f in args.files] or [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
    ran = skipped = failed = 0
    for f in files:
        for line, kind, lang, body in blocks(f):
            if kind is None:
                skipped += 1
                continue
            if kind.startswith("python") and not (build / "python" / "neardup").is_dir():
                skipped += 1  # built without the Python module (no pybind11)
                continue
            ran += 1
            if kind in ("console", "serve-console"):
                err = run_console(body, build, serve=kind == "serve-console")
            elif kind in ("run", "serve"):
                err = run_script(body, build, serve=kind == "serve")
            elif kind in ("python", "python-serve"):
                err = run_script(body, build, serve=kind == "python-serve", python=True)
            elif kind == "malformed-fence":
                err = "a fence with text after it: put the text on its own line"
            else:
                err = f"unknown doctest kind {kind!r}"
            if err:
                failed += 1
                shown = f.relative_to(ROOT) if f.is_relative_to(ROOT) else f  # a file from outside the tree
                print(f"FAIL {shown}:{line}\n  {err}\n")
    print(f"doctest: {ran} blocks run, {failed} failed, {skipped} not marked")
    return 1 if failed or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
