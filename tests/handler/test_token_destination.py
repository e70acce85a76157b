"""Which URLs may receive the operator's ID token (:func:`token_destination`), judged by address and origin."""

from __future__ import annotations

import pytest

from scheduler_dedup.local.commands.token_destination import DestinationRefused, is_loopback_host, token_destination

pytestmark = pytest.mark.unit

CUSTOM = "https://scheduler-dedup.invalid/projects/p/locations/europe-west1/services/nightly"
RUN_APP = "https://nightly-abc123-ew.a.run.app"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "[::1]", "localhost"])
def test_loopback_is_judged_by_address(host: str) -> None:
    assert is_loopback_host(host)
    assert token_destination(f"http://{host}:8080/", None).audience is None


@pytest.mark.parametrize("host", ["localhost.example.invalid", "127.0.0.1.example.invalid", "192.0.2.2", "10.0.0.1"])
def test_a_name_that_only_looks_local_is_not_loopback(host: str) -> None:
    assert not is_loopback_host(host)
    with pytest.raises(DestinationRefused, match="plain http"):
        token_destination(f"http://{host}:8080/", None)


def test_the_token_goes_to_the_audiences_own_origin_over_https() -> None:
    assert token_destination(RUN_APP + "/", None).audience == RUN_APP
    assert token_destination(RUN_APP + "/", RUN_APP + "/").audience == RUN_APP + "/"
    with pytest.raises(DestinationRefused, match="--token-origin"):
        token_destination("https://evil.example.com/", RUN_APP)


def test_a_custom_audience_needs_the_handlers_origin_named() -> None:
    with pytest.raises(DestinationRefused, match="--token-origin"):
        token_destination(RUN_APP, CUSTOM)
    assert token_destination(RUN_APP + "/x", CUSTOM, RUN_APP).audience == CUSTOM
    with pytest.raises(DestinationRefused, match="not --url's origin"):
        token_destination("https://evil.example.com/", CUSTOM, RUN_APP)


@pytest.mark.parametrize("url", ["ftp://h/", "/relative", "https://", "https://h:99999/"])
def test_a_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(DestinationRefused):
        token_destination(url, None)
