"""Issues placed for the sinks, and an issue's Markdown."""

from datetime import UTC, datetime

from pipeline.issues import placed_issues
from pipeline.sources.jira_rest import RemoteIssue
from pipeline.transform.jira import issue_markdown

WHEN = datetime(2024, 1, 1, tzinfo=UTC)


def remote(key: str, level: int, parent: str | None = None) -> RemoteIssue:
    return RemoteIssue(key, "P", "x", level, f"S {key}", parent, WHEN, f"u/{key}", None, "Open", (), None, None)


def test_parents_come_first_siblings_by_key_number_and_orphans_are_placed_safely():
    listing = [remote("P-10", 0, "P-2"), remote("P-9", 0, "P-2"), remote("P-2", 1), remote("P-11", -1, "P-10"),
               remote("P-12", 0, "P-99"), remote("P-13", -1, "P-98")]
    placed = placed_issues(listing, {"P-9": "# P-9: text\n"})
    assert [(i.key, i.parent_key, i.position) for i in placed] == [
        ("P-2", None, 0), ("P-9", "P-2", 0), ("P-10", "P-2", 1), ("P-11", "P-10", 0),
        ("P-12", None, 1),  # its epic is not held: at the top, since an epic passes nothing to it
    ]  # P-13, a sub-task whose parent is not held, is left out: its visibility would be unknown
    assert placed[1].markdown == "# P-9: text\n" and placed[0].markdown == "# P-2: S P-2\n"


def test_an_issue_is_one_document_with_its_comments():
    text = issue_markdown("P-1", "Crash", "It *fails*.", [("bob", "2024-01-02T00:00:00+00:00", {"type": "doc", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "Fixed."}]}]})])
    assert text == "# P-1: Crash\n\nIt **fails**.\n\n## Comments\n\n**bob**, 2024-01-02T00:00:00+00:00:\n\nFixed.\n"
