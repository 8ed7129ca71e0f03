"""Audit receipts: keyed digests, a key generated once with owner-only permissions."""

import json
import logging
import stat

import pytest

from authz.audit import audit_key
from authz.base import Check
from authz.fake import FakeAuthorizer
from authz.gate import Gate
from core.errors import ConfigurationError
from core.models import Principal
from core.settings import Settings
from mcp_app.server import audit_receipts


def test_a_key_is_generated_once_with_owner_only_permissions(tmp_path):
    settings = Settings(data_dir=tmp_path)
    first = audit_key(settings)
    assert len(first) >= 32 and audit_key(settings) == first
    assert stat.S_IMODE((tmp_path / "audit.key").stat().st_mode) == 0o600
    assert audit_key(Settings(data_dir=tmp_path, audit_key="k" * 32)) == b"k" * 32
    with pytest.raises(ConfigurationError):
        audit_key(Settings(data_dir=tmp_path, audit_key="short"))


async def test_receipts_are_logged_without_ids_or_names(caplog):
    gate = Gate(FakeAuthorizer([Check("user:bob", "viewer", "page:1")]), Principal(user="bob"))
    await gate.visible(["page:1", "page:27362075"])
    with caplog.at_level(logging.INFO, logger="wayfinder.audit"):
        audit_receipts(b"k" * 32)("fetch", gate, {"error": "NotFound"})
    (record,) = caplog.records
    receipt = json.loads(record.getMessage())
    assert receipt["tool"] == "fetch" and receipt["outcome"] == "NotFound"
    assert receipt["denied"] == 1 and len(receipt["denied_ids"]) == 1
    assert "27362075" not in record.getMessage() and "bob" not in record.getMessage()
