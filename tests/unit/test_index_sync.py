from core.models import Page
from pipeline.sinks.semantic import Manifest, sync_index
from retrievers.fake_index import FakeSemanticIndex


def page(pid: str, text: str) -> Page:
    return Page(page_id=pid, space_key="S", title=f"T{pid}", parent_id=None, position=0, url="u", markdown=text)


async def test_only_new_changed_and_removed_pages_cost_work(tmp_path):
    index, manifest = FakeSemanticIndex(), Manifest(tmp_path / "manifest.json")
    pages = [page("1", "alpha"), page("2", "beta"), page("3", "gamma")]
    progress: list[int] = []
    first = await sync_index(index, manifest, pages, on_progress=progress.append)
    assert (first.indexed, first.deleted, first.unchanged) == (3, 0, 0)
    assert sum(progress) == 3 and len(progress) == 3  # the manifest follows each document the fake reports
    assert manifest.load().keys() == {"page:1", "page:2", "page:3"}
    again = await sync_index(index, manifest, pages)
    assert (again.indexed, again.deleted, again.unchanged) == (0, 0, 3)
    index.calls.clear()
    changed = await sync_index(index, manifest, [page("1", "alpha v2"), pages[1]])
    assert (changed.indexed, changed.deleted, changed.unchanged) == (1, 1, 1)
    assert index.calls == [("upsert", ["page:1"]), ("delete", ["page:3"])]  # one pass for the change and the removal
    assert manifest.load().keys() == {"page:1", "page:2"}
    assert await index.indexed_doc_ids() == {"page:1", "page:2"}
    assert (await index.query("v2", 5)).chunks[0].doc_id == "page:1"


async def test_a_page_the_index_lost_is_indexed_again(tmp_path):
    index, manifest = FakeSemanticIndex(), Manifest(tmp_path / "manifest.json")
    await sync_index(index, manifest, [page("1", "alpha")])
    await index.delete(["page:1"])  # e.g. a run interrupted between the index and the manifest
    redo = await sync_index(index, manifest, [page("1", "alpha")])
    assert redo.indexed == 1 and await index.indexed_doc_ids() == {"page:1"}
