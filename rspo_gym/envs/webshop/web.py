"""WebShop for people: the same :class:`~rspo_gym.envs.webshop.session.Session` engine as HTML.

``create_app()`` returns a Flask app (install the ``[web]`` extra); ``rspo-gym webshop serve``
runs it on loopback. Every page is rendered from the session's state, and every button is a GET
link or form that maps to one session action, so a person plays exactly the episodes an agent
plays (same pages, same clickables, same score)::

    GET /                       new session (``?task_id=k`` of the split, default random) -> /s/<sid>
    GET /s/<sid>                the current page
    GET /s/<sid>/search?q=...   ``search[q]`` (search page only)
    GET /s/<sid>/click?c=...    ``click[c]`` (``c`` a clickable of the current page)

Sessions live in an app-owned store (random ids from :func:`secrets.token_urlsafe`, a lock, at
most ``max_sessions``, the least recently used evicted). Bad input (unknown session, missing,
oversized or non-ASCII parameters, clicks the page does not offer) is a 4xx with a short
message; an unexpected exception is logged and answered 500 (counted in ``store.errors``).
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections import OrderedDict
from typing import Any
from urllib.parse import quote

from rspo_gym.envs.webshop.env import shared_catalog
from rspo_gym.envs.webshop.search import index_for
from rspo_gym.envs.webshop.session import (
    BACK_TO_SEARCH,
    BUY_NOW,
    MAX_QUERY_CHARS,
    NEXT_PAGE,
    PREV_PAGE,
    Page,
    Session,
)

__all__ = ["create_app", "SessionStore", "MAX_SESSIONS"]

logger = logging.getLogger(__name__)

#: default cap on live sessions per app (the least recently used is evicted beyond it)
MAX_SESSIONS = 10_000
#: longest accepted ``c`` parameter (clickables are ASINs, buttons and option values)
MAX_CLICK_CHARS = 200
_MAX_SID_CHARS = 64
_MAX_TASK_ID_CHARS = 9

_STYLE = """
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:960px;padding:1em;color:#222}
#instruction{background:#eef6ff;border:1px solid #9cc3e6;border-radius:6px;padding:.6em 1em}
a.btn,button{display:inline-block;padding:.35em .8em;margin:.15em;border:1px solid #2b6cb0;
border-radius:4px;background:#2b6cb0;color:#fff;text-decoration:none;font-size:1em;cursor:pointer}
a.btn.green{background:#2f855a;border-color:#2f855a}
a.option{background:#fff;color:#2b6cb0}
a.option.selected{background:#2b6cb0;color:#fff;font-weight:bold}
a.buy{background:#c05621;border-color:#c05621;font-weight:bold}
.row{margin:.6em 0}.hit{border-bottom:1px solid #ddd;padding:.4em 0}
.price{color:#2f855a}.score{font-size:2em;font-weight:bold}
table.parts td{padding:.1em .8em;border-bottom:1px solid #eee}
"""

# One template, compiled once per app (``jinja_env.from_string``) with autoescaping forced on.
_PAGE = """{% autoescape true %}<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>WebShop</title>
<link rel="icon" href="data:,"><style>{{ style }}</style></head>
<body data-page="{{ page }}">
{% if page == "done" %}
  <h2>Thank you for shopping with us!</h2>
  <div class="row">Your score (min 0.0, max 1.0)</div>
  <div class="row score" id="score">{{ purchase.score }}</div>
  <div class="row">Bought <b id="bought-asin">{{ purchase.asin }}</b>
    {% if purchase.options %}with {% for k, v in purchase.options.items() %}{{ k }}: {{ v }}{% if not loop.last %}, {% endif %}{% endfor %}{% endif %}</div>
  <div id="instruction"><b>Instruction:</b> {{ instruction }}</div>
  <h4>Reward parts</h4>
  <table class="parts" id="reward-parts">
  {% for k, v in parts.items() %}<tr><td>{{ k }}</td><td>{{ v }}</td></tr>{% endfor %}
  </table>
  <div class="row"><a class="btn green" id="new-task" href="/">Start a new task</a></div>
{% else %}
  {% if page == "search" %}<h1>WebShop</h1>{% endif %}
  <div id="instruction"><b>Instruction:</b><br>{{ instruction }}</div>
  {% if page == "search" %}
  <form class="row" id="search-form" method="get" action="{{ base }}/search">
    <input type="text" name="q" id="search-input" maxlength="{{ max_query }}" size="60"
      placeholder="Search..." autofocus required>
    <button type="submit" id="search-button">Search</button>
  </form>
  {% else %}
  <div class="row"><a class="btn green" id="back-to-search" href="{{ click(back) }}">{{ back }}</a></div>
  {% endif %}
  {% if page == "results" %}
  <div class="row"><b id="page-counter">Page {{ page_no }} (Total results: {{ total }})</b></div>
  <div class="row">
    {% if page_no > 1 %}<a class="btn" id="prev" href="{{ click(prev) }}">{{ prev }}</a>{% endif %}
    <a class="btn" id="next" href="{{ click(next) }}">{{ next }}</a>
  </div>
  {% for it in hits %}
  <div class="hit"><a class="item-link" href="{{ click(it.asin) }}">{{ it.asin }}</a>
    <div>{{ it.title }}</div><div class="price">{{ it.price_text }}</div></div>
  {% endfor %}
  {% elif page == "item" or page == "sub" %}
  <div class="row"><a class="btn" id="prev" href="{{ click(prev) }}">{{ prev }}</a></div>
  {% endif %}
  {% if page == "item" %}
  {% for name, values in item.options.items() %}
  <div class="row option-group"><h4>{{ name }}</h4>
    {% for v in values %}
    {% set sel = selected.get(name.lower()) == v.lower() %}
    <a class="btn option{% if sel %} selected{% endif %}" aria-pressed="{{ 'true' if sel else 'false' }}"
      href="{{ click(v) }}">{% if sel %}&#10003; {% endif %}{{ v }}</a>
    {% endfor %}
  </div>
  {% endfor %}
  <h2 id="title">{{ item.title }}</h2>
  <h4>Price: {{ item.price_text }}</h4>
  <h4>Rating: {{ rating }}</h4>
  <div class="row">
    {% for b in sub_buttons %}<a class="btn sub-link" href="{{ click(b) }}">{{ b }}</a>{% endfor %}
  </div>
  <div class="row"><a class="btn buy" id="buy-now" href="{{ click(buy) }}">{{ buy }}</a></div>
  {% elif page == "sub" %}
  <h3>{{ sub }}</h3>
  <div id="sub-content">{% for line in sub_content %}<p>{{ line }}</p>{% endfor %}</div>
  {% endif %}
{% endif %}
</body></html>{% endautoescape %}"""

_ERROR = """{% autoescape true %}<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>{{ code }}</title></head><body><h3>{{ code }}: {{ message }}</h3>
<p><a href="/">Start a new task</a></p></body></html>{% endautoescape %}"""


class SessionStore:
    """Live sessions keyed by random ids; thread-safe; least recently used evicted past ``cap``.

    Each entry carries its own lock, so one shopper's requests are serialised while different
    shoppers proceed concurrently.
    """

    def __init__(self, cap: int = MAX_SESSIONS) -> None:
        if cap < 1:
            raise ValueError(f"max_sessions must be >= 1, got {cap}")
        self.cap = cap
        self.errors = 0  # unexpected exceptions answered 500
        self._lock = threading.Lock()
        self._items: OrderedDict[str, tuple[Session, threading.Lock, int]] = OrderedDict()

    def add(self, session: Session, task_id: int) -> str:
        sid = secrets.token_urlsafe(16)
        with self._lock:
            while sid in self._items:  # pragma: no cover - 128 random bits
                sid = secrets.token_urlsafe(16)
            self._items[sid] = (session, threading.Lock(), task_id)
            while len(self._items) > self.cap:
                self._items.popitem(last=False)
        return sid

    def get(self, sid: str) -> tuple[Session, threading.Lock, int] | None:
        with self._lock:
            entry = self._items.get(sid)
            if entry is not None:
                self._items.move_to_end(sid)
            return entry

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __contains__(self, sid: object) -> bool:
        with self._lock:
            return sid in self._items


def _check_text(value: str | None, name: str, max_chars: int) -> str:
    """A required, bounded, printable ASCII parameter, else 400."""
    from flask import abort

    if value is None or not value.strip():
        abort(400, f"missing parameter {name!r}")
    if len(value) > max_chars:
        abort(400, f"parameter {name!r} is too long (at most {max_chars} characters)")
    if not value.isascii() or not value.isprintable():
        abort(400, f"parameter {name!r} must be printable ASCII")
    return value


def _page_context(session: Session, sid: str) -> dict[str, Any]:
    """Everything the template shows for the session's current page.

    ``Session.view()`` is the same page record the text observation is rendered from, so the HTML
    shows exactly what the text mode shows.
    """
    base = f"/s/{sid}"
    view = session.view()
    ctx: dict[str, Any] = {
        "page": session.page.value,
        "instruction": session.goal.instruction_text,
        "base": base,
        "click": lambda c: f"{base}/click?c={quote(str(c), safe='')}",
        "back": BACK_TO_SEARCH, "prev": PREV_PAGE, "next": NEXT_PAGE, "buy": BUY_NOW,
        "max_query": MAX_QUERY_CHARS,
    }
    page = session.page
    if page is Page.DONE:
        purchase = session.purchase
        ctx["purchase"] = purchase
        ctx["parts"] = purchase.parts.as_dict()
    elif page is Page.RESULTS:
        ctx["page_no"] = view.page_no
        ctx["total"] = view.total_results
        ctx["hits"] = [session.catalog.item(i) for i in view.hits]
    elif page in (Page.ITEM, Page.SUB):
        item = session.catalog.item(session.current_item)
        ctx["item"] = item
        ctx["selected"] = dict(session.selected_options)
        ctx["sub_buttons"] = view.sub_buttons
        ctx["rating"] = item.rating if (session.show_reviews and item.rating is not None) else "N.A."
        if page is Page.SUB:
            ctx["sub"] = view.sub
            ctx["sub_content"] = list(view.sub_content)
    return ctx


def create_app(
    num_products: int = 1000,
    catalog_seed: int = 0,
    split: str = "test",
    *,
    goal_style: str = "human",
    max_sessions: int = MAX_SESSIONS,
) -> Any:
    """The WebShop site for people over the synthetic catalog (``num_products``, ``catalog_seed``)
    with the goals of ``split`` (``test``/``valid``/``train``). Returns a :class:`flask.Flask`."""
    try:
        import flask
        from werkzeug.exceptions import HTTPException
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("rspo_gym.envs.webshop.web needs Flask; install the [web] extra: "
                          "pip install 'rspo-gym[web]'") from exc
    from flask import abort, redirect, request

    catalog, goals = shared_catalog(num_products, catalog_seed, goal_style)
    task_ids = goals.split(split)
    if len(task_ids) == 0:
        raise ValueError(f"Split {split!r} has no goals with {num_products} products; use a larger catalog")
    index = index_for(("webshop", num_products, catalog_seed),
                      lambda: (catalog.search_document(i) for i in range(len(catalog))),
                      doc_ids_factory=lambda: (catalog.asin(i) for i in range(len(catalog))))

    app = flask.Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = 16 * 1024  # GET-only site: no bodies worth reading
    store = SessionStore(max_sessions)
    app.extensions["rspo_webshop"] = store
    page_template = app.jinja_env.from_string(_PAGE)
    error_template = app.jinja_env.from_string(_ERROR)

    def html(body: str, code: int = 200) -> Any:
        resp = flask.make_response(body, code)
        resp.headers["Content-Type"] = "text/html; charset=utf-8"
        resp.headers["Content-Security-Policy"] = (
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'")
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Cache-Control"] = "no-store"
        return resp

    def lookup(sid: str) -> tuple[Session, threading.Lock, int]:
        entry = store.get(sid) if len(sid) <= _MAX_SID_CHARS else None
        if entry is None:
            abort(404, "unknown or expired session; start a new one at /")
        return entry

    def act(sid: str, action: str) -> Any:
        session, lock, _ = lookup(sid)
        with lock:
            result = session.step(action)
        if not result.valid:
            abort(400, "that action is not available on this page")
        return redirect(f"/s/{sid}", code=303)

    @app.get("/")
    def start() -> Any:
        raw = request.args.get("task_id")
        if raw is None:
            task_id = secrets.randbelow(len(task_ids))
        else:
            if not (raw.isascii() and raw.isdigit() and len(raw) <= _MAX_TASK_ID_CHARS):
                abort(400, "task_id must be a non-negative integer")
            task_id = int(raw)
            if task_id >= len(task_ids):
                abort(400, f"task_id must be below {len(task_ids)} for split {split!r}")
        session = Session(catalog, index, goals[task_ids[task_id]])
        return redirect(f"/s/{store.add(session, task_id)}", code=303)

    @app.get("/s/<sid>")
    def show(sid: str) -> Any:
        session, lock, task_id = lookup(sid)
        with lock:
            ctx = _page_context(session, sid)
            body = page_template.render(style=_STYLE, task_id=task_id, **ctx)
        return html(body)

    @app.get("/s/<sid>/search")
    def search(sid: str) -> Any:
        lookup(sid)
        query = _check_text(request.args.get("q"), "q", MAX_QUERY_CHARS)
        if "[" in query or "]" in query:
            abort(400, "parameter 'q' must not contain '[' or ']'")
        return act(sid, f"search[{query}]")

    @app.get("/s/<sid>/click")
    def click(sid: str) -> Any:
        lookup(sid)
        c = _check_text(request.args.get("c"), "c", MAX_CLICK_CHARS)
        return act(sid, f"click[{c}]")

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Any:
        if exc.code is None or exc.code < 400:  # pragma: no cover - redirects are not raised here
            return exc
        message = exc.description if exc.code < 500 else "internal error"
        resp = html(error_template.render(code=exc.code, message=message), exc.code)
        if exc.code == 405:
            resp.headers["Allow"] = "GET, HEAD"
        return resp

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Any:  # last resort: the tests assert it never runs
        store.errors += 1
        logger.exception("unexpected error serving %s", request.path)
        return html(error_template.render(code=500, message="internal error"), 500)

    return app
