from ._common import checks, commit, orient, pytest_ok

TOKENS_PY = """from datetime import datetime, timedelta, timezone

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import RefreshToken
from app.security import new_opaque_token, hash_opaque

REFRESH_TTL = timedelta(days=30)


def rotate_refresh(db: Session, presented: str) -> tuple[str, RefreshToken]:
    row = db.scalar(select(RefreshToken).where(RefreshToken.hash == hash_opaque(presented)))
    if row is None or row.revoked_at is not None:
        raise InvalidRefresh()
    row.revoked_at = datetime.now(timezone.utc)
    raw = new_opaque_token()
    replacement = RefreshToken(user_id=row.user_id, hash=hash_opaque(raw), family_id=row.family_id,
                               expires_at=datetime.now(timezone.utc) + REFRESH_TTL)
    db.add(replacement)
    db.commit()
    return raw, replacement
"""

PASSWORDS_PY = """from passlib.context import CryptContext

_ctx = CryptContext(schemes=["bcrypt"], deprecated="auto")


def hash_password(plain: str) -> str:
    return _ctx.hash(plain)


def verify_password(plain: str, stored: str) -> bool:
    return _ctx.verify(plain, stored)
"""

LIMITS_PY = """from app.ratelimit import SlidingWindow

# Failed logins per (account, IP) before we answer 429.
LOGIN_ATTEMPTS = SlidingWindow(limit=5, window_seconds=15 * 60)
"""

DB_PY = """from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

from app.config import settings

engine = create_engine(settings.database_url, pool_size=5, max_overflow=10, pool_pre_ping=True)
SessionLocal = sessionmaker(bind=engine, autoflush=False)


def get_db():
    db = SessionLocal()
    return db
"""


def build(ds):
    h = ds.history("h12", "claude-code", "/home/dev/src/auth-service",
                   "FastAPI + SQLAlchemy auth service: a refresh-token rotation race that logged users out, bcrypt "
                   "replaced by argon2, login attempt limits, and a DB connection pool leak.",
                   start="2026-05-04T08:00:00Z", model="claude-opus-4-7")
    h.commits = [("c4e91b0", "Refresh token families (reuse detection)"), ("1f7d2a8", "POST /login/otp"), ("ab50e63", "Upgrade to SQLAlchemy 2.0")]

    # ---- s1: refresh race
    s = h.session("2026-05-04T09:55:48Z", mode="default")
    s.prompt("Users of the web app get randomly logged out. Logs show 'refresh token reuse detected, revoking family' "
             "right when two browser tabs refresh at the same moment. The second tab presents the token the first "
             "tab just rotated. Fix the race without weakening reuse detection much.")
    orient(s)
    s.read("app/services/tokens.py", TOKENS_PY)
    s.grep("reuse detected", "app/api/auth.py:61:        log.warning(\"refresh token reuse detected, revoking family\", family=row.family_id)\n", path="app")
    s.read("app/api/auth.py", """@router.post("/token/refresh")
def refresh(body: RefreshIn, db: Session = Depends(get_db)):
    try:
        raw, row = rotate_refresh(db, body.refresh_token)
    except InvalidRefresh:
        row = find_by_hash(db, body.refresh_token)
        if row is not None and row.revoked_at is not None:
            log.warning("refresh token reuse detected, revoking family", family=row.family_id)
            revoke_family(db, row.family_id)
        raise HTTPException(401)
    return issue_pair(row, raw)
""")
    e_race = s.edit("app/services/tokens.py", """def rotate_refresh(db: Session, presented: str) -> tuple[str, RefreshToken]:
    row = db.scalar(select(RefreshToken).where(RefreshToken.hash == hash_opaque(presented)))
    if row is None or row.revoked_at is not None:
        raise InvalidRefresh()""", """REUSE_GRACE = timedelta(seconds=10)


def rotate_refresh(db: Session, presented: str) -> tuple[str, RefreshToken]:
    # Lock the row: two concurrent refreshes of the same token serialise here instead of both rotating.
    row = db.scalar(select(RefreshToken).where(RefreshToken.hash == hash_opaque(presented)).with_for_update())
    if row is None:
        raise InvalidRefresh()
    if row.revoked_at is not None:
        # A parallel tab rotated it a moment ago: hand back that tab's successor instead of calling it reuse.
        if row.replaced_by_id and datetime.now(timezone.utc) - row.revoked_at < REUSE_GRACE:
            successor = db.get(RefreshToken, row.replaced_by_id)
            return reissue(db, successor)
        raise InvalidRefresh()""")
    s.edit("app/services/tokens.py", """    db.add(replacement)
    db.commit()""", """    db.add(replacement)
    db.flush()
    row.replaced_by_id = replacement.id
    db.commit()""")
    s.bash("alembic revision --autogenerate -m 'refresh_tokens.replaced_by_id'", "INFO  [alembic.autogenerate.compare] Detected added column 'refresh_tokens.replaced_by_id'\n"
           "  Generating /home/dev/src/auth-service/migrations/versions/7d1c9e2f4a60_refresh_tokens_replaced_by_id.py ...  done\n", desc="Migration")
    s.write("tests/test_refresh_race.py", """import threading

from app.services.tokens import rotate_refresh


def test_concurrent_refresh_does_not_revoke_family(db_factory, issued_refresh):
    results = []

    def worker():
        with db_factory() as db:
            results.append(rotate_refresh(db, issued_refresh))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(results) == 2
""")
    e_race_fail = s.bash("pytest tests/test_refresh_race.py -q", "F                                                                        [100%]\n"
                         "E       sqlalchemy.exc.OperationalError: (psycopg.errors.UndefinedColumn) column refresh_tokens.replaced_by_id does not exist\n"
                         "FAILED tests/test_refresh_race.py::test_concurrent_refresh_does_not_revoke_family - sqlalchemy.exc.OperationalError\n"
                         "1 failed in 1.24s\n", code=1, desc="Race test", secs=3.0)
    s.bash("alembic upgrade head && pytest tests/test_refresh_race.py -q", "INFO  [alembic.runtime.migration] Running upgrade c4e91b0aa1f2 -> 7d1c9e2f4a60, refresh_tokens.replaced_by_id\n"
           + pytest_ok(1, "1.31"), desc="Migrate test DB and rerun", secs=4.0)
    s.bash("pytest -q", pytest_ok(64, "7.88"), desc="Full suite", secs=9.0)
    s.stop("Fixed the refresh race in app/services/tokens.py: rotate_refresh locks the token row (SELECT ... FOR UPDATE) "
           "so parallel refreshes serialise, and a token revoked less than 10 s ago by rotation (it has replaced_by_id) "
           "re-issues its successor instead of triggering reuse detection. Older or unrelated reuse still revokes the "
           "family. New column refresh_tokens.replaced_by_id with an Alembic migration; concurrency test added.")
    s.prompt("commit")
    checks(s, "python", [0, 2], pkg="app", n=38)
    commit(s, "Refresh rotation: row lock + 10s grace for parallel tabs", ["app/services/tokens.py", "app/models.py",
           "migrations/versions/7d1c9e2f4a60_refresh_tokens_replaced_by_id.py", "tests/test_refresh_race.py"], "5d6a0f3", 48, 4)
    s.stop("Committed as 5d6a0f3.")
    s.end()

    # ---- s2: bcrypt -> argon2
    s = h.session("2026-05-08T14:22:37Z", mode="acceptEdits")
    e_p_argon = s.prompt("Security review: move password hashing from bcrypt to argon2id (OWASP recommendation, and "
                         "bcrypt silently truncates at 72 bytes which bit us with passphrases). Existing hashes must keep "
                         "working and get upgraded on the next successful login.")
    orient(s)
    s.read("app/security/passwords.py", PASSWORDS_PY)
    s.bash("pip install 'argon2-cffi==23.1.0' && pip uninstall -y passlib bcrypt", "Successfully installed argon2-cffi-23.1.0 argon2-cffi-bindings-21.2.0\n"
           "Successfully uninstalled passlib-1.7.4\nSuccessfully uninstalled bcrypt-4.1.3\n", desc="Swap libraries", secs=6.0)
    e_argon = s.write("app/security/passwords.py", """import bcrypt_legacy
from argon2 import PasswordHasher
from argon2.exceptions import VerifyMismatchError

# argon2id, OWASP 2025 minimums: 19 MiB memory, 2 iterations, 1 lane.
_ph = PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)


def hash_password(plain: str) -> str:
    return _ph.hash(plain)


def verify_password(plain: str, stored: str) -> tuple[bool, str | None]:
    \"\"\"Returns (ok, new_hash). new_hash is set when the stored hash should be replaced.\"\"\"
    if stored.startswith("$2"):  # legacy bcrypt
        ok = bcrypt_legacy.checkpw(plain.encode()[:72], stored.encode())
        return ok, (_ph.hash(plain) if ok else None)
    try:
        _ph.verify(stored, plain)
    except VerifyMismatchError:
        return False, None
    return True, (_ph.hash(plain) if _ph.check_needs_rehash(stored) else None)
""")
    e_argon_err = s.bash("pytest tests/test_passwords.py -q", "", code=2, stderr=(
        "ImportError while importing test module '/home/dev/src/auth-service/tests/test_passwords.py'.\n"
        "tests/test_passwords.py:3: in <module>\n    from app.security.passwords import hash_password, verify_password\n"
        "app/security/passwords.py:1: in <module>\n    import bcrypt_legacy\nE   ModuleNotFoundError: No module named 'bcrypt_legacy'\n"
        "1 error in 0.41s\n"), desc="Password tests", secs=2.0)
    s.edit("app/security/passwords.py", "import bcrypt_legacy\n", "import bcrypt as bcrypt_legacy  # only to verify old $2b$ hashes\n")
    s.bash("pip install 'bcrypt==4.1.3' && pytest tests/test_passwords.py -q", "Successfully installed bcrypt-4.1.3\n" + pytest_ok(6, "1.02"),
           desc="Keep bcrypt for verification only; tests", secs=5.0)
    s.grep("verify_password\\(", "app/api/auth.py:31:    if user is None or not verify_password(body.password, user.password_hash):\n", path="app")
    h.seed("app/api/auth.py", h.files["app/api/auth.py"] + """
@router.post("/login")
def login(body: LoginIn, db: Session = Depends(get_db)):
    user = find_user(db, body.email)
    if user is None or not verify_password(body.password, user.password_hash):
        raise HTTPException(401)
    return issue_session(db, user)
""")
    e_rehash = s.edit("app/api/auth.py", """    if user is None or not verify_password(body.password, user.password_hash):
        raise HTTPException(401)
    return issue_session(db, user)""", """    ok, new_hash = verify_password(body.password, user.password_hash) if user else (False, None)
    if not ok:
        raise HTTPException(401)
    if new_hash:  # bcrypt -> argon2id on the next successful login
        user.password_hash = new_hash
        db.commit()
    return issue_session(db, user)""")
    s.bash("pytest -q", pytest_ok(69, "8.12"), desc="Full suite", secs=9.0)
    e_dec_argon = s.stop("Passwords are hashed with argon2id (argon2-cffi, time_cost=2, memory 19 MiB). Old $2b$ bcrypt "
                         "hashes still verify through the bcrypt package, and login replaces them with an argon2id hash on "
                         "the next successful login (also when argon2 parameters change, via check_needs_rehash). passlib "
                         "is gone; bcrypt stays only for verifying legacy hashes.")
    s.prompt("commit")
    commit(s, "Passwords: argon2id with rehash-on-login from bcrypt", ["app/security/passwords.py", "app/api/auth.py", "requirements.txt",
           "tests/test_passwords.py"], "e3c7b94", 41, 12)
    s.stop("Committed as e3c7b94.")
    s.end()

    # ---- s3: login limit
    s = h.session("2026-05-13T10:40:02Z", mode="acceptEdits")
    s.prompt("Credential stuffing last night. We only rate limit per account. Keep the 5 failures per 15 minutes per "
             "(account, IP), and add a per-IP limit across accounts: 30 failures per 15 minutes.")
    orient(s)
    s.read("app/security/limits.py", LIMITS_PY)
    e_limits1 = s.edit("app/security/limits.py", """# Failed logins per (account, IP) before we answer 429.
LOGIN_ATTEMPTS = SlidingWindow(limit=5, window_seconds=15 * 60)""", """# Failed logins per (account, IP) before we answer 429.
LOGIN_ATTEMPTS = SlidingWindow(limit=5, window_seconds=15 * 60)

# Failed logins per IP across all accounts (credential stuffing).
LOGIN_ATTEMPTS_PER_IP = SlidingWindow(limit=30, window_seconds=15 * 60)""")
    s.read("app/api/auth.py")
    s.edit("app/api/auth.py", """    ok, new_hash = verify_password(body.password, user.password_hash) if user else (False, None)
    if not ok:
        raise HTTPException(401)""", """    ip = request.client.host
    if LOGIN_ATTEMPTS_PER_IP.exceeded(ip) or LOGIN_ATTEMPTS.exceeded((body.email, ip)):
        raise HTTPException(429, headers={"Retry-After": "900"})
    ok, new_hash = verify_password(body.password, user.password_hash) if user else (False, None)
    if not ok:
        LOGIN_ATTEMPTS.hit((body.email, ip))
        LOGIN_ATTEMPTS_PER_IP.hit(ip)
        raise HTTPException(401)""")
    s.bash("pytest tests/test_login_limits.py -q", pytest_ok(5, "1.44"), desc="Limit tests")
    s.stop("Login now checks two sliding windows before verifying the password: 5 failures per 15 min per (account, "
           "IP) as before, and a new 30 failures per 15 min per IP across accounts. Both answer 429 with Retry-After: 900.")
    s.prompt("commit")
    commit(s, "Per-IP failed login limit (30/15min)", ["app/security/limits.py", "app/api/auth.py", "tests/test_login_limits.py"], "0b8d2e5", 24, 2)
    s.stop("Committed as 0b8d2e5.")
    s.end()

    # ---- s4: pool leak
    s = h.session("2026-05-20T16:12:45Z", mode="acceptEdits")
    s.prompt("Under load the service starts answering 500 after a few minutes. Sentry: 'QueuePool limit of size 5 "
             "overflow 10 reached, connection timed out, timeout 30.00'. Find the leak.")
    orient(s)
    e_pool_err = s.bash("locust -f loadtests/login.py --headless -u 200 -r 50 -t 2m --host http://localhost:8000 2>&1 | grep -m2 -E 'QueuePool|Failures'",
                        "sqlalchemy.exc.TimeoutError: QueuePool limit of size 5 overflow 10 reached, connection timed out, timeout 30.00 "
                        "(Background on this error at: https://sqlalche.me/e/20/3o7r)\n Aggregated   POST /login   failures 1412 (38.2%)\n",
                        desc="Reproduce with locust", secs=125.0)
    s.read("app/db.py", DB_PY)
    e_poolfix = s.edit("app/db.py", """def get_db():
    db = SessionLocal()
    return db""", """def get_db():
    # A FastAPI dependency with yield: the session is closed after the response, even on errors.
    db = SessionLocal()
    try:
        yield db
    finally:
        db.close()""")
    s.bash("locust -f loadtests/login.py --headless -u 200 -r 50 -t 2m --host http://localhost:8000 2>&1 | grep -E 'Aggregated'",
           " Aggregated   POST /login   failures 0 (0.00%)\n", desc="Load test again", secs=125.0)
    s.stop("get_db returned a session and never closed it, so every request checked a connection out of the pool "
           "and left it for the garbage collector; under load the 5+10 connections ran out. get_db is now a yield "
           "dependency that closes the session in finally. 2 minutes at 200 users: 0 failures.")
    s.prompt("commit")
    commit(s, "get_db: close the session after each request (pool exhaustion)", ["app/db.py"], "8a1e4c7", 5, 2)
    s.stop("Committed as 8a1e4c7.")
    s.end()

    # ---- s5: limits raised
    s = h.session("2026-05-27T09:08:30Z", mode="acceptEdits")
    s.prompt("Support is flooded: whole offices behind one NAT hit the per-IP login limit every Monday morning. Raise "
             "per-IP to 100 per 15 minutes, and per account to 10, product signed off.")
    orient(s)
    s.read("app/security/limits.py")
    e_limits2 = s.multiedit("app/security/limits.py", [
        ("LOGIN_ATTEMPTS = SlidingWindow(limit=5, window_seconds=15 * 60)", "LOGIN_ATTEMPTS = SlidingWindow(limit=10, window_seconds=15 * 60)"),
        ("LOGIN_ATTEMPTS_PER_IP = SlidingWindow(limit=30, window_seconds=15 * 60)",
         "LOGIN_ATTEMPTS_PER_IP = SlidingWindow(limit=100, window_seconds=15 * 60)  # offices behind one NAT"),
    ])
    s.read("tests/test_login_limits.py", """def test_sixth_failure_is_429(client, user):
    for _ in range(5):
        client.post("/login", json={"email": user.email, "password": "wrong"})
    assert client.post("/login", json={"email": user.email, "password": "wrong"}).status_code == 429
""")
    s.edit("tests/test_login_limits.py", """def test_sixth_failure_is_429(client, user):
    for _ in range(5):""", """def test_eleventh_failure_is_429(client, user):
    for _ in range(10):""")
    s.bash("pytest tests/test_login_limits.py -q", pytest_ok(5, "2.10"), desc="Limit tests")
    s.stop("Per-account limit is 10 failures per 15 min and per-IP 100 per 15 min; tests updated.")
    s.prompt("commit and deploy")
    commit(s, "Login limits: 10/account, 100/IP per 15 min", ["app/security/limits.py", "tests/test_login_limits.py"], "f29c6b1", 3, 3)
    s.bash("git push origin main && gh workflow run deploy.yml -f env=prod", "", stderr="To github.com:acme/auth-service.git\n   8a1e4c7..f29c6b1  main -> main\n",
           desc="Push and deploy")
    s.stop("Committed f29c6b1, pushed, and started the prod deploy.")
    s.end()

    h.q("fix_location", "Where did we fix users getting logged out when two tabs refresh at once?", "login session race",
        "app/services/tokens.py rotate_refresh: SELECT FOR UPDATE plus a 10 s grace that re-issues the successor.",
        ["app/services/tokens.py"], [e_race])
    h.q("failed_command", "Why did the concurrent refresh test fail at first?", "refresh race test",
        "UndefinedColumn: refresh_tokens.replaced_by_id did not exist yet (migration not applied to the test DB).",
        ["replaced_by_id does not exist"], [e_race_fail])
    h.q("decision", "Why did we switch password hashing to argon2?", "password hashing argon2",
        "Security review: argon2id is the OWASP recommendation and bcrypt silently truncates at 72 bytes.",
        ["72 bytes"], [e_p_argon])
    h.q("decision", "How are existing bcrypt password hashes handled after the switch?", "old bcrypt hashes",
        "They still verify via the bcrypt package and are replaced with argon2id on the next successful login.",
        ["next successful login"], [e_dec_argon])
    h.q("knowledge_update", "What are the failed login limits now?", "login attempt limits",
        "10 per account and 100 per IP per 15 minutes (were 5 and 30).", ["limit=100", "limit=10"], [e_limits2])
    h.q("temporal", "What per-IP login limit did we first add after the credential stuffing?", "per ip login limit",
        "30 failures per 15 minutes per IP.", ["limit=30"], [e_limits1])
    h.q("fix_location", "What caused the QueuePool exhaustion and where did we fix it?", "connection pool exhausted",
        "app/db.py get_db never closed the session; now a yield dependency with db.close() in finally.",
        ["app/db.py"], [e_poolfix])
    h.q("failed_command", "What error did the load test show before the pool fix?", "load test error",
        "sqlalchemy TimeoutError: QueuePool limit of size 5 overflow 10 reached (38% failures).", ["QueuePool limit"], [e_pool_err])
    h.q("failed_command", "What import error did the password tests hit during the argon2 change?", "password test import",
        "ModuleNotFoundError: No module named 'bcrypt_legacy'.", ["bcrypt_legacy"], [e_argon_err])
    h.q("file_history", "Which files changed for the argon2 migration?", "argon2 migration",
        "app/security/passwords.py (argon2id, legacy bcrypt verify) and app/api/auth.py (rehash on login).",
        ["app/security/passwords.py", "app/api/auth.py"], [e_argon, e_rehash])
