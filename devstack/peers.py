"""Peer programs Wayfinder is compared with, each in a virtualenv of its own (their pins clash
with ours), built once into the cache directory outside the repository.

* ``mcp-atlassian`` (PyPI, pinned): the keyword-search Atlassian MCP server, run over stdio
  against a Confluence site and its Jira — the emulator in tests, evaluations and benchmarks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import venv
from pathlib import Path

from core.errors import ServiceError
from core.settings import Settings

MCP_ATLASSIAN_VERSION = "0.23.1"


def mcp_atlassian(settings: Settings) -> Path:
    """The ``mcp-atlassian`` console script, installed on first use."""
    home = settings.cache_dir / "mcp-atlassian" / MCP_ATLASSIAN_VERSION
    done = home / ".installed"
    if not done.is_file():
        shutil.rmtree(home, ignore_errors=True)  # a half-built one from an interrupted run
        venv.EnvBuilder(with_pip=True).create(home)
        install = subprocess.run(
            [str(home / "bin" / "python"), "-m", "pip", "install", "--quiet", f"mcp-atlassian=={MCP_ATLASSIAN_VERSION}"],
            capture_output=True,
            text=True,
            check=False,
        )
        if install.returncode != 0:
            raise ServiceError(f"could not install mcp-atlassian {MCP_ATLASSIAN_VERSION}:\n{install.stderr[-2000:]}")
        done.write_text(MCP_ATLASSIAN_VERSION + "\n")
    return home / "bin" / "mcp-atlassian"


def mcp_atlassian_environment(url: str, *, token: str, username: str | None = None, jira_url: str | None = None) -> dict[str, str]:
    """The whole environment of mcp-atlassian against the Confluence at ``url`` (with its context
    path) and, with ``jira_url``, the Jira there: nothing of ours is inherited (proxies, Python
    paths). Without a username the token is a personal access token (Data Center). Run it from an
    empty directory: it reads ``./.env`` over its environment."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"), "NO_PROXY": "127.0.0.1,localhost"}
    env |= {"CONFLUENCE_URL": url, "TOOLSETS": "confluence_pages" + (",jira_issues" if jira_url else "")}
    if jira_url:
        env["JIRA_URL"] = jira_url
    for product in ("CONFLUENCE", *(["JIRA"] if jira_url else [])):
        if username is None:
            env[f"{product}_PERSONAL_TOKEN"] = token
        else:
            env |= {f"{product}_USERNAME": username, f"{product}_API_TOKEN": token}
    return env
