"""spacy-arboel: dense entity linking for spaCy (BLINK bi-encoder, arboEL training)."""

__version__ = "0.1.0"
