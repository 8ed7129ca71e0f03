"""The local Neo4j server: jars from Maven, launched with ``CommunityEntryPoint`` from its own directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from core.errors import ConfigurationError, ServiceError, ToolMissing
from core.settings import Settings
from devstack.process import Port, ServiceFiles, start_detached

_ENTRY_POINT = "org.neo4j.server.CommunityEntryPoint"
_ADMIN_TOOL = "org.neo4j.cli.AdminTool"
# JVM options the official `neo4j` launcher adds (from its default neo4j.conf) that matter on Java 17.
_JVM_OPTIONS = (
    "-XX:+UseG1GC",
    "-XX:-OmitStackTraceInFastThrow",
    "-Dfile.encoding=UTF-8",
    "-Djdk.nio.maxCachedBufferSize=1024",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dlog4j2.disable.jmx=true",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
)


class Neo4jService:
    """One Neo4j process for ``settings``. Construction does no I/O."""

    name = "neo4j"
    start_deadline_s = 90.0  # first start creates the system and user databases; 2-core machines are slow
    stop_grace_s = 30.0

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._neo = settings.neo4j
        self.files = ServiceFiles(self.name, settings.services_dir / self.name)

    @property
    def address(self) -> str:
        return self._neo.uri

    @property
    def lib_dir(self) -> Path:
        return self._settings.cache_dir / "neo4j" / self._neo.version / "lib"

    @property
    def conf_dir(self) -> Path:
        return self.files.directory / "conf"

    @property
    def data_dir(self) -> Path:
        return self.files.directory / "data"

    def ports(self) -> list[Port]:
        return [Port(self._neo.host, self._neo.bolt_port, "Neo4j Bolt", "WAYFINDER_NEO4J__BOLT_PORT")]

    def install(self, notify: Callable[[str], None]) -> None:
        """Download the pinned server jars into the cache unless they are already there."""
        if shutil.which("java") is None:
            raise ToolMissing("Neo4j needs Java 17 or 21: `apt-get install openjdk-17-jre-headless`.")
        if (self.lib_dir / f"neo4j-{self._neo.version}.jar").is_file():
            return
        mvn = shutil.which("mvn")
        if mvn is None:
            raise ToolMissing("Neo4j's jars are fetched with Maven: `apt-get install maven`.")
        notify(f"Downloading Neo4j {self._neo.version} jars with Maven into {self.lib_dir} …")
        self.lib_dir.parent.mkdir(parents=True, exist_ok=True)
        # Download into a scratch directory and move it, so an interrupted download never looks finished.
        with tempfile.TemporaryDirectory(dir=self.lib_dir.parent) as scratch:
            pom = Path(scratch) / "pom.xml"
            pom.write_bytes(resources.files("devstack").joinpath("neo4j-pom.xml").read_bytes())
            jars = Path(scratch) / "lib"
            fetch = subprocess.run(
                [
                    mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
                    f"-Dneo4j.version={self._neo.version}",
                    "-DincludeScope=runtime",
                    f"-DoutputDirectory={jars}",
                ],
                cwd=scratch,
                capture_output=True,
                text=True,
                check=False,
            )  # fmt: skip
            if fetch.returncode != 0:
                raise ServiceError(f"Fetching the Neo4j jars failed:\n{fetch.stdout[-3000:]}{fetch.stderr[-2000:]}")
            os.replace(jars, self.lib_dir)

    def launch(self) -> int:
        """Write the configuration, set the initial password on a new store, start detached; returns the pid."""
        for sub in ("conf", "data", "logs", "run", "import", "plugins"):
            (self.files.directory / sub).mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "neo4j.conf").write_text(self.config_text())
        if not (self.data_dir / "databases" / "system").exists():
            self._set_initial_password()
        return start_detached(self.files, self.run_argv(), self._environment())

    def config_text(self) -> str:
        neo, home = self._neo, self.files.directory
        lines = [
            "# Written by devstack/neo4j.py on every start; edit the Wayfinder settings instead.",
            f"server.directories.data={home / 'data'}",
            f"server.directories.logs={home / 'logs'}",
            f"server.directories.run={home / 'run'}",
            f"server.directories.import={home / 'import'}",
            f"server.directories.plugins={home / 'plugins'}",
            f"server.default_listen_address={neo.host}",
            "server.bolt.enabled=true",
            f"server.bolt.listen_address={neo.host}:{neo.bolt_port}",
            f"server.bolt.advertised_address={neo.host}:{neo.bolt_port}",
            "server.http.enabled=false",
            "server.https.enabled=false",
            "dbms.security.auth_enabled=true",
            f"initial.dbms.default_database={neo.database}",
            "server.memory.pagecache.size=64m",
            "dbms.usage_report.enabled=false",
            # Bolt waits this many seconds, twice, for new work before shutting down: 10 s per stop.
            "internal.dbms.bolt.netty_server_shutdown_quiet_period=0",
        ]
        return "\n".join(lines) + "\n"

    def run_argv(self) -> list[str]:
        # The heap is a JVM flag: server.memory.heap.* is only read by the `neo4j` shell launcher.
        return [
            "java",
            f"-Xms{self._neo.heap}",
            f"-Xmx{self._neo.heap}",
            *_JVM_OPTIONS,
            "-cp", f"{self.lib_dir}/*",
            _ENTRY_POINT,
            f"--home-dir={self.files.directory}",
            f"--config-dir={self.conf_dir}",
            # Console mode keeps the user log on stdout too, so start-up errors reach the log we tail.
            "--console-mode",
        ]  # fmt: skip

    def is_healthy(self) -> bool:
        """True once the configured database answers a query with the configured password."""
        from navigator.store import answers  # the one module that talks to Neo4j

        try:
            return answers(self._neo)
        except ConfigurationError as exc:
            raise ServiceError(
                f"{exc}. The store in {self.data_dir} was created with another one: remove that directory "
                "to start afresh, or set WAYFINDER_NEO4J__PASSWORD."
            ) from exc

    def _set_initial_password(self) -> None:
        # `neo4j-admin dbms set-initial-password` writes data/dbms/auth.ini, which Neo4j reads on the
        # very first start only; the admin tool finds the configuration through these two variables.
        env = {**self._environment(), "NEO4J_HOME": str(self.files.directory), "NEO4J_CONF": str(self.conf_dir)}
        result = subprocess.run(
            [
                "java", "-cp", f"{self.lib_dir}/*", _ADMIN_TOOL,
                "dbms", "set-initial-password", self._neo.password.get_secret_value(),
            ],
            cwd=self.files.directory,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise ServiceError(f"Setting the initial Neo4j password failed:\n{result.stdout}{result.stderr}")

    def _environment(self) -> dict[str, str]:
        # An inherited NEO4J_HOME/NEO4J_CONF must not point the tools at another installation.
        return {key: value for key, value in os.environ.items() if key not in ("NEO4J_HOME", "NEO4J_CONF")}
