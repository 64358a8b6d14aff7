"""Fixtures: the real meithd on a temporary home with the SDK's plugins as a tool host."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
ROOT = HERE.parents[2]
MEITHD = os.environ.get("MEITHD") or str(ROOT / "build-dev" / "bin" / "meithd")

sys.path.insert(0, str(SRC))


def host_source(name: str, plugins: list[str], config: str = "", extra: str = "") -> str:
    command = json.dumps([sys.executable, "-m", "meith_tools", *plugins])
    return (f'[[sources]]\nname = "{name}"\nkind = "host"\ncommand = {command}\n'
            f'cwd = "{HERE}"\nenv = {{ PYTHONPATH = "{SRC}:{HERE}" }}\n'
            + (f"config = {config}\n" if config else "") + extra + "\n")


class Daemon:
    def __init__(self, config: str):
        self.dir = tempfile.TemporaryDirectory(prefix="meith-py-")
        self.home = Path(self.dir.name)
        self.home.chmod(0o700)
        (self.home / "meithd.toml").write_text(config)
        self.socket = self.home / "d.sock"
        self.proc = None
        self.start()

    def start(self) -> None:
        (self.home / "config.json").unlink(missing_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "MEITH_HOME")}
        self.log = open(self.home / "meithd.log", "ab")
        self.proc = subprocess.Popen([MEITHD, "--home", str(self.home), "--socket", str(self.socket)],
                                     stdout=self.log, stderr=self.log, env=env)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if json.loads((self.home / "config.json").read_text()).get("pid") == self.proc.pid:
                    return
            except (OSError, ValueError):
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError("meithd did not start:\n" + (self.home / "meithd.log").read_text())

    def stop(self) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def audit(self) -> list[dict]:
        return [json.loads(l) for l in (self.home / "audit.jsonl").read_text().splitlines() if l]


@pytest.fixture
def daemon_factory():
    started: list[Daemon] = []

    def make(config: str) -> Daemon:
        d = Daemon(config)
        started.append(d)
        return d

    yield make
    for d in started:
        d.stop()
        d.dir.cleanup()


PERMISSIVE = ('[permissions.callers.plugin]\nallow = ["read-only", "writes-files"]\n'
              '[permissions.callers.cli]\nallow = ["read-only", "writes-files"]\n')


@pytest.fixture
def daemon(daemon_factory):
    return daemon_factory(host_source("py", ["plugins:Demo", "plugins:AsyncDemo"],
                                      config='{ greeting = "hi" }'))
