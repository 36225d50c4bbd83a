"""benchmarks/gate_power.py --ceiling (issue 31): the Neyman-Pearson bound on a one-night rate test,
checked against values worked by hand and against a simulated z-test, and its reading of real nights."""
from __future__ import annotations

import importlib.util
import json
import math
import random
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gate_power", ROOT / "benchmarks" / "gate_power.py")
gp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gp)  # type: ignore[union-attr]


def test_known_sigma_alpha_and_size_give_the_known_power():
    # sd 5 %, alpha 1 % (z = 2.3263), 10 % slower: ln(0.9) = -0.10536; 0.10536 / 0.05 - 2.3263 =
    # -0.2191 and Phi(-0.2191) = 0.4133. A two-sided z, a slowdown taken as +10 % or as -0.10 on
    # logs, or a missing sd would each give another number.
    assert gp.ceiling_power(0.05, 0.10, 0.01) == pytest.approx(0.4133, abs=5e-4)
    # the gate's split of 1 % over 8 series: z(1 - 0.00125) = 3.0233; sd 2 %: 5.268 - 3.023 -> 0.9876
    assert gp.ceiling_power(0.02, 0.10, 0.01 / 8) == pytest.approx(0.9876, abs=5e-4)


def test_no_slowdown_is_seen_alpha_of_the_time_and_the_threshold_half_the_time():
    assert gp.ceiling_power(0.07, 0.0, 0.01) == pytest.approx(0.01, abs=1e-12)
    at_threshold = 1.0 - math.exp(-2.3263479 * 0.07)  # tonight exactly at the red line
    assert gp.ceiling_power(0.07, at_threshold, 0.01) == pytest.approx(0.5, abs=1e-6)
    assert gp.ceiling_power(0.07, 0.40, 0.01) > gp.ceiling_power(0.07, 0.20, 0.01) > gp.ceiling_power(0.07, 0.10, 0.01)


def test_the_bound_is_what_a_simulated_z_test_with_known_sigma_detects():
    rng, sd, size, alpha = random.Random(7), 0.04, 0.08, 0.01 / 4
    cut = -gp.NormalDist().inv_cdf(1 - alpha) * sd
    trials = 40_000
    hits = sum(rng.gauss(math.log(1 - size), sd) < cut for _ in range(trials))
    assert hits / trials == pytest.approx(gp.ceiling_power(sd, size, alpha), abs=0.01)


def test_sd_needed_inverts_the_power():
    sd = gp.sd_needed(0.10, 0.01 / 8)
    assert sd == pytest.approx(0.10536 / (3.0233 + 1.2816), abs=1e-4)  # 2.45 %
    assert gp.ceiling_power(sd, 0.10, 0.01 / 8) == pytest.approx(0.90, abs=1e-9)


def test_combined_sd_of_a_formats_series():
    # independent: inverse variances add
    assert gp.combined_sd([[0.06 ** 2, 0.0], [0.0, 0.08 ** 2]]) == pytest.approx(0.048, abs=1e-9)
    # equal sd, correlation rho: sd * sqrt((1 + rho) / 2); common (time-local) noise does not average out
    rho, s = 0.9, 0.05
    cov = [[s * s, rho * s * s], [rho * s * s, s * s]]
    assert gp.combined_sd(cov) == pytest.approx(s * math.sqrt((1 + rho) / 2), abs=1e-9)


def test_sd_lower_limit_is_the_chi_square_limit():
    # n = 10: chi2.ppf(0.95, 9) = 16.919; sqrt(9 / 16.919) = 0.7293
    assert gp.sd_lower_limit(0.10, 10) == pytest.approx(0.07293, abs=1e-4)


def _night(folder: Path, name: str, verdict: str, q4: float) -> None:
    rate = {"series": {"model": "syn-100m-q4_0", "format": "Q4_0", "placement": "tg16", "quantity": "decode tok/s"},
            "engine": "b1", "values": [q4 * 0.95, q4 * 1.05], "measured": q4, "interval": None}
    (folder / name).mkdir()
    (folder / name / "run.json").write_text(json.dumps({"gate": {"verdict": verdict},
                                                        "results": [{"rates": [rate]}]}))


def test_real_nights_leave_out_red_and_planted_nights(tmp_path):
    for i, v in enumerate((100.0, 110.0, 90.0), start=1):
        _night(tmp_path, f"night-{i}", "green", v)
    _night(tmp_path, "night-4", "red", 10.0)
    _night(tmp_path, "planted", "green", 1.0)
    nights, formats, red = gp.real_nights(tmp_path)
    key = "syn-100m-q4_0 · tg16 · decode tok/s"
    assert red == 1 and formats == {key: "Q4_0"}
    assert sorted(round(math.exp(n[key])) for n in nights) == [90, 100, 110]
    fastest, _, _ = gp.real_nights(tmp_path, "fastest")
    assert sorted(round(math.exp(n[key]), 1) for n in fastest) == [94.5, 105.0, 115.5]


def test_too_few_nights_is_an_error_naming_the_folder(tmp_path):
    _night(tmp_path, "night-1", "green", 100.0)
    with pytest.raises(SystemExit, match=str(tmp_path)):
        gp.real_nights(tmp_path)
