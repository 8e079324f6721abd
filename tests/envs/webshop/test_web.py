"""The WebShop site for people (``web.py``): click-through, isolation, escaping, hostile HTTP, and
a real headless browser run (skipped unless ``/usr/bin/chromium`` and ``playwright`` exist)."""

from __future__ import annotations

import html
import importlib.util
import os
import random
import re
import threading
from urllib.parse import quote

import pytest

pytest.importorskip("flask")

from markupsafe import escape  # noqa: E402

from rspo_gym.envs.webshop.web import SessionStore, create_app  # noqa: E402

N = 200  # catalog size: small and fast


@pytest.fixture(scope="module")
def app():
    a = create_app(num_products=N, catalog_seed=0, split="test")
    yield a
    assert a.extensions["rspo_webshop"].errors == 0, "an unexpected exception was answered 500"


@pytest.fixture()
def client(app):
    return app.test_client()


def start(client, task_id: int = 0) -> str:
    r = client.get(f"/?task_id={task_id}")
    assert r.status_code == 303
    m = re.fullmatch(r"/s/([A-Za-z0-9_-]+)", r.headers["Location"])
    assert m, r.headers["Location"]
    return m.group(1)


def page(client, sid: str) -> str:
    r = client.get(f"/s/{sid}")
    assert r.status_code == 200
    return r.get_data(as_text=True)


def follow(client, url: str) -> str:
    r = client.get(url)
    assert r.status_code == 303, (url, r.status_code, r.get_data(as_text=True)[:200])
    return page(client, r.headers["Location"].rsplit("/", 1)[-1])


def hrefs(body: str, cls: str) -> list[str]:
    return [html.unescape(h) for h in re.findall(rf'<a class="[^"]*\b{cls}\b[^"]*"[^>]*href="([^"]+)"', body)]


def instruction_query(app, task_id: int = 0) -> str:
    store = app.extensions["rspo_webshop"]
    assert isinstance(store, SessionStore)
    from rspo_gym.envs.webshop.env import shared_catalog

    _, goals = shared_catalog(N, 0)
    return goals[goals.split("test")[task_id]].instruction_text


def test_click_through_to_score(app, client):
    sid = start(client, 0)
    body = page(client, sid)
    assert 'data-page="search"' in body and 'id="search-form"' in body
    assert str(escape(instruction_query(app))) in body

    body = follow(client, f"/s/{sid}/search?q={quote('trail mix snack')}")
    assert 'data-page="results"' in body and "Page 1 (Total results: " in body
    assert 'id="next"' in body and 'id="prev"' not in body
    body = follow(client, f"/s/{sid}/click?c={quote('Next >')}")
    assert "Page 2 (Total results: " in body and 'id="prev"' in body
    body = follow(client, f"/s/{sid}/click?c={quote('< Prev')}")
    assert "Page 1 (Total results: " in body

    # an item that has options
    store = app.extensions["rspo_webshop"]
    session = store.get(sid)[0]
    for link in hrefs(body, "item-link"):
        body = follow(client, link)
        assert 'data-page="item"' in body and 'id="buy-now"' in body
        if session.catalog.item(session.current_item).options:
            break
        body = follow(client, f"/s/{sid}/click?c={quote('< Prev')}")
    else:
        pytest.skip("no result with options for this query")
    for sub in ("Description", "Features", "Reviews"):
        assert f">{sub}</a>" in body
    sub_body = follow(client, f"/s/{sid}/click?c=Features")
    assert 'data-page="sub"' in sub_body
    body = follow(client, f"/s/{sid}/click?c={quote('< Prev')}")

    option = hrefs(body, "option")[0]
    assert "selected" not in re.findall(r'<a class="([^"]*option[^"]*)"', body)[0]
    body = follow(client, option)
    assert re.findall(r'<a class="([^"]*option[^"]*)"', body)[0] == "btn option selected"
    assert len(session.selected_options) == 1
    expected = session.current_item_score()

    body = follow(client, f"/s/{sid}/click?c={quote('Buy Now')}")
    assert 'data-page="done"' in body and "Thank you for shopping with us!" in body
    score = float(re.search(r'id="score">([^<]+)<', body).group(1))
    assert score == pytest.approx(expected) and session.purchase.score == score
    for part in ("r_type", "attr_hits", "opt_hits", "price_ok", "title_score"):
        assert f"<td>{part}</td>" in body
    # done: no more actions
    assert client.get(f"/s/{sid}/click?c={quote('Buy Now')}").status_code == 400


def test_sessions_are_isolated(app, client):
    a, b = start(client, 1), start(client, 2)
    assert a != b
    body_a = follow(client, f"/s/{a}/search?q=coffee")
    body_b = page(client, b)
    assert 'data-page="results"' in body_a and 'data-page="search"' in body_b
    assert str(escape(instruction_query(app, 2))) in body_b
    follow(client, hrefs(body_a, "item-link")[0])
    # a's item link is not a click b's page offers; b stays put
    link = hrefs(body_a, "item-link")[1].replace(a, b)
    assert client.get(link).status_code == 400
    assert 'data-page="search"' in page(client, b)
    assert 'data-page="item"' in page(client, a)
    store = app.extensions["rspo_webshop"]
    assert store.get(a)[0] is not store.get(b)[0]


def test_concurrent_sessions_threads(app):
    def play(i: int, out: list) -> None:
        c = app.test_client()
        sid = start(c, i)
        body = follow(c, f"/s/{sid}/search?q=snack+{i}")
        body = follow(c, hrefs(body, "item-link")[0])
        out.append((sid, 'data-page="item"' in body))

    out: list = []
    threads = [threading.Thread(target=play, args=(i, out)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 8 and all(ok for _, ok in out) and len({s for s, _ in out}) == 8


def test_session_cap_evicts_oldest():
    small = create_app(num_products=N, split="test", max_sessions=3)
    c = small.test_client()
    sids = [start(c, i) for i in range(4)]
    assert c.get(f"/s/{sids[0]}").status_code == 404
    assert all(c.get(f"/s/{s}").status_code == 200 for s in sids[1:])
    assert len(small.extensions["rspo_webshop"]) == 3


def test_query_is_escaped(client):
    sid = start(client)
    r = client.get(f"/s/{sid}/search?q={quote('<script>alert(1)</script> snack')}")
    # brackets-free html is accepted as a query; the query is never echoed unescaped
    assert r.status_code == 303
    body = page(client, sid)
    assert "<script>" not in body
    r = client.get(f"/s/{sid}/click?c={quote('<script>alert(1)</script>')}")
    assert r.status_code == 400 and "<script>" not in r.get_data(as_text=True)
    r = client.get("/s/<script>x</script>")
    assert r.status_code == 404 and "<script>" not in r.get_data(as_text=True)


def test_bad_requests_are_4xx(client):
    sid = start(client)
    cases = {
        "/?task_id=-1": 400, "/?task_id=abc": 400, "/?task_id=99999999999": 400, "/?task_id=500": 400,
        "/s/nope": 404, "/s/nope/click?c=search": 404, f"/s/{'x' * 5000}": 404,
        f"/s/{sid}/search": 400, f"/s/{sid}/search?q=": 400, f"/s/{sid}/search?q=%20%20": 400,
        f"/s/{sid}/search?q={'a' * 501}": 400, f"/s/{sid}/search?q=caf%C3%A9": 400,
        f"/s/{sid}/search?q=a%00b": 400, f"/s/{sid}/search?q=a[b]": 400,
        f"/s/{sid}/search?q=%3Cq%3E%20snack": 400, f"/s/{sid}/click": 400, f"/s/{sid}/click?c=search": 400,
        f"/s/{sid}/click?c=buy%20now": 400, f"/s/{sid}/nothing": 404, "/../../etc/passwd": 404,
    }
    for url, code in cases.items():
        r = client.get(url)
        assert r.status_code == code, (url, r.status_code)
    assert client.post("/").status_code == 405
    assert client.delete(f"/s/{sid}").status_code == 405
    assert 'data-page="search"' in page(client, sid)
    # undecodable percent-escapes stay literal text (Werkzeug): a plain ASCII query
    assert client.get(f"/s/{sid}/search?q=%ff%fe").status_code == 303


def test_hostile_http_1000_requests(app):
    rng = random.Random(1234)
    c = app.test_client()
    sids = [start(c, i) for i in range(3)]
    follow(c, f"/s/{sids[1]}/search?q=snack")
    junk = ["", "%00", "%ff", "%C3%A9", "é", "\u202e", "../", "..%2f..%2f", "%2e%2e/", "<script>", "'\"",
            "a" * 3000, "%" * 20, "%zz", "[", "]", "click[buy now]", "buy now", "next >", "< prev",
            "search", "null", "😀" * 50, "\x00", "\r\nX: y", "?c=", "&c=x", "#frag"]
    paths = ["/", "/s/", "/s/{sid}", "/s/{sid}/", "/s/{sid}/search", "/s/{sid}/click", "/s/{sid}/x",
             "/s/{sid}/click/extra", "/static/../../etc/passwd", "/s/{sid}/../../", "/favicon.ico",
             "/s//click", "/s/{sid}%2fclick", "/%00", "/s/{sid}/search/"]
    methods = ["GET"] * 6 + ["POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
    for _ in range(1000):
        sid = rng.choice(sids + ["unknown", "", "x" * 100, rng.choice(junk)])
        path = rng.choice(paths).replace("{sid}", quote(sid, safe=rng.choice(["", "/%"])))
        params = []
        for _ in range(rng.randrange(3)):
            key = rng.choice(["q", "c", "task_id", "zz", rng.choice(junk)])
            val = rng.choice(junk + [str(rng.randrange(-5, 10 ** rng.randrange(1, 12)))])
            params.append(f"{quote(key, safe=rng.choice(['', '%&=']))}={quote(val, safe=rng.choice(['', '%&=/']))}")
        url = path + ("?" + "&".join(params) if params else "")
        method = rng.choice(methods)
        data = rng.choice([None, b"x" * rng.randrange(100000), "q=1"]) if method != "GET" else None
        r = c.open(url, method=method, data=data)
        assert r.status_code < 500, (method, url, r.status_code)
        if r.status_code >= 400 and method != "HEAD":
            assert len(r.get_data()) < 2000
    assert app.extensions["rspo_webshop"].errors == 0


def test_missing_flask_message(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_flask(name, *args, **kwargs):
        if name == "flask" or name.startswith("flask."):
            raise ImportError("No module named 'flask'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_flask)
    with pytest.raises(ImportError, match=r"pip install 'rspo-gym\[web\]'"):
        create_app(num_products=N)


def test_cli_has_webshop_serve():
    from rspo_gym.cli import build_parser

    args = build_parser().parse_args(["webshop", "serve", "--num-products", "300"])
    assert (args.host, args.port, args.num_products, args.split) == ("127.0.0.1", 3000, 300, "test")
    assert build_parser().parse_args(["demo"]).command == "demo"


CHROMIUM = "/usr/bin/chromium"
_HAVE_BROWSER = os.path.exists(CHROMIUM) and importlib.util.find_spec("playwright") is not None


@pytest.mark.skipif(not _HAVE_BROWSER, reason="needs /usr/bin/chromium and the playwright package")
def test_real_browser_click_through(app):
    from playwright.sync_api import sync_playwright
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM,
                args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                      "--disable-component-update", "--disable-sync", "--no-first-run"],
            )
            try:
                tab = browser.new_page()
                tab.set_default_timeout(15000)
                tab.goto(f"{base}/?task_id=0")
                assert tab.locator("body").get_attribute("data-page") == "search"
                tab.fill("#search-input", "trail mix snack")
                tab.click("#search-button")
                tab.wait_for_selector("body[data-page=results]")
                assert "Total results:" in tab.inner_text("#page-counter")
                count = tab.locator("a.item-link").count()
                for k in range(count):
                    tab.locator("a.item-link").nth(k).click()
                    tab.wait_for_selector("body[data-page=item]")
                    if tab.locator("a.option").count():
                        break
                    tab.click("#prev")
                    tab.wait_for_selector("body[data-page=results]")
                else:
                    pytest.skip("no result with options for this query")
                tab.locator("a.option").first.click()
                tab.wait_for_selector("a.option.selected")
                tab.click("#buy-now")
                tab.wait_for_selector("body[data-page=done]")
                score = float(tab.inner_text("#score"))
                assert 0.0 <= score <= 1.0
                assert "Thank you for shopping with us!" in tab.content()
            finally:
                browser.close()
    finally:
        server.shutdown()
        thread.join(5)
