"""DRF parsers: JSON that answers 400 naming the field when it is nested too deeply."""

import io
import json
import re

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

TOO_DEEP = "nested too deeply; settings are flat JSON objects of numbers and strings."
_SPACE = re.compile(r"[ \t\n\r]*")


class DepthSafeJSONParser(JSONParser):
    """DRF's JSONParser, except that nesting beyond Python's recursion limit is a 400.

    ``json`` parses recursively and raises RecursionError (not ValueError, which DRF turns
    into a 400) on a body nested thousands deep, so such a body used to answer 500.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        body = stream.read() if stream is not None else b""
        try:
            return super().parse(io.BytesIO(body), media_type, parser_context)
        except RecursionError:
            keys = _keys_nested_too_deeply(body.decode("utf-8", errors="replace"))
            raise ParseError({key: [TOO_DEEP] for key in keys} or TOO_DEEP) from None


def _keys_nested_too_deeply(text: str) -> list[str]:
    """The top-level keys whose values are too deep to parse, read one value at a time.

    Only called once a full parse has failed, so that the answer can name the field.
    """
    decoder = json.JSONDecoder()
    index = _SPACE.match(text, 0).end()
    if text[index : index + 1] != "{":
        return []
    index += 1
    while True:
        index = _SPACE.match(text, index).end()
        if text[index : index + 1] != '"':
            return []
        try:
            key, index = json.decoder.scanstring(text, index + 1)
        except ValueError:
            return []
        index = _SPACE.match(text, index).end()
        if text[index : index + 1] != ":":
            return []
        index = _SPACE.match(text, index + 1).end()
        try:
            _, index = decoder.raw_decode(text, index)
        except RecursionError:
            return [key]  # where this value ends is unknown: stop at the first
        except ValueError:
            return []
        index = _SPACE.match(text, index).end()
        if text[index : index + 1] != ",":
            return []
        index += 1
