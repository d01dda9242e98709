"""Shared fixtures: a tiny randomly initialised BERT, a toy KB and a toy corpus.

The tests build multi-language (``spacy.blank("xx")``) pipelines: the English tokenizer's
1,347 special cases cost 50 ms each time a pipeline is created or loaded (hundreds of times
in the suite: a third of its time), and no test depends on them. The frozen-behaviour and
README tests keep English, as recorded and as documented.
"""

from __future__ import annotations

import string
import sys
from pathlib import Path

import pytest

DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
# the project's scripts (tests/scripts/), imported as `python scripts/project.py` runs them
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))


def _vocab() -> list[str]:
    chars = string.ascii_lowercase + string.digits + string.punctuation
    words = ("the", "of", "and", "in", "induced", "cough", "fever", "aspirin", "heart",
             "failure", "patients", "with", "drug", "was", "caused", "by", "acute", "pain")
    return (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(words) + list(chars)
            + [f"##{c}" for c in string.ascii_lowercase + string.digits])


@pytest.fixture(scope="session")
def nlp():
    """A blank English pipeline for tokenising test documents."""
    import spacy

    return spacy.blank("xx")


@pytest.fixture(scope="session")
def cli():
    """``cli(*args, app=None, **options)``: the command line ``args`` (each passed through
    ``str``) run by a fresh typer ``CliRunner`` on the package's app (``spacy_arboel.cli``),
    or on ``app`` (the project script's, ``from project import app``); ``options`` go to
    ``CliRunner.invoke`` (``env``, ``input``, ``catch_exceptions``). Returns its ``Result``."""
    from typer.testing import CliRunner

    from spacy_arboel.cli import app as package_app

    def run(*args, app=None, **options):
        return CliRunner().invoke(package_app if app is None else app, [str(a) for a in args],
                                  **options)

    return run


def _tiny_bert(path: Path, dropout: float = 0.0) -> str:
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    torch.manual_seed(0)
    vocab_file = path / "vocab.txt"
    vocab_file.write_text("\n".join(_vocab()) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab_file), do_lower_case=True)
    tokenizer.save_pretrained(str(path))
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=128, hidden_dropout_prob=dropout,
                        attention_probs_dropout_prob=dropout)
    BertModel(config).save_pretrained(str(path))
    return str(path)


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory) -> str:
    """A 2-layer, 32-dimensional random BERT with a small wordpiece vocabulary, on disk."""
    # no dropout: training steps do not depend on the random state left by earlier tests
    return _tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="session")
def tiny_dropout_encoder(tmp_path_factory) -> str:
    """The tiny BERT with dropout 0.5: a forward pass in training mode shows at once."""
    return _tiny_bert(tmp_path_factory.mktemp("tiny_bert_dropout"), dropout=0.5)


TOY_ENTITIES = [
    {"id": "D003371", "name": "Cough", "aliases": ["coughing", "tussis"], "types": ["Disease"]},
    {"id": "D005334", "name": "Fever", "aliases": ["pyrexia", "febrile"], "types": ["Disease"]},
    {"id": "D001241", "name": "Aspirin", "aliases": ["acetylsalicylic acid"],
     "types": ["Chemical"]},
    {"id": "D006333", "name": "Heart Failure", "aliases": ["cardiac failure"],
     "types": ["Disease"]},
    {"id": "D010146", "name": "Pain", "description": "An unpleasant sensation.",
     "types": ["Disease"]},
]

TOY_SENTENCES = [
    ("Aspirin induced cough in patients.", [(0, 7, "Chemical", "D001241"),
                                            (16, 21, "Disease", "D003371")]),
    ("Fever was caused by aspirin.", [(0, 5, "Disease", "D005334"),
                                      (20, 27, "Chemical", "D001241")]),
    ("Patients with heart failure and acute pain.", [(14, 27, "Disease", "D006333"),
                                                     (38, 42, "Disease", "D010146")]),
    ("Coughing and pyrexia in patients.", [(0, 8, "Disease", "D003371"),
                                           (13, 20, "Disease", "D005334")]),
    ("Cardiac failure was induced by the drug.", [(0, 15, "Disease", "D006333")]),
    ("Acetylsalicylic acid and fever.", [(0, 20, "Chemical", "D001241"),
                                         (25, 30, "Disease", "D005334")]),
]


@pytest.fixture
def toy_kb_path(tmp_path) -> Path:
    import json

    path = tmp_path / "kb.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in TOY_ENTITIES) + "\n")
    return path


@pytest.fixture
def toy_examples():
    import spacy
    from spacy.training import Example

    nlp = spacy.blank("xx")
    examples = []
    for text, ents in TOY_SENTENCES:
        gold = nlp.make_doc(text)
        gold.ents = [gold.char_span(s, e, label=label, kb_id=kb) for s, e, label, kb in ents]
        pred = nlp.make_doc(text)
        pred.ents = [pred.char_span(s, e, label=label) for s, e, label, _ in ents]
        examples.append(Example(pred, gold))
    return examples


def _save_toy_linker(folder: Path, encoder: str, kb_path: Path, examples, lang: str) -> Path:
    import spacy
    from spacy.tokens import DocBin

    nlp = spacy.blank(lang)
    nlp.add_pipe("arbo_entity_linker", config={
        "kb_path": str(kb_path), "model": {"encoder_name": encoder}})
    nlp.initialize(lambda: examples)
    nlp.to_disk(folder / "pipeline")
    DocBin(docs=[eg.reference for eg in examples]).to_disk(folder / "gold.spacy")
    return folder


@pytest.fixture
def saved_linker(tiny_encoder, toy_kb_path, toy_examples, tmp_path) -> Path:
    """A folder with ``pipeline/`` (an initialised toy ``arbo_entity_linker``) and
    ``gold.spacy`` (the toy gold docs)."""
    return _save_toy_linker(tmp_path, tiny_encoder, toy_kb_path, toy_examples, "xx")


@pytest.fixture
def saved_english_linker(tiny_encoder, toy_kb_path, toy_examples, tmp_path) -> Path:
    """``saved_linker`` in English, for the project's configs (their ``nlp.lang``)."""
    return _save_toy_linker(tmp_path, tiny_encoder, toy_kb_path, toy_examples, "en")


@pytest.fixture
def linker_pipeline(tiny_encoder, toy_kb_path, tmp_path) -> Path:
    """A saved toy ``arbo_linker`` (base encoder, untrained) that links every span it
    proposes (threshold 0), for commands that read raw text (render, link-corpus)."""
    import spacy

    nlp = spacy.blank("xx")
    nlp.add_pipe("arbo_linker", config={
        "kb_path": str(toy_kb_path), "threshold": 0.0, "top_k": 3, "passage_length": 48,
        "passage_stride": 40, "model": {"encoder_name": tiny_encoder, "max_spans": 4}})
    nlp.get_pipe("arbo_linker").ensure_ready()
    nlp.to_disk(tmp_path / "model")
    return tmp_path / "model"


@pytest.fixture(scope="module")
def ray_cluster_of():
    """A local Ray cluster of 2 CPUs for one test module, started by calling the fixture's
    value with the module (its functions are shipped to the workers by value)."""
    ray = pytest.importorskip("ray")

    def start(module):
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}})
        ray.cloudpickle.register_pickle_by_value(module)
        return ray

    yield start
    if ray.is_initialized():
        ray.shutdown()


# settings of the passage reader (spacy_arboel.RetrieverReader.v1) that live in its model
PASSAGE_MODEL_KEYS = ("mode", "warmup_retriever_steps", "warmup_reader_steps",
                      "span_retrieval", "empty_passage_rate", "share_weights", "query_pooling")
PASSAGE_DEFAULTS = {"passage_length": 32, "passage_stride": 24, "threshold": 0.03,
                    "batch_size": 16, "max_span_length": 16}


def passage_linker_config(config: dict, model: dict | None = None) -> dict:
    """An arbo_linker config for the passage reader (EntQA / BEER²), with that reader's
    settings moved into its model block and its usual passage size and threshold."""
    model = {"@architectures": "spacy_arboel.RetrieverReader.v1", **(model or {}),
             **{k: v for k, v in config.items() if k in PASSAGE_MODEL_KEYS}}
    return {**PASSAGE_DEFAULTS, **{k: v for k, v in config.items()
                                   if k not in PASSAGE_MODEL_KEYS and k != "model"},
            "model": model}


def restamp(folder: Path) -> None:
    """Write the manifest of the saved component ``folder`` again over its (changed) files,
    so that the checks after the checksums must catch the change."""
    import json

    from spacy_arboel.artefacts import write_manifest

    listed = json.loads((folder / "manifest.json").read_text())["files"]
    write_manifest(folder, sorted({name.split("/")[0] for name in listed}))


def check_another_kb_is_refused(pipeline: Path, component: str) -> None:
    """A saved pipeline whose ``component`` KB was changed (and refused by the manifest):
    with a manifest written over the change, the index's KB fingerprint refuses it (E012);
    without a manifest, E030 (every save writes one)."""
    import spacy

    restamp(pipeline / component)
    with pytest.raises(ValueError, match="E012"):
        spacy.load(pipeline)
    (pipeline / component / "manifest.json").unlink()
    with pytest.raises(ValueError, match=r"E030.*manifest.json is missing"):
        spacy.load(pipeline)

