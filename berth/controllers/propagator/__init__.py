"""berth's propagator: observes clusters (health, capacity, custom resources) and puts
each placed application on the clusters its Binding names (push, or as work for a
pull cluster's agent)."""
