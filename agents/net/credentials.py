"""Credentials: held by the process, named by crawls, sent to one origin only.

A crawl spec says ``auth: [{origin, credential: NAME}]``; the value comes from this process
alone: the environment variable ``STREAMCRAWL_CREDENTIAL_<NAME>`` (upper-case), else a file
``NAME`` in the folder ``STREAMCRAWL_CREDENTIALS_DIR`` (a mounted Kubernetes Secret). A value
is one of::

    basic:USER:PASSWORD     ->  Authorization: Basic base64(USER:PASSWORD)
    bearer:TOKEN            ->  Authorization: Bearer TOKEN
    header:NAME:VALUE       ->  NAME: VALUE   (an API key header, for example)

The value never leaves this module except as the header the fetch sends: ``Credential`` has no
``repr`` of its value, errors name the credential and the setting, never what it holds.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec

from streamcrawl.agents.errors import ConfigError
from streamcrawl.schemas.records import CredentialName, HeaderName, HeaderValue

ENV_PREFIX: Final = "STREAMCRAWL_CREDENTIAL_"
ENV_DIR: Final = "STREAMCRAWL_CREDENTIALS_DIR"
MAX_FILE_BYTES: Final = 16 * 1024
FORMS: Final = "basic:USER:PASSWORD, bearer:TOKEN or header:NAME:VALUE"


@dataclass(frozen=True)
class Credential:
    """One credential: the header it is sent as. Its ``repr`` hides the value."""

    name: str
    header: str  # "Authorization", or the header of a ``header:`` credential
    value: str = field(repr=False)


def env_name(name: str) -> str:
    """The environment variable that holds credential ``name``."""
    return ENV_PREFIX + name.upper()


def parse_credential(name: str, text: str) -> Credential:
    """The credential ``name`` holds ``text``; ``ConfigError`` says which form is expected,
    without quoting ``text``."""
    kind, _, rest = text.strip().partition(":")
    kind = kind.lower()
    if kind == "basic" and ":" in rest:
        token = base64.b64encode(rest.encode("utf-8")).decode("ascii")
        return Credential(name, "Authorization", f"Basic {token}")
    if kind == "bearer" and rest:
        return _checked(Credential(name, "Authorization", f"Bearer {rest}"))
    if kind == "header":
        header, _, value = rest.partition(":")
        if header and value:
            return _checked(Credential(name, header.strip(), value.strip()))
    raise ConfigError(f"credential {name} ({env_name(name)}) is not one of {FORMS}")


def _checked(credential: Credential) -> Credential:
    try:
        msgspec.convert(credential.header, HeaderName)
        msgspec.convert(credential.value, HeaderValue)
    except msgspec.ValidationError:
        raise ConfigError(
            f"credential {credential.name}: its header must be an HTTP token and its value one line"
        ) from None
    return credential


class Credentials:
    """The credentials this process holds, read once each, by name."""

    def __init__(
        self, environ: Mapping[str, str] | None = None, directory: Path | None = None
    ) -> None:
        self._environ = os.environ if environ is None else environ
        folder = directory if directory is not None else self._environ.get(ENV_DIR)
        self._directory = Path(folder) if folder else None
        self._cache: dict[str, Credential | None] = {}

    def get(self, name: str) -> Credential | None:
        """Credential ``name``, or ``None`` when this process has none of that name.
        ``ConfigError`` when its value is malformed."""
        if name not in self._cache:
            text = self._read(name)
            self._cache[name] = None if text is None else parse_credential(name, text)
        return self._cache[name]

    def require(self, names: Iterable[str]) -> None:
        """``ConfigError`` naming the first of ``names`` this process lacks (or holds in a
        malformed form): a crawl started here could not be sent as its spec asks."""
        for name in names:
            if self.get(name) is None:
                raise ConfigError(self.missing(name))

    def missing(self, name: str) -> str:
        """The one line that says this process lacks credential ``name``, and where it looked."""
        return missing(name, self._directory)

    def _read(self, name: str) -> str | None:
        try:
            msgspec.convert(name, CredentialName)
        except msgspec.ValidationError:
            return None  # a name no flag could give: never a path outside the folder
        value = self._environ.get(env_name(name))
        if value:
            return value
        if self._directory is None:
            return None
        path = self._directory / name
        try:
            with path.open("rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except OSError:
            return None
        if len(data) > MAX_FILE_BYTES:
            raise ConfigError(f"credential file {path} is over {MAX_FILE_BYTES} bytes")
        return data.decode("utf-8", "replace").strip() or None


def missing(name: str, directory: Path | None = None) -> str:
    """The one line that says credential ``name`` is not held, and where it would be."""
    where = env_name(name)
    if directory is not None:
        where += f" or the file {directory / name}"
    return f"credential {name} is not set on this process: set {where}"
