"""Strom: a Kafka-compatible streaming log platform.

Importing ``strom`` stays cheap: the protocol's generated message modules load
lazily, one API at a time, the first time something asks for them.
"""

__version__ = "0.1.0"
