from ._common import checks, commit, diffstat, orient, tree

ACCOUNT = """package com.acme.ledger.domain;

import jakarta.persistence.*;
import java.math.BigDecimal;

@Entity
@Table(name = "accounts")
public class Account {
    @Id
    private UUID id;

    @Column(nullable = false)
    private BigDecimal balance;

    public void debit(BigDecimal amount) {
        if (balance.compareTo(amount) < 0) throw new InsufficientFundsException(id, amount);
        balance = balance.subtract(amount);
    }

    public void credit(BigDecimal amount) {
        balance = balance.add(amount);
    }
}
"""

TRANSFER_SVC = """package com.acme.ledger.service;

@Service
public class TransferService {
    private final AccountRepository accounts;
    private final EntryRepository entries;

    @Transactional
    public Transfer transfer(UUID from, UUID to, BigDecimal amount) {
        Account a = accounts.findById(from).orElseThrow();
        Account b = accounts.findById(to).orElseThrow();
        a.debit(amount);
        b.credit(amount);
        return entries.recordTransfer(a, b, amount);
    }
}
"""

FX_CLIENT = """package com.acme.ledger.fx;

@Component
public class FxRatesClient {
    private final RestTemplate rest = new RestTemplate();

    @Value("${fx.base-url}")
    private String baseUrl;

    public BigDecimal rate(String from, String to) {
        FxQuote q = rest.getForObject(baseUrl + "/v1/rates/{from}/{to}", FxQuote.class, from, to);
        return q.rate();
    }
}
"""

CONVERTER = """package com.acme.ledger.fx;

import java.math.BigDecimal;
import java.math.RoundingMode;

public final class FxConverter {
    public static BigDecimal convert(BigDecimal amount, BigDecimal rate, int scale) {
        return amount.multiply(rate).setScale(scale, RoundingMode.HALF_UP);
    }
}
"""


def build(ds):
    h = ds.history("h16", "codex", "/home/dev/src/ledger-service",
                   "Spring Boot ledger service: lost updates on concurrent transfers, a Flyway checksum mismatch, "
                   "RestTemplate replaced by WebClient for FX rates, and banker's rounding for conversions.",
                   start="2026-03-16T08:00:00Z", model="gpt-5.5-codex")
    h.commits = [("8c3a0b1", "Transfers between accounts"), ("f4e1d27", "V6 entries.idempotency_key"), ("1a9b5c8", "FX conversion on cross-currency transfers")]

    # ---- s1 (notify): lost updates
    s = h.session("2026-03-16T10:14:37Z", notify=True)
    s.prompt("Reconciliation found accounts whose balance doesn't match the sum of entries. Load test with 50 "
             "concurrent transfers on the same account reproduces it. Classic lost update? Fix it properly.")
    orient(s)
    tree(s, ["src/main/java/com/acme/ledger/domain/Account.java", "src/main/java/com/acme/ledger/service/TransferService.java",
             "src/main/java/com/acme/ledger/fx/FxRatesClient.java", "src/main/java/com/acme/ledger/fx/FxConverter.java",
             "src/main/resources/db/migration/V6__entries_idempotency_key.sql", "src/test/java/com/acme/ledger/TransferConcurrencyIT.java"], "src")
    e_lost = s.bash("./gradlew integrationTest --tests '*TransferConcurrencyIT*' 2>&1 | tail -6", "TransferConcurrencyIT > fiftyParallelTransfersKeepBalance() FAILED\n"
                    "    org.opentest4j.AssertionFailedError: expected: <500.00> but was: <930.00>\n        at com.acme.ledger.TransferConcurrencyIT.fiftyParallelTransfersKeepBalance(TransferConcurrencyIT.java:58)\n\n"
                    "1 test completed, 1 failed\nBUILD FAILED in 41s\n", secs=42.0)
    s.read("src/main/java/com/acme/ledger/domain/Account.java", ACCOUNT)
    s.read("src/main/java/com/acme/ledger/service/TransferService.java", TRANSFER_SVC)
    e_version = s.edit("src/main/java/com/acme/ledger/domain/Account.java", """    @Column(nullable = false)
    private BigDecimal balance;
""", """    @Column(nullable = false)
    private BigDecimal balance;

    /** Optimistic locking: a concurrent update of the same account fails instead of overwriting. */
    @Version
    private long version;
""")
    s.write("src/main/resources/db/migration/V7__accounts_version.sql", "ALTER TABLE accounts ADD COLUMN version BIGINT NOT NULL DEFAULT 0;\n")
    e_retryable = s.edit("src/main/java/com/acme/ledger/service/TransferService.java", """    @Transactional
    public Transfer transfer(UUID from, UUID to, BigDecimal amount) {""", """    @Retryable(retryFor = ObjectOptimisticLockingFailureException.class, maxAttempts = 3,
               backoff = @Backoff(delay = 20, multiplier = 2, random = true))
    @Transactional
    public Transfer transfer(UUID from, UUID to, BigDecimal amount) {""")
    s.bash("./gradlew integrationTest --tests '*TransferConcurrencyIT*' 2>&1 | tail -3", "TransferConcurrencyIT > fiftyParallelTransfersKeepBalance() PASSED\n\nBUILD SUCCESSFUL in 44s\n", secs=45.0)
    s.stop("Two transactions read the same Account, both debited in memory and the last commit overwrote the "
           "first. Account now has a @Version column (Flyway V7__accounts_version.sql), so the second commit fails with "
           "ObjectOptimisticLockingFailureException, and TransferService.transfer is @Retryable up to 3 attempts with "
           "jittered backoff. The 50-way concurrency IT passes.")
    s.prompt("commit")
    commit(s, "Optimistic locking on accounts + retry transfers", ["src/main/java/com/acme/ledger/domain/Account.java",
           "src/main/java/com/acme/ledger/service/TransferService.java", "src/main/resources/db/migration/V7__accounts_version.sql",
           "build.gradle.kts"], "2d6f8e0", 14, 0)
    s.stop("Committed as 2d6f8e0.")

    # ---- s2: flyway checksum mismatch
    s = h.session("2026-03-19T15:30:02Z")
    s.prompt("Staging deploy failed on startup with a Flyway validate error about V6. Nobody should have touched V6...")
    orient(s)
    e_checksum = s.bash("kubectl -n ledger-staging logs deploy/ledger-service --previous | grep -A3 FlywayValidateException",
                        "org.flywaydb.core.api.exception.FlywayValidateException: Validate failed: Migrations have failed validation\n"
                        "Migration checksum mismatch for migration version 6\n-> Applied to database : 1184530127\n-> Resolved locally    : -902211456\n", secs=2.0)
    s.bash("git log --oneline -3 -- src/main/resources/db/migration/V6__entries_idempotency_key.sql",
           "b0c4e92 Tidy SQL formatting\nf4e1d27 V6 entries.idempotency_key\n", secs=1.0)
    s.bash("git show b0c4e92 --stat && git show b0c4e92 -- src/main/resources/db/migration/V6__entries_idempotency_key.sql | tail -6",
           "commit b0c4e92\n    Tidy SQL formatting\n src/main/resources/db/migration/V6__entries_idempotency_key.sql | 4 ++--\n"
           "-alter table entries add column idempotency_key varchar(64);\n-create unique index entries_idem_uq on entries(idempotency_key);\n"
           "+ALTER TABLE entries ADD COLUMN idempotency_key VARCHAR(64);\n+CREATE UNIQUE INDEX entries_idem_uq ON entries (idempotency_key);\n", secs=1.0)
    e_restore = s.bash("git checkout f4e1d27 -- src/main/resources/db/migration/V6__entries_idempotency_key.sql && git diff --cached --stat",
                       " src/main/resources/db/migration/V6__entries_idempotency_key.sql | 4 ++--\n 1 file changed, 2 insertions(+), 2 deletions(-)\n", secs=1.0)
    s.read("build.gradle.kts", """tasks.named<Test>("test") {
    useJUnitPlatform()
}
""")
    s.edit("build.gradle.kts", """tasks.named<Test>("test") {
    useJUnitPlatform()
}""", """tasks.named<Test>("test") {
    useJUnitPlatform()
}

// Applied migrations are immutable: fail the build if one changes after it was merged.
tasks.register<Exec>("checkMigrationsImmutable") {
    commandLine("scripts/check-migrations-immutable.sh", "origin/main")
}
tasks.named("check") { dependsOn("checkMigrationsImmutable") }""")
    s.write("scripts/check-migrations-immutable.sh", """#!/usr/bin/env bash
# Fails if any Flyway migration that exists on the base branch was modified.
set -euo pipefail
base="${1:-origin/main}"
changed=$(git diff --name-only --diff-filter=M "$base"...HEAD -- 'src/main/resources/db/migration/V*.sql')
if [ -n "$changed" ]; then
  echo "Applied migrations must not change (add a new V<n> instead):"; echo "$changed"; exit 1
fi
""")
    e_dec_flyway = s.stop("A 'Tidy SQL formatting' commit (b0c4e92) upper-cased V6, which changes its checksum, so Flyway "
                          "refused to start on databases where V6 was already applied. I restored V6 byte-for-byte from "
                          "f4e1d27 rather than running `flyway repair`, which would paper over it on each environment. Added "
                          "a checkMigrationsImmutable Gradle task (scripts/check-migrations-immutable.sh) wired into check.")
    s.prompt("commit")
    s.bash("chmod +x scripts/check-migrations-immutable.sh && ./gradlew check -x integrationTest 2>&1 | tail -2", "\nBUILD SUCCESSFUL in 1m 2s\n", secs=63.0)
    commit(s, "Restore V6 migration; forbid editing applied migrations", ["src/main/resources/db/migration/V6__entries_idempotency_key.sql",
           "build.gradle.kts", "scripts/check-migrations-immutable.sh"], "6e1b3a9", 17, 2)
    s.stop("Committed as 6e1b3a9.")

    # ---- s3: RestTemplate -> WebClient
    s = h.session("2026-03-25T09:48:19Z")
    e_p_webclient = s.prompt("FX rates calls hang for minutes when the provider is slow: RestTemplate has no timeouts "
                             "configured. RestTemplate is in maintenance mode anyway, move FxRatesClient to WebClient with "
                             "a 2s response timeout and one retry, and cache rates for 60s.")
    orient(s)
    s.read("src/main/java/com/acme/ledger/fx/FxRatesClient.java", FX_CLIENT)
    s.bash("rg -n 'RestTemplate' src/main", "src/main/java/com/acme/ledger/fx/FxRatesClient.java:5:    private final RestTemplate rest = new RestTemplate();\n", secs=1.0)
    e_webclient = s.write("src/main/java/com/acme/ledger/fx/FxRatesClient.java", """package com.acme.ledger.fx;

@Component
public class FxRatesClient {
    private final WebClient web;

    public FxRatesClient(WebClient.Builder builder, @Value("${fx.base-url}") String baseUrl) {
        HttpClient http = HttpClient.create()
            .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 1_000)
            .responseTimeout(Duration.ofSeconds(2));
        this.web = builder.baseUrl(baseUrl).clientConnector(new ReactorClientHttpConnector(http)).build();
    }

    @Cacheable(cacheNames = "fx-rates", key = "#from + '-' + #to")
    public BigDecimal rate(String from, String to) {
        return web.get().uri("/v1/rates/{from}/{to}", from, to)
            .retrieve()
            .bodyToMono(FxQuote.class)
            .retryWhen(Retry.backoff(1, Duration.ofMillis(200)).filter(FxRatesClient::isTransient))
            .map(FxQuote::rate)
            .block(Duration.ofSeconds(5));
    }

    private static boolean isTransient(Throwable t) {
        return t instanceof TimeoutException || t instanceof WebClientResponseException.ServiceUnavailable;
    }
}
""")
    s.read("src/main/resources/application.yml", """spring:
  application:
    name: ledger-service
fx:
  base-url: https://fx.internal.acme.net
""")
    s.edit("src/main/resources/application.yml", """spring:
  application:
    name: ledger-service""", """spring:
  application:
    name: ledger-service
  cache:
    cache-names: fx-rates
    caffeine:
      spec: maximumSize=500,expireAfterWrite=60s""")
    e_webflux = s.bash("./gradlew test --tests '*FxRatesClientTest*' 2>&1 | tail -6", "", code=1, stderr=(
        "FxRatesClientTest > initializationError FAILED\n    org.springframework.beans.factory.UnsatisfiedDependencyException: Error creating bean with name "
        "'fxRatesClient': Unsatisfied dependency expressed through constructor parameter 0: No qualifying bean of type "
        "'org.springframework.web.reactive.function.client.WebClient$Builder' available\n\nBUILD FAILED in 19s\n"), secs=20.0)
    s.bash("sed -i 's#implementation(\"org.springframework.boot:spring-boot-starter-web\")#&\\n    implementation(\"org.springframework.boot:spring-boot-starter-webflux\")\\n"
           "    implementation(\"org.springframework.boot:spring-boot-starter-cache\")\\n    implementation(\"com.github.ben-manes.caffeine:caffeine\")#' build.gradle.kts && "
           "./gradlew test --tests '*FxRatesClientTest*' 2>&1 | tail -4", "FxRatesClientTest > timesOutAfterTwoSeconds() PASSED\nFxRatesClientTest > retriesOnce503() PASSED\n"
           "FxRatesClientTest > cachesFor60s() PASSED\n\nBUILD SUCCESSFUL in 24s\n", secs=25.0)
    s.stop("FxRatesClient uses WebClient on Reactor Netty: 1 s connect timeout, 2 s response timeout, one retry after "
           "200 ms on timeouts or 503, and rates cached 60 s in a Caffeine 'fx-rates' cache. The first test run failed "
           "because no WebClient.Builder bean existed; added spring-boot-starter-webflux (the app stays servlet-based, "
           "webflux is only the client) plus the cache starter and caffeine.")
    s.prompt("commit")
    diffstat(s, [("build.gradle.kts", 3, 0), ("src/main/java/com/acme/ledger/fx/FxRatesClient.java", 24, 8), ("src/main/resources/application.yml", 5, 0)])
    commit(s, "FxRatesClient: WebClient with timeouts, one retry, 60s cache", ["build.gradle.kts", "src/main/java/com/acme/ledger/fx/FxRatesClient.java",
           "src/main/resources/application.yml", "src/test/java/com/acme/ledger/fx/FxRatesClientTest.java"], "a5c0d3f", 71, 8)
    s.stop("Committed as a5c0d3f.")

    # ---- s4: rounding
    s = h.session("2026-04-02T11:02:50Z")
    e_p_round = s.prompt("Finance found a systematic +0.5 cent drift on EUR->USD conversions over a month (about 1,900 "
                         "USD on 380k conversions). We round HALF_UP everywhere. Switch currency conversion to banker's "
                         "rounding (HALF_EVEN) like the bank does, only for FX, not for fees.")
    orient(s)
    s.read("src/main/java/com/acme/ledger/fx/FxConverter.java", CONVERTER)
    s.bash("rg -n 'RoundingMode' src/main", "src/main/java/com/acme/ledger/fx/FxConverter.java:10:        return amount.multiply(rate).setScale(scale, RoundingMode.HALF_UP);\n"
           "src/main/java/com/acme/ledger/fees/FeeCalculator.java:22:        return base.multiply(pct).setScale(2, RoundingMode.HALF_UP);\n", secs=1.0)
    e_halfeven = s.edit("src/main/java/com/acme/ledger/fx/FxConverter.java", """        return amount.multiply(rate).setScale(scale, RoundingMode.HALF_UP);""",
                        """        // HALF_EVEN (banker's rounding) like our settlement bank: HALF_UP biased every .5 upwards,
        // which added up to a measurable drift over a month of conversions. Fees keep HALF_UP.
        return amount.multiply(rate).setScale(scale, RoundingMode.HALF_EVEN);""")
    s.write("src/test/java/com/acme/ledger/fx/FxConverterTest.java", """class FxConverterTest {
    @Test void roundsHalfToEven() {
        assertEquals(new BigDecimal("1.12"), FxConverter.convert(new BigDecimal("1.00"), new BigDecimal("1.125"), 2));
        assertEquals(new BigDecimal("1.14"), FxConverter.convert(new BigDecimal("1.00"), new BigDecimal("1.135"), 2));
    }
}
""")
    e_roundfail = s.bash("./gradlew test 2>&1 | tail -6", "", code=1, stderr=(
        "TransferFxTest > crossCurrencyTransferCreditsConvertedAmount() FAILED\n    org.opentest4j.AssertionFailedError: expected: <270.23> but was: <270.22>\n"
        "        at com.acme.ledger.TransferFxTest.crossCurrencyTransferCreditsConvertedAmount(TransferFxTest.java:41)\n\n112 tests completed, 1 failed\nBUILD FAILED in 51s\n"), secs=52.0)
    s.bash("sed -n '38,41p' src/test/java/com/acme/ledger/TransferFxTest.java", "    // 250.00 EUR at 1.0809 = 270.225\n"
           "    transfer(eurAccount, usdAccount, new BigDecimal(\"250.00\"));\n    assertEquals(new BigDecimal(\"270.23\"), credited(usdAccount));\n", secs=1.0)
    s.bash("sed -i 's/= 270.225$/= 270.225, an exact tie: HALF_EVEN gives 270.22/; s/new BigDecimal(\"270.23\")/new BigDecimal(\"270.22\")/' "
           "src/test/java/com/acme/ledger/TransferFxTest.java && ./gradlew test 2>&1 | tail -2", "\nBUILD SUCCESSFUL in 49s\n", secs=50.0)
    s.stop("FxConverter.convert now uses RoundingMode.HALF_EVEN; FeeCalculator keeps HALF_UP. The one failing test, "
           "TransferFxTest, converts 250.00 EUR at 1.0809 = 270.225, an exact tie, so the expected credit changes from "
           "270.23 to 270.22 by design; updated the expectation.")
    s.prompt("commit")
    checks(s, "java")
    commit(s, "FX conversion rounds HALF_EVEN (banker's rounding)", ["src/main/java/com/acme/ledger/fx/FxConverter.java",
           "src/test/java/com/acme/ledger/fx/FxConverterTest.java", "src/test/java/com/acme/ledger/TransferFxTest.java"], "c7e29b4", 14, 3)
    s.stop("Committed as c7e29b4.")

    h.q("fix_location", "Where did we fix balances drifting from the sum of entries under concurrent transfers?", "lost update balance",
        "Account.java got a @Version column (V7 migration) and TransferService.transfer is @Retryable on optimistic lock failures.",
        ["Account.java", "@Version"], [e_version, e_retryable])
    h.q("failed_command", "What did the concurrency integration test show before the locking fix?", "concurrency test failure",
        "fiftyParallelTransfersKeepBalance: expected <500.00> but was <930.00>.", ["fiftyParallelTransfersKeepBalance"], [e_lost])
    h.q("failed_command", "Why did staging fail to start after the SQL tidy-up?", "staging flyway error",
        "FlywayValidateException: Migration checksum mismatch for migration version 6.", ["checksum mismatch"], [e_checksum])
    h.q("decision", "Why didn't we run flyway repair for the V6 checksum problem?", "flyway repair",
        "We restored V6 byte-for-byte from git instead; repair would paper over it per environment. Added an immutability check.",
        ["flyway repair"], [e_dec_flyway])
    h.q("decision", "Why did we move the FX client off RestTemplate?", "fx client resttemplate",
        "Calls hung for minutes with no timeouts and RestTemplate is in maintenance mode; WebClient with 2 s timeout, one retry, 60 s cache.",
        ["maintenance mode"], [e_p_webclient])
    h.q("failed_command", "What error did the FX client test hit after switching to WebClient?", "webclient bean error",
        "No qualifying bean of type WebClient$Builder (spring-boot-starter-webflux missing).", ["No qualifying bean"], [e_webflux])
    h.q("fix_location", "Where did we change the rounding for currency conversions?", "currency rounding",
        "src/main/java/com/acme/ledger/fx/FxConverter.java: RoundingMode.HALF_EVEN (fees stay HALF_UP).",
        ["FxConverter.java", "HALF_EVEN"], [e_halfeven])
    h.q("decision", "Why did we switch FX conversion to banker's rounding?", "bankers rounding",
        "HALF_UP caused a systematic +0.5 cent drift (~1,900 USD on 380k conversions); the bank uses HALF_EVEN.",
        ["drift"], [e_p_round])
    h.q("temporal", "Which test broke right after we changed the rounding mode?", "rounding test broke",
        "TransferFxTest.crossCurrencyTransferCreditsConvertedAmount: expected 270.23 but was 270.22 (an exact tie).", ["expected: <270.23>"], [e_roundfail])
    h.q("file_history", "What did we change in the V6 migration file?", "v6 migration file",
        "Restored V6__entries_idempotency_key.sql from f4e1d27 after a formatting commit changed its checksum.",
        ["V6__entries_idempotency_key.sql"], [e_restore])
