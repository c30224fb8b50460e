"""Wiring: settings, CLI, the embedded runner and the Faust app. No crawl logic lives here."""
