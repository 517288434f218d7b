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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exclust.errors import InputError
from exclust.sources.guards import Guard, scheme_of
from exclust.sources.storage import OUTPUT_MARKER, SUCCESS_MANIFEST, filesystem, is_remote

MARKER = OUTPUT_MARKER  # written into every output folder; lets a later run of the same job replace it
BASE_ENV = "EXCLUST_OUTPUT_BASE"  # optional: every output folder must lie under this folder
STALE_ENV = "EXCLUST_STALE_STAGING_HOURS"  # object stores: staging older than this is abandoned


@dataclass(frozen=True)
class Location:
    """An output folder or prefix."""

    url: str  # as the user gave it
    fs: Any
    path: str  # absolute real path (local) or bucket/key
    local: bool

    @property
    def scheme(self) -> str:
        return scheme_of(self.fs)

    @property
    def shown(self) -> Path | str:
        return Path(self.path) if self.local else self.url


def join_path(*parts: str) -> str:
    return "/".join(p.strip("/") if i else p.rstrip("/") for i, p in enumerate(parts) if p)


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
            raise InputError(f"output {text} is a whole bucket; name a prefix inside it, such as "
                             f"{text.rstrip('/')}/labels")
        if base is not None and not text.rstrip("/").startswith(str(base).rstrip("/") + "/"):
            raise InputError(f"output {text} lies outside the allowed base {base}; choose a location under it")
        return Location(text, fs, path, False)
    fs, _ = filesystem("file:///")
    raw = Path(text.removeprefix("file://")).expanduser()
    if base is not None:
        base_path = Path(base).expanduser().resolve()
        target = (base_path / raw).resolve() if not raw.is_absolute() else raw.resolve()
        if target != base_path and base_path not in target.parents:
            raise InputError(f"output folder {text} lies outside the allowed base folder {base_path}; choose a folder "
                             "under it")
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


def check_output(url: str | os.PathLike, job: str | None, guards: Iterable[Guard] = (), *,
                 storage_options: Mapping[str, Any] | None = None, base: str | os.PathLike | None = None) -> Location:
    """Every check that needs no writing: the location, overlap with what the run reads, replaceability."""
    loc = output_location(url, storage_options=storage_options, base=base)
    check_disjoint(loc, guards)
    check_replaceable(loc, job)
    return loc


def check_disjoint(loc: Location, guards: Iterable[Guard]) -> None:
    """InputError when the output ``loc`` equals, contains or lies inside what the run reads."""
    for guard in guards:
        if guard.scheme != loc.scheme:
            continue
        a, b = loc.path.rstrip("/"), guard.path.rstrip("/")
        if a == b or b.startswith(a + "/") or (a.startswith(b + "/") and not guard.inside_ok):
            relation = "is" if a == b else ("contains" if b.startswith(a + "/") else "lies inside")
            raise InputError(f"output {loc.url} {relation} {guard.what}, which this run reads; "
                             "write the output to a folder outside everything the run reads")


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
