"""Jira text to Markdown: wiki markup through jira2markdown, ADF node by node, nothing dropped."""

from pipeline.transform.jira import adf_to_markdown, issue_texts, to_markdown, wiki_to_markdown


def text(value: str, *marks: dict) -> dict:
    return {"type": "text", "text": value, **({"marks": list(marks)} if marks else {})}


def test_wiki_markup_becomes_markdown():
    markup = "h2. Setup\n\nRun *this* with {{hive --service metastore}}, see [the guide|https://example.com/guide].\n{code:sql}\nSELECT 1;\n{code}\n# first\n# second"
    assert wiki_to_markdown(markup) == (
        "## Setup\n\nRun **this** with `hive --service metastore`, see [the guide](https://example.com/guide).\n"
        "```sql\nSELECT 1;\n```\n1. first\n1. second"
    )


def test_adf_blocks_and_marks():
    document = {
        "type": "doc",
        "version": 1,
        "content": [
            {"type": "heading", "attrs": {"level": 3}, "content": [text("Plan")]},
            {"type": "paragraph", "content": [text("Use "), text("ORC", {"type": "strong"}), text(" and "), text("x=1", {"type": "code"}),
                                              {"type": "hardBreak"}, text("docs", {"type": "link", "attrs": {"href": "https://h/d"}}),
                                              {"type": "mention", "attrs": {"text": "@alice"}}]},
            {"type": "orderedList", "content": [{"type": "listItem", "content": [{"type": "paragraph", "content": [text("one")]}]},
                                                {"type": "listItem", "content": [{"type": "paragraph", "content": [text("two")]}]}]},
            {"type": "codeBlock", "attrs": {"language": "java"}, "content": [text("int x;")]},
            {"type": "table", "content": [
                {"type": "tableRow", "content": [{"type": "tableHeader", "content": [{"type": "paragraph", "content": [text("k")]}]},
                                                 {"type": "tableHeader", "content": [{"type": "paragraph", "content": [text("v|w")]}]}]},
                {"type": "tableRow", "content": [{"type": "tableCell", "content": [{"type": "paragraph", "content": [text("a")]}]}]},
            ]},
            {"type": "panel", "content": [{"type": "paragraph", "content": [text("inside a panel")]}]},
            {"type": "someFutureNode", "content": [text("still kept")]},
        ],
    }
    assert adf_to_markdown(document) == (
        "### Plan\n\nUse **ORC** and `x=1`  \n[docs](https://h/d)@alice\n\n1. one\n2. two\n\n```java\nint x;\n```\n\n"
        "| k | v\\|w |\n| --- | --- |\n| a |  |\n\ninside a panel\n\nstill kept"
    )


def test_either_form_and_nothing():
    assert to_markdown({"type": "doc", "content": [{"type": "paragraph", "content": [text("adf")]}]}) == "adf"
    assert to_markdown("plain") == "plain"
    assert to_markdown(None) == "" and adf_to_markdown("not a document") == ""


def test_a_restricted_comment_is_a_document_of_its_own_and_never_part_of_its_issues_text():
    comments = [
        {"id": "10", "author": "bob", "created": "2024-01-02T00:00:00+00:00", "body": "Everyone may read *this*.", "visibility": None},
        {"id": "11", "author": "alice", "created": "2024-01-03T00:00:00+00:00", "body": "Only committers: *hold*.", "visibility": ["role", "Committers"]},
        {"id": "12", "author": "alice", "created": "2024-01-04T00:00:00+00:00", "body": {"type": "doc", "content": [
            {"type": "paragraph", "content": [{"type": "text", "text": "Reviewers only."}]}]}, "visibility": ["group", "reviewers"]},
    ]
    issue, restricted = issue_texts("HIVE-1", "A summary", "The description.", comments)
    assert "Everyone may read" in issue and "hold" not in issue and "Reviewers only" not in issue
    assert sorted(restricted) == ["11", "12"]
    assert restricted["11"].startswith("# HIVE-1: comment by alice (role Committers)\n") and "Only committers: **hold**." in restricted["11"]  # wiki bold, as Markdown
    assert "Reviewers only." in restricted["12"] and "(group reviewers)" in restricted["12"]
