"""berth: a multi-cluster workload scheduler on etcd.

``berth.store`` (keys, documents, the etcd session), ``berth.controllers``
(scheduler, propagator, metrics-cache and their runtime), ``berth.bootstrap``
(loading YAML) and ``berth.cli`` (the ``berth`` command).
"""

from berth import native

native.install()
