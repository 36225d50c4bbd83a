import lawbench_not_installed_anywhere  # noqa: F401  -- the dependency its author forgot to declare
