"""Exact inner-product search in PyTorch on a GPU: the dense index's search where faiss-gpu
is not installed or not built for this machine's CUDA (the faiss-gpu wheel needs CUDA 12;
an H200 with CUDA 13 searched on the CPU, BENCHMARKS "The GPU path on an H200").

``TorchFlatIndex`` answers as FAISS's ``IndexFlatIP`` does (``search``, ``reconstruct``,
``ntotal``, ``d``): the scores of every row by one matrix product per chunk of queries, in
float32 (TF32 off), and the ``k`` best by ``torch.topk``. ``search_engine`` says which
engine a dense index searches with: faiss-gpu, then torch on the GPU, then FAISS on the CPU.
"""

from __future__ import annotations

import numpy as np
import torch

SEARCH_ENGINES = ("faiss-gpu", "torch-cuda", "faiss-cpu")
QUERY_CHUNK = 4096  # queries scored at once: a chunk's (chunk, rows) scores on the device


class TorchFlatIndex:
    """Exact maximum inner-product search over ``vectors`` (n, d) held on ``device``."""

    def __init__(self, vectors: np.ndarray, device: str | torch.device = "cuda") -> None:
        self.vectors = torch.as_tensor(np.ascontiguousarray(vectors, dtype="float32"),
                                       device=device)
        self.ntotal, self.d = self.vectors.shape

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best rows of each query: (scores, rows), best first; rows -1 (scores
        -inf) past the number of rows, as FAISS pads."""
        n = len(queries)
        take = min(k, self.ntotal)
        scores = np.full((n, k), -np.inf, dtype="float32")
        rows = np.full((n, k), -1, dtype="int64")
        matmul = torch.backends.cuda.matmul
        tf32, matmul.allow_tf32 = matmul.allow_tf32, False  # exact float32 products
        try:
            with torch.no_grad():
                for start in range(0, n, QUERY_CHUNK):
                    chunk = torch.as_tensor(np.ascontiguousarray(
                        queries[start:start + QUERY_CHUNK], dtype="float32"),
                        device=self.vectors.device)
                    best, at = torch.topk(chunk @ self.vectors.T, take, dim=1)
                    scores[start:start + len(chunk), :take] = best.cpu().numpy()
                    rows[start:start + len(chunk), :take] = at.cpu().numpy()
        finally:
            matmul.allow_tf32 = tf32
        return scores, rows

    def reconstruct(self, row: int) -> np.ndarray:
        """The vector of ``row``."""
        return self.vectors[row].cpu().numpy()


def search_engine(use_gpu: bool | None, faiss_gpu: bool, exact: bool) -> str:
    """Where an index built in the process searches (``SEARCH_ENGINES``): an ``exact``
    (flat) index, with ``use_gpu`` True or None, on the GPU — with faiss-gpu when it is
    installed and sees a GPU (``faiss_gpu``), else with torch on the CUDA device; any other
    on the CPU with FAISS."""
    wants_gpu = use_gpu or use_gpu is None
    if wants_gpu and exact and faiss_gpu:
        return "faiss-gpu"
    if wants_gpu and exact and torch.cuda.is_available():
        return "torch-cuda"
    return "faiss-cpu"
