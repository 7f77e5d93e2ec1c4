"""Data I/O: strict JSONL (RFC 8259 objects, one per line), atomic writes and a resumable
append-only results writer.

Every reader error is a :class:`~llmcore.errors.DataError` naming the file and the 1-based line,
so a bad row in a 100k-line file is found without a debugger.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from llmcore.errors import DataError, LLMCoreError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, one writer per file
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import datasets


def _import_datasets(feature: str):
    """``datasets``, an optional extra of llmcore since 0.2 (only some packages need it)."""
    try:
        import datasets
    except ImportError as exc:
        from llmcore.errors import MissingExtraError

        raise MissingExtraError(feature, "datasets") from exc
    return datasets


__all__ = [
    "ResultsWriter",
    "atomic_write_json",
    "atomic_write_text",
    "filter_pending",
    "from_dataset",
    "iter_jsonl",
    "read_jsonl",
    "to_dataset",
    "write_jsonl",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
PathLike = str | os.PathLike[str]


def _parse_line(raw: bytes, path: Path, lineno: int) -> dict[str, Any] | None:
    """Parse one JSONL line; ``None`` for a blank line, :class:`DataError` if it is not an object."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}:{lineno}: invalid UTF-8 ({e.reason} at byte {e.start})") from e
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{lineno}: invalid JSON ({e.msg} at column {e.colno})") from e
    if not isinstance(obj, dict):
        raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
    return obj


def iter_jsonl(path: PathLike) -> Iterator[dict[str, Any]]:
    """Yield the JSON objects of a JSONL file (https://jsonlines.org), skipping blank lines.

    Raises :class:`DataError` naming ``path:line`` for malformed JSON, invalid UTF-8 or a line
    that is not a JSON object, and naming the path when the file cannot be opened.
    """
    p = Path(path)
    try:
        f = p.open("rb")
    except OSError as e:
        raise DataError(f"{p}: cannot read JSONL file ({e.strerror or e})") from e
    with f:
        # Bytes, not text mode, so a bad UTF-8 sequence is reported with its line number.
        for lineno, raw in enumerate(f, start=1):
            obj = _parse_line(raw, p, lineno)
            if obj is not None:
                yield obj


def read_jsonl(path: PathLike) -> list[dict[str, Any]]:
    """Read a whole JSONL file into a list of dicts (see :func:`iter_jsonl`)."""
    return list(iter_jsonl(path))


def _dump_row(row: object, where: str) -> str:
    if not isinstance(row, Mapping):
        raise DataError(f"{where}: a JSONL row must be a mapping, got {type(row).__name__}")
    try:
        return json.dumps(dict(row), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise DataError(f"{where}: row is not JSON-serialisable ({e})") from e


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not supported everywhere (e.g. Windows), hence best effort.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _atomic_write_chunks(path: PathLike, chunks: Iterable[str]) -> None:
    """Write ``chunks`` to a temp file beside ``path``, fsync it, then ``os.replace`` it over."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    # os.open with 0o666 lets the umask decide the mode, as for a plain open(); mkstemp would
    # leave the result 0600.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(OSError):
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(target.parent)


def atomic_write_text(path: PathLike, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically: readers see the old or the new file,
    never a partial one; on error the old file is untouched. Parent directories are created."""
    _atomic_write_chunks(path, [text])


def atomic_write_json(path: PathLike, obj: Any, *, indent: int | None = 2) -> None:
    """Atomically write ``obj`` as JSON (UTF-8, trailing newline); see :func:`atomic_write_text`.

    Raises :class:`DataError` if ``obj`` is not JSON-serialisable (NaN/Infinity included, which
    RFC 8259 does not allow); nothing is written then.
    """
    try:
        text = json.dumps(obj, ensure_ascii=False, indent=indent, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise DataError(f"{path}: object is not JSON-serialisable ({e})") from e
    atomic_write_text(path, text + "\n")


def write_jsonl(path: PathLike, rows: Iterable[Mapping[str, Any]]) -> int:
    """Atomically write ``rows`` as JSONL, one compact object per line; returns the row count.

    ``rows`` may be a generator: it is streamed to the temp file, and if it raises (or a row is
    not a JSON-serialisable mapping, :class:`DataError` naming the row index) the existing file
    is left as it was.
    """
    count = 0

    def lines() -> Iterator[str]:
        nonlocal count
        for i, row in enumerate(rows):
            yield _dump_row(row, f"{path}: row {i}") + "\n"
            count += 1

    _atomic_write_chunks(path, lines())
    return count


def filter_pending(
    items: Iterable[T], done_ids: Iterable[Hashable], *, key: str | Callable[[T], Hashable] = "id"
) -> list[T]:
    """Return the ``items`` whose id is not in ``done_ids``, in order.

    ``key`` is a mapping key (items are dicts) or a function from item to id.
    """
    done = done_ids if isinstance(done_ids, set | frozenset) else set(done_ids)
    get = (lambda item: item[key]) if isinstance(key, str) else key
    return [item for item in items if get(item) not in done]


class ResultsWriter:
    """Append-only JSONL results file that survives crashes and resumes where it stopped.

    On open it loads the ids already in ``path`` (creating the file and its parents if needed).
    A partial or corrupt *last* line, which is what a crash mid-write leaves, is truncated away
    with a warning; corruption on any earlier line raises :class:`DataError`. Each
    :meth:`write` appends one line, flushes and fsyncs, so a finished row is never lost.
    Ids must be ``str`` or ``int`` (they compare exactly: ``1`` and ``"1"`` differ).

    Several writers (processes or threads) may share one file: every read and append happens
    under an exclusive ``flock`` on it (POSIX; none on Windows), and each writer first reads the
    rows the others appended since it last looked. :meth:`is_done` and :meth:`pending` therefore
    see other writers' finished rows, and :meth:`write` of an id that *another* writer finished
    in the meantime is skipped (returns ``False``) instead of written twice; writing an id this
    writer wrote, or that was in the file when it opened, is still a :class:`DataError`.

    Example::

        with ResultsWriter("out/results.jsonl") as out:
            for item in out.pending(items):
                out.write({"id": item["id"], "answer": solve(item)})
    """

    def __init__(self, path: PathLike, id_key: str = "id") -> None:
        self.path = Path(path)
        self.id_key = id_key
        self._lock = threading.Lock()
        self._done: set[str | int] = set()
        self._others: set[str | int] = set()  # ids other writers finished after we opened
        self._offset = 0  # bytes of the file this writer has read
        self._lines = 0  # and the lines in them
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._file = self.path.open("ab")
        except OSError as e:
            raise DataError(f"{self.path}: cannot read results file ({e.strerror or e})") from e
        try:
            with self._locked():
                self._recover(by_others=False)
        except BaseException:
            self._file.close()
            raise

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the file's exclusive advisory lock (no-op where ``fcntl`` is missing)."""
        if fcntl is None:  # pragma: no cover
            yield
            return
        fcntl.flock(self._file.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)

    def refresh(self) -> None:
        """Read the rows other writers finished since this one last looked."""
        with self._lock:
            if self._file.closed:
                return
            with self._locked():
                self._recover(by_others=True)

    def _check_id(self, row: Mapping[str, Any], where: str) -> str | int:
        if self.id_key not in row:
            raise DataError(f"{where}: row has no id key {self.id_key!r}")
        rid = row[self.id_key]
        if isinstance(rid, bool) or not isinstance(rid, str | int):
            raise DataError(
                f"{where}: id {self.id_key!r} must be a str or int, got {type(rid).__name__}"
            )
        if rid in self._done:
            raise DataError(f"{where}: duplicate id {rid!r}")
        return rid

    def _recover(self, *, by_others: bool) -> None:
        """Load the rows appended since this writer last read (all of them on open; call under
        the lock). Their ids count as done (``by_others``: finished by another writer). A torn
        last line, which only a writer that died mid-write leaves (live writers append whole
        lines under the lock), is truncated away with a warning; a complete last row missing
        its newline gets one. Corruption on any earlier line is a :class:`DataError`."""
        start = self._offset
        size = os.fstat(self._file.fileno()).st_size
        if size <= start:  # nothing new (the common case when called from is_done/pending)
            self._offset = size
            return
        try:
            with self.path.open("rb") as f:
                f.seek(start)
                data = f.read()
        except OSError as e:
            raise DataError(f"{self.path}: cannot read results file ({e.strerror or e})") from e
        lines = data.split(b"\n")
        # Index of the last line with content: only that one may be torn by a crash.
        last = max((i for i, raw in enumerate(lines) if raw.strip()), default=-1)
        offset = 0
        for i, raw in enumerate(lines):
            lineno = self._lines + i + 1
            try:
                row = _parse_line(raw, self.path, lineno)
            except DataError as e:
                # Only a parse failure can be a torn write; a complete non-object is corruption.
                torn = isinstance(e.__cause__, json.JSONDecodeError | UnicodeDecodeError)
                if i != last or not torn:
                    raise
                logger.warning(
                    "%s: dropping partial last line %d (%d bytes) left by a writer that stopped "
                    "mid-write: %s",
                    self.path,
                    lineno,
                    len(raw),
                    e,
                )
                self._truncate(start + offset, newline=False)
                self._offset, self._lines = start + offset, self._lines + i
                return
            if row is not None:
                rid = self._check_id(row, f"{self.path}:{lineno}")
                self._done.add(rid)
                if by_others:
                    self._others.add(rid)
            offset += len(raw) + 1
        size, newlines = start + len(data), data.count(b"\n")
        if not data.endswith(b"\n"):
            # A complete object whose newline was never written: keep it, finish the line.
            self._truncate(size, newline=True)
            size, newlines = size + 1, newlines + 1
        self._offset, self._lines = size, self._lines + newlines

    def _truncate(self, size: int, *, newline: bool) -> None:
        with self.path.open("r+b") as f:
            f.truncate(size)
            if newline:
                f.seek(size)
                f.write(b"\n")
            f.flush()
            os.fsync(f.fileno())

    @property
    def done_ids(self) -> frozenset[str | int]:
        """Ids of the rows already in the file."""
        self.refresh()
        return frozenset(self._done)

    def is_done(self, rid: str | int) -> bool:
        """Whether a row with id ``rid`` is already in the file."""
        self.refresh()
        return rid in self._done

    def __contains__(self, rid: object) -> bool:
        self.refresh()
        return rid in self._done

    def __len__(self) -> int:
        self.refresh()
        return len(self._done)

    def pending(
        self, items: Iterable[T], *, key: str | Callable[[T], Hashable] | None = None
    ) -> list[T]:
        """The ``items`` not finished yet (``key`` defaults to this writer's ``id_key``)."""
        self.refresh()
        return filter_pending(items, self._done, key=self.id_key if key is None else key)

    def write(self, row: Mapping[str, Any]) -> bool:
        """Append ``row`` durably and return ``True``; ``False`` (nothing written) if another
        writer finished the same id since this one opened; :class:`DataError` if the id is
        missing, or was written by this writer or already in the file when it opened."""
        line = _dump_row(row, str(self.path)) + "\n"
        with self._lock:
            if self._file.closed:
                raise LLMCoreError(f"{self.path}: ResultsWriter is closed")
            with self._locked():
                self._recover(by_others=True)
                rid = row.get(self.id_key) if isinstance(row, Mapping) else None
                if isinstance(rid, str | int) and not isinstance(rid, bool) and rid in self._others:
                    logger.info("%s: id %r was finished by another writer; skipped", self.path, rid)
                    return False
                rid = self._check_id(row, str(self.path))
                # Whole line, then flush + fsync: a crash can only tear the last line.
                self._file.write(line.encode("utf-8"))
                self._file.flush()
                os.fsync(self._file.fileno())
                self._offset = os.fstat(self._file.fileno()).st_size
                self._lines += 1
                self._done.add(rid)
                return True

    def rows(self) -> list[dict[str, Any]]:
        """All finished rows, in file order."""
        with self._lock:
            if self._file.closed:
                return read_jsonl(self.path)
            self._file.flush()
            with self._locked():
                return read_jsonl(self.path)

    def close(self) -> None:
        """Close the file (idempotent)."""
        with self._lock:
            self._file.close()

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResultsWriter({str(self.path)!r}, id_key={self.id_key!r}, done={len(self._done)})"


def to_dataset(rows: Iterable[Mapping[str, Any]]) -> datasets.Dataset:
    """Build a :class:`datasets.Dataset` from dict rows.

    Columns are the union of all rows' keys in first-seen order; a row lacking a key gets
    ``None`` there (``Dataset.from_list`` alone would silently drop keys the first row lacks);
    Arrow does the same inside nested dicts, so a round trip of ragged rows adds ``None`` keys.
    Rows whose values Arrow cannot put in one column type raise :class:`DataError`.
    """
    datasets = _import_datasets("llmcore.data.to_dataset")
    import pyarrow as pa

    rows = [dict(r) for r in rows]
    columns: dict[str, None] = {}
    for r in rows:
        columns.update(dict.fromkeys(r))
    table = {c: [r.get(c) for r in rows] for c in columns}
    try:
        return datasets.Dataset.from_dict(table)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
        raise DataError(f"rows cannot be converted to a Dataset: {e}") from e


def from_dataset(ds: datasets.Dataset | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Turn a :class:`datasets.Dataset` (or any iterable of mappings) into a list of dicts."""
    to_list = getattr(ds, "to_list", None)
    if callable(to_list):
        return to_list()
    return [dict(r) for r in ds]
