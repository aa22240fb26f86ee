"""Apache Kafka's Java client (kafka-clients 3.9 and 4.x) compiled for the tests: the programs in
tests/compat/java (StromScenarios and its companions), built with javac against one version's
jars. Shared by tests/compat/test_java_client.py and tests/security/test_java_security.py.

The jars come from Maven Central through tests/compat/java/fetch (``./scripts/test`` installs
them; ``compile_java_client`` fetches them itself when they are missing) into a cache outside
the tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JAVA_DIR = Path(__file__).resolve().parent.parent / "compat" / "java"
FETCH = JAVA_DIR / "fetch"
LINES = {"3.9": "39", "4": "4"}
# One scenario waits at most 60 s for any one condition (StromScenarios.WAIT_MS); a run has
# a few of them, and a loaded 2-core machine starts a JVM slowly.
RUN_TIMEOUT = 240


def _jdk_tool(name: str) -> str:
    java_home = os.environ.get("JAVA_HOME")
    tool = str(Path(java_home) / "bin" / name) if java_home else shutil.which(name)
    assert tool and Path(tool).exists(), f"no {name} found: the Java client tests need a JDK (set JAVA_HOME)"
    return tool


@dataclass(frozen=True)
class JavaClient:
    """The programs of tests/compat/java compiled against one kafka-clients version."""

    line: str
    version: str
    classpath: str
    java: str

    def command(self, *args: str, program: str = "StromScenarios") -> list[str]:
        """``java PROGRAM ARGS``, logging WARN and above on stderr (slf4j-simple), so a
        failed run says why. A run lives a few seconds: the C1 compiler alone and the serial
        collector spend about half the CPU of the JVM's defaults on it (measured here)."""
        return [self.java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp", self.classpath, program, *args]

    def run(self, scenario: str, bootstrap: str, *args: str) -> Any:
        """One StromScenarios scenario: the JSON line it printed."""
        return self.run_program("StromScenarios", scenario, bootstrap, *args)

    def run_program(self, program: str, *args: str) -> Any:
        """``program ARGS``, which must exit 0: the last line it printed, as JSON."""
        result = subprocess.run(self.command(*args, program=program),
                                capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
        assert result.returncode == 0, (
            f"kafka-clients {self.version} {program} {args[:1]} exited {result.returncode}:\n{result.stderr[-4000:]}")
        return json.loads(result.stdout.strip().splitlines()[-1])


def compile_java_client(version: str, classes_root: Path) -> JavaClient:
    """Fetch kafka-clients ``version`` ("3.9" or "4") if missing and compile the programs into a
    new directory under ``classes_root``."""
    line = LINES[version]
    javac, java = _jdk_tool("javac"), _jdk_tool("java")
    fetched = subprocess.run([str(FETCH), line], capture_output=True, text=True, timeout=900, check=False)
    assert fetched.returncode == 0, f"tests/compat/java/fetch {line}: {fetched.stderr.strip()}"
    jar_dir = Path(subprocess.run([str(FETCH), "dir", line], capture_output=True, text=True, check=True).stdout.strip())
    classes = classes_root / f"kafka-clients-{jar_dir.name}"
    classes.mkdir(parents=True)
    sources = sorted(str(path) for path in JAVA_DIR.glob("*.java"))
    compiled = subprocess.run([javac, "-d", str(classes), "-cp", f"{jar_dir}/*", *sources],
                              capture_output=True, text=True, timeout=300, check=False)
    assert compiled.returncode == 0, f"javac against kafka-clients {jar_dir.name}:\n{compiled.stderr}"
    return JavaClient(line, jar_dir.name, f"{classes}{os.pathsep}{jar_dir}/*", java)
