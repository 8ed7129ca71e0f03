
import pytest

from core.errors import SourceError
from devstack.atlassian.export import HiveExportSource, parse_space_index, to_markdown

from tests.conftest import CORPUS


@pytest.fixture(scope="module")
async def pages():
    return await HiveExportSource(CORPUS).pages("HIVE")


async def test_all_305_pages_load_with_the_tree(pages):
    assert len(pages) == 305
    assert sum(p.parent_id is None for p in pages) == 66
    seen: set[str] = set()
    for p in pages:  # parents before children
        assert p.parent_id is None or p.parent_id in seen
        seen.add(p.page_id)


async def test_children_keep_index_order(pages):
    children = [p.page_id for p in sorted(pages, key=lambda p: p.position) if p.parent_id == "27362076"]
    assert children == ["55156221", "34835119"]


async def test_titles_and_links_are_clean(pages):
    home = next(p for p in pages if p.page_id == "27362069")
    assert home.title == "Home"
    design = next(p for p in pages if p.page_id == "27362075")
    assert "{{<" not in design.markdown and "(page:27362067)" in design.markdown


def test_depth_jump_in_index_is_an_error():
    with pytest.raises(SourceError, match="skips a level"):
        parse_space_index('* [A]({{< ref "a_1" >}})\n\t\t- [B]({{< ref "b_2" >}})\n')


def test_page_without_front_matter_is_an_error():
    with pytest.raises(SourceError, match="front matter"):
        to_markdown("# no front matter\n")


async def test_unknown_space_and_missing_corpus_are_errors(tmp_path):
    with pytest.raises(SourceError, match="no space"):
        await HiveExportSource(CORPUS).pages("NOPE")
    with pytest.raises(SourceError, match="cannot read the space index"):
        await HiveExportSource(tmp_path).pages("HIVE")


def test_display_urls_of_pages_in_the_space_become_page_links():
    from devstack.atlassian.export import link_titles

    text = (
        "[DDL](https://cwiki.apache.org/confluence/display/Hive/LanguageManual+DDL#LanguageManualDDL-Create) "
        "and https://cwiki.apache.org/confluence/display/Hive/Design%20Docs and "
        "[gone](https://cwiki.apache.org/confluence/display/Hive/No+Such+Page)"
    )
    linked = link_titles(text, {"LanguageManual DDL": "27362034", "Design Docs": "27362075"})
    assert linked == "[DDL](page:27362034#LanguageManualDDL-Create) and page:27362075 and " + text.split(" and ")[-1]
