"""An in-process client of the app (no server, no network)."""

import pytest
from fastapi.testclient import TestClient

from web.app import create_app


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app()) as c:
        yield c
