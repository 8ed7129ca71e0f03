"""The local OpenFGA server: built from source with ``go install``, run from its own directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from core.errors import ServiceError, ToolMissing
from core.settings import Settings
from devstack.process import Port, ServiceFiles, start_detached

_MODULE = "github.com/openfga/openfga/cmd/openfga"
_MIN_GO = (1, 21)  # first Go that can switch toolchains when the module's `go` line asks for a newer one


class OpenFGAService:
    """One OpenFGA process for ``settings``. Construction does no I/O."""

    name = "openfga"
    start_deadline_s = 30.0
    stop_grace_s = 10.0

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._fga = settings.openfga
        self.files = ServiceFiles(self.name, settings.services_dir / self.name)

    @property
    def address(self) -> str:
        return self._fga.url

    @property
    def binary(self) -> Path:
        return self._settings.cache_dir / "openfga" / self._fga.version / "openfga"

    @property
    def sqlite_file(self) -> Path:
        return self.files.directory / "openfga.sqlite"

    def ports(self) -> list[Port]:
        return [
            Port(self._fga.host, self._fga.http_port, "OpenFGA HTTP", "WAYFINDER_OPENFGA__HTTP_PORT"),
            Port(self._fga.host, self._fga.grpc_port, "OpenFGA gRPC", "WAYFINDER_OPENFGA__GRPC_PORT"),
        ]

    def install(self, notify: Callable[[str], None]) -> None:
        """Build the pinned release into the cache unless it is already there."""
        if self.binary.is_file():
            return
        go = shutil.which("go")
        if go is None:
            raise ToolMissing(
                "OpenFGA is built from source and needs Go >= 1.21: `apt-get install golang-go` "
                "(or install Go from its release archive)."
            )
        _check_go_version(go)
        notify(
            f"Building OpenFGA {self._fga.version} with `go install` into {self.binary.parent} (takes a few minutes)…"
        )
        self.binary.parent.parent.mkdir(parents=True, exist_ok=True)
        # Build into a scratch GOBIN and move the result, so an interrupted build never looks finished.
        with tempfile.TemporaryDirectory(dir=self.binary.parent.parent) as scratch:
            env = {
                **os.environ,
                "GOBIN": scratch,
                "CGO_ENABLED": "0",  # pure Go: no C toolchain needed, sqlite included
                # `auto` uses the local Go when it satisfies the module's `go` line (and fetches the
                # required toolchain through the module proxy otherwise); Debian's go.env pins `local`.
                "GOTOOLCHAIN": "auto",
            }
            started = time.monotonic()
            build = subprocess.run(
                [go, "install", f"{_MODULE}@{self._fga.version}"], env=env, capture_output=True, text=True, check=False
            )
            if build.returncode != 0:
                raise ServiceError(f"Building OpenFGA {self._fga.version} failed:\n{build.stderr[-3000:]}")
            self.binary.parent.mkdir(parents=True, exist_ok=True)
            os.replace(Path(scratch) / "openfga", self.binary)
        notify(f"Built OpenFGA {self._fga.version} in {time.monotonic() - started:.0f} s")

    def launch(self) -> int:
        """Prepare the datastore and start the server detached; returns its pid (not yet healthy)."""
        self.files.directory.mkdir(parents=True, exist_ok=True)
        env = self._environment()
        if self._fga.datastore == "sqlite":
            migrate = subprocess.run(
                [str(self.binary), "migrate", *self._datastore_flags()],
                cwd=self.files.directory,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if migrate.returncode != 0:
                raise ServiceError(f"openfga migrate failed:\n{migrate.stdout[-2000:]}{migrate.stderr[-2000:]}")
        return start_detached(self.files, self.run_argv(), env)

    def run_argv(self) -> list[str]:
        fga = self._fga
        return [
            str(self.binary),
            "run",
            *self._datastore_flags(),
            "--http-addr", f"{fga.host}:{fga.http_port}",
            "--grpc-addr", f"{fga.host}:{fga.grpc_port}",
            "--playground-enabled=false",
            # Metrics would listen on 0.0.0.0:2112 whatever the ports above say, so a second stack
            # (tests next to a dev server) could not start. Profiler and tracing are off by default.
            "--metrics-enabled=false",
            "--authn-method", "preshared",
            "--resolve-node-limit", str(fga.resolve_node_limit),
            *self._cache_flags(),
            *self._concurrency_flags(),
        ]  # fmt: skip

    def _concurrency_flags(self) -> list[str]:
        """OpenFGA keeps two SQLite connections idle and opens another for every further concurrent
        read, so a batch's 50 checks run at once cost 5.3-5.9 ms a check on two cores and one at a
        time 1.5-2 ms (measured side by side on the demo's tuples, as alice)."""
        return ["--max-concurrent-checks-per-batch-check", "1"] if self._fga.datastore == "sqlite" else []

    def _cache_flags(self) -> list[str]:
        """OpenFGA's check caches, off unless ``decision_cache_s`` says how stale an answer may be
        (DESIGN.md A8): every cached answer expires within it, and the cache controller, polling at
        the same interval, drops answers older than a tuple write it sees."""
        ttl = self._fga.decision_cache_s
        if not ttl:
            return []
        every = f"{int(ttl * 1000)}ms"
        return [
            "--check-query-cache-enabled", "--check-query-cache-ttl", every,
            "--check-iterator-cache-enabled", "--check-iterator-cache-ttl", every,
            "--cache-controller-enabled", "--cache-controller-ttl", every,
        ]  # fmt: skip

    def is_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self._fga.url}/healthz", timeout=2) as response:
                return json.load(response).get("status") == "SERVING"
        except (OSError, ValueError):  # refused, reset, timeout, HTTP error, not JSON yet
            return False

    def _datastore_flags(self) -> list[str]:
        if self._fga.datastore == "sqlite":
            return ["--datastore-engine", "sqlite", "--datastore-uri", str(self.sqlite_file)]
        return ["--datastore-engine", "memory"]

    def _environment(self) -> dict[str, str]:
        # OpenFGA reads OPENFGA_* variables and config.yaml from ./, $HOME/.openfga and /etc/openfga:
        # drop inherited OPENFGA_* and point HOME at the service directory so only our flags count.
        env = {key: value for key, value in os.environ.items() if not key.startswith("OPENFGA_")}
        env["HOME"] = str(self.files.directory)
        # The key goes through the environment so it does not show in `ps`.
        env["OPENFGA_AUTHN_PRESHARED_KEYS"] = self._fga.preshared_key.get_secret_value()
        return env


def _check_go_version(go: str) -> None:
    result = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False)
    match = re.match(r"go(\d+)\.(\d+)", result.stdout.strip())
    if match is None or (int(match[1]), int(match[2])) < _MIN_GO:
        raise ToolMissing(
            f"OpenFGA needs Go >= {_MIN_GO[0]}.{_MIN_GO[1]} to build, found {result.stdout.strip() or 'unknown'}: "
            "install a newer golang-go (e.g. from backports) or Go from its release archive."
        )
