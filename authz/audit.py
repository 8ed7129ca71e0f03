"""The key of audit receipts (DESIGN.md A9): configured, or generated once into the data directory."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from core.errors import ConfigurationError
from core.settings import Settings

KEY_FILE = "audit.key"


def audit_key(settings: Settings) -> bytes:
    """``WAYFINDER_AUDIT_KEY`` if set; otherwise the key in ``<data dir>/audit.key``, created on first use
    (owner-only permissions), so receipts stay linkable across restarts of one deployment."""
    if settings.audit_key is not None:
        key = settings.audit_key.get_secret_value()
        if len(key) < 32:
            raise ConfigurationError("WAYFINDER_AUDIT_KEY must be at least 32 characters")
        return key.encode()
    path = settings.data_dir / KEY_FILE
    if not path.exists():
        _create(path)
    key = path.read_text().strip()
    if len(key) < 32:
        raise ConfigurationError(f"{path} holds no usable audit key; delete it to generate a new one")
    return key.encode()


def _create(path: Path) -> None:
    """Write the key to a private temporary file, then link it into place: another process sees
    either no key file or a whole one, and if two race, both use the one that landed first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_hex(32) + "\n")
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process published its key first: use theirs
    finally:
        temporary.unlink()
