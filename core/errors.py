"""Wayfinder's exceptions, one tree.

    WayfinderError
    ├── ConfigurationError          developer or operator misuse: fix the settings or the call
    │   └── ToolMissing             a program the local stack needs is not installed
    ├── ServiceError                a local service could not be started or reached
    │   └── PortInUse               something else already listens on a port we need
    ├── SourceError                 the content source (export files, Atlassian REST) failed
    │   └── TransformError          one page's content could not be converted (retried next run)
    ├── IndexError_                 the semantic index refused or failed an operation
    ├── NavigatorUnavailable        Neo4j could not answer
    ├── AuthorizationUnavailable    OpenFGA unreachable, too slow or incomplete: fail closed
    ├── NotFound                    no such object, or the caller may not see it (indistinguishable)
    ├── InvalidArgument             a caller passed a bad value
    └── Unauthenticated             no verified principal

Third-party exceptions are translated where the library is called. ``mcp_app.errors`` maps the
runtime ones to MCP errors in one place.
"""

from __future__ import annotations


class WayfinderError(Exception):
    """Base of every error Wayfinder raises on purpose."""


class ConfigurationError(WayfinderError):
    """The settings or the call are wrong; retrying will not help."""


class ToolMissing(ConfigurationError):
    """A program the local stack needs is missing. The message says how to install it."""


class ServiceError(WayfinderError):
    """A local service failed to start, stop or answer its health check."""


class PortInUse(ServiceError):
    """A port we need is taken by a process we did not start."""


class SourceError(WayfinderError):
    """Reading the content source failed."""


class TransformError(SourceError):
    """One page's content could not be converted to Markdown; that page is retried next run."""


class IndexError_(WayfinderError):  # noqa: N801 - the trailing underscore avoids the builtin
    """The semantic index failed."""


class NavigatorUnavailable(WayfinderError):
    """The navigator's graph database could not answer."""


class AuthorizationUnavailable(WayfinderError):
    """Authorization could not be decided, so nothing is returned (fail closed)."""


class NotFound(WayfinderError):
    """The object does not exist or is not visible to the caller. The two are never told apart."""


class InvalidArgument(WayfinderError):
    """A caller-supplied value is invalid; the message names it."""


class Unauthenticated(WayfinderError):
    """The request carries no verified principal."""
