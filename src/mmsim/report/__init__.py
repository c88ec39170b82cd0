"""Reports of runs and experiments: text in the formats of perf stat, perf
report and /proc/lock_stat (:mod:`mmsim.report.text`), and JSON
(:mod:`mmsim.report.jsonout`). Plain data in, strings out; no I/O."""
