"""The run record and what is written from it: run.json, the step summary and the terminal
table, the checks a record from elsewhere must pass, contribution bundles, the gate's view.
"""
