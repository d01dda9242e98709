"""The size of a saved untrained pipeline (issue 62, item 4), and whether the loaded copy links
as the one that was saved.

Not a test. An untrained ``arbo_entity_linker`` over ``--kb`` (default: HPO's, as
``opposite_probes.py`` builds it) in a blank English pipeline is saved with ``nlp.to_disk``;
the sizes of its files and of its `spacy package` sdist are recorded, then the saved folder
is loaded (``spacy.load``) and
links the gold mentions of ``--corpus`` (default GSC+ test, ``training/gsc_test.spacy``): the
share whose ``kb_id_`` and candidates equal the saving pipeline's. Writes
``benchmarks/results/pipeline-size-<name>.json``. Usage::

    OMP_NUM_THREADS=2 python benchmarks/pipeline_size.py --name hpo-untrained
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import run_stamp, untrained_linker, write_result

MB = 1024 * 1024


def folder_sizes(folder: Path) -> dict[str, float]:
    """MB per top-level entry of a component folder (a folder's files summed)."""
    return {p.name: round((sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
                           if p.is_dir() else p.stat().st_size) / MB, 2)
            for p in sorted(folder.iterdir())}


def links(nlp, gold_docs) -> list[tuple]:
    """Per gold mention: its kb_id_ and candidates as ``nlp`` links the gold spans."""
    from spacy_arboel.spacy_data.readers import with_gold_mentions

    docs = [with_gold_mentions(nlp.make_doc(g.text), g) for g in gold_docs]
    return [(e.kb_id_, tuple((i, round(p, 6)) for i, p in e._.kb_candidates))
            for doc in nlp.pipe(docs) for e in doc.ents]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="hpo-untrained")
    parser.add_argument("--kb", type=Path, default=Path("training/hpo.jsonl"))
    parser.add_argument("--corpus", type=Path, default=Path("training/gsc_test.spacy"))
    args = parser.parse_args()
    import spacy
    from spacy.tokens import DocBin

    from spacy_arboel.kb import KnowledgeBase
    from spacy_arboel.kb.build import build_kb
    from spacy_arboel.kb.obo import HPO
    from spacy_arboel.kb.readers import KBSource

    if not args.kb.is_file():
        build_kb([KBSource("obo", HPO.path())])[0].to_jsonl(args.kb)
    nlp, setup = untrained_linker(KnowledgeBase.from_jsonl(args.kb))
    gold = list(DocBin().from_disk(args.corpus).get_docs(nlp.vocab))
    expected = links(nlp, gold)
    with tempfile.TemporaryDirectory() as folder:
        saved = Path(folder) / "pipeline"
        nlp.to_disk(saved)
        sizes = folder_sizes(saved / "arbo_entity_linker")
        total = round(sum(f.stat().st_size for f in saved.rglob("*") if f.is_file()) / MB, 1)
        found = links(spacy.load(saved), gold)
        # the package a user ships (`spacy package`, an sdist)
        subprocess.run([sys.executable, "-m", "spacy", "package", str(saved), folder,
                        "--name", "size_check", "--version", "0.0.1", "--force"],
                       check=True, capture_output=True)
        package = next(Path(folder).glob("*/dist/*.tar.gz"))
        package_mb = round(package.stat().st_size / MB, 1)
    same = sum(a == b for a, b in zip(expected, found, strict=True))
    result = {
        "name": f"pipeline-size-{args.name}", "kb": str(args.kb), "corpus": str(args.corpus),
        "total_mb": total, "package_mb": package_mb, "component_mb": sizes,
        "mentions": len(expected),
        "same_links_after_loading": same, "setup_s": round(setup, 1),
        **run_stamp(),
    }
    print(result)
    write_result(result)


if __name__ == "__main__":
    main()
