"""The commit protocol: output folders and prefixes appear whole or not at all.

``staged_output`` first runs every check of ``exclust.outputs.folders.check_output`` (no overlap with
what the run reads; replace only a complete output of the same job), then creates the run's
staging before any computing, so an unwritable location fails at once.

Local filesystem (``staged_output``):

1. Under an flock on the parent folder itself (no lock file is left behind), the run removes
   stale staging of the same output (its lock file no longer held: the run that made it is dead)
   and creates its staging folder ``.NAME.exclust-staging-<run id>``, holding ``.exclust-lock``
   (locked by the run for its whole life), the marker (the first file) and ``.exclust-writers``.
2. Workers write below the staging folder (``StagingArea.open_write``): they create sub-folders
   one level at a time below the existing staging root, never with ``parents=True``, so a staging
   folder the driver removed is never recreated, and they hold a shared lock on
   ``.exclust-writers`` while they write.
3. Commit: ``_SUCCESS`` (JSON: files and rows) is written last; under the parent lock the target
   is checked again and the staging folder renamed into place (an atomic exchange with the old
   output where the kernel offers renameat2; else the old one is renamed aside first).
   From the lock on, a stop signal waits for the rename (``stop_signals.held_back``) and the output is
   recorded as committed (``stop_signals.note_committed``): a stop after that keeps it, and says so.
4. Abort (an exception, Ctrl-C): the caller cancels its tasks and waits for running ones; the
   driver then takes ``.exclust-writers`` exclusively (waiting for a writer still inside) and
   removes the staging folder, and any parent folders the run created.
5. A killed run leaves only its hidden staging folder, which no exclust reader picks up (hidden
   names are skipped) and which the next run to the same output removes (step 1).

Object stores (``s3://``; rename is not atomic and there are no locks):

1. Staging is the hidden prefix ``PARENT/.NAME.exclust-staging-<run id>/``; its owner record
   (host, pid, process start, time) is written first; a worker writes only while it exists, and
   looks again after writing: an abort removes the record before it lists what to remove, so an
   object written after that listing is removed by its own writer (a worker of a lost scheduler
   may finish its task after the driver gave up).
2. Commit: the marker is written at NAME; if NAME holds an older output its ``_SUCCESS`` is
   removed first (readers stop trusting it), then its files; the staged files are copied in;
   ``_SUCCESS`` is written last; the staging prefix is removed.
3. Readers (``storage.list_source``) refuse a prefix that has the marker but no ``_SUCCESS``.
4. A killed run leaves staging, or an output without ``_SUCCESS``; the next run removes staging
   whose owner is gone (same host and that process has ended, or older than
   ``EXCLUST_STALE_STAGING_HOURS``, default 48) and replaces an incomplete output of its job
   whose writer is gone. Two runs writing one prefix at once are not supported; a run that finds
   another run's marker at commit time fails instead of writing ``_SUCCESS``.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exclust.dataplane.stop_signals import held_back, note_committed
from exclust.errors import InputError, StagingGone
from exclust.outputs.folders import (
    MARKER,
    Location,
    check_output,
    check_replaceable,
    join_path,
    owner_gone,
    owner_record,
    read_json,
)
from exclust.sources.guards import Guard, parent_and_name
from exclust.sources.storage import STAGING_INFIX, SUCCESS_MANIFEST

LOCK_NAME = ".exclust-lock"  # inside local staging: held by the run that owns it
WRITERS_NAME = ".exclust-writers"  # inside local staging: shared by workers while they write


# --------------------------------------------------------------------------- local locks
@contextlib.contextmanager
def _flock(fd: int, mode: int, timeout: float, what: str) -> Iterator[None]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} stayed locked for {timeout:.0f} s; wait for the other run or choose "
                                   "another output") from None
            time.sleep(0.02)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def _folder_lock(folder: str, timeout: float) -> Iterator[None]:
    """An exclusive flock on the folder itself: serializes staging creation and commits beside it."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        with _flock(fd, fcntl.LOCK_EX, timeout, f"folder {folder}"):
            yield
    finally:
        os.close(fd)


def _remove_stale_local_staging(parent: str, name: str) -> None:
    """Remove staging of ``name`` whose run is dead (called under the parent lock)."""
    prefix = f".{name}{STAGING_INFIX}"
    for entry in os.listdir(parent):
        if not entry.startswith(prefix):
            continue
        path = os.path.join(parent, entry)
        try:
            fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDWR)
        except OSError:  # no lock file: creation and commit happen under the parent lock, so this is debris
            shutil.rmtree(path, ignore_errors=True)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free: the run that made it is gone
            if _no_writer_inside(path):  # an orphaned task of a remote cluster may still be writing
                shutil.rmtree(path, ignore_errors=True)
        except BlockingIOError:
            pass  # a live run owns it
        finally:
            os.close(fd)


def _no_writer_inside(staging: str) -> bool:
    try:
        fd = os.open(os.path.join(staging, WRITERS_NAME), os.O_RDONLY)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def _exchange(a: str, b: str) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False where unavailable."""
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    return False


# --------------------------------------------------------------------------- staging
@dataclass(frozen=True)
class StagingArea:
    """Where a run's files go before commit; picklable, so Dask tasks can write into it."""

    fs: Any
    root: str
    local: bool

    @contextlib.contextmanager
    def open_write(self, relpath: str) -> Iterator[Any]:
        """A binary file at ``relpath`` below the staging root; StagingGone when the root no longer exists."""
        parts = relpath.split("/")
        if not relpath or relpath.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"output file name {relpath!r} is not a plain relative path")
        if not self.local:
            self.fs.invalidate_cache()
            if not self.fs.exists(join_path(self.root, MARKER)):
                raise StagingGone(f"staging {self.root} is gone (the run was stopped); nothing written")
            path = join_path(self.root, relpath)
            with self.fs.open(path, "wb") as f:
                yield f
            # The driver removes the marker before it lists the staging to remove it (``abort``):
            # an object written after that listing is seen here, and its writer removes it.
            self.fs.invalidate_cache()
            if not self.fs.exists(join_path(self.root, MARKER)):
                with contextlib.suppress(FileNotFoundError):
                    self.fs.rm_file(path)
                raise StagingGone(f"staging {self.root} was removed while {relpath} was written (the run was "
                                  "stopped); nothing kept")
            return
        try:
            fd = os.open(os.path.join(self.root, WRITERS_NAME), os.O_RDONLY)
        except FileNotFoundError:
            raise StagingGone(f"staging {self.root} is gone (the run was stopped); nothing written") from None
        try:
            with _flock(fd, fcntl.LOCK_SH, 3600, f"staging {self.root}"):
                folder = self.root
                try:
                    for part in parts[:-1]:  # one level at a time: never recreate a removed root
                        folder = os.path.join(folder, part)
                        with contextlib.suppress(FileExistsError):
                            os.mkdir(folder)
                    f = open(os.path.join(self.root, *parts), "wb")  # a retried task overwrites its own file
                except FileNotFoundError:
                    raise StagingGone(f"staging {self.root} is gone (the run was stopped); nothing written") from None
                with f:
                    yield f
        finally:
            os.close(fd)

    def files(self) -> list[str]:
        """Relative paths of every staged file (lock files and the marker left out)."""
        skip = {MARKER, LOCK_NAME, WRITERS_NAME, SUCCESS_MANIFEST}
        if self.local:
            found = [os.path.relpath(os.path.join(d, n), self.root).replace(os.sep, "/")
                     for d, _, names in os.walk(self.root) for n in names]
        else:
            self.fs.invalidate_cache()
            found = [k[len(self.root.rstrip("/")) + 1:] for k in self.fs.find(self.root)]
        return sorted(f for f in found if f not in skip)


@dataclass
class StagedOutput:
    """One run's output: staged, then committed whole, or removed."""

    target: Location
    job: str | None
    run_id: str
    area: StagingArea
    info: dict = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)  # relpath -> rows, recorded by the caller
    lock_timeout: float = 3600.0
    _lock_fd: int | None = None
    _made_parents: list[str] = field(default_factory=list)
    _made_root: bool = False

    # ------------------------------------------------------------- driver-side writes
    def write_bytes(self, relpath: str, data: bytes) -> None:
        with self.area.open_write(relpath) as f:
            f.write(data)

    def write_text(self, relpath: str, text: str) -> None:
        self.write_bytes(relpath, text.encode())

    def record_rows(self, relpath: str, rows: int) -> None:
        self.rows[relpath] = int(rows)

    # ------------------------------------------------------------- life cycle
    def _open(self) -> None:
        owner = json.dumps(owner_record(self.run_id, self.job, self.info), default=str)
        parent, name = parent_and_name(self.target.path)
        try:
            if not self.target.local:
                _remove_stale_object_staging(self.target.fs, parent, name)
                self.target.fs.pipe(join_path(self.area.root, MARKER), owner.encode())
                return
            self._made_parents = _make_parents(parent)
            with _folder_lock(parent, self.lock_timeout):
                _remove_stale_local_staging(parent, name)
                check_replaceable(self.target, self.job)
                os.mkdir(self.area.root)
                self._made_root = True
                self._lock_fd = os.open(os.path.join(self.area.root, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                Path(self.area.root, MARKER).write_text(owner)  # the first file
                Path(self.area.root, WRITERS_NAME).touch()
        except BaseException as exc:
            self.abort()
            if isinstance(exc, OSError) and not isinstance(exc, TimeoutError):
                reason = exc.strerror or type(exc).__name__
                raise InputError(f"output {self.target.url} cannot be written ({reason}); "
                                 "choose a location you can write to") from exc
            raise

    def manifest(self) -> dict:
        files = [{"path": f, "rows": self.rows.get(f)} for f in self.area.files()]
        counted = [f["rows"] for f in files if f["rows"] is not None]
        return {"written_by": "exclust", "job": self.job, "run_id": self.run_id, "time": time.time(),
                "files": files, "rows": sum(counted) if counted else None}

    def commit(self) -> None:
        manifest = json.dumps(self.manifest(), indent=1).encode()
        if not self.target.local:
            return self._commit_objects(manifest)
        parent, _ = parent_and_name(self.target.path)
        self.write_bytes(SUCCESS_MANIFEST, manifest)  # the last file
        # Waiting for the folder's lock stays interruptible; from the lock on, a stop signal waits until the
        # output is in place and recorded as committed (the CLI then says so), or the commit failed whole.
        with _folder_lock(parent, self.lock_timeout), held_back():
            check_replaceable(self.target, self.job)  # the folder may have appeared since
            for lock in (LOCK_NAME, WRITERS_NAME):
                os.unlink(os.path.join(self.area.root, lock))  # the held lock stays on the open inode
            if os.path.lexists(self.target.path):
                if not _exchange(self.area.root, self.target.path):
                    aside = self.area.root + "-replaced"
                    os.rename(self.target.path, aside)
                    os.rename(self.area.root, self.target.path)
                    shutil.rmtree(aside, ignore_errors=True)
                shutil.rmtree(self.area.root, ignore_errors=True)  # the old output, swapped out
            else:
                os.rename(self.area.root, self.target.path)
            self._made_root = False
            self._unlock()
            note_committed(self.target.url)

    def _unlock(self) -> None:
        """Release the staging lock of a local folder, if this run holds it."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _commit_objects(self, manifest: bytes) -> None:
        fs, target = self.target.fs, self.target.path
        check_replaceable(self.target, self.job)
        staged = self.area.files()
        record = owner_record(self.run_id, self.job, self.info)
        fs.pipe(join_path(target, MARKER), json.dumps(record, default=str).encode())
        fs.invalidate_cache()
        old = [k for k in fs.find(target) if k.rstrip("/") != join_path(target, MARKER)]
        if join_path(target, SUCCESS_MANIFEST) in old:
            fs.rm(join_path(target, SUCCESS_MANIFEST))  # first: readers stop trusting the old output
        old = [k for k in old if k != join_path(target, SUCCESS_MANIFEST)]
        if old:
            fs.rm(old)
        if staged:
            fs.copy([join_path(self.area.root, f) for f in staged], [join_path(target, f) for f in staged])
        if read_json(fs, join_path(target, MARKER)).get("run_id") != self.run_id:
            raise RuntimeError(f"another run wrote to {self.target.url} at the same time; run again, one at a time")
        with held_back():
            fs.pipe(join_path(target, SUCCESS_MANIFEST), manifest)  # the last object
            note_committed(self.target.url)
            fs.rm(self.area.root, recursive=True)

    def abort(self) -> None:
        """Remove the staging (after any writer still inside has left) and parent folders this run made."""
        if self.target.local:
            if self._made_root:
                try:
                    fd = os.open(os.path.join(self.area.root, WRITERS_NAME), os.O_RDONLY)
                except OSError:
                    fd = None
                try:
                    if fd is not None:  # wait (bounded) for a worker still writing, then remove
                        with _flock(fd, fcntl.LOCK_EX, 120, f"staging {self.area.root}"):
                            shutil.rmtree(self.area.root, ignore_errors=True)
                except TimeoutError:
                    pass
                finally:
                    if fd is not None:
                        os.close(fd)
                shutil.rmtree(self.area.root, ignore_errors=True)
                self._made_root = False
            self._unlock()
            for folder in reversed(self._made_parents):
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
        else:
            # The marker first: a worker still writing sees it gone and removes its own object.
            with contextlib.suppress(FileNotFoundError):
                self.target.fs.rm_file(join_path(self.area.root, MARKER))
            self.target.fs.invalidate_cache()
            with contextlib.suppress(FileNotFoundError):
                self.target.fs.rm(self.area.root, recursive=True)


def _make_parents(folder: str) -> list[str]:
    """Create ``folder`` and its missing parents; return those created (outermost first)."""
    missing = []
    path = folder
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for p in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(p)
    return list(reversed(missing))


def _remove_stale_object_staging(fs: Any, parent: str, name: str) -> None:
    fs.invalidate_cache()
    prefix = join_path(parent, f".{name}{STAGING_INFIX}")
    try:
        entries = fs.ls(parent, detail=False)
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.rstrip("/").startswith(prefix) and owner_gone(read_json(fs, join_path(entry, MARKER))):
            with contextlib.suppress(FileNotFoundError):
                fs.rm(entry, recursive=True)


@contextlib.contextmanager
def staged_output(url: str | os.PathLike, job: str | None, guards: Iterable[Guard] = (), *,
                  storage_options: Mapping[str, Any] | None = None, base: str | os.PathLike | None = None,
                  info: Mapping[str, Any] | None = None, lock_timeout: float = 3600.0) -> Iterator[StagedOutput]:
    """Check the output, create its staging now, yield it; commit on success, remove everything on failure."""
    target = check_output(url, job, guards, storage_options=storage_options, base=base)
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    parent, name = parent_and_name(target.path)
    root = os.path.join(parent, f".{name}{STAGING_INFIX}{run_id}") if target.local else \
        join_path(parent, f".{name}{STAGING_INFIX}{run_id}")
    stage = StagedOutput(target, job, run_id, StagingArea(target.fs, root, target.local), dict(info or {}),
                         lock_timeout=lock_timeout)
    stage._open()
    try:
        yield stage
    except BaseException:
        stage.abort()
        raise
    try:
        stage.commit()
    except BaseException:
        stage.abort()
        raise


@contextlib.contextmanager
def atomic_output_dir(path: str | os.PathLike, *, base: str | os.PathLike | None = None, lock_timeout: float = 3600.0,
                      info: dict | None = None) -> Iterator[Path]:
    """A local staging folder to write files into; it replaces ``path`` whole on success and vanishes on failure."""
    with staged_output(path, (info or {}).get("job"), base=base, info=info, lock_timeout=lock_timeout) as stage:
        if not stage.target.local:
            raise InputError(f"{path} is not a local folder; this writer writes local folders only")
        yield Path(stage.area.root)
