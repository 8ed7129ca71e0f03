"""Domain records shared by the pipeline, the retrievers and the MCP tools."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core import ids
from core.errors import InvalidArgument


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Space(Frozen):
    key: str
    name: str
    url: str

    @property
    def id(self) -> str:
        return f"space:{self.key}"


class Page(Frozen):
    """One Confluence page as the pipeline hands it to the stores."""

    page_id: str = Field(description="Numeric Confluence page id, without the 'page:' prefix.")
    space_key: str
    title: str
    parent_id: str | None = Field(description="Parent page id, or None for a root page of the space.")
    position: int = Field(description="Order among its siblings, as the space tree lists them.")
    url: str
    markdown: str
    links: tuple[str, ...] = Field((), description="Bare ids of the pages its text links to (graph edges).")
    labels: tuple[str, ...] = Field((), description="Its Confluence labels, as of its converted version.")
    updated_at: datetime | None = Field(None, description="When its current version was saved (UTC).")

    @property
    def id(self) -> str:
        return f"page:{self.page_id}"


class Image(Frozen):
    """An image a page shows (a Confluence attachment), with the alt text written for it."""

    attachment_id: str = Field(description="Confluence attachment id, e.g. 'att27362100'.")
    page_id: str = Field(description="Bare id of the page that shows it: the image is authorized through it.")
    filename: str
    media_type: str
    alt_text: str
    sha256: str
    data: bytes = Field(repr=False)

    @property
    def id(self) -> str:
        return f"image:{self.attachment_id}"


class Principal(Frozen):
    """A verified caller: a user, or an agent acting for a user on one task (DESIGN.md A1, A2).

    Ids are bare (``alice``, ``digest-bot``, ``weekly-digest``). An agent without a task, or a task
    without an agent, is refused: delegation is always for one task.
    """

    user: str
    agent: str | None = None
    task: str | None = None

    @model_validator(mode="after")
    def _valid(self) -> Principal:
        ids.user_id(self.user)
        if (self.agent is None) != (self.task is None):
            raise InvalidArgument("an agent acts for a user on one task: give both agent and task, or neither")
        if self.agent is not None and self.task is not None:
            ids.agent_id(self.agent)
            ids.task_id(self.task)
        return self

    @property
    def subject(self) -> str:
        return f"user:{self.user}"

    @property
    def delegated(self) -> bool:
        return self.agent is not None


class Permissions(Frozen):
    """Who may see what, as the source reports it (Confluence semantics).

    ``space_viewers`` and ``page_restrictions`` hold subjects in OpenFGA spelling: ``user:bob`` or
    ``group:hive-users#member``. ``page_restrictions`` must list every page: an empty tuple means the
    page has no view restriction of its own; a page missing from it is unclassified and stays
    invisible to everyone (DESIGN.md A10), with all its descendants.
    """

    space_viewers: dict[str, tuple[str, ...]]
    page_restrictions: dict[str, tuple[str, ...]]
    group_members: dict[str, tuple[str, ...]]


class Project(Frozen):
    """A Jira project: the root of its issue tree, as a space is of its page tree."""

    key: str
    name: str
    url: str

    @property
    def id(self) -> str:
        return ids.project_id(self.key)


class Comment(Frozen):
    """A Jira comment restricted to a project role or a group: a document of its own, read by
    those of its issue's readers in that role or group (DESIGN.md A14), never part of its issue's
    text."""

    comment_id: str = Field(description="Jira's comment id, e.g. '10042'.")
    issue_key: str
    project_key: str
    audience: str = Field(description="Who may read it besides seeing the issue: 'project_role:<id>#member' or 'group:<id>#member'.")
    title: str = Field(description="'<issue key>: comment by <author> (<role or group>)'.")
    url: str
    markdown: str
    updated_at: datetime | None = None

    @property
    def id(self) -> str:
        return ids.comment_id(self.comment_id)


class Issue(Frozen):
    """One Jira issue as the pipeline hands it to the stores."""

    key: str = Field(description="Issue key, e.g. 'HIVE-1234'.")
    project_key: str
    issue_type: str = Field(description="Its type's name: Epic, Story, Task, Bug, Sub-task, ...")
    hierarchy_level: int = Field(description="Jira's level: 1 for epics, 0 for standard issues, -1 for sub-tasks.")
    summary: str
    parent_key: str | None = Field(description="Its epic (for a standard issue) or its parent (for a sub-task).")
    position: int = Field(description="Order among the children of its parent (or the project's top issues).")
    url: str
    markdown: str
    security_level: str | None = Field(None, description="Id of its issue security level, if any.")
    reporter: str | None = Field(None, description="Bare user id of its reporter.")
    assignee: str | None = Field(None, description="Bare user id of its assignee.")
    labels: tuple[str, ...] = ()
    updated_at: datetime | None = None
    links: tuple[str, ...] = Field((), description="Keys of the issues it links to (outward links).")
    comments: tuple[Comment, ...] = Field((), description="Its comments restricted to a role or a group, each a document of its own.")

    @property
    def id(self) -> str:
        return ids.issue_id(self.key)

    @property
    def subtask(self) -> bool:
        return self.hierarchy_level < 0


REPORTER = "reporter"  # a security level member meaning "the issue's reporter"
ASSIGNEE = "assignee"  # ... and "the issue's assignee"


class JiraPermissions(Frozen):
    """Who may see what, as Jira reports it. Subjects in OpenFGA spelling: ``user:bob``,
    ``group:hive-users#member``, ``project_role:HIVE.Developers#member`` or ``user:*``.

    ``project_browsers``: project key → who has "Browse projects". ``role_members``: role id
    (``<project key>.<role name>``) → its users and groups. ``level_members``: security level id →
    its members, where :data:`REPORTER` and :data:`ASSIGNEE` stand for the issue's own. A level
    missing from ``level_members`` admits nobody.
    """

    project_browsers: dict[str, tuple[str, ...]]
    role_members: dict[str, tuple[str, ...]]
    level_members: dict[str, tuple[str, ...]]
    group_members: dict[str, tuple[str, ...]] = {}
