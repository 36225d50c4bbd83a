"""One run of lawbench, whatever command started it: ``RunContext`` (what a run needs before the
first anchor) and ``Run`` (resources, signals, evaluation, the exit code, saving the record).
`lawbench run` (through pytest), `lawbench ab` and `lawbench census plant` are its modes."""
from lawbench.core.run.context import RunContext
from lawbench.core.run.run import Run, interrupted_result

__all__ = ["Run", "RunContext", "interrupted_result"]
