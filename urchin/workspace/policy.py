"""Which workspace files Urchin may index and serve: secret stores and ignored files stay out.

One list of secret-store names (`SECRET_FILE_RULES`), one ignore check that agrees with the walker.
A root opts in to secret stores with `urchin workspace add PATH --allow-secret-files`; ignored files
(`.gitignore`, `.urchinignore`, the always-ignored folders) are never indexed nor served.
"""

from __future__ import annotations

import fnmatch
import re

from urchin.redact import redact_text
from urchin.workspace.beneath import Tree
from urchin.workspace.ignore import IgnoreRules

__all__ = ["SECRET_FILE_RULES", "SECRET_FOLDERS", "secret_rule", "secret_in_path", "is_ignored"]

# Matched case-insensitively against a file's name (its last path component).
SECRET_FILE_RULES: tuple[str, ...] = (
    ".env", ".env.*", "*.env",                                    # dotenv files
    "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore",    # keys and key stores
    "*.kdbx", "*.kdb", "*.ppk", "*.tfstate", "*.tfstate.*",       # password databases, terraform state
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",             # ssh keys
    "credentials", "credentials.json", "credentials.xml", ".git-credentials",
    ".netrc", "_netrc", ".pgpass", ".npmrc", ".pypirc", ".yarnrc.yml", ".htpasswd", ".dockercfg",
    ".s3cfg", ".boto", ".vault-token", "secrets.yml", "secrets.yaml", "secrets.json",
)
# Folders whose every file is a secret store (`~/.ssh/config` names hosts and keys).
SECRET_FOLDERS: tuple[str, ...] = (".ssh", ".gnupg")
# Templates committed beside the real file hold placeholders, not secrets: `.env.example`.
_TEMPLATE_SUFFIXES = (".example", ".sample", ".template", ".dist", ".tmpl")
# One regex for the walker's hot path; the rule itself is looked up only for an error message.
_ANY_RULE = re.compile("|".join(fnmatch.translate(rule) for rule in SECRET_FILE_RULES))


def secret_rule(rel: str) -> str | None:
    """The rule that makes `rel` (a path inside a root) a secret store, or None."""
    parts = [p.lower() for p in rel.replace("\\", "/").split("/") if p]
    if not parts:
        return None
    for folder in parts[:-1]:
        if folder in SECRET_FOLDERS:
            return f"{folder}/"
    name = parts[-1]
    if name.endswith(_TEMPLATE_SUFFIXES) or not _ANY_RULE.match(name):
        return None
    for rule in SECRET_FILE_RULES:
        if fnmatch.fnmatchcase(name, rule):
            return rule
    return None


def secret_in_path(path: str) -> str | None:
    """The type of a secret in a path itself (a file or folder named after a token), or None.

    Paths are served and stored like content (overview, citations, index rows, error messages), so
    such a file is neither indexed nor served, whatever the root opts in to."""
    counts = redact_text(path)[1]
    return next(iter(counts)) if counts else None


def is_ignored(tree: Tree, rel: str) -> bool:
    """Would the walker skip `rel` (inside the root `tree`)? Its folders and itself against every
    ignore file on the way down, each folder opened beneath the root."""
    parts = [p for p in rel.split("/") if p]
    rules = IgnoreRules.for_root(tree.path)
    folder = ""
    for part in parts[:-1]:
        rules = _with_folder(rules, tree, folder)
        folder = f"{folder}/{part}" if folder else part
        if rules.ignored(folder, True):
            return True
    rules = _with_folder(rules, tree, folder)
    return rules.ignored("/".join(parts), False)


def _with_folder(rules: IgnoreRules, tree: Tree, folder: str) -> IgnoreRules:
    if not folder:
        return rules.with_folder(tree, "")
    try:
        sub = tree.sub(folder)
    except OSError:
        return rules             # gone or outside: the read that follows refuses it
    with sub:
        return rules.with_folder(sub, folder)
