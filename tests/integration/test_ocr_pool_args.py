"""The OCR stage's actor pool is sized to its batches. Here, not in the unit tier: the pool's
``compute`` is a Ray ``ActorPoolStrategy``, so building it imports Ray."""


def test_a_few_pages_are_spread_over_the_pool_and_no_worker_is_left_without_a_call():
    """Batches of 4 on 2 workers: a few pages go one a call (the worker free first takes
    the next: 4 pages are 4 calls, not 1 call of 4 on one worker while the other core idles),
    1 page starts 1 worker (each worker holds a CPU while it loads the models), 12 pages 3 a
    call, 40 pages 4; the engine's threads stay those of the configured pool."""
    from bookindex.operators.config import BookindexConfig
    from bookindex.pipelines.ocr_stage import ocr_args

    config = BookindexConfig()
    pools = {}
    for pages in (1, 3, 4, 5, 12, 40, None):
        args = ocr_args(config, workers=2, cpus=2, pages=pages)
        threads = args["fn_constructor_kwargs"]["threads"]
        pools[pages] = (args["compute"].max_size, args["batch_size"], threads)
    assert pools == {
        1: (1, 1, 1),
        3: (2, 1, 1),
        4: (2, 1, 1),
        5: (2, 1, 1),
        12: (2, 3, 1),
        40: (2, 4, 1),
        None: (2, 4, 1),
    }
