"""Quoting for messages, in the form Go's ``%q`` prints (double quotes)."""

import json


def quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)
