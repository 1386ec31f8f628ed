"""berth's test kit, installed from the checkout (``pip install -e testkit``, as
``scripts/setup.sh`` does) for the tests, the demo and the benchmarks:

* ``servers``: real servers on loopback — etcd (one member or a cluster),
  Kubernetes clusters that work (API server, controllers, scheduler, kwok),
  Prometheus with a Pushgateway, a Kafka broker, a ksqlDB stand-in;
* ``scheduler_env``: berth's processes run as subprocesses, and helpers that
  write documents and wait for what the processes write;
* ``availability``: a sampler of the Deployments available on clusters;
* ``fakes``: the scheduler's snapshot and the propagator's clients, in memory;
* ``figures``: percentiles and the like, as the benchmarks print them.

It finds the servers' install scripts in the checkout it was installed from.
"""
