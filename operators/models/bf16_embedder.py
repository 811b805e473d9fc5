"""The packaged all-MiniLM-L6-v2 with bfloat16 matrix products (``ModelConfig.embed_runtime``
``bf16``, opt-in): the offline embedder's fast path on CPUs that multiply bfloat16 natively
(AVX512-BF16 or AMX; ``native_bf16``).

The encoder is written out in torch, without transformers: BERT's embeddings, six layers of
self-attention and feed-forward, read from the package's ``model.safetensors``. The linear
layers' weights are held in bfloat16 (query, key and value fused into one product) and their
products run in bfloat16 with float32 accumulation (oneDNN); the embeddings, every LayerNorm,
the residual sums, the attention mask and softmax, and the mean pooling stay float32.
Tokenizer, truncation (128 word pieces), length-sorted batches (``padded_batches``) and pooling
are those of the ONNX path, so the vectors are today's within rounding: cosine > 0.9999 to the
float32 ones on every text of a MuSiQue enrich batch (passages, sentences, entity names), and
about a third less embedding CPU than float32 ONNX Runtime on such a CPU (docs/results.md, "Enrich
throughput"). It stays opt-in: on MuSiQue one question's gold passage moved from rank 5 to 7
behind a near-tie (zoom recall@5 72.9 vs 73.4). The child process that runs the enrich models
has torch already (spaCy's thinc imports it), so this path adds no import. Nothing is
downloaded.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from bookindex.operators.models.onnx_embedder import PooledEncoder, word_piece_tokenizer


def native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 natively (AVX512-BF16 or AMX tiles): elsewhere
    bfloat16 products are emulated, slower than float32 ONNX Runtime."""
    import torch

    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, p, lambda: False)() for p in probes)


class Bf16Embedder(PooledEncoder):
    """``encode(texts) -> (n, dim)`` float32, L2-normalised: MiniLM (``model_dir``, a
    sentence-transformers package directory) with bfloat16 linear layers. ``threads``: torch's
    intra-op threads (0: leave torch's setting, which follows ``OMP_NUM_THREADS``)."""

    def __init__(self, model_dir: str, max_tokens: int = 128, threads: int = 0) -> None:
        import torch
        from safetensors.torch import load_file

        if threads:
            torch.set_num_threads(threads)
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        if config.get("hidden_act", "gelu") != "gelu" or config.get("model_type") != "bert":
            raise ValueError(f"{model_dir} is not a BERT encoder with GELU: no bf16 path")
        weights = load_file(os.path.join(model_dir, "model.safetensors"))
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        embeddings = "embeddings."
        self.words = weights[embeddings + "word_embeddings.weight"]
        self.positions = weights[embeddings + "position_embeddings.weight"]
        self.segment = weights[embeddings + "token_type_embeddings.weight"][0]
        self.embedding_norm = _norm(weights, embeddings + "LayerNorm.")
        self.layers = [
            _layer(weights, f"encoder.layer.{i}.") for i in range(int(config["num_hidden_layers"]))
        ]
        self.tokenizer = word_piece_tokenizer(model_dir, max_tokens)
        self.runtime = "bf16"

    def hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The last layer's states (batch × tokens × width, float32) of padded word-piece
        ``ids`` (``mask``: 1 for a word piece, 0 for padding)."""
        import torch
        import torch.nn.functional as F  # noqa: N812 (torch's own name)

        with torch.inference_mode():
            tokens = torch.from_numpy(ids)
            batch, length = tokens.shape
            x = self.words[tokens] + self.positions[:length] + self.segment
            width = x.shape[-1]
            x = F.layer_norm(x, (width,), *self.embedding_norm, self.eps)
            padding = (1.0 - torch.from_numpy(mask).float()) * torch.finfo(torch.float32).min
            padding = padding[:, None, None, :]
            heads = self.heads
            size = width // heads
            scale = 1.0 / math.sqrt(size)
            for layer in self.layers:
                qkv = F.linear(x.to(torch.bfloat16), *layer["qkv"])
                q, k, v = qkv.view(batch, length, 3, heads, size).permute(2, 0, 3, 1, 4)
                scores = torch.matmul(q, k.transpose(-1, -2)).float() * scale + padding
                attention = torch.softmax(scores, dim=-1).to(torch.bfloat16)
                context = torch.matmul(attention, v).transpose(1, 2).reshape(batch, length, width)
                x = F.layer_norm(
                    F.linear(context, *layer["out"]).float() + x, (width,), *layer["norm"], self.eps
                )
                inner = F.gelu(F.linear(x.to(torch.bfloat16), *layer["up"]))
                x = F.layer_norm(
                    F.linear(inner, *layer["down"]).float() + x,
                    (width,),
                    *layer["ffn_norm"],
                    self.eps,
                )
            return x.numpy()


def _norm(weights: dict, prefix: str) -> tuple:
    return weights[prefix + "weight"], weights[prefix + "bias"]


def _linear(weights: dict, prefix: str) -> tuple:
    import torch

    return (
        weights[prefix + "weight"].to(torch.bfloat16).contiguous(),
        weights[prefix + "bias"].to(torch.bfloat16),
    )


def _layer(weights: dict, prefix: str) -> dict:
    """One encoder layer's parameters: bfloat16 linear weights (query, key, value as one),
    float32 LayerNorms."""
    import torch

    attention = prefix + "attention.self."
    parts = [_linear(weights, f"{attention}{name}.") for name in ("query", "key", "value")]
    return {
        "qkv": (torch.cat([w for w, _ in parts]), torch.cat([b for _, b in parts])),
        "out": _linear(weights, prefix + "attention.output.dense."),
        "norm": _norm(weights, prefix + "attention.output.LayerNorm."),
        "up": _linear(weights, prefix + "intermediate.dense."),
        "down": _linear(weights, prefix + "output.dense."),
        "ffn_norm": _norm(weights, prefix + "output.LayerNorm."),
    }
