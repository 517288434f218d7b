#!/usr/bin/env python3
"""Set up exclust in a local virtual environment and run the demo or the test suite.

Needs only python3 (3.11+).  Usage:

    python3 bootstrap.py demo [exclust demo options]   # install, then run the main job
    python3 bootstrap.py install                       # only set up .venv
    python3 bootstrap.py test [pytest options]         # install with test extras, then run pytest
    python3 bootstrap.py check                         # install with test extras, then ruff and mypy
    python3 bootstrap.py docs                          # install with docs extras, then build docs/ (warnings fail)

Every command installs exclust with all its extras (``exclust[all]``: the Prefect flows, lake
tables, object stores), plus the test or docs tools for those commands.
The environment lives in ./.venv and is re-installed only when pyproject.toml changes; after
installing, numba's kernels are compiled once into numba's cache (``python -m exclust.jobs.warmup``),
where the command line, your own Python and the Dask workers all find them.
Afterwards ``source .venv/bin/activate`` puts the ``exclust`` command on the PATH.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".exclust-installed"
ACTIVATE_HINT = (f"[bootstrap] to use the exclust command and this environment's Python in your shell: "
                 f"source {os.path.relpath(VENV / 'bin' / 'activate')}")


def _venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _stamp(extras: str) -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + extras.encode()).hexdigest()


# Extras installed per command; a richer install serves the plain commands too (no re-install).
EXTRAS = {"demo": "all", "install": "all", "test": "all,test", "check": "all,test", "docs": "all,docs"}


def _installed() -> set[str]:
    """The extras installed from this pyproject.toml (STAMP: one "extras hash" line per install)."""
    if not STAMP.exists() or not _venv_python().exists():
        return set()
    lines = (line.split() for line in STAMP.read_text().splitlines())
    return {fields[0] for fields in lines if len(fields) == 2 and fields[1] == _stamp(fields[0])}


def _install(extras: str) -> None:
    """Install exclust with ``extras`` unless installed from this pyproject.toml already (with the
    test or docs extras also serving a run that needs only ``all``), then compile the kernels once
    (not again when an install from this pyproject.toml only adds the test or docs tools)."""
    installed = _installed()
    if extras in installed or (extras == "all" and installed):
        return
    if sys.version_info < (3, 11):
        sys.exit(f"exclust needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not _venv_python().exists():
        print(f"[bootstrap] creating {VENV}", flush=True)
        subprocess.check_call([sys.executable, "-m", "venv", str(VENV)])
    pip = [str(_venv_python()), "-m", "pip", "--disable-pip-version-check"]
    print("[bootstrap] installing exclust and its dependencies (first run takes a few minutes)", flush=True)
    subprocess.check_call(pip + ["install", "-q", "--upgrade", "pip"])
    subprocess.check_call(pip + ["install", "-q", "-e", f"{ROOT}[{extras}]"])
    # Compiled kernels go where numba caches by default (__pycache__ beside the sources, unless
    # the user's own NUMBA_CACHE_DIR says otherwise): the one place every later process looks,
    # the command, a user's Python and the Dask workers alike.
    if not installed and subprocess.call([str(_venv_python()), "-m", "exclust.jobs.warmup"], cwd=ROOT) != 0:
        print("[bootstrap] warning: compiling the kernels ahead failed; each will compile on its first use instead",
              flush=True)
    STAMP.write_text("".join(f"{e} {_stamp(e)}\n" for e in sorted(installed | {extras})))


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in EXTRAS:
        print(__doc__)
        return 2
    command, rest = argv[0], argv[1:]
    _install(EXTRAS[command])
    if command == "install":
        print(ACTIVATE_HINT, flush=True)
        return 0
    if command == "demo":
        exe = VENV / "bin" / "exclust"
        code = subprocess.call([str(exe), "demo", *rest], cwd=ROOT)
        print(ACTIVATE_HINT, flush=True)
        return code
    if command == "check":  # the gate: lint and types, as configured in pyproject.toml
        lint = subprocess.call([str(_venv_python()), "-m", "ruff", "check", "."], cwd=ROOT)
        types = subprocess.call([str(_venv_python()), "-m", "mypy"], cwd=ROOT)
        return lint or types
    if command == "docs":
        # Warnings are errors (-W, --keep-going to list them all); the site lands in docs/_build/html.
        return subprocess.call([str(_venv_python()), "-m", "sphinx", "-W", "--keep-going", "-b", "html",
                                "docs", "docs/_build/html", *rest], cwd=ROOT)
    return subprocess.call([str(_venv_python()), "-m", "pytest", *rest], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
