"""Evaluation questions from a file: the Hive wiki's ``questions_dev.jsonl`` format (one JSON object
per line: ``id``, ``kind``, ``question``, ``gold_pages`` as bare page ids, optionally ``answer``
(the reference answer an LLM judge grades against), and for a navigation
question ``nav``: ``{"op": "children" | "subtree" | "resolve_path", "node": page id or title path,
"depth": subtree levels, 2 if left out}``, whose exact answer is ``gold_pages``) or the MuSiQue format
(a JSON list of questions whose ``paragraphs`` mark the supporting ones; the passages are the pages
of the ``MUSIQUE`` space, found through the ``corpus.json`` beside the file)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from core.errors import InvalidArgument


#: the page id of the first MuSiQue passage; passage n (from 0, in corpus.json order) is page n + this
MUSIQUE_FIRST_ID = 900_000_001  # far above the Hive space's real page ids


def passage_pages(corpus_file: Path) -> dict[tuple[str, str], str]:
    """(title, text) of each MuSiQue passage → the id of its page (``page:900000001`` …),
    whitespace trimmed: how a question's supporting paragraphs are found among the pages."""
    passages = json.loads(corpus_file.read_text())
    return {(p["title"].strip(), p["text"].strip()): f"page:{MUSIQUE_FIRST_ID + number}" for number, p in enumerate(passages)}


NAV_OPS = ("children", "subtree", "resolve_path")


@dataclass(frozen=True)
class Navigation:
    """What a navigation question asks the navigator: the children of a page, its subtree
    ``depth`` levels down (in tree order, the page itself left out), or the page a title path
    names. The gold pages are the exact answer, in order."""

    op: str  # one of NAV_OPS
    node: str  # a page id ("page:27362076"); for resolve_path, a title path
    depth: int = 2  # subtree only


@dataclass(frozen=True)
class Question:
    id: str
    kind: str  # semantic, multihop, navigation (Hive); 2hop, 3hop, 4hop (MuSiQue)
    question: str
    gold: tuple[str, ...]  # page ids, e.g. "page:27362069"
    nav: Navigation | None = None  # navigation questions with a ``nav`` object
    answer: str = ""  # the reference answer, for the judge (empty: not judged)

    @property
    def searchable(self) -> bool:
        """Navigation questions ask for tree positions: the navigator answers them, not search."""
        return self.kind != "navigation"


def load_dataset(path: Path) -> list[Question]:
    """The questions in ``path``; a clear error naming the file and the line when it is malformed."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InvalidArgument(f"cannot read the dataset {path}: {exc.strerror or exc}") from exc
    if text.lstrip().startswith("["):
        return _musique(path, text)
    return _jsonl(path, text)


def _jsonl(path: Path, text: str) -> list[Question]:
    questions = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            gold = tuple(f"page:{p}" for p in row["gold_pages"])
            nav = _navigation(row["nav"]) if row.get("nav") else None
            questions.append(Question(str(row["id"]), str(row.get("kind", "semantic")), str(row["question"]), gold, nav, str(row.get("answer") or "")))
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidArgument(f"{path}:{number}: not a question with id, question and gold_pages ({exc})") from exc
        if not gold:
            raise InvalidArgument(f"{path}:{number}: question {row['id']!r} has no gold_pages")
    if not questions:
        raise InvalidArgument(f"{path}: no questions")
    return questions


def _navigation(nav: dict[str, object]) -> Navigation:
    op = str(nav["op"])
    if op not in NAV_OPS:
        raise ValueError(f"nav op {op!r} is none of {', '.join(NAV_OPS)}")
    node = str(nav["node"])
    return Navigation(op, node if op == "resolve_path" else f"page:{node}", int(nav.get("depth", 2)))  # type: ignore[call-overload]


def _musique(path: Path, text: str) -> list[Question]:
    corpus = path.parent / "corpus.json"
    if not corpus.is_file():
        raise InvalidArgument(f"{path} is in the MuSiQue format; its passages are read from {corpus}, which is missing")
    pages = passage_pages(corpus)
    questions = []
    try:
        rows = json.loads(text)
        for row in rows:
            supporting = [(p["title"].strip(), p["paragraph_text"].strip()) for p in row["paragraphs"] if p.get("is_supporting")]
            missing = [title for title, body in supporting if (title, body) not in pages]
            if missing:
                raise InvalidArgument(f"{path}: question {row['id']!r} is supported by passages not in {corpus}: {missing}")
            hops = len(row.get("question_decomposition") or supporting)
            questions.append(Question(str(row["id"]), f"{hops}hop", str(row["question"]), tuple(pages[s] for s in supporting), answer=str(row.get("answer") or "")))
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidArgument(f"{path}: not a list of MuSiQue questions ({exc})") from exc
    if not questions:
        raise InvalidArgument(f"{path}: no questions")
    return questions
