"""The OCR stage's actor pool is sized to its batches. Here, not in the unit tier: the pool's
``compute`` is a Ray ``ActorPoolStrategy``, so building it imports Ray."""


def test_the_ocr_pool_has_no_worker_without_a_batch():
    """A run with 5 pages to OCR in batches of 4 starts 2 workers, with 3 pages 1 (each
    worker holds a CPU while it loads the models); the engine's threads stay those of the
    configured pool."""
    from bookindex.operators.config import BookindexConfig
    from bookindex.pipelines.ocr_stage import ocr_args

    config = BookindexConfig()
    pools = {}
    for pages in (1, 3, 4, 5, 40, None):
        args = ocr_args(config, workers=2, cpus=2, pages=pages)
        pools[pages] = (args["compute"].max_size, args["fn_constructor_kwargs"]["threads"])
    assert pools == {1: (1, 1), 3: (1, 1), 4: (1, 1), 5: (2, 1), 40: (2, 1), None: (2, 1)}
