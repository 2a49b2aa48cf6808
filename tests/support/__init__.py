"""Test helpers: the OpenAI stand-in and a module-scoped embedded store fixture.

chDB allows one embedded store path per process at a time, so each test module opens its
store for its own duration and closes it: import `store_fixture` into the test module,
then ask for `store`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from batch_plane.store import ClientStore, connect, embedded_dsn
from schemas.migrations import migrate


@pytest.fixture(scope="module", name="store")
def store_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientStore]:
    """A migrated embedded chDB store of the test module's own, closed after it."""
    client = connect(embedded_dsn(str(tmp_path_factory.mktemp("store"))))
    migrate(client)
    yield ClientStore(client)
    client.close()
