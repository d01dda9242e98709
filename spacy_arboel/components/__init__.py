"""spaCy components: thin adapters over the KB, encoders and objectives."""
