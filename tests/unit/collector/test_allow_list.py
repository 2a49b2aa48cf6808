"""The collector's allow-list: what it forwards as text."""

from __future__ import annotations

import pytest
from pathgrade.collector.allow_list import AllowList
from pathgrade.schemas.genai_versions import ATTRIBUTE_RENAMES


@pytest.mark.parametrize("old", sorted(ATTRIBUTE_RENAMES))
def test_every_renamed_attribute_and_its_new_name_are_forwarded(old: str) -> None:
    allowed = AllowList()
    assert allowed.allows(old) and allowed.allows(ATTRIBUTE_RENAMES[old])
