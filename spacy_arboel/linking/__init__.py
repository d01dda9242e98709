"""The linking core: retrieval, training, re-ranking and reading without spaCy.

The spaCy components (``spacy_arboel.components``) are thin adapters over these classes;
they can be driven directly from texts and character spans.
"""

from .bi_encoder_trainer import BiEncoderTrainer, TrainingStep
from .dense_retriever import DenseRetriever, RetrieverSettings

__all__ = ["BiEncoderTrainer", "DenseRetriever", "RetrieverSettings", "TrainingStep"]
