"""Where a run happens: `local`, `ssh` or `tpu` profiles.

Profiles are plain dicts (LSP settings, or `[tool.pallas-lsp.profiles.NAME]`
tables in pyproject.toml) validated into a `Profile`. Keys may be written
snake_case or camelCase (`identity_file` / `identityFile`).

    [tool.pallas-lsp.profiles.box]          # a bigger machine, interpret mode
    kind = "ssh"
    host = "box.example.com"
    user = "me"
    identity_file = "~/.ssh/id_ed25519"
    remote_dir = "pallas-runs/myproject"    # relative paths are under the remote home
    remote_python = "/home/me/venv/bin/python"

    [tool.pallas-lsp.profiles.v5e]          # a real TPU VM
    kind = "tpu"
    name = "my-tpu"
    zone = "us-west4-a"
    command = ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "{name}", "--zone", "{zone}",
               "--worker=all", "--command", "{command}"]
    remote_dir = "pallas-runs/myproject"
    remote_python = "python3"

Who decides what runs: a profile from the user's own settings (`profiles`
passed in, e.g. the editor's `runs.profiles`) is trusted. A profile from the
repository's pyproject.toml decides which program runs and where, so it is
used only after the user allowed exactly that profile (`allow_project`: the
CLI's --allow-project-profiles, or the editor's consent), it cannot take a
built-in name (`local`), and it cannot weaken host-key checking or change
how ssh connects (`strict_host_key_checking`, `known_hosts`, and all but a
few harmless `ssh_options`). See docs/runs.md, "Who decides what runs".
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pallas_lsp.runs.target import RunSpecError

KINDS = ("local", "ssh", "tpu")
MODES = ("interpret", "tpu")
COPY_MODES = {"local": ("none",), "ssh": ("auto", "rsync", "tar", "none"), "tpu": ("tar", "none")}
DEFAULT_EXCLUDE = (".git", ".hg", ".svn", ".venv", "venv", "__pycache__", ".mypy_cache",
                   ".pytest_cache", ".ruff_cache", "node_modules", "*.pyc")
DEFAULT_REMOTE_DIR = ".cache/pallas-lsp/work"
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

_COMMON = {"kind", "python", "env", "devices", "timeout", "mode", "kill_grace"}
_REMOTE = {"remote_dir", "remote_python", "copy", "exclude", "copy_timeout", "watch_stdin"}
_SSH = {"host", "user", "port", "identity_file", "known_hosts", "strict_host_key_checking",
        "ssh_options", "connect_timeout"}
_TPU = {"command"}
_ALLOWED = {"local": _COMMON, "ssh": _COMMON | _REMOTE | _SSH, "tpu": _COMMON | _REMOTE | _TPU}

_HOST = re.compile(r"^[A-Za-z0-9_.:%\[\]-]+$")
_USER = re.compile(r"^[A-Za-z0-9._][A-Za-z0-9._@-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ProfileError(RunSpecError):
    """An invalid profile; the message names the profile and the key."""


class ProjectProfileNotAllowed(ProfileError):
    """A profile of the repository's pyproject.toml that the user has not
    allowed (yet). `profile` says what it would run."""

    def __init__(self, project: "ProjectProfile"):
        self.project = project
        super().__init__(
            f"profile {project.name!r} comes from {project.source}, not from your settings; "
            f"it would {project.summary}. Allow it first (pallas-lsp run "
            "--allow-project-profiles, or answer the editor's question), or copy it into your "
            "own settings")


# ssh -o options a repository may set: none runs a command, changes the host
# key policy or files, the proxy, the agent, forwarding or what config is read.
SAFE_SSH_OPTIONS = frozenset(o.lower() for o in (
    "AddressFamily", "BatchMode", "Compression", "ConnectionAttempts", "ConnectTimeout",
    "IPQoS", "LogLevel", "ServerAliveCountMax", "ServerAliveInterval", "TCPKeepAlive",
    "RekeyLimit", "Ciphers", "MACs", "KexAlgorithms", "RequestTTY", "EscapeChar"))


@dataclass(frozen=True)
class Profile:
    name: str
    kind: str = "local"
    python: str | None = None  # local interpreter (local profiles)
    env: dict = field(default_factory=dict)
    devices: int | None = None
    timeout: float | None = None
    mode: str | None = None
    kill_grace: float | None = None  # seconds between the child's own watchdog and a hard kill
    # remote (ssh, tpu)
    remote_dir: str = DEFAULT_REMOTE_DIR
    remote_python: str = "python3"
    copy: str = "none"
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    copy_timeout: float = 600.0
    watch_stdin: bool = True  # the remote run ends when the connection closes (cancel)
    # ssh
    host: str | None = None
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    strict_host_key_checking: str = "yes"
    ssh_options: tuple[str, ...] = ()
    connect_timeout: int = 15
    # tpu
    command: tuple[str, ...] = ()
    vars: dict = field(default_factory=dict)  # placeholder values for `command`

    @property
    def remote(self) -> bool:
        return self.kind != "local"


LOCAL = Profile(name="local")
BUILT_IN = {"local": LOCAL}  # names a repository cannot redefine


@dataclass(frozen=True)
class ProjectProfile:
    """A `[tool.pallas-lsp.profiles.NAME]` table of a repository."""

    name: str
    source: str  # the pyproject.toml it is in
    data: dict
    fingerprint: str  # what the user allows: this file, this name, this exact content
    summary: str  # what it runs, for the question to the user


def fingerprint(source: str, name: str, data) -> str:
    blob = json.dumps([os.path.realpath(source), name, data], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _snake(key: str) -> str:
    key = key.replace("-", "_")
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), key)


def validate_profile(name: str, data: dict, *, source: str | None = None) -> Profile:
    """Check a profile dict and build a Profile. Raises ProfileError.
    `source`: the repository file it came from (None: the user's settings),
    which may not set host-key or connection options."""
    where = f"profile {name!r}" + (f" in {source}" if source else "")
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: must be a table/object, got {type(data).__name__}")
    d = {}
    for k, v in data.items():
        if not isinstance(k, str):
            raise ProfileError(f"{where}: keys must be strings, got {k!r}")
        d[_snake(k)] = v
    kind = d.get("kind", "local" if name == "local" else None)
    if kind is None:
        raise ProfileError(f"{where}: missing `kind` (one of {', '.join(KINDS)})")
    if kind not in KINDS:
        raise ProfileError(f"{where}: `kind` must be one of {', '.join(KINDS)}, got {kind!r}")

    def text(key, default=None, *, required=False):
        v = d.get(key, default)
        if v is None:
            if required:
                raise ProfileError(f"{where}: missing `{key}`")
            return None
        if not isinstance(v, str) or not v:
            raise ProfileError(f"{where}: `{key}` must be a non-empty string, got {v!r}")
        if any(ord(c) < 32 for c in v):
            raise ProfileError(f"{where}: `{key}` must not contain control characters")
        return v

    def number(key, default, lo, hi, *, integer=False):
        v = d.get(key, default)
        if v is None:
            return None
        ok = isinstance(v, int) if integer else isinstance(v, (int, float))
        if not ok or isinstance(v, bool) or not (lo <= v <= hi):
            kind_ = "an integer" if integer else "a number"
            raise ProfileError(f"{where}: `{key}` must be {kind_} from {lo} to {hi}, got {v!r}")
        return v

    def str_list(key, default=()):
        v = d.get(key, default)
        if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
            raise ProfileError(f"{where}: `{key}` must be a list of strings, got {v!r}")
        if any("\0" in x or "\n" in x for x in v):
            raise ProfileError(f"{where}: `{key}` must not contain NUL or newlines")
        return tuple(v)

    allowed = _ALLOWED[kind]
    extra = {k: v for k, v in d.items() if k not in allowed}
    placeholders: dict = {}
    if kind == "tpu":
        # every other scalar key is a placeholder value for `command`
        for k, v in extra.items():
            if isinstance(v, bool) or not isinstance(v, (str, int)):
                raise ProfileError(f"{where}: `{k}` must be a string or an integer (a value for "
                                   f"the `{{{k}}}` placeholder in `command`), got {v!r}")
            placeholders[k] = str(v)
        extra = {}
    if extra:
        known = ", ".join(sorted(allowed))
        raise ProfileError(f"{where}: unknown key(s) {', '.join(sorted(extra))} for kind "
                           f"{kind!r} (known: {known})")

    env = d.get("env", {})
    if not isinstance(env, dict):
        raise ProfileError(f"{where}: `env` must be a table of NAME = \"value\"")
    for k, v in env.items():
        if not isinstance(k, str) or not _ENV_NAME.match(k):
            raise ProfileError(f"{where}: `env` name {k!r} is not a valid variable name")
        if not isinstance(v, str) or "\0" in v:
            raise ProfileError(f"{where}: `env.{k}` must be a string")
    mode = text("mode")
    if mode is not None and mode not in MODES:
        raise ProfileError(f"{where}: `mode` must be one of {', '.join(MODES)}, got {mode!r}")

    kw = dict(name=name, kind=kind, env=dict(env), mode=mode,
              devices=number("devices", None, 1, 4096, integer=True),
              timeout=number("timeout", None, 0.1, 7 * 24 * 3600),
              kill_grace=number("kill_grace", None, 0, 3600))
    if kind == "local":
        kw["python"] = _expand(text("python"))
        return Profile(**kw)

    copy_default = "auto" if kind == "ssh" else "tar"
    copy = text("copy", copy_default)
    if copy not in COPY_MODES[kind]:
        raise ProfileError(f"{where}: `copy` must be one of {', '.join(COPY_MODES[kind])}, "
                           f"got {copy!r}")
    watch = d.get("watch_stdin", kind == "ssh")
    if not isinstance(watch, bool):
        raise ProfileError(f"{where}: `watch_stdin` must be true or false, got {watch!r}")
    kw.update(copy=copy, remote_dir=_remote_dir(where, text("remote_dir", DEFAULT_REMOTE_DIR)),
              watch_stdin=watch,
              remote_python=text("remote_python", "python3"),
              exclude=str_list("exclude", DEFAULT_EXCLUDE),
              copy_timeout=number("copy_timeout", 600.0, 1, 24 * 3600))
    if kind == "ssh":
        host = text("host", required=True)
        if not _HOST.match(host) or host.startswith("-"):
            raise ProfileError(f"{where}: `host` {host!r} is not a host name or address")
        user = text("user")
        if user is not None and not _USER.match(user):
            raise ProfileError(f"{where}: `user` {user!r} is not a valid user name")
        if source is not None:
            _check_repository_ssh(where, d)
        strict = d.get("strict_host_key_checking", True)
        if strict is True:
            strict = "yes"
        elif strict is False:
            strict = "no"
        if strict not in ("yes", "no", "accept-new"):
            raise ProfileError(f"{where}: `strict_host_key_checking` must be true, false or "
                               f"\"accept-new\", got {strict!r}")
        known = _expand(text("known_hosts"))
        if known is not None and '"' in known:
            raise ProfileError(f"{where}: `known_hosts` must not contain a double quote")
        kw.update(host=host, user=user,
                  port=number("port", None, 1, 65535, integer=True),
                  identity_file=_expand(text("identity_file")),
                  known_hosts=known, strict_host_key_checking=strict,
                  ssh_options=str_list("ssh_options"),
                  connect_timeout=number("connect_timeout", 15, 1, 3600, integer=True))
        return Profile(**kw)

    # tpu
    command = str_list("command", None) if "command" in d else None
    if not command:
        raise ProfileError(f"{where}: missing `command`, a list such as [\"gcloud\", \"compute\", "
                           "\"tpus\", \"tpu-vm\", \"ssh\", \"{name}\", \"--zone\", \"{zone}\", "
                           "\"--worker=all\", \"--command\", \"{command}\"]")
    for part in command:
        if "{command}" in part and part != "{command}":
            raise ProfileError(f"{where}: \"{{command}}\" must be a whole element of "
                               f"`command`, not part of {part!r}")
    if "{command}" not in command:
        raise ProfileError(f"{where}: `command` must contain \"{{command}}\" as a list element "
                           "of its own (the remote command is passed there)")
    for part in command:
        for m in PLACEHOLDER.finditer(part):
            key = m.group(1)
            if key == "command":
                if part != "{command}":
                    raise ProfileError(f"{where}: \"{{command}}\" must be a whole element of "
                                       f"`command`, not part of {part!r}")
                continue
            if key not in placeholders and key not in ("remote_dir", "remote_python"):
                raise ProfileError(f"{where}: `command` uses {{{key}}} but the profile has no "
                                   f"`{key}` key")
    unused = [k for k in placeholders if not any(f"{{{k}}}" in p for p in command)]
    if unused:
        raise ProfileError(f"{where}: unknown key(s) {', '.join(sorted(unused))} (not used as "
                           "a placeholder in `command`)")
    kw.update(command=command, vars=placeholders)
    return Profile(**kw)


def _check_repository_ssh(where: str, d: dict) -> None:
    only_user = ("only from your own settings (pallas-lsp.runs.profiles) or ~/.ssh/config, "
                 "never from a repository")
    if d.get("strict_host_key_checking", True) not in (True, "yes"):
        raise ProfileError(f"{where}: `strict_host_key_checking` can be turned off {only_user}")
    if d.get("known_hosts") is not None:
        raise ProfileError(f"{where}: `known_hosts` (which host keys are trusted) comes "
                           f"{only_user}")
    options = d.get("ssh_options", ())
    if isinstance(options, (list, tuple)):
        for opt in options:
            key = re.split(r"[\s=]", str(opt).strip(), maxsplit=1)[0].lower()
            if key not in SAFE_SSH_OPTIONS:
                raise ProfileError(f"{where}: ssh option {opt!r} may change how ssh connects, "
                                   f"checks host keys or what it runs locally; it comes "
                                   f"{only_user} (a repository may set only "
                                   f"{', '.join(sorted(SAFE_SSH_OPTIONS))})")


def describe(p: Profile) -> str:
    """What a profile runs, in a few words (for the user's consent)."""
    if p.kind == "local":
        return f"run {p.python or 'the Python running pallas-lsp'} on this machine" + \
            (f" with environment {', '.join(sorted(p.env))}" if p.env else "")
    if p.kind == "ssh":
        who = f"{p.user}@{p.host}" if p.user else p.host
        port = f" port {p.port}" if p.port else ""
        opts = f", ssh options {' '.join(p.ssh_options)}" if p.ssh_options else ""
        return f"copy the workspace to {who}{port} over ssh and run {p.remote_python} there{opts}"
    return "run this command on this machine: " + " ".join(p.command)


def _expand(path: str | None) -> str | None:
    if path is None:
        return None
    return os.path.expandvars(os.path.expanduser(path))


def _remote_dir(where: str, value: str) -> str:
    v = value.rstrip("/") or "/"
    if v.startswith("~/"):
        v = v[2:]  # ssh starts in the home folder; a quoted "~" would not expand
    if v in ("/", "~", ".", "..", "") or v.startswith(("~", "-")) or "\0" in v:
        raise ProfileError(f"{where}: `remote_dir` {value!r} must be a folder of its own "
                           "(not /, ~ or .)")
    if any(part == ".." for part in v.split("/")):
        raise ProfileError(f"{where}: `remote_dir` must not contain '..'")
    return v


def load_profiles(root: str | os.PathLike) -> dict[str, dict]:
    """Raw `[tool.pallas-lsp.profiles]` tables from the pyproject.toml nearest
    to `root` (not validated)."""
    from pallas_lsp.check.config import find_pyproject

    path = find_pyproject(Path(root))
    if path is None:
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from exc
    profiles = data.get("tool", {}).get("pallas-lsp", {}).get("profiles", {})
    if not isinstance(profiles, dict):
        raise ProfileError(f"{path}: [tool.pallas-lsp.profiles] must be a table of tables")
    return profiles


def project_profiles(root: str | os.PathLike | None) -> tuple[dict[str, ProjectProfile], list[str]]:
    """The repository's profiles near `root`, and warnings (a table that tries
    to redefine a built-in profile is dropped)."""
    from pallas_lsp.check.config import find_pyproject

    if root is None:
        return {}, []
    path = find_pyproject(Path(root))
    if path is None:
        return {}, []
    out, warnings = {}, []
    for name, data in load_profiles(root).items():
        if name in BUILT_IN:
            warnings.append(f"{path} defines [tool.pallas-lsp.profiles.{name}]; a repository "
                            f"cannot redefine the built-in profile {name!r}: ignored")
            continue
        try:
            summary = describe(validate_profile(name, data, source=str(path)))
        except ProfileError as exc:
            summary = f"(invalid: {exc})"
        out[name] = ProjectProfile(name, str(path), data, fingerprint(str(path), name, data),
                                   summary)
    return out, warnings


def resolve_profile(profile: str | dict | Profile | None, root: str | os.PathLike | None = None,
                    extra: dict[str, dict] | None = None,
                    allow_project: bool | frozenset | set = False) -> Profile:
    """A Profile from a name, a dict or a Profile. A name is looked up in
    `extra` (the user's settings), then among the built-in profiles, then in
    the repository's pyproject.toml, whose profiles need `allow_project`:
    True, or a set holding their fingerprint (else ProjectProfileNotAllowed)."""
    if isinstance(profile, Profile):
        return profile
    if isinstance(profile, dict):
        return validate_profile("custom", profile)
    name = profile or "local"
    if extra and name in extra:
        return validate_profile(name, extra[name])
    if name in BUILT_IN:
        return BUILT_IN[name]
    table, _ = project_profiles(root)
    if name in table:
        found = table[name]
        result = validate_profile(name, found.data, source=found.source)
        if allow_project is True or (allow_project and found.fingerprint in allow_project):
            return result
        raise ProjectProfileNotAllowed(found)
    known = sorted({*BUILT_IN, *table, *(extra or {})})
    raise ProfileError(f"unknown profile {name!r} (known: {', '.join(known)})")
