"""Redaction: every secret type is removed in realistic text; look-alikes stay; events and config.

Fake secrets are assembled at runtime (prefix + random body) so this file trips no secret scanner.
"""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from urchin.errors import ConfigError
from urchin.redact import Finding, Redactor, redact_text, scan_text

_RNG = random.Random(20260504)
_AN = string.ascii_letters + string.digits


def _body(n: int, alphabet: str = _AN) -> str:
    body = "".join(_RNG.choice(alphabet) for _ in range(n))
    return body[:-1] + "7"  # at least one digit, whatever the draw


def _pem(kind: str) -> str:
    lines = [_body(64, _AN + "+/") for _ in range(5)]
    head = "-----BEGIN " + kind + "PRIVATE " + "KEY-----"
    tail = "-----END " + kind + "PRIVATE " + "KEY-----"
    return "\n".join([head, *lines, _body(24) + "==", tail])


GH = {p: "gh" + p + "_" + _body(36) for p in "pousr"}
GH_PAT = "github" + "_pat_" + _body(22) + "_" + _body(59)
ANTHROPIC = "sk-" + "ant-api03-" + _body(40) + "-" + _body(30) + "_" + _body(20) + "AA"
OPENAI_PROJ = "sk-" + "proj-" + _body(40) + "_" + _body(30) + "-" + _body(40)
OPENAI_LEGACY = "sk-" + _body(20) + "T3Blbk" + "FJ" + _body(20)
OTHER_SK = "sk-" + _body(32, "0123456789abcdef")
AWS_ID = "AK" + "IA" + _body(16, string.ascii_uppercase + string.digits)
AWS_STS_ID = "AS" + "IA" + _body(16, string.ascii_uppercase + string.digits)
AWS_SECRET = _body(40, _AN + "/+")
GOOGLE = "AI" + "za" + _body(35, _AN + "-_")
SLACK = "xo" + "xb-" + _body(12, string.digits) + "-" + _body(12, string.digits) + "-" + _body(24)
SLACK_USER = "xo" + "xp-" + _body(12, string.digits) + "-" + _body(30)
STRIPE_LIVE = "sk" + "_live_" + _body(24)
STRIPE_TEST = "sk" + "_test_" + _body(24)
STRIPE_RESTRICTED = "rk" + "_live_" + _body(24)
JWT = "ey" + "J" + _body(30, _AN + "-_") + ".ey" + "J" + _body(60, _AN + "-_") + "." + _body(43, _AN + "-_")
BEARER = _body(40, _AN + "._-")
BASIC = "dXNlcjpw" + _body(16) + "=="
AWS4 = "AWS4-HMAC-SHA256 Credential=x/20260504/us-east-1/s3/aws4_request, Signature=" + _body(64, "0123456789abcdef")
PASSWORD = "Hunt3r!" + _body(8)
TOKEN = "tok." + _body(30)
SECRET = "8Q~" + _body(34)
API_KEY = _body(32, "0123456789abcdef")
HIGH_ENTROPY = _body(44, _AN + "+/")
RSA = _pem("RSA ")
OPENSSH = _pem("OPENSSH ")
EC = _pem("EC ")

# (text with {s}, secret, expected type)
CASES: list[tuple[str, str, str]] = [
    # github
    ("export GITHUB_TOKEN={s}\ngh pr create --fill", GH["p"], "github_token"),
    ("git clone https://{s}@github.com/acme/api.git", GH["o"], "github_token"),
    ('{{"tool": "Bash", "output": "token: {s}"}}', GH["u"], "github_token"),
    ("I pasted my token {s} by mistake, can you rotate it?", GH["s"], "github_token"),
    ("refresh={s};", GH["r"], "github_token"),
    ("GH_PAT={s} ./scripts/release.sh", GH_PAT, "github_token"),
    # sk- keys
    ("ANTHROPIC_API_KEY={s}\nANTHROPIC_MODEL=claude-sonnet", ANTHROPIC, "anthropic_key"),
    ('client = anthropic.Anthropic(api_key="{s}")', ANTHROPIC, "anthropic_key"),
    ("anthropic.AuthenticationError: Error code: 401 - invalid x-api-key {s}", ANTHROPIC, "anthropic_key"),
    ('OPENAI_API_KEY="{s}" python run.py', OPENAI_PROJ, "openai_key"),
    ('curl https://api.openai.com/v1/models -H "Authorization: Bearer {s}"', OPENAI_PROJ, "openai_key"),
    ("the old key was {s} - revoke it", OPENAI_LEGACY, "openai_key"),
    ("DEEPSEEK_API_KEY={s}", OTHER_SK, "sk_key"),
    # aws
    ("[default]\naws_access_key_id = {s}\nregion = eu-west-1", AWS_ID, "aws_access_key_id"),
    ('{{"Credentials": {{"AccessKeyId": "{s}", "Expiration": "2026-05-04"}}}}', AWS_STS_ID, "aws_access_key_id"),
    ("[default]\naws_secret_access_key = {s}\n", AWS_SECRET, "aws_secret_key"),
    ("export AWS_SECRET_ACCESS_KEY={s}", AWS_SECRET, "aws_secret_key"),
    ('{{"SecretAccessKey": "{s}", "SessionToken": null}}', AWS_SECRET, "aws_secret_key"),
    # google, slack, stripe
    ("GET https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key={s} 200", GOOGLE, "google_api_key"),
    ("const firebaseConfig = {{ apiKey: '{s}', projectId: 'demo' }};", GOOGLE, "google_api_key"),
    ("SLACK_BOT_TOKEN={s}", SLACK, "slack_token"),
    ("slack: posting with {s} failed: not_in_channel", SLACK_USER, "slack_token"),
    ('stripe.api_key = "{s}"', STRIPE_LIVE, "stripe_key"),
    ("STRIPE_SECRET_KEY={s} npm test", STRIPE_TEST, "stripe_key"),
    ("restricted key {s} for the webhook", STRIPE_RESTRICTED, "stripe_key"),
    # jwt, authorization
    ('{{"id_token": "{s}", "expires_in": 3600}}', JWT, "jwt"),
    ("Cookie: session={s}; Path=/", JWT, "jwt"),
    ("curl -s -H 'Authorization: Bearer {s}' https://api.example.com/v1/me", BEARER, "bearer_token"),
    ('requests.get(url, headers={{"Authorization": "Bearer {s}"}})', BEARER, "bearer_token"),
    ("> GET /v1/me HTTP/1.1\n> authorization: Bearer {s}\n> accept: */*", BEARER, "bearer_token"),
    ("Authorization: Basic {s}", BASIC, "basic_auth"),
    ("> Authorization: {s}\n> Host: s3.amazonaws.com", AWS4, "authorization"),
    ("curl -u admin:{s} https://ci.example.com/api/json", PASSWORD, "basic_auth"),
    # private keys
    ("$ cat ~/.ssh/id_rsa\n{s}\n$ chmod 600 ~/.ssh/id_rsa", RSA, "private_key"),
    ('{{"content": "{s}"}}', OPENSSH.replace("\n", "\\n"), "private_key"),
    ("key.pem:\n{s}", EC, "private_key"),
    # url credentials
    ("DATABASE_URL=postgres://app:{s}@db.internal:5432/app", PASSWORD, "url_credentials"),
    ("redis.exceptions.ConnectionError: redis://:{s}@localhost:6379/0 refused", PASSWORD, "url_credentials"),
    ("git remote add origin https://x-access-token:{s}@github.com/acme/api", TOKEN, "url_credentials"),
    # key = value pairs
    ("DB_HOST=localhost\nDB_PASSWORD={s}\nDB_PORT=5432", PASSWORD, "password"),
    ("export PGPASSWORD={s}; psql -h db", PASSWORD, "password"),
    ('{{"username": "admin", "password": "{s}"}}', PASSWORD, "password"),
    ("services:\n  db:\n    environment:\n      POSTGRES_PASSWORD: {s}\n", PASSWORD, "password"),
    ("database:\n  password: '{s}'  # prod\n", PASSWORD, "password"),
    ("mysql -u root --password={s} shop", PASSWORD, "password"),
    ("docker login --username ci --password {s} registry.example.com", PASSWORD, "password"),
    ('gh auth login --with-token --token "{s}"', TOKEN, "token"),
    ("$config = ['db_pass' => '{s}'];", PASSWORD, "password"),
    ('conn = connect(user="app", passwd="{s}")', PASSWORD, "password"),
    ('payload = "{{\\"password\\": \\"{s}\\"}}"', PASSWORD, "password"),
    ('{{"access_token": "{s}", "token_type": "bearer"}}', TOKEN, "token"),
    ("HF_TOKEN={s} huggingface-cli download", TOKEN, "token"),
    ("authToken: {s}", TOKEN, "token"),
    ("azure:\n  client_secret: {s}\n", SECRET, "secret"),
    ('{{"clientSecret": "{s}"}}', SECRET, "secret"),
    ("curl -H 'X-Api-Key: {s}' https://api.example.com", API_KEY, "api_key"),
    ("DD_API_KEY={s}", API_KEY, "api_key"),
    ("auth: {s}", PASSWORD, "secret"),
    ("WEBHOOK_KEY={s}", HIGH_ENTROPY, "high_entropy_secret"),
    ("Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\n"
     + "    login(password='{s}')\nValueError: bad credentials", PASSWORD, "password"),
]


@pytest.mark.parametrize(("template", "secret", "kind"), CASES, ids=[f"{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_each_secret_is_replaced_by_its_type(template: str, secret: str, kind: str) -> None:
    text = template.format(s=secret)
    redacted, counts = redact_text(text)
    assert secret not in redacted
    assert f"[REDACTED:{kind}]" in redacted
    assert counts.get(kind, 0) >= 1
    before, _, after = template.partition("{s}")
    assert redacted.startswith(before.format()) and redacted.endswith(after.format())


_FILLER = "The follower resumes from the stored byte offset; tests passed: 42, skipped: 1.\n" * 16


@pytest.mark.parametrize(("template", "secret", "kind"), CASES, ids=[f"{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_each_secret_is_found_in_long_text_too(template: str, secret: str, kind: str) -> None:
    # Past 1 KiB the key = value rule finds key words first instead of walking every separator.
    text = _FILLER + template.format(s=secret) + "\n" + _FILLER
    assert len(text) > 2048
    redacted, counts = redact_text(text)
    assert secret not in redacted
    assert counts.get(kind, 0) >= 1
    assert redacted.startswith(_FILLER) and redacted.endswith(_FILLER)


def test_look_alikes_stay_untouched_in_long_text() -> None:
    long = _FILLER + "\n".join(LOOK_ALIKES) + _FILLER
    assert redact_text(long) == (long, {})


def test_url_credentials_keep_the_user_and_host() -> None:
    text = "postgres://app:" + PASSWORD + "@db.internal:5432/app"
    assert redact_text(text)[0] == "postgres://app:[REDACTED:url_credentials]@db.internal:5432/app"


def test_bearer_header_keeps_the_scheme_and_drops_the_value() -> None:
    assert redact_text("Authorization: Bearer " + BEARER)[0] == "Authorization: Bearer [REDACTED:bearer_token]"


def test_pem_block_goes_whole() -> None:
    redacted, counts = redact_text("before\n" + RSA + "\nafter")
    assert redacted == "before\n[REDACTED:private_key]\nafter"
    assert counts == {"private_key": 1}


def test_truncated_pem_block_is_removed_to_the_end() -> None:
    cut = RSA[: len(RSA) // 2]
    redacted, _ = redact_text("key:\n" + cut)
    assert redacted == "key:\n[REDACTED:private_key]"


def test_counts_add_up_per_type() -> None:
    text = f"a={GH['p']} b={GH['o']}\nDB_PASSWORD={PASSWORD}\n{AWS_ID}"
    redacted, counts = redact_text(text)
    assert counts == {"github_token": 2, "password": 1, "aws_access_key_id": 1}
    assert redacted == ("a=[REDACTED:github_token] b=[REDACTED:github_token]\n"
                        "DB_PASSWORD=[REDACTED:password]\n[REDACTED:aws_access_key_id]")


def test_redacting_twice_changes_nothing_more() -> None:
    text = "\n".join(t.format(s=s) for t, s, _ in CASES)
    once, counts = redact_text(text)
    assert sum(counts.values()) >= len(CASES)
    assert redact_text(once) == (once, {})


LOOK_ALIKES = [
    "commit 3f9a2c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f\nAuthor: Dev <dev@example.com>",
    "sha: 3f9a2c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f",
    '{"id": "0192f5a4-7c3e-7d21-9b8a-2f4e6c8d0a1b", "session_id": "7d444840-9dc0-11d1-b245-5ffdce74fad2"}',
    "request_id=7d444840-9dc0-11d1-b245-5ffdce74fad2 token_id=7d444840-9dc0-11d1-b245-5ffdce74fad2",
    "cat /home/dev/.ssh/id_rsa.pub && ls ~/.aws/credentials",
    "private_key_path: ~/.ssh/id_ed25519",
    '{"private_key": "/home/dev/.ssh/id_ed25519"}',
    'img = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAC"'
    + 'hwGA60e6kgAAAABJRU5ErkJggg=="',
    "the password is wrong, please try again",
    "token count: 5",
    "max_tokens: 100",
    "Tokens: 1,234 in / 567 out",
    '{"tokens": 1834, "input_tokens": 1200, "token_type": "bearer"}',
    "auth_method: oauth",
    "auth: oauth",
    "password_hint: first pet",
    "Enter your password:",
    "The token: it expires after an hour.",
    "Invalid API key provided. Check your secret settings.",
    "GITHUB_TOKEN=<your-token>",
    "OPENAI_API_KEY=${OPENAI_API_KEY}",
    "password: $DB_PASSWORD",
    "OPENAI_API_KEY=your_api_key_here",
    'token: "***"',
    'password: ""',
    '{"password": null, "secret": true}',
    'token = os.environ["GITHUB_TOKEN"]',
    "password = getpass.getpass()",
    "api_key=settings.OPENAI_API_KEY",
    'headers = {"Authorization": f"Bearer {token}"}',
    "Authorization: Bearer $TOKEN",
    "Authorization: Bearer <token>",
    "def login(user: str, password: str) -> None:",
    "    password: str",
    "    token: Optional[str] = None",
    "if password == confirm:",
    "docker login --password-stdin < token.txt && git push --token-file ~/.tok",
    "deploy --token $DEPLOY_TOKEN --password '<password>' --no-verify",
    "token_count = len(tokens)",
    "the bearer of bad news",
    "pip install scikit-learn  # sk-learn",
    "task-runner-abcdefghijklmnopqrstuvwxyz0123 and disk-1234567890abcdefghijkl",
    "ASIA-PACIFIC-REGION-SERVERS",
    "gh pr create --title ghp_ --body 'see ghp_ prefix docs'",
    "git@github.com:acme/api.git and ssh://git@github.com/acme/api",
    "http://localhost:8080/@scope/pkg and https://registry.npmjs.org/@types%2fnode",
    "curl -s http://127.0.0.1:8765/health",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
    "xoxo, see you tomorrow",
    "secretName: db-credentials\nsecretKeyRef:\n  key: password",
    "cache_key: user:42:profile",
    "monkey: banana",
    "PWD=/home/dev/project OLDPWD=/home/dev",
    "The eyJ prefix means base64 of '{\"'.",
    "bypass: true\ncompass: north",
    "keywords: memory, journal, search",
    "Author: Jane <jane@example.com>  Date: Mon May 4 20:00:00 2026 +0000",
    "def get_token(self) -> str:\n    self.api_key = api_key\n    token = new_token",
    'api_key: str = Field(default=None, description="OpenAI key")',
    "      token: ${{ secrets.GITHUB_TOKEN }}",
    'password=os.getenv("DB_PASSWORD")',
    '"auth": {"type": "oauth"}',
    '{"key": "enter", "command": "editor.action.submit"}',
    '"cacheKey": "v1-deps-linux-3f9a2c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f"',
    'const token = req.headers.authorization?.split(" ")[1];',
    'if (!token) throw new Error("token: missing");',
    "password: {{ .Values.db.password }}",
    "DB_PASSWORD: ${DB_PASSWORD:-postgres}",
    "'tokenizer': 'cl100k_base', 'max_tokens': 4096",
    "auth_token = None",
    "TOKEN_URL=https://oauth2.googleapis.com/token",
    "key_path: /etc/ssl/private/server.key",
    "--auth-type=password --token-file=/run/secrets/token",
    "credentials: ~/.aws/credentials\ncredentials: aws-prod",
    "Bearer tokens expire after 3600 seconds.",
    "session_token: null",
    '"apiKey": process.env.OPENAI_API_KEY,',
    "urchin.errors.JournalError: cannot read /tmp/x/events.jsonl: Permission denied",
]


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_stay_untouched(text: str) -> None:
    assert redact_text(text) == (text, {})


def test_changeme_is_still_a_password() -> None:
    # A weak default that is actually in use is a password; only syntax placeholders are kept.
    assert redact_text("POSTGRES_PASSWORD=changeme")[0] == "POSTGRES_PASSWORD=[REDACTED:password]"


def test_allow_list_keeps_matching_values() -> None:
    example = "AK" + "IAIOSFODNN7EXAMPLE"
    redactor = Redactor(allow_patterns=[r"AKIAIOSFODNN7EXAMPLE"])
    text = f"docs use {example}, ours is {AWS_ID}"
    redacted, counts = redactor.redact_text(text)
    assert redacted == f"docs use {example}, ours is [REDACTED:aws_access_key_id]"
    assert counts == {"aws_access_key_id": 1}


def test_extra_patterns_add_types() -> None:
    internal = "itk_" + _body(20, string.ascii_lowercase + string.digits)
    redactor = Redactor(extra_patterns={"internal_token": r"itk_[a-z0-9]{20}"})
    assert redactor.redact_text("use " + internal)[0] == "use [REDACTED:internal_token]"
    assert Redactor().redact_text("use " + internal)[0] == "use " + internal


def test_from_config_builds_extra_and_allow() -> None:
    redactor = Redactor.from_config({"extra": {"ticket_secret": r"TS-[0-9]{8}"}, "allow": [r"TS-00000000"]})
    assert redactor.redact_text("TS-12345678 TS-00000000") == (
        "[REDACTED:ticket_secret] TS-00000000", {"ticket_secret": 1})


@pytest.mark.parametrize(("section", "message"), [
    ({"extra": {"bad": "(unclosed"}}, "redact.extra.bad: bad pattern '(unclosed'"),
    ({"allow": ["[z-a]"]}, "redact.allow: bad pattern '[z-a]'"),
    ({"extra": {"Bad Name": "x"}}, "redact.extra: type name 'Bad Name'"),
    ({"extra": ["x"]}, "redact.extra: must be a table"),
    ({"allow": "x"}, "redact.allow: must be a list"),
    ({"extras": {}}, "redact: unknown setting 'extras'"),
])
def test_bad_config_names_the_pattern(section: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Redactor.from_config(section)
    assert message in str(info.value)


def test_scan_reports_type_line_column_and_a_mask_only() -> None:
    text = f"line one\nexport GITHUB_TOKEN={GH['p']}\n  password: {PASSWORD}\n"
    findings = scan_text(text)
    assert findings == [Finding("github_token", 2, 21, "ghp_****"), Finding("password", 3, 13, "****")]
    assert all(GH["p"][4:8] not in f.masked for f in findings)


def test_scan_masks_at_most_four_prefix_characters() -> None:
    findings = scan_text(f"{ANTHROPIC} {JWT} {AWS_ID} {GH_PAT}")
    assert [f.masked for f in findings] == ["sk-****", "eyJ****", "AKIA****", "gith****"]


def test_scan_lines_numbers_lines_across_chunks_and_keeps_pem_blocks_whole() -> None:
    lines = [f"line {n}\n" for n in range(1, 10)]
    lines[2] = "GITHUB_TOKEN=" + GH["p"] + "\n"
    pem = [line + "\n" for line in RSA.split("\n")]
    lines[4:4] = pem  # the block starts on line 5 and straddles a chunk boundary of 6 lines
    findings = list(Redactor().scan_lines(lines, chunk_lines=6))
    assert findings == [Finding("github_token", 3, 14, "ghp_****"), Finding("private_key", 5, 1, "----****")]


def test_non_ascii_text_keeps_positions_right() -> None:
    # "İ".lower() is two characters; the long-text path must not shift spans.
    text = "İstanbul ☃ ünïcode " * 80 + "\nDB_PASSWORD=" + PASSWORD + "\nend İ"
    redacted, counts = redact_text(text)
    assert redacted == "İstanbul ☃ ünïcode " * 80 + "\nDB_PASSWORD=[REDACTED:password]\nend İ"
    assert counts == {"password": 1}


_TOKENS = [GH["p"], GH_PAT, ANTHROPIC, OPENAI_PROJ, AWS_ID, GOOGLE, SLACK, STRIPE_LIVE, JWT]
_AROUND = st.text(alphabet=st.sampled_from(list(_AN + " :=\"'-_./@\n{}[]")), max_size=80)


@settings(max_examples=300, deadline=None)
@given(_AROUND, st.sampled_from(_TOKENS), _AROUND, st.sampled_from([" ", "\n", "=", '"', "'", ": "]))
def test_a_token_survives_no_surrounding_text(before: str, token: str, after: str, edge: str) -> None:
    text = before + edge + token + edge.strip(": ") + " " + after
    redacted, counts = redact_text(text)
    assert token not in redacted
    assert counts


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(_AN + " :=\"'-_./@\n{}[]")), max_size=200))
def test_any_text_redacts_without_error_and_is_stable(text: str) -> None:
    once, _ = redact_text(text)
    assert redact_text(once)[0] == once


# A value after a credential label is redacted unless it is plainly prose: a word that says what
# became of it, or (for an authorization) a sentence of words.
PROSE_AFTER_LABELS = [
    "Authorization: handled by the gateway",
    "Authorization: see RFC 6750",
    "authorization: missing or wrong bearer token",
    "refused our token (authorization: missing or wrong bearer token); check URCHIN_INTAKE_TOKEN",
    "> Authorization: not required for the health check",
    '{"Authorization": "handled by the API gateway"}',
    "passwd: changed",
    "password: changed\nuser: root",
    "root password: unset",
    "token: missing",
    "api_key: see docs",
    "secret: rotated",
    "DB_PASSWORD=n/a",
    "client_secret: hidden",
]
SECRETS_AFTER_LABELS = [
    ("password=hunter2", "hunter2"),
    ("passwd: hunter2", "hunter2"),
    ("Authorization: Bearer " + BEARER, BEARER),
    ("Authorization: Custom " + HIGH_ENTROPY, HIGH_ENTROPY),
    ("Authorization: handled " + PASSWORD, PASSWORD),  # two words, one of them a secret
    ("Authorization: " + AWS4, AWS4),
    ('password: "correct horse battery staple"', "correct horse battery staple"),  # quoted: a passphrase
    ("token: changedXq81", "changedXq81"),
    ("secret: Rotated2026!", "Rotated2026!"),
]


@pytest.mark.parametrize("text", PROSE_AFTER_LABELS)
def test_prose_after_a_credential_label_stays(text: str) -> None:
    assert redact_text(text) == (text, {})


@pytest.mark.parametrize(("text", "secret"), SECRETS_AFTER_LABELS)
def test_a_value_after_a_credential_label_that_is_not_prose_goes(text: str, secret: str) -> None:
    redacted, counts = redact_text(text)
    assert secret not in redacted and counts


def test_urchins_own_messages_about_credentials_pass_the_redactor_unchanged() -> None:
    # Every message Urchin writes that starts with a credential label (the daemon's 401 and 403
    # answers, say) is shown through `redact_message`: it must read as written.
    import ast
    import re
    from pathlib import Path

    import urchin
    from urchin.redact import redact_message

    label = re.compile(r"[\w.-]*(?:authorization|password|passwd|secret|token|api[_-]?key|auth)\s*[:=]\s*\w", re.I)
    messages = []
    for path in Path(urchin.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and label.match(node.value):
                messages.append(node.value)
    assert "authorization: missing or wrong bearer token" in messages
    assert [m for m in messages if redact_message(m) != m] == []
