import lawbench


@lawbench.hookimpl
def lawbench_laws():
    raise RuntimeError("the author's bug")
