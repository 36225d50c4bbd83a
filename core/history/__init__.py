"""The history: every finished run in one SQLite file, and what reads it (compare, drift,
stale runners, the nightly gate, import and export, workflow bindings).
"""
