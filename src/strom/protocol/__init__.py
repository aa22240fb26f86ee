"""Kafka's wire protocol, sans-IO: bytes in, messages out, and back.

Nothing in this package opens a socket, starts a thread or touches an event loop;
the broker's and the clients' network layers feed it bytes.
"""
