"""The web UI: static pages served by the api at ``/ui/`` that read the public HTTP/JSON API (docs/ui.md)."""

from evalsi.ui.serve import CONTENT_SECURITY_POLICY, UI_PREFIX, add_ui_routes

__all__ = ["CONTENT_SECURITY_POLICY", "UI_PREFIX", "add_ui_routes"]
