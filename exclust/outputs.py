"""Output folders that appear whole or not at all.

A run writes into a hidden temporary folder beside the target and renames it into place at the
end, so a failed or killed run leaves no half-written folder under the target's name. Two runs
aimed at the same folder take turns through a lock file beside it, so the folder always holds
one run's complete result, never a mix.

Paths given by users (CLI options, flow parameters) are checked here first: an output folder
may not be the filesystem root, the home folder, an existing file, a folder that exclust did not
write, or (when a base folder is configured) a path that escapes the base.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Iterator

from exclust.data import InputError

MARKER = ".exclust-output"  # written into every output folder; lets a later run replace it safely
BASE_ENV = "EXCLUST_OUTPUT_BASE"  # optional: every output folder must lie under this folder


def validate_output_dir(path: str | os.PathLike, base: str | os.PathLike | None = None) -> Path:
    """The absolute output folder for ``path``, or an InputError saying why it cannot be used."""
    text = str(path).strip()
    if not text:
        raise InputError("output folder is empty; give a folder name such as --out results")
    base = base if base is not None else os.environ.get(BASE_ENV) or None
    raw = Path(text).expanduser()
    if base is not None:
        base_path = Path(base).expanduser().resolve()
        target = (base_path / raw).resolve() if not raw.is_absolute() else raw.resolve()
        if target != base_path and base_path not in target.parents:
            raise InputError(f"output folder {text} lies outside the allowed base folder {base_path}")
        if target == base_path:
            raise InputError(f"output folder {text} is the base folder {base_path} itself; name a folder inside it")
    else:
        target = raw.resolve()
    if target == Path(target.anchor):
        raise InputError(f"output folder {text} is the filesystem root; choose a folder of its own")
    if target == Path.home().resolve():
        raise InputError(f"output folder {text} is the home folder; choose a folder of its own")
    if target.exists() and not target.is_dir():
        raise InputError(f"output path {text} is an existing file; choose a folder name")
    if target.is_dir() and any(target.iterdir()) and not (target / MARKER).exists():
        raise InputError(
            f"output folder {text} exists and was not written by exclust; "
            "choose a new folder or remove it (exclust replaces only its own output folders)"
        )
    return target


def validate_input_path(path: str | os.PathLike, storage_options: dict | None = None) -> str:
    """The input as given, after checking that it (or, for a glob, a match) exists.

    Local paths and ``file://`` URLs are checked on this machine; object-store URLs
    (``s3://bucket/key``) through their fsspec filesystem, with ``storage_options`` and the
    standard environment variables. A scheme whose package is missing is named with the package.
    """
    from exclust.storage import GLOB_CHARS, filesystem, is_remote, not_found_message, store_errors

    text = str(path).strip()
    if not text:
        raise InputError("input path is empty; give a Parquet file, a folder of them, a glob or an s3:// URL")
    if is_remote(text):
        fs, fs_path = filesystem(text, storage_options)
        with store_errors(text):
            found = fs.glob(fs_path) if any(ch in fs_path for ch in GLOB_CHARS) else fs.exists(fs_path)
        if not found:
            raise InputError(not_found_message(text))
        return text
    local = text.split("://", 1)[1] if "://" in text else text
    if any(ch in local for ch in GLOB_CHARS):
        import glob

        if not glob.glob(os.path.expanduser(local), recursive=True):
            raise InputError(f"input not found: no file matches {text}")
        return os.path.expanduser(local)
    p = Path(local).expanduser()
    if not p.exists():
        raise InputError(not_found_message(text))
    return str(p)


@contextlib.contextmanager
def _locked(target: Path, timeout: float) -> Iterator[None]:
    """Hold an exclusive lock on ``.<name>.lock`` beside ``target`` (shared across processes)."""
    lock_path = target.with_name(f".{target.name}.lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"another run has held the lock on {target} for {timeout:.0f} s; "
                        "wait for it or choose another output folder"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing releases the lock; the lock file stays (removing it would race)


@contextlib.contextmanager
def atomic_output_dir(
    path: str | os.PathLike, *, base: str | os.PathLike | None = None, lock_timeout: float = 3600.0,
    info: dict | None = None,
) -> Iterator[Path]:
    """Yield a fresh temporary folder; on success it replaces ``path`` whole, on failure it vanishes.

    The caller writes every file into the yielded folder. Writing happens without the lock (two
    runs may compute at once); only the swap into place is serialized, and each swap installs
    one run's complete folder.
    """
    target = validate_output_dir(path, base)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{uuid.uuid4().hex[:12]}")
    tmp.mkdir()
    try:
        yield tmp
        marker = {"written_by": "exclust", "pid": os.getpid(), "time": time.time(), **(info or {})}
        (tmp / MARKER).write_text(json.dumps(marker, default=str))
        with _locked(target, lock_timeout):
            # Re-check under the lock: the folder may have appeared since validation.
            validate_output_dir(target, base)
            old = None
            if target.exists():
                old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:12]}")
                target.rename(old)
            tmp.rename(target)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json(path: Path, doc: dict) -> None:
    """Write ``doc`` as indented JSON (NaN written as null, which JSON readers accept)."""
    path.write_text(json.dumps(_jsonable(doc), indent=1, allow_nan=False) + "\n")


def _jsonable(obj):
    import math

    import numpy as np

    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)
