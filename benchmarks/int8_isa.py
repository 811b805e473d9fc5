"""The int8 embedder on CPUs with and without VNNI: its vectors against the float ones, per
int8 recipe, side by side in one run.

    python -m benchmarks.int8_isa [--texts 60]

ONNX Runtime picks its int8 matrix kernels by the CPU's instructions (CPUID): with VNNI
(AVX512-VNNI, AVX-VNNI, AMX) products are summed in 32 bits; with AVX2 alone, pairs of u8×s8
products are summed in a signed 16-bit lane first, which 8-bit weights can overflow. This runs
the same int8 models on this CPU and on an emulated AVX2-only CPU (``qemu-x86_64 -cpu
Haswell``, Debian's ``qemu-user``; skipped where it is not installed) and prints, per CPU and
recipe, the cosine of each int8 vector to the float ONNX vector of the same text: HotpotQA
passages (title and text) and short names, as the enrich stage embeds them. Recipe 2 is the
previous one (8-bit weights); recipe 3 (``onnx_embedder.INT8_RECIPE``) quantizes the weights to
7 bits (``reduce_range``). The emulated run takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from bookindex.operators.models.offline import embedding_model_path
from bookindex.operators.models.onnx_embedder import (
    INT8_RECIPE,
    OnnxEmbedder,
    _quantize,
    exported_model,
    int8_instruction_set,
    word_piece_tokenizer,
)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
NAMES = ["Paris", "Lester Smith", "IBM", "the Treaty of Westphalia", ""]


class FileEmbedder(OnnxEmbedder):
    """The offline embedder's pipeline (tokenizer, pooling) over a given ONNX file."""

    def __init__(self, model_dir: str, path: str) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.tokenizer = word_piece_tokenizer(model_dir, 128)
        self.runtime = "file"


def texts_of(n: int) -> list[str]:
    corpus = SHARED / "multihop" / "hotpotqa" / "corpus.jsonl"
    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()[:n]]
    return [f"{r['title']} {r['text']}" for r in rows] + NAMES


def recipe_2(fp32: Path, path: Path, model_dir: str) -> None:
    """The previous recipe: smoothed, 8-bit per-channel weights (no ``reduce_range``)."""
    _quantize(fp32, path, model_dir, reduce_range=False)


def child(spec_path: str) -> None:
    """Embed the texts with each model file of the spec; vectors to ``.npy`` files."""
    spec = json.loads(Path(spec_path).read_text())
    for name, path in spec["models"].items():
        vectors = FileEmbedder(spec["model_dir"], path).encode(spec["texts"])
        np.save(Path(spec["out"]) / f"{spec['cpu']}-{name}.npy", vectors)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--texts", type=int, default=60, help="HotpotQA passages")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return
    model_dir = embedding_model_path()
    work = Path(tempfile.mkdtemp(prefix="int8_isa_"))
    fp32 = exported_model(model_dir, "onnx", work)
    current = exported_model(model_dir, "onnx-int8", work)
    previous = work / "recipe2.onnx"
    recipe_2(fp32, previous, model_dir)
    texts = texts_of(args.texts)
    reference = FileEmbedder(model_dir, str(fp32)).encode(texts)
    models = {"recipe 2": str(previous), f"recipe {INT8_RECIPE}": str(current)}
    cpus = {f"this CPU ({int8_instruction_set()})": []}
    qemu = shutil.which("qemu-x86_64")
    if qemu:
        cpus["emulated AVX2 only (qemu -cpu Haswell)"] = [qemu, "-cpu", "Haswell"]
    else:
        print("qemu-x86_64 not found (apt install qemu-user): the AVX2-only run is skipped")
    rows = []
    for number, (cpu, prefix) in enumerate(cpus.items()):
        spec = {"model_dir": model_dir, "texts": texts, "models": models, "out": str(work)}
        spec["cpu"] = str(number)
        (work / f"spec{number}.json").write_text(json.dumps(spec))
        command = [*prefix, sys.executable, "-m", "benchmarks.int8_isa"]
        command += ["--child", str(work / f"spec{number}.json")]
        subprocess.run(command, check=True, cwd=Path(__file__).resolve().parents[1])
        for name in models:
            vectors = np.load(work / f"{number}-{name}.npy")
            cosines = (vectors * reference).sum(axis=1)
            passages, names = cosines[: args.texts], cosines[args.texts :]
            rows.append((cpu, name, cosines.min(), cosines.mean(), passages.min(), names.min()))
    print(f"\nint8 vectors against float ONNX: {args.texts} HotpotQA passages + {len(NAMES)} names")
    print(
        f"{'CPU':<40} {'recipe':<9} {'min':>7} {'mean':>7} {'passages min':>13} {'names min':>10}"
    )
    for cpu, name, low, mean, passages_min, names_min in rows:
        print(f"{cpu:<40} {name:<9} {low:7.4f} {mean:7.4f} {passages_min:13.4f} {names_min:10.4f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
