"""Plugins that fail as real ones do: a dependency that is not installed, a hook that raises."""
