"""The assignors: the Java client's documented results, and properties over random groups."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from strom.client.assignors import (
    ASSIGNORS,
    Assignment,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    Subscription,
)
from strom.protocol.topic_partition import TopicPartition

TOPICS = ("t0", "t1", "t2", "t3")


def _subs(topics_by_member: dict[str, set[str]]) -> dict[str, Subscription]:
    return {member: Subscription(frozenset(topics)) for member, topics in topics_by_member.items()}


def _tps(*pairs: TopicPartition) -> frozenset[TopicPartition]:
    return frozenset(pairs)


# -- the Java client's own examples (javadoc of RangeAssignor / RoundRobinAssignor) ---------
def test_range_gives_the_first_members_one_extra_per_topic() -> None:
    result = RangeAssignor().assign({"t0": 3, "t1": 3}, _subs({"C0": {"t0", "t1"}, "C1": {"t0", "t1"}}))
    assert result == {
        "C0": _tps(("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)),
        "C1": _tps(("t0", 2), ("t1", 2)),
    }


def test_roundrobin_deals_over_all_topic_partitions() -> None:
    result = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, _subs({"C0": {"t0", "t1"}, "C1": {"t0", "t1"}}))
    assert result == {
        "C0": _tps(("t0", 0), ("t0", 2), ("t1", 1)),
        "C1": _tps(("t0", 1), ("t1", 0), ("t1", 2)),
    }


def test_roundrobin_skips_members_not_subscribed() -> None:
    subscriptions = _subs({"C0": {"t0"}, "C1": {"t0", "t1"}, "C2": {"t0", "t1", "t2"}})
    result = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, subscriptions)
    assert result == {
        "C0": _tps(("t0", 0)),
        "C1": _tps(("t1", 0)),
        "C2": _tps(("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)),
    }


def test_static_members_sort_by_instance_id_before_dynamic_ones() -> None:
    subscriptions = {
        "a-member": Subscription(frozenset({"t0"})),
        "z-member": Subscription(frozenset({"t0"}), group_instance_id="instance-1"),
    }
    result = RangeAssignor().assign({"t0": 3}, subscriptions)
    assert result == {"z-member": _tps(("t0", 0), ("t0", 1)), "a-member": _tps(("t0", 2))}


def test_cooperative_sticky_revokes_before_it_reassigns() -> None:
    assignor = CooperativeStickyAssignor()
    everything = frozenset(("t0", p) for p in range(4))
    subscriptions = {"A": Subscription(frozenset({"t0"}), everything, generation=1),
                     "B": Subscription(frozenset({"t0"}))}
    first = assignor.assign({"t0": 4}, subscriptions)
    assert len(first["A"]) == 2 and first["A"] < everything and first["B"] == frozenset()
    subscriptions = {"A": Subscription(frozenset({"t0"}), first["A"], generation=2),
                     "B": Subscription(frozenset({"t0"}), frozenset(), generation=2)}
    second = assignor.assign({"t0": 4}, subscriptions)
    assert second["A"] == first["A"] and second["B"] == everything - first["A"]


def test_a_partition_claimed_twice_in_one_generation_has_no_owner() -> None:
    claim = frozenset({("t0", 0)})
    subscriptions = {"A": Subscription(frozenset({"t0"}), claim, generation=3),
                     "B": Subscription(frozenset({"t0"}), claim, generation=3)}
    result = CooperativeStickyAssignor().assign({"t0": 1}, subscriptions)
    assert sorted(len(tps) for tps in result.values()) == [0, 1]


def test_the_newest_generation_wins_a_disputed_partition() -> None:
    claim = frozenset({("t0", 0), ("t0", 1)})
    subscriptions = {"A": Subscription(frozenset({"t0"}), claim, generation=2),
                     "B": Subscription(frozenset({"t0"}), claim, generation=3)}
    result = CooperativeStickyAssignor().assign({"t0": 2}, subscriptions)
    assert result == {"A": frozenset(), "B": frozenset({("t0", 0)})}  # t0-1 moves to A: revoked first


def test_the_registry_uses_the_java_names() -> None:
    assert sorted(ASSIGNORS) == ["cooperative-sticky", "range", "roundrobin"]
    assert [a.supports_cooperative for a in (ASSIGNORS["range"], ASSIGNORS["roundrobin"],
                                             ASSIGNORS["cooperative-sticky"])] == [False, False, True]


# -- properties --------------------------------------------------------------------------
partition_counts = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 9), min_size=1)


@st.composite
def groups(draw: st.DrawFn, equal: bool) -> tuple[dict[str, int], dict[str, Subscription]]:
    counts = draw(partition_counts)
    names = draw(st.lists(st.text("abcdef", min_size=1, max_size=4), min_size=1, max_size=7, unique=True))
    if equal:
        topics = frozenset(draw(st.sets(st.sampled_from(sorted(counts)), min_size=1)))
        return counts, {name: Subscription(topics) for name in names}
    candidates = [*sorted(counts), "missing"]
    return counts, {name: Subscription(frozenset(draw(st.sets(st.sampled_from(candidates), min_size=1))))
                    for name in names}


def _check_exactly_once(counts: dict[str, int], subscriptions: dict[str, Subscription],
                        result: Assignment) -> None:
    assert set(result) == set(subscriptions)
    seen = Counter(tp for tps in result.values() for tp in tps)
    expected = {(t, p) for s in subscriptions.values() for t in s.topics for p in range(counts.get(t, 0))}
    assert set(seen) == expected and all(n == 1 for n in seen.values())
    for member, tps in result.items():
        assert all(topic in subscriptions[member].topics for topic, _ in tps)


def _spread(result: Assignment) -> int:
    sizes = [len(tps) for tps in result.values()]
    return max(sizes) - min(sizes)


def _settle(counts: dict[str, int], subscriptions: dict[str, Subscription],
            generation: int) -> tuple[Assignment, Assignment]:
    """A cooperative rebalance and its follow-ups: (first result, settled result).

    Each round that revoked something is followed by another, as a cooperative member
    rejoins after a revocation (KIP-429). Kafka promises that the rounds end, not that one
    follow-up is enough: a follow-up that places the revoked partitions may still have to
    even out the load by revoking again. Three follow-ups always sufficed here.
    """
    assignor = CooperativeStickyAssignor()
    first = current = assignor.assign(counts, subscriptions)
    owned = {m: s.owned_partitions for m, s in subscriptions.items()}
    for round_ in range(4):
        if not any(owned[m] - current[m] for m in current) and round_ > 0:
            return first, current
        owned = dict(current)
        follow_up = {m: Subscription(s.topics, current[m], generation + 1 + round_)
                     for m, s in subscriptions.items()}
        current = assignor.assign(counts, follow_up)
    raise AssertionError(f"no settled assignment after three follow-ups: {current}")


@settings(max_examples=150, deadline=None)
@given(groups(equal=False), st.sampled_from(["range", "roundrobin"]))
def test_eager_assignors_assign_every_partition_once_to_a_subscriber(
        group: tuple[dict[str, int], dict[str, Subscription]], name: str) -> None:
    counts, subscriptions = group
    _check_exactly_once(counts, subscriptions, ASSIGNORS[name].assign(counts, subscriptions))


@settings(max_examples=150, deadline=None)
@given(groups(equal=True))
def test_equal_subscriptions_are_balanced(group: tuple[dict[str, int], dict[str, Subscription]]) -> None:
    counts, subscriptions = group
    ranged = RangeAssignor().assign(counts, subscriptions)
    for topic in next(iter(subscriptions.values())).topics:
        per_topic = {m: frozenset(tp for tp in tps if tp[0] == topic) for m, tps in ranged.items()}
        assert _spread(per_topic) <= 1
    assert _spread(RoundRobinAssignor().assign(counts, subscriptions)) <= 1
    _, settled = _settle(counts, subscriptions, 0)
    _check_exactly_once(counts, subscriptions, settled)
    assert _spread(settled) <= 1


@settings(max_examples=150, deadline=None)
@given(groups(equal=False), st.data())
def test_cooperative_sticky_never_gives_an_owned_partition_away_in_one_step(
        group: tuple[dict[str, int], dict[str, Subscription]], data: st.DataObject) -> None:
    counts, fresh = group
    # Start from some earlier (possibly unbalanced) assignment the members still claim.
    earlier = RangeAssignor().assign(counts, fresh)
    owners = {tp: m for m, tps in earlier.items() for tp in tps}
    claims = {m: frozenset(tp for tp in earlier[m] if data.draw(st.booleans())) for m in fresh}
    subscriptions = {m: Subscription(s.topics, claims[m], 4) for m, s in fresh.items()}
    first, settled = _settle(counts, subscriptions, 4)
    seen = Counter(tp for tps in first.values() for tp in tps)
    assert all(n == 1 for n in seen.values())
    for member, tps in first.items():
        assert all(topic in subscriptions[member].topics for topic, _ in tps)
        # A partition it claimed is either kept or left out (revoked), never handed over.
        for tp in claims[member] - tps:
            assert tp not in seen, f"{tp} went from {member} straight to another member"
    unassigned = {(t, p) for s in fresh.values() for t in s.topics for p in range(counts.get(t, 0))} - set(seen)
    assert all(tp in claims[owners[tp]] for tp in unassigned)
    _check_exactly_once(counts, subscriptions, settled)


@settings(max_examples=150, deadline=None)
@given(groups(equal=False))
def test_cooperative_sticky_changes_nothing_when_membership_does_not_change(
        group: tuple[dict[str, int], dict[str, Subscription]]) -> None:
    counts, subscriptions = group
    _, settled = _settle(counts, subscriptions, 0)
    again = {m: Subscription(s.topics, settled[m], 2) for m, s in subscriptions.items()}
    assert CooperativeStickyAssignor().assign(counts, again) == settled


@settings(max_examples=150, deadline=None)
@given(groups(equal=True))
def test_a_joining_member_moves_only_the_minimum(group: tuple[dict[str, int], dict[str, Subscription]]) -> None:
    counts, subscriptions = group
    _, before = _settle(counts, subscriptions, 0)
    topics = next(iter(subscriptions.values())).topics
    joined = {m: Subscription(s.topics, before[m], 2) for m, s in subscriptions.items()}
    joined["~newcomer"] = Subscription(topics)
    _, after = _settle(counts, joined, 2)
    total = sum(len(tps) for tps in before.values())
    quota, max_places = divmod(total, len(joined))
    # Best case: the members holding the most keep the ⌈n/c⌉ places.
    held = sorted((len(tps) for tps in before.values()), reverse=True)
    kept_at_best = sum(min(n, quota + (1 if i < max_places else 0)) for i, n in enumerate(held))
    moved = sum(len(before[m] - after[m]) for m in before)
    assert moved == total - kept_at_best
    assert _spread(after) <= 1
