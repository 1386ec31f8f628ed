"""berth's controllers: the shared runtime, and (in later issues) the scheduler,
the propagator and the metrics-cache, which never import each other."""
