"""Controller writes, each fenced by the controller epoch (Kafka's KafkaZkClient, KAFKA-6082).

Part of KafkaZkClient (a base class), apart so each module stays readable. Invariants:

- Every write here is a multi that starts with check(/controller_epoch, epoch zkVersion): the
  zkVersion this controller won at election. If another controller was elected since, the
  check fails, nothing in the multi happens, and ControllerMovedError tells the caller to resign.
- kazoo returns a failed multi as results, not an exception: [error of the check,
  RuntimeInconsistency …] when fenced; [RolledBackError, the op's error, …] when an op failed.
  Every element is looked at.
- Partition states are also conditional on their own version (the partition epoch): a stale
  version fails only its own partition, as Kafka's updateLeaderAndIsr. For speed the
  partitions go in one multi (kazoo sends one request per loop turn, so 100 separate requests
  cost ~5x one multi of 100 ops); only when that multi fails are they retried one by one to
  find which failed.
- A write replayed after a lost answer (connection loss) is recognised by reading back: the
  data there is exactly ours (Kafka's checkLeaderAndIsrZkData).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat

from strom.cluster import zk_data
from strom.cluster.zk_data import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicAssignment
from strom.cluster.zk_errors import ControllerMovedError, UnknownTopicError, ZooKeeperError
from strom.protocol.topic_partition import TopicPartition

T = TypeVar("T")
K = TypeVar("K")
MULTI_PARTITIONS = 500  # partitions per multi: ~3 ops of ~150 bytes each, far below jute.maxbuffer (1 MB)


def failures(results: Sequence[object]) -> list[Exception]:
    return [r for r in results if isinstance(r, Exception)]


def _own_error(results: Sequence[object]) -> Exception:
    """The error of the op that failed (not the rolled-back or skipped ones around it)."""
    return next(r for r in failures(results) if not isinstance(r, (RolledBackError, RuntimeInconsistency)))


def _delete(transaction: Any, path: str) -> None:
    transaction.delete(path)


def _with_partition_epoch(leader_and_isr: LeaderAndIsr, partition_epoch: int) -> LeaderAndIsr:
    return dataclasses.replace(leader_and_isr, partition_epoch=partition_epoch)


def _chunks(items: Sequence[T], size: int) -> list[Sequence[T]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


class FencedZkWrites:
    """Partition states, assignments and topic deletion, as the controller writes them."""

    _zk: KazooClient
    answer_timeout_s: float

    def _answer(self, answer: Any) -> Any:
        """An async request's answer, waited on at most ``answer_timeout_s``: a request kazoo
        queued while reconnecting is sent only once a server takes the session, which without
        a quorum is never, and a controller thread waiting for ever keeps a stopping broker
        from exiting. The outcome of a write that times out is unknown (it may still be sent):
        the caller re-reads before trusting its view, as after a lost answer."""
        try:
            return answer.get(timeout=self.answer_timeout_s)
        except KazooTimeoutError:
            raise ZooKeeperError(
                f"ZooKeeper did not answer within {self.answer_timeout_s:g} s (outcome unknown)") from None

    def _call(self, operation: Callable[[], T]) -> T:
        raise NotImplementedError

    def _get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        raise NotImplementedError

    def _fenced_async(self, epoch_zk_version: int, add_ops: Callable[[Any], object]) -> Any:
        transaction = self._zk.transaction()
        transaction.check(zk_data.CONTROLLER_EPOCH, epoch_zk_version)
        add_ops(transaction)
        return transaction.commit_async()

    def _fenced(self, epoch_zk_version: int, add_ops: Callable[[Any], object]) -> list[object]:
        """Commit check(/controller_epoch) + ops; ControllerMovedError if the check failed."""
        return self._raise_if_moved(self._answer(self._fenced_async(epoch_zk_version, add_ops)), epoch_zk_version)

    @staticmethod
    def _raise_if_moved(results: list[object], epoch_zk_version: int) -> list[object]:
        if results and isinstance(results[0], Exception) and not isinstance(results[0], RolledBackError):
            raise ControllerMovedError(
                f"{zk_data.CONTROLLER_EPOCH} is no longer at zkVersion {epoch_zk_version}: another controller was elected")
        return results

    def delete_controller(self, expected_epoch_zk_version: int) -> None:
        """Resign: delete ``/controller`` if we still hold the epoch (gone already is fine)."""
        def delete() -> None:
            results = self._fenced(expected_epoch_zk_version, lambda t: t.delete(zk_data.CONTROLLER))
            if failures(results) and not any(isinstance(r, NoNodeError) for r in results):
                raise ZooKeeperError(f"deleting {zk_data.CONTROLLER} failed: {results}")
        self._call(delete)

    # ------------------------------------------------------------------ partition states

    def create_partition_states(self, topic: str, states: Mapping[int, LeaderIsrAndControllerEpoch],
                                epoch_zk_version: int) -> dict[int, Exception]:
        """Create each partition's state znode (and its parents); returns the partitions that
        failed (NodeExistsError: a state already there that is not the one given)."""
        encoded = [(partition, zk_data.encode_partition_state(state)) for partition, state in states.items()]

        def create() -> dict[int, Exception]:
            partitions_path = zk_data.topic_partitions_path(topic)
            try:
                existing: set[str] | None = set(self._zk.get_children(partitions_path))
            except NoNodeError:
                existing = None  # a new topic: ``…/partitions`` is created in the first multi
            failed: dict[int, Exception] = {}
            for chunk in _chunks(encoded, MULTI_PARTITIONS):
                results = self._fenced(epoch_zk_version, partial(self._add_creates, topic, chunk, existing))
                if existing is None and not failures(results):
                    existing = set()
                elif failures(results):
                    existing = self._partition_nodes(topic, epoch_zk_version)
                    failed.update(self._create_one_by_one(topic, chunk, existing, epoch_zk_version))
            return failed
        return self._call(create)

    def _partition_nodes(self, topic: str, epoch_zk_version: int) -> set[str]:
        """The partition numbers under ``/brokers/topics/<t>/partitions``, creating it if missing."""
        partitions_path = zk_data.topic_partitions_path(topic)
        try:
            return set(self._zk.get_children(partitions_path))
        except NoNodeError:
            results = self._fenced(epoch_zk_version, lambda t: t.create(partitions_path, b""))
            if failures(results) and not any(isinstance(r, NodeExistsError) for r in results):
                raise ZooKeeperError(f"creating {partitions_path} failed: {results}") from None
            return set()

    @staticmethod
    def _add_creates(topic: str, chunk: Sequence[tuple[int, bytes]], existing: set[str] | None,
                     transaction: Any) -> None:
        """Creates for ``chunk``'s states and missing parents (all of them if ``existing`` is None)."""
        if existing is None:
            transaction.create(zk_data.topic_partitions_path(topic), b"")
        for partition, data in chunk:
            if existing is None or str(partition) not in existing:
                transaction.create(zk_data.partition_path(topic, partition), b"")
            transaction.create(zk_data.partition_state_path(topic, partition), data)

    def _create_one_by_one(self, topic: str, chunk: Sequence[tuple[int, bytes]], existing: set[str] | None,
                           epoch_zk_version: int) -> dict[int, Exception]:
        pending = [(partition, data, self._fenced_async(
            epoch_zk_version, partial(self._add_creates, topic, [(partition, data)], existing)))
            for partition, data in chunk]
        failed: dict[int, Exception] = {}
        for partition, data, answer in pending:
            results = self._raise_if_moved(self._answer(answer), epoch_zk_version)
            if failures(results) and not self._holds(zk_data.partition_state_path(topic, partition), data):
                failed[partition] = _own_error(results)
        return failed

    def _holds(self, path: str, data: bytes) -> bool:
        """Whether ``path`` holds exactly ``data`` (an earlier attempt of ours may have written it)."""
        try:
            return bool(self._zk.get(path)[0] == data)
        except NoNodeError:
            return False

    def update_leader_and_isr(
        self, states: Mapping[TopicPartition, LeaderAndIsr], controller_epoch: int, epoch_zk_version: int,
    ) -> tuple[dict[TopicPartition, LeaderAndIsr], dict[TopicPartition, Exception]]:
        """Conditionally rewrite partition states (``partition_epoch`` = the version expected).
        Returns (updated, with their new partition_epoch; failed): a stale version fails only
        its own partition, as in Kafka's updateLeaderAndIsr; a lost epoch check raises."""
        writes = [(tp, leader_and_isr, zk_data.encode_partition_state(LeaderIsrAndControllerEpoch(leader_and_isr, controller_epoch)))
                  for tp, leader_and_isr in states.items()]

        def update() -> tuple[dict[TopicPartition, LeaderAndIsr], dict[TopicPartition, Exception]]:
            updated: dict[TopicPartition, LeaderAndIsr] = {}
            failed: dict[TopicPartition, Exception] = {}
            for chunk in _chunks(writes, MULTI_PARTITIONS):
                results = self._fenced(epoch_zk_version, partial(_add_sets, chunk))
                if not failures(results):
                    for (tp, leader_and_isr, _), stat in zip(chunk, results[1:], strict=True):
                        assert isinstance(stat, ZnodeStat)
                        updated[tp] = _with_partition_epoch(leader_and_isr, stat.version)
                    continue
                pending = [(write, self._fenced_async(epoch_zk_version, partial(_add_sets, [write]))) for write in chunk]
                for (tp, leader_and_isr, data), answer in pending:
                    outcome = self._one_update(tp, leader_and_isr, data, self._raise_if_moved(self._answer(answer), epoch_zk_version))
                    if isinstance(outcome, LeaderAndIsr):
                        updated[tp] = outcome
                    else:
                        failed[tp] = outcome
            return updated, failed
        return self._call(update)

    def _one_update(self, tp: TopicPartition, leader_and_isr: LeaderAndIsr, data: bytes,
                    results: list[object]) -> LeaderAndIsr | Exception:
        if not failures(results):
            stat = results[1]
            assert isinstance(stat, ZnodeStat)
            return _with_partition_epoch(leader_and_isr, stat.version)
        error = _own_error(results)
        # Kafka's checkLeaderAndIsrZkData: a replay of our own write is a success.
        current = self._get(zk_data.partition_state_path(*tp)) if isinstance(error, BadVersionError) else None
        if current is not None and current[0] == data:
            return _with_partition_epoch(leader_and_isr, current[1].version)
        return error

    # ------------------------------------------------------------------ topics

    def set_topic_assignment(self, topic: str, assignment: TopicAssignment, epoch_zk_version: int) -> None:
        data = zk_data.encode_topic_assignment(assignment)

        def write() -> None:
            results = self._fenced(epoch_zk_version, lambda t: t.set_data(zk_data.topic_path(topic), data))
            if failures(results):
                raise UnknownTopicError(f"cannot set the assignment of topic {topic!r}: {results}")
        self._call(write)

    def delete_topic_znodes(self, topic: str, epoch_zk_version: int) -> None:
        """Delete ``/brokers/topics/<t>`` (recursively) and ``/config/topics/<t>`` in one fenced multi."""
        attempts = 0

        def delete() -> None:
            nonlocal attempts
            attempts += 1
            # First Kafka's usual layout (one read), then, if that was not all, a full scan.
            paths = self._usual_subtree(topic) if attempts == 1 else self._subtree(zk_data.topic_path(topic))
            if self._zk.exists(zk_data.topic_config_path(topic)):
                paths.append(zk_data.topic_config_path(topic))
            if not paths:
                return
            results = self._fenced(epoch_zk_version, partial(_add_deletes, paths))
            if any(isinstance(r, (NotEmptyError, NoNodeError)) for r in results):
                raise NotEmptyError(f"{topic} changed while being deleted")  # retried: re-scan
            if failures(results):
                raise ZooKeeperError(f"deleting topic {topic!r} failed: {results}")
        self._call_retrying_changes(delete)

    def _usual_subtree(self, topic: str) -> list[str]:
        """``/brokers/topics/<t>``, ``…/partitions``, each ``…/<p>`` and ``…/<p>/state``,
        children first, from one read of the partitions."""
        try:
            partitions = self._zk.get_children(zk_data.topic_partitions_path(topic))
        except NoNodeError:
            return [zk_data.topic_path(topic)]
        parent = zk_data.topic_partitions_path(topic)
        paths = [path for p in partitions for path in (f"{parent}/{p}/state", f"{parent}/{p}")]
        return [*paths, parent, zk_data.topic_path(topic)]

    def _call_retrying_changes(self, operation: Callable[[], None], attempts: int = 10) -> None:
        for _ in range(attempts - 1):
            try:
                return self._call(operation)
            except NotEmptyError:
                continue
        return self._call(operation)

    def _subtree(self, root: str) -> list[str]:
        """``root`` and everything under it, children before parents (the order deletes must go
        in); read level by level, each level's reads pipelined."""
        found: list[str] = []
        level = [root]
        while level:
            answers = [(path, self._zk.get_children_async(path)) for path in level]
            level = []
            for path, answer in answers:
                try:
                    children = self._answer(answer)
                except NoNodeError:
                    continue
                found.append(path)
                level += [f"{path}/{child}" for child in children]
        return found[::-1]

    def delete_topic_deletion_flags(self, topics: Iterable[str], epoch_zk_version: int) -> None:
        paths = [zk_data.delete_topic_path(topic) for topic in topics]

        def delete() -> None:
            pending = [self._fenced_async(epoch_zk_version, partial(_delete, path=path)) for path in paths]
            for answer in pending:
                self._raise_if_moved(self._answer(answer), epoch_zk_version)  # NoNode: already gone, fine
        self._call(delete)


def _add_deletes(paths: Sequence[str], transaction: Any) -> None:
    for path in paths:
        transaction.delete(path)


def _add_sets(writes: Sequence[tuple[TopicPartition, LeaderAndIsr, bytes]], transaction: Any) -> None:
    for tp, leader_and_isr, data in writes:
        transaction.set_data(zk_data.partition_state_path(*tp), data, leader_and_isr.partition_epoch)
