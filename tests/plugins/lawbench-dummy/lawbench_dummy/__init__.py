"""A minimal third-party law: arithmetic predictions and a scripted sampler, for lawbench's tests."""
