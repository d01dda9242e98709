"""What ``project-train`` adds around ``spacy train``: the schedule checked against the
evaluation frequency before training, every evaluation recorded, and the final model
evaluated after it so that a finished training never leaves its step-0 model as
``model-best`` (issue 29)."""
