"""Peer programs Wayfinder is compared with, each in a virtualenv of its own (their pins clash
with ours), built once into the cache directory outside the repository.

* ``mcp-atlassian`` (PyPI, pinned): the keyword-search Atlassian MCP server, run over stdio
  against a Confluence site and its Jira — the emulator in tests, evaluations and benchmarks.
* the MCP conformance suite, the MCP Inspector CLI and js-tiktoken (npm, pinned with their lock
  file in ``devstack/mcp-clients``), with the Node.js 22 they need from the same registry: real
  clients the e2e tests point at Wayfinder's server, and a real tokenizer to count what it sends.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

from core.errors import ServiceError
from core.settings import Settings

MCP_ATLASSIAN_VERSION = "0.23.1"
MCP_CLIENTS = Path(__file__).parent / "mcp-clients"


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


def mcp_clients(settings: Settings) -> Path:
    """The folder of the installed npm clients (``node_modules/.bin`` holds ``node``,
    ``conformance`` and ``mcp-inspector-cli``) and of the scripts beside the lock file
    (``count-tokens.mjs``), installed with ``npm ci`` on first use into a folder named by the
    lock file's hash, so a new pin installs beside the old one."""
    lock = (MCP_CLIENTS / "package-lock.json").read_bytes()
    home = settings.cache_dir / "mcp-clients" / hashlib.sha256(lock).hexdigest()[:16]
    done = home / ".installed"
    if not done.is_file():
        npm = shutil.which("npm")
        if npm is None:
            raise ServiceError("the MCP conformance suite and Inspector are installed with npm: install Node.js and npm")
        shutil.rmtree(home, ignore_errors=True)  # a half-built one from an interrupted run
        home.mkdir(parents=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(MCP_CLIENTS / name, home / name)
        install = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=home, capture_output=True, text=True, check=False
        )
        if install.returncode != 0:
            raise ServiceError(f"could not install the MCP clients with npm ci:\n{install.stderr[-2000:]}")
        done.write_text("ok\n")
    for script in MCP_CLIENTS.glob("*.mjs"):  # beside their node_modules, which they import from
        shutil.copyfile(script, home / script.name)
    return home


def count_tokens(settings: Settings, texts: list[str]) -> list[int]:
    """The o200k_base tokens of each text (OpenAI's current encoding, js-tiktoken): what a text
    costs an agent's context, counted by a real tokenizer."""
    if not texts:
        return []
    clients = mcp_clients(settings)
    counted = subprocess.run(
        [str(clients / "node_modules" / ".bin" / "node"), str(clients / "count-tokens.mjs"), "--json"],
        input=json.dumps(texts).encode(),
        cwd=clients,
        env=node_environment(clients),
        capture_output=True,
        check=False,
    )
    if counted.returncode != 0:
        raise ServiceError(f"could not count tokens with js-tiktoken:\n{counted.stderr.decode(errors='replace')[-2000:]}")
    counts = json.loads(counted.stdout)
    if len(counts) != len(texts):
        raise ServiceError(f"js-tiktoken counted {len(counts)} texts of {len(texts)}")
    return [int(n) for n in counts]


def node_environment(clients: Path) -> dict[str, str]:
    """The environment that runs the npm clients on their own Node.js (their scripts start with
    ``#!/usr/bin/env node``) and keeps them off any proxy for loopback."""
    bin_dir = clients / "node_modules" / ".bin"
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": os.environ.get("HOME", "/tmp"),
        "NO_PROXY": "127.0.0.1,localhost",
        "NO_COLOR": "1",
    }
