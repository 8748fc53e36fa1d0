"""Secret redaction on the single write path (placeholder until the redaction work lands)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from urchin.event import Event

__all__ = ["Redactor"]


class Redactor:
    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> Redactor:
        return cls()

    def redact_event(self, event: Event) -> Event:
        return event
