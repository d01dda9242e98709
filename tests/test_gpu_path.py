"""What the GPU path decides, checked on a CPU: the half type of mixed precision, the
in-process index's factory and its one set of faiss-gpu resources, writing an index held on
a GPU, and the commands' --gpu-id where no GPU can be used (benchmarks/gpu_check.sh runs
the path itself on a GPU)."""

import numpy as np
import pytest
import torch
from spacy.tokens import DocBin

from spacy_arboel.encoders.weights import autocast, autocast_dtype
from spacy_arboel.kb import index as index_module
from spacy_arboel.kb import index_builder
from spacy_arboel.kb.index import DenseIndex, IndexMeta, in_process_factory


def test_mixed_precision_takes_bfloat16_where_the_gpu_has_it(monkeypatch):
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert autocast_dtype(cuda) is torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert autocast_dtype(cuda) is torch.float16
    # on a CPU mixed precision stays off, whatever is asked
    with autocast(torch.device("cpu"), True):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype is torch.float32


def test_auto_stays_exact_below_a_million_rows_on_a_gpu():
    assert in_process_factory(200_000, 8, "auto", on_gpu=True) == "Flat"
    assert in_process_factory(200_000, 8, "auto", on_gpu=False).startswith("HNSW")
    assert in_process_factory(200_000, 8, "hnsw", on_gpu=True).startswith("HNSW")
    assert "PQ" in in_process_factory(2_000_000, 64, "auto", on_gpu=True)


class _FakeGpuFaiss:
    """faiss with a pretend GPU: the copy to it is the index itself, resources counted."""

    def __init__(self):
        import faiss

        self._faiss, self.resources, self.copies = faiss, 0, 0

    def __getattr__(self, name):
        return getattr(self._faiss, name)

    def get_num_gpus(self):
        return 1

    def StandardGpuResources(self):  # noqa: N802 (faiss's name)
        self.resources += 1
        return object()

    def index_cpu_to_gpu(self, resources, device, index):
        self.copies += 1
        return index


def _meta(n_rows, kind="auto"):
    return IndexMeta(kb_fingerprint="kb", encoder_fingerprint="enc", dim=4, n_rows=n_rows,
                     kind=kind, granularity="entity", inputs="names")


def test_indexes_on_a_gpu_share_one_set_of_resources(monkeypatch):
    fake = _FakeGpuFaiss()
    monkeypatch.setattr(index_module, "_faiss", lambda: fake)
    monkeypatch.setattr(index_module, "_GPU_RESOURCES", [])
    vectors = np.random.default_rng(0).normal(size=(6, 4)).astype("float32")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)  # each its own nearest
    for _ in range(3):  # a training refreshes its index again and again
        index = DenseIndex(vectors, np.arange(6), _meta(6), use_gpu=True)
    assert (fake.copies, fake.resources) == (3, 1)
    scores, ids = index.search(vectors[:2], 1)
    assert ids[:, 0].tolist() == [0, 1]
    DenseIndex(vectors, np.arange(6), _meta(6), use_gpu=False)
    assert fake.copies == 3


def test_an_index_on_a_gpu_is_written_from_a_cpu_copy(monkeypatch, tmp_path):
    import faiss

    class GpuIndexFlat:  # what faiss-gpu's downcast names an index on a GPU
        pass

    cpu = faiss.IndexFlatIP(4)
    cpu.add(np.eye(4, dtype="float32"))
    on_gpu = GpuIndexFlat()
    monkeypatch.setattr(faiss, "downcast_index", lambda index: index, raising=False)
    monkeypatch.setattr(faiss, "index_gpu_to_cpu", lambda index: cpu, raising=False)
    index_builder.save_index(on_gpu, tmp_path / "index.faiss")
    assert faiss.read_index(str(tmp_path / "index.faiss")).ntotal == 4


def test_torch_search_finds_what_faiss_finds():
    """The exact search in torch (run on the CPU here; on a GPU it is the same code) gives
    FAISS's flat index's rows and scores, padded as FAISS pads past the rows it holds."""
    import faiss

    from spacy_arboel.kb.torch_search import QUERY_CHUNK, TorchFlatIndex

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(50, 8)).astype("float32")
    queries = rng.normal(size=(7, 8)).astype("float32")
    flat = faiss.IndexFlatIP(8)
    flat.add(vectors)
    torch_index = TorchFlatIndex(vectors, "cpu")
    for k in (1, 5, 60):
        expected, rows = flat.search(queries, k)
        scores, found = torch_index.search(queries, k)
        assert found.tolist() == rows.tolist()
        assert np.allclose(scores[found >= 0], expected[rows >= 0], atol=1e-5)
        assert np.isneginf(scores[found < 0]).all()
    assert torch_index.reconstruct(3).tolist() == vectors[3].tolist()
    assert (torch_index.ntotal, torch_index.d) == (50, 8) and QUERY_CHUNK >= 1024


def test_without_faiss_gpu_a_gpu_searches_with_torch(monkeypatch):
    """Where torch sees a GPU and faiss-gpu is missing (or built for another CUDA), an
    exact in-process index searches with torch on the device, and says so."""
    from spacy_arboel.kb import torch_search

    assert torch_search.search_engine(None, True, exact=True) == "faiss-gpu"
    assert torch_search.search_engine(True, False, exact=False) == "faiss-cpu"  # IVF, HNSW
    assert torch_search.search_engine(False, True, exact=True) == "faiss-cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert torch_search.search_engine(None, False, exact=True) == "torch-cuda"

    class OnThisMachine(torch_search.TorchFlatIndex):  # its device: the CPU here
        def __init__(self, vectors, device="cuda"):
            assert device == "cuda"
            super().__init__(vectors, "cpu")

    monkeypatch.setattr(torch_search, "TorchFlatIndex", OnThisMachine)
    vectors = np.eye(6, 4, dtype="float32") + 0.01
    index = DenseIndex(vectors, np.arange(6), _meta(6), use_gpu=None)
    assert index.engine == "torch-cuda" and index.meta.kind == "auto"
    assert index.search(vectors[:2], 1)[1][:, 0].tolist() == [0, 1]
    assert DenseIndex(vectors, np.arange(6), _meta(6), use_gpu=False).engine == "faiss-cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible here")
@pytest.mark.parametrize("command", ["evaluate", "evaluate-e2e"])
def test_gpu_id_without_a_usable_gpu_is_refused_before_loading(command, tmp_path, nlp, cli):
    corpus = tmp_path / "gold.spacy"
    doc = nlp("Aspirin induced cough.")
    doc.ents = [doc.char_span(0, 7, label="Chemical", kb_id="D001241")]
    DocBin(docs=[doc]).to_disk(corpus)
    model = tmp_path / "no-pipeline-here"
    model.mkdir()
    result = cli(command, model, corpus, "--gpu-id", "0")
    assert result.exit_code != 0
    assert "E246" in result.output, result.output


def test_a_gpu_embeds_in_large_batches(monkeypatch):
    from spacy_arboel.encoders import weights

    module = torch.nn.Linear(2, 2)
    assert weights.inference_batch_size(64, module) == 64  # on the CPU, the setting
    monkeypatch.setattr(weights, "module_device", lambda m: torch.device("cuda", 0))
    assert weights.inference_batch_size(64, module) == weights.GPU_BATCH
    assert weights.inference_batch_size(4096, module) == 4096
