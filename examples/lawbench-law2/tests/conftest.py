# The fixtures lawbench ships for plugin authors: make_anchor, evaluate_anchor, law_anchors,
# lawbench_plugin, lawbench_resources (lawbench/testing.py).
pytest_plugins = ["lawbench.testing"]
