"""Scoring without gold data says what is missing and exits non-zero (issue 14, item 8)."""

import pytest
import spacy
from spacy.tokens import DocBin

SENTENCES = [
    ("Aspirin induced cough in patients.", [(0, 7, "Chemical", "D001241"),
                                            (16, 21, "Disease", "D003371")]),
    ("Fever was caused by aspirin.", [(0, 5, "Disease", "D005334"),
                                      (20, 27, "Chemical", "D001241")]),
]
# corpus kind -> the error it gives
MISSING = {"empty": "E042", "no_ents": "E043", "no_ids": "E044"}


def _docs(kind: str) -> list:
    """Gold docs ("gold"), none ("empty"), docs without ents or with ents without kb_id."""
    nlp = spacy.blank("xx")
    docs = []
    for text, ents in [] if kind == "empty" else SENTENCES:
        doc = nlp.make_doc(text)
        if kind != "no_ents":
            doc.ents = [doc.char_span(s, e, label=label, kb_id="" if kind == "no_ids" else kb)
                        for s, e, label, kb in ents]
        docs.append(doc)
    return docs


@pytest.fixture
def corpora(tmp_path):
    for kind in ("gold", *MISSING):
        DocBin(docs=_docs(kind)).to_disk(tmp_path / f"{kind}.spacy")
    return tmp_path


def _fails_with(result, code: str) -> None:
    assert result.exit_code != 0
    assert f"[{code}]" in result.output, result.output


COMMANDS = [("evaluate",), ("evaluate-coref",), ("tune-coref",), ("evaluate-e2e",),
            ("evaluate-rerank",), ("tune-e2e",), ("tune-nil",)]


@pytest.mark.parametrize("kind", MISSING)
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_commands_check_the_corpus_before_loading_the_model(corpora, command, kind, cli):
    # the model does not exist: the check must come first
    _fails_with(cli(*command, corpora / "no_model", corpora / f"{kind}.spacy"),
                MISSING[kind])


def test_tune_nil_checks_the_test_corpus_too(corpora, cli):
    _fails_with(cli("tune-nil", corpora / "no_model", corpora / "gold.spacy",
                    "--test", corpora / "no_ids.spacy"), "E044")


@pytest.fixture
def pipeline(saved_linker):
    return saved_linker / "pipeline"


def test_a_trained_pipeline_is_not_scored_without_gold_ids(pipeline, corpora, cli):
    output = corpora / "m.json"
    _fails_with(cli("evaluate", pipeline, corpora / "no_ids.spacy", "--output", output),
                "E044")
    _fails_with(cli("evaluate-coref", pipeline, corpora / "no_ids.spacy",
                    "--output", output), "E044")
    _fails_with(cli("tune-coref", pipeline, corpora / "no_ents.spacy", "--output", output),
                "E043")
    assert not output.exists()


def test_evaluate_e2e_refuses_a_pipeline_that_finds_no_mention(corpora, cli):
    spacy.blank("xx").to_disk(corpora / "blank")  # sets no ents
    output = corpora / "e2e.json"
    _fails_with(cli("evaluate-e2e", corpora / "blank", corpora / "gold.spacy",
                    "--output", output), "E045")
    assert not output.exists()


def _library_calls():
    from spacy.training import Example

    from spacy_arboel.evaluation.coref_eval import evaluate_coref, tune_coref
    from spacy_arboel.evaluation.end_to_end_eval import evaluate_end_to_end, tune_threshold
    from spacy_arboel.evaluation.nil import nil_scores
    from spacy_arboel.evaluation.pipeline_eval import evaluate_linker
    from spacy_arboel.evaluation.rerank_eval import evaluate_reranker

    nlp = spacy.blank("xx")  # the checks come before any component is needed

    def examples(docs):
        return [Example(nlp.make_doc(d.text), d) for d in docs]

    return {
        "evaluate_coref": lambda docs: evaluate_coref(nlp, examples(docs)),
        "tune_coref": lambda docs: tune_coref(nlp, examples(docs)),
        "evaluate_linker": lambda docs: evaluate_linker(nlp, docs),
        "nil_scores": lambda docs: nil_scores(nlp, docs),
        "evaluate_end_to_end": lambda docs: evaluate_end_to_end(nlp, docs),
        "tune_threshold": lambda docs: tune_threshold(None, docs),
        "evaluate_reranker": lambda docs: evaluate_reranker(nlp, docs),
    }


@pytest.mark.parametrize("kind", MISSING)
@pytest.mark.parametrize("function", ["evaluate_coref", "tune_coref", "evaluate_linker",
                                      "nil_scores", "evaluate_end_to_end", "tune_threshold",
                                      "evaluate_reranker"])
def test_library_functions_raise_a_coded_value_error(function, kind):
    with pytest.raises(ValueError, match=rf"\[{MISSING[kind]}\]"):
        _library_calls()[function](_docs(kind))
