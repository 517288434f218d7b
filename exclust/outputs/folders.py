"""Where a run may write: output locations checked before any work.

An output may not be the filesystem root, the home folder, a bucket, a path outside
``EXCLUST_OUTPUT_BASE`` (when set), or anything a run reads: it may not equal, contain or lie
inside the input file or folder, a glob's root or the folder of any file a glob lists, or the tree
file's folder (``check_output`` with ``input_guards`` / ``file_folder_guard``). An existing
output is replaced only when it is a complete exclust output (marker ``.exclust-output`` and
manifest ``_SUCCESS``) of the same job (explain or label); an empty folder may be used; anything
else is refused with the reason. How a run then writes its output, so that it appears whole or
not at all, is ``exclust.outputs.staging``.
"""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from exclust.errors import InputError
from exclust.sources.storage import (GLOB_CHARS, OUTPUT_MARKER, SUCCESS_MANIFEST, Source, filesystem,
                             is_local_filesystem, is_remote, list_source)

MARKER = OUTPUT_MARKER  # written into every output folder; lets a later run of the same job replace it
BASE_ENV = "EXCLUST_OUTPUT_BASE"  # optional: every output folder must lie under this folder
STALE_ENV = "EXCLUST_STALE_STAGING_HOURS"  # object stores: staging older than this is abandoned


@dataclass(frozen=True)
class Guard:
    """A path a run reads: the output may not equal, contain or lie inside it."""

    scheme: str  # "file", "s3", ...
    path: str  # absolute real path (local) or bucket/key
    what: str  # for the message: "the input folder data", ...
    inside_ok: bool = False  # True: an output may lie inside it (it is not read recursively)


@dataclass(frozen=True)
class Location:
    """An output folder or prefix."""

    url: str  # as the user gave it
    fs: Any
    path: str  # absolute real path (local) or bucket/key
    local: bool

    @property
    def scheme(self) -> str:
        return _scheme(self.fs)

    @property
    def shown(self) -> Path | str:
        return Path(self.path) if self.local else self.url


def _scheme(fs: Any) -> str:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return "file" if is_local_filesystem(fs) else {"s3a": "s3"}.get(protocol, protocol)


def join_path(*parts: str) -> str:
    return "/".join(p.strip("/") if i else p.rstrip("/") for i, p in enumerate(parts) if p)


def parent_and_name(path: str) -> tuple[str, str]:
    parent, _, name = path.rstrip("/").rpartition("/")
    return parent or "/", name


# --------------------------------------------------------------------------- checks
def output_location(url: str | os.PathLike, *, storage_options: Mapping[str, Any] | None = None,
                    base: str | os.PathLike | None = None) -> Location:
    """Where ``url`` points, or an InputError when no output may go there at all."""
    text = str(url).strip()
    if not text:
        raise InputError("output folder is empty; give a folder name such as --out results")
    base = base if base is not None else os.environ.get(BASE_ENV) or None
    if is_remote(text):
        fs, path = filesystem(text, storage_options)
        path = path.strip("/")
        if "/" not in path:
            raise InputError(f"output {text} is a whole bucket; name a prefix inside it, such as {text.rstrip('/')}/labels")
        if base is not None and not text.rstrip("/").startswith(str(base).rstrip("/") + "/"):
            raise InputError(f"output {text} lies outside the allowed base {base}; choose a location under it")
        return Location(text, fs, path, False)
    fs, _ = filesystem("file:///")
    raw = Path(text.removeprefix("file://")).expanduser()
    if base is not None:
        base_path = Path(base).expanduser().resolve()
        target = (base_path / raw).resolve() if not raw.is_absolute() else raw.resolve()
        if target != base_path and base_path not in target.parents:
            raise InputError(f"output folder {text} lies outside the allowed base folder {base_path}; choose a folder under it")
        if target == base_path:
            raise InputError(f"output folder {text} is the base folder {base_path} itself; name a folder inside it")
    else:
        target = raw.resolve()
    if target == Path(target.anchor):
        raise InputError(f"output folder {text} is the filesystem root; choose a folder of its own")
    if target == Path.home().resolve():
        raise InputError(f"output folder {text} is the home folder; choose a folder of its own")
    return Location(text, fs, str(target), True)


def read_json(loc_fs: Any, path: str) -> dict:
    try:
        doc = json.loads(loc_fs.cat_file(path))
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def _inspect(loc: Location) -> tuple[str, dict, bool]:
    """("absent" | "empty" | "file" | "foreign" | "exclust", marker, has _SUCCESS)."""
    if loc.local:
        p = loc.path
        if not os.path.lexists(p):
            return "absent", {}, False
        if not os.path.isdir(p):
            return "file", {}, False
        names = os.listdir(p)
    else:
        loc.fs.invalidate_cache()
        if loc.fs.isfile(loc.path):
            return "file", {}, False
        names = [k[len(loc.path) + 1:] for k in loc.fs.find(loc.path)]
        if not names:
            return "absent", {}, False
    if not names:
        return "empty", {}, False
    if MARKER not in names:
        return "foreign", {}, False
    return "exclust", read_json(loc.fs, join_path(loc.path, MARKER)), SUCCESS_MANIFEST in names


def check_replaceable(loc: Location, job: str | None) -> None:
    state, marker, complete = _inspect(loc)
    where = f"output folder {loc.url}"
    if state == "file":
        raise InputError(f"output path {loc.url} is an existing file; choose a folder name")
    if state == "foreign":
        raise InputError(f"{where} exists and was not written by exclust; choose a new folder or remove it "
                         "(exclust replaces only its own output folders)")
    if state != "exclust":
        return
    other = marker.get("job")
    if job is not None and other != job:
        raise InputError(f"{where} holds an exclust {other or 'unknown'} output, not a {job} output; "
                         f"choose another folder (a {job} run replaces only {job} outputs)")
    if not complete and (loc.local or not owner_gone(marker)):
        raise InputError(f"{where} holds an incomplete exclust output (no {SUCCESS_MANIFEST}: a run is writing it "
                         "or was interrupted); wait for that run, or remove the folder")


def validate_output_dir(path: str | os.PathLike, base: str | os.PathLike | None = None, *, job: str | None = None,
                        storage_options: Mapping[str, Any] | None = None) -> Path | str:
    """The output folder (a Path; the URL for object stores), or an InputError saying why it cannot be used."""
    loc = output_location(path, storage_options=storage_options, base=base)
    check_replaceable(loc, job)
    return loc.shown


def check_output(url: str | os.PathLike, job: str, guards: Iterable[Guard] = (), *,
                 storage_options: Mapping[str, Any] | None = None, base: str | os.PathLike | None = None) -> Location:
    """Every check that needs no writing: the location, overlap with what the run reads, replaceability."""
    loc = output_location(url, storage_options=storage_options, base=base)
    for guard in guards:
        if guard.scheme != loc.scheme:
            continue
        a, b = loc.path.rstrip("/"), guard.path.rstrip("/")
        if a == b or b.startswith(a + "/") or (a.startswith(b + "/") and not guard.inside_ok):
            relation = "is" if a == b else ("contains" if b.startswith(a + "/") else "lies inside")
            raise InputError(f"output {loc.url} {relation} {guard.what}, which this run reads; "
                             "write the output to a folder outside everything the run reads")
    check_replaceable(loc, job)
    return loc


def _guard(fs: Any, path: str, what: str, inside_ok: bool = False) -> Guard:
    local = is_local_filesystem(fs)
    return Guard(_scheme(fs), os.path.realpath(path) if local else path.strip("/"), what, inside_ok)


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


# --------------------------------------------------------------------------- owners
def owner_record(run_id: str, job: str | None, info: Mapping[str, Any] | None = None) -> dict:
    import psutil

    return {"written_by": "exclust", "job": job, "run_id": run_id, "host": socket.gethostname(),
            "pid": os.getpid(), "pid_started": psutil.Process().create_time(), "time": time.time(), **(info or {})}


def owner_gone(record: Mapping[str, Any]) -> bool:
    """Whether the run that wrote ``record`` has certainly ended (object stores, where no lock exists)."""
    import psutil

    if record.get("host") == socket.gethostname() and "pid" in record:
        try:
            return abs(psutil.Process(int(record["pid"])).create_time() - float(record.get("pid_started", 0))) > 1.0
        except (psutil.NoSuchProcess, ValueError):
            return True
    stale = float(os.environ.get(STALE_ENV) or 48) * 3600
    return time.time() - float(record.get("time") or 0) > stale


def validate_input_path(path: str | os.PathLike, storage_options: dict | None = None) -> str:
    """The input as given, after checking that it (or, for a glob, a match) exists.

    Local paths and ``file://`` URLs are checked on this machine; object-store URLs
    (``s3://bucket/key``) through their fsspec filesystem, with ``storage_options`` and the
    standard environment variables. A scheme whose package is missing is named with the package.
    """
    from exclust.sources.storage import GLOB_CHARS, filesystem, is_remote, not_found_message, store_errors

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


def write_json(path: Path, doc: dict) -> None:
    """Write ``doc`` as indented JSON (NaN written as null, which JSON readers accept)."""
    path.write_text(json_text(doc))


def json_text(doc: dict) -> str:
    """``doc`` as indented JSON text (NaN as null, numpy values as Python values)."""
    return json.dumps(_jsonable(doc), indent=1, allow_nan=False) + "\n"


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
