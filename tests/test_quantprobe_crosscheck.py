"""Law 4 against the register's own planner: lawbench and quantprobe price the same inputs.

Every case of tests/data/quantprobe/cases.toml is one model file (a sparse GGUF: real header, no
tensor data) priced by `lawbench predict` and by `quantprobe plan` on the reference desktop
(profile gtx1060 = quantprobe's --machine 2016-xmp). Each input the two tools price with and each
placement's tok/s and fit are compared; every difference beyond TOLERANCE must be matched by an
entry of explained.toml, and the entry is checked, not trusted:

* its recorded values must still be the tools' values (else it is stale: the law moved);
* each cause it names must still differ in that case (else stale);
* for a price, quantprobe re-priced with the named causes' inputs replaced by lawbench's
  (tests/_quantprobe_reader.align) must land within TOLERANCE of lawbench: the causes are the
  whole story, or the test says what is left.

docs/quantprobe.md is rendered from the same run and must match. After a deliberate change run
`LAWBENCH_QUANTPROBE_WRITE=1 pytest tests/test_quantprobe_crosscheck.py`: it rewrites the doc and
prints an explained.toml entry for each unexplained difference (values filled in, causes
proposed: the test then checks them like any other).
Skipped only where quantprobe is not installed (the `test` extra pins it).
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import pytest

pytest.importorskip("quantprobe")

from _engine_fixtures import llama  # noqa: F401,E402  (builds the ladder's missing files)
from lawbench.core.store.gguf_header import read_header
from lawbench.core.toml_read import read_toml
import _quantprobe_reader as Q

HERE = Path(__file__).parent
DATA = HERE / "data" / "quantprobe"
DOC = HERE.parent / "docs" / "quantprobe.md"
SEED = HERE.parent / "sources" / "seeds" / "000_4a91008eeaefec79.txt"
WRITE = os.environ.get("LAWBENCH_QUANTPROBE_WRITE") == "1"

TOLERANCE = 0.02  # a relative difference above this needs an explanation
MATCH = 1e-3  # an entry's recorded value matches the tools' within this (values are recorded to 5 figures)
OUTPUT_TERMS = ("tok_s", "fits")

Value = Union[float, bool, None]


# --------------------------------------------------------------------------- the cases


@dataclass
class Case:
    id: str
    ctx: int
    placements: list[str]
    model: str
    mix: Optional[str] = None
    quantprobe: Optional[dict] = None  # quantprobe's preset flags where lawbench's model has no tensors
    seed: Optional[str] = None


def load_cases() -> tuple[str, list[Case]]:
    data = read_toml(DATA / "cases.toml")
    cases = [Case(**c) for c in data["case"]]
    ladder = data.get("ladder")
    if ladder:
        for model_id in json.loads((DATA / "ladder.json").read_text(encoding="utf-8")):
            cases.append(Case(id=f"{model_id}.d{ladder['ctx']}", ctx=ladder["ctx"],
                              placements=list(ladder["placements"]), model=f"ladder:{model_id}"))
    return data["profile"], cases


def ladder_dump(model_id: str) -> dict:
    """A rung of the synthetic ladder as a header dump: the factory's layout, the file's types."""
    from lawbench.core.store.catalog import load_catalog
    from lawbench.core.store.synthetic import _tensors

    entry = json.loads((DATA / "ladder.json").read_text(encoding="utf-8"))[model_id]
    spec = load_catalog().get(model_id)
    tensors = [[name, list(reversed(shape)), "F32" if len(shape) == 1 else entry["other"].get(name, entry["type"])]
               for name, shape, _ in _tensors(spec)]
    return {"architecture": spec.architecture, "metadata": entry["metadata"], "tensors": tensors,
            "file_size": entry["file_size"], "file_type": entry["file_type"]}


def model_file(case: Case, folder: Path) -> tuple[Optional[Path], Any]:
    """The sparse GGUF both tools read, and the shape lawbench reads from it (or the manifest)."""
    from lawbench.plugins.law4.models import load_model

    path = folder / f"{case.id}.gguf"
    kind, _, name = case.model.partition(":")
    if kind == "manifest":
        shape = load_model(case.model)
        if not shape.has_tensors:
            return None, shape
        if case.mix:
            from lawbench.plugins.law4.quantmix import apply_mix

            shape = apply_mix(shape, case.mix)
        Q.sparse_from_shape(shape, path)
    elif kind == "dump":
        Q.sparse_from_dump(json.loads((DATA / name).read_text(encoding="utf-8")), path)
    elif kind == "ladder":
        Q.sparse_from_dump(ladder_dump(name), path)
    else:
        raise ValueError(f"cases.toml: {case.id}: model {case.model!r}")
    return path, Q.read_shape(path)


@dataclass
class Result:
    case: Case
    lawbench: Q.Side
    quantprobe: Q.Side
    planner: Q.Planner
    shape: Any


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> list[Result]:
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.laws.registry import get_registry

    profile_id, cases = load_cases()
    profile = plugin_profiles(get_registry())[profile_id]
    machine = Q.MACHINE_FOR_PROFILE[profile_id]
    folder = tmp_path_factory.mktemp("quantprobe")
    out = []
    for case in cases:
        path, shape = model_file(case, folder)
        lb = Q.lawbench_side(shape, profile, case.ctx, case.placements)
        planner = Q.quantprobe_plan(machine, case.ctx, gguf=path, preset=case.quantprobe)
        out.append(Result(case, lb, Q.quantprobe_side(planner, case.placements), planner, shape))
    return out


# --------------------------------------------------------------------------- the explanations


def load_explained() -> tuple[dict[str, dict], list[dict]]:
    data = read_toml(DATA / "explained.toml")
    causes, entries = data.get("cause", {}), data.get("difference", [])
    for i, e in enumerate(entries):
        where = f"explained.toml difference #{i + 1} ({e.get('case', '*')} {e.get('term')})"
        assert set(e) <= {"case", "placement", "term", "lawbench", "quantprobe", "causes", "unaligned"}, where
        assert e.get("causes"), f"{where}: name its causes"
        for c in e["causes"]:
            assert c in causes, f"{where}: unknown cause {c!r} (define [cause.{c}])"
        assert (e["term"] in OUTPUT_TERMS) == ("placement" in e), f"{where}: tok_s / fits need a placement"
    for name, c in causes.items():
        assert set(c) <= {"input", "align", "follows", "why", "seed_quote", "quantprobe_quote"}, name
        assert c.get("align") in Q.ALIGNMENTS, f"cause {name}: align must be one of {Q.ALIGNMENTS}"
        assert c.get("follows") in ("lawbench", "quantprobe", "both", "neither"), f"cause {name}: follows"
    return causes, entries


def _decode(v: Any) -> Value:
    return None if v == "none" else v


def _encode(v: Value) -> Any:
    if v is None:
        return '"none"'
    if isinstance(v, bool):
        return "true" if v else "false"
    return f"{v:.5g}"


def differs(a: Value, b: Value) -> bool:
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return a != b
    return abs(a - b) > TOLERANCE * max(abs(a), abs(b))


def same_value(recorded: Any, now: Value) -> bool:
    recorded = _decode(recorded)
    if recorded is None or now is None or isinstance(recorded, bool) or isinstance(now, bool):
        return recorded == now
    return math.isclose(recorded, now, rel_tol=MATCH)


@dataclass
class Diff:
    case: str
    placement: Optional[str]
    term: str
    lawbench: Value
    quantprobe: Value


def terms(r: Result) -> list[Diff]:
    """Every compared term of a case, differing or not."""
    out = [Diff(r.case.id, None, k, r.lawbench.inputs[k], r.quantprobe.inputs[k]) for k in Q.INPUTS]
    for p in r.case.placements:
        lb, qp = r.lawbench.prices[p], r.quantprobe.prices[p]
        out += [Diff(r.case.id, p, "tok_s", lb.tok_s, qp.tok_s), Diff(r.case.id, p, "fits", lb.fits, qp.fits)]
    return out


def differences(r: Result) -> list[Diff]:
    return [d for d in terms(r) if differs(d.lawbench, d.quantprobe)]


def candidates(d: Diff, entries: list[dict]) -> list[dict]:
    return [e for e in entries if e["term"] == d.term and e.get("case", d.case) == d.case
            and e.get("placement") == d.placement]


def explain(d: Diff, entries: list[dict]) -> tuple[Optional[dict], Optional[dict]]:
    """(the entry whose values match, a same-keyed entry whose values do not)."""
    cands = candidates(d, entries)
    hit = next((e for e in cands if same_value(e["lawbench"], d.lawbench)
                and same_value(e["quantprobe"], d.quantprobe)), None)
    return hit, (None if hit else next(iter(cands), None))


def suggestion(d: Diff, causes: list[str]) -> str:
    lines = ["[[difference]]"]
    if d.term not in Q.INPUTS or d.term in ("kv_bytes_per_pos", "weight_bytes", "model_bytes"):
        lines.append(f'case = "{d.case}"')
    if d.placement:
        lines.append(f'placement = "{d.placement}"')
    lines += [f'term = "{d.term}"', f"lawbench = {_encode(d.lawbench)}",
              f"quantprobe = {_encode(d.quantprobe)}", f"causes = {json.dumps(causes)}"]
    return "\n".join(lines)


def residual(r: Result, d: Diff, entry: dict, cause_table: dict[str, dict]) -> Optional[str]:
    """Re-price quantprobe with the entry's causes aligned to lawbench: None when that closes the
    difference (or, for an `unaligned` entry, when it does not), else what is wrong."""
    aligns = {cause_table[c]["align"] for c in entry["causes"]} - {"none"}
    if not aligns:
        return None  # every cause says quantprobe has no input for it: nothing to re-price
    aligned = Q.align(r.planner, r.lawbench, d.placement, aligns)
    now = aligned.tok_s if d.term == "tok_s" else aligned.fits
    left = differs(d.lawbench, now)
    said = (f"{d.case} {d.placement} {d.term}: lawbench {_encode(d.lawbench)}, quantprobe aligned on "
            f"{sorted(aligns)} {_encode(now)} (was {_encode(d.quantprobe)})")
    if left and not entry.get("unaligned"):
        return f"{said}: the causes do not explain it"
    if not left and entry.get("unaligned"):
        return f"{said}: the alignment closes it now, so `unaligned` is stale"
    return None


# The inputs each placement's price reads, for proposing causes (the test then checks them).
READS = {"gpu": ("rate.vram", "rate.kv", "kv_bytes_per_pos", "weight_bytes"),
         "experts-cpu": ("rate.vram", "rate.ram", "rate.kv", "kv_bytes_per_pos", "weight_bytes"),
         "cpu": ("rate.ram", "rate.kv", "kv_bytes_per_pos", "weight_bytes", "k_us.cpu", "rate.disk")}


def propose(r: Result, d: Diff, cause_table: dict[str, dict]) -> list[str]:
    """Causes to start a new entry from: for an input, every cause about it; for a price, every
    cause about an input it reads that differs here, plus the price-only causes that apply."""
    if d.term in Q.INPUTS:
        return [c for c, v in cause_table.items() if v.get("input") == d.term]
    if d.lawbench is None:
        return ["no-tensors"]
    differing = {t.term for t in differences(r) if t.term in Q.INPUTS}
    out = [c for c, v in cause_table.items() if v.get("input") in differing & set(READS[d.placement])]
    if d.placement == "cpu" and (r.lawbench.prices["cpu"].weight_bytes.get("io")
                                 or "disk" in r.quantprobe.prices["cpu"].row):
        out.append("disk-page-cache")
    if d.placement == "cpu" and r.case.ctx and any(r.shape.sliding_layers()):
        out.append("swa-cpu-attention")
    return out


def check(results: list[Result], causes: dict[str, dict], entries: list[dict]) -> dict[str, list[str]]:
    """Every finding of the cross-check, by kind: unexplained, stale, wrong."""
    found: dict[str, list[str]] = {"unexplained": [], "stale": [], "wrong": []}
    used: set[int] = set()
    for r in results:
        by_key = {(d.placement, d.term): d for d in terms(r)}
        for d in differences(r):
            hit, moved = explain(d, entries)
            if hit is None:
                kind = "stale" if moved else "unexplained"
                was = (f" (recorded: lawbench {moved['lawbench']}, quantprobe {moved['quantprobe']})"
                       if moved else "")
                found[kind].append(f"{d.case} {d.placement or ''} {d.term}: lawbench {_encode(d.lawbench)}, "
                                   f"quantprobe {_encode(d.quantprobe)}{was}\n{suggestion(d, propose(r, d, causes))}")
                if moved:
                    used.add(id(moved))
                continue
            used.add(id(hit))
            for c in hit["causes"]:
                key = causes[c].get("input")
                if key and not differs(by_key[(None, key)].lawbench, by_key[(None, key)].quantprobe):
                    found["stale"].append(f"{d.case} {d.placement or ''} {d.term}: cause {c!r} names "
                                          f"input {key}, which no longer differs here")
                if d.term in Q.INPUTS and key not in (None, d.term):
                    found["wrong"].append(f"{d.case} {d.term}: cause {c!r} is about {key}, not {d.term}")
            if d.term in OUTPUT_TERMS:
                left = residual(r, d, hit, causes)
                if left:
                    found["wrong"].append(left)
    for e in entries:
        if id(e) not in used:
            found["stale"].append(f"explained.toml: no difference matches {e.get('case', '*')} "
                                  f"{e.get('placement', '')} {e['term']} (lawbench {e['lawbench']}, "
                                  f"quantprobe {e['quantprobe']}): the tools agree now, or the case is gone")
    return found


# --------------------------------------------------------------------------- the tests


def test_quantprobe_is_the_pinned_release():
    import quantprobe

    assert quantprobe.__version__ == Q.QUANTPROBE_VERSION, \
        f"the test extra pins quantprobe=={Q.QUANTPROBE_VERSION}; {quantprobe.__version__} is installed"


def test_the_sparse_file_carries_the_header(tmp_path):
    """Both tools read the same tensors from the sparse file, which is as long as the real file
    and takes (almost) no disk."""
    from quantprobe.spec import from_gguf

    dump = json.loads((DATA / "gemma3-270m-q4_k_m.json").read_text(encoding="utf-8"))
    path = Q.sparse_from_dump(dump, tmp_path / "g.gguf")
    h = read_header(path, use_cache=False)
    assert [[t.name, list(t.shape), t.type_name] for t in h.tensors] == dump["tensors"]
    assert (h.file_size, h.data_offset, h.metadata["general.file_type"]) == \
        (dump["file_size"], dump["data_offset"], dump["file_type"])
    spec = from_gguf(str(path))
    n = sum(math.prod(s) for _, s, _ in dump["tensors"])
    assert spec["t"] == pytest.approx(n / 1e9) and spec["n_layer"] == dump["metadata"]["block_count"]
    assert os.stat(path).st_blocks * 512 < 16 * 2 ** 20 < os.path.getsize(path)


@pytest.mark.parametrize("model_id", ["gemma3-270m-q4_k_m", *json.loads((DATA / "ladder.json").read_text(encoding="utf-8"))])
def test_header_dumps_are_the_files(model_id, request):
    """Each dump is its file's header: the file as lawbench builds or fetches it (once, into the cache)."""
    from lawbench.core.paths import cache_root

    if model_id.startswith("syn-"):
        from lawbench.core.engines.bench import quantize
        from lawbench.core.store.catalog import load_catalog
        from lawbench.core.store.synthetic import build_synthetic

        entry = json.loads((DATA / "ladder.json").read_text(encoding="utf-8"))[model_id]
        dump, path = ladder_dump(model_id), cache_root() / "synthetic" / entry["file"]
        if not path.is_file():  # the real llama-quantize writes it, as for an anchor run
            llama = request.getfixturevalue("llama")
            spec = load_catalog().get(model_id)
            built = build_synthetic(spec, cache_dir=path.parent,
                                    quantize=lambda s, d, t: quantize(llama, s, d, t, timeout_s=600))
            assert built == path, f"{model_id}'s spec now names {built.name}, the dump {entry['file']}"
    else:
        from lawbench.core.store.real import ModelStore

        dump = json.loads((DATA / f"{model_id}.json").read_text(encoding="utf-8"))
        path = ModelStore().path(model_id)
        assert path.name == dump["file"]
    h = read_header(path)
    assert sorted([t.name, list(t.shape), t.type_name] for t in h.tensors) == sorted(dump["tensors"])
    pre = f"{h.architecture}."
    assert {k[len(pre):]: v for k, v in h.metadata.items() if k.startswith(pre)} == dump["metadata"]
    assert (h.file_size, h.metadata.get("general.file_type")) == (dump["file_size"], dump["file_type"])


def test_every_difference_is_explained_and_every_explanation_holds(results):
    causes, entries = load_explained()
    found = check(results, causes, entries)
    if WRITE and found["unexplained"]:
        print("\n\n".join(found["unexplained"]))
    problems = [f"{kind.upper()}: {m}" for kind, ms in found.items() for m in ms]
    assert not problems, (f"{len(problems)} finding(s) of the lawbench / quantprobe cross-check "
                          f"(tests/data/quantprobe/explained.toml):\n\n" + "\n\n".join(problems))


def test_the_check_finds_a_difference_nobody_explained(results):
    """A lawbench input moved by 10 % is caught, and so is the entry that explained the old value;
    an entry that leaves out one of its causes no longer explains its price."""
    causes, entries = load_explained()
    r = results[0]
    moved = Q.Side(dict(r.lawbench.inputs, **{"rate.vram": r.lawbench.inputs["rate.vram"] * 1.1}),
                   r.lawbench.prices)
    found = check([Result(r.case, moved, r.quantprobe, r.planner, r.shape)], causes, entries)
    assert any("rate.vram" in m for m in found["unexplained"] + found["stale"])
    price = next(e for e in entries if e.get("case") == r.case.id and e["term"] == "tok_s"
                 and "byte-factor" in e["causes"])
    short = dict(price, causes=[c for c in price["causes"] if c != "byte-factor"])
    found = check([r], causes, [short if e is price else e for e in entries])
    assert any("do not explain" in m for m in found["wrong"]), found["wrong"]


def test_causes_quote_their_sources():
    """quantprobe quotes are in the installed 1.37.0 at the line given; seed quotes verbatim
    (where the seed is beside the repository, as in the lead's checkout)."""
    import quantprobe

    causes, _ = load_explained()
    root = Path(quantprobe.__file__).parent

    def norm(text: str) -> str:
        return re.sub(r"\s+", " ", text).strip()

    seed = norm(SEED.read_text(encoding="utf-8"))
    for name, c in causes.items():
        q = c.get("quantprobe_quote")
        if q:
            lines = (root / q["file"]).read_text(encoding="utf-8").splitlines()
            assert norm(q["text"]) in norm(lines[q["line"] - 1]), f"cause {name}: {q['file']}:{q['line']}"
        if c.get("seed_quote"):
            assert norm(c["seed_quote"]) in seed, f"cause {name}: seed_quote is not in seed 000 verbatim"
    for case in load_cases()[1]:
        if case.seed:
            assert norm(case.seed) in seed, f"cases.toml {case.id}: seed is not in seed 000 verbatim"


def test_quantprobe_prices_its_published_anchors(results):
    """quantprobe 1.37.0 on its own MEASURED_ANCHORS (tests/smoke.py): the rows must exist, and
    the numbers go into the doc. Whether each lands in its own tolerance is recorded there."""
    for row in published_rows():
        assert row["predicted"] is not None, f"{row['label']}: quantprobe has no {row['row']!r} row"


def test_doc_is_current(results):
    text = render(results)
    if WRITE:
        DOC.write_text(text, encoding="utf-8")
    assert DOC.is_file() and DOC.read_text(encoding="utf-8") == text, \
        "docs/quantprobe.md is stale: LAWBENCH_QUANTPROBE_WRITE=1 pytest tests/test_quantprobe_crosscheck.py"


# --------------------------------------------------------------------------- the doc


def published_rows() -> list[dict]:
    data = read_toml(DATA / "published.toml")
    out = []
    for m in data["measured"]:
        planner = Q.quantprobe_plan(m["machine"], 0, preset=m["plan"])
        row = next((r for r in planner.plan["rows"] if m["row"] in r[0]), None)
        out.append({**m, "predicted": row[1] if row else None})
    return out


def _fmt(term: str, v: Value) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if term in ("weight_bytes", "model_bytes", "budget.vram", "budget.ram"):
        return f"{v / 1e9:.4g} GB" if v >= 1e9 else f"{v / 1e6:.4g} MB"
    if term == "kv_bytes_per_pos":
        return f"{v:,.0f} B"
    return f"{v:.4g}"


def _seconds(price: Q.Price) -> str:
    return " / ".join(f"{price.seconds.get(k, 0.0):.4g}" for k in Q.SECONDS_KEYS) if price.seconds else "—"


def _star(price: Q.Price) -> str:
    return "\\*" if price.lifted else ""


def _ratio(d: Diff) -> str:
    a, b = d.lawbench, d.quantprobe
    if isinstance(a, bool) or isinstance(b, bool) or not a or not b:
        return ""
    return f"{a / b:.3f}"


INTRO = (
    "Generated by `tests/test_quantprobe_crosscheck.py` from `tests/data/quantprobe/`; the test fails "
    "when this page and a fresh run differ. Regenerate: "
    "`LAWBENCH_QUANTPROBE_WRITE=1 pytest tests/test_quantprobe_crosscheck.py`.\n\n"
    "Both tools price one file per case (a sparse GGUF: the header, no tensor data): lawbench as "
    "`lawbench predict FILE --profile gtx1060 --ctx N`, quantprobe {version} as `quantprobe plan --gguf "
    "FILE --machine 2016-xmp --ctx N --no-anchors` (its `build_rows`). A difference above {tolerance:.0%} "
    "needs an entry of `explained.toml`; an entry is checked by re-pricing quantprobe with its causes' "
    "inputs taken from lawbench (column *aligned*): the difference must vanish. Where the two differ on "
    "a convention the seed states, lawbench follows the seed text (column *follows the seed*; the "
    "causes where it does not are findings).\n\n"
    "Rates are η × bandwidth in GB/s, each read off the tool's own priced rows (bytes ÷ seconds); *k* "
    "is µs per position per CPU layer; budgets are capacity less reserves. A price marked \\* is for a "
    "placement the tool says does not fit, priced as if it did.")


def render(results: list[Result]) -> str:
    causes, entries = load_explained()
    src = read_toml(DATA / "published.toml")["source"]
    L = ["# lawbench beside quantprobe, the register's own planner", "", INTRO.format(
        version=Q.QUANTPROBE_VERSION, tolerance=TOLERANCE), "", "## Causes", "",
         "| cause | input | follows the seed | why | source |", "|---|---|---|---|---|"]
    for name, c in sorted(causes.items()):
        sources = []
        if c.get("seed_quote"):
            sources.append(f"seed 000: “{c['seed_quote']}”")
        if c.get("quantprobe_quote"):
            q = c["quantprobe_quote"]
            sources.append(f"quantprobe {Q.QUANTPROBE_VERSION} `{q['file']}:{q['line']}`: `{q['text']}`")
        L.append(f"| `{name}` | {c.get('input') or '—'} | {c['follows']} | {c['why']} | {'<br>'.join(sources)} |")
    L += ["", "## Inputs", "", "| input | lawbench | quantprobe | ratio | cases | explained by |",
          "|---|---|---|---|---|---|"]
    groups: dict[tuple, list[Diff]] = {}
    for r in results:
        for d in terms(r):
            if d.term in Q.INPUTS and differs(d.lawbench, d.quantprobe):
                groups.setdefault((Q.INPUTS.index(d.term), _encode(d.lawbench), _encode(d.quantprobe)), []).append(d)
    for _, ds in sorted(groups.items(), key=lambda kv: kv[0][0]):  # by input; cases in run order
        d, hit = ds[0], explain(ds[0], entries)[0]
        where = "every case" if len(ds) == len(results) else ", ".join(x.case for x in ds)
        L.append(f"| {d.term} | {_fmt(d.term, d.lawbench)} | {_fmt(d.term, d.quantprobe)} | {_ratio(d)} | {where} | "
                 f"{', '.join(f'`{c}`' for c in hit['causes']) if hit else '**unexplained**'} |")
    L += ["", "Inputs not listed agree within the tolerance.", "", "## Prices", "",
          "| case | placement | lawbench tok/s | quantprobe tok/s | ratio | aligned | fits (lb / qp) | explained by |",
          "|---|---|---|---|---|---|---|---|"]
    for r in results:
        for p in r.case.placements:
            lb, qp = r.lawbench.prices[p], r.quantprobe.prices[p]
            d = Diff(r.case.id, p, "tok_s", lb.tok_s, qp.tok_s)
            names: list[str] = []
            for term in OUTPUT_TERMS:
                dd = Diff(r.case.id, p, term, getattr(lb, term), getattr(qp, term))
                if differs(dd.lawbench, dd.quantprobe):
                    hit, _ = explain(dd, entries)
                    names += hit["causes"] if hit else ["**unexplained**"]
            aligned = ""
            if differs(d.lawbench, d.quantprobe):
                hit, _ = explain(d, entries)
                aligns = {causes[c]["align"] for c in (hit["causes"] if hit else [])} - {"none"}
                if aligns:
                    aligned = _fmt("tok_s", Q.align(r.planner, r.lawbench, p, aligns).tok_s)
                if hit and hit.get("unaligned"):
                    aligned += f" (does not close: {hit['unaligned']})"
            L.append(f"| {r.case.id} | {p} | {_fmt('tok_s', lb.tok_s)}{_star(lb)} | "
                     f"{_fmt('tok_s', qp.tok_s)}{_star(qp)} | {_ratio(d)} | {aligned} | "
                     f"{_fmt('fits', lb.fits)} / {_fmt('fits', qp.fits)} | "
                     f"{', '.join(f'`{c}`' for c in dict.fromkeys(names)) or 'agree'} |")
    L += ["", ("Seconds per token by tier (VRAM / RAM / disk / CPU attention), the seed's cases; lawbench's "
               "weight bytes per token by tier beside them (quantprobe's `evaluate` returns one active-bytes "
               "total, not a split):"), "",
          "| case | placement | lawbench s/token | quantprobe s/token | lawbench weight bytes/token |",
          "|---|---|---|---|---|"]
    for r in results:
        for p in r.case.placements if r.case.seed else ():
            lb, qp = r.lawbench.prices[p], r.quantprobe.prices[p]
            held = ", ".join(f"{t} {_fmt('weight_bytes', b)}" for t, b in lb.weight_bytes.items() if b)
            L.append(f"| {r.case.id} | {p} | {_seconds(lb)} | {_seconds(qp)} | {held or '—'} |")
    L += ["", "## What each case stands for", "", "| case | model | seed 000 |", "|---|---|---|"]
    for r in results:
        if r.case.seed:
            model = r.case.model + (f" at {r.case.mix}" if r.case.mix else "")
            L.append(f"| {r.case.id} | {model} | “{r.case.seed}” |")
    L += ["", "## quantprobe's own published measurements", "",
          (f"From `{src['repo']}` `{src['path']}` at `{src['commit'][:12]}` (the 1.37.0 wheel ships no "
           "tests). MEASURED_ANCHORS, re-priced by the pinned quantprobe:"), "",
          "| anchor | lines | measured tok/s | tolerance | quantprobe 1.37.0 | error | within |",
          "|---|---|---|---|---|---|---|"]
    for row in published_rows():
        err = row["predicted"] / row["measured"] - 1
        L.append(f"| {row['label']} | {row['lines']} | {row['measured']:g} | ±{row['tolerance']:.0%} | "
                 f"{row['predicted']:.3g} | {err:+.0%} | {'yes' if abs(err) <= row['tolerance'] else 'no'} |")
    L += ["", ("VRAM_GAPS (all in VRAM on the 2016 desktop; a ratchet on quantprobe's error, not a "
               "tolerance; the models are not in lawbench's catalogue, so nothing here re-prices them):"), "",
          "| file | line | measured tok/s | error bound | as published |", "|---|---|---|---|---|"]
    for g in read_toml(DATA / "published.toml")["vram_gap"]:
        L.append(f"| {g['file']} | {g['line']} | {g['measured']:g} | {g['bound']:.0%} | `{g['quote']}` |")
    return "\n".join(L) + "\n"
