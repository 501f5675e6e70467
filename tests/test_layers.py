"""The layers, checked from the imports (docs/architecture.md, "Layers").

pure domain modules  <  models  <  services, selectors  <  apps.pipeline  <  api, views, tasks, admin, commands

- a pure module imports no Django (nor DRF, Celery) and no module of an app but other pure ones;
- models import no services, selectors, pipeline or views;
- services and selectors never import the pipeline or anything above it, and a service never imports
  another app's services (the pipeline runs them in order: none triggers the next);
- below the pipeline, apps import each other without cycles;
- apps.core, the plumbing every app shares, imports no other app (what reads other apps' state to report on
  them, /healthz and /metrics, is apps.ops);
- the fleet config (apps.config) is imported only by itself and by the pipeline, which applies it: a domain app
  neither parses nor writes the config file; apps.config reads other apps through their models, pure modules
  and selectors (it writes their models itself; it never calls their services);
- no import hides inside a function (they were there to dodge loops);
- the ingest's path (its use case in apps.pipeline, telemetry's writes and reads) reads as named steps: no function
  of it is over 80 lines.

Every module of apps/, agent/ and fleetwatt/ is 800 lines at most (STYLE.md). And the tests mirror the code: every
module of an app that holds logic has a test module named after it (STYLE.md, "Tests that mirror the code"; the rule
in test_every_module_that_holds_logic_has_a_test_module_named_after_it).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ROOT / "apps"

PURE = {
    "apps.core.units.footprint",
    "apps.core.web.params",
    "apps.fleet.endpoint",
    "apps.fleet.work_counters",
    "apps.core.units.glossary",
    "apps.core.units.money",
    "apps.rollups.focus",
    "apps.rollups.breakdown",
    "apps.core.metrics",
    "apps.core.locks",
    "apps.jobs.identity",
    "apps.jobs.methods",
    "apps.jobs.states",
    "apps.jobs.summary",
    "apps.jobs.uncertainty",
    "apps.jobs.utilisation",
    "apps.jobs.per_token",
    "apps.jobs.frontier",
    "apps.waste.kinds",
    "apps.waste.findings",
    "apps.waste.triage",
    "apps.carbon.arithmetic",
    "apps.carbon.intensity",
    "apps.carbon.node_types",
    "apps.carbon.forecast",
    "apps.carbon.when_to_run",
    "apps.config.types",
    "apps.config.fields",
    "apps.config.sections",
    "apps.config.parse",
    "apps.telemetry.counters",
    "apps.telemetry.gpu_settings",
    "apps.telemetry.work",
    "apps.telemetry.hour",
    "apps.telemetry.promql",
    "apps.telemetry.guard",
    "apps.telemetry.unobserved",
    "apps.telemetry.shards",
    "apps.reports.schedule",
    "apps.reports.formatting",
    "apps.schedulers.records",
    "apps.schedulers.slurm",
    "apps.schedulers.kube",
    "apps.simulator.scenario",
    "apps.simulator.power_cap",
    "apps.simulator.sacct",
    "apps.sso.mapping",
}
FRAMEWORKS = ("django", "rest_framework", "django_filters", "drf_spectacular", "celery")
# Module names (their last part, or a package they sit in) of the layer above the pipeline.
UPPER = {
    "api",
    "views",
    "audit_views",
    "token_views",
    "metrics_views",
    "urls",
    "tasks",
    "admin",
    "management",
    "templatetags",
    "middleware",
}
# Apps that are an upper layer as a whole: the pipeline, the pages, /healthz and /metrics (they read every app).
UPPER_APPS = {"pipeline", "dashboard", "ops"}


@dataclass(frozen=True)
class Imported:
    source: str  # the importing module, dotted
    target: str  # the imported module, dotted
    line: int
    in_function: bool


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> list[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    # `from apps.carbon import services` imports the module apps.carbon.services.
    return [f"{base}.{alias.name}" if _is_module(f"{base}.{alias.name}") else base for alias in node.names]


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports() -> list[Imported]:
    found = []
    for path in sorted(APPS.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        module = _module_name(path)
        tree = ast.parse(path.read_text(), filename=str(path))
        functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        inside = {id(child) for f in functions for child in ast.walk(f) if child is not f}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                targets = _resolve(module, node, path.name == "__init__.py")
            else:
                continue
            for target in targets:
                found.append(Imported(module, target, node.lineno, id(node) in inside))
    return found


IMPORTS = _imports()


def _app(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == "apps" and len(parts) > 1 else ""


def _is_upper(module: str) -> bool:
    parts = module.split(".")
    return _app(module) in UPPER_APPS or any(p in UPPER for p in parts[2:])


def _kind(module: str) -> str:
    last = module.split(".")[-1]
    if module in PURE:
        return "pure"
    if _is_upper(module):
        return "upper"
    if last == "models":
        return "models"
    if last == "services":
        return "services"
    return "lower"  # selectors, and the other modules of the service layer (bulk writes, audit, fetch...)


def _violations(rule: str, pairs: list[Imported]) -> list[str]:
    return [f"{rule}: {i.source} (line {i.line}) imports {i.target}" for i in pairs]


def test_the_lists_name_real_modules() -> None:
    missing = [m for m in PURE if not _is_module(m)]
    assert not missing, f"PURE names modules that do not exist: {missing}"


def test_pure_modules_import_no_framework_and_no_app_module_but_pure_ones() -> None:
    bad = [
        i
        for i in IMPORTS
        if i.source in PURE
        and (i.target.split(".")[0] in FRAMEWORKS or (i.target.startswith("apps.") and i.target not in PURE))
    ]
    assert not bad, "\n".join(_violations("pure", bad))


def test_models_import_no_services_selectors_pipeline_or_views() -> None:
    bad = [
        i
        for i in IMPORTS
        if _kind(i.source) == "models"
        and i.target.startswith("apps.")
        and (_kind(i.target) in ("services", "upper") or i.target.endswith(".selectors"))
    ]
    assert not bad, "\n".join(_violations("models", bad))


def test_nothing_below_the_pipeline_imports_it_or_what_sits_above_it() -> None:
    bad = [
        i
        for i in IMPORTS
        if _kind(i.source) in ("pure", "models", "services", "lower")
        and i.target.startswith("apps.")
        and _kind(i.target) == "upper"
    ]
    assert not bad, "\n".join(_violations("layers", bad))


def test_no_service_imports_another_apps_services() -> None:
    bad = [
        i
        for i in IMPORTS
        if _kind(i.source) in ("services", "lower")
        and _kind(i.target) == "services"
        and _app(i.target) not in (_app(i.source), "core")
    ]
    assert not bad, "\n".join(_violations("services", bad))


def test_apps_below_the_pipeline_import_each_other_without_a_cycle() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for i in IMPORTS:
        if _kind(i.source) != "upper" and i.target.startswith("apps.") and _app(i.target) != _app(i.source):
            graph[_app(i.source)].add(_app(i.target))
    # then: a topological order exists (Kahn's algorithm leaves nothing behind)
    apps = set(graph) | {a for targets in graph.values() for a in targets}
    incoming = {a: 0 for a in apps}
    for targets in graph.values():
        for t in targets:
            incoming[t] += 1
    ready = [a for a, n in incoming.items() if n == 0]
    ordered = []
    while ready:
        a = ready.pop()
        ordered.append(a)
        for t in graph.get(a, ()):
            incoming[t] -= 1
            if incoming[t] == 0:
                ready.append(t)
    left = sorted(apps - set(ordered))
    assert not left, f"apps that import each other (directly or round about): {left}; edges: {dict(graph)}"


def test_the_core_imports_no_other_app() -> None:
    bad = [i for i in IMPORTS if _app(i.source) == "core" and i.target.startswith("apps.") and _app(i.target) != "core"]
    assert not bad, "\n".join(_violations("core", bad))


# Who may import the fleet config: itself (its parser, writes and the apply_config command) and the pipeline, whose
# config_apply writes it and derives what follows.
CONFIG_IMPORTERS = {"config", "pipeline"}


def test_only_the_pipeline_imports_the_fleet_config() -> None:
    bad = [i for i in IMPORTS if _app(i.target) == "config" and _app(i.source) not in CONFIG_IMPORTERS]
    assert not bad, "\n".join(_violations("config", bad))


def test_the_fleet_config_reads_other_apps_through_their_models_pure_modules_and_selectors() -> None:
    bad = [
        i
        for i in IMPORTS
        if _app(i.source) == "config"
        and _kind(i.source) != "upper"
        and i.target.startswith("apps.")
        and _app(i.target) != "config"
        and not (_kind(i.target) in ("pure", "models") or i.target.endswith(".selectors"))
    ]
    assert not bad, "\n".join(_violations("config reach", bad))


def test_no_import_hides_inside_a_function() -> None:
    # AppConfig.ready() is where Django wants extensions registered: the one place allowed.
    bad = [i for i in IMPORTS if i.in_function and i.target.startswith("apps.") and not i.source.endswith(".apps")]
    assert not bad, "\n".join(_violations("function-level import", bad))


@pytest.mark.parametrize(
    ("source", "target", "kind"),
    [
        ("apps.jobs.summary", "django.db", "pure"),
        ("apps.jobs.models", "apps.jobs.services", "models"),
        ("apps.carbon.services", "apps.pipeline.derive", "layers"),
        ("apps.telemetry.services", "apps.carbon.services", "services"),
        ("apps.core.web.views", "apps.telemetry.health", "core"),
        ("apps.core.units.aggregates", "apps.jobs.models", "core"),
        ("apps.fleet.admin", "apps.config.types", "config"),
        ("apps.carbon.services", "apps.config.services", "config"),
        ("apps.config.services", "apps.carbon.hourly_import", "config reach"),
    ],
)
def test_the_check_catches_each_kind_of_violation(source: str, target: str, kind: str) -> None:
    # given one forbidden import added to what the code has
    extra = Imported(source, target, 1, in_function=False)
    global IMPORTS
    saved = IMPORTS
    IMPORTS = [*saved, extra]
    try:
        check = {
            "pure": test_pure_modules_import_no_framework_and_no_app_module_but_pure_ones,
            "models": test_models_import_no_services_selectors_pipeline_or_views,
            "layers": test_nothing_below_the_pipeline_imports_it_or_what_sits_above_it,
            "services": test_no_service_imports_another_apps_services,
            "core": test_the_core_imports_no_other_app,
            "config": test_only_the_pipeline_imports_the_fleet_config,
            "config reach": test_the_fleet_config_reads_other_apps_through_their_models_pure_modules_and_selectors,
        }[kind]
        # then the check fails
        with pytest.raises(AssertionError):
            check()
    finally:
        IMPORTS = saved


# --- Tests named after what they test ------------------------------------------------------------------------------

LOGIC_MIN_LINES = 60
# Modules that are no logic of their own, or whose logic is tested through what calls them: Django's declarations
# (models, admin, URLs, app configs, migrations) and the entry points that parse a request, a command line or a task's
# arguments, call one service or selector and shape the answer (STYLE.md, "Where logic lives"): the API's packages,
# the pages' views, the commands and the Celery tasks. The API tests (tests/api/, each app's *_api tests), the pages'
# tests, the commands' tests and the worker's tests call them the way their callers do.
NOT_LOGIC_NAMES = {"__init__", "apps", "admin", "models", "urls", "views", "tasks"}
NOT_LOGIC_PACKAGES = {"migrations", "management", "api"}


def _holds_logic(path: Path, apps: Path) -> bool:
    parts = path.relative_to(apps).parts
    if any(p in NOT_LOGIC_PACKAGES for p in parts[:-1]):
        return False
    if path.stem in NOT_LOGIC_NAMES or path.stem.endswith("_views"):
        return False
    return len(path.read_text().splitlines()) >= LOGIC_MIN_LINES


def _test_module_of(path: Path, apps: Path, tests: Path) -> Path:
    """apps/<app>/<package...>/<module>.py -> tests/<app>/<package...>/test_<module>.py"""
    relative = path.relative_to(apps)
    return tests.joinpath(*relative.parts[:-1], f"test_{relative.name}")


def _has_a_test(path: Path) -> bool:
    tree = ast.parse(path.read_text(), filename=str(path))
    return any(isinstance(n, ast.FunctionDef) and n.name.startswith("test_") for n in ast.walk(tree))


def _modules_without_a_test_module(apps: Path, tests: Path, exempt: set[str]) -> list[str]:
    missing = []
    for path in sorted(apps.rglob("*.py")):
        if path.relative_to(apps).parts[0] in exempt or not _holds_logic(path, apps):
            continue
        wanted = _test_module_of(path, apps, tests)
        if not wanted.exists() or not _has_a_test(wanted):
            missing.append(f"{path.relative_to(apps.parent)} -> {wanted.relative_to(tests.parent)}")
    return missing


def test_every_module_that_holds_logic_has_a_test_module_named_after_it() -> None:
    """Each module of apps/ of 60 lines or more that holds logic (services, selectors, pure modules, and any other
    module of an app) has a test module named after it, where the tests mirror the code:
    apps/<app>/<module>.py -> tests/<app>/test_<module>.py, and apps/<app>/<package>/<module>.py ->
    tests/<app>/<package>/test_<module>.py, with at least one test in it. It sits beside the behaviour tests
    (tests/<app>/test_<behaviour>.py), which stay.

    Not counted (NOT_LOGIC_NAMES, NOT_LOGIC_PACKAGES): __init__.py, apps.py, admin.py, models.py, urls.py and
    migrations/, which declare; and the entry points tested through their callers: api/ (viewsets and serializers,
    by the API tests), views.py and *_views.py (by the pages' tests), tasks.py (by the worker's) and
    management/ (commands, by their own tests)."""
    missing = _modules_without_a_test_module(APPS, ROOT / "tests", set())
    count = f"{len(missing)} module{'s' if len(missing) != 1 else ''}"
    assert not missing, f"{count} with no test module named after it:\n" + "\n".join(missing)


def test_the_check_of_test_modules_finds_a_missing_one(tmp_path: Path) -> None:
    # given a module that holds logic, one too short, a model, an API module, and a pending app's module
    apps, tests = tmp_path / "apps", tmp_path / "tests"
    long = "x = 1\n" * LOGIC_MIN_LINES
    for name, text in [
        ("shop/pricing.py", long),
        ("shop/money.py", long),
        ("shop/short.py", "x = 1\n" * (LOGIC_MIN_LINES - 1)),
        ("shop/models.py", long),
        ("shop/api/views.py", long),
        ("shop/page_views.py", long),
        ("shop/rules/discounts.py", long),
        ("moving/anything.py", long),
    ]:
        (apps / name).parent.mkdir(parents=True, exist_ok=True)
        (apps / name).write_text(text)
    # and a test module for one of them, another named after it but in the wrong folder, and one with no test
    (tests / "shop" / "rules").mkdir(parents=True)
    (tests / "shop" / "test_money.py").write_text("def test_a_sum() -> None:\n    assert 1 + 1 == 2\n")
    (tests / "shop" / "test_discounts.py").write_text("def test_x() -> None:\n    pass\n")
    (tests / "shop" / "test_pricing.py").write_text('"""To do."""\n')
    # when
    missing = _modules_without_a_test_module(apps, tests, exempt={"moving"})
    # then the others are named, with where their test module goes
    assert missing == [
        "apps/shop/pricing.py -> tests/shop/test_pricing.py",
        "apps/shop/rules/discounts.py -> tests/shop/rules/test_discounts.py",
    ]


# The ingest's path: its use case and the derivations (apps.pipeline), and the writes, reads and fetch it runs in
# apps.telemetry. The pure arithmetic of an hour's answers (apps.telemetry.hour) is not in it.
INGEST_PATH = [
    *sorted((APPS / "pipeline").glob("*.py")),
    *(APPS / "telemetry" / name for name in ("services.py", "estimates.py", "selectors.py", "fetch.py", "guard.py")),
]
MAX_FUNCTION_LINES = 80


def _long_functions(tree: ast.Module) -> list[tuple[str, int, int]]:
    """Each function (methods and nested ones too) longer than MAX_FUNCTION_LINES: its name, line and length."""
    return [
        (node.name, node.lineno, node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


def test_the_ingest_path_is_the_modules_named() -> None:
    assert all(path.exists() for path in INGEST_PATH)


def test_no_function_of_the_ingest_path_is_over_80_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}:{line} {name}: {length} lines"
        for path in INGEST_PATH
        for name, line, length in _long_functions(ast.parse(path.read_text(), filename=str(path)))
    ]
    assert not long, "split into named steps:\n" + "\n".join(long)


def test_the_length_check_catches_a_long_function() -> None:
    # given a function of 81 lines, and one of 80
    body = "".join(f"    x{i} = {i}\n" for i in range(80))
    tree = ast.parse(f"def long():\n{body}\n\ndef short():\n{body[: body.rindex('    x79')]}")
    # then only the long one is named
    assert _long_functions(tree) == [("long", 1, 81)]


# --- Module length ----------------------------------------------------------------------------------------------------

MAX_MODULE_LINES = 800  # STYLE.md: a module over it holds more than one thing; split it along its seams


def _long_modules(roots: list[Path]) -> list[str]:
    return sorted(
        f"{path.relative_to(root.parent)}: {n} lines"
        for root in roots
        for path in root.rglob("*.py")
        if "migrations" not in path.parts and (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    )


def test_no_module_is_over_800_lines() -> None:
    assert _long_modules([APPS, ROOT / "agent", ROOT / "fleetwatt"]) == []


def test_the_module_length_check_catches_a_long_module(tmp_path: Path) -> None:
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    assert _long_modules([tmp_path]) == [f"{tmp_path.name}/long.py: {MAX_MODULE_LINES + 1} lines"]
