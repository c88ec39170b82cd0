"""pcp-series: Huang Ying's "mm: PCP high auto-tuning" (v3, merged for v6.7)
patch by patch on lmbench bw_unix -P 16, 2 x Xeon Gold 6338 (docs/pcp-series.md).

Arms in v3's numbering (upstream commits), cumulative: base = v6.6, p1, p3,
p5, p7, p9. Each is compared with the v1 cover letter's row of the same
patch (v3 p9 = v1 p10; v1 p9 was dropped), with the v3 cover letter's score
and lock share printed beside it.
"""

from __future__ import annotations

from mmsim.experiments.reproduce import Check, Experiment, register
from mmsim.experiments.run import RunResult, RunSpec

BW = "lmbench3.AF_UNIX.sock.stream.bandwidth.MB/sec"
MISS = "bw_unix.llc_miss_rate"
ZONE_LOCK = "&zone->lock"
INF = float("inf")

# v3 patch ids, in order
SERIES = ("ca71fe1ad922", "94a3bfe4073c", "362d37a106dd", "52166607ecc9", "c0a242394cb9", "90b41691b988",
          "51a755c56dc0", "57c0419c5f0e", "6ccdcb6d3a74")
ARMS = {"base": 0, "p1": 1, "p3": 3, "p5": 5, "p7": 7, "p9": 9}
# v1 cover letter (20230920061856.257597-1-ying.huang@intel.com, facts.md): score, zone lock % of cycles,
# free_high, alloc_zone, cache-miss %; the p9 row is v1's patch 10 (= v3 patch 9)
PUBLISHED_V1 = {
    "base": (100.0, 50.0, 100.0, 100.0, 0.3),
    "p1": (117.1, 45.8, 72.6, 108.9, 0.2),
    "p3": (201.6, 21.2, 7.4, 111.5, 0.2),
    "p5": (201.9, 20.9, 7.5, 112.7, 0.3),
    "p7": (194.2, 19.3, 7.3, 111.5, 2.9),
    "p9": (196.8, 21.0, 7.4, 111.2, 2.1),
}
# v3 cover letter (20231016053002.756205-1): score, zone lock %; p5 not given
PUBLISHED_V3 = {"base": (100.0, 51.4), "p1": (116.8, 46.1), "p3": (199.1, 21.3), "p7": (191.6, 19.9),
                "p9": (193.4, 21.7)}
_PARAMS = {"pairs": "16"}


def _spec(n: int) -> RunSpec:
    return RunSpec("lmbench/bw_unix", "icelake-6338-2s", "v6.6", patches=SERIES[:n], params=_PARAMS)


def _eval(res: dict[str, RunResult]) -> tuple[list[Check], list[str]]:
    base = res["base"]
    bw0 = base.metrics[BW]
    fh0 = base.counters["pcp_free_high"]
    az0 = base.counters.get("zone_alloc_pages", 0)
    checks: list[Check] = []
    notes = ["simulated | published (v1 row; v3 cover letter score / lock in brackets):",
             f"{'arm':<5} {'score':>14} {'zone lock %':>14} {'free_high':>14} {'alloc_zone':>14} {'miss %':>12}"]
    for arm, r in res.items():
        score, lock, fh, az, miss = PUBLISHED_V1[arm]
        s_score = 100 * r.metrics[BW] / bw0 if bw0 else 0.0
        s_lock = r.lock_wait_share(ZONE_LOCK)
        s_fh = 100 * r.counters["pcp_free_high"] / fh0 if fh0 else 0.0
        s_az = 100 * r.counters.get("zone_alloc_pages", 0) / az0 if az0 else 0.0
        s_miss = r.metrics[MISS]
        v3 = PUBLISHED_V3.get(arm)
        v3s = f" [{v3[0]:.1f} / {v3[1]:.1f}]" if v3 else ""
        notes.append(f"{arm:<5} {s_score:6.1f} | {score:5.1f} {100 * s_lock:5.1f} | {lock:5.1f} "
                     f"{s_fh:6.1f} | {fh:5.1f} {s_az:6.1f} | {az:5.1f} {100 * s_miss:4.2f} | {miss:3.1f}{v3s}")
        if arm != "base":
            checks.append(Check(f"score_ratio.{arm}", score / 100, s_score / 100,
                                (0.75 * score / 100, 1.25 * score / 100), "bandwidth / base's, within +-25%"))
        checks.append(Check(f"zone_lock_share.{arm}", lock / 100, s_lock, (lock / 100 - 0.10, lock / 100 + 0.10),
                            "zone->lock spin cycles / all cycles, within +-10 points"))
        if arm != "base":
            checks.append(Check(f"free_high_ratio.{arm}", fh / 100, s_fh / 100, (0.75 * fh / 100, 1.25 * fh / 100),
                                "free_high drains / base's, within +-25% relative"))
            checks.append(Check(f"alloc_zone_ratio.{arm}", az / 100, s_az / 100, None,
                                "pages taken from the buddy lists / base's"))
        checks.append(Check(f"llc_miss_rate.{arm}", miss / 100, s_miss, None, "cache-misses / cache-references"))
    rise = res["p7"].metrics[MISS] - res["p5"].metrics[MISS]
    checks.append(Check("cache_miss_rise.p5_to_p7", 0.029 - 0.003, rise, (1e-9, INF),
                        "p7's LLC miss rate above p5's (published 0.3% -> 2.9%): direction only"))
    for arm in ("p5", "p7", "p9"):
        r = res[arm]
        k = r.counters
        notes.append(f"{arm}: {k['pcp_refill']:,} refills taking {k.get('zone_alloc_pages', 0):,} pages; "
                     f"{k['pcp_drain']:,} drains of {k['pcp_drain_pages']:,} pages; "
                     f"{r.locks[ZONE_LOCK]['acquisitions']:,} zone->lock acquisitions")
    return checks, notes


register(
    Experiment(
        "pcp-series",
        "mm: PCP high auto-tuning (v3, v6.7) patch by patch: lmbench bw_unix -P 16, 2 x Xeon Gold 6338",
        "v1 and v3 cover letters (Huang Ying, linux-mm 2023-09-20 / 2023-10-16), facts.md",
        {arm: _spec(n) for arm, n in ARMS.items()},
        _eval,
    )
)
