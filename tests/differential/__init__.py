"""Differential protocol tests: Strom beside Apache Kafka 3.9 (issue 16)."""

import pytest

# Pair.same asserts there: pytest's field-by-field diff must show in a failure.
pytest.register_assert_rewrite("tests.differential.wire")
