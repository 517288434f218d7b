"""What a run reads, as the outputs must know it: inputs checked to exist before any work, and the
guards (paths read) that no output may equal, contain or lie inside (``exclust.outputs.folders``)."""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exclust.errors import InputError
from exclust.sources.storage import (
    GLOB_CHARS,
    Source,
    filesystem,
    is_local_filesystem,
    is_remote,
    list_source,
    not_found_message,
    store_errors,
)


@dataclass(frozen=True)
class Guard:
    """A path a run reads: the output may not equal, contain or lie inside it."""

    scheme: str  # "file", "s3", ...
    path: str  # absolute real path (local) or bucket/key
    what: str  # for the message: "the input folder data", ...
    inside_ok: bool = False  # True: an output may lie inside it (it is not read recursively)


def scheme_of(fs: Any) -> str:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return "file" if is_local_filesystem(fs) else {"s3a": "s3"}.get(protocol, protocol)


def parent_and_name(path: str) -> tuple[str, str]:
    parent, _, name = path.rstrip("/").rpartition("/")
    return parent or "/", name


def _guard(fs: Any, path: str, what: str, inside_ok: bool = False) -> Guard:
    local = is_local_filesystem(fs)
    return Guard(scheme_of(fs), os.path.realpath(path) if local else path.strip("/"), what, inside_ok)


def input_guards(url: str | os.PathLike, source: Source | None = None,
                 storage_options: Mapping[str, Any] | None = None) -> list[Guard]:
    """What reading ``url`` touches: the path itself; for a glob its root and every listed file's folder."""
    text = str(url)
    fs, path = filesystem(text, storage_options)
    if not any(ch in path for ch in GLOB_CHARS):
        return [_guard(fs, path, f"the input {text}")]
    source = source or list_source(text, storage_options)
    guards = [_guard(fs, source.root or "/", f"the folder {source.root} under the input glob {text}")]
    for folder in sorted({parent_and_name(f.path)[0] for f in source.files}):
        guards.append(_guard(fs, folder, f"the folder {folder} that the input glob {text} reads"))
    return guards


def file_folder_guard(url: str | os.PathLike, what: str, storage_options: Mapping[str, Any] | None = None) -> Guard:
    """The folder of a single file the run reads (the tree file): the output may not be it or contain it.

    An output inside that folder (``run1/labels`` beside ``run1/tree.json``) leaves the file alone,
    and a folder holding one file is not read recursively, so that is allowed.
    """
    fs, path = filesystem(str(url), storage_options)
    folder = parent_and_name(path)[0]
    return _guard(fs, folder, f"the folder {folder} of {what} {url}", inside_ok=True)


def validate_input_path(path: str | os.PathLike, storage_options: dict | None = None) -> str:
    """The input as given, after checking that it (or, for a glob, a match) exists.

    Local paths and ``file://`` URLs are checked on this machine; object-store URLs
    (``s3://bucket/key``) through their fsspec filesystem, with ``storage_options`` and the
    standard environment variables. A scheme whose package is missing is named with the package.
    """
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
