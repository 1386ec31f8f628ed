"""``berth agent``: the propagator's executor in a pull cluster (docs/agents.md).

It runs next to (or in) one member cluster with that cluster's credentials
only, dials out to etcd, and carries out the cluster's work
(``/berth/v1/work/<cluster>/``) with the same executor, health rules, drift
watches and Pod and Node trackers the propagator uses for the clusters it
dials itself; it answers under ``/berth/v1/agents/<cluster>/``: a report per
work and a heartbeat on its lease. It imports nothing of the propagator's
planning side (the applier, rollouts, the shard, the status writer).
"""
