"""A throwaway PostgreSQL server for the tests: the system's binaries (``initdb``, ``pg_ctl``), a data folder
in a temp dir, a free port on 127.0.0.1, trust authentication. ``initdb`` refuses to run as root, so under
root every server command runs as the ``postgres`` user (``runuser``).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def missing_reason() -> str | None:
    """Why no server can be started here, or None."""
    for tool in ("initdb", "pg_ctl"):
        if shutil.which(tool) is None:
            return f"no PostgreSQL server binaries ({tool} is not on PATH)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, and initdb refuses root: no 'postgres' user to run it as"
        if shutil.which("runuser") is None:
            return "running as root without runuser to start initdb as the 'postgres' user"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "no psycopg (pip install 'ppo-core[tune]')"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    """One server: ``start``, ``restart``, ``stop``; ``new_database`` gives a fresh database's URL."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="ppo-core-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self._databases = 0
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")

    def _run(self, *command: str) -> None:
        if os.geteuid() == 0:
            command = ("runuser", "-u", "postgres", "--", *command)
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr[-2000:]}\n{tail}")

    def _pg_ctl(self, action: str, *extra: str) -> None:
        options = f"-p {self.port} -h 127.0.0.1 -k {self.folder} -c fsync=off -c max_connections=200"
        self._run("pg_ctl", action, "-D", str(self.data), "-l", str(self.folder / "server.log"), "-w", "-t", "60",
                  "-o", options, *extra)

    def start(self) -> None:
        self._pg_ctl("start")

    def restart(self) -> None:
        """A fast restart: open sessions are ended and their transactions rolled back, as in a server crash."""
        self._pg_ctl("restart", "-m", "fast")

    def stop(self) -> None:
        self._pg_ctl("stop", "-m", "immediate")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """The URL of a new, empty database (psycopg 3, SQLAlchemy's default driver for ``postgresql://``)."""
        import psycopg

        self._databases += 1
        name = f"study_{self._databases}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres",
                             autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def remove(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
