"""berth's metrics-cache: current metric values from providers into leased etcd keys."""
