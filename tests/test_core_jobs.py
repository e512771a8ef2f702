"""Job counts bounded by cores and free memory (core/toolchain/jobs.py)."""

from __future__ import annotations

import pytest

from pep517_torch.core.toolchain import jobs


def test_job_plan_bounded_by_memory_and_overridden_by_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobs, "cpu_count", lambda: 64)
    monkeypatch.setattr(jobs, "memory_available", lambda: 8 * 1024**3)
    plan = jobs.plan_jobs(None)
    assert (plan.jobs, plan.heavy) == (64, 3)  # 8 GiB / 2.25 GiB per torch TU
    assert "8.0 GiB" in plan.reason
    assert (jobs.plan_jobs(3).jobs, jobs.plan_jobs(3).heavy) == (3, 3)
    monkeypatch.setattr(jobs, "memory_available", lambda: 512 * 1024**2)
    assert jobs.plan_jobs(None).heavy == 1

