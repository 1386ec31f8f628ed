"""The inventory process: a hub's ClusterProfiles kept as berth's Clusters
(docs/inventory.md)."""
