"""What plugins and decisions share below them: replica division (``replicas``),
label selectors (``selectors``), constraint expressions (``expressions``) and
metric values as columns (``metric_columns``). Nothing here knows a plugin."""
