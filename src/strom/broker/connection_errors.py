"""How a request handler, or a connection's authenticator, tells the network layer to drop
the connection: a leaf module, so both can raise it without importing the broker."""

from __future__ import annotations


class CloseConnection(Exception):
    """The request cannot be answered; Kafka's answer is to close the connection."""
