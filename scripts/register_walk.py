"""The register walk's counts, and its still-uncovered list written afresh (issue 34).

    python scripts/register_walk.py            # counts: walked, covered, not a claim by class, uncovered
    python scripts/register_walk.py --write    # rewrite sources/register/still-uncovered.toml
    python scripts/register_walk.py --by-entry # the uncovered figures per entry, most first

Rewrite the list only after covering figures (an inventory line) or naming them (a reviewed class or
fragment): tests/test_register_numbers.py fails when the list grows past its ceiling."""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from lawbench.core.claims.inventory import load_inventory  # noqa: E402
from lawbench.core.claims.register_walk import allowlist_toml, load_not_claims, walk  # noqa: E402
from test_seed_numbers import _citing  # noqa: E402

HEADER = """# The register's figures that no inventory line accounts for yet, per entry and field, as printed
# (issue 34; tests/test_register_numbers.py). Each is a number of the register that no inventory line
# encodes or explains and no reviewed class or fragment names (a real figure, or a name no class yet
# takes): the list may only shrink. Cover a figure with an inventory line (or
# name it in not-claims.toml when it is an identifier, with why), then run
# `python scripts/register_walk.py --write`.
"""


def main() -> int:
    reg_dir = ROOT / "sources" / "register"
    register = json.loads((reg_dir / "quantprobe-REGISTER.json").read_text(encoding="utf-8"))
    lines = [lc.claim for lc in load_inventory().claims.values()]
    numbers = walk(register, lines, _citing(), load_not_claims(reg_dir / "not-claims.toml"))
    counts = Counter(n.status for n in numbers)
    print(f"walked {len(numbers)}: covered {counts['covered']}, uncovered {counts['uncovered']}, "
          f"fragment {counts['fragment']}")
    for status, n in sorted(counts.items()):
        if status.startswith("class:"):
            print(f"  not a claim, {status[6:]}: {n}")
    by_kind = Counter(n.entry[0] for n in numbers if n.status == "uncovered")
    print("uncovered by list: " + ", ".join(f"{k}: {v}" for k, v in sorted(by_kind.items())))
    if "--by-entry" in sys.argv[1:]:
        for entry, n in Counter(n.entry for n in numbers if n.status == "uncovered").most_common():
            print(f"  {entry}: {n}")
    if "--write" in sys.argv[1:]:
        (reg_dir / "still-uncovered.toml").write_text(HEADER + "\n" + allowlist_toml(numbers), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
