"""Fail closed: with OpenFGA stopped, every tool answers authorization_unavailable and no data.

Its own module: the server here opens the semantic index, and only one may be open per process,
so the module-scoped server of test_mcp_http must be gone first.
"""

from __future__ import annotations

from authz.client import OpenFGAClient
from authz.tuples import confluence_tuples
from core.settings import Settings
from devstack import stack
from pipeline.sinks.openfga import sync_tuples
from tests.conftest import SliceSource
from tests.e2e.test_mcp_http import _serve, call


async def test_openfga_down_means_authorization_unavailable_and_no_data(indexed, services: Settings, tmp_path):
    """A server whose own OpenFGA is stopped answers every tool with authorization_unavailable."""
    own = services.model_copy(
        update={
            "data_dir": tmp_path / "run",
            "openfga": services.openfga.model_copy(update={"http_port": 38090, "grpc_port": 38091}),
        }
    )
    own.data_dir.mkdir(parents=True)
    own.index_dir.symlink_to(services.index_dir)  # the same semantic index, an OpenFGA of its own
    stack.up(own, only={"openfga"})
    try:
        source = SliceSource(own.corpus_dir)
        async with OpenFGAClient(own.openfga, provision=True) as fga:
            await sync_tuples(fga, confluence_tuples("HIVE", await source.pages("HIVE"), await source.permissions()))
        observed: list = []
        uv, task = await _serve(own, 38766, observed)
        url = "http://127.0.0.1:38766/mcp"
        try:
            assert (await call(url, "alice", "list_spaces"))["spaces"]  # works while OpenFGA runs
            stack.down(own, only={"openfga"})
            calls = [
                ("search", {"query": "HiveServer2 LDAP"}),
                ("fetch", {"id": "page:58852417"}),
                ("list_spaces", {}),
                ("list_children", {"id": "space:HIVE"}),
            ]
            for tool, args in calls:
                result = await call(url, "alice", tool, **args)
                assert isinstance(result, str) and result.startswith("authorization_unavailable:"), (tool, result)
        finally:
            uv.should_exit = True
            await task
    finally:
        stack.down(own, only={"openfga"})
