"""Benchmarks of tickwork against its peers: ``python -m bench --size small``.

One module per metric (:mod:`bench.dispatch`, :mod:`bench.lateness`, :mod:`bench.tick`,
:mod:`bench.nextfire`, :mod:`bench.bulk`), sharing :mod:`bench.harness`. The peers
(procrastinate, APScheduler 3, croniter, cronsim) come with the ``bench`` extra.
"""
