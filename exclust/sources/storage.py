"""Where data lives: local paths, ``file://`` and object stores (``s3://``...) through fsspec.

One listing of a source serves every reader and writer of exclust: the Parquet files a path,
folder, glob or URL names, each with its path relative to the source root (so outputs can keep
the input's layout without collisions) and its hive partition keys (``day=1/part.parquet`` gives
``{"day": "1"}``). Entries no reader of exclust may ever pick up are skipped here, once: hidden
names, ``_``-prefixed names (``_SUCCESS``, ``_temporary/``, ``_labels.json``), ``.crc`` files and
exclust's own staging folders.

Credentials and endpoints of object stores come from the standard environment variables
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``) and from
``storage_options`` (``--storage-option key=value`` on the command line).
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from exclust.errors import InputError
from exclust.sources.extras import require_extra

PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")
GLOB_CHARS = "*?["

# fsspec protocol -> the package that provides it, named in the error when it is missing.
_PROTOCOL_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "abfs": "adlfs", "az": "adlfs",
                      "hdfs": "pyarrow", "http": "aiohttp", "https": "aiohttp"}
# Schemes whose package is an extra of exclust (pyproject.toml): the error names the extra.
_PROTOCOL_EXTRAS = {"s3": "s3", "s3a": "s3"}


@dataclass(frozen=True)
class SourceFile:
    """One Parquet file of a source."""

    path: str  # as the filesystem names it (for s3: "bucket/key", no protocol)
    relpath: str  # relative to the source root, "/"-separated; unique within a listing
    partitions: tuple[tuple[str, str], ...] = ()  # hive keys from the folders between root and file

    @property
    def partition_dict(self) -> dict[str, str]:
        return dict(self.partitions)


@dataclass
class Source:
    """A listed source: its filesystem, root and files (sorted by relative path)."""

    url: str  # as the user gave it
    fs: Any  # an fsspec filesystem
    root: str  # the folder every relpath is relative to (fs path)
    files: list[SourceFile] = field(default_factory=list)
    storage_options: dict[str, Any] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return is_local_filesystem(self.fs)

    def display(self, f: SourceFile) -> str:
        """How messages name a file: a local path, or a URL with its scheme."""
        return f.path if self.is_local else self.fs.unstrip_protocol(f.path)

    @property
    def partition_keys(self) -> list[str]:
        keys: dict[str, None] = {}
        for f in self.files:
            for k, _ in f.partitions:
                keys.setdefault(k)
        return list(keys)


def split_protocol(url: str) -> tuple[str | None, str]:
    """("s3", "bucket/key") for "s3://bucket/key"; (None, path) for a plain path."""
    text = str(url)
    if "://" in text:
        proto, rest = text.split("://", 1)
        return proto.lower(), rest
    return None, text


def is_remote(url: str | os.PathLike) -> bool:
    """True for URLs of a non-local filesystem (anything but a plain path or file://)."""
    proto, _ = split_protocol(str(url))
    return proto not in (None, "file", "local")


def is_local_filesystem(fs: Any) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("file", "local")


def filesystem(url: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """(fsspec filesystem, path on it) for ``url``; a clear error when the scheme's package is missing."""
    import fsspec
    from fsspec.core import url_to_fs

    text = str(url)
    proto, rest = split_protocol(text)
    options = dict(storage_options or {})
    if proto in (None, "file", "local"):
        return fsspec.filesystem("file"), os.path.abspath(os.path.expanduser(rest))
    if proto in _PROTOCOL_EXTRAS:
        require_extra(_PROTOCOL_PACKAGES[proto], f"reading and writing {proto}:// paths", _PROTOCOL_EXTRAS[proto])
    try:
        fs, path = url_to_fs(text, **options)
    except ImportError as exc:
        package = _PROTOCOL_PACKAGES.get(proto, f"the fsspec implementation of {proto}://")
        raise InputError(f"reading {proto}:// paths needs the package {package}; "
                         f"install it (pip install {package})") from exc
    except ValueError as exc:
        if "Protocol not known" in str(exc):
            raise InputError(f"unknown storage scheme {proto}:// in {text}; "
                             "use a local path, file:// or s3://") from exc
        raise
    # fsspec keeps one instance per options, with its listings cached: a long-lived process (a flow
    # worker running the nightly job) would otherwise not see files written since its last run.
    fs.invalidate_cache()
    return fs, path


def is_ignored_name(name: str) -> bool:
    """Names no reader of exclust picks up: hidden, underscore-prefixed, checksum and staging files."""
    return name.startswith((".", "_")) or name.endswith(".crc")


def _partition_keys(parts: list[str]) -> tuple[tuple[str, str], ...]:
    keys = []
    for part in parts:
        key, sep, value = part.partition("=")
        if sep and key and not key.startswith((".", "_")):
            keys.append((key, value))
    return tuple(keys)


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _glob_root(path: str) -> str:
    """The fixed folder before the first glob character."""
    head = path
    for i, ch in enumerate(path):
        if ch in GLOB_CHARS:
            head = path[:i]
            break
    return head.rsplit("/", 1)[0] if "/" in head else ""


@contextlib.contextmanager
def store_errors(url: str) -> Iterator[None]:
    """Errors of the filesystem or store behind ``url`` (missing credentials, access denied, no
    such bucket, endpoint unreachable: each library raises its own types) as one InputError."""
    try:
        yield
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"cannot read {url}: {type(exc).__name__}: {exc}; check the path and, for an object "
                         "store, the credentials and endpoint (AWS_* environment variables or storage options "
                         "such as endpoint_url)") from exc


def not_found_message(url: str) -> str:
    """'input not found' naming where it was looked for (a local path or an object store)."""
    proto, rest = split_protocol(url)
    if proto in (None, "file", "local"):
        return f"input not found: {url}"
    bucket = rest.split("/", 1)[0]
    return (f"input {url} not found on {proto}://{bucket}: check the bucket and key, the credentials and, for a "
            "store other than AWS, the endpoint (AWS_ENDPOINT_URL or the storage option endpoint_url)")


def _refuse_incomplete_outputs(fs: Any, url: str, root: str, folders, found: set[str] | None = None) -> None:
    """InputError when a folder read holds exclust's output marker but not its success manifest.

    Writers put the marker first and the manifest last, so such a folder is a run that did not
    finish (or is still running): its files are partial. Folders that are not read anyway
    (hidden, staging, ``_``-prefixed below the root) are left alone. ``found`` is a recursive
    listing when the caller has one (then no request is made).
    """
    prefix = root.rstrip("/") + "/" if root else ""
    for folder in sorted(folders):
        rel = folder[len(prefix):] if prefix and folder.startswith(prefix) else ""
        if rel and any(is_ignored_name(part) for part in rel.split("/")):
            continue
        inside = folder.rstrip("/") + "/" if folder else ""
        if found is not None:
            marked, complete = inside + OUTPUT_MARKER in found, inside + SUCCESS_MANIFEST in found
        else:
            marked = fs.exists(inside + OUTPUT_MARKER)
            complete = marked and fs.exists(inside + SUCCESS_MANIFEST)
        if marked and not complete:
            where = folder if is_local_filesystem(fs) else fs.unstrip_protocol(folder)
            raise InputError(f"{where} (read from {url}) is an incomplete exclust output, the run that wrote it did "
                             "not finish (or is still running); rerun that job, or read a complete output")


def list_source(url: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> Source:
    """The Parquet files of a file, folder, glob or URL; InputError when there are none.

    A folder is searched recursively for files ending .parquet/.parq/.pq; a glob keeps what it
    matches. Any path element that is hidden or starts with ``_`` (between the root and the
    file) excludes the file.
    """
    text = str(url).strip()
    if not text:
        raise InputError("input path is empty; give a Parquet file, a folder of them, a glob or an s3:// URL")
    fs, path = filesystem(text, storage_options)
    path = path.rstrip("/") or path
    with store_errors(text):
        if any(ch in path for ch in GLOB_CHARS):
            root = _glob_root(path)
            candidates = [p for p in fs.glob(path) if fs.isfile(p)]
            _refuse_incomplete_outputs(fs, text, root, {root, *(_parent(p) for p in candidates)})
        elif fs.isdir(path):
            root = path
            found = fs.find(path)
            candidates = [p for p in found if p.endswith(PARQUET_SUFFIXES)]
            marked = {_parent(p) for p in found if p.rsplit("/", 1)[-1] == OUTPUT_MARKER}
            _refuse_incomplete_outputs(fs, text, root, marked, found=set(found))
        elif fs.isfile(path):
            root = _parent(path)
            candidates = [path]
            _refuse_incomplete_outputs(fs, text, root, {root})
        else:
            raise InputError(not_found_message(text))
    files = []
    prefix = root.rstrip("/") + "/" if root else ""
    for p in candidates:
        rel = p[len(prefix):] if prefix and p.startswith(prefix) else p.lstrip("/")
        parts = rel.split("/")
        if any(is_ignored_name(part) for part in parts):
            continue
        files.append(SourceFile(p, rel, _partition_keys(parts[:-1])))
    files.sort(key=lambda f: f.relpath)
    if not files:
        raise InputError(f"no Parquet files found at {text}")
    return Source(text, fs, root, files, dict(storage_options or {}))


# Names shared by exclust's writers and readers of output folders (and prefixes on object stores).
OUTPUT_MARKER = ".exclust-output"  # written first: "this folder is an exclust output" (JSON: job kind, run id)
SUCCESS_MANIFEST = "_SUCCESS"  # written last: the output is complete (JSON: files and rows)
STAGING_INFIX = ".exclust-staging-"  # hidden run-scoped staging folders: ".<name>.exclust-staging-<run id>"


def parse_storage_options(items: list[str] | None) -> dict[str, Any]:
    """``["key=value", ...]`` (repeated ``--storage-option``) -> dict; values true/false/numbers typed."""
    import json

    options: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"storage option {item!r} is not key=value (for example --storage-option anon=true)")
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return options
