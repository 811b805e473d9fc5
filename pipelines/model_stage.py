"""Stages that own a model: Ray Data UDF classes whose ``__init__`` loads the configured backend
once per worker, run with ``map_batches(Stage, fn_constructor_kwargs=..., compute=...,
num_gpus=...)`` (the layout of Ray's own ``ray.data.llm`` stages: a stateful UDF class, and the
``map_batches`` arguments built beside it from configuration). The pool is a
``ray.data.ActorPoolStrategy`` (``compute=``; Ray 2.51 deprecated ``concurrency=``).

The driver builds the arguments (``model_stage_args``) and never loads a model: it only checks
the configuration (``operators.models.check_config``).
"""

from __future__ import annotations

import warnings
from typing import Any

from bookindex.operators.config import BookindexConfig, ModelConfig
from bookindex.operators.models import load_backend


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
    gpus = config.index.stage_gpus(config.models.backend, config.models.embed_device)
    size = pool or workers
    args: dict[str, Any] = {
        "fn_constructor_kwargs": {"models": config.models.to_dict(), **constructor},
        "compute": actor_pool(size, autoscale=gpus > 0),
    }
    if gpus > 0:
        args["num_gpus"] = gpus
    return args


def actor_pool(size: int, autoscale: bool = False):
    """A Ray Data actor pool of ``size`` workers (``compute=`` of ``map_batches``); with
    ``autoscale``, 1 to ``size`` (a pool of GPU workers never waits for more GPUs than the
    cluster has). One call in flight a worker: Ray Data's default (twice its concurrency)
    queues calls on the first worker whose models are loaded while the others still load
    them, and a few long calls (OCR pages, a small corpus's documents) then run one after the
    other on one worker while the rest of the pool idles (4 OCR pages: 85 s on one worker of
    two). The next call goes to the first worker that is free."""
    from ray.data import ActorPoolStrategy

    if autoscale:
        return ActorPoolStrategy(min_size=1, max_size=size, max_tasks_in_flight_per_actor=1)
    return ActorPoolStrategy(size=size, max_tasks_in_flight_per_actor=1)


def bounded_retries(config: BookindexConfig, actors: bool = False) -> dict[str, int]:
    """The ``map`` / ``map_batches`` arguments that bound retries (``index.task_retries``): a
    task is retried that many times; with ``actors``, a pool's actor whose process died is
    restarted that many times, and its tasks retried as often, never forever.

    Ray 2.60 deprecates passing these as ``**ray_remote_args`` of ``map`` / ``map_batches``
    (``RayDeprecationWarning``: removed in Ray 2.64) but has no named parameter for them yet:
    its named remote parameters are ``label_selector``, ``fallback_strategy``, ``max_calls``,
    ``resources``, ``accelerator_type`` and ``runtime_env`` (``ray.data.dataset.
    _merge_named_ray_remote_args``), and without these keys Ray Data retries a task and
    restarts an actor forever (-1). So the bound stays here, the one place that sets it, until
    the pinned Ray offers a named replacement."""
    bounded = config.index.task_retries
    # the deprecation is known (above) and has no replacement in the pinned Ray: not shown to
    # the job's user on every run
    warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
    if actors:
        return {"max_restarts": bounded, "max_task_retries": bounded}
    return {"max_retries": bounded}
