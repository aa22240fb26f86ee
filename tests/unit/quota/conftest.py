"""The ``broker`` fixture: an in-process broker per test (tests/support/broker_harness.py)."""

from tests.support.broker_harness import broker

__all__ = ["broker"]
