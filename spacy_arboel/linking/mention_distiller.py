"""A smaller mention encoder distilled from a trained bi-encoder, for fast CPU linking.

The entity encoder and its index stay as they are: the student (the teacher's mention encoder
with fewer layers) learns to put each mention where the teacher puts it, ranked against the
teacher's own candidates. Per mention, with z the scores against the teacher's top-``k``
index rows and v the mention vectors::

    T² · KL(σ(z_t / T) ‖ σ(z_s / T)) + β · ‖v_s − v_t‖² / d

The first term is the soft term of BLINK's knowledge distillation (eq. 9–10; the KL differs
from its cross-entropy by the teacher's entropy, a constant, and is zero at a perfect
student). Deviations,
for what this is for: the teacher is the fp32 bi-encoder, not the cross-encoder; there is
no gold term (eq. 8), so any mention, labelled or not, is training data; the vector term
(β) keeps the student in the index's space beyond the top ``k``; the soft term is scaled
by T² so that β means the same at any T. The student starts from evenly spaced layers of the
teacher, first and last kept (DistilBERT's initialisation, Sanh et al. 2019).

No spaCy here::

    student = shrink_encoder(retriever.encoders["mention"], 3)
    MentionDistiller(retriever, student).fit(texts, spans)
    retriever.encoders["mention"] = student   # share_weights=False only
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import numpy as np
import torch
from tqdm import tqdm

from ..encoders.inputs import MentionSpan
from ..encoders.transformer import PooledEncoder
from ..encoders.weights import module_device
from ..errors import Errors
from .dense_retriever import DenseRetriever
from .loop_settings import DistillSettings


def kept_layers(n_layers: int, keep: int) -> list[int]:
    """``keep`` evenly spaced layer numbers of ``n_layers``, the first and last included."""
    if not 1 <= keep <= n_layers:
        raise ValueError(Errors.E121.format(keep=keep, n_layers=n_layers))
    if keep == 1:
        return [n_layers - 1]
    return sorted({int(round(i * (n_layers - 1) / (keep - 1))) for i in range(keep)})


def _layer_stack(transformer: torch.nn.Module) -> tuple[torch.nn.Module, str]:
    """The module holding the transformer's layer list and that list's attribute name (BERT,
    RoBERTa, ELECTRA, MiniLM: ``encoder.layer``; DistilBERT: ``transformer.layer``)."""
    for owner_name in ("encoder", "transformer"):
        owner = getattr(transformer, owner_name, None)
        if isinstance(getattr(owner, "layer", None), torch.nn.ModuleList):
            return owner, "layer"
    raise ValueError(Errors.E122.format(kind=type(transformer).__name__))


def shrink_encoder(encoder: PooledEncoder, layers: int) -> PooledEncoder:
    """A copy of ``encoder`` keeping ``layers`` of its transformer layers (``kept_layers``);
    its config says so, so that ``save_pretrained`` writes a model that loads as it is."""
    student = copy.deepcopy(encoder)
    owner, name = _layer_stack(student.transformer)
    stack = getattr(owner, name)
    setattr(owner, name, torch.nn.ModuleList(stack[i] for i in kept_layers(len(stack), layers)))
    student.transformer.config.num_hidden_layers = layers
    return student


def distillation_terms(student: torch.Tensor, teacher: torch.Tensor, rows: torch.Tensor,
                       valid: torch.Tensor, temperature: float, vector_weight: float
                       ) -> torch.Tensor:
    """The loss of the module docstring, averaged over mentions: ``student``/``teacher``
    (n, d) mention vectors, ``rows`` (n, k, d) the teacher's candidate row vectors,
    ``valid`` (n, k) which of them exist."""
    z_t = torch.einsum("nd,nkd->nk", teacher, rows).masked_fill(~valid, float("-inf"))
    z_s = torch.einsum("nd,nkd->nk", student, rows).masked_fill(~valid, float("-inf"))
    log_p = (z_t / temperature).log_softmax(dim=-1).masked_fill(~valid, 0.0)
    log_q = (z_s / temperature).log_softmax(dim=-1).masked_fill(~valid, 0.0)
    soft = (log_p.exp() * (log_p - log_q)).sum(dim=-1) * temperature**2
    vector = ((student - teacher) ** 2).mean(dim=-1)
    return (soft + vector_weight * vector).mean()


class MentionDistiller:
    """Trains ``student`` to reproduce ``retriever``'s mention encoder (the teacher) against
    the retriever's current index; the teacher and the index do not change."""

    def __init__(self, retriever: DenseRetriever, student: PooledEncoder,
                 settings: DistillSettings = DistillSettings()) -> None:
        if retriever.settings.share_weights:
            raise ValueError(Errors.E123)
        retriever.entities.ensure_index()
        self.retriever, self.student, self.settings = retriever, student, settings
        self.rows = torch.from_numpy(np.ascontiguousarray(retriever.index.embeddings))

    def targets(self, sequences: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """The teacher's vector and top-``k`` index rows (-1: none) of each mention input
        (the fp32 teacher, whatever the retriever's ``quantize``)."""
        vectors = self.retriever.encode("mention", sequences, desc="Teacher", quantized=False)
        return vectors, self.retriever.index.search_rows(vectors, self.settings.top_k)

    def _student_vectors(self, ids: np.ndarray, mask: np.ndarray) -> torch.Tensor:
        device = module_device(self.student)
        vectors = self.student(torch.as_tensor(ids, device=device),
                               torch.as_tensor(mask, device=device)).float().cpu()
        if self.retriever.settings.scoring == "cosine":
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        return vectors

    def batch_loss(self, sequences: Sequence[Sequence[int]], teacher: np.ndarray,
                   rows: np.ndarray) -> torch.Tensor:
        """The loss of one batch of mention inputs with their ``targets``."""
        ids, mask = self.retriever.builder.pad(sequences)
        valid = torch.from_numpy(rows >= 0)
        row_vectors = self.rows[torch.from_numpy(np.maximum(rows, 0))]
        return distillation_terms(self._student_vectors(ids, mask), torch.from_numpy(teacher),
                                  row_vectors, valid, self.settings.temperature,
                                  self.settings.vector_weight)

    def fit(self, texts: Sequence[str], spans: Sequence[MentionSpan],
            on_epoch: Callable[[int, float], None] | None = None) -> list[float]:
        """Train the student on these mentions (shuffled each epoch, Adam with a linear decay
        of the learning rate); returns the mean loss of each epoch. Raises a ValueError when
        no mention has text to encode."""
        sequences = self.retriever.builder.mention_ids(texts, spans)
        if not sequences:
            raise ValueError(Errors.E124)
        teacher, rows = self.targets(sequences)
        settings = self.settings
        generator = np.random.default_rng(settings.seed)
        n_batches = -(-len(sequences) // settings.batch_size)
        total = n_batches * settings.epochs
        optimizer = torch.optim.AdamW(self.student.parameters(), lr=settings.learning_rate,
                                      weight_decay=0.01)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: max(0.0, 1.0 - step / total))
        self.student.train()
        history = []
        for epoch in range(settings.epochs):
            order = generator.permutation(len(sequences))
            losses = []
            batches = tqdm(range(0, len(order), settings.batch_size), desc=f"Epoch {epoch}",
                           unit="batch", leave=False, disable=None)
            for start in batches:
                chosen = order[start : start + settings.batch_size]
                loss = self.batch_loss([sequences[i] for i in chosen], teacher[chosen],
                                       rows[chosen])
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.student.parameters(), 1.0)
                optimizer.step()
                schedule.step()
                losses.append(loss.item())
            history.append(float(np.mean(losses)))
            if on_epoch is not None:
                on_epoch(epoch, history[-1])
        self.student.eval()
        return history
