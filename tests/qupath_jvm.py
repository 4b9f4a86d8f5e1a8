"""The QuPath API fixture on a real JVM: compile `tests/java` (javac) and serve it through Py4J's GatewayServer.

`python -m tests.qupath_jvm` compiles it (the Makefile's test step); the pytest fixtures start one JVM
per test module with a fresh auth token on an ephemeral port.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
import threading
from pathlib import Path

JAVA_SRC = Path(__file__).resolve().parent / "java"
BUILD = JAVA_SRC / "build"  # git-ignored
MAIN_CLASS = "medcopilot.fixture.FixtureMain"
START_TIMEOUT_S = 30.0


def py4j_jar() -> Path:
    """Py4J's own gateway jar, shipped in the py4j wheel (share/py4j/py4j<version>.jar)."""
    from py4j.java_gateway import find_jar_path

    jar = find_jar_path()
    if not jar:
        raise FileNotFoundError("the py4j wheel's jar (share/py4j/py4j*.jar) is missing")
    return Path(jar)


def jdk_available() -> bool:
    return shutil.which("javac") is not None and shutil.which("java") is not None


def compile_fixture() -> Path:
    """Compile the Java sources into `tests/java/build` unless the classes are newer than every source."""
    sources = sorted(p for p in JAVA_SRC.rglob("*.java") if BUILD not in p.parents)
    stamp = BUILD / ".compiled"
    if stamp.is_file() and all(p.stat().st_mtime <= stamp.stat().st_mtime for p in sources):
        return BUILD
    BUILD.mkdir(parents=True, exist_ok=True)
    cmd = ["javac", "-encoding", "UTF-8", "-d", str(BUILD), "-cp", str(py4j_jar()), *map(str, sources)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    stamp.touch()
    return BUILD


class QuPathJvm:
    """One fixture JVM: `port` and `token` to connect with; `kill()` ends it abruptly, `stop()` cleanly."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token if token is not None else secrets.token_urlsafe(24)
        classpath = f"{compile_fixture()}:{py4j_jar()}"
        self.proc = subprocess.Popen(
            ["java", "-Xmx1g", "-Djava.awt.headless=true", "-cp", classpath, MAIN_CLASS, self.token],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.port = self._read_port()

    def _read_port(self) -> int:
        found: list[str] = []
        reader = threading.Thread(target=lambda: found.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        line = found[0] if found else ""
        if not line.startswith("PY4J_PORT "):
            self.kill()
            raise RuntimeError(f"the QuPath fixture JVM did not start: {line!r} {self.proc.stderr.read()[-2000:]}")
        return int(line.split()[1])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.alive():
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


if __name__ == "__main__":
    print(compile_fixture())
    sys.exit(0)
