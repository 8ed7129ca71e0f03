"""Process mechanics shared by the local services: pid files, ports, detached start, health, stop.

Every service lives in its own directory ``services_dir/<name>/`` holding ``<name>.pid`` and
``<name>.log``. A pid file records the pid *and* the kernel start time of the process, so a pid
recycled by an unrelated process is never mistaken for ours and never signalled.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.errors import PortInUse, ServiceError

_POLL_S = 0.2
_LOG_TAIL_LINES = 30


@dataclass(frozen=True)
class ServiceFiles:
    """Where one service keeps its working directory, pid file and console log."""

    name: str
    directory: Path

    @property
    def pid_file(self) -> Path:
        return self.directory / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.directory / f"{self.name}.log"


@dataclass(frozen=True)
class Port:
    """A port a service needs, with what to tell the user when it is taken."""

    host: str
    number: int
    label: str  # e.g. "OpenFGA HTTP"
    setting: str  # the environment variable that moves it


def _start_ticks(pid: int) -> int | None:
    """Kernel start time of ``pid`` (clock ticks since boot), or None if gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ")".
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def running_pid(files: ServiceFiles) -> int | None:
    """The pid of the service process we started, if it is still alive; None otherwise."""
    try:
        pid_text, ticks_text = files.pid_file.read_text().split()
        pid, ticks = int(pid_text), int(ticks_text)
    except (FileNotFoundError, ValueError):
        return None
    return pid if _start_ticks(pid) == ticks else None


def forget_stale_pid(files: ServiceFiles) -> None:
    """Remove a pid file whose process is gone (or was never ours)."""
    if running_pid(files) is None:
        files.pid_file.unlink(missing_ok=True)


def ensure_port_free(port: Port, service: str) -> None:
    """Raise PortInUse if something already holds ``port``. Call only when our process is not running."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # SO_REUSEADDR so that TIME_WAIT leftovers of our own stopped service do not count as "in use".
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((port.host, port.number))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUse(
                    f"{service}: port {port.number} ({port.label}) on {port.host} is already in use by a process "
                    f"Wayfinder did not start. Stop that process or choose another port with {port.setting}."
                ) from exc
            raise ServiceError(f"{service}: cannot bind {port.host}:{port.number} ({port.label}): {exc}") from exc


def start_detached(files: ServiceFiles, argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Start ``argv`` in ``files.directory``, detached from us, output appended to the log; write the pid file.

    The process is started through ``sh`` and backgrounded there, so it is re-parented away from
    this Python process: it outlives the CLI, and no ``Popen`` object is left to be reaped or warned about.
    """
    files.directory.mkdir(parents=True, exist_ok=True)
    launcher = subprocess.run(
        ["sh", "-c", 'log=$1; shift; "$@" </dev/null >>"$log" 2>&1 & echo $!', "sh", str(files.log_file), *argv],
        cwd=files.directory,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
        start_new_session=True,  # Ctrl-C in the terminal that ran `up` must not stop the services.
    )
    if launcher.returncode != 0 or not launcher.stdout.strip().isdigit():
        raise ServiceError(f"{files.name}: could not launch {argv[0]}: {launcher.stderr.strip()}")
    pid = int(launcher.stdout.strip())
    ticks = _start_ticks(pid)
    if ticks is None:
        raise ServiceError(f"{files.name}: exited immediately.\n{log_tail(files)}")
    files.pid_file.write_text(f"{pid} {ticks}\n")
    return pid


def log_tail(files: ServiceFiles, lines: int = _LOG_TAIL_LINES) -> str:
    """The last lines of the service's console log, for error messages."""
    try:
        text = files.log_file.read_text(errors="replace")
    except FileNotFoundError:
        return f"(no log at {files.log_file})"
    tail = "\n".join(text.splitlines()[-lines:])
    return f"--- last lines of {files.log_file} ---\n{tail}"


def wait_healthy(files: ServiceFiles, is_healthy: Callable[[], bool], deadline_s: float) -> None:
    """Poll ``is_healthy`` until it answers True; raise ServiceError if the process dies or time runs out."""
    deadline = time.monotonic() + deadline_s
    while True:
        if running_pid(files) is None:
            raise ServiceError(f"{files.name} exited during start-up.\n{log_tail(files)}")
        if is_healthy():
            return
        if time.monotonic() >= deadline:
            raise ServiceError(f"{files.name} was not healthy after {deadline_s:.0f} s.\n{log_tail(files)}")
        time.sleep(_POLL_S)


def stop(files: ServiceFiles, grace_s: float, first: signal.Signals = signal.SIGTERM) -> int | None:
    """Stop the process our pid file names: ``first`` (SIGTERM), wait up to ``grace_s``, then SIGKILL.

    Returns the pid that was stopped, or None if nothing of ours was running. Processes we did not
    start (no pid file, or a recycled pid) are never signalled.
    """
    pid = running_pid(files)
    if pid is None:
        files.pid_file.unlink(missing_ok=True)
        return None
    _signal(pid, first)
    deadline = time.monotonic() + grace_s
    while running_pid(files) is not None and time.monotonic() < deadline:
        time.sleep(_POLL_S / 2)
    if running_pid(files) is not None:
        _signal(pid, signal.SIGKILL)
        while running_pid(files) is not None and time.monotonic() < deadline + 5:
            time.sleep(_POLL_S / 2)
        if running_pid(files) is not None:
            raise ServiceError(f"{files.name} (pid {pid}) did not exit after SIGKILL.")
    files.pid_file.unlink(missing_ok=True)
    return pid


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass  # It exited between the check and the signal: that is what we wanted.
