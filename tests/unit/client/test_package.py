"""``strom.client``'s public names resolve, and importing the package stays cheap."""

from __future__ import annotations

import subprocess
import sys

import strom.client


def test_every_public_name_resolves() -> None:
    assert sorted(strom.client.__all__) == sorted(strom.client._EXPORTS)
    for name in strom.client.__all__:
        assert getattr(strom.client, name).__name__ == name


def test_importing_the_package_loads_no_client_module_or_pyarrow() -> None:
    code = ("import sys, strom.client; "
            "print(sorted(m for m in sys.modules if m.startswith('strom.client.') or m == 'pyarrow'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
