"""100,000 seeded mutations of valid frames: each decodes or raises ProtocolError.

Nothing else may escape a decoder fed hostile bytes: no IndexError, struct.error,
UnicodeDecodeError, MemoryError, RecursionError or hang.
"""

from __future__ import annotations

import os
import random

from strom.protocol.errors import ProtocolError
from strom.protocol.headers import decode_request, decode_response, encode_request, encode_response
from strom.protocol.messages import APIS
from tests.support.protocol_samples import random_message

SEED = int(os.environ.get("STROM_FUZZ_SEED", "20261122"))
MUTATIONS = int(os.environ.get("STROM_FUZZ_MUTATIONS", "100000"))
INTERESTING_INT32 = [0, 1, -1, -2, 0x7FFFFFFF, -0x80000000, 0x10000, 0xFFFF]


def _corpus(rng: random.Random) -> list[tuple[str, int, int, bytes]]:
    """(kind, api key, version, frame without size prefix) for every API, several versions."""
    corpus = []
    for api_key, info in sorted(APIS.items()):
        versions = {info.versions.start, info.versions.stop - 1, rng.choice(info.versions)}
        for version in sorted(versions):
            request = random_message(info.request, version, rng)
            corpus.append(
                ("request", api_key, version, encode_request(request, version, 7, "fuzz")[4:])
            )
            response = random_message(info.response, version, rng)
            corpus.append(
                ("response", api_key, version, b"".join(encode_response(response, version, 7))[4:])
            )
    return corpus


def _mutate(frame: bytes, rng: random.Random) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.choice([1, 1, 2, 3])):
        choice = rng.randrange(6)
        pos = rng.randrange(len(data)) if data else 0
        if choice == 0 and data:
            data[pos] ^= 1 << rng.randrange(8)
        elif choice == 1 and data:
            data[pos] = rng.choice([0x00, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif choice == 2:
            del data[rng.randrange(len(data) + 1) :]
        elif choice == 3:
            data[pos:pos] = rng.randbytes(rng.randrange(1, 5))
        elif choice == 4 and len(data) >= 4:
            pos = min(pos, len(data) - 4)
            data[pos : pos + 4] = rng.choice(INTERESTING_INT32).to_bytes(4, "big", signed=True)
        elif choice == 5 and data:
            end = min(len(data), pos + rng.randrange(1, 16))
            data[pos:pos] = data[pos:end]
    return bytes(data)


def test_mutated_frames_decode_or_raise_protocol_error() -> None:
    rng = random.Random(SEED)
    corpus = _corpus(rng)
    assert len(corpus) > 300
    outcomes = {"decoded": 0, "ProtocolError": 0}
    for index in range(MUTATIONS):
        kind, api_key, version, frame = corpus[index % len(corpus)]
        mutated = _mutate(frame, rng)
        try:
            if kind == "request":
                decode_request(mutated)
            else:
                decode_response(mutated, api_key, version)
            outcomes["decoded"] += 1
        except ProtocolError:
            outcomes["ProtocolError"] += 1
        except Exception as exc:  # anything else is the bug this test exists to find
            raise AssertionError(
                f"mutation {index} (seed {SEED}) of {kind} {api_key} v{version} "
                f"raised {exc!r}: {mutated.hex()}"
            ) from exc
    # The mutations must exercise both outcomes, or the corpus is not doing its job.
    assert outcomes["decoded"] > MUTATIONS // 20
    assert outcomes["ProtocolError"] > MUTATIONS // 4
