"""Stages that own a model: Ray Data UDF classes whose ``__init__`` loads the configured backend
once per worker, run with ``map_batches(Stage, fn_constructor_kwargs=..., concurrency=...,
num_gpus=...)`` (the layout of Ray's own ``ray.data.llm`` stages: a stateful UDF class, and the
``map_batches`` arguments built beside it from configuration).

The driver builds the arguments (``model_stage_args``) and never loads a model: it only checks
the configuration (``operators.models.check_config``).
"""

from __future__ import annotations

from typing import Any

from operators.config import BookindexConfig, ModelConfig
from operators.models import load_backend


class ModelStage:
    """Base of the UDF classes that own a model: ``self.backend``, loaded once per worker.
    ``models``: ``ModelConfig.to_dict()`` (the API key stays out; workers read it from their
    environment)."""

    def __init__(self, models: dict) -> None:
        self.models = ModelConfig(**models)
        self.backend = load_backend(self.models)


def model_stage_args(
    config: BookindexConfig, workers: int, pool: int | None, **constructor: Any
) -> dict[str, Any]:
    """``map_batches`` / ``map_groups`` arguments of a model stage: its constructor's keyword
    arguments (``models`` added), the worker pool and the GPUs per worker. ``pool``: the
    configured pool size (None: ``workers``). A stage that asks for GPUs gets an autoscaling
    pool of 1 to ``pool`` workers, so that it never waits for more GPUs than the cluster has."""
    gpus = config.index.stage_gpus(config.models.backend)
    size = pool or workers
    args: dict[str, Any] = {
        "fn_constructor_kwargs": {"models": config.models.to_dict(), **constructor},
        "concurrency": (1, size) if gpus > 0 else size,
    }
    if gpus > 0:
        args["num_gpus"] = gpus
    return args


def bounded_retries(config: BookindexConfig, actors: bool = False) -> dict[str, int]:
    """The ``map`` / ``map_batches`` arguments that bound retries (``index.task_retries``): a
    task is retried that many times; with ``actors``, a pool's actor whose process died is
    restarted that many times, and its tasks retried as often, never forever."""
    bounded = config.index.task_retries
    if actors:
        return {"max_restarts": bounded, "max_task_retries": bounded}
    return {"max_retries": bounded}
