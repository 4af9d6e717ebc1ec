"""Benign training text written for cortex: requests, reminders and notes that use the
words injections use ("ignore", "override", "system", "instructions", "policy",
"unfiltered"...) in ordinary senses, phrased as commands.

The dev set's benign prompts are mostly questions and LongMemEval turns are mostly
first-person chat, so a classifier trained on them alone learns "an imperative is an
attack" and holds a third of the NotInject over-defence sentences. These sentences are
built from parts (deterministically) so the model sees imperatives that are not aimed
at an assistant's instructions. None of them comes from a benchmark.
"""

from __future__ import annotations

_TASK_OPENERS = (
    "Write a short story about",
    "Draft a short note about",
    "Summarize what you know about",
    "Explain",
    "Describe",
    "Give me three tips on",
    "Create a checklist for",
    "Compose a short poem about",
    "Outline a lesson plan on",
    "Suggest a few ideas for",
    "Make a list of facts about",
    "Compare two approaches to",
)
_POLITE = ("", "Please ", "Could you ", "Can you ", "I'd like you to ", "Help me: ")

_TOPICS = (
    "a character who learns to ignore unfair criticism",
    "how to override a method in a Java subclass",
    "why a computer's system clock drifts over time",
    "the rules of chess for a beginner",
    "our company's travel expense policy",
    "why a jailbroken phone can lose its warranty",
    "turning on developer mode on an Android phone",
    "a robot that follows instructions far too literally",
    "last quarter's sales compared with the previous quarter",
    "unclogging a drain without calling a plumber",
    "brewing unfiltered coffee at home",
    "what a system administrator does all day",
    "resetting a forgotten email password safely",
    "a spy who forgets his orders on the first day",
    "the assembly instructions for a flat-pack bookshelf",
    "guidelines for a first job interview",
    "how spam filters decide what to block",
    "when to disregard outliers in a small dataset",
    "a teacher who pretends to be a pirate for a school play",
    "the role of the immune system in fighting a cold",
    "an unrestricted free day at a theme park",
    "bypass surgery and how long recovery takes",
    "the history of the prompt book in theatre",
    "a knight who breaks the rules to save a village",
    "how a thermostat's override button works",
    "the moral of the tortoise and the hare",
    "what the previous owner of a house must disclose",
    "ignoring a toddler's tantrum without ignoring the child",
    "how an operating system schedules processes",
    "the house rules for a board game night",
    "the admin settings of a shared family calendar",
    "hidden costs when buying a used car",
    "a secret recipe for grandmother's apple pie",
    "a museum guide who acts as a medieval blacksmith",
    "what to say when a colleague asks you to cover a shift",
    "writing a polite reply that declines an invitation",
    "a network firewall and the ports it filters",
    "the instructions printed on a bottle of cough syrup",
    "the original version of a folk song and its later covers",
    "the dress code rules at a formal dinner",
)

_REMINDERS = (
    "Remember to",
    "Make sure to",
    "Don't forget to",
    "Be sure to",
    "Begin by taking time to",
    "Start the day and",
    "Try to",
    "Ensure that you",
)
_ACTIONS = (
    "ignore the noise from the street while you study",
    "review the project guidelines before the meeting",
    "follow the instructions on the medicine label",
    "update the system before installing the printer driver",
    "check the remote work policy with HR",
    "disregard the first pancake, it never turns out well",
    "forget the old password once the new one works",
    "override the default font in the editor settings",
    "bypass the ring road during rush hour",
    "restart the system after the update finishes",
    "delete the outdated files from the shared drive",
    "activate the new feature from the settings menu",
    "press and hold the reset button for five seconds",
    "skip the previous chapter if you already know the basics",
    "print the boarding passes the night before",
    "say thank you to the volunteers at the end",
    "reply to the landlord about the broken heater",
    "act as the host when the guests arrive",
    "stay calm and ignore the rude comments online",
    "write down the instructions the doctor gave you",
    "repeat the exercise three times on each leg",
    "output the report as a PDF before sending it",
    "pretend the interviewer is a friendly neighbour to calm your nerves",
    "translate the menu before the trip to Lisbon",
    "respond to every customer within one day",
    "enable two-factor authentication on the bank account",
    "filter the water before boiling it on the camping trip",
    "answer the survey about the new office rules",
    "forget about work for the weekend",
    "lock the admin account after the audit",
)

_NOTES = (
    "User prefers to ignore notifications after 9 pm.",
    "The team decided to override last year's deployment rules for the holiday freeze.",
    "She wants the assistant to remember her dietary restrictions: no peanuts.",
    "The writing club's prompt this week is 'a door left open'.",
    "The previous instructions from the landlord were to leave keys at the front desk.",
    "Decision: disregard the old benchmark numbers, the hardware changed.",
    "He asked me to forget the earlier address; the new one is on Elm Street.",
    "The system was down for two hours on Tuesday because of a disk failure.",
    "The new policy says employees must not share their badges.",
    "Lesson: ignore vanity metrics and watch retention instead.",
    "The kids are allowed unrestricted screen time on Saturdays only.",
    "Reminder: the admin password for the router was changed last week.",
    "The play needs someone to act as the narrator in the second act.",
    "Her doctor said to disregard the earlier lab result; it was a sample mix-up.",
    "Our rule is to never deploy on Fridays.",
    "The guidelines for the grant say to keep the summary under 300 words.",
    "The bot in the team chat posts the on-call rota every Monday.",
    "Jailbreaking the old tablet voided its warranty, so he bought a new one.",
    "The developer mode toggle is hidden under the build number in settings.",
    "Prefers answers with code examples over long explanations.",
    "Ignore the draft in the shared folder; the final version is in the email.",
    "The manual's instructions say to charge the battery for eight hours first.",
    "Wants to forget about the failed launch and focus on the next release.",
    "Project rule: all new services start with the standard system template.",
    "The sign said to follow the instructions of the staff during the fire drill.",
)


def over_defence_sentences() -> list[str]:
    """About 400 benign imperative sentences and notes, always the same."""
    out: list[str] = []
    for i, topic in enumerate(_TOPICS):
        for j in range(4):
            opener = _TASK_OPENERS[(i * 5 + j * 7) % len(_TASK_OPENERS)]
            polite = _POLITE[(i + j * 3) % len(_POLITE)]
            text = f"{polite}{opener[0].lower() + opener[1:] if polite else opener} {topic}"
            out.append(text + ("?" if polite.startswith(("Could", "Can")) else "."))
    for i, action in enumerate(_ACTIONS):
        for j in range(3):
            out.append(f"{_REMINDERS[(i * 3 + j * 5) % len(_REMINDERS)]} {action}.")
    out.extend(_NOTES)
    return out


# --- technical notes -----------------------------------------------------------------
# What a coding agent observes: versions, paths, URLs, hashes, ids, commands, config,
# incidents, base64 of ordinary text, placeholders, all-caps headings. Without these the
# model learns "a URL or a long token is an attack", since the attacks carry exfiltration
# links and encoded payloads and the chat turns carry neither.

_TOOLS = (
    "PostgreSQL 16", "Redis 7.2", "nginx", "Docker", "Kubernetes", "Terraform", "FastAPI",
    "React 18", "pytest", "GitHub Actions", "Fly.io", "S3", "SQLite", "Celery", "Django 5.0",
    "Node 20", "pnpm", "Rust 1.79", "Go 1.22", "Grafana", "Prometheus", "Sentry", "Vite",
    "Alembic", "uv", "pre-commit", "ruff", "mypy", "Kafka", "RabbitMQ",
)
_PEOPLE = ("Maya", "Jonas", "Priya", "Tomás", "Aiko", "Lena", "Omar", "Grace", "Wei", "Sofia")
_SERVICES = ("billing", "checkout", "search", "ingest", "auth", "notifications", "reports", "tide-api", "ledger", "exporter")
_HOSTS = (
    "docs.python.org/3/library", "www.postgresql.org/docs/16", "github.com/acme-labs/ledger/issues",
    "developer.mozilla.org/en-US/docs/Web/API", "kubernetes.io/docs/concepts", "fastapi.tiangolo.com/tutorial",
    "registry.terraform.io/providers/hashicorp/aws/latest/docs", "docs.docker.com/engine/reference",
    "gitlab.com/example-group/tools/-/merge_requests", "img.shields.io/badge", "cdn.jsdelivr.net/npm",
    "stackoverflow.com/questions", "en.wikipedia.org/wiki", "blog.example.org/2025/11",
)
_PATHS = (
    "explicit-locking.html", "asyncio-task.html#timeouts", "1432#issuecomment-2219876",
    "Fetch_API/Using_Fetch", "workloads/pods/pod-lifecycle", "dependencies/?utm_source=newsletter&utm_medium=email",
    "resources/s3_bucket", "commandline/run/#restart-policies", "88?tab=overview", "coverage-92%25-green.svg",
    "htmx.org@1.9.10/dist/htmx.min.js", "77062114/why-does-alter-table-lock", "Tide_table", "zero-downtime-migrations/",
)
_PHRASES = (
    "Sam moved to Lisbon in May.", "The garden needs water twice a week.", "Invoices go out on the first Monday.",
    "Priya likes the blue theme better.", "The meeting moved to Thursday at ten.", "Jonas reviews every invoicing change.",
    "Tide tables load offline now.", "Coffee with the design team on Friday.",
)
_FRAMES = (
    "{tool} is pinned in {path} because the next minor release broke {service}.",
    "The {service} deploy on 2026-0{m}-1{d} took {n} minutes; {person} rolled it back at 1{d}:4{m}.",
    "Docs for the {service} fix: https://{host}/{url}",
    "{person} keeps https://{host}/{url} pinned for the {service} migration.",
    "Commit {sha7} on main fixed the {service} retry loop.",
    "source_hash {sha256} was reinforced {n} times this week.",
    "Request {uuid} to /api/v{d}/{service} returned 50{d} after {n}00 ms.",
    "{person} prefers `git rebase -i` over merge commits for {service} branches.",
    "Run `make test && make lint` before pushing the {service} branch.",
    "The cron line `{d}0 3 * * *` runs scripts/{service}_backup.sh every night.",
    "Config for {service}: timeout = {n}0, retries = {d}, base_url = https://{service}.internal:8{d}43/v1",
    "Post-incident summary for {service}, 2026-0{m}-0{d}: the migration 02{n}_add_{service}_channel held an ACCESS EXCLUSIVE lock for {n} minutes.",
    "Migration 0{n}1_add_{service}_index adds a NOT NULL column with a server default to the {service} table.",
    "The file ~/.config/{service}/settings.toml holds the {service} defaults; {person} edits it by hand.",
    "Error: KeyError: '{service}_id' in {service}/handlers.py line {n}{d}, raised when the payload lacks an id.",
    "Benchmark: {tool} p95 latency {n}{d} ms at {d}00 rps (was {n}{m} ms before the index).",
    "The README shows the diagram as ![architecture](https://{host}/{service}-architecture.png).",
    "The banner is rendered by <div class=\"{service}-banner\">{phrase}</div> in base.html.",
    "The fixture stores '{phrase}' as base64: {b64}",
    "Decoded the cookie value {b64} and it was only '{phrase}'",
    "The template reads API_KEY=<your-key-here> and DATABASE_URL=${{DATABASE_URL}} for {service}.",
    "Use curl -u \"${{USER}}:${{TOKEN}}\" https://{service}.example.com/health to check {service}.",
    "{TOOL} {SERVICE} RELEASE {d}.{m}: OFFLINE MODE, {n} NEW STATIONS, TARGET DATE 2026-0{m}-1{d}.",
    "{person} tested {service} on Android on 2026-0{m}-0{d}: all {n}0 pages loaded in airplane mode.",
    "The {service} Dockerfile uses python:3.12-slim and copies requirements.lock before the source.",
    "Checksum (sha1) {sha1} matched the {service} mirror.",
    "Image {service}@sha256:{sha256} is what runs in staging.",
    "def {service}_total(items):\\n    return sum(i.amount for i in items if not i.void)",
    "SELECT count(*) FROM {service}_events WHERE created_at > now() - interval '{d} days';",
    "The {service} alert fires when error_rate > 0.0{d} for {n} minutes; {person} owns the runbook.",
)


def technical_sentences() -> list[str]:
    """About 600 benign technical notes, always the same."""
    import base64
    import hashlib
    import uuid

    out = []
    for i in range(600):
        frame = _FRAMES[i % len(_FRAMES)]
        seed = f"cortex-benign-{i}".encode()
        tool = _TOOLS[(i * 7) % len(_TOOLS)]
        service = _SERVICES[(i * 3 + i // len(_FRAMES)) % len(_SERVICES)]
        phrase = _PHRASES[(i * 5) % len(_PHRASES)]
        text = frame.format(
            tool=tool,
            TOOL=tool.upper(),
            service=service,
            SERVICE=service.upper(),
            person=_PEOPLE[(i * 11) % len(_PEOPLE)],
            host=_HOSTS[(i * 13) % len(_HOSTS)],
            url=_PATHS[(i * 17) % len(_PATHS)],
            path=("pyproject.toml", "package.json", "go.mod", "requirements.lock", "Cargo.toml")[i % 5],
            phrase=phrase,
            b64=base64.b64encode(phrase.encode()).decode(),
            sha7=hashlib.sha1(seed).hexdigest()[:7],
            sha1=hashlib.sha1(seed).hexdigest(),
            sha256=hashlib.sha256(seed).hexdigest(),
            uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, seed.decode())),
            n=1 + i % 9,
            d=i % 10,
            m=1 + (i // 10) % 9,
        )
        out.append(text.replace("\\n", "\n"))
    return sorted(set(out))
