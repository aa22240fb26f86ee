"""``metrics.listener``: where ``/metrics`` is served, as ``http://host:port``.

Kept free of prometheus_client so the broker's config can check the value at start
(a bad one is one ``ConfigError`` line) without loading it.
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import urlsplit


class MetricsListenerError(ValueError):
    """``metrics.listener`` cannot be served; the message is one line for the operator."""


class MetricsListener(NamedTuple):
    host: str  # "" means every interface, as an empty listener host does for Kafka
    port: int  # 0: an ephemeral port (tests)


def parse_metrics_listener(value: str) -> MetricsListener | None:
    """The endpoint ``value`` names, or None when metrics are off (the default, "")."""
    text = value.strip()
    if not text:
        return None
    problem = f"metrics.listener {value!r} must be http://host:port (e.g. http://127.0.0.1:9644)"
    try:
        url = urlsplit(text)
        port = url.port
    except ValueError:
        raise MetricsListenerError(problem) from None
    if url.scheme.lower() != "http" or port is None or url.path not in ("", "/") or url.query \
            or url.fragment or url.username is not None:
        raise MetricsListenerError(problem)
    return MetricsListener(url.hostname or "", port)
