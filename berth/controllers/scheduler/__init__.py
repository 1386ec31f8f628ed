"""berth's scheduler: Krake's placement inside a Kubernetes-style scheduling framework."""
