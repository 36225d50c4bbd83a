#!/usr/bin/env python3
"""A stand-in for a runner's minfer suite command (docs/minfer-contract.md §10): answers the
revision probe like the engine command, else runs real `cargo test` on tests/standin/suite_crate
(the build goes to $CARGO_TARGET_DIR; set it outside the repository). Standard library only.
MINFER_STANDIN_REVISION names the revision the probe reports (default r54)."""
import json
import os
import sys

CRATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suite_crate", "Cargo.toml")

if os.environ.get("LAWBENCH_MINFER_PROBE") == "revision":
    print(json.dumps({"minfer_revision": os.environ.get("MINFER_STANDIN_REVISION", "r54"), "minfer_contract": 1}))
    sys.exit(0)
os.execvp("cargo", ["cargo", "test", "--offline", "--no-fail-fast", "--manifest-path", CRATE])
