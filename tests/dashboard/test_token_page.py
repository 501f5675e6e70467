"""A new API key is shown once with a copy button and an example command that works as printed."""

from __future__ import annotations

import shlex
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from apps.core.access.policy import FINANCE_GROUP
from tests.carbon.fleet_builder import fleet_build

from .test_fleet_dashboard import _login, browser  # noqa: F401 (fixture)


def _finance(password: str = "") -> User:
    user = User.objects.create_user("fin", password=password or None)
    user.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    return user


@pytest.mark.django_db
def test_the_example_command_fetches_last_month_s_focus_file_with_the_new_key(settings) -> None:
    # given finance creating a key on the site's own host name
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "fleetwatt.example.org"]
    fleet_build(servers=1, gpus_per_server=1)
    client = Client()
    client.force_login(_finance())
    page = client.post("/tokens/", {"name": "ERP"}, HTTP_HOST="fleetwatt.example.org")
    key = page.context["new_key"]
    command = page.content.decode().split('<pre id="new-key-example" class="wrap">')[1].split("</pre>")[0]
    # when the command's request is sent as printed (the page escapes its &)
    words = shlex.split(command.replace("&amp;", "&"))
    assert words[:3] == ["curl", "-fsS", "-H"] and words[3] == f"Authorization: Bearer {key}"
    url = words[4]
    last_month = (timezone.now().date().replace(day=1) - timedelta(days=1)).strftime("%Y-%m")
    assert url == f"http://fleetwatt.example.org/api/focus/?month={last_month}&format=csv"
    answer = Client().get(url, HTTP_AUTHORIZATION=words[3].removeprefix("Authorization: "))
    # then it is last month's FOCUS file
    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/csv")
    assert b"BilledCost" in b"".join(answer.streaming_content).splitlines()[0]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_copy_buttons_put_the_key_and_the_command_on_the_clipboard(live_server, browser) -> None:  # noqa: F811
    _finance("pw-fin")
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    _login(page, live_server.url, "fin", "pw-fin")
    page.goto(f"{live_server.url}/tokens/")
    page.fill("input[name=name]", "BI tool")
    page.click("form button[type=submit] >> text=Create")
    key = page.inner_text("#new-key-value")
    page.click("button >> text=Copy the key")
    assert page.evaluate("navigator.clipboard.readText()") == key
    page.click("button >> text=Copy the command")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("curl ") and f"Bearer {key}" in copied and "&format=csv" in copied
    context.close()
