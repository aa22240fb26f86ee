"""The warehouse loader's commit log: which Parquet files are live and which offsets they hold.

On disk, under the output directory ``PATH``::

    PATH/topic=<t>/date=<yyyy-mm-dd>/part-*.parquet   live data files (Hive-style partitions)
    PATH/_strom/manifests/<run, 20 digits>.json        one manifest per committed run
    PATH/_strom/staging/<run>/...                      what a run's Spark job wrote, not yet live

A manifest is self-contained: the complete list of live files (path relative to
``PATH``, rows, bytes, and the min/max Kafka partition and offset the file holds), the
next offset to load per topic-partition, and, for the files this run added, where they
were staged. The manifest with the highest run number is the state of the output.

The commit point of a run is one ``rename`` of its manifest into ``manifests/`` (after
an fsync of the file): data files and offsets become live together or not at all. What
follows the commit, moving staged files into place and deleting the files the run
superseded, is redone by ``recover`` after a crash, from the manifest alone. Before the
commit nothing in the live tree has changed, so a run killed at any moment leaves the
previous run's state; ``recover`` also deletes any file in the live tree the manifest
does not list. Spark and other Parquet readers skip paths starting with ``_``, so a plain
``spark.read.parquet(PATH)`` sees exactly the live files once ``recover`` has run (every
load starts with it).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

META_DIR = "_strom"
VERSION = 1


@dataclass(frozen=True, slots=True)
class DataFile:
    path: str  # relative to the output directory
    rows: int
    bytes: int
    partitions: tuple[int, int]  # min, max Kafka partition in the file
    offsets: tuple[int, int]  # min, max offset in the file
    staged: str | None = None  # relative path it was written to, for files new in the run

    def may_hold(self, topic: str, from_offsets: dict[int, int]) -> bool:
        """Whether the file can hold a record of ``topic`` at or after ``from_offsets[p]``."""
        if self.topic != topic:
            return False
        low, high = self.partitions
        return any(low <= p <= high and start <= self.offsets[1] for p, start in from_offsets.items())

    @property
    def topic(self) -> str:
        first = self.path.split("/", 1)[0]
        return _unescape(first.removeprefix("topic="))


def _unescape(name: str) -> str:
    """Hive partition directory names escape some characters as %XX (Spark does the same)."""
    return unquote(name)


@dataclass(frozen=True, slots=True)
class Manifest:
    run: int
    committed_at_ms: int
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)  # topic -> partition -> next
    files: tuple[DataFile, ...] = ()
    superseded: tuple[str, ...] = ()  # files this run replaced (deleted after the commit)

    def to_json(self) -> str:
        body: dict[str, Any] = asdict(self)
        body["version"] = VERSION
        body["offsets"] = {t: {str(p): o for p, o in parts.items()} for t, parts in self.offsets.items()}
        return json.dumps(body, indent=1, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> Manifest:
        body = json.loads(text)
        if body.get("version") != VERSION:
            raise ValueError(f"manifest version {body.get('version')!r} is not {VERSION}")
        files = tuple(DataFile(f["path"], f["rows"], f["bytes"], tuple(f["partitions"]),
                               tuple(f["offsets"]), f.get("staged")) for f in body["files"])
        offsets = {t: {int(p): int(o) for p, o in parts.items()} for t, parts in body["offsets"].items()}
        return Manifest(body["run"], body["committed_at_ms"], offsets, files, tuple(body["superseded"]))


class ManifestStore:
    """Reads, commits and recovers the manifests of one output directory."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.manifests = self.root / META_DIR / "manifests"
        self.staging_root = self.root / META_DIR / "staging"

    def latest(self) -> Manifest | None:
        if not self.manifests.is_dir():
            return None
        names = sorted(p.name for p in self.manifests.iterdir() if p.name.endswith(".json"))
        return Manifest.from_json((self.manifests / names[-1]).read_text()) if names else None

    def staging(self, run: int) -> Path:
        return self.staging_root / str(run)

    def commit(self, manifest: Manifest) -> None:
        """The commit point: the manifest appears whole, or not at all."""
        self.manifests.mkdir(parents=True, exist_ok=True)
        final = self.manifests / f"{manifest.run:020d}.json"
        if final.exists():
            raise FileExistsError(f"run {manifest.run} is already committed ({final})")
        temp = final.with_suffix(".tmp")
        with open(temp, "w") as f:
            f.write(manifest.to_json())
            f.flush()
            os.fsync(f.fileno())
        os.rename(temp, final)
        _fsync_dir(self.manifests)

    def recover(self) -> Manifest | None:
        """Finish the latest committed run and drop everything no manifest vouches for.

        Idempotent: safe to run after a crash at any point, and before every load.
        """
        manifest = self.latest()
        live = {f.path for f in manifest.files} if manifest is not None else set()
        if manifest is not None:
            for f in manifest.files:
                target = self.root / f.path
                if f.staged is not None and not target.exists():
                    source = self.root / f.staged
                    if not source.exists():
                        raise FileNotFoundError(f"manifest of run {manifest.run} lists {f.path}, which is "
                                                f"neither live nor staged at {f.staged}: the output is damaged")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.rename(source, target)
        for path in self._data_files():
            if path not in live:
                (self.root / path).unlink()
        for directory in sorted(self.root.glob("topic=*/**/"), key=lambda p: -len(p.parts)):
            if directory.is_dir() and not any(directory.iterdir()):
                directory.rmdir()
        if self.staging_root.exists():
            shutil.rmtree(self.staging_root)
        for temp in self.manifests.glob("*.tmp") if self.manifests.is_dir() else ():
            temp.unlink()
        return manifest

    def _data_files(self) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.glob("topic=*/**/*")
                      if p.is_file())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
