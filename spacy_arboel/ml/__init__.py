"""The registered thinc architectures and training objectives of the components.

Each ``spacy_arboel`` architecture is a declared weight holder: its thinc model holds the
component's PyTorch modules for spaCy (optimizer, ``use_params``, device, ``nlp.initialize``)
while the component's core runs them; ``module_holder`` says why. ``TransformerModel.v1`` is
spacy-transformers' own model (the compute path of the ``transformer`` that ``ner`` listens to).
"""
