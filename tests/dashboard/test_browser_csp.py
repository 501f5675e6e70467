"""Every page works under the Content-Security-Policy (issue: the headers a security review expects): each page of
each role, the login page, the API's docs and the admin opened in Debian's chromium with the policy enforced (no
bypass), every violation the browser reports (the `securitypolicyviolation` event and its console message) counted
as a failure, and the charts drawn by Plotly under it."""

from __future__ import annotations

import pytest

from .test_browser_pages import CHARTS_SETTLED, _pages, walk_data  # noqa: F401 (fixture)
from .test_fleet_dashboard import _login, browser  # noqa: F401 (fixture)

# Installed before any of the page's own scripts, by the browser (not subject to the page's policy).
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', e => window.__violations.push(
  `${e.effectiveDirective} blocked ${e.blockedURI || 'inline'} at ${e.sourceFile || location.pathname}` +
  `:${e.lineNumber}`));
"""
CHARTED = {"fleet", "team", "gpu"}  # (the walk's data has no job group: its page says so)


def _open(page, url: str, status: int, console: list[str]) -> list[str]:
    answer = page.goto(url)
    assert answer is not None and answer.status == status, f"{url}: {answer and answer.status}"
    assert "Content-Security-Policy" in {k.title(): v for k, v in answer.headers.items()}, url
    page.wait_for_load_state("networkidle")
    page.wait_for_function(CHARTS_SETTLED)
    found = page.evaluate("window.__violations")
    said = [line for line in console if "Content Security Policy" in line]
    console.clear()
    return [f"{url}: {v}" for v in [*found, *said]]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_every_page_works_under_the_content_security_policy(walk_data, live_server, browser) -> None:  # noqa: F811
    violations: list[str] = []
    for role, (user, password) in {"admin": ("boss", "pw-boss"), "member": ("ada", "pw-ada")}.items():
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.add_init_script(RECORD_VIOLATIONS)
        console: list[str] = []
        page.on("console", lambda message, console=console: console.append(message.text))
        if role == "admin":  # the login page, and a page refused, before logging in
            violations += _open(page, f"{live_server.url}/accounts/login/", 200, console)
        _login(page, live_server.url, user, password)
        for name, (path, status) in _pages(walk_data, role).items():
            violations += _open(page, live_server.url + path, status, console)
            if name in CHARTED:  # the charts are drawn, not blocked
                assert page.locator(".chart .main-svg").count() >= 1, name
        if role == "admin":
            violations += _open(page, f"{live_server.url}/api/docs/", 200, console)
            page.wait_for_selector(".swagger-ui .opblock", timeout=30_000)  # its script ran and read the schema
            violations += _open(page, f"{live_server.url}/admin/", 200, console)
            violations += [f"{v} (after loading)" for v in page.evaluate("window.__violations")]
        page.close()
    assert not violations, "\n".join(violations)
