"""How long a linker takes to follow an edited KB (issue 62, item 5: five aliases added to
HPO re-index in at most 2 s), and whether it links as one rebuilt from scratch.

Not a test. An untrained ``arbo_entity_linker`` over ``--kb`` (default HPO's, as
``pipeline_size.py`` builds it) is saved; the edited KB is ``build-kb --jsonl KB --aliases
FILE`` (``--aliases``, default ``benchmarks/hpo_five_aliases.tsv``). Three ways to link
with it are timed: ``swap_kb`` on the loaded pipeline, ``spacy.load`` with the edited KB as
``kb_path`` (both re-embed only the rows of new text), and a full rebuild (the loaded
pipeline's index built again from every row: what each of them replaced). Each links the
gold mentions of ``--corpus`` (default GSC+ test) and the edited aliases themselves; the
links (ids, NIL included, and candidates) are compared with the full rebuild's. Writes
``benchmarks/results/kb-edit-<name>.json``. ``--component arbo_linker``: an untrained
``arbo_linker`` instead, which links the corpus's raw texts (and the five aliases as texts)
and brings up to date both its entity index and its dictionary's names index. Usage::

    OMP_NUM_THREADS=2 python benchmarks/kb_edit.py --name hpo-five-aliases
    OMP_NUM_THREADS=2 python benchmarks/kb_edit.py --component arbo_linker \
        --name hpo-five-aliases-arbo-linker
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import run_stamp, untrained_linker, write_result
from pipeline_size import links

LINKERS = ("arbo_entity_linker", "arbo_linker")


def ready_times(nlp, linker: str) -> dict[str, float]:
    """Seconds to bring the linker up to date: ``arbo_entity_linker``'s index, then the KB's
    NIL threshold; ``arbo_linker``'s entity index and its dictionary's names index."""
    pipe = nlp.get_pipe(linker)
    start = time.perf_counter()
    if linker == "arbo_linker":
        pipe.ensure_ready()
        return {"index_s": round(time.perf_counter() - start, 2)}
    pipe.retriever.entities.ensure_index()
    indexed = time.perf_counter()
    pipe.nil_threshold()
    return {"index_s": round(indexed - start, 2),
            "threshold_s": round(time.perf_counter() - indexed, 2)}


def full_rebuild(pipe, linker: str) -> None:
    """Make ``pipe`` (given its new KB) embed every row again: what an edit replaces."""
    if linker == "arbo_linker":
        pipe.reader.entities.changed()
        pipe.dictionary = None
    else:
        pipe.retriever.entities.changed()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="hpo-five-aliases")
    parser.add_argument("--kb", type=Path, default=Path("training/hpo.jsonl"))
    parser.add_argument("--aliases", type=Path,
                        default=Path("benchmarks/hpo_five_aliases.tsv"))
    parser.add_argument("--corpus", type=Path, default=Path("training/gsc_test.spacy"))
    parser.add_argument("--component", choices=LINKERS, default=LINKERS[0],
                        help="arbo_linker: raw text (the corpus's texts) and both its indexes")
    args = parser.parse_args()
    linker = args.component
    import spacy
    from spacy.tokens import DocBin

    from spacy_arboel.kb import KnowledgeBase
    from spacy_arboel.kb.alias_file import read_alias_file
    from spacy_arboel.kb.build import build_kb
    from spacy_arboel.kb.obo import HPO
    from spacy_arboel.kb.readers import KBSource
    from spacy_arboel.pipeline.knowledge_bases import swap_kb

    if not args.kb.is_file():
        build_kb([KBSource("obo", HPO.path())])[0].to_jsonl(args.kb)
    edited, report = build_kb([KBSource("jsonl", args.kb)], alias_files=[args.aliases])
    nlp, setup = untrained_linker(KnowledgeBase.from_jsonl(args.kb), linker)
    gold = list(DocBin().from_disk(args.corpus).get_docs(nlp.vocab))
    added = [alias for texts in read_alias_file(args.aliases).values() for alias in texts]

    def linked(pipeline) -> list[tuple]:
        if linker == "arbo_linker":  # raw text: each span found and its candidates
            texts = [g.text for g in gold] + added
            return [(f"{e.start_char}:{e.end_char}:{e.kb_id_}", e._.kb_candidates[:3])
                    for doc in pipeline.pipe(texts) for e in doc.spans["arbo_concepts"]]
        return links(pipeline, gold) + [(doc.ents[0].kb_id_, doc.ents[0]._.kb_candidates[:3])
                                        for doc in pipeline.pipe(
                                            _whole_text_mentions(pipeline, added))]

    times = {}
    with tempfile.TemporaryDirectory() as folder:
        saved, edited_path = Path(folder) / "pipeline", Path(folder) / "edited.jsonl"
        nlp.to_disk(saved)
        edited.to_jsonl(edited_path)
        del nlp
        # swap_kb on a loaded pipeline
        swapped = spacy.load(saved)
        swapped.get_pipe(linker).ensure_ready()
        start = time.perf_counter()
        swap_kb(swapped, edited, linker)
        times["swap_kb_call"] = {"s": round(time.perf_counter() - start, 2)}
        times["swap_kb"] = ready_times(swapped, linker)
        by_swap = linked(swapped)
        thresholds = {"swap_kb": _threshold(swapped, linker)}
        # and back to the KB it was saved with, in the same session: the threshold's KB
        # names are encoded already
        swap_kb(swapped, KnowledgeBase.from_jsonl(args.kb), linker)
        times["swap_back"] = ready_times(swapped, linker)
        del swapped
        # spacy.load with the edited KB as kb_path
        start = time.perf_counter()
        loaded = spacy.load(saved, config={f"components.{linker}.kb_path": str(edited_path)})
        times["load_with_kb_path"] = {"load_s": round(time.perf_counter() - start, 2),
                                      **ready_times(loaded, linker)}
        by_load = linked(loaded)
        thresholds["load_with_kb_path"] = _threshold(loaded, linker)
        del loaded
        # a full rebuild: the loaded pipeline's index built from every row again
        full = spacy.load(saved)
        full.get_pipe(linker).set_kb(edited)
        full_rebuild(full.get_pipe(linker), linker)
        times["full_rebuild"] = ready_times(full, linker)
        expected = linked(full)
        thresholds["full_rebuild"] = _threshold(full, linker)
    compared = {name: _compare(expected, found)
                for name, found in (("swap_kb", by_swap), ("load_with_kb_path", by_load))}
    result = {
        "name": f"kb-edit-{args.name}", "component": linker, "kb": str(args.kb),
        "aliases": str(args.aliases),
        "corpus": str(args.corpus), "entities": len(edited),
        "aliases_added": report.file_aliases, "setup_s": round(setup, 1),
        "times": times, "nil_thresholds": thresholds, "mentions": len(expected),
        "against_full_rebuild": compared,
        "added_aliases_linked": ([e[0] for e in expected[-len(added):]]
                                 if linker == "arbo_entity_linker" else None),
        **run_stamp(),
    }
    print(result)
    write_result(result)


def _threshold(nlp, linker: str) -> float | None:
    """The NIL threshold in force: the KB's (``arbo_entity_linker``), or the setting's."""
    pipe = nlp.get_pipe(linker)
    return pipe.nil_threshold() if linker == "arbo_entity_linker" else pipe.settings.threshold


def _compare(expected: list[tuple], found: list[tuple]) -> dict:
    """How many mentions get the rebuilt pipeline's link, and its candidates in its order,
    and the largest difference of a candidate's score (rows embedded in other batches)."""
    same_link = sum(a[0] == b[0] for a, b in zip(expected, found, strict=True))
    same_ranking = sum([i for i, _ in a[1]] == [i for i, _ in b[1]]
                       for a, b in zip(expected, found, strict=True))
    gap = max((abs(x[1] - y[1]) for a, b in zip(expected, found, strict=True)
               for x, y in zip(a[1], b[1], strict=True)), default=0.0)
    return {"same_link": same_link, "same_candidate_order": same_ranking,
            "max_score_difference": gap}


def _whole_text_mentions(nlp, texts: list[str]):
    """Docs of ``texts``, each one mention over its whole text (label ENTITY)."""
    for text in texts:
        doc = nlp.make_doc(text)
        doc.ents = [doc.char_span(0, len(text), label="ENTITY")]
        yield doc


if __name__ == "__main__":
    main()
