"""What the MCP server keeps out of its memory (core.memory)."""

from __future__ import annotations

import subprocess
import sys

SERVER_IMPORTS = """
import sys
from core.memory import UNUSED_EXTRAS, return_freed_memory, skip_unused_extras
skip_unused_extras()
import mcp_app.server, navigator.store, retrievers.lightrag_adapter  # what the server imports
from lightrag.utils import get_pinyin_sort_key
return_freed_memory()
print(sorted(name for name in UNUSED_EXTRAS if sys.modules.get(name) is not None))
print(get_pinyin_sort_key("Metastore"))  # LightRAG's fallback without pypinyin
"""


def test_the_server_imports_its_libraries_without_their_unused_extras() -> None:
    done = subprocess.run([sys.executable, "-c", SERVER_IMPORTS], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "metastore"]
    assert "pypinyin" not in done.stderr  # LightRAG's warning that it is missing: it is missing on purpose


def test_without_the_skip_the_extras_do_load() -> None:
    """The test above would pass vacuously if nothing imported them."""
    code = "import sys, navigator.store, retrievers.lightrag_adapter; print(sorted(m for m in ('pandas', 'pypinyin') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['pandas', 'pypinyin']"


def test_what_is_loaded_is_kept_out_of_later_collections() -> None:
    import gc

    from core.memory import freeze_loaded

    held = [[n] for n in range(10_000)]  # a loaded index's many small objects
    try:
        freeze_loaded()
        assert gc.get_freeze_count() >= len(held)  # none of them scanned by a full collection again
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0
