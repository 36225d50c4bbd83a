"""lawbench — re-proves published performance laws of low-bit LLM inference on real hardware.

Writing a law plugin (the whole surface):

1. Subclass :class:`lawbench.core.law.Law`; set ``name`` (lower-case, unique), ``title`` and
   ``anchors_package`` (an importable package holding your ``*.toml`` anchor files).
2. Implement what your law can do: ``predict`` (runs anywhere), ``sampler`` (measures on a
   machine) and/or ``census`` (counts path labels from a real run).
3. Register it with the ``lawbench_laws`` hook in a module of your package::

       from lawbench.core.hookspecs import hookimpl

       @hookimpl
       def lawbench_laws():
           yield MyLaw

4. Point the entry-point group ``lawbench`` at that module in your ``pyproject.toml``::

       [project.entry-points.lawbench]
       mylaw = "lawbench_mylaw.plugin"

Name third-party distributions ``lawbench-<law>``. ``lawbench.testing`` has fixtures for your tests.
Set ``LAWBENCH_DISABLE_PLUGIN_AUTOLOAD=1`` to load built-in laws only, and
``LAWBENCH_TRACE=1`` to trace every hook call.
"""

__version__ = "0.1.0"
