"""The linking core: retrieval, training, re-ranking and reading without spaCy.

The spaCy components (``spacy_arboel.components``) are thin adapters over these classes;
they can be driven directly from texts and character spans.
"""

from .bi_encoder_trainer import BiEncoderTrainer, TrainingStep
from .cross_encoder_reranker import (
    CrossEncoderReranker,
    RerankerSettings,
    candidate_softmax_loss,
    check_state,
    ranked,
)
from .dense_retriever import DenseRetriever, RetrieverSettings
from .reader_spans import DocLinks
from .retriever_reader import ReaderSettings, RetrieverReader
from .span_reader import SpanReader, SpanReaderSettings

__all__ = ["BiEncoderTrainer", "CrossEncoderReranker", "DenseRetriever", "DocLinks",
           "ReaderSettings", "RerankerSettings", "RetrieverReader", "RetrieverSettings",
           "SpanReader", "SpanReaderSettings",
           "TrainingStep", "candidate_softmax_loss", "check_state", "ranked"]
