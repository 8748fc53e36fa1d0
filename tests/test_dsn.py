"""Credentials in connection strings: hidden in every form libpq reads, wherever a DSN is shown; and the
URLs `urchin db` prints are real, percent-encoded `postgresql://` URLs. libpq itself (psycopg's
`conninfo_to_dict`) is the judge of what a string means."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import run_urchin
from urchin.dsn import MASK, mask_dsn, scrub, to_url

psycopg = pytest.importorskip("psycopg")
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402

SECRET = "Sup3r-s3cret"
FORMS = [
    f"postgresql://ada:{SECRET}@db.example:5432/urchin",
    f"postgres://ada:{SECRET}@db.example/urchin?sslmode=require",
    f"postgresql://:{SECRET}@db.example/urchin",
    f"postgresql://ada:{SECRET}@h1:5432,h2:5433/urchin",
    f"postgresql://ada@db.example/urchin?password={SECRET}&sslmode=require",
    f"postgresql://ada@db.example/urchin?sslpassword={SECRET}",
    f"postgresql://ada:{SECRET}@/urchin?host=/var/run/postgresql",
    f"user=ada password={SECRET} host=db.example dbname=urchin",
    f"user=ada password = {SECRET} host=db.example",
    f"host=db.example password='{SECRET} with spaces' user=ada",
    f"password='it\\'s {SECRET}' user=ada",
    f"password={SECRET}\\ escaped user=ada",
    f"sslpassword={SECRET} user=ada",
    f"  password={SECRET}",
]


@pytest.mark.parametrize("dsn", FORMS)
def test_every_form_loses_its_credentials_and_keeps_the_rest(dsn: str) -> None:
    masked = mask_dsn(dsn)
    assert SECRET not in masked and MASK in masked
    assert "ada" in masked or "ada" not in dsn
    if "://" not in dsn or "," not in dsn:     # libpq reads the masked string as the same connection
        before, after = conninfo_to_dict(dsn), conninfo_to_dict(masked)
        assert {k: v for k, v in after.items() if v != MASK} == \
            {k: v for k, v in before.items() if k not in ("password", "sslpassword")}


@pytest.mark.parametrize("dsn", [
    f"postgresql://ada:{SECRET}@with@at@db/urchin",          # an unencoded @ in the password
    f"postgresql://ada:pa/{SECRET}@db/urchin",               # an unencoded /
    f"user=ada password=my {SECRET} host=db",                # an unquoted space: libpq refuses it
    f"user=ada password='{SECRET} host=db",                  # an open quote
    f"POSTGRESQL://ada:{SECRET}@db.example/urchin",           # libpq's scheme is lower case
])
def test_text_that_does_not_parse_is_masked_from_its_first_credential_on(dsn: str) -> None:
    assert SECRET not in mask_dsn(dsn)


def test_strings_without_credentials_are_left_alone() -> None:
    for dsn in ("postgresql://ada@db/urchin", "host=db user=ada dbname=urchin", "dbname=urchin", ""):
        assert mask_dsn(dsn) == dsn


def test_scrub_hides_a_credential_and_its_words_in_other_text() -> None:
    dsn = f"user=ada password=my {SECRET} host=db"
    assert SECRET not in scrub(f'missing "=" after "{SECRET}" in connection info string', dsn)
    url = "postgresql://ada:p%40ss%2Fw0rd@db/urchin"
    assert "p@ss/w0rd" not in scrub("auth failed for p@ss/w0rd", url)
    assert scrub("nothing here", None) == "nothing here"


_hostile = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=24)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(user=_hostile, password=_hostile, dbname=_hostile,
       host=st.sampled_from(["db.example", "127.0.0.1", "::1", "/var/run/postgresql", "a,b", "h1,/tmp"]),
       port=st.sampled_from([None, "5432", "5432,5433"]), sslmode=st.sampled_from([None, "require"]))
def test_to_url_is_read_back_by_libpq_as_the_same_parameters(user: str, password: str, dbname: str, host: str,
                                                             port: str | None, sslmode: str | None) -> None:
    params = {"user": user, "password": password, "dbname": dbname, "host": host, "port": port, "sslmode": sslmode}
    params = {k: v for k, v in params.items() if v is not None}
    if port and "," in port and "," not in host:
        params.pop("port")
    url = to_url(params)
    assert url.startswith("postgresql://")
    assert conninfo_to_dict(url) == params
    masked = mask_dsn(url)                                       # and the URL's mask hides the password
    assert conninfo_to_dict(masked)["password"] == MASK
    keyword = make_conninfo("", **params)                        # the keyword form, quoted by libpq's rules
    assert conninfo_to_dict(mask_dsn(keyword))["password"] == MASK
    assert {k: v for k, v in conninfo_to_dict(mask_dsn(keyword)).items() if k != "password"} == \
        {k: v for k, v in params.items() if k != "password"}


def test_doctor_never_prints_the_database_password_in_keyword_form() -> None:
    for dsn in (f"host=127.0.0.1 port=1 user=ada password={SECRET} connect_timeout=2",
                f"host=127.0.0.1 port=1 user=ada password='{SECRET} x' connect_timeout=2",
                f"postgresql://ada:{SECRET}@127.0.0.1:1/urchin?connect_timeout=2"):
        out = run_urchin("doctor", env={"URCHIN_DATABASE_URL": dsn, "URCHIN_NO_DAEMON": "1"})
        assert "database" in out.stdout + out.stderr
        assert SECRET not in out.stdout + out.stderr, out.stdout
