"""What only biomedical KBs need, apart from the generic core: MeSH's files (``mesh``), the
MeSH-keyed vocabularies of PyPI packages (``synonym_sources``, ``mesh_packages``) and the
mention normaliser ``element_symbols``; behind the ``mesh`` extra."""
