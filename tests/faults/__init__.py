"""Fault injection: each module reproduces one fault found by trying the product as its adversary, with
the real components (Prometheus, Postgres, Redis, Celery worker processes, HTTP clients), and shows
that fleetwatt now loses nothing and lets nobody in.

| fault | module |
| --- | --- |
| a re-ingest from a source that lost the hour (retention) deletes stored rows | test_source_loss.py |
| an older agent without the contract's extension series books 0 GPU-hours | test_agent_version_skew.py |
| commands given odd input: tracebacks, huge ranges, huge files | test_command_input.py |
| finance wrote a job's work (any team's, by session, DRF token or named token) | test_finance_read_only.py |
| `/api/gpus/` answered any logged-in user, even one in no team | test_fleet_gpus_access.py |
| CSV formula injection: a job named `=HYPERLINK(...)` went raw into finance's CSV | test_csv_injection.py |
| unlimited password guessing on the login page and the admin's | test_login_throttle.py |
| odd input answered 500: `page_size=²`, year-1 and year-9999 dates, JSON nested 100k deep | test_odd_input.py |
| a decision on job A citing job B's finding; the audit form's `next=` redirected off-site | test_audit_details.py |
| Redis down: logged-in requests a 500, HTML even for the API; /healthz said ok | test_redis_down.py |
| a pool process killed mid-task lost its hour; with its database down a worker dropped all | test_worker_lost.py |
| `make demo` emptied DATABASE_URL's database, production's too; demo logins with DEBUG off | test_demo_guard.py |
| the demo's runserver held a connection per request thread (20 clients: 100), on 0.0.0.0 | test_demo_web_load.py |
| a scheduler sync and a re-ingest of one cluster at once deadlocked | pipeline/test_scheduler_span.py |
| two workers ingesting different hours of one cluster (checked: as one ingest) | test_concurrent_ingest.py |
| a quiet window of Slurm's accounting (error 9003) failed the sync | schedulers/test_sync_local_slurm.py |
"""
