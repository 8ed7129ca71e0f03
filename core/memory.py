"""What a long-running process (the MCP server) holds and need not.

* Optional modules that dependencies import whenever they are installed, and Wayfinder never
  uses: neo4j's driver imports pandas to offer DataFrame results, LightRAG imports pypinyin to
  sort Chinese file names in its web UI. Together they are ~110 MiB of a server's memory.
* Memory freed after loading an index: the C allocator keeps freed blocks for reuse instead of
  giving them back, so a server that parsed 100 MB of JSON and XML once would hold that much for
  good.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

#: modules only optional features of our dependencies import (see the module's docstring)
UNUSED_EXTRAS = ("pandas", "pypinyin")


def skip_unused_extras() -> None:
    """From now on, this process's imports of :data:`UNUSED_EXTRAS` fail, so the libraries that
    try them go on as when they are not installed. A module already imported stays."""
    for name in UNUSED_EXTRAS:
        sys.modules.setdefault(name, None)  # None: "import name" raises ImportError


def return_freed_memory() -> None:
    """Give the memory the C allocator holds free back to the system (glibc; elsewhere nothing)."""
    path = ctypes.util.find_library("c")
    trim = getattr(ctypes.CDLL(path), "malloc_trim", None) if path else None
    if trim is not None:
        trim(0)
