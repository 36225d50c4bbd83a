"""The `lawbench` command line: the entry point (main) and one module per command.
Nothing in lawbench imports these but the entry point; they import every other layer.
"""
