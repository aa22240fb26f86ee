"""``keyless_records``' walk of a few records in Python against the vectorised scan it stands
in for: the same records named, and the same sets refused, byte flips included."""

from __future__ import annotations

import random

import pytest

from strom.compaction import record_scan
from strom.compaction.record_scan import keyless_records
from strom.protocol.errors import ProtocolError
from strom.protocol.records.header import V2_HEADER_SIZE
from strom.protocol.records.v2_builder import build_record_batch


def _vectorised(records: bytes, monkeypatch: pytest.MonkeyPatch) -> list[int] | str:
    with monkeypatch.context() as patch:
        patch.setattr(record_scan, "_FEW", 0)
        return _outcome(records)


def _outcome(records: bytes) -> list[int] | str:
    try:
        return keyless_records(records)
    except ProtocolError as exc:
        return f"refused: {exc.error_code}"


def _batch(rng: random.Random) -> bytes:
    records = []
    for _ in range(rng.randint(1, 8)):
        key = None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 20))
        value = None if rng.random() < 0.2 else rng.randbytes(rng.choice([0, 5, 130, 300]))
        headers = tuple((f"h{i}", rng.randbytes(3)) for i in range(rng.randint(0, 2)))
        records.append((key, value, headers, rng.randint(0, 1 << 40)))
    return bytes(build_record_batch(records))


def test_a_few_records_walked_in_python_are_named_as_the_vectorised_scan_names_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(19)
    walks: list[list[int] | None] = []
    walk = record_scan._keyless_of_few

    def counted(*args: object) -> list[int] | None:
        walks.append(found := walk(*args))  # type: ignore[arg-type]
        return found
    for _ in range(400):
        records = b"".join(_batch(rng) for _ in range(rng.randint(1, 3)))
        expected = _vectorised(records, monkeypatch)
        assert isinstance(expected, list)
        with monkeypatch.context() as patch:
            patch.setattr(record_scan, "_keyless_of_few", counted)
            assert _outcome(records) == expected
    assert len(walks) > 400 and None not in walks  # the Python walk answered every batch


def test_corrupt_sections_are_refused_or_answered_as_the_vectorised_scan_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(890)
    refused = 0
    for _ in range(1500):
        batch = bytearray(_batch(rng))
        for _ in range(rng.randint(1, 3)):  # flip bytes of the records section only
            batch[rng.randrange(V2_HEADER_SIZE, len(batch))] = rng.randrange(256)
        expected = _vectorised(bytes(batch), monkeypatch)
        assert _outcome(bytes(batch)) == expected, bytes(batch).hex()
        refused += isinstance(expected, str)
    assert refused > 100  # the flips did make corrupt sections
