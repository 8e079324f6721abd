"""WebShop for people: the same :class:`~rspo_gym.envs.webshop.session.Session` engine as HTML.

``create_app()`` returns a Flask app (install the ``[web]`` extra); ``rspo-gym webshop serve``
runs it on loopback. Every page is rendered from the session's state, and every button maps to one
session action, so a person plays exactly the episodes an agent plays (same pages, same
clickables, same score)::

    GET  /                      start page (``?task_id=k`` pre-fills task k of the split)
    POST /new                   new session (form field ``task_id``, default random) -> step 0
    GET  /s/<sid>               -> the current step's page
    GET  /s/<sid>/<n>           the page after n actions (earlier steps: what the browser's Back shows)
    POST /s/<sid>/search        ``search[q]`` (fields ``q`` and ``at``, the step acted from)
    POST /s/<sid>/click         ``click[c]`` (fields ``c`` and ``at``)

Actions are POST forms answered Post/Redirect/Get (303 to the new step's URL), so GET and HEAD
never change anything: a link prefetcher or checker cannot search, click or buy. Each step has its
own URL; acting from an earlier step (after Back) first returns the session to that step, as a
website would, except that a purchase is final (acting after it is a 409). A session keeps its last
:data:`MAX_HISTORY` steps.

Sessions live in an app-owned store (random ids from :func:`secrets.token_urlsafe`, a lock, at
most ``max_sessions``, the least recently used evicted). Bad input (unknown session or step,
missing, oversized or non-ASCII parameters, clicks the page does not offer) is a 4xx with a short
message; an unexpected exception is logged and answered 500 (counted in ``store.errors``).

Served by werkzeug (``app.run``, which ``rspo-gym webshop serve`` calls), every reply closes its
connection (werkzeug sends ``Connection: close``). Two requests would otherwise hang a client:
a body over the size limit, answered 413 unread, after which werkzeug reads the rest of it and
waits for more (the app shuts its side once the reply is out, so the client sees the end at once,
and gives the rest :data:`DRAIN_SECONDS` to arrive); and a bare HTTP/0.9 line (``GET /``), after
which Python's ``http.server`` waits for headers that never come (:func:`request_handler` answers
it 400).
"""

from __future__ import annotations

import functools
import logging
import secrets
import socket
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rspo_gym.envs.webshop.env import check_catalog_size, index_key, shared_catalog
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

__all__ = ["create_app", "SessionStore", "request_handler", "MAX_SESSIONS", "MAX_HISTORY", "DRAIN_SECONDS"]

logger = logging.getLogger(__name__)

#: default cap on live sessions per app (the least recently used is evicted beyond it)
MAX_SESSIONS = 10_000
#: steps a session remembers for the browser's Back button (~200 bytes each)
MAX_HISTORY = 32
#: longest accepted ``c`` parameter (clickables are ASINs, buttons and option values)
MAX_CLICK_CHARS = 200
#: seconds of silence after which the unread rest of a refused (413) body stops being drained
DRAIN_SECONDS = 1.0
_MAX_SID_CHARS = 64
_MAX_NUMBER_CHARS = 9

#: the done page's reward parts, in reading order: (label, how the value is shown)
_PART_ROWS: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...] = (
    ("Product type match (multiplies the rest)", lambda p: f"{p['r_type']:g}"),
    ("Same search query as the wanted product", lambda p: _yes_no(p["query_match"])),
    ("Same category", lambda p: _yes_no(p["category_match"])),
    ("Title word overlap", lambda p: f"{p['title_score']:.2f}"),
    ("Attributes matched", lambda p: f"{p['attr_hits']} of {p['n_attr']}"),
    ("Options matched", lambda p: f"{p['opt_hits']} of {p['n_opt']}"),
    ("Price within the limit", lambda p: _yes_no(p["price_ok"])),
)


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


_STYLE = """
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:960px;padding:1em;color:#222}
#instruction{background:#eef6ff;border:1px solid #9cc3e6;border-radius:6px;padding:.6em 1em}
#past{background:#fff8e1;border:1px solid #e0b84c;border-radius:6px;padding:.4em 1em}
form.inline{display:inline}
button{display:inline-block;padding:.35em .8em;margin:.15em;border:1px solid #2b6cb0;
border-radius:4px;background:#2b6cb0;color:#fff;font-size:1em;cursor:pointer}
button.green{background:#2f855a;border-color:#2f855a}
button.item-link{background:#fff;color:#2b6cb0;border:none;text-decoration:underline;padding:0;margin:0}
button.option{background:#fff;color:#2b6cb0}
button.option.selected{background:#2b6cb0;color:#fff;font-weight:bold}
button.buy{background:#c05621;border-color:#c05621;font-weight:bold}
.row{margin:.6em 0}.hit{border-bottom:1px solid #ddd;padding:.4em 0}.note{color:#555;font-size:.9em}
.price{color:#2f855a}.score{font-size:2em;font-weight:bold}
table.parts td{padding:.1em .8em;border-bottom:1px solid #eee}
"""

# Templates compiled once per app (``jinja_env.from_string``) with autoescaping forced on.
_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>WebShop</title>
<link rel="icon" href="data:,"><style>{{ style }}</style></head>"""

_TASK_NOTE = """<p class="note" id="task-note">Task {{ task_id }} of the <b>{{ split }}</b> split
({{ n_tasks }} goals). In Python the same goal is
<code>gym.make("{{ env_id }}", split="{{ split }}").reset(options={"task_id": {{ task_id }}})</code>;
without <code>split=</code> the env uses the <b>train</b> split, where task {{ task_id }} is another goal.</p>"""

_START = """{% autoescape true %}""" + _HEAD + """
<body data-page="start"><h1>WebShop</h1>
<p>Shop for the item an instruction describes. Every task is a goal of the <b>{{ split }}</b>
split ({{ n_tasks }} goals, ids 0 to {{ n_tasks - 1 }}); in Python,
<code>reset(options={"task_id": k})</code> numbers the goals of the env's split, which is
<b>train</b> unless you pass <code>split="{{ split }}"</code> to <code>gym.make</code>.</p>
<form method="post" action="/new" id="start-form">
  <label>Task id <input type="number" name="task_id" id="task-id" min="0" max="{{ n_tasks - 1 }}"
    value="{{ task_id if task_id is not none else '' }}" placeholder="random"></label>
  <button type="submit" id="start" class="green" autofocus>Start</button>
</form>
</body></html>{% endautoescape %}"""

_PAGE = """{% autoescape true %}""" + _HEAD + """
<body data-page="{{ page }}" data-step="{{ step }}">
{% if past %}<div class="row" id="past">This is an earlier page of this task (step {{ step }} of
{{ current }}). {% if finished %}The task is finished: the purchase is final.
<a href="{{ base }}/{{ current }}">See the result</a>.{% else %}Acting here continues the task
from this page.{% endif %}</div>{% endif %}
{% if page == "done" %}
  <h2>Thank you for shopping with us!</h2>
  <div class="row">Your score (min 0.0, max 1.0)</div>
  <div class="row score" id="score">{{ purchase.score }}</div>
  <div class="row">Bought <b id="bought-asin">{{ purchase.asin }}</b>
    {% if purchase.options %}with {% for k, v in purchase.options.items() %}{{ k }}: {{ v }}{% if not loop.last %}, {% endif %}{% endfor %}{% endif %}</div>
  <div id="instruction"><b>Instruction:</b> {{ instruction }}</div>
  <h4>How the score was made</h4>
  <table class="parts" id="reward-parts">
  {% for label, value in parts %}<tr><td>{{ label }}</td><td>{{ value }}</td></tr>{% endfor %}
  </table>
  """ + _TASK_NOTE + """
  <form class="row" method="post" action="/new"><button type="submit" class="green" id="new-task">Start a new task</button></form>
{% else %}
  {% if page == "search" %}<h1>WebShop</h1>{% endif %}
  <div id="instruction"><b>Instruction:</b><br>{{ instruction }}</div>
  {% if page == "search" %}
  """ + _TASK_NOTE + """
  <form class="row" id="search-form" method="post" action="{{ base }}/search">
    <input type="hidden" name="at" value="{{ step }}">
    <input type="text" name="q" id="search-input" maxlength="{{ max_query }}" size="60"
      placeholder="Search..." autofocus required>
    <button type="submit" id="search-button">Search</button>
  </form>
  {% else %}
  <form method="post" action="{{ base }}/click" id="actions">
  <input type="hidden" name="at" value="{{ step }}">
  <div class="row"><button class="green" id="back-to-search" name="c" value="{{ back }}">{{ back }}</button></div>
  {% if page == "results" %}
  <div class="row"><b id="page-counter">Page {{ page_no }} (Total results: {{ total }})</b></div>
  <div class="row">
    {% if page_no > 1 %}<button id="prev" name="c" value="{{ prev }}">{{ prev }}</button>{% endif %}
    <button id="next" name="c" value="{{ next }}">{{ next }}</button>
  </div>
  {% for it in hits %}
  <div class="hit"><button class="item-link" name="c" value="{{ it.asin }}">{{ it.asin }}</button>
    <div>{{ it.title }}</div><div class="price">{{ it.price_text }}</div></div>
  {% endfor %}
  {% elif page == "item" or page == "sub" %}
  <div class="row"><button id="prev" name="c" value="{{ prev }}">{{ prev }}</button></div>
  {% endif %}
  {% if page == "item" %}
  {% for name, values in item.options.items() %}
  <div class="row option-group"><h4>{{ name }}</h4>
    {% for v in values %}
    {% set sel = selected.get(name.lower()) == v.lower() %}
    <button class="option{% if sel %} selected{% endif %}" aria-pressed="{{ 'true' if sel else 'false' }}"
      name="c" value="{{ v }}">{% if sel %}&#10003; {% endif %}{{ v }}</button>
    {% endfor %}
  </div>
  {% endfor %}
  <h2 id="title">{{ item.title }}</h2>
  <h4>Price: {{ item.price_text }}</h4>
  <h4>Rating: {{ rating }}</h4>
  <div class="row">
    {% for b in sub_buttons %}<button class="sub-link" name="c" value="{{ b }}">{{ b }}</button>{% endfor %}
  </div>
  <div class="row"><button class="buy" id="buy-now" name="c" value="{{ buy }}">{{ buy }}</button></div>
  {% elif page == "sub" %}
  <h3>{{ sub }}</h3>
  <div id="sub-content">{% for line in sub_content %}<p>{{ line }}</p>{% endfor %}</div>
  {% endif %}
  </form>
  {% endif %}
{% endif %}
</body></html>{% endautoescape %}"""

_ERROR = """{% autoescape true %}<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>{{ code }}</title></head><body><h3>{{ code }}: {{ message }}</h3>
<p><a href="/">Start a new task</a></p></body></html>{% endautoescape %}"""


@dataclass
class _Entry:
    """A live session: its lock (one shopper's requests are serialised), its task id, and the
    snapshots of its last steps (``history[-1]`` is the current step, number ``step``)."""

    session: Session
    lock: threading.Lock
    task_id: int
    history: list[tuple]
    step: int = 0

    def snapshot_at(self, step: int) -> tuple | None:
        """The snapshot after ``step`` actions, or None when it is in the future or forgotten."""
        back = self.step - step
        return self.history[-1 - back] if 0 <= back < len(self.history) else None


class SessionStore:
    """Live sessions keyed by random ids; thread-safe; least recently used evicted past ``cap``."""

    def __init__(self, cap: int = MAX_SESSIONS) -> None:
        if cap < 1:
            raise ValueError(f"max_sessions must be >= 1, got {cap}")
        self.cap = cap
        self.errors = 0  # unexpected exceptions answered 500
        self._lock = threading.Lock()
        self._items: OrderedDict[str, _Entry] = OrderedDict()

    def add(self, session: Session, task_id: int) -> str:
        sid = secrets.token_urlsafe(16)
        entry = _Entry(session, threading.Lock(), task_id, [session.snapshot()])
        with self._lock:
            while sid in self._items:  # pragma: no cover - 128 random bits
                sid = secrets.token_urlsafe(16)
            self._items[sid] = entry
            while len(self._items) > self.cap:
                self._items.popitem(last=False)
        return sid

    def get(self, sid: str) -> _Entry | None:
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


def _number(raw: str | None, name: str, below: int | None = None) -> int | None:
    """An optional non-negative integer parameter (None when absent or empty), else 400."""
    from flask import abort

    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit() and len(raw) <= _MAX_NUMBER_CHARS):
        abort(400, f"{name} must be a non-negative integer")
    value = int(raw)
    if below is not None and value >= below:
        abort(400, f"{name} must be below {below}")
    return value


def _page_context(session: Session, sid: str) -> dict[str, Any]:
    """Everything the template shows for the session's current page.

    ``Session.view()`` is the same page record the text observation is rendered from, so the HTML
    shows exactly what the text mode shows.
    """
    view = session.view()
    ctx: dict[str, Any] = {
        "page": session.page.value,
        "instruction": session.goal.instruction_text,
        "base": f"/s/{sid}",
        "back": BACK_TO_SEARCH, "prev": PREV_PAGE, "next": NEXT_PAGE, "buy": BUY_NOW,
        "max_query": MAX_QUERY_CHARS,
    }
    page = session.page
    if page is Page.DONE:
        purchase = session.purchase
        ctx["purchase"] = purchase
        parts = purchase.parts.as_dict()
        ctx["parts"] = [(label, show(parts)) for label, show in _PART_ROWS]
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
    task_version: int = 1,
    allow_large_catalog: bool = False,
) -> Any:
    """The WebShop site for people over the synthetic catalog (``num_products``, ``catalog_seed``)
    with the goals of ``split`` (``test``/``valid``/``train``) of ``rspo/WebShop-v{task_version}``
    (default v1, the calibrated tasks). Returns a :class:`flask.Flask`."""
    try:
        import flask
        from werkzeug.exceptions import HTTPException
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("rspo_gym.envs.webshop.web needs Flask; install the [web] extra: "
                          "pip install 'rspo-gym[web]'") from exc
    from flask import abort, redirect, request

    check_catalog_size(num_products, allow_large_catalog)
    catalog, goals = shared_catalog(num_products, catalog_seed, goal_style, task_version)
    task_ids = goals.split(split)
    if len(task_ids) == 0:
        raise ValueError(f"Split {split!r} has no goals with {num_products} products; use a larger catalog")
    index = index_for(index_key(num_products, catalog_seed, task_version),
                      lambda: (catalog.search_document(i) for i in range(len(catalog))),
                      doc_ids_factory=lambda: (catalog.asin(i) for i in range(len(catalog))))

    app = _site_class(flask.Flask)(__name__)
    app.wsgi_app = _closing_after_refusal(app.wsgi_app)
    app.config["MAX_CONTENT_LENGTH"] = 16 * 1024  # forms of a few short fields: no bodies worth reading
    store = SessionStore(max_sessions)
    app.extensions["rspo_webshop"] = store
    start_template = app.jinja_env.from_string(_START)
    page_template = app.jinja_env.from_string(_PAGE)
    error_template = app.jinja_env.from_string(_ERROR)
    task_note = {"split": split, "n_tasks": len(task_ids), "style": _STYLE,
                 "env_id": f"rspo/WebShop-v{task_version}"}

    def html(body: str, code: int = 200) -> Any:
        resp = flask.make_response(body, code)
        resp.headers["Content-Type"] = "text/html; charset=utf-8"
        resp.headers["Content-Security-Policy"] = (
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'")
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Cache-Control"] = "no-store"
        return resp

    @app.after_request
    def no_framing(resp: Any) -> Any:
        """No page is shown inside another site's frame (clickjacking: a hidden frame over a
        decoy would turn a visitor's clicks into purchases), redirects and errors included."""
        resp.headers["X-Frame-Options"] = "DENY"
        resp.headers.setdefault("Content-Security-Policy", "frame-ancestors 'none'")
        return resp

    def lookup(sid: str) -> _Entry:
        entry = store.get(sid) if len(sid) <= _MAX_SID_CHARS else None
        if entry is None:
            abort(404, "unknown or expired session; start a new one at /")
        return entry

    def act(sid: str, action: str) -> Any:
        """Apply ``action`` from the step in field ``at`` (default: the current one); 303 to the
        new step's page."""
        entry = lookup(sid)
        with entry.lock:
            at = _number(request.form.get("at"), "at")
            at = entry.step if at is None else at
            snapshot = entry.snapshot_at(at)
            if snapshot is None:
                abort(409, f"step {at} of this task is not available; go to /s/{sid}")
            session = entry.session
            if at != entry.step:
                if session.done:
                    abort(409, "this task is finished: the purchase is final; start a new task at /")
                session.restore(snapshot)
            result = session.step(action)
            if not result.valid:
                session.restore(entry.history[-1])
                abort(400, "that action is not available on this page")
            del entry.history[len(entry.history) - (entry.step - at):]
            entry.history.append(session.snapshot())
            del entry.history[:-MAX_HISTORY]
            entry.step = at + 1
        return redirect(f"/s/{sid}/{entry.step}", code=303)

    @app.get("/")
    def start() -> Any:
        task_id = _number(request.args.get("task_id"), "task_id", len(task_ids))
        return html(start_template.render(task_id=task_id, **task_note))

    @app.post("/new")
    def new() -> Any:
        raw = request.form.get("task_id")
        task_id = _number(raw.strip() if raw is not None else None, "task_id", len(task_ids))
        if task_id is None:
            task_id = secrets.randbelow(len(task_ids))
        session = Session(catalog, index, goals[task_ids[task_id]])
        return redirect(f"/s/{store.add(session, task_id)}/0", code=303)

    @app.get("/s/<sid>")
    def current(sid: str) -> Any:
        return redirect(f"/s/{sid}/{lookup(sid).step}", code=303)

    @app.get("/s/<sid>/<int:step>")
    def show(sid: str, step: int) -> Any:
        entry = lookup(sid)
        with entry.lock:
            snapshot = entry.snapshot_at(step)
            if snapshot is None:
                abort(404, f"no step {step} in this task (now at step {entry.step}); go to /s/{sid}")
            session = entry.session
            past, finished = step != entry.step, session.done
            if past:
                session.restore(snapshot)
            try:
                ctx = _page_context(session, sid)
                body = page_template.render(task_id=entry.task_id, step=step, current=entry.step, past=past,
                                            finished=finished, **task_note, **ctx)
            finally:
                if past:
                    session.restore(entry.history[-1])
        return html(body)

    @app.post("/s/<sid>/search")
    def search(sid: str) -> Any:
        lookup(sid)
        query = _check_text(request.form.get("q"), "q", MAX_QUERY_CHARS)
        if "[" in query or "]" in query:
            abort(400, "parameter 'q' must not contain '[' or ']'")
        return act(sid, f"search[{query}]")

    @app.post("/s/<sid>/click")
    def click(sid: str) -> Any:
        lookup(sid)
        c = _check_text(request.form.get("c"), "c", MAX_CLICK_CHARS)
        return act(sid, f"click[{c}]")

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Any:
        if exc.code is None or exc.code < 400:  # pragma: no cover - redirects are not raised here
            return exc
        message = exc.description if exc.code < 500 else "internal error"
        resp = html(error_template.render(code=exc.code, message=message), exc.code)
        if exc.code == 405 and getattr(exc, "valid_methods", None):
            resp.headers["Allow"] = ", ".join(sorted(exc.valid_methods))
        return resp

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Any:  # last resort: the tests assert it never runs
        store.errors += 1
        logger.exception("unexpected error serving %s", request.path)
        return html(error_template.render(code=500, message="internal error"), 500)

    return app


def _site_class(flask_class: type) -> type:
    """``flask.Flask`` whose ``run`` serves with :func:`request_handler`'s (unless told otherwise)."""

    class Site(flask_class):
        def run(self, *args: Any, **options: Any) -> None:
            options.setdefault("request_handler", request_handler())
            super().run(*args, **options)

    return Site


def _closing_after_refusal(wsgi_app: Callable) -> Callable:
    """WSGI middleware: after a 413 reply (a body over the limit, left unread), shut the sending
    side of the connection and bound the drain of the rest (:data:`DRAIN_SECONDS` of silence).
    werkzeug reads an unread body to its end after replying, so that the client sees the reply
    rather than a reset; a client that sent it all and waits for the end would wait for good."""

    def app(environ: dict, start_response: Callable) -> Any:
        status: list[str] = []

        def start(code: str, headers: list, exc_info: Any = None) -> Any:
            status.append(code)
            return start_response(code, headers, exc_info)

        body = wsgi_app(environ, start)
        sock = environ.get("werkzeug.socket")
        if not status or not status[-1].startswith("413") or sock is None:
            return body
        return _then_shut(body, sock)

    return app


def _then_shut(body: Any, sock: socket.socket) -> Any:
    """``body``'s chunks; once the server has written the last one (it asks for the next), the
    connection's sending side is shut and its reads time out after :data:`DRAIN_SECONDS`."""
    sent = False
    try:
        for chunk in body:
            sent = sent or bool(chunk)
            yield chunk
    finally:
        if hasattr(body, "close"):
            body.close()
    if sent:  # with nothing sent, the server has yet to write the headers
        try:
            sock.settimeout(DRAIN_SECONDS)
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # the client is gone already
            pass


@functools.cache
def request_handler() -> type:
    """werkzeug's request handler, answering a bare HTTP/0.9 request line 400 (made on first use:
    werkzeug comes with Flask, the ``[web]`` extra)."""
    from werkzeug.serving import WSGIRequestHandler

    class RequestHandler(WSGIRequestHandler):
        def parse_request(self) -> bool:
            line = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
            if len(line.split()) != 2:
                return super().parse_request()
            # "GET /": HTTP/0.9, whose request ends at its line; http.server would read headers
            # until the client gives up, then answer with a body alone (0.9 has no status line)
            self.command, self.request_version, self.requestline = None, "HTTP/1.0", line
            self.close_connection = True
            self.send_error(400, "HTTP/0.9 requests are not served: send an HTTP/1.x request")
            return False

    return RequestHandler
