"""``benchmarks/common.py``'s ``run_fresh``: jobs in fresh spawned processes, a failure reported and
the rest kept, and a stop request that lets the running jobs finish and starts no other."""

import operator

from tests.algos.test_rspo_matrix import _module


def test_a_failing_job_is_counted_and_every_other_result_kept(capsys):
    common = _module("common")
    kept = []
    jobs = [("half", operator.truediv, (1, 2)), ("zero", operator.truediv, (1, 0)), ("three", operator.add, (1, 2))]
    failed = common.run_fresh(jobs, 2, lambda key, result, done, total: kept.append((key, result, total)))
    assert failed == 1 and sorted(kept) == [("half", 0.5, 3), ("three", 3, 3)]
    assert "zero failed: ZeroDivisionError" in capsys.readouterr().err


def test_a_stop_request_starts_no_further_job_and_keeps_the_finished_one(capsys):
    common = _module("common")
    kept = []
    jobs = [(k, operator.add, (k, 10)) for k in range(4)]
    failed = common.run_fresh(jobs, 1, lambda key, result, done, total: kept.append((key, result, done)), stop=lambda: bool(kept))
    assert failed == 0 and kept == [(0, 10, 1)]
    assert "stopped on request: 3 job(s) not started" in capsys.readouterr().err
