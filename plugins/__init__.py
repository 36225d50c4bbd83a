"""Built-in law plugins. Each plugin's ``__init__`` only registers; the law lives in its own module."""
