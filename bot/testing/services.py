"""Private Redis and Elasticsearch processes that fault tests may stop, kill and restart.

The shared test services (scripts/services) are never touched: each of these runs on a
port and in a folder of its own, started by the test and owned by it (its pid known), so
killing it harms no one else. Elasticsearch runs as scripts/services runs it: the
integ-test distribution from the cache, under the non-root `citebot-es` user, single node,
security off, its data folder kept across restarts (that is the point of a restart).

    redis = PrivateRedis(6461, run_dir / "redis").start()
    redis.stop(); redis.start()          # same port, same (empty: no persistence) data
    es = PrivateElasticsearch(9361, run_dir / "es").start()
    es.kill(); es.start()                # SIGKILL, then the same data folder again
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ES_VERSION = os.environ.get("CITEBOT_ES_VERSION", "9.2.4")
ES_USER = "citebot-es"
# A start on the 2-core machine under load took 6-25 s; this is a hang guard.
START_TIMEOUT_S = 180


def free_port() -> int:
    """A port nothing listens on now (the service then binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_pair(gap: int = 50) -> int:
    """A port p with p + gap free too (an Elasticsearch node's HTTP and transport ports)."""
    for _ in range(50):
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", 0))
            p = a.getsockname()[1]
            if p + gap >= 65536:
                continue
            try:
                b.bind(("127.0.0.1", p + gap))
            except OSError:
                continue
            return p
    raise RuntimeError("no free pair of ports")


def _wait(check, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} within {timeout_s:g} s")


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (our child, exited) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


class PrivateRedis:
    """redis-server on 127.0.0.1:port, no persistence, a child of this process."""

    def __init__(self, port: int, folder: Path) -> None:
        self.port = port
        self.folder = Path(folder)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_timeout=1, socket_connect_timeout=1).ping())
        except redis.RedisError:
            return False

    def start(self) -> PrivateRedis:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=open(self.folder / "redis.log", "ab"),  # noqa: SIM115 - the server's, for its life
            stderr=subprocess.STDOUT,
        )
        _wait(self.ping, START_TIMEOUT_S, f"redis did not answer on port {self.port}")
        return self

    def stop(self) -> None:
        """SIGTERM, as an orchestrator stops it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def _java_home() -> str:
    for d in sorted(
        glob.glob("/usr/lib/jvm/temurin-*-jdk-*")
        + glob.glob("/usr/lib/jvm/java-2[1-9]-*")
        + glob.glob("/usr/lib/jvm/java-[3-9][0-9]-*")
    ):
        java = Path(d) / "bin" / "java"
        if not java.exists():
            continue
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, check=False).stderr
        try:
            major = int(out.split('version "')[1].split(".")[0].split('"')[0])
        except (IndexError, ValueError):
            continue
        if major >= 21:
            return d
    raise RuntimeError("no Java 21+ under /usr/lib/jvm (scripts/services needs one too)")


def _es_home() -> Path:
    cache = Path(os.environ.get("CITEBOT_CACHE", Path.home() / ".cache" / "citebot"))
    home = cache / f"elasticsearch-{ES_VERSION}"
    if not (home / "bin" / "elasticsearch").exists():
        raise RuntimeError(f"{home} is missing: run `scripts/services start` once (it unpacks it)")
    return home


class PrivateElasticsearch:
    """One Elasticsearch node on 127.0.0.1:port with its own config, data and logs."""

    def __init__(self, port: int, folder: Path, heap: str = "512m") -> None:
        self.port = port
        self.folder = Path(folder)
        self.heap = heap
        self.pid: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"{self.url}/_cluster/health?wait_for_status=yellow&timeout=1s", timeout=3
            ) as r:
                return r.status == 200
        except OSError:
            return False

    def _prepare(self, home: Path) -> None:
        if (self.folder / "config").exists():
            return
        (self.folder / "data").mkdir(parents=True)
        (self.folder / "logs").mkdir()
        shutil.copytree(home / "config", self.folder / "config")
        subprocess.run(["chown", "-R", ES_USER, str(self.folder)], check=True)
        d = self.folder
        while d != d.parent:  # the service user must reach its folder
            try:
                os.chmod(d, os.stat(d).st_mode | 0o001)
            except OSError:
                pass
            d = d.parent

    def start(self) -> PrivateElasticsearch:
        home = _es_home()
        if subprocess.run(["id", ES_USER], capture_output=True, check=False).returncode != 0:
            raise RuntimeError(f"no {ES_USER} user: run `scripts/services start` once (it creates it)")
        self._prepare(home)
        pidfile = self.folder / "es.pid"
        pidfile.unlink(missing_ok=True)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "ES_JAVA_HOME": _java_home(),
            "ES_PATH_CONF": str(self.folder / "config"),
            "ES_JAVA_OPTS": f"-Xms{self.heap} -Xmx{self.heap}",
        }
        subprocess.run(
            [
                "runuser",
                "-u",
                ES_USER,
                "--",
                "env",
                *[f"{k}={v}" for k, v in env.items()],
                str(home / "bin" / "elasticsearch"),
                "-d",
                "-p",
                str(pidfile),
                "-Ediscovery.type=single-node",
                "-Enetwork.host=127.0.0.1",
                f"-Ehttp.port={self.port}",
                f"-Etransport.port={self.port + 50}",
                "-Expack.security.enabled=false",
                f"-Epath.data={self.folder / 'data'}",
                f"-Epath.logs={self.folder / 'logs'}",
                "-Ecluster.routing.allocation.disk.threshold_enabled=false",
            ],
            check=True,
            stdout=open(self.folder / "stdout.log", "ab"),  # noqa: SIM115 - the node's
            stderr=subprocess.STDOUT,
        )
        _wait(
            lambda: pidfile.exists() and pidfile.read_text().strip(), START_TIMEOUT_S, "Elasticsearch wrote no pid file"
        )
        self.pid = int(pidfile.read_text().strip())
        _wait(self.healthy, START_TIMEOUT_S, f"Elasticsearch did not come up on port {self.port}")
        return self

    def kill(self) -> None:
        """SIGKILL: no flush, no clean shutdown."""
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM: a clean shutdown."""
        self._signal(signal.SIGTERM)

    def freeze(self) -> None:
        """SIGSTOP: the node keeps its sockets but answers nothing (a hung or partitioned node)."""
        if self.pid is not None:
            os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        if self.pid is not None:
            os.kill(self.pid, signal.SIGCONT)

    def _signal(self, sig: signal.Signals) -> None:
        if not _alive(self.pid):
            return
        assert self.pid is not None
        os.kill(self.pid, signal.SIGCONT)  # a frozen node must run to die cleanly
        os.kill(self.pid, sig)
        _wait(lambda: not _alive(self.pid), 60, f"Elasticsearch (pid {self.pid}) did not exit")
        self.pid = None

    def remove(self) -> None:
        """Kill it and delete its folder."""
        self.kill()
        shutil.rmtree(self.folder, ignore_errors=True)
