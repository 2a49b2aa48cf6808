"""Bearer tokens map to tenants; without a token file everything is `default`."""

from __future__ import annotations

from pathlib import Path

import pytest
from pathgrade.transport.bearer_tokens import TokenAuth, Unauthenticated


def test_without_a_token_file_every_request_is_default() -> None:
    assert TokenAuth(None).tenant(None) == "default"
    assert TokenAuth(None).tenant("Bearer anything") == "default"


def test_token_file_maps_tokens_and_refuses_missing_or_unknown(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("abc: acme\nxyz: globex\n")
    auth = TokenAuth.from_file(tokens)
    assert auth.tenant("Bearer abc") == "acme"
    assert auth.tenant("bearer  xyz ") == "globex"
    for header in (None, "", "Bearer", "Basic abc", "Bearer nope"):
        with pytest.raises(Unauthenticated):
            auth.tenant(header)


def test_malformed_token_file_names_the_file(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("- just\n- a list\n")
    with pytest.raises(ValueError, match=r"tokens\.yaml"):
        TokenAuth.from_file(tokens)
