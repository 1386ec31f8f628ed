"""berth: a multi-cluster workload scheduler on etcd.

``berth.store`` (keys, documents, the etcd session), ``berth.controllers``
(scheduler, propagator, metrics-cache and their runtime), ``berth.bootstrap``
(loading YAML) and ``berth.cli`` (the ``berth`` command).

Importing berth does nothing else: a process's entry (``berth.cli.main``, the
test suite's ``conftest``, a benchmark) decides whether the compiled hot path is
loaded (:func:`berth.native.install`).
"""
