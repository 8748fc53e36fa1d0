"""The rules behind `urchin.redact`: patterns, key names that name a secret, values that do not.

Kept apart from the `Redactor` so each file reads at once. Only `urchin.redact` imports it, name by
name: its hot loops then avoid module attribute lookups.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

# ---- token-shaped secrets: each regex starts with a literal so `re` can skip ahead fast ------------
# Runs are bounded and possessive (`{m,n}+`): a megabyte of `eyJeyJ…` must cost linear time, not square.
PEM = re.compile(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|.*\Z)",
    re.DOTALL,
)
# Gates: one pass to each `_` or `-` (a literal prefix is a fast skip), then fixed lookbehinds.
UNDERSCORE_GATE = re.compile(r"_(?:(?<=gh[pousr]_)|(?<=github_pat_)|(?<=[rs]k_live_)|(?<=[rs]k_test_))")
DASH_GATE = re.compile(r"-(?:(?<=sk-)|(?<=xox[abposr]-)|(?=u\s)|(?=-[A-Za-z])(?<=\s-))")
GITHUB = re.compile(r"g(?:h[pousr]_[A-Za-z0-9]{30,255}+|ithub_pat_[A-Za-z0-9_]{30,255}+)")
SK = re.compile(r"sk-(ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,1024}+")
STRIPE = re.compile(r"k_(?:live|test)_[A-Za-z0-9]{16,255}+")
AWS_GOOGLE = re.compile(r"A(?:(?:KIA|SIA)[A-Z0-9]{16}|Iza[0-9A-Za-z_-]{35})")  # no edges: `0x22AKIA…0x22`
SLACK = re.compile(r"xox[abposr]-[A-Za-z0-9-]{10,512}+")
# A JWT starts at a word edge (so `eyJeyJ…` costs linear time), or right after a terminal colour or `0x22`.
JWT = re.compile(
    r"eyJ(?:(?<![A-Za-z0-9_\-]eyJ)|(?<=\[[mK]eyJ)|(?<=[\[;][0-9][mK]eyJ)|(?<=[\[;][0-9][0-9][mK]eyJ)"
    r"|(?<=0x[0-9A-Fa-f][0-9A-Fa-f]eyJ))"
    r"[A-Za-z0-9_-]{8,4096}+\.eyJ[A-Za-z0-9_-]{8,8192}+\.[A-Za-z0-9_-]{8,4096}+"
)
URL_CRED = re.compile(r"://([^\s:/@'\"<>\[\]]*):([^\s/@'\"<>]+)@")
BEARER = re.compile(r"Bearer\s+([A-Za-z0-9._~+/-]{16,8192}+=*)")
CURL_USER = re.compile(r"(?:^|\s)(?:-u|--user)\s+['\"]?[^\s:'\"]+:([^\s'\"]+)")

# ---- key = value pairs whose key names a secret --------------------------------------------------
# Endings of key names, checked on the lowered text before a separator; see `key_type`.
KEY_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "cred")
LETTERS = re.compile(r"[a-z]+")
KEY_ENDINGS = ("password", "passwd", "passphrase", "pass", "pwd", "secret", "token", "key", "auth",
                "authorization", "credential", "credentials", "creds")
# Up to this length, looking left of each separator beats seven `find`s of key words in the text.
SHORT_TEXT = 1024
KEY_LAST = frozenset("dDeEsStTnNyYhHlL\"' \t\\")  # last letters of KEY_ENDINGS, or what may follow
BEFORE_SEP = "\"' \t\\"
AFTER_KEY = frozenset("\"' \t:=\\")
KEY_CHARS = re.compile(r"[A-Za-z0-9_.-]+")  # matched on the reversed text before a separator
REST_OF_LINE = re.compile(r"[^\n\r\"'`\\]+")
CLAUSE = re.compile(r"[^;()]*")  # the part of a line `prose` judges: up to `;`, `(` or `)`
FLAG = re.compile(r"--([A-Za-z][\w-]*)[ \t]+(?:\"([^\"\n]*)\"|'([^'\n]*)'|([^\s\"'`;|&<>()-][^\s\"'`;|&<>()]*))")
COMPOUND_KEY = re.compile(
    r"(?:api|access|private|secret|signing|encryption|master|account|auth|app|client|service"
    r"|subscription|sas|storage)[_.-]?key\Z"
)
SEP = re.compile(r"\\?[\"']?[ \t]*(:=|=>|=(?![=~])|:(?![:/]))[ \t]*")
VALUE = re.compile(
    r"\\\"((?:[^\"\\\n]|\\[^\"]){0,1024})\\\""  # \"value\" inside an escaped JSON string
    r"|\"((?:[^\"\\\n]|\\.){0,1024})\""  # bounded: an unclosed quote costs 1 KiB of scanning at most
    r"|'([^'\n]{0,1024})'"
    r"|([^\s\"'`,;&|<>(){}\[\]]+)"
)
AUTH_SCHEME = re.compile(r"(?i)\\?[\"']?(bearer|basic|token|digest|bot|negotiate|ntlm|apikey)[ \t]+([^\s\"'`,;]+)")
YAML_TAIL = re.compile(r"[ \t]*(?:#.*)?(?:\n|\r|\\n|\Z)|[\"'`]")
PLACEHOLDER = re.compile(
    r"(?i)\A(?:<[^>]*>|\$\{[^}]*\}|\$\(.*\)|\$[A-Za-z_][A-Za-z0-9_]*|%[A-Za-z_]+%|\{\{.*\}\}|\{[A-Za-z_][\w.]*\}"
    r"|[*x.•…#-]+|\[redacted[^\]]*\]|redacted|none|null|nil|true|false|yes|no|undefined|n/?a|tbd|todo"
    r"|str|string|bytes|int|bool|any|optional\[.*|secretstr|required|optional"
    r"|(?:your|my|some|example|dummy|fake|sample|test)[_-].*|.*[_-]here|placeholder|example|env\(.*)\Z"
)
CODE = re.compile(r"\A[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+\Z")
AUTH_METHODS = frozenset({
    "oauth", "oauth2", "oidc", "basic", "bearer", "token", "jwt", "sso", "saml", "ldap", "kerberos",
    "password", "apikey", "api_key", "none", "digest", "mtls", "iam", "github", "google", "azure",
    "aws", "local", "anonymous", "session", "cookie",
})
# A single word that says what became of a credential, or points elsewhere: not the credential.
PROSE_WORDS = frozenset({
    "none", "null", "changed", "see", "required", "missing", "unset", "n/a", "redacted", "hidden",
    "empty", "invalid", "expired", "wrong", "incorrect", "provided", "omitted", "removed", "rotated",
    "revoked", "updated", "reset", "disabled", "handled", "unknown", "ignored", "masked", "supplied",
    "not", "no", "optional", "needed", "given", "set", "ok",
})
PROSE_WORD = re.compile(r"\(?(?:[A-Za-z][a-z]{0,19}|[A-Z]{2,8}|[a-z]+'[a-z]+|[0-9]{1,6})[.,;:!?)]?")
ENTROPY_CHARS = re.compile(r"[A-Za-z0-9+/=_.~-]{32,}\Z")

# ---- the type of a token-shaped value whose prefix tells who issued it ---------------------------
KNOWN_PREFIXES = ("github_pat_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "sk-", "sk_", "rk_",
                   "AKIA", "ASIA", "AIza", "xox", "eyJ", "-----BEGIN")


def entropy(value: str) -> float:
    counts: dict[str, int] = {}
    for char in value:
        counts[char] = counts.get(char, 0) + 1
    size = len(value)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


@lru_cache(maxsize=4096)
def key_type(key: str) -> tuple[str, bool] | None:
    """(type, strict) when a key names a secret; strict=False only allows high-entropy values."""
    k = key.lower().strip("-_.")
    if not k:
        return None
    if k.endswith(("password", "passwd", "passphrase")):
        return "password", True
    if k.endswith(("_pass", "-pass", ".pass", "_pwd", "-pwd", ".pwd")) or k == "pass":
        return "password", True
    if k.endswith("authorization"):
        return "authorization", True
    if k.endswith("token"):
        return "token", True
    if k.endswith("secret"):
        return "secret", True
    if k.endswith(("credential", "credentials", "creds")):
        return "secret", False  # usually names a profile or a file (`credentials: aws-prod`)
    if k.endswith("key"):
        if COMPOUND_KEY.search(k) or k.endswith("apikey"):
            return ("aws_secret_key" if "aws" in k or "secretaccesskey" in k.replace("_", "") else "api_key"), True
        return "secret", False
    if k == "auth" or k.endswith(("_auth", "-auth", ".auth")):
        return "secret", True
    return None


def keep_value(value: str, key: str, strict: bool, kind: str, quoted: bool) -> bool:
    """Values that are obviously not secrets: placeholders, references, code, counts, methods, a
    word of prose (`passwd: changed`), and for an authorization a sentence (`see RFC 6750`)."""
    if len(value) < 3 or PLACEHOLDER.match(value):
        return True
    if value.lower().rstrip(".,;:!") in PROSE_WORDS or kind == "authorization" and prose(value):
        return True
    if value.isdigit() and len(value) < 8 and kind != "password":
        return True
    if not quoted and looks_like_code(value, key):
        return True
    if kind == "secret" and value.lower() in AUTH_METHODS:
        return True
    if value.startswith(("/", "~/", "./", "../")) and "password" not in kind and "/" in value[1:]:
        return True  # a path to a key file is not the key
    if not strict:
        return not (ENTROPY_CHARS.match(value) and mixed(value) and entropy(value) >= 4.0)
    return False


def prose(value: str) -> bool:
    """`handled by the gateway`, `see RFC 6750`, `missing or wrong bearer token`: plainly words.

    Words of letters (a capitalised or short upper-case word, a short number too), three or more,
    or two after a word of `PROSE_WORDS`. Only for an authorization: a quoted password may be a
    passphrase, and `Custom <letters>` is a scheme and its credential.
    """
    words = value.split()
    if len(words) < 2 or not all(PROSE_WORD.fullmatch(word) for word in words):
        return False
    return len(words) >= 3 or words[0].lower() in PROSE_WORDS


def looks_like_code(value: str, key: str) -> bool:
    """`settings.API_KEY`, `self.api_key = api_key`, `token = new_token`: expressions, not literals."""
    if "(" in value or "[" in value or "?." in value or "->" in value or "::" in value:
        return True
    if CODE.match(value) and sum(c.isdigit() for c in value) < 3:
        return True
    low = value.lower()
    if low == key.lower().rsplit(".", 1)[-1]:
        return True
    return "_" in value and value.islower() and value.isidentifier() and any(w in low for w in KEY_WORDS)


def mixed(value: str) -> bool:
    """Random tokens mix upper case, lower case and digits; slugs, hex digests and words do not."""
    return any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value)


def clean_left(text: str, start: int, extra: str = "") -> bool:
    """An ambiguous token (a bare `sk-…`) starts at a word edge: `task-…` is not a token, but
    `%3Dsk-…`, `\\nsk-…`, `\\042sk-…`, `&#34sk-…`, `\\x1b[32msk-…` and `0x22sk-…` are: the letter
    before ends an escape. (Prefixes no word holds, `ghp_`, `AKIA`, `xoxb-`, need no edge at all.)"""
    if start == 0:
        return True
    before = text[start - 1]
    if not (before.isalnum() or before == "_" or before in extra):
        return True
    return ESCAPE_END.search(text, max(0, start - 12), start) is not None


# Any escape that may end where a token starts: URL (`%3D`, `%u0022`, `%2525` nested), C and JSON
# (`\n`, `\042`, `\u0022`, `\U00000022`, `\x3d`), HTML with or without `;`, a terminal colour (also
# with its ESC gone), a hex literal.
ESCAPE_END = re.compile(
    r"(?:%[0-9A-Fa-f]{2,}|%[uU][0-9A-Fa-f]{4}|\\[A-Za-z]|\\[0-7]{1,3}|\\[uUx]\{?[0-9A-Fa-f]{2,8}\}?"
    r"|&#[0-9]{1,7};?|&#[xX][0-9A-Fa-f]{1,6};?|&(?:quot|amp|lt|gt|nbsp|[A-Za-z]{2,31};)|\[[0-9;?]*[mKHJGf]"
    r"|0[xX][0-9A-Fa-f]{2})\Z"
)


def mask(value: str) -> str:
    for prefix in KNOWN_PREFIXES:
        if value.startswith(prefix):
            return value[: min(4, len(prefix))] + "****"
    return "****"
