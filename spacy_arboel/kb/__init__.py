"""Knowledge base: entities, converters and the dense index."""

from .entity import Entity
from .knowledge_base import KnowledgeBase, KnowledgeBaseError

__all__ = ["Entity", "KnowledgeBase", "KnowledgeBaseError"]
