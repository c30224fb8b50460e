"""Turn a raw HTTP body into text: Content-Encoding with a cap, then the character encoding.

``Decoder`` undoes gzip/deflate/br incrementally and never produces more than its cap, so a
decompression bomb costs at most the cap in memory. ``decode_html`` picks the charset: BOM, then
the Content-Type charset, then ``<meta>``, then detection; it is pure and never raises.

The charset order follows the WHATWG encoding sniffing algorithm (a byte-order mark beats the
header), with one addition browsers do not make: before statistical detection we try strict
UTF-8, which is right for almost every page that declares nothing and costs one pass.
"""

from __future__ import annotations

import codecs
import re
import zlib
from typing import Final

import brotli

from streamcrawl.agents.errors import ErrorClass, FetchPermanent

# The WHATWG prescan looks at the first 1024 bytes; real pages put <meta charset> after long
# <script>/<style> blocks often enough that we look a little further.
META_SCAN_BYTES = 4096
# Detection cost grows with input; a prefix is enough to tell encodings apart.
DETECT_BYTES = 64 * 1024

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# Both <meta charset="x"> and <meta http-equiv="Content-Type" content="text/html; charset=x">.
_META_CHARSET = re.compile(
    rb"<meta\b[^>]{0,512}?\bcharset\s*=\s*[\"']?\s*([A-Za-z0-9_.:+-]{1,40})", re.IGNORECASE
)

# Labels browsers read as another encoding (WHATWG Encoding Standard): pages labelled latin-1 or
# ascii are in practice windows-1252, a superset that maps 0x80-0x9F to printable characters.
_WHATWG_ALIASES = {
    "iso8859-1": "cp1252",
    "ascii": "cp1252",
    "latin-1": "cp1252",
    # A <meta> or header cannot be read in UTF-16 without a BOM; the Standard says utf-8.
    "utf-16": "utf-8",
    "utf-16-le": "utf-8",
    "utf-16-be": "utf-8",
}


def normalize_charset(label: str | None) -> str | None:
    """Return the Python codec name for an encoding label, or None if it is unknown.

    >>> normalize_charset("ISO-8859-1"), normalize_charset("UTF8"), normalize_charset("nope")
    ('cp1252', 'utf-8', None)
    """
    if not label:
        return None
    try:
        info = codecs.lookup(label.strip().strip("\"'"))
    except (LookupError, ValueError):
        return None
    # bytes-to-bytes codecs such as "base64" or "zlib" are not text encodings.
    if not getattr(info, "_is_text_encoding", True):
        return None
    return _WHATWG_ALIASES.get(info.name, info.name)


def sniff_bom(body: bytes) -> str | None:
    """The encoding named by a leading byte-order mark, or None."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name
    return None


def sniff_meta(body: bytes) -> str | None:
    """The known encoding declared by a ``<meta>`` in the first ``META_SCAN_BYTES``, or None."""
    match = _META_CHARSET.search(body, 0, META_SCAN_BYTES)
    return normalize_charset(match.group(1).decode("ascii")) if match else None


def _detect(body: bytes) -> str | None:
    try:
        body.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    import charset_normalizer  # only for a page that says nothing and is not UTF-8

    try:
        best = charset_normalizer.from_bytes(body[:DETECT_BYTES]).best()
    except Exception:  # detection is a heuristic: any failure means "no answer"
        return None
    return normalize_charset(best.encoding) if best is not None else None


def decode_html(body: bytes, header_charset: str | None) -> tuple[str, str]:
    """Decode ``body`` and return ``(text, codec_name)``; never raises.

    Order: BOM, ``header_charset`` (from Content-Type), ``<meta>`` in the first 4 KB, strict
    UTF-8, charset-normalizer's detection, else UTF-8. Undecodable bytes become U+FFFD.
    """
    bom = sniff_bom(body)
    if bom is not None:
        # Decoding with the "-sig"/LE/BE codecs would keep a UTF-8 BOM as U+FEFF: drop it.
        start = len(codecs.BOM_UTF8) if bom == "utf-8" else 2
        return body[start:].decode(bom, errors="replace"), bom
    charset = normalize_charset(header_charset) or sniff_meta(body) or _detect(body) or "utf-8"
    try:
        return body.decode(charset, errors="replace"), charset
    except (LookupError, ValueError):  # a text codec that still refuses bytes, e.g. rot13
        return body.decode("utf-8", errors="replace"), "utf-8"


MAX_CODINGS: Final = 3  # "gzip, gzip" is legal; a longer chain is only ever an attack


class BodyTooLarge(Exception):
    """The decoded body would exceed the cap."""


class Decoder:
    """Incremental Content-Encoding decoder whose output never exceeds ``cap`` bytes in total.

    ``encoding`` may list several codings (``"gzip, br"``, RFC 9110 section 8.4: applied in the
    order listed, so decoded from the last), at most ``MAX_CODINGS``. Every layer is capped,
    so a nested bomb stops at the first layer that passes the cap.

    Raises ``BodyTooLarge`` as soon as the decoded size would pass the cap (with ``truncate``:
    keeps the first ``cap`` bytes and sets ``full`` instead), ``FetchPermanent``
    for an encoding we did not ask for, too many codings, or a corrupt stream.
    """

    def __init__(self, encoding: str | None, cap: int, *, truncate: bool = False) -> None:
        names = [n.strip().lower() for n in (encoding or "").split(",")]
        names = [n for n in names if n and n != "identity"] or ["identity"]
        if len(names) > MAX_CODINGS:
            raise FetchPermanent(
                f"{len(names)} content codings {encoding!r} (at most {MAX_CODINGS})",
                error_class=ErrorClass.BAD_ENCODING,
            )
        self._layers = [_Layer(name, cap, truncate=truncate) for name in reversed(names)]

    @property
    def full(self) -> bool:
        """Truncate mode: the cap was reached, the rest is dropped."""
        return any(layer.full for layer in self._layers)

    def feed(self, data: bytes) -> bytes:
        """Decode one chunk of the raw body."""
        for layer in self._layers:
            data = layer.feed(data)
        return data

    def flush(self) -> bytes:
        """Whatever the decoder still holds once the raw body has ended."""
        out = b""
        for i, layer in enumerate(self._layers):
            out = (layer.feed(out) if i else b"") + layer.flush()
        return out


class _Layer:
    """One content coding of a ``Decoder``, its output capped at ``cap`` bytes in total."""

    def __init__(self, encoding: str | None, cap: int, *, truncate: bool = False) -> None:
        self.encoding = (encoding or "identity").strip().lower()
        self.room = cap
        self.truncate = truncate
        self.full = False  # truncate mode: the cap was reached, the rest is dropped
        self._zlib: zlib._Decompress | None = None
        self._brotli: brotli.Decompressor | None = None
        self._first = True
        if self.encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header
        elif self.encoding == "deflate":
            self._zlib = zlib.decompressobj()
        elif self.encoding == "br":
            self._brotli = brotli.Decompressor()
        elif self.encoding != "identity":
            raise FetchPermanent(
                f"unsupported Content-Encoding {self.encoding!r}",
                error_class=ErrorClass.BAD_ENCODING,
            )

    def _take(self, out: bytes) -> bytes:
        if len(out) > self.room:
            if not self.truncate:
                raise BodyTooLarge
            out, self.full = out[: self.room], True
        self.room -= len(out)
        return out

    def feed(self, data: bytes) -> bytes:
        """Decode one chunk of the raw body."""
        try:
            if self._zlib is not None:
                return self._take(self._feed_zlib(data))
            if self._brotli is not None:
                return self._take(self._feed_brotli(data))
        except (zlib.error, brotli.error) as exc:
            raise FetchPermanent(
                f"corrupt {self.encoding} body: {exc}", error_class=ErrorClass.BAD_ENCODING
            ) from exc
        return self._take(data)

    def _feed_zlib(self, data: bytes) -> bytes:
        assert self._zlib is not None
        if self._first and self.encoding == "deflate" and data:
            self._first = False
            try:
                # "deflate" should be zlib-wrapped, but some servers send raw deflate.
                probe = zlib.decompressobj()
                out = probe.decompress(data, self.room + 1)
                self._zlib = probe
            except zlib.error:
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                out = self._zlib.decompress(data, self.room + 1)
        else:
            out = self._zlib.decompress(data, self.room + 1)
        # max_length leaves input in unconsumed_tail: keep going only while under the cap.
        while self._zlib.unconsumed_tail and len(out) <= self.room:
            out += self._zlib.decompress(self._zlib.unconsumed_tail, self.room + 1 - len(out))
        return out

    def _feed_brotli(self, data: bytes) -> bytes:
        assert self._brotli is not None
        out: bytes = self._brotli.process(data, output_buffer_limit=self.room + 1)
        while not self._brotli.can_accept_more_data() and len(out) <= self.room:
            out += self._brotli.process(b"", output_buffer_limit=self.room + 1 - len(out))
        return out

    def flush(self) -> bytes:
        """Whatever the decoder still holds once the raw body has ended."""
        if self._zlib is not None:
            return self._take(self._zlib.flush())
        return b""
