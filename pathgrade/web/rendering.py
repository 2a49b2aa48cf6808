"""What every page of the browser UI shares: its settings, the Jinja2 templates, the
viewer and health banner in every page, and turning a page's errors into answers."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from pydantic import BaseModel, ConfigDict, Field, SkipValidation
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from pathgrade.batch_plane.store.client import QueryError
from pathgrade.detectors.prices import PriceTable, shipped_price_table
from pathgrade.schemas.store import TenantScopedStore
from pathgrade.web import formatting
from pathgrade.web.health import HealthWatch, Status, headline
from pathgrade.web.params import BadParameter
from pathgrade.web.store_reads import ReadStore, viewing
from pathgrade.web.viewers import Viewer, Viewers

HERE = Path(__file__).parent
NAVIGATION = (
    ("/traces", "Traces"),
    ("/alerts", "Alerts"),
    ("/runs", "Runs & gates"),
    ("/datasets", "Datasets"),
    ("/edge", "EDGE"),
    ("/review", "Review"),
    ("/health", "Health"),
)


class UiSettings(BaseModel):
    """What the UI reads and who may read it: `UiSettings(store, viewers, **settings)`."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    store: SkipValidation[TenantScopedStore] = Field(
        description="the store every page reads (only through `ReadStore`)"
    )
    viewers: Viewers = Field(
        default_factory=Viewers, description="who may read which tenant (tokens)"
    )
    status: Callable[[], Status | None] = Field(
        lambda: None, description="the latest status of the boxes (`pathgrade up`'s, scraped)"
    )
    prices: PriceTable = Field(
        default_factory=shipped_price_table, description="the price table costs are read with"
    )
    clock_ns: Callable[[], int] = Field(time.time_ns, description="the time now, Unix ns")

    def __init__(
        self,
        store: TenantScopedStore | None = None,
        viewers: Viewers | None = None,
        /,
        **settings: Any,
    ) -> None:
        """`store` and `viewers` may be given by position."""
        given = {"store": store, "viewers": viewers}
        super().__init__(**{k: v for k, v in given.items() if v is not None}, **settings)


class NotFound(LookupError):
    """The page's subject is not in the store (or not the viewer's)."""


class NotStoredYet(NotFound):
    """The page's subject is on its way to the store (an alert names a trace whose spans
    the store writer has not written yet): the page says so and reloads itself."""

    RELOAD_S = 2


def templates() -> Environment:
    """The Jinja2 environment of the UI's templates (HTML autoescaped)."""
    environment = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(formatting.FILTERS)
    return environment


class Ui:
    """The pages, bound to one store, viewer policy and status source."""

    def __init__(self, settings: UiSettings) -> None:
        self.settings = settings
        self.store = ReadStore(settings.store)
        self.health = HealthWatch(settings.status)
        self.environment = templates()

    def render(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> Response:
        document, problems = self.health.status()
        viewer: Viewer = request.state.viewer
        operator = viewer.tenant is None  # a tenant's viewer: no figures of every tenant
        body = self.environment.get_template(template).render(
            request=request,
            path=request.url.path,
            navigation=NAVIGATION,
            viewer=viewer,
            tokens=self.settings.viewers.need_tokens,
            problems=problems if operator else [headline(p) for p in problems],
            status_line=document and operator and document.get("line"),
            **context,
        )
        return HTMLResponse(body, status_code=status)

    def page(self, build: Callable[[Request], tuple[str, dict[str, Any]]]) -> Callable[..., Any]:
        """A route handler: `build(request)` gives the template and its context; a bad
        parameter answers 400, a missing subject 404 and a store error 500, each naming
        what went wrong."""

        def handler(request: Request) -> Response:
            try:
                with viewing(request.state.viewer.tenant):
                    template, context = build(request)
            except BadParameter as exc:
                return self.render(request, "message.html", 400, title="Bad request",
                                   message=str(exc))  # fmt: skip
            except NotStoredYet as exc:
                return self.render(request, "message.html", 404, title="Not stored yet",
                                   message=str(exc), reload_s=exc.RELOAD_S)  # fmt: skip
            except NotFound as exc:
                return self.render(request, "message.html", 404, title="Not found",
                                   message=str(exc))  # fmt: skip
            except QueryError as exc:
                return self.render(request, "message.html", 500, title="Store error",
                                   message=str(exc))  # fmt: skip
            return self.render(request, template, **context)

        return handler
