"""bench/corpus.py's pure parts: document splitting and profile selection."""

from corpus_fixture import _corpus as corpus  # bench/corpus.py


def test_split_doc_rejoins_and_respects_limit():
    text = "".join(f"line {i} " + "é" * (i % 50) + "\n" for i in range(3000))
    pieces = corpus.split_doc(text, max_bytes=4096)
    assert "".join(pieces) == text
    assert len(pieces) > 1
    assert all(len(p.encode("utf-8")) <= 4096 for p in pieces)
    assert all(p.endswith("\n") for p in pieces)  # cut at line boundaries only


def test_split_doc_keeps_long_line_whole():
    long_line = "x" * 10_000
    assert corpus.split_doc("a\n" + long_line + "\nb\n", max_bytes=4096) == [
        "a\n",
        long_line + "\n",
        "b\n",
    ]


def test_select_profile_dedups_and_orders_by_hash():
    docs = {s.name: [] for s in corpus.SOURCES}
    docs["python-doc"] = [("python-doc:a#0", "same"), ("python-doc:b#0", "other")]
    docs["man-ja"] = [("man-ja:c#0", "same"), ("man-ja:d#0", "日本語")]
    out = corpus.select_profile(docs, "bench")
    texts = [t for _, t in out]
    assert sorted(texts) == sorted(["same", "other", "日本語"])  # duplicate dropped
    assert ("python-doc:a#0", "same") in out  # first source in SOURCES order wins
    assert texts == sorted(texts, key=corpus._text_key)
