"""The browser UI: a Starlette application whose pages are Jinja2 templates rendered on the
server from the store, read-only and scoped to the viewer's tenant.

`create_app(UiSettings(...))` builds it; `pathgrade.web.server` serves it with uvicorn (in
the store owner of `pathgrade up`, or as the `pathgrade ui` box). Charts and the agent graph
are SVG drawn on the server; the one script (`static/app.js`) is shipped in the package:
nothing is fetched from elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from pathgrade.web import pages
from pathgrade.web.rendering import HERE, Ui, UiSettings
from pathgrade.web.viewers import TOKEN_COOKIE, Refused

_OPEN_PATHS = ("/login", "/static/")


class _ViewerGate(BaseHTTPMiddleware):
    """Sets `request.state.viewer`, or refuses the request (401 with a login form when a
    tokens file is in use, 403 for a host that is not loopback without one)."""

    def __init__(self, app: Any, ui: Ui) -> None:
        super().__init__(app)
        self.ui = ui

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        viewers = self.ui.settings.viewers
        try:
            request.state.viewer = viewers.viewer(
                request.headers.get("host", ""),
                request.headers.get("authorization"),
                request.cookies.get(TOKEN_COOKIE),
            )
        except Refused as exc:
            if request.url.path.startswith(_OPEN_PATHS) and viewers.need_tokens:
                return await call_next(request)
            if viewers.need_tokens:
                return RedirectResponse(f"/login?next={request.url.path}", status_code=303)
            return Response(f"{exc}\n", status_code=403, media_type="text/plain")
        return await call_next(request)


def create_app(settings: UiSettings) -> Starlette:
    """The UI as an ASGI application."""
    ui = Ui(settings)
    routes = [
        Route("/", lambda request: RedirectResponse("/traces", status_code=307)),
        *pages.routes(ui),
        Route("/login", _login_form(ui), methods=["GET"]),
        Route("/login", _login(ui), methods=["POST"]),
        Route("/logout", _logout, methods=["GET"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(_ViewerGate, ui=ui)])


def _login_form(ui: Ui) -> Callable[[Request], Response]:
    def form(request: Request) -> Response:
        body = ui.environment.get_template("login.html").render(
            next=_safe_next(request.query_params.get("next", "/traces")), failed=False
        )
        return HTMLResponse(body)

    return form


def _login(ui: Ui) -> Callable[[Request], Any]:
    async def login(request: Request) -> Response:
        fields = parse_qs((await request.body()).decode("utf-8", "replace"))
        token = (fields.get("token") or [""])[0].strip()
        target = _safe_next((fields.get("next") or ["/traces"])[0])
        if not ui.settings.viewers.check_token(token):
            body = ui.environment.get_template("login.html").render(next=target, failed=True)
            return HTMLResponse(body, status_code=401)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            TOKEN_COOKIE, token, httponly=True, samesite="strict",
            secure=request.url.scheme == "https",
        )  # fmt: skip
        return response

    return login


def _logout(request: Request) -> Response:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(TOKEN_COOKIE)
    return response


def _safe_next(target: str) -> str:
    """A path on this site to go to after logging in (never another site)."""
    return target if target.startswith("/") and not target.startswith("//") else "/traces"
