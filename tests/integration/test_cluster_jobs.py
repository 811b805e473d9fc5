"""Jobs that run the same way locally and on a cluster (issue 6 §1–2): the cluster launcher and
Serve configs declare what the code asks for, and the index job submitted through the Ray Job
API to a separate head node (``ray start --head`` on 127.0.0.1) writes the same tables."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lance
import polars as pl
import psutil
import pytest
import yaml

from bookindex.pipelines.ports import free_port
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import DOCUMENTS, NODES

REPO = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).with_name("ray")
BOOKINDEX = Path(sys.executable).with_name("bookindex")  # the installed command


def test_cluster_and_serve_configs_match_the_code():
    from ray.serve.schema import ServeDeploySchema

    from bookindex.pipelines.serve_app import build_app

    cluster = yaml.safe_load((REPO / "cluster.yaml").read_text())
    types = cluster["available_node_types"]
    assert types[cluster["head_node_type"]]["resources"] == {"CPU": 0}
    assert types["gpu_worker"]["resources"]["GPU"] >= 1
    assert "GPU" not in types["cpu_worker"]["resources"]
    # the hashed GPU lock (the `.[gpu]` extra by hash) on every node, nothing installed unhashed,
    # and Ray token auth on every node (cluster.yaml's header)
    # then bookindex itself from the checkout, resolving nothing again (docs/cluster.md)
    installs = [c for c in cluster["setup_commands"] if "pip install" in c]
    assert "--require-hashes -r requirements-gpu.lock" in installs[0]
    assert len(installs) == 2 and "--no-deps" in installs[1] and installs[1].endswith(" .")
    starts = cluster["head_start_ray_commands"] + cluster["worker_start_ray_commands"]
    assert all("RAY_AUTH_MODE=token" in c for c in starts if "ray start" in c)
    assert "~/.ray/auth_token" in cluster["file_mounts"]

    config = ServeDeploySchema.model_validate(
        yaml.safe_load((REPO / "serve_config.yaml").read_text())
    )
    app = config.applications[0]
    assert app.import_path == "bookindex.pipelines.serve_app:build_app"
    scaling = {d.name: d.autoscaling_config for d in app.deployments}
    assert set(scaling) == {"RetrievalEngine"}  # the engine replica is the HTTP ingress
    assert all(s["max_replicas"] > s["min_replicas"] >= 1 for s in scaling.values())
    # device "gpu" puts the walk engine on a GPU worker; "auto"/"cpu" ask for no GPU
    for device, gpus in (("gpu", 1), ("auto", None), ("cpu", None)):
        engine = build_app({"index": "x", "device": device})._bound_deployment
        assert engine.ray_actor_options.get("num_gpus") == gpus, device


def _pool(args: dict) -> tuple[int, int]:
    """An actor stage's pool (min, max workers): ``compute=``, never the deprecated
    ``concurrency=`` (Ray 2.51)."""
    from ray.data import ActorPoolStrategy

    assert "concurrency" not in args and isinstance(args["compute"], ActorPoolStrategy)
    return args["compute"].min_size, args["compute"].max_size


def test_ocr_pool_threads_and_gpus_come_from_the_configuration():
    from bookindex.operators.config import BookindexConfig
    from bookindex.pipelines.ocr_stage import OcrStage, ocr_args

    config = BookindexConfig()
    args = ocr_args(config, workers=2, cpus=8)
    assert _pool(args) == (2, 2) and args["batch_size"] == 4 and "num_gpus" not in args
    assert args["fn_constructor_kwargs"] == {
        "dpi": 200,
        "threads": 4,
        "gpu": False,
        "timeout_s": 300.0,
        "retries": 2,
    }
    config.index.ocr_workers, config.index.ocr_gpus, config.index.ocr_batch_size = 3, 0.5, 8
    args = ocr_args(config, workers=2, cpus=8)
    assert _pool(args) == (1, 3) and args["num_gpus"] == 0.5 and args["batch_size"] == 8
    assert args["fn_constructor_kwargs"]["gpu"] is True
    assert OcrStage.__call__  # the class Ray Data instantiates once per worker


def test_model_stages_ask_for_gpus_only_with_a_gpu_model():
    from bookindex.operators.config import BookindexConfig, IndexConfig, ModelConfig
    from bookindex.pipelines.enrich import enrich_args
    from bookindex.pipelines.structure_stage import assemble_group, index_documents, structure_args

    def config(backend: str, **index) -> BookindexConfig:
        return BookindexConfig(models=ModelConfig(backend=backend), index=IndexConfig(**index))

    for backend, gpus in (("offline", 0), ("openai", 0), ("vllm", 1)):
        assert IndexConfig().stage_gpus(backend) == gpus
        args = enrich_args(config(backend), workers=4, docs_per_batch=1, width=384)
        assert args.get("num_gpus", 0) == gpus
        # a worker that reserves a GPU embeds on it, one that reserves none on the CPU
        models = args["fn_constructor_kwargs"]["models"]
        assert models["embed_device"] == ("cuda" if gpus else "cpu"), backend
        # a GPU stage scales from one worker, so it never waits for GPUs the cluster lacks
        assert _pool(args) == ((1, 4) if gpus else (4, 4))
        assert args["fn_constructor_kwargs"]["width"] == 384 and args["batch_size"] == 1
    assert IndexConfig(model_gpus=0.5).stage_gpus("vllm") == 0.5
    shared = enrich_args(config("offline", model_gpus=0.5), 4, 1, None)
    assert shared["num_gpus"] == 0.5
    assert shared["fn_constructor_kwargs"]["models"]["embed_device"] == "cuda"
    assert _pool(enrich_args(config("offline", enrich_workers=2), 4, 256, None)) == (2, 2)
    # the offline embedder configured on cuda asks for a GPU a worker (by configuration alone:
    # no worker lands on a CPU node, where it would fail); an explicit model_gpus stands
    assert IndexConfig().stage_gpus("offline", "cuda") == 1
    on_cuda = BookindexConfig(models=ModelConfig(embed_device="cuda"))
    args = enrich_args(on_cuda, 4, 1, None)
    assert args["num_gpus"] == 1 and _pool(args) == (1, 4)
    assert args["fn_constructor_kwargs"]["models"]["embed_device"] == "cuda"
    on_cuda.index.model_gpus = 0
    assert "num_gpus" not in enrich_args(on_cuda, 4, 1, None)
    # the structure stage never owns a model: plain tasks; with a generative one it only
    # plans the section refiner's requests (a ray.data.llm processor answers them)
    assert structure_args(config("offline"), 4, grouped=False)["fn"] is index_documents
    vllm = structure_args(config("vllm"), 4, grouped=True)
    assert vllm["fn"] is assemble_group and "num_gpus" not in vllm
    assert vllm["fn_kwargs"]["review"] == 40  # candidates per refiner request
    assert structure_args(config("offline"), 4, grouped=True)["fn_kwargs"]["review"] == 0


def _start_head(temp: Path, token: str) -> tuple[subprocess.Popen, str]:
    """``ray start --head --block`` in a new session on ports of its own; its output goes to
    ``temp/start.log`` so that a head that dies at start-up says why."""
    env = dict(os.environ, PATH=f"{RAY.parent}{os.pathsep}{os.environ['PATH']}")
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    env.pop("RAY_ADDRESS", None)
    port, dashboard = free_port(), free_port()
    # Every port its own: the defaults (agent 52365, client 10001, ...) are those of the
    # session's in-process Ray and of any other Ray on this machine.
    ports = [
        f"--{name}={free_port()}"
        for name in ("dashboard-agent-listen-port", "dashboard-agent-grpc-port",
                     "runtime-env-agent-port", "metrics-export-port", "ray-client-server-port",
                     "node-manager-port", "object-manager-port")
    ]  # fmt: skip
    with open(temp / "start.log", "ab") as log:
        head = subprocess.Popen(
            [str(RAY), "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
             "--port", str(port), "--num-cpus", "2", "--num-gpus", "0",
             "--object-store-memory", str(300 * 2**20),
             "--include-dashboard", "true", "--dashboard-host", "127.0.0.1",
             "--dashboard-port", str(dashboard), "--temp-dir", str(temp / "ray"),
             "--disable-usage-stats", *ports],
            env=env, start_new_session=True, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return head, f"http://127.0.0.1:{dashboard}"


def _stop_head(head: subprocess.Popen) -> None:
    """End the head's process group and anything of it that outlives SIGTERM."""
    procs: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):
        procs.append(psutil.Process(head.pid))
        procs += procs[0].children(recursive=True)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(head.pid, signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=5)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    head.wait(timeout=10)


def _job_client(client_class, url: str, headers: dict):
    """The Job API client of the head at ``url``. Ray's SDK lets ``RAY_ADDRESS`` override the
    address it is given (``ray.dashboard.utils.get_address_for_submission_client``), and a test
    session runs with ``RAY_ADDRESS=local`` (never another helper's cluster): the client then
    looked for a local cluster ("Found multiple active Ray instances") and never reached the
    head. ``RAY_API_SERVER_ADDRESS`` wins over ``RAY_ADDRESS``; it is set while the client is
    built (the address is resolved once, there)."""
    saved = os.environ.get("RAY_API_SERVER_ADDRESS")
    os.environ["RAY_API_SERVER_ADDRESS"] = url
    try:
        return client_class(url, headers=headers)
    finally:
        if saved is None:
            del os.environ["RAY_API_SERVER_ADDRESS"]
        else:
            os.environ["RAY_API_SERVER_ADDRESS"] = saved


class Head:
    """A head node of its own (own temp dir and ports; never ``ray stop``, which would stop every
    Ray on the machine), and the Job API client of it. A head that exits while starting (a port
    taken between choosing it and binding it, a slow GCS on a loaded machine) is started again
    on new ports, up to three times; the last failure reports the tail of ``ray start``'s
    output. ``restart`` starts a fresh one (CI saw a head's dashboard die under a job)."""

    def __init__(self) -> None:
        self.temp = Path(tempfile.mkdtemp(prefix="rayhead", dir="/tmp"))  # socket path limits
        self.token = secrets.token_hex(32)  # Ray 2.60 heads use token authentication
        self.process: subprocess.Popen | None = None
        self.client = None
        self.restarts = 0
        try:
            self.start()
        except BaseException:
            shutil.rmtree(self.temp, ignore_errors=True)
            raise

    def start(self) -> None:
        from ray.job_submission import JobSubmissionClient

        headers = {"Authorization": f"Bearer {self.token}"}
        for attempt in range(3):
            self.process, url = _start_head(self.temp, self.token)
            deadline = time.monotonic() + 180
            error = None
            while self.process.poll() is None and time.monotonic() < deadline:
                try:
                    client = _job_client(JobSubmissionClient, url, headers)
                    client.list_jobs()
                    self.client = client
                    return
                except Exception as exc:
                    error = exc
                    time.sleep(1)
            _stop_head(self.process)
            assert attempt < 2, (
                f"the head never served its job API (3 starts; last error {error!r}):\n{self.log()}"
            )

    def restart(self) -> None:
        _stop_head(self.process)
        self.restarts += 1
        self.start()

    def log(self) -> str:
        return (self.temp / "start.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.process is not None:
            _stop_head(self.process)
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster_head():
    """One head for the module's jobs (a head takes tens of seconds to serve its job API); each
    test's jobs write an index of their own."""
    head = Head()
    try:
        yield head
    finally:
        head.stop()


@pytest.fixture
def ray_head(cluster_head):
    """The module's head, allowed one restart in each test (``_run_job``)."""
    cluster_head.restarts = 0
    return cluster_head


def _run_job(head: Head, entrypoint: str, timeout_s: float = 400) -> str:
    """Submit the job and wait for it. If the head itself goes away under the job (its API
    refuses connections), a fresh head runs the job once more: the job is idempotent on its
    --out (a killed run's lock is stale, its uncommitted rows are recovered)."""
    import requests

    try:
        return _submit_and_wait(head.client, entrypoint, timeout_s)
    except requests.exceptions.ConnectionError as exc:
        assert head.restarts == 0, f"the head went away twice: {exc}\n{head.log()}"
        head.restart()
        return _submit_and_wait(head.client, entrypoint, timeout_s)


def _submit_and_wait(client, entrypoint: str, timeout_s: float) -> str:
    from ray.job_submission import JobStatus

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            job_id = client.submit_job(
                entrypoint=entrypoint  # bookindex is installed where the head runs, as on a cluster
            )
            break
        except RuntimeError as exc:  # the head's job agent can come up after its API
            if "No available agent" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(2)
    while not (status := client.get_job_status(job_id)).is_terminal():
        assert time.monotonic() < deadline, client.get_job_logs(job_id)[-3000:]
        time.sleep(1)
    logs = client.get_job_logs(job_id)
    assert status == JobStatus.SUCCEEDED, logs[-3000:]
    return logs


@pytest.mark.slow
def test_index_job_submitted_to_a_cluster(ray_head, shared_data, tmp_path):
    pdfs = sorted((shared_data / "pdf_fixtures" / "pypdf").glob("*.pdf"))[:3]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for pdf in pdfs:
        shutil.copy(pdf, corpus / pdf.name)
    out = tmp_path / "index"
    # what `ray job submit -- bookindex index ...` does (docs/cluster.md)
    entry = f"{BOOKINDEX} index {corpus} --out {out} --no-enrich"
    logs = _run_job(ray_head, entry)
    assert "documents ok=" in logs

    docs = pl.from_arrow(lance_store.read_table(out, DOCUMENTS))
    assert sorted(Path(u).name for u in docs["uri"]) == [p.name for p in pdfs]
    assert docs["doc_id"].n_unique() == len(pdfs)
    nodes = pl.from_arrow(lance_store.read_table(out, NODES, ["doc_id", "node_id"]))
    assert nodes["node_id"].n_unique() == nodes.height > 0
    ok = docs.filter(pl.col("status") == "ok")
    assert ok.height >= 2
    counts = dict(nodes.group_by("doc_id").len().iter_rows())
    assert counts == dict(zip(ok["doc_id"], ok["n_nodes"], strict=True))

    # the scheduled incremental re-index: nothing new, nothing rewritten
    version = _version(out, NODES)
    logs = _run_job(ray_head, entry)
    assert f"skipped={len(pdfs)}" in logs
    assert _version(out, NODES) == version


@pytest.mark.slow
def test_model_index_job_on_a_head_without_gpus(ray_head, shared_data, tmp_path):
    """--models openai through the Job API on a head with --num-gpus 0: the driver only checks
    the configuration; the model work runs in the processors' workers against the endpoint."""
    import json

    from tests.fakes import FakeOpenAI, image_parts

    def answer(body: dict) -> str:
        if image_parts(body):
            return "FAKE DESCRIPTION of a table"
        return json.dumps({"entities": [], "relations": [], "decisions": [], "choice": 0})

    fake = FakeOpenAI(answer)
    try:
        pdf = shared_data / "docugami/nih-clinical-trial-protocols/data/v1/docs"
        pdf = pdf / "NCT06158269_Prot_000.pdf"  # 5 pages, 4 tables
        models = tmp_path / "models.json"
        models.write_text(json.dumps({"base_url": fake.url, "model": "fake", "max_retries": 0}))
        out = tmp_path / "index"
        entry = f"{BOOKINDEX} index {pdf} --out {out} --models openai --model-config {models}"
        logs = _run_job(ray_head, entry)
        assert "documents ok=1" in logs
    finally:
        fake.close()
    nodes = pl.from_arrow(lance_store.read_table(out, NODES, ["kind", "summary"]))
    tables = nodes.filter(pl.col("kind") == "table")
    assert tables.height >= 1
    assert set(tables["summary"]) == {"FAKE DESCRIPTION of a table"}
    assert len(fake.chats) > tables.height  # descriptions, entities, refiner


def _version(index_dir: Path, table: str) -> int:
    return lance.dataset(lance_store.table_path(index_dir, table)).version
