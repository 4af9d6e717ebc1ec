"""Credentials as people and agents write them down, one family per way of saying it.

Every value is built when this runs, from a hash of a seed, so no file in the repository
holds anything that looks like a live credential. ``families()`` gives (family, provider,
text, secret) rows; ``near_misses()`` gives (kind, text) rows that must stay untouched.
The tests and bench/bench_security.py both read them.
"""

from __future__ import annotations

import base64
import hashlib
import string
import uuid

B62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
HEX = "0123456789abcdef"


def value(seed: str, n: int, alphabet: str = B62) -> str:
    out, counter = [], 0
    while len(out) < n:
        out += [alphabet[b % len(alphabet)] for b in hashlib.sha256(f"{seed}:{counter}".encode()).digest()]
        counter += 1
    return "".join(out[:n])


def _shapes(seed: str) -> list[tuple[str, str]]:
    """(provider, value): values no provider rule knows by prefix, the way an
    unfamiliar service's key looks, plus a few known shapes."""
    return [
        ("unknown-b62", value(seed + "a", 32)),
        ("unknown-b64", value(seed + "b", 40, B62 + "+/")),
        ("unknown-hex", value(seed + "c", 40, HEX)),
        ("unknown-short", value(seed + "d", 20)),
        ("unknown-dashed", "-".join(value(seed + f"e{i}", 8, string.ascii_lowercase + string.digits) for i in range(4))),
        ("github", "gh" + "p_" + value(seed + "f", 36)),
    ]


PROVIDERS = ["Sonar", "Vercel", "Netlify", "Datadog", "Cloudflare", "Sentry", "Algolia", "Mixpanel"]

# family -> templates; {p} a provider's name, {v} the value
TEMPLATES: dict[str, list[str]] = {
    "assigned": [
        "NPM_TOKEN={v}",
        'SONAR_LOGIN := "{v}"',
        "{p}_API_KEY: {v}",
        "{p_lower}ApiKey = '{v}'",
        "client_secret => {v}",
        "set DEPLOY_PASSWORD={v} before the job",
        "The CI variable {p}_AUTH_TOKEN={v} was added today.",
    ],
    "export": [
        "export {p}_TOKEN={v}",
        'Added export {p}_SECRET="{v}" to ~/.zshrc',
        "echo 'export {p}_ACCESS_KEY={v}' >> ~/.bashrc",
        "set -x {p}_TOKEN {v}  # in config.fish",
        "setenv {p}_APIKEY {v}",
    ],
    "config_file": [
        ".env:\nDATABASE_URL=postgres://localhost/app\n{p}_KEY={v}\nDEBUG=false",
        "config.yaml:\n{p_lower}:\n  api_token: {v}\n  region: eu-west-1",
        'settings.json: {{"endpoint": "https://api.example.net", "apiKey": "{v}"}}',
        '[{p_lower}]\nauth_token = "{v}"\ntimeout = 30',
        "<add key=\"{p}Secret\" value=\"{v}\" />",
    ],
    "sentence_is": [
        "Remember: the {p} credential for the side project is {v}.",
        "The {p} key for staging is {v}",
        "Our {p} token was {v} until last week.",
        "the {p} secret they gave us reads {v}",
        "{p} API key: {v}",
        "The password for the {p} admin console is now {v}",
    ],
    "sentence_adjacent": [
        "her {p} access token {v} stopped working after the migration",
        "Use {p} token {v} for the nightly export.",
        "He pasted the {p} API key {v} into the ticket.",
        "Logged in with password {v} on the shared box.",
        "rotated {p} credentials ({v}) on Friday",
    ],
    "sentence_as": [
        "The {p} key is stored as {v} in the runner.",
        "{p}_TOKEN exported as {v} in ~/.zshrc.",
        "They set the {p} secret as {v}.",
        "saved the {p} API token as '{v}'",
    ],
    # a password a command takes by a short flag of its own: no credential word names it
    "command_line": [
        "curl -u deploy:{v} https://ci.{p_lower}.example/api/builds",
        "curl -s --user 'api:{v}' https://api.{p_lower}.example/v3/messages",
        "mysql -h db.internal -u root -p{v} orders < dump.sql",
        "sshpass -p '{v}' ssh pi@10.0.0.12 uptime",
        "docker login -u ci-bot -p {v} registry.{p_lower}.example",
        "Connected with redis-cli -h cache.internal -a {v} ping; it answered PONG.",
    ],
}


def families() -> list[tuple[str, str, str, str]]:
    rows = []
    for family, templates in TEMPLATES.items():
        for t, template in enumerate(templates):
            for kind, secret in _shapes(f"{family}:{t}"):
                p = PROVIDERS[(t + len(kind)) % len(PROVIDERS)]
                rows.append((family, kind, template.format(p=p, p_lower=p.lower(), v=secret), secret))
    rows += _structured()
    rows += _beside_encoded()
    return rows


def _structured() -> list[tuple[str, str, str, str]]:
    rows = []
    tail = value("slack", 24)
    slack = "https://hooks." + "slack.com/services/T" + value("t", 8, string.ascii_uppercase + string.digits) + "/B" + value("b", 10, string.ascii_uppercase + string.digits) + "/" + tail
    rows.append(("url", "slack-webhook", f"Alerts go to {slack} now.", tail))
    disc = value("disc", 68, B62 + "_-")
    rows.append(("url", "discord-webhook", f"webhook: https://discord.com/api/webhooks/{value('dn', 18, string.digits)}/{disc}", disc))
    zap = value("zap", 7, string.ascii_lowercase + string.digits)
    generic_hook = value("hook", 32)
    rows.append(("url", "generic-webhook", f"The form posts to https://hooks.example-automation.com/hooks/catch/123456/{generic_hook}/", generic_hook))
    teams = value("teams", 40, HEX)
    rows.append(("url", "teams-webhook", f"Teams channel hook https://contoso.webhook.office.com/webhookb2/{value('tid', 8, HEX)}/IncomingWebhook/{teams}/{value('t2', 8, HEX)}", teams))
    pw = value("userpass", 14)
    rows.append(("url", "user-pass", f"Clone with https://deploy:{pw}@git.internal.example/team/app.git", pw))
    pw2 = "Summer" + value("up2", 4, string.digits) + "!"
    rows.append(("url", "user-pass", f"redis://:{pw2}@cache.internal:6379/0", pw2))
    q = value("query", 32)
    rows.append(("url", "query-token", f"The export link was https://reports.example.net/dl?file=q3.csv&access_token={q}", q))
    sig = value("sig", 44, B62 + "%")
    rows.append(("url", "query-token", f"Presigned: https://files.example.org/a.pdf?expires=1700000000&signature={sig}", sig))
    del zap
    # Kubernetes Secret manifests: base64 under data:, plain under stringData:
    for i, raw in enumerate([b"hunter2-prod", value("k8s", 24).encode(), b"s3cr3t-Passw0rd!"]):
        enc = base64.b64encode(raw).decode()
        rows.append(("k8s_secret", "data", f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-{i}\ntype: Opaque\ndata:\n  username: YWRtaW4=\n  password: {enc}\n", enc))
    enc = base64.b64encode(value("k8s-tok", 30).encode()).decode()
    rows.append(("k8s_secret", "data", f"kind: Secret\ndata:\n  token: {enc}", enc))
    plain = value("k8s-plain", 18)
    rows.append(("k8s_secret", "stringData", f"kind: Secret\nstringData:\n  DB_PASS: {plain}\n", plain))
    # PEM blocks and JWTs
    for label in ("RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY"):
        body = "\n".join(value(f"pem{label}{i}", 64, B62 + "+/") for i in range(3))
        block = f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"
        rows.append(("pem", label, f"The deploy key:\n{block}\n", body.split("\n")[1]))
    head = base64.urlsafe_b64encode(b'{"alg":"RS256","typ":"JWT"}').decode().rstrip("=")
    for i in range(3):
        claims = base64.urlsafe_b64encode(f'{{"sub":"{1000 + i}","role":"admin"}}'.encode()).decode().rstrip("=")
        jwt = f"{head}.{claims}.{value(f'jwt{i}', 43, B62 + '_-')}"
        rows.append(("jwt", "jwt", f"curl -H 'Authorization: Bearer {jwt}' https://api.example.net/me", jwt))
    return rows


# --- encoded content: random-looking, public, and what people paste into notes ----------

def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def random_bytes(seed: str, n: int) -> bytes:
    out, counter = b"", 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}:{counter}".encode()).digest()
        counter += 1
    return out[:n]


def _ssh_string(raw: bytes) -> bytes:
    return len(raw).to_bytes(4, "big") + raw


def ssh_public_key(algorithm: str, seed: str) -> str:
    """An OpenSSH public key line: the algorithm, then the key in SSH's wire format
    (length-prefixed strings, the first the algorithm's name again)."""
    if algorithm == "ssh-rsa":
        parts = [b"\x01\x00\x01", b"\x00" + random_bytes(seed, 256)]
    elif algorithm.startswith("ecdsa-sha2-"):
        parts = [algorithm.rsplit("-", 1)[1].encode(), b"\x04" + random_bytes(seed, 64)]
    else:
        parts = [random_bytes(seed, 32)]
    blob = b"".join(_ssh_string(p) for p in [algorithm.encode(), *parts])
    return f"{algorithm} {_b64(blob)}"


def wrapped(text: str, width: int, sep: str = "\n") -> str:
    return sep.join(text[i : i + width] for i in range(0, len(text), width))


def excalidraw_note(seed: str) -> str:
    """An Obsidian Excalidraw drawing as the plugin saves it by default: the scene
    compressed to base64 in a `compressed-json` block, cut into 256-character lines."""
    data = _b64(random_bytes(seed, 4500))
    return (f"---\nexcalidraw-plugin: parsed\ntags: [excalidraw]\n---\n# Excalidraw Data\n\n## Text Elements\n"
            f"Seagull ^abc123\n\n%%\n## Drawing\n```compressed-json\n{wrapped(data, 256, chr(10) * 2)}\n```\n%%\n")


def private_key_der(seed: str) -> bytes:
    """The first bytes of a PKCS#8 RSA private key (SEQUENCE, version 0, rsaEncryption),
    then noise: the shape, no key."""
    return bytes.fromhex("308204bd020100300d06092a864886f70d0101010500048204a7") + random_bytes(seed, 1200)


def _beside_encoded() -> list[tuple[str, str, str, str]]:
    """Credentials in notes that also carry encoded content, and private keys however
    they are encoded: found still."""
    rows = []
    drawing = excalidraw_note("drawing-with-secret")
    v = value("beside-drawing", 40, B62 + "+/")
    rows.append(("encoded", "labelled", f"{drawing}\nThe CI deploy token: {v}\n", v))
    rows.append(("encoded", "bare", f"{drawing}\n{v}\n", v))
    gh = "gh" + "p_" + value("beside-drawing-gh", 36)
    rows.append(("encoded", "github", f"{drawing}\npushed with {gh}\n", gh))
    image = f"![x](data:image/png;base64,{_b64(bytes.fromhex('89504e470d0a1a0a') + random_bytes('img', 90))})"
    pw = value("beside-image", 24)
    rows.append(("encoded", "labelled", f"{image}\npassword={pw}\n", pw))
    body = _b64(random_bytes("openssh-private", 300))
    block = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{wrapped(body, 70)}\n-----END OPENSSH PRIVATE KEY-----"
    rows.append(("encoded", "private_key", f"{ssh_public_key('ssh-ed25519', 'pair')} me@laptop\n\n{block}\n", body[70:140]))
    headless = wrapped(_b64(private_key_der("headless")), 64)
    rows.append(("encoded", "private_key", f"The key body, pasted without its lines:\n{headless}\n", headless.split("\n")[3]))
    pem = "-----BEGIN PRIVATE KEY-----\n" + wrapped(_b64(private_key_der("as-uri")), 64) + "\n-----END PRIVATE KEY-----\n"
    uri = "data:application/x-pem-file;base64," + _b64(pem.encode())
    rows.append(("encoded", "private_key", f"[download the key]({uri})", uri[40:120]))
    blob = _b64(b"openssh-key-v1\0" + random_bytes("fenced-private", 400))
    rows.append(("encoded", "private_key", f"```base64\n{wrapped(blob, 76)}\n```", blob[76:152]))
    return rows


def encoded_near_misses() -> list[tuple[str, str]]:
    """Public or encoded content, each kind twice or more: none of it is a credential."""
    cert = wrapped(_b64(bytes.fromhex("308203773082025fa003020102") + random_bytes("cert", 880)), 64)
    mime = wrapped(_b64(random_bytes("mime", 600)), 76)
    return [
        ("ssh_public_key", f"My laptop key for the server:\n{ssh_public_key('ssh-ed25519', 'laptop')} me@laptop"),
        ("ssh_public_key", f"{ssh_public_key('ssh-rsa', 'ci')} deploy@ci"),
        ("ssh_public_key", f"github.com {ssh_public_key('ecdsa-sha2-nistp256', 'known-host')}"),
        ("ssh_public_key", f"Add to authorized_keys: {ssh_public_key('sk-ssh-ed25519@openssh.com', 'yubikey')} ada@yubikey"),
        ("data_uri", f"An image: ![x](data:image/png;base64,{_b64(bytes.fromhex('89504e470d0a1a0a') + random_bytes('png', 120))})"),
        ("data_uri", f'<img src="data:image/jpeg;base64,{_b64(random_bytes("jpeg", 200))}" alt="clip">'),
        ("data_uri", f"src: url(data:font/woff2;charset=utf-8;base64,{_b64(random_bytes('font', 300))}) format('woff2');"),
        ("data_uri", f"[file](data:application/octet-stream;base64,{_b64(random_bytes('octets', 90))})"),
        ("drawing", excalidraw_note("drawing")),
        ("drawing", f"```compressed-json\n{_b64(random_bytes('one-line-drawing', 900))}\n```"),
        ("wrapped_base64", f"-----BEGIN CERTIFICATE-----\n{cert}\n-----END CERTIFICATE-----"),
        ("wrapped_base64", f"The attachment, as the mail carried it:\n\n{mime}\n"),
        ("wrapped_base64", f"```base64\n{_b64(random_bytes('fenced', 120))}\n```"),
    ]


def near_misses() -> list[tuple[str, str]]:
    sha256 = hashlib.sha256(b"near").hexdigest()
    sha1 = hashlib.sha1(b"near").hexdigest()
    u = str(uuid.uuid5(uuid.NAMESPACE_DNS, "near.example"))
    prose64 = base64.b64encode(b"The meeting moved to Thursday afternoon.").decode()
    gosum, gomod = (base64.b64encode(hashlib.sha256(s).digest()).decode() for s in (b"zip", b"mod"))
    return [
        ("sha256", f"source_hash: {sha256}"),
        ("sha256", f"The token hash is {sha256}."),
        ("sha256", f"checksum_sha256={sha256}"),
        ("git_sha", f"commit {sha1}"),
        ("git_sha", f"The secret rotation landed in {sha1}."),
        ("git_sha", f"token_commit: {sha1[:12]}"),
        ("uuid", f"request_id={u}"),
        ("uuid", f"The API key id is {u}."),
        ("uuid", f"client_id: {u}"),
        ("version", "TOKENIZER_VERSION=2.14.1-rc3"),
        ("version", "The auth library is at v3.12.0-beta.4+build.20240611"),
        ("path", "SSH_KEY_PATH=/home/deploy/.ssh/id_ed25519"),
        ("path", "The secret lives at vault/kv/data/prod/payments/stripe"),
        ("path", "GOOGLE_APPLICATION_CREDENTIALS=/etc/gcp/service-account.json"),
        ("word", "The password is rotated every ninety days."),
        ("word", "api_key: required"),
        ("word", "token: ${NPM_TOKEN}"),
        ("word", "password: <your password here>"),
        ("word", "The access token expired yesterday."),
        ("word", "her GitHub access token stopped working after the migration"),
        ("word", "export TOKEN_TTL=3600"),
        ("word", "secret_name: payments-api-secret"),
        ("word", "Set MAX_TOKENS=4096 for the summariser."),
        ("word", "The key insight is that caching helps."),
        ("word", "Logged in as jane.doe@example.com with SSO."),
        ("base64_text", f"data: {prose64}"),
        ("url", "https://hooks.slack.com/ is where incoming webhooks live."),
        ("url", "https://github.com/org/repo/pull/4821/files#diff-7c2a9e"),
        ("url", "https://example.com/search?q=rotate+api+key&page=2"),
        ("url", "https://store.example.net/c/a.csv?sv=2021-08-06&se=2024-05-01T00%3A00Z&sp=r&key=monthly-report"),
        ("k8s", "kind: ConfigMap\ndata:\n  LOG_LEVEL: info\n  REGION: eu-west-1\n"),
        ("number", "The PIN pad on floor 3 is broken."),
        ("number", "The Sonar token count rose to 1284 this sprint."),
        ("go_sum", f"golang.org/x/net v0.25.0 h1:{gosum}\ngolang.org/x/net v0.25.0/go.mod h1:{gomod}"),
        ("go_sum", f"verifying example.com/lib@v1.4.2: checksum mismatch\n\tdownloaded: h1:{gomod}\n\tgo.sum:     h1:{gosum}"),
        ("command", "ssh -p 2222 deploy@bastion.internal"),
        ("command", "docker run -p 8080:80 -v $(pwd):/app nginx:1.27"),
        ("command", "mysql -u root -p orders   # asks for the password"),
        ("command", 'curl -u "$CI_USER:$CI_TOKEN" https://ci.example.net/api'),
        ("command", "mkdir -p build/out && psql -p 5432 -U app orders"),
        *encoded_near_misses(),
    ]


def pushed_credentials(seed: str = "pushed") -> tuple[str, str, str]:
    """An AWS access key id, an AWS secret key and a GitHub token, as a teammate pastes
    them into a note committed past the hooks (``git commit --no-verify``)."""
    aws_id = "AK" + "IA" + value(seed + "-id", 16, string.ascii_uppercase + "234567")
    aws_secret = value(seed + "-secret", 40, B62 + "+/")
    github = "gh" + "p_" + value(seed + "-gh", 36)
    return aws_id, aws_secret, github
