"""scispaCy's TF-IDF candidate generator over our KB, as a worker of ``fast_linking.py``.

Runs in its own environment (scispaCy pins numpy < 2): ``python -m venv .venv-scispacy &&
.venv-scispacy/bin/pip install scispacy==0.6.2``. It does not import spacy_arboel.

The index is built in memory the way ``scispacy.candidate_generation.create_tfidf_ann_index``
builds it (char-3-gram TF-IDF over every alias, min_df 10, nmslib HNSW M=100,
efConstruction=2000, cosine over sparse vectors): that function itself refuses to run with
scipy >= 1.11 (it saves float16 sparse vectors), which Python 3.11 needs. The built pieces
are saved and loaded back with scispaCy's own loader (``LinkerPaths.load``) to time a load as
its users see it. Mentions are linked one document at a time, as ``EntityLinker`` does, with
``k`` alias neighbours (30 in ``EntityLinker``; several aliases may map to one concept, so
recall@64 needs more, e.g. 256); a mention's concepts are ranked by their best alias
similarity. nmslib searches with all cores (``knnQueryBatch`` is called without
``num_threads``), 2 on the benchmark machine.

``build`` writes the index folder (and build.json: seconds, peak RSS); ``link`` (a fresh
process) loads it, links, and writes JSON: load seconds, peak RSS, mentions/s and each
mention's candidate ids.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(kb, out: Path, threads: int) -> float:
    """Build and save the TF-IDF vectorizer, alias list and HNSW index; returns seconds."""
    import joblib
    import nmslib
    import numpy
    import scipy.sparse
    from sklearn.feature_extraction.text import TfidfVectorizer

    start = time.perf_counter()
    aliases = list(kb.alias_to_cuis.keys())
    vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 3), min_df=10,
                                 dtype=numpy.float32)
    tfidfs = vectorizer.fit_transform(aliases)
    non_empty = numpy.asarray(tfidfs.sum(axis=1) != 0).reshape(-1)
    aliases = [a for a, keep in zip(aliases, non_empty, strict=True) if keep]
    tfidfs = tfidfs[non_empty]
    index = nmslib.init(method="hnsw", space="cosinesimil_sparse",
                        data_type=nmslib.DataType.SPARSE_VECTOR)
    index.addDataPointBatch(tfidfs)
    index.createIndex({"M": 100, "indexThreadQty": threads, "efConstruction": 2000,
                       "post": 0}, print_progress=False)
    seconds = time.perf_counter() - start
    joblib.dump(vectorizer, out / "tfidf_vectorizer.joblib")
    (out / "concept_aliases.json").write_text(json.dumps(aliases))
    # scispaCy saves these as float16, which scipy >= 1.11 cannot; its loader casts to float32
    scipy.sparse.save_npz(out / "tfidf_vectors_sparse.npz", tfidfs)
    index.saveIndex(str(out / "nmslib_index.bin"))
    return seconds


def read_kb(path: str):
    """Our KB JSONL as scispaCy's KnowledgeBase (description as definition)."""
    from scispacy.linking_utils import Entity, KnowledgeBase

    with open(path) as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    return KnowledgeBase([Entity(r["id"], r["name"], r.get("aliases", []), r.get("types", []),
                                 r.get("description") or None) for r in rows])


def link(args: argparse.Namespace) -> None:
    """Load the built pieces with scispaCy's loader, link every doc's mentions once per k,
    write JSON."""
    start_all = time.perf_counter()
    from scispacy.candidate_generation import CandidateGenerator, LinkerPaths

    imported = time.perf_counter()
    folder = Path(args.index)
    paths = LinkerPaths(ann_index=str(folder / "nmslib_index.bin"),
                        tfidf_vectorizer=str(folder / "tfidf_vectorizer.joblib"),
                        tfidf_vectors=str(folder / "tfidf_vectors_sparse.npz"),
                        concept_aliases_list=str(folder / "concept_aliases.json"))
    generator = CandidateGenerator(ann_index=paths.get_ann_index(ef_search=200),
                                   tfidf_vectorizer=paths.get_tfidf_vectorizer(),
                                   ann_concept_aliases_list=paths.get_concept_aliases(),
                                   kb=read_kb(args.kb))
    loaded = time.perf_counter()
    rss_load = peak_rss_mb()
    docs = json.loads(Path(args.mentions).read_text())["docs"]
    n = sum(len(texts) for texts in docs)
    runs = []
    for k in args.k:
        start = time.perf_counter()
        batches = [generator(texts, k) if texts else [] for texts in docs]
        seconds = time.perf_counter() - start
        candidates = []
        for batch in batches:
            for found in batch:
                ranked = sorted(found, key=lambda c: -max(c.similarities))
                candidates.append([c.concept_id for c in ranked][:args.keep])
        runs.append({"k": k, "link_seconds": round(seconds, 2),
                     "mentions_per_s": round(n / seconds, 1), "candidates": candidates})
    Path(args.output).write_text(json.dumps({
        "import_seconds": round(imported - start_all, 2),
        "load_seconds": round(loaded - imported, 2), "rss_after_load_mb": round(rss_load),
        "peak_rss_mb": round(peak_rss_mb()), "mentions": n, "runs": runs}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["build", "link"])
    parser.add_argument("kb", help="our KB JSONL (id, name, aliases, description, types)")
    parser.add_argument("index", help="folder of the built index (written by build)")
    parser.add_argument("--mentions", help="link: JSON from fast_linking.py (docs of texts)")
    parser.add_argument("--output", help="link: where the JSON result goes")
    parser.add_argument("--k", type=int, action="append", default=[],
                        help="alias neighbours per mention (repeatable; default 30, "
                             "scispaCy's EntityLinker default)")
    parser.add_argument("--keep", type=int, default=64, help="concepts kept per mention")
    parser.add_argument("--threads", type=int, default=2, help="index-building threads")
    args = parser.parse_args()
    args.k = args.k or [30]
    if args.step == "build":
        Path(args.index).mkdir(parents=True, exist_ok=True)
        seconds = build(read_kb(args.kb), Path(args.index), args.threads)
        (Path(args.index) / "build.json").write_text(json.dumps(
            {"build_seconds": round(seconds, 1), "peak_rss_mb": round(peak_rss_mb())}))
    else:
        link(args)


if __name__ == "__main__":
    main()
