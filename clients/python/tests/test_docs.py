"""The retry test of docs/python.md, run as written."""

import os
import re

import pytest

from conftest import SHOP, TOKEN

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "python.md")


def test_the_documented_retry_test_passes(doppel_server, tmp_path, monkeypatch):
    if not os.path.exists(DOCS):
        pytest.skip("not in Doppel's repository")
    with open(DOCS, encoding="utf-8") as f:
        text = f.read()
    code = re.search(r"## A retry test.*?```python\n(.*?)```", text, re.S).group(1)
    assert len(code.strip().splitlines()) <= 15
    (tmp_path / "doppel.yaml").write_text(SHOP.replace(TOKEN, "my-test-token-0123456789abcdefghij"))
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(code, DOCS, "exec"), scope)
    scope["test_orders_retry_with_one_key"](doppel_server)
