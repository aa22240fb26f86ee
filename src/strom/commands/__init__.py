"""The ``strom`` client commands, one module per noun (topic, group, produce, consume, cluster, acl, user).

Each module adds its subcommands to the parser and imports ``strom.client`` only when
a command runs, so ``strom --help`` and ``strom serve`` do not pay for the clients.
"""

from __future__ import annotations

from typing import Any


def add_parsers(commands: Any) -> None:
    from strom.commands import acl, cluster, consume, group, produce, topic, user

    for noun in (topic, group, produce, consume, cluster, acl, user):
        noun.add_parser(commands)
