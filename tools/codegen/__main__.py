"""Regenerate ``src/strom/protocol/messages`` from Kafka's JSON schemas.

python -m tools.codegen            # write the modules
python -m tools.codegen --check    # exit 1 if the committed modules are stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.codegen.generate import OUTPUT_DIR, generate, stale_files
from tools.codegen.schema import default_schema_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.codegen", description=__doc__)
    parser.add_argument("--schemas", type=Path, default=None, help="the schema directory")
    parser.add_argument("--check", action="store_true", help="only report stale files")
    args = parser.parse_args(argv)
    schemas = args.schemas or default_schema_dir()
    if args.check:
        stale = stale_files(schemas)
        for name in stale:
            print(f"stale: {name}")
        return 1 if stale else 0
    count = generate(schemas)
    print(f"wrote {count} modules to {OUTPUT_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
