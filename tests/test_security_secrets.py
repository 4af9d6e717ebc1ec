"""Credential redaction: each provider's format is redacted, near-misses are untouched.

No fixture holds a live-looking credential: every fake is assembled at test time from a
prefix and a body derived from a hash, so secret scanners in CI see nothing here.
"""

from __future__ import annotations

import base64
import hashlib
import string
import uuid
from pathlib import Path

import pytest

from cortex.security import Scanner
from cortex.security.secrets import REDACTED, redact

_B62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


def body(seed: str, n: int, alphabet: str = _B62) -> str:
    """A deterministic random-looking string (never a real credential)."""
    out, counter = [], 0
    while len(out) < n:
        for b in hashlib.sha256(f"{seed}:{counter}".encode()).digest():
            out.append(alphabet[b % len(alphabet)])
        counter += 1
    return "".join(out[:n])


def hexbody(seed: str, n: int) -> str:
    return body(seed, n, "0123456789abcdef")


def join(*parts: str) -> str:
    return "".join(parts)


# (provider, sentence with the fake, the fake that must disappear)
def cases() -> list[tuple[str, str, str]]:
    out = []

    def add(provider: str, template: str, secret: str) -> None:
        out.append((provider, template.format(secret), secret))

    add("aws", "The deploy user's key id is {} in the CI settings.", join("AK", "IA", body("aws", 16, string.ascii_uppercase + "234567")))
    add("aws", "AWS_SECRET_ACCESS_KEY={} was pasted in chat.", body("aws-secret", 40, _B62 + "+/"))
    add("github", "My GitHub token: {}", join("gh", "p_", body("ghp", 36)))
    add("github", "Tokens like {} belong in the vault.", join("github", "_pat_", body("gpat", 22), "_", body("gpat2", 59)))
    add("gitlab", "Bearer {} is the runner token.", join("gl", "pat-", body("glpat", 20)))
    add("slack", "The bot posts with {} today.", join("xo", "xb-", body("s1", 12, string.digits), "-", body("s2", 13, string.digits), "-", body("s3", 24)))
    add("slack", "Webhook: {}", join("https://hooks.", "slack.com/services/T", body("w1", 8, string.ascii_uppercase), "/B", body("w2", 10, string.ascii_uppercase), "/", body("w3", 24)))
    add("stripe", "Stripe live key {} must rotate.", join("sk", "_live_", body("stripe", 24)))
    add("openai", "OPENAI_API_KEY is {}", join("sk-", "proj-", body("oa", 48), "T3Blbk", "FJ", body("oa2", 48)))
    add("anthropic", "The key {} ran out of credit.", join("sk-", "ant-", "api03-", body("ant", 93), "AA"))
    add("google", "Maps key {} is restricted to one domain.", join("AI", "za", body("goog", 35)))
    add("twilio", "Twilio API key {} in the SMS job.", join("S", "K", hexbody("tw", 32)))
    add("sendgrid", "Mail goes out with {} now.", join("S", "G.", body("sg1", 22), ".", body("sg2", 43)))
    add("npm", "Publish with {} from CI.", join("np", "m_", body("npm", 36)))
    add("pypi", "TWINE_PASSWORD={}", join("py", "pi-", "AgEIcHlwaS5vcmc", body("pypi", 70)))
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    claims = base64.urlsafe_b64encode(b'{"sub":"42","name":"test"}').decode().rstrip("=")
    add("jwt", "Session cookie was {} yesterday.", join(header, ".", claims, ".", body("sig", 43)))
    pem_body = "\n".join(body(f"pem{i}", 64, _B62 + "+/") for i in range(3))
    add("private_key", "Key file:\n{}\n", join("-----BEGIN ", "RSA PRIVATE KEY-----\n", pem_body, "\n-----END ", "RSA PRIVATE KEY-----"))
    add("openrouter", "Router key {} is for the eval box.", join("sk-", "or-v1-", hexbody("or", 64)))
    add("groq", "GROQ_API_KEY={}", join("gs", "k_", body("groq", 52)))
    add("mailgun", "Mailgun still uses {} for bounces.", join("ke", "y-", hexbody("mg", 32)))
    add("discord", "Alerts post to {} now.", join("https://discord.com/api/", "webhooks/", body("dw1", 18, string.digits), "/", body("dw2", 68)))
    add("basic_auth", "The probe sends Authorization: Basic {} to the API.", base64.b64encode(join("svc", ":", body("ba", 12)).encode()).decode())
    add("generic", "The wifi password: {}", join(body("pw", 7), "!"))
    add("generic", "The staging .env sets API_KEY={}; rotate it.", body("generic", 40))
    add("generic", "Retry the webhook test with {} as the service secret.", body("generic2", 44))
    # said in prose rather than assigned: a hex-only key, and passwords a person chose
    add("generic", "The vendor API key is {} until March.", hexbody("vendor", 32))
    add("generic", "The admin password for the staging Grafana is {}", join(body("w1", 6, string.ascii_lowercase), "-", body("w2", 5, string.ascii_lowercase), "-9"))
    add("generic", "The wifi passphrase is {}.", join("Blue", body("w3", 6, string.ascii_lowercase), "-42-Orbit"))
    add("generic", "The client secret for our Okta app is {}", body("okta", 16))
    add("generic", "The password for the staging Grafana is now {}", join("Orbit-", body("g1", 6, string.ascii_lowercase), "-77"))
    add("generic", "Password for jenkins: {}", join("Jenkins#", body("j", 4, string.digits)))
    add("generic", "the api key = {}", hexbody("spaced", 32))
    return out


@pytest.mark.parametrize("provider,text,secret", cases(), ids=[c[0] for c in cases()])
def test_credential_is_redacted(provider, text, secret):
    out, kinds = redact(text)
    assert secret not in out
    assert REDACTED in out
    assert len(kinds) == 1


@pytest.mark.parametrize("provider,text,secret", cases(), ids=[c[0] for c in cases()])
def test_a_redacted_text_redacts_to_itself(provider, text, secret):
    """What `cortex run` writes is what the hook and `cortex validate` read: a text once
    redacted must hold no credential any more (a password redacted inside a URL was
    reported again, so the run's own notes failed the nightly validation)."""
    once, _ = redact(text)
    assert redact(once) == (once, ())


def test_only_the_marker_itself_is_a_redacted_password():
    text = f"postgresql://svc:{REDACTED}Xk29vLq7pW@db.internal:5432/orders"
    assert redact(text)[1] == ("db_url",)


def test_connection_string_keeps_all_but_the_password():
    password = body("dbpw", 20)
    text = f"The app connects with postgresql://svc_reports:{password}@db.internal:5432/orders."
    out, kinds = redact(text)
    assert out == f"The app connects with postgresql://svc_reports:{REDACTED}@db.internal:5432/orders."
    assert kinds == ("db_url",)


def near_misses() -> list[str]:
    sha256 = hashlib.sha256(b"a body").hexdigest()
    sha1 = hashlib.sha1(b"a commit").hexdigest()
    md5 = hashlib.md5(b"a file").hexdigest()
    ident = str(uuid.uuid5(uuid.NAMESPACE_URL, "cortex"))
    prose = base64.b64encode(b"Sam recently took friends on a long hiking trip.").decode()
    return [
        f"source_hash: {sha256}",
        f"Dedup: sha256 {sha256} is already in memory.",
        f"The fix landed in commit {sha1} on main.",
        f"Reverted {sha1[:7]} after the flaky test.",
        f"The installer's MD5 checksum is {md5}.",
        f"session_id={ident}",
        f"Decoded the cookie value {prose} - it is just a sentence.",
        "Docs: https://github.com/example-org/example-repo/actions/workflows/test_linux.yml/badge.svg",
        "Reading list: https://docs.example.com/reference/authentication/api-keys-and-tokens#rotation-policy",
        "The README example shows key = AKIAXXXXXXXXXXXXXXXX as a placeholder.",
        "Their sample config still has " + "gh" + "o_" + "x" * 36 + " in it.",
        'curl -u "${username}":"${password}" https://example.com',
        "I rotated the AWS access key on Monday; the new one is in the team vault.",
        "The password policy requires twelve characters.",
        "Use getUserAccountInformationFromDatabase in the service layer.",
        "The file lives at /Users/JaneDoe/Documents/Projects2024/ReportFinal/summary.md",
        # prose after "the password is", and public identifiers that look random
        "The password is rotated monthly by the platform team.",
        "The API key is stored in the team's 1Password vault.",
        "integrity=\"sha384-" + base64.b64encode(hashlib.sha384(b"app.js").digest()).decode() + "\"",
        "The bastion's host key is SHA256:" + base64.b64encode(hashlib.sha256(b"host").digest()).decode().rstrip("="),
        "Logs: /var/log/containers/payments-api-7d9f8b6c5d-x2k4m_prod_api-" + sha256[:12] + ".log",
        "Refunds go to 0x" + sha1 + " on mainnet.",
        "The README's example DSN is postgres://user:password@localhost:5432/app.",
        # names made of words, where a key word precedes them in prose
        "The access token is validatedOnEachRequest by the gateway.",
        "The API key is ReadFromEnvironmentVariable at startup.",
        "Assets live in the bucket frontend-WebApp-Prod-EU-West1.",
        "The dead letters pile up in orders.v2.PaymentCaptured-DLQ-2024Q3.",
        "The password reset email goes out at 9.",
    ]


@pytest.mark.parametrize("text", near_misses())
def test_near_miss_is_untouched(text):
    assert redact(text) == (text, ())


def test_scanner_redact_also_drops_hidden_characters():
    token = join("gh", "p_", body("zw", 36))
    # A zero-width space inside the token must not split it past the redactor.
    text = f"token {token[:10]}\u200b{token[10:]} here"
    out, kinds = Scanner().redact(text)
    assert out == f"token {REDACTED} here"
    assert kinds == ("github",)


def test_a_whole_note_with_its_ids_and_hashes_is_untouched():
    # The git hook redacts hand-written notes file by file: ids, hashes, dates, links
    # and entity lists must come through byte for byte.
    sha = hashlib.sha256(b"Use local git only.").hexdigest()
    note = (
        "---\n"
        'id: "019503a7-c18f-7b1d-a3b2-9c4f7e2d1a0b"\n'
        "type: decision\n"
        "category: concept\n"
        "created: 2026-02-16T15:23:14.527Z\n"
        f"source_hash: {sha}\n"
        "# ---\n"
        'title: "Use local git only — no remote push in daemon."\n'
        "entities:\n"
        "  - {name: Cortex, type: project}\n"
        'links: ["[[Cortex]]"]\n'
        'session_id: "022a598a-7ca8-4ccf-80bb-f1919386421e"\n'
        "---\n\n"
        "Use local git only — no remote push in daemon. See https://git-scm.com/docs/git-push#_options.\n"
    )
    assert Scanner().redact(note) == (note, ())


@pytest.mark.parametrize("provider,text,secret", cases(), ids=[c[0] for c in cases()])
def test_the_cheap_gate_lets_every_credential_through(provider, text, secret):
    """`might_hold` spares the archive scrub most lines; it must never spare a secret."""
    from cortex.security.secrets import might_hold

    assert might_hold(text)
    assert might_hold(secret) or redact(secret) == (secret, ())  # alone, found only by its context


def test_the_security_package_imports_nothing_of_cortex_above_it():
    """Self-contained: the package reads only itself and the embedding model (and the
    marker a note shows is the one the redactor writes)."""
    import ast

    from cortex.notes import REDACTED as note_marker
    from cortex.security.secrets import REDACTED

    assert note_marker == REDACTED
    package = Path(__file__).resolve().parent.parent / "cortex" / "security"
    outside = set()
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            outside |= {(path.name, n) for n in names if n.startswith("cortex") and not n.startswith("cortex.security")}
    assert outside <= {("classifier.py", "cortex.embed"), ("training.py", "cortex.embed")}, outside


# --- credentials named by their context, one family per way of writing them down -----------
# (tests/secret_phrasings.py builds each value at test time from a hash)

from secret_phrasings import families as _families  # noqa: E402
from secret_phrasings import near_misses as _context_near_misses  # noqa: E402

_FAMILIES = _families()


@pytest.mark.parametrize("family", sorted({f for f, *_ in _FAMILIES}))
def test_each_phrasing_family_is_redacted(family):
    rows = [r for r in _FAMILIES if r[0] == family]
    leaked = [text for _, _, text, secret in rows if secret in redact(text)[0]]
    # every family holds values of several shapes; at most one in twenty may pass
    assert len(leaked) <= len(rows) // 20, leaked


@pytest.mark.parametrize("kind,text", _context_near_misses(), ids=[k for k, _ in _context_near_misses()])
def test_context_near_miss_is_untouched(kind, text):
    assert redact(text) == (text, ())


def test_the_named_phrasings_of_the_leaks_are_each_caught():
    v = body("named", 32)
    for text in (
        f"the Vercel credential for the side project is {v}",
        f"her Datadog access token {v}",
        f"NPM_TOKEN={v}",
        f'SONAR_LOGIN := "{v}"',
        f"export SENTRY_AUTH_TOKEN={v}  # in ~/.zshrc",
        f"sonar.login: {v}",
    ):
        out, kinds = redact(text)
        assert v not in out and REDACTED in out, text


# --- encoded content: random-looking, pasted into notes, and no credential --------------
# (an Obsidian user's drawings, SSH public keys and clipped images were refused by the
# commit hook as "looks like a credential (generic)")

from secret_phrasings import excalidraw_note, private_key_der, random_bytes, ssh_public_key, wrapped  # noqa: E402

_ENCODED = [r for r in _FAMILIES if r[0] == "encoded"]


@pytest.mark.parametrize("algorithm", ["ssh-ed25519", "ssh-rsa", "ssh-dss", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
                                       "ecdsa-sha2-nistp521", "sk-ssh-ed25519@openssh.com", "ssh-ed25519-cert-v01@openssh.com"])
def test_an_ssh_public_key_is_no_credential(algorithm):
    for line in (f"{ssh_public_key(algorithm, 'laptop')} me@laptop", f"host.example {ssh_public_key(algorithm, 'host')}",
                 f"command=\"backup\",no-pty {ssh_public_key(algorithm, 'opts')}"):
        assert redact(line) == (line, ()), line


def test_random_base64_after_an_ssh_algorithm_name_is_still_a_credential():
    # The key's bytes must name the algorithm: the word before them proves nothing.
    fake = body("not-a-key", 68, _B62 + "+/")
    assert redact(f"ssh-ed25519 {fake} me@laptop")[1] == ("generic",)


@pytest.mark.parametrize("media", ["image/png", "image/svg+xml", "image/webp", "font/woff2", "application/pdf",
                                   "application/octet-stream", "audio/mpeg", ""])
def test_a_data_uri_is_no_credential(media):
    payload = base64.b64encode(random_bytes("uri" + media, 150)).decode()
    for text in (f"![clip](data:{media};base64,{payload})", f'<img src="data:{media};name=a.bin;base64,{payload}">'):
        assert redact(text) == (text, ()), text


def test_an_excalidraw_drawing_is_no_credential():
    note = excalidraw_note("seagull")
    assert redact(note) == (note, ())
    one_line = f"```compressed-json\n{base64.b64encode(random_bytes('one-line', 2000)).decode()}\n```"
    assert redact(one_line) == (one_line, ())


def test_a_wrapped_run_of_base64_is_no_credential_but_keys_listed_one_per_line_are():
    run = wrapped(base64.b64encode(random_bytes("mime", 500)).decode(), 76)
    assert redact(run) == (run, ())
    keys = "\n".join(body(f"listed{i}", 40, _B62 + "+/") for i in range(3))  # three keys of one length
    assert redact(keys)[1] == ("generic",) * 3


@pytest.mark.parametrize("kind,text,secret", [r[1:] for r in _ENCODED], ids=[r[1] for r in _ENCODED])
def test_a_credential_beside_encoded_content_is_still_found(kind, text, secret):
    out, kinds = redact(text)
    assert secret not in out and kinds
    if kind == "private_key":
        assert kinds == ("private_key",)


def test_a_private_key_goes_whole_however_it_is_encoded():
    headless = wrapped(base64.b64encode(private_key_der("whole")).decode(), 64)
    out, kinds = redact(f"pasted:\n{headless}\n")
    assert kinds == ("private_key",) and out == f"pasted:\n{REDACTED}\n"
    pem = "-----BEGIN PRIVATE KEY-----\n" + headless + "\n-----END PRIVATE KEY-----\n"
    encoded = base64.b64encode(pem.encode()).decode()
    assert redact(f"KEY_B64 {encoded}") == (f"KEY_B64 {REDACTED}", ("private_key",))


def test_a_rules_word_spelled_with_a_letter_re_folds_is_still_redacted():
    """A rule runs only on a text holding one of its words, looked for as `re` matches
    under IGNORECASE (`ı` is an i): lowercased alone, "Authorızation" hid the word and the
    credential after it was left as it was."""
    import base64

    from secret_phrasings import value

    secret = base64.b64encode(("deploy:" + value("fold", 12)).encode()).decode()
    text, kinds = redact(f"Author\u0131zation: Basic {secret}")
    assert secret not in text and REDACTED in text and kinds == ("basic_auth",)
