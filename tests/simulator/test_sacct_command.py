"""`manage.py simulate_sacct` as the demo cluster runs it (a process with sacct's arguments, TZ=UTC), and
`demo_setup` pointing the demo's clusters at it and at the local Slurm."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.db import connection

from apps.fleet.models import Cluster, Team, TeamRule
from apps.schedulers.sources import sacct_arguments
from apps.simulator.demo_database import MARKER_TABLE
from tests.servers import ROOT, child_env

from .test_sacct import ANCHOR

SIMULATED = [sys.executable, str(ROOT / "manage.py"), "simulate_sacct", "--scenario", "demo"]
ANCHOR_ARG = ["--scenario-start", "2026-11-24T02:00:00Z"]


def sacct(*args: str, tz: str = "UTC") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SIMULATED, *args], env=child_env(TZ=tz), cwd="/", capture_output=True, text=True, timeout=120, check=False
    )


def test_it_answers_the_sync_s_two_questions() -> None:
    # given the two sets of arguments the sync gives sacct, for the demo's second day
    json_args, parsable_args = sacct_arguments(start=ANCHOR.replace(day=25, hour=0), end=ANCHOR.replace(day=26, hour=0))
    # when the simulated sacct is asked them, from another directory, as the worker asks
    document = sacct(*ANCHOR_ARG, "--now", "2026-12-01T12:00:00Z", *json_args)
    parsable = sacct(*ANCHOR_ARG, "--now", "2026-12-01T12:00:00Z", *parsable_args)
    # then both answer, about the same jobs
    assert document.returncode == 0 and parsable.returncode == 0, document.stderr + parsable.stderr
    ids = {str(job["job_id"]) for job in json.loads(document.stdout)["jobs"]}
    assert ids == {line.split("|")[0] for line in parsable.stdout.splitlines()} and len(ids) > 100
    assert all(len(line.split("|")) == 2 for line in parsable.stdout.splitlines())


def test_its_window_is_read_in_the_local_zone() -> None:
    # the same wall-clock window an hour east of UTC is an hour earlier
    fixed = [*ANCHOR_ARG, "--now", "2026-11-26T00:00:00Z", "--parsable2", "-o", "JobIDRaw,Start,End", "-a"]
    utc = sacct(*fixed, "-S", "2026-11-25T00:00:00", "-E", "2026-11-25T06:00:00")
    east = sacct(*fixed, "-S", "2026-11-25T01:00:00", "-E", "2026-11-25T07:00:00", tz="CET-1")
    assert utc.returncode == east.returncode == 0
    utc_lines, east_lines = utc.stdout.splitlines(), east.stdout.splitlines()
    assert len(utc_lines) == len(east_lines) > 10
    # the same jobs, their times written in the zone's wall-clock time
    assert [line.split("|")[0] for line in utc_lines] == [line.split("|")[0] for line in east_lines]
    assert utc_lines[1].split("|")[1] < east_lines[1].split("|")[1]


@pytest.mark.parametrize(
    ("args", "status", "said"),
    [
        (["--json", "--bogus"], 2, "unrecognized arguments: --bogus"),
        (["--json", "-S", "1796083402"], 1, "sacct: error: Invalid time specification (pos=0): 1796083402"),
        (["--parsable2", "-o", "JobIDRaw,Nope"], 1, 'sacct: error: Invalid field requested: "Nope"'),
        (["-S", "2026-11-25"], 2, "only --json and --parsable2"),
        (["--json", "--scenario", "no-such-scenario"], 1, "No scenario file"),
    ],
)
def test_what_sacct_refuses_it_refuses_on_stderr_with_sacct_s_status(args: list[str], status: int, said: str) -> None:
    done = sacct(*ANCHOR_ARG, *args)
    assert (done.returncode, done.stdout) == (status, "")
    assert said in done.stderr


@pytest.fixture
def demo_database(settings) -> Iterator[None]:
    """The test database marked as the demo's own (as `demo_database` marks the one it creates), DEBUG on."""
    settings.DEBUG = True
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {MARKER_TABLE} (created_at timestamptz NOT NULL DEFAULT now())")
    yield
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {MARKER_TABLE}")


@pytest.mark.django_db
def test_demo_setup_points_the_demo_cluster_at_the_simulated_sacct_and_registers_the_local_slurm(
    demo_database: None, tmp_path
) -> None:
    # given the demo's teams, as apply_config leaves them
    Team.objects.create(name="vision")
    conf = tmp_path / "slurm.conf"
    # when demo_setup is told the scenario's anchor and the local Slurm's configuration
    call_command(
        "demo_setup", prometheus_url="http://127.0.0.1:9", scenario_start="2026-11-24T02:00:00Z",
        local_slurm_conf=str(conf),
    )  # fmt: skip
    # then the demo cluster reads the simulated sacct of that scenario and anchor, by absolute paths
    demo = Cluster.objects.get(name="default")
    command = shlex.split(demo.sacct_command)
    assert demo.scheduler == Cluster.Scheduler.SLURM_SACCT
    assert command == [sys.executable, str(ROOT / "manage.py"), "simulate_sacct", "--scenario", "demo", *ANCHOR_ARG]
    # and the local Slurm is a cluster of its own, read with the real sacct and its SLURM_CONF, whose jobs are
    # vision's, on the demo's Prometheus with a selector no series matches
    local = Cluster.objects.get(name="slurm-local")
    assert shlex.split(local.sacct_command) == ["env", f"SLURM_CONF={conf}", "sacct"]
    assert (local.scheduler, local.selector, local.prometheus_url) == (
        Cluster.Scheduler.SLURM_SACCT,
        'cluster="slurm-local"',
        "http://127.0.0.1:9",
    )
    assert TeamRule.objects.filter(cluster=local, kind="slurm_account", value="fwteam", team__name="vision").exists()
    # the command the cluster holds runs and answers
    done = subprocess.run([*command, "--json", "-a", "-S", "now-1hours", "-E", "now"], env=child_env(TZ="UTC"),
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0 and "jobs" in json.loads(done.stdout), done.stderr


@pytest.mark.django_db
def test_demo_setup_without_an_anchor_leaves_the_scheduler_alone(demo_database: None) -> None:
    Team.objects.create(name="vision")
    call_command("demo_setup", prometheus_url="http://127.0.0.1:9")
    assert Cluster.objects.get(name="default").scheduler == Cluster.Scheduler.NONE
    assert not Cluster.objects.filter(name="slurm-local").exists()
