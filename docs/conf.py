"""Sphinx configuration of berth's documentation (``scripts/docs.sh`` builds it)."""

project = "berth"
author = "berth's developers"
copyright = "2026, berth's developers"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 4  # links to a section: page.md#its-title
myst_enable_extensions = ["deflist"]  # the glossary
html_theme = "alabaster"
html_theme_options = {"description": "a multi-cluster workload scheduler",
                      "fixed_sidebar": True}
html_sidebars = {"**": ["about.html", "navigation.html", "searchbox.html"]}
