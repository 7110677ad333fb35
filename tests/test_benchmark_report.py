"""The performance report's header says when each section was measured: a run with
``--only`` must not present the sections it kept from earlier runs as measured now."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

_RUN_ALL = Path(__file__).resolve().parent.parent / "benchmarks" / "run_all.py"


def _run_all() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plait_bench_run_all", _RUN_ALL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_MACHINE = {"cpu": "AMD EPYC", "cores": 2, "python": "3.11.7", "numpy": "2.4.6",
            "date": "2026-12-01T16:40:00+00:00", "blas": "none"}
_EARLIER = {"dense": "2026-11-30T03:03:32+00:00", "lexical": "2026-11-30T03:54:31+00:00",
            "ingest": "2026-11-30T02:10:11+00:00"}


def test_header_of_an_only_run_names_rerun_and_kept_sections() -> None:
    """Regression: ``--only hybrid,postgres`` wrote the new run's date as the whole
    report's date; the kept sections' dates were only in the JSON."""
    run_all = _run_all()
    report = {
        "machine": _MACHINE,
        "last_run": {"date": "2026-12-01T16:40:00+00:00", "sections": ["hybrid", "postgres"]},
        "measured_at": {**_EARLIER, "hybrid": "2026-12-01T16:45:10+00:00", "postgres": "2026-12-01T17:02:00+00:00"},
    }
    assert run_all.header(report) == [
        "2026-12-01T16:40:00+00:00: hybrid, postgres rerun · AMD EPYC · 2 cores · Python 3.11.7 · numpy 2.4.6",
        'BLAS: "none"',
        "",
        "Kept from earlier runs (dates in `measured_at` of performance.json): lexical measured "
        "2026-11-30T03:54:31+00:00, dense measured 2026-11-30T03:03:32+00:00, ingest measured "
        "2026-11-30T02:10:11+00:00.",
    ]


def test_header_of_a_full_run_and_of_a_report_without_last_run() -> None:
    run_all = _run_all()
    full = {"machine": _MACHINE, "last_run": {"date": _MACHINE["date"], "sections": list(run_all.SECTIONS)},
            "measured_at": dict.fromkeys(run_all.SECTIONS, "2026-12-01T17:00:00+00:00")}
    assert run_all.header(full)[0].startswith("2026-12-01T16:40:00+00:00: every section · AMD EPYC")
    assert len(run_all.header(full)) == 2
    # a report written before last_run existed: sections measured before the machine
    # date were kept from earlier runs
    old = {"machine": _MACHINE, "measured_at": {**_EARLIER, "hybrid": "2026-12-01T16:45:10+00:00",
                                                 "postgres": "2026-12-01T17:02:00+00:00"}}
    assert run_all.header(old)[0].startswith("2026-12-01T16:40:00+00:00: hybrid, postgres rerun")
    assert "lexical measured 2026-11-30T03:54:31+00:00" in run_all.header(old)[3]
