"""berth: a multi-cluster workload scheduler on etcd.

``berth.store`` (keys, documents, the etcd session), ``berth.controllers``
(scheduler, propagator, metrics-cache and their runtime), ``berth.bootstrap``
(loading YAML) and ``berth.cli`` (the ``berth`` command).

berth is plain Python, as it ships and as it is tested (docs/development.md "Plain
Python, measured").
"""
