"""What a long-running process (the MCP server) holds and need not.

* Optional modules that dependencies import whenever they are installed, and Wayfinder never
  uses: neo4j's driver imports pandas to offer DataFrame results, LightRAG imports pypinyin to
  sort Chinese file names in its web UI. Together they are ~110 MiB of a server's memory.
* Memory freed after loading an index: the C allocator keeps freed blocks for reuse instead of
  giving them back, so a server that parsed 100 MB of JSON and XML once would hold that much for
  good.
* The loaded index's objects in the cycle collector's full collections: see :func:`freeze_loaded`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
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


def freeze_loaded() -> None:
    """Collect what loading left behind, then keep every object alive now out of the cycle
    collector's later passes (``gc.freeze``). A server holds its loaded index for as long as it
    runs: the Hive index is ~540,000 objects, and a full collection scanned them all (212 ms), in
    the middle of whichever request happened to trigger it. For a process that keeps what it
    loaded until it exits: what is frozen and later dropped in a cycle is never collected."""
    gc.collect()
    gc.freeze()
