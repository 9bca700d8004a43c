"""Pages that refuse a parameter say why and keep what was asked for."""

from __future__ import annotations

from datetime import date

from bs4 import BeautifulSoup


def test_a_future_month_keeps_the_pickers_on_what_was_asked(factory):
    factory.company("acme")
    factory.account("root", system_admin=True)
    future = date.today().year + 1
    response = factory.browser("root").get(f"/reports/ddis?month=12&year={future}")
    assert response.status_code == 400
    soup = BeautifulSoup(response.get_data(as_text=True), "html.parser")
    assert soup.select_one('option[value="12"][selected]') is not None
    assert soup.select_one(f'input[value="{future}"]') is not None
    assert soup.select_one(".error, [role=alert]") is not None


def test_an_audit_page_out_of_range_says_so(factory):
    factory.account("root", system_admin=True)
    response = factory.browser("root").get("/audit?page=0")
    assert response.status_code == 400
    soup = BeautifulSoup(response.get_data(as_text=True), "html.parser")
    assert soup.select(".form-error")


def test_a_refused_method_on_a_page_says_which_methods_it_takes(client):
    """HTTP requires Allow on a 405; the pages' error page carries it like the API's."""
    for path in ("/login", "/healthz", "/readyz"):
        response = client.open(path, method="TRACE")
        assert response.status_code == 405, path
        allowed = {m.strip() for m in response.headers["Allow"].split(",")}
        assert "GET" in allowed and "TRACE" not in allowed, path
