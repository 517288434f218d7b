#!/usr/bin/env python3
"""Set up exclust in a local virtual environment and run the demo or the test suite.

Needs only python3 (3.11+).  Usage:

    python3 bootstrap.py demo [exclust demo options]   # install, then run the main job
    python3 bootstrap.py install                       # only set up .venv
    python3 bootstrap.py test [pytest options]         # install with test extras, then run pytest

The environment lives in ./.venv and is re-installed only when pyproject.toml changes.
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


def _venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _install(extras: str) -> None:
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + extras.encode()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted and _venv_python().exists():
        return
    if sys.version_info < (3, 11):
        sys.exit(f"exclust needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not _venv_python().exists():
        print(f"[bootstrap] creating {VENV}", flush=True)
        subprocess.check_call([sys.executable, "-m", "venv", str(VENV)])
    pip = [str(_venv_python()), "-m", "pip", "--disable-pip-version-check"]
    print("[bootstrap] installing exclust and its dependencies (first run takes a few minutes)", flush=True)
    subprocess.check_call(pip + ["install", "-q", "--upgrade", "pip"])
    subprocess.check_call(pip + ["install", "-q", "-e", f"{ROOT}[{extras}]" if extras else str(ROOT)])
    STAMP.write_text(wanted)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"demo", "test", "install"}:
        print(__doc__)
        return 2
    command, rest = argv[0], argv[1:]
    _install("test")
    env = dict(os.environ)
    # numba caches compiled kernels next to the sources; keep that inside the checkout.
    env.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".venv" / "numba-cache"))
    if command == "install":
        return 0
    if command == "demo":
        exe = VENV / "bin" / "exclust"
        return subprocess.call([str(exe), "demo", *rest], cwd=ROOT, env=env)
    return subprocess.call([str(_venv_python()), "-m", "pytest", *rest], cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
