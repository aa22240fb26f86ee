"""strom.protocol.encoded: arrays spliced from encoded elements equal the generated encoder's bytes."""

from __future__ import annotations

import pytest

from strom.protocol.encoded import ArraySlot, encoded_type
from strom.protocol.headers import encode_response
from strom.protocol.message import UnsupportedVersionError
from strom.protocol.messages.list_groups_response import ListedGroup, ListGroupsResponse
from strom.protocol.messages.metadata_response import MetadataResponse

# ListGroups: the groups array is the last field; flexible from v3 (a compact array, then tagged fields).
GROUPS = tuple(ListedGroup(group_id=f"group-{i}", protocol_type="consumer") for i in range(200))


@pytest.mark.parametrize("version", [0, 2, 3, 4])
@pytest.mark.parametrize("count", [0, 1, 2, 126, 127, 200])
def test_spliced_elements_equal_the_whole_encoding(version: int, count: int) -> None:
    compact = version >= 3
    template = ListGroupsResponse(throttle_time_ms=7, error_code=0)
    slot = ArraySlot.locate(template.encode(version), 1 if compact else 0, compact=compact)
    elements = [slot.element(ListGroupsResponse(throttle_time_ms=7, groups=(group,)).encode(version))
                for group in GROUPS[:count]]
    assert slot.splice(elements) == ListGroupsResponse(throttle_time_ms=7, groups=GROUPS[:count]).encode(version)


def test_locate_refuses_a_tail_that_does_not_follow_an_empty_array() -> None:
    encoded = ListGroupsResponse(groups=GROUPS[:1]).encode(4)
    with pytest.raises(ValueError, match="no empty compact array"):
        ArraySlot.locate(encoded, 1, compact=True)
    with pytest.raises(ValueError):
        ArraySlot.locate(ListGroupsResponse().encode(4), 3, compact=True)


def test_element_refuses_another_message() -> None:
    slot = ArraySlot.locate(ListGroupsResponse(throttle_time_ms=7).encode(4), 1, compact=True)
    with pytest.raises(ValueError):  # another head
        slot.element(ListGroupsResponse(throttle_time_ms=8, groups=GROUPS[:1]).encode(4))
    with pytest.raises(ValueError):  # two elements, not one
        slot.element(ListGroupsResponse(throttle_time_ms=7, groups=GROUPS[:2]).encode(4))


def test_an_encoded_message_is_sent_as_it_was_encoded_and_only_in_its_version() -> None:
    plain = MetadataResponse(controller_id=3, cluster_id="c")
    encoded = encoded_type(MetadataResponse)(12, plain.encode(12))
    assert encoded_type(MetadataResponse) is type(encoded)
    assert (encoded.API_KEY, encoded.KIND) == (MetadataResponse.API_KEY, "response")
    assert b"".join(encode_response(encoded, 12, 5)) == b"".join(encode_response(plain, 12, 5))  # type: ignore[arg-type]
    with pytest.raises(UnsupportedVersionError):
        encode_response(encoded, 11, 5)
