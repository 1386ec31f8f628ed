"""The exporter: berth's clusters and decisions in the fleet's standard shapes
(ClusterProfile, PlacementDecision, OCM's PlacementDecision for Argo CD), written into
the Kubernetes APIs that Export documents name (docs/argocd.md)."""
