"""Incremental fetch sessions (KIP-227) seen on the wire, with Strom's codec as the client."""

from __future__ import annotations

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from strom.protocol.error_codes import ErrorCode
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.messages.fetch_request import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ForgottenTopic,
)
from strom.protocol.messages.fetch_response import FetchResponse
from tests.support.broker_process import BrokerProcess, raw_request

VERSION = 12


def _fetch(broker: BrokerProcess, session_id: int, epoch: int, offsets: dict[int, int],
           forgotten: tuple[int, ...] = ()) -> FetchResponse:
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        session_id=session_id,
        session_epoch=epoch,
        topics=(FetchTopic("s", partitions=tuple(
            FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20) for p, o in offsets.items()
        )),) if offsets else (),
        forgotten_topics_data=(ForgottenTopic("s", partitions=forgotten),) if forgotten else (),
    )
    answer = raw_request(broker, encode_request(request, VERSION, 5, "session-test"))
    assert answer is not None
    _, response = decode_response(answer, 1, VERSION)
    assert isinstance(response, FetchResponse)
    return response


def _partitions(response: FetchResponse) -> dict[int, int]:
    """partition -> high watermark, for partitions in the answer."""
    return {p.partition_index: p.high_watermark for t in response.responses for p in t.partitions}


def _produce(broker: BrokerProcess, partition: int, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(count):
        producer.produce("s", value=b"x", partition=partition)
    assert producer.flush(10) == 0


def test_incremental_fetch_session(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("s", 2, 1)])["s"].result(15)
    _produce(broker, 0, 3)
    _produce(broker, 1, 2)

    full = _fetch(broker, 0, 0, {0: 0, 1: 0})
    assert full.error_code == 0 and full.session_id > 0
    assert _partitions(full) == {0: 3, 1: 2}
    session = full.session_id

    # Caught up on both partitions: nothing has news.
    quiet = _fetch(broker, session, 1, {0: 3, 1: 2})
    assert quiet.session_id == session and _partitions(quiet) == {}

    # New records on partition 1 only: only partition 1 comes back, without being asked for.
    _produce(broker, 1, 4)
    news = _fetch(broker, session, 2, {})
    assert _partitions(news) == {1: 6}

    # A wrong epoch and an unknown session id are refused with Kafka's codes.
    assert _fetch(broker, session, 2, {}).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert _fetch(broker, 999_999, 1, {}).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

    # Forgetting partition 0 drops it from the session; partition 1 still has news
    # (the session still holds its fetch offset 2, below the new high watermark).
    _produce(broker, 0, 1)
    after_forget = _fetch(broker, session, 3, {}, forgotten=(0,))
    assert _partitions(after_forget) == {1: 6}

    # Epoch -1 closes the session: a sessionless full answer.
    closed = _fetch(broker, session, -1, {0: 0})
    assert closed.session_id == 0 and _partitions(closed) == {0: 4}
    assert _fetch(broker, session, 4, {}).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
