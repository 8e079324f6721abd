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
    r = client.post("/new", data={"task_id": str(task_id)})
    assert r.status_code == 303
    m = re.fullmatch(r"/s/([A-Za-z0-9_-]+)/0", r.headers["Location"])
    assert m, r.headers["Location"]
    return m.group(1)


def page(client, sid: str, step: int | None = None) -> str:
    r = client.get(f"/s/{sid}" if step is None else f"/s/{sid}/{step}", follow_redirects=True)
    assert r.status_code == 200
    return r.get_data(as_text=True)


def post(client, sid: str, kind: str, value: str, at: int | None = None):
    field = "q" if kind == "search" else "c"
    data = {field: value} if at is None else {field: value, "at": str(at)}
    return client.post(f"/s/{sid}/{kind}", data=data)


def follow(client, sid: str, kind: str, value: str, at: int | None = None) -> str:
    """Act (POST), check the Post/Redirect/Get answer, and return the new step's page."""
    r = post(client, sid, kind, value, at)
    assert r.status_code == 303, (kind, value, r.status_code, r.get_data(as_text=True)[:200])
    assert re.fullmatch(rf"/s/{sid}/\d+", r.headers["Location"]), r.headers["Location"]
    r = client.get(r.headers["Location"])
    assert r.status_code == 200
    return r.get_data(as_text=True)


def buttons(body: str, cls: str) -> list[str]:
    """The values of the buttons of class ``cls`` (what clicking them sends as ``c``)."""
    return [html.unescape(v) for v in re.findall(rf'<button class="[^"]*\b{cls}\b[^"]*"[^>]*value="([^"]*)"', body)]


def step_of(body: str) -> int:
    return int(re.search(r'data-step="(\d+)"', body).group(1))


def instruction_query(app, task_id: int = 0) -> str:
    store = app.extensions["rspo_webshop"]
    assert isinstance(store, SessionStore)
    from rspo_gym.envs.webshop.env import shared_catalog

    _, goals = shared_catalog(N, 0, "human", 1)  # the site serves rspo/WebShop-v1's goals
    return goals[goals.split("test")[task_id]].instruction_text


def test_click_through_to_score(app, client):
    start_page = client.get("/?task_id=0").get_data(as_text=True)
    assert 'data-page="start"' in start_page and 'value="0"' in start_page
    sid = start(client, 0)
    body = page(client, sid)
    assert 'data-page="search"' in body and 'id="search-form"' in body and 'method="post"' in body
    assert str(escape(instruction_query(app))) in body
    # the page says which split task 0 is from, and that Python's default split differs
    assert "Task 0 of the <b>test</b> split" in body and 'split="test"' in body and "<b>train</b>" in body

    body = follow(client, sid, "search", "trail mix snack")
    assert 'data-page="results"' in body and "Page 1 (Total results: " in body
    assert 'id="next"' in body and 'id="prev"' not in body
    body = follow(client, sid, "click", "Next >")
    assert "Page 2 (Total results: " in body and 'id="prev"' in body
    body = follow(client, sid, "click", "< Prev")
    assert "Page 1 (Total results: " in body

    # an item that has options
    store = app.extensions["rspo_webshop"]
    session = store.get(sid).session
    for asin in buttons(body, "item-link"):
        body = follow(client, sid, "click", asin)
        assert 'data-page="item"' in body and 'id="buy-now"' in body
        if session.catalog.item(session.current_item).options:
            break
        body = follow(client, sid, "click", "< Prev")
    else:
        pytest.skip("no result with options for this query")
    for sub in ("Description", "Features", "Reviews"):
        assert f">{sub}</button>" in body
    sub_body = follow(client, sid, "click", "Features")
    assert 'data-page="sub"' in sub_body
    body = follow(client, sid, "click", "< Prev")

    option = buttons(body, "option")[0]
    assert "selected" not in re.findall(r'<button class="([^"]*option[^"]*)"', body)[0]
    body = follow(client, sid, "click", option)
    assert re.findall(r'<button class="([^"]*option[^"]*)"', body)[0] == "option selected"
    assert len(session.selected_options) == 1
    expected = session.current_item_score()

    body = follow(client, sid, "click", "Buy Now")
    assert 'data-page="done"' in body and "Thank you for shopping with us!" in body
    score = float(re.search(r'id="score">([^<]+)<', body).group(1))
    assert score == pytest.approx(expected) and session.purchase.score == score
    parts = session.purchase.parts
    rows = dict(re.findall(r"<tr><td>([^<]+)</td><td>([^<]+)</td></tr>", body))
    assert rows["Attributes matched"] == f"{parts.attr_hits} of {parts.n_attr}"
    assert rows["Options matched"] == f"{parts.opt_hits} of {parts.n_opt}"
    assert rows["Price within the limit"] == ("yes" if parts.price_ok else "no")
    assert len(rows) == 7 and "r_type" not in body and "n_attr" not in body
    # done: no more actions
    assert post(client, sid, "click", "Buy Now").status_code == 400


def test_get_and_head_change_nothing(app, client):
    """Links are never actions: a prefetcher or link checker (GET, HEAD) cannot search or buy."""
    sid = start(client, 3)
    body = follow(client, sid, "search", "snack")
    entry = app.extensions["rspo_webshop"].get(sid)
    before = (entry.session.snapshot(), entry.step, len(app.extensions["rspo_webshop"]))
    asin = buttons(body, "item-link")[0]
    for method in ("GET", "HEAD"):
        for url in (f"/s/{sid}/click?c={quote(asin)}", f"/s/{sid}/click?c=Buy%20Now", f"/s/{sid}/search?q=x",
                    "/", "/?task_id=3", f"/s/{sid}", f"/s/{sid}/0", f"/s/{sid}/1", "/new"):
            assert client.open(url, method=method).status_code in (200, 303, 405), (method, url)
    assert (entry.session.snapshot(), entry.step, len(app.extensions["rspo_webshop"])) == before
    assert client.get(f"/s/{sid}/click?c=Buy%20Now").headers["Allow"] == "OPTIONS, POST"


def test_back_shows_and_acts_from_the_earlier_step(app, client):
    sid = start(client, 4)
    results = follow(client, sid, "search", "snack")
    first, second = buttons(results, "item-link")[:2]
    item = follow(client, sid, "click", first)
    session = app.extensions["rspo_webshop"].get(sid).session
    assert step_of(item) == 2 and session.catalog.item(session.current_item).asin.lower() == first.lower()
    # Back: step 1 is the results page again, marked as an earlier page; the session has not moved
    back = page(client, sid, 1)
    assert 'data-page="results"' in back and 'id="past"' in back and step_of(back) == 1
    assert 'data-page="item"' in page(client, sid)
    # acting from step 1 continues from there (the item of step 2 is forgotten)
    other = follow(client, sid, "click", second, at=1)
    assert step_of(other) == 2 and 'data-page="item"' in other and 'id="past"' not in other
    assert session.catalog.item(session.current_item).asin.lower() == second.lower()
    # a click the earlier page does not offer is refused and leaves the current step as it was
    assert post(client, sid, "click", "Buy Now", at=1).status_code == 400
    assert session.current_item is not None and step_of(page(client, sid)) == 2
    assert client.get(f"/s/{sid}/3").status_code == 404  # no future steps
    assert post(client, sid, "click", "Buy Now", at=7).status_code == 409
    # a purchase is final: Back shows the item page, but buying again from it is refused
    done = follow(client, sid, "click", "Buy Now")
    assert 'data-page="done"' in done and step_of(done) == 3
    past = page(client, sid, 2)
    assert 'data-page="item"' in past and "the purchase is final" in past
    assert post(client, sid, "click", "Buy Now", at=2).status_code == 409
    assert 'data-page="done"' in page(client, sid) and session.purchase.asin.lower() == second.lower()


def test_history_is_bounded():
    from rspo_gym.envs.webshop.web import MAX_HISTORY

    small = create_app(num_products=N, split="test")
    c = small.test_client()
    sid = start(c, 0)
    follow(c, sid, "search", "snack")
    for _ in range(MAX_HISTORY + 5):
        follow(c, sid, "click", "Next >")
    entry = small.extensions["rspo_webshop"].get(sid)
    assert len(entry.history) == MAX_HISTORY and entry.step == MAX_HISTORY + 6
    assert c.get(f"/s/{sid}/{entry.step - MAX_HISTORY + 1}").status_code == 200
    assert c.get(f"/s/{sid}/{entry.step - MAX_HISTORY}").status_code == 404
    assert post(c, sid, "click", "Next >", at=2).status_code == 409


def test_sessions_are_isolated(app, client):
    a, b = start(client, 1), start(client, 2)
    assert a != b
    body_a = follow(client, a, "search", "coffee")
    body_b = page(client, b)
    assert 'data-page="results"' in body_a and 'data-page="search"' in body_b
    assert str(escape(instruction_query(app, 2))) in body_b
    follow(client, a, "click", buttons(body_a, "item-link")[0])
    # a's item is not a click b's page offers; b stays put
    assert post(client, b, "click", buttons(body_a, "item-link")[1]).status_code == 400
    assert 'data-page="search"' in page(client, b)
    assert 'data-page="item"' in page(client, a)
    store = app.extensions["rspo_webshop"]
    assert store.get(a).session is not store.get(b).session


def test_concurrent_sessions_threads(app):
    def play(i: int, out: list) -> None:
        c = app.test_client()
        sid = start(c, i)
        body = follow(c, sid, "search", f"snack {i}")
        body = follow(c, sid, "click", buttons(body, "item-link")[0])
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
    assert all(c.get(f"/s/{s}/0").status_code == 200 for s in sids[1:])
    assert len(small.extensions["rspo_webshop"]) == 3


def test_query_is_escaped(client):
    sid = start(client)
    r = post(client, sid, "search", "<script>alert(1)</script> snack")
    # brackets-free html is accepted as a query; the query is never echoed unescaped
    assert r.status_code == 303
    body = page(client, sid)
    assert "<script>" not in body
    r = post(client, sid, "click", "<script>alert(1)</script>")
    assert r.status_code == 400 and "<script>" not in r.get_data(as_text=True)
    r = client.get("/s/<script>x</script>")
    assert r.status_code == 404 and "<script>" not in r.get_data(as_text=True)


def test_bad_requests_are_4xx(client):
    sid = start(client)
    gets = {
        "/?task_id=-1": 400, "/?task_id=abc": 400, "/?task_id=99999999999": 400, "/?task_id=500": 400,
        "/s/nope": 404, "/s/nope/0": 404, f"/s/{'x' * 5000}": 404, f"/s/{sid}/1": 404,
        f"/s/{sid}/search?q=snack": 405, f"/s/{sid}/click?c=search": 405,
        f"/s/{sid}/nothing": 404, "/../../etc/passwd": 404,
    }
    for url, code in gets.items():
        r = client.get(url)
        assert r.status_code == code, (url, r.status_code)
    posts = {
        ("search", None): 400, ("search", ""): 400, ("search", "  "): 400, ("search", "a" * 501): 400,
        ("search", "café"): 400, ("search", "a\x00b"): 400, ("search", "a[b]"): 400,
        ("search", "<q> snack"): 400, ("click", None): 400, ("click", "search"): 400, ("click", "buy now"): 400,
    }
    for (kind, value), code in posts.items():
        data = {} if value is None else {"q" if kind == "search" else "c": value}
        r = client.post(f"/s/{sid}/{kind}", data=data)
        assert r.status_code == code, (kind, value, r.status_code)
    for at in ("-1", "x", "1.5", "9" * 20):
        assert post(client, sid, "search", "snack", at=at).status_code == 400, at
    assert client.post("/s/nope/click", data={"c": "search"}).status_code == 404
    for task_id in ("-1", "abc", "500"):
        assert client.post("/new", data={"task_id": task_id}).status_code == 400
    assert client.post("/").status_code == 405
    assert client.delete(f"/s/{sid}").status_code == 405
    assert 'data-page="search"' in page(client, sid)


def test_hostile_http_1000_requests(app):
    rng = random.Random(1234)
    c = app.test_client()
    sids = [start(c, i) for i in range(3)]
    follow(c, sids[1], "search", "snack")
    junk = ["", "%00", "%ff", "%C3%A9", "é", "\u202e", "../", "..%2f..%2f", "%2e%2e/", "<script>", "'\"",
            "a" * 3000, "%" * 20, "%zz", "[", "]", "click[buy now]", "buy now", "next >", "< prev",
            "search", "null", "😀" * 50, "\x00", "\r\nX: y", "?c=", "&c=x", "#frag"]
    paths = ["/", "/new", "/s/", "/s/{sid}", "/s/{sid}/", "/s/{sid}/search", "/s/{sid}/click", "/s/{sid}/x",
             "/s/{sid}/0", "/s/{sid}/1", "/s/{sid}/99999999999999999999",
             "/s/{sid}/click/extra", "/static/../../etc/passwd", "/s/{sid}/../../", "/favicon.ico",
             "/s//click", "/s/{sid}%2fclick", "/%00", "/s/{sid}/search/"]
    methods = ["GET"] * 4 + ["POST"] * 4 + ["PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
    for _ in range(1000):
        sid = rng.choice(sids + ["unknown", "", "x" * 100, rng.choice(junk)])
        path = rng.choice(paths).replace("{sid}", quote(sid, safe=rng.choice(["", "/%"])))
        params = []
        for _ in range(rng.randrange(3)):
            key = rng.choice(["q", "c", "at", "task_id", "zz", rng.choice(junk)])
            val = rng.choice(junk + [str(rng.randrange(-5, 10 ** rng.randrange(1, 12)))])
            params.append(f"{quote(key, safe=rng.choice(['', '%&=']))}={quote(val, safe=rng.choice(['', '%&=/']))}")
        query = "&".join(params)
        method = rng.choice(methods)
        if method == "GET":
            r = c.open(path + ("?" + query if params else ""), method=method)
        else:
            data = rng.choice([None, b"x" * rng.randrange(100000), query])
            kwargs = {"content_type": "application/x-www-form-urlencoded"} if isinstance(data, str) else {}
            r = c.open(path, method=method, data=data, **kwargs)
        assert r.status_code < 500, (method, path, query, r.status_code)
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
@pytest.mark.slow
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
                assert tab.locator("body").get_attribute("data-page") == "start"
                tab.click("#start")
                tab.wait_for_selector("body[data-page=search]")
                assert "Task 0 of the test split" in tab.inner_text("#task-note")
                tab.fill("#search-input", "trail mix snack")
                tab.click("#search-button")
                tab.wait_for_selector("body[data-page=results]")
                assert "Total results:" in tab.inner_text("#page-counter")
                count = tab.locator("button.item-link").count()
                for k in range(count):
                    tab.locator("button.item-link").nth(k).click()
                    tab.wait_for_selector("body[data-page=item]")
                    if tab.locator("button.option").count():
                        break
                    tab.click("#prev")
                    tab.wait_for_selector("body[data-page=results]")
                else:
                    pytest.skip("no result with options for this query")
                item_url = tab.url
                # the browser's Back button steps back to the results page, and Forward returns
                tab.go_back()
                tab.wait_for_selector("body[data-page=results]")
                assert tab.locator("#past").count() == 1
                tab.go_forward()
                tab.wait_for_selector("body[data-page=item]")
                assert tab.url == item_url and tab.locator("#past").count() == 0
                tab.locator("button.option").first.click()
                tab.wait_for_selector("button.option.selected")
                tab.click("#buy-now")
                tab.wait_for_selector("body[data-page=done]")
                score = float(tab.inner_text("#score"))
                assert 0.0 <= score <= 1.0
                assert "Thank you for shopping with us!" in tab.content()
                assert "Options matched" in tab.inner_text("#reward-parts")
            finally:
                browser.close()
    finally:
        server.shutdown()
        thread.join(5)


def test_no_response_may_be_framed_by_another_site(client):
    sid = start(client)
    for response in (client.get("/"), client.get(f"/s/{sid}"), client.post("/new", data={"task_id": "0"}), client.get("/nope")):
        assert response.headers["X-Frame-Options"] == "DENY", response.status
        assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"], response.status


def test_site_serves_v1_and_names_it(client):
    assert "rspo/WebShop-v1" in page(client, start(client, 0))
    old = create_app(num_products=N, split="test", task_version=0).test_client()
    assert "rspo/WebShop-v0" in page(old, start(old, 0))


@pytest.fixture()
def served(app, monkeypatch):
    """The app on a real socket, served with the request handler ``app.run`` (so ``rspo-gym webshop
    serve``) gives werkzeug; returns the port."""
    import werkzeug.serving

    options = {}
    monkeypatch.setattr(werkzeug.serving, "run_simple", lambda host, port, application, **given: options.update(given))
    app.run(host="127.0.0.1", port=0)
    server = werkzeug.serving.make_server("127.0.0.1", 0, app, threaded=True, request_handler=options.get("request_handler"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_port
    server.shutdown()
    server.server_close()


def _raw(port: int, data: bytes, wait: float = 5.0) -> tuple[bytes, float]:
    """What the server sends back for ``data`` until it closes the connection, and the seconds that took."""
    import socket
    import time

    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(wait)
        sock.sendall(data)
        started, reply = time.perf_counter(), b""
        try:
            while chunk := sock.recv(65536):
                reply += chunk
        except TimeoutError:
            pytest.fail(f"the connection stayed open {wait:g} s after {data[:40]!r}; got {reply[:60]!r}")
        return reply, time.perf_counter() - started


def test_an_oversized_body_gets_413_and_the_connection_closes(served):
    head = (b"POST /new HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
            b"Content-Length: 100000\r\n\r\n")
    reply, seconds = _raw(served, head + b"a" * 100_000)  # the whole body, then a wait for the answer
    status, _, rest = reply.partition(b"\r\n")
    assert status == b"HTTP/1.1 413 REQUEST ENTITY TOO LARGE" and rest.count(b"\r\nConnection: close\r\n") == 1
    assert seconds < 2.0
    reply, _ = _raw(served, head + b"a" * 1000)  # a body cut short
    assert reply.startswith(b"HTTP/1.1 413 ")


@pytest.mark.parametrize("line", [b"GET /\r\n", b"POST /new\r\n", b"GET /s/x/0\r\n"])
def test_an_http_0_9_request_gets_400_and_the_connection_closes(served, line):
    reply, seconds = _raw(served, line)  # no headers follow a 0.9 request line: nothing more comes
    assert reply.startswith(b"HTTP/1.1 400 ") and b"HTTP/0.9" in reply and seconds < 2.0
    reply, _ = _raw(served, b"GET / HTTP/1.0\r\n\r\n")  # the server still serves
    assert reply.startswith(b"HTTP/1.1 200 OK")
