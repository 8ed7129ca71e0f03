"""``python -m devstack.atlassian --host H --port P --corpus DIR``: the emulator as a process of
its own, seeded with the Hive space and the HIVE Jira project; the admin token comes from ``WAYFINDER_EMULATOR_ADMIN_TOKEN``
so that it does not show in ``ps``."""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

import uvicorn

from devstack.atlassian.admin import Emulator
from devstack.atlassian.hive import seed_hive
from devstack.atlassian.hive_jira import seed_hive_jira
from devstack.atlassian.server import create_app
from devstack.atlassian.site import Site


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m devstack.atlassian", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--corpus", type=Path, required=True, help="the Apache Hive export to seed from")
    parser.add_argument("--data-center", default="9.2.0", help="the Data Center release /confluence answers as (8.x lists space permissions over JSON-RPC only)")
    args = parser.parse_args()
    token = os.environ.get("WAYFINDER_EMULATOR_ADMIN_TOKEN")
    if not token:
        parser.error("WAYFINDER_EMULATOR_ADMIN_TOKEN must be set")
    site = Site()
    asyncio.run(seed_hive(site, args.corpus))
    asyncio.run(seed_hive_jira(site, args.corpus))
    uvicorn.run(create_app(Emulator(site, token, data_center=args.data_center)), host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
