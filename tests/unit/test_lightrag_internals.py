"""How the adapter has LightRAG merge chunk ids and keep the vectors of its file stores."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from retrievers import lightrag_adapter
from retrievers.lightrag_adapter import GRAPH_FIELD_SEP

merge_source_ids = lightrag_adapter._merge_source_ids  # LightRAG's own

IDS = ["page:1-chunk-000", " page:1-chunk-001", "page:2-chunk-000 ", "", "  ", "page:1-chunk-000", f"page:3-chunk-000{GRAPH_FIELD_SEP}page:3-chunk-001", 7, None]


def test_chunk_ids_merge_as_lightrag_merges_them(caplog: pytest.LogCaptureFixture) -> None:
    assert lightrag_adapter._lightrag_operate.merge_source_ids is lightrag_adapter._merge_plain_source_ids  # what LightRAG's merges call
    caplog.set_level(logging.ERROR)  # LightRAG warns of each id that is not a string
    rng = random.Random(5)
    for _ in range(3_000):
        old, new = ([rng.choice(IDS) for _ in range(rng.randint(0, 6))] if rng.random() > 0.1 else None for _ in range(2))
        assert lightrag_adapter._merge_plain_source_ids(old, new) == merge_source_ids(old, new), (old, new)
    # an iterator is read once, whichever path takes it
    joined = iter(["page:1-chunk-000", f"page:2-chunk-000{GRAPH_FIELD_SEP}page:2-chunk-001"])
    assert lightrag_adapter._merge_plain_source_ids(joined, iter(["page:1-chunk-000"])) == [
        "page:1-chunk-000", "page:2-chunk-000", "page:2-chunk-001"
    ]


def test_file_vector_stores_keep_their_rows_vectors_stored_not_compressed() -> None:
    import zlib

    import numpy as np

    vector = np.linspace(-1, 1, 512, dtype=np.float32).astype(np.float16).tobytes()
    kept = lightrag_adapter._lightrag_nano.zlib.compress(vector)
    assert kept == zlib.compress(vector, 0) != zlib.compress(vector)  # stored, in zlib's format
    assert lightrag_adapter._lightrag_nano.zlib.decompress(kept) == vector


def _graph_read_back(write: Callable[[Any, str], None], graph: Any, path: Path) -> tuple[list[Any], list[Any], dict[str, Any]]:
    import networkx as nx

    write(graph, str(path))
    read = nx.read_graphml(str(path))
    return list(read.nodes(data=True)), list(read.edges(data=True)), read.graph


def test_the_graph_file_reads_back_as_the_graph_written(tmp_path: Path) -> None:
    import networkx as nx
    import numpy as np

    graph = nx.Graph()
    odd = 'a & b < c > d "quoted" \'single\' \r\n\tend  é 中 '
    graph.add_node("Hive", entity_id="Hive", description=odd, created_at=1796589996, truncate="", flag=True)
    graph.add_node('Name "with" <markup> &\nlines\r', entity_id="x", created_at=-3)
    graph.add_node("Lone")
    graph.add_edge("Hive", 'Name "with" <markup> &\nlines\r', weight=1.5, description=odd, keywords="a,b")
    graph.add_edge("Lone", "Hive", weight=2.0)
    # The same graph, every character kept (networkx's own writer keeps "\r" only with lxml).
    ours = _graph_read_back(lightrag_adapter._write_graphml, graph, tmp_path / "ours.graphml")
    assert ours == (list(graph.nodes(data=True)), list(graph.edges(data=True)), {"node_default": {}, "edge_default": {}})

    # What it does not cover goes to networkx, which reads back the same.
    graph.nodes["Lone"]["score"] = np.float32(0.5)
    assert _graph_read_back(lightrag_adapter._write_graphml, graph, tmp_path / "numpy.graphml")[0][2] == ("Lone", {"score": 0.5})
    graph.nodes["Lone"]["score"] = "text"  # one name, two types
    graph.nodes["Hive"]["score"] = 3
    assert _graph_read_back(lightrag_adapter._write_graphml, graph, tmp_path / "mixed.graphml") == _graph_read_back(
        nx.write_graphml, graph, tmp_path / "mixed-networkx.graphml"
    )
    del graph.nodes["Hive"]["score"]
    graph.nodes["Lone"]["score"] = "bad \x01 byte"  # XML cannot hold it: refused, nothing written
    with pytest.raises(ValueError, match="GraphML cannot"):
        lightrag_adapter._write_graphml(graph, str(tmp_path / "bad.graphml"))
    assert not (tmp_path / "bad.graphml").exists()
    # LightRAG's graph storage writes through it.
    assert lightrag_adapter.NetworkXStorage.write_nx_graph is lightrag_adapter._write_nx_graph


def test_the_first_batches_are_smaller_and_every_document_goes_in_once_in_order() -> None:
    from retrievers.base import IndexDocument

    docs = [IndexDocument(f"page:{n}", "text") for n in range(200)]
    slices = lightrag_adapter._slices(docs, 48)
    assert [len(s) for s in slices] == [6, 12, 24, 48, 48, 48, 14]
    assert [doc for s in slices for doc in s] == docs
    assert [len(s) for s in lightrag_adapter._slices(docs[:5], 4)] == [1, 2, 2]  # 4 // 8 is none
    assert [len(s) for s in lightrag_adapter._slices(docs[:3], 1)] == [1, 1, 1]
    assert lightrag_adapter._slices([], 48) == []


def test_record_delimiters_are_repaired_as_lightrag_repairs_them_and_only_where_garbled(monkeypatch: pytest.MonkeyPatch) -> None:
    from lightrag import operate
    from lightrag.utils import fix_tuple_delimiter_corruption as lightrags

    assert operate.fix_tuple_delimiter_corruption is lightrag_adapter._fix_delimiters_where_garbled
    delimiter = "<|#|>"
    pieces = [delimiter, delimiter, "<", "|", ">", "#", "\\", ":", "a", "B", " ", "x y", "<|", "|>", "##", "<|#", "#|>"]
    rng = random.Random(11)
    for _ in range(20_000):
        record = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert lightrag_adapter._fix_delimiters_where_garbled(record, "#", delimiter) == lightrags(record, "#", delimiter), record
    assert lightrag_adapter._fix_delimiters_where_garbled("a<|#||>b", "#", delimiter) == "a<|#|>b"

    repaired: list[str] = []
    monkeypatch.setattr(lightrag_adapter, "_fix_tuple_delimiter_corruption", lambda record, *_args: repaired.append(record) or record)
    lightrag_adapter._fix_delimiters_where_garbled("entity<|#|>Apache Hive<|#|>product<|#|>Hive serves #queries: fast.", "#", delimiter)
    assert repaired == []  # intact: the patterns are not tried
    for garbled in ("entity<|#|>Hive<|##|>product", "entity<|#|>Hive|#|>product", "a <b> c<|#|>d", "x<|#|>y", "x<|X|>y"):
        lightrag_adapter._fix_delimiters_where_garbled(garbled, "X" if "X" in garbled else "#", delimiter)
    assert repaired == ["entity<|#|>Hive<|##|>product", "entity<|#|>Hive|#|>product", "a <b> c<|#|>d", "x<|X|>y"]
