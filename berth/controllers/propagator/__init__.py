"""berth's propagator: observes clusters (health, custom resources); applying
placed applications to them comes next."""
