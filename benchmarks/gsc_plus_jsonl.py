"""GSC+ (the HPO phenotype corpus, ``../shared/data/hpo_gsc_plus/``) as the JSONL spans that
``convert`` reads: one document a line, ``{"id", "text", "spans": [{"start", "end", "label",
"kb_id"}]}``, every mention labelled ``Phenotype``. Its ids follow an older HPO release:
``evaluate`` resolves them through the KB's alternate ids. Usage::

    python benchmarks/gsc_plus_jsonl.py ../shared/data/hpo_gsc_plus/GSCplus_test_gold.tsv \\
        training/gsc_test.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def gsc_documents(path: Path) -> list[dict]:
    """The blocks of a GSC+ file (PMID line, text line, ``start<TAB>end<TAB>text<TAB>id``
    lines; blocks apart by a blank line) as JSONL documents."""
    documents = []
    for block in path.read_text(encoding="utf8").strip().split("\n\n"):
        lines = block.split("\n")
        spans = []
        for line in lines[2:]:
            start, end, _, hpo_id = line.split("\t")
            spans.append({"start": int(start), "end": int(end), "label": "Phenotype",
                          "kb_id": hpo_id.strip()})
        documents.append({"id": lines[0].strip(), "text": lines[1], "spans": spans})
    return documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("output", type=Path)
    args = parser.parse_args()
    documents = gsc_documents(args.source)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf8")
    print(f"{len(documents)} documents, {sum(len(d['spans']) for d in documents)} mentions "
          f"-> {args.output}")


if __name__ == "__main__":
    main()
