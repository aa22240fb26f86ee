"""What a handler may know about the connection a request came on, beyond the request.

Each connection is its own asyncio task, so a ``ContextVar`` set by the connection is
seen by the handlers it awaits and by nothing else: no parameter has to be threaded
through every handler for the one or two that need it (JoinGroup records the client's
host, which DescribeGroups and `kafka-consumer-groups --describe` show; Metadata,
FindCoordinator and DescribeCluster answer with the endpoints of the connection's listener;
the authorizer checks the connection's principal).
"""

from __future__ import annotations

from contextvars import ContextVar

client_host: ContextVar[str] = ContextVar("client_host", default="")
listener_name: ContextVar[str] = ContextVar("listener_name", default="")  # "" outside a connection
# The authenticated principal (Kafka's ``KafkaPrincipal``, "User:<name>"): set by the connection
# once TLS or SASL has established it; ``User:ANONYMOUS`` on a PLAINTEXT listener, as Kafka.
principal: ContextVar[str] = ContextVar("principal", default="User:ANONYMOUS")
# Quotas (KIP-219): a handler that throttles its client sets the delay here; the connection
# sends the response at once (carrying throttle_time_ms) and then reads nothing more from
# the client for that long, as Kafka mutes the channel. Reset by the connection.
throttle_ms: ContextVar[int] = ContextVar("throttle_ms", default=0)
