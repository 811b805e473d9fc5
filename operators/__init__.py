"""Plain-Python building blocks of bookindex: no Ray, no table writes (docs/architecture.md §1).

Sub-packages by concern, each importing only the ones listed after it: ``eval``, ``query``,
``graph``, ``structure``, then ``parsing`` / ``walks`` / ``models``, then ``config`` / ``kinds``.
"""
