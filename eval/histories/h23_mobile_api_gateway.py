from ._common import commit, orient

MAIN_TS = """import { NestFactory } from "@nestjs/core";
import { AppModule } from "./app.module";

async function bootstrap() {
  const app = await NestFactory.create(AppModule);
  app.enableCors({ origin: ["https://app.acme.dev"] });
  await app.listen(process.env.PORT ?? 3000);
}
bootstrap();
"""

APP_MODULE = """import { Module } from "@nestjs/common";
import { APP_GUARD } from "@nestjs/core";
import { ThrottlerGuard, ThrottlerModule } from "@nestjs/throttler";
import { UsersModule } from "./users/users.module";

@Module({
  imports: [
    ThrottlerModule.forRoot([{ ttl: 60_000, limit: 100 }]),
    UsersModule,
  ],
  providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
})
export class AppModule {}
"""

JWT_STRATEGY = """import { Injectable } from "@nestjs/common";
import { PassportStrategy } from "@nestjs/passport";
import { ExtractJwt, Strategy } from "passport-jwt";

@Injectable()
export class JwtStrategy extends PassportStrategy(Strategy) {
  constructor() {
    super({
      jwtFromRequest: ExtractJwt.fromAuthHeaderAsBearerToken(),
      secretOrKey: process.env.JWT_SHARED_KEY,
      algorithms: ["HS256"],
    });
  }

  validate(payload: { sub: string; scope: string[] }) {
    return { userId: payload.sub, scopes: payload.scope };
  }
}
"""


def build(ds):
    h = ds.history("h23", "cursor", "/home/dev/src/mobile-api-gateway",
                   "NestJS gateway for the mobile apps: CORS for the iOS webview, throttling limits raised, DTO "
                   "whitelisting breaking an e2e test, and JWT verification moved from HS256 to RS256 with JWKS.",
                   start="2026-02-23T08:00:00Z", model="claude-4.5-sonnet")
    h.commits = [("d0b3a71", "Users module"), ("7ce41f9", "Throttle all routes"), ("25a8e06", "Nest 11")]

    # ---- s1: CORS for webview
    s = h.session("2026-02-23T10:44:12Z")
    s.prompt("The iOS app's embedded checkout webview gets CORS errors calling /v1/cart. Its origin is "
             "capacitor://localhost. Preflight fails.", attachments=["src/main.ts"])
    orient(s)
    s.mcp("github", "get_issue", {"owner": "acme", "repo": "mobile-app", "issue_number": 1377},
          '{"number": 1377, "title": "Checkout webview: blocked by CORS policy on /v1/cart", "state": "open", '
          '"body": "iOS 3.14.0 (Capacitor 6). Console: Access to fetch at https://api.acme.dev/v1/cart from origin capacitor://localhost has been blocked by CORS policy."}')
    s.read("src/main.ts", MAIN_TS)
    e_preflight = s.bash("curl -s -o /dev/null -w '%{http_code}\\n' -X OPTIONS localhost:3000/v1/cart -H 'Origin: capacitor://localhost' "
                         "-H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: authorization,content-type' -D - | grep -i -E 'access-control|^HTTP'",
                         "HTTP/1.1 204 No Content\n204\n", secs=2.0)
    e_corsfix = s.edit("src/main.ts", """  app.enableCors({ origin: ["https://app.acme.dev"] });""", """  app.enableCors({
    // capacitor://localhost = the iOS webview; ionic://localhost = older builds still in the field
    origin: ["https://app.acme.dev", "capacitor://localhost", "ionic://localhost"],
    methods: ["GET", "POST", "PUT", "PATCH", "DELETE"],
    allowedHeaders: ["authorization", "content-type", "x-app-version"],
    maxAge: 600,
  });""")
    s.bash("npm run start:dev & sleep 6; curl -s -X OPTIONS localhost:3000/v1/cart -H 'Origin: capacitor://localhost' -H 'Access-Control-Request-Method: POST' -D - -o /dev/null | grep -i access-control-allow-origin",
           "Access-Control-Allow-Origin: capacitor://localhost\n", secs=9.0)
    s.stop("The preflight returned 204 without Access-Control-Allow-Origin because capacitor://localhost wasn't an allowed "
           "origin. enableCors now allows it (plus ionic://localhost for old builds), the methods and headers the app "
           "sends including x-app-version, and caches preflights for 10 minutes.")
    s.prompt("commit")
    commit(s, "CORS: allow the iOS webview origins", ["src/main.ts"], "a7f2c10", 7, 1)
    s.stop("Committed as a7f2c10.")
    s.end()

    # ---- s2: throttler 100 -> 300
    s = h.session("2026-02-26T16:03:29Z")
    e_p_throttle = s.prompt("Since the new home screen the app makes ~40 requests on launch and users behind carrier NAT "
                            "share IPs, so they hit 429 from the throttler at 100/min. Raise it to 300 per minute and "
                            "key it on the user id when authenticated instead of the IP.", attachments=["src/app.module.ts"])
    orient(s)
    s.read("src/app.module.ts", APP_MODULE)
    e_t300 = s.edit("src/app.module.ts", "    ThrottlerModule.forRoot([{ ttl: 60_000, limit: 100 }]),",
                    "    ThrottlerModule.forRoot([{ ttl: 60_000, limit: 300 }]),")
    s.write("src/common/user-throttler.guard.ts", """import { Injectable } from "@nestjs/common";
import { ThrottlerGuard } from "@nestjs/throttler";

/** Authenticated requests are limited per user, anonymous ones per IP (carrier NAT shares IPs). */
@Injectable()
export class UserThrottlerGuard extends ThrottlerGuard {
  protected async getTracker(req: Record<string, any>): Promise<string> {
    return req.user?.userId ? `user:${req.user.userId}` : `ip:${req.ips.length ? req.ips[0] : req.ip}`;
  }
}
""")
    e_guard = s.edit("src/app.module.ts", "  providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],",
                     "  providers: [{ provide: APP_GUARD, useClass: UserThrottlerGuard }],")
    s.edit("src/app.module.ts", 'import { ThrottlerGuard, ThrottlerModule } from "@nestjs/throttler";',
           'import { ThrottlerModule } from "@nestjs/throttler";\nimport { UserThrottlerGuard } from "./common/user-throttler.guard";')
    s.bash("npm run test -- throttler", "\n> mobile-api-gateway@3.2.0 test\n> jest throttler\n\nPASS src/common/user-throttler.guard.spec.ts\n"
           "  UserThrottlerGuard\n    \u2713 tracks authenticated users by id (6 ms)\n    \u2713 falls back to the first forwarded IP (2 ms)\n\n"
           "Tests:       2 passed, 2 total\n", secs=8.0)
    s.stop("Global throttle is 300 requests per 60 s, and UserThrottlerGuard keys the limit on user:<id> for "
           "authenticated requests and the first X-Forwarded-For IP otherwise, so users behind one carrier NAT no "
           "longer share a bucket.")
    s.prompt("commit")
    commit(s, "Throttle 300/min, per user when authenticated", ["src/app.module.ts", "src/common/user-throttler.guard.ts",
           "src/common/user-throttler.guard.spec.ts"], "c3e90b8", 31, 3)
    s.stop("Committed as c3e90b8.")
    s.end()

    # ---- s3: whitelist DTO
    s = h.session("2026-03-04T09:31:50Z")
    s.prompt("Security wants the global ValidationPipe with whitelist and forbidNonWhitelisted so unknown fields are "
             "rejected. Turn it on and fix whatever breaks.")
    orient(s)
    s.read("src/main.ts")
    e_pipe = s.edit("src/main.ts", "  const app = await NestFactory.create(AppModule);",
                    "  const app = await NestFactory.create(AppModule);\n"
                    "  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }));")
    s.edit("src/main.ts", 'import { NestFactory } from "@nestjs/core";', 'import { ValidationPipe } from "@nestjs/common";\nimport { NestFactory } from "@nestjs/core";')
    e_e2e = s.bash("npm run test:e2e 2>&1 | tail -12", "FAIL test/users.e2e-spec.ts\n  \u25cf PATCH /v1/users/me \u203a updates the profile\n\n"
                   "    expected 200 \"OK\", got 400 \"Bad Request\"\n\n    {\"message\":[\"property marketingOptIn should not exist\"],\"error\":\"Bad Request\",\"statusCode\":400}\n\n"
                   "Tests:       1 failed, 23 passed, 24 total\n", code=1, secs=30.0)
    s.read("src/users/dto/update-profile.dto.ts", """import { IsOptional, IsString, MaxLength } from "class-validator";

export class UpdateProfileDto {
  @IsOptional()
  @IsString()
  @MaxLength(80)
  displayName?: string;

  @IsOptional()
  @IsString()
  locale?: string;

  marketingOptIn?: boolean;
}
""")
    e_dto = s.edit("src/users/dto/update-profile.dto.ts", """  marketingOptIn?: boolean;""", """  // Had no decorator, so whitelist stripped/rejected it although the app sends it.
  @IsOptional()
  @IsBoolean()
  marketingOptIn?: boolean;""")
    s.edit("src/users/dto/update-profile.dto.ts", 'import { IsOptional, IsString, MaxLength } from "class-validator";',
           'import { IsBoolean, IsOptional, IsString, MaxLength } from "class-validator";')
    s.bash("npm run test:e2e 2>&1 | tail -3", "Test Suites: 6 passed, 6 total\nTests:       24 passed, 24 total\n", secs=30.0)
    s.stop("Enabled a global ValidationPipe with whitelist, forbidNonWhitelisted and transform. The one failure: "
           "UpdateProfileDto.marketingOptIn had no class-validator decorator, so whitelisting treated it as unknown "
           "('property marketingOptIn should not exist'); it now has @IsOptional() @IsBoolean(). All 24 e2e tests pass.")
    s.prompt("commit")
    commit(s, "Global ValidationPipe (whitelist); decorate marketingOptIn", ["src/main.ts", "src/users/dto/update-profile.dto.ts"], "f81d2c6", 7, 1)
    s.stop("Committed as f81d2c6.")
    s.end()

    # ---- s4: HS256 -> RS256
    s = h.session("2026-03-12T13:15:07Z")
    e_p_rs256 = s.prompt("The identity team is moving to RS256 tokens with keys published at "
                         "https://id.acme.dev/.well-known/jwks.json and will rotate keys. Switch our JWT strategy to "
                         "verify RS256 via JWKS; HS256 tokens must keep working until March 31.", attachments=["src/auth/jwt.strategy.ts"])
    orient(s)
    s.read("src/auth/jwt.strategy.ts", JWT_STRATEGY)
    s.web_search("passport-jwt jwks-rsa secretOrKeyProvider nestjs", [("jwks-rsa - npm", "https://www.npmjs.com/package/jwks-rsa"),
                 ("Passport strategy for JWKS", "https://github.com/auth0/node-jwks-rsa/blob/master/EXAMPLES.md")],
                 "Use jwks-rsa's passportJwtSecret({ jwksUri, cache: true, rateLimit: true }) as secretOrKeyProvider; set algorithms to ['RS256'].")
    s.bash("npm i jwks-rsa@3", "\nadded 7 packages, and audited 811 packages in 4s\n", secs=5.0)
    e_jwks = s.edit("src/auth/jwt.strategy.ts", """    super({
      jwtFromRequest: ExtractJwt.fromAuthHeaderAsBearerToken(),
      secretOrKey: process.env.JWT_SHARED_KEY,
      algorithms: ["HS256"],
    });""", """    const jwks = passportJwtSecret({
      jwksUri: "https://id.acme.dev/.well-known/jwks.json",
      cache: true, // keys are cached; an unknown kid triggers a refetch (rotation)
      rateLimit: true,
      jwksRequestsPerMinute: 10,
    });
    super({
      jwtFromRequest: ExtractJwt.fromAuthHeaderAsBearerToken(),
      // RS256 via JWKS; legacy HS256 with the shared key until 2026-03-31 (remove after).
      secretOrKeyProvider: (req, rawJwt, done) => {
        const header = JSON.parse(Buffer.from(rawJwt.split(".")[0], "base64url").toString());
        if (header.alg === "HS256") return done(null, process.env.JWT_SHARED_KEY);
        return jwks(req, rawJwt, done);
      },
      algorithms: ["RS256", "HS256"],
    });""")
    s.edit("src/auth/jwt.strategy.ts", 'import { ExtractJwt, Strategy } from "passport-jwt";', 'import { ExtractJwt, Strategy } from "passport-jwt";\nimport { passportJwtSecret } from "jwks-rsa";')
    e_kid = s.bash("npm run test:e2e -- auth 2>&1 | tail -8", "FAIL test/auth.e2e-spec.ts\n  \u25cf RS256 \u203a accepts a token signed by the JWKS key\n\n"
                   "    expected 200 \"OK\", got 401 \"Unauthorized\"\n\n    SigningKeyNotFoundError: Unable to find a signing key that matches 'test-key-1'\n\n"
                   "Tests:       1 failed, 3 passed, 4 total\n", code=1, secs=20.0)
    s.read("test/auth.e2e-spec.ts", """beforeAll(async () => {
  jwksServer = await startJwksServer([publicJwk]);
  process.env.JWKS_URI = jwksServer.url;
});
""")
    s.edit("src/auth/jwt.strategy.ts", """      jwksUri: "https://id.acme.dev/.well-known/jwks.json",""",
           """      jwksUri: process.env.JWKS_URI ?? "https://id.acme.dev/.well-known/jwks.json",""")
    s.bash("npm run test:e2e 2>&1 | tail -3", "Test Suites: 7 passed, 7 total\nTests:       28 passed, 28 total\n", secs=32.0)
    s.stop("JwtStrategy verifies RS256 tokens against the identity JWKS (jwks-rsa with caching and a refetch on unknown "
           "kid, so rotation works) and still accepts HS256 with the shared key until 2026-03-31. The e2e test first got "
           "SigningKeyNotFoundError because the strategy ignored the test's JWKS_URI; the URI is now configurable.")
    s.prompt("commit, and add a reminder in the README to drop HS256 after the 31st")
    s.read("README.md", "# mobile-api-gateway\n\n## Auth\nBearer JWTs issued by id.acme.dev.\n")
    s.edit("README.md", "Bearer JWTs issued by id.acme.dev.\n", "Bearer JWTs issued by id.acme.dev, RS256 verified via JWKS (`JWKS_URI`).\n\n"
           "TODO after 2026-03-31: remove the HS256 branch in src/auth/jwt.strategy.ts and the JWT_SHARED_KEY env var.\n")
    commit(s, "JWT: RS256 via JWKS, HS256 accepted until 2026-03-31", ["package.json", "package-lock.json", "src/auth/jwt.strategy.ts", "README.md"],
           "0b6e3d4", 26, 3)
    s.stop("Committed as 0b6e3d4 with the README reminder.")
    s.end()

    h.q("fix_location", "Where did we fix the CORS errors from the iOS webview?", "ios webview cors",
        "src/main.ts enableCors: added capacitor://localhost and ionic://localhost, methods, headers, maxAge.",
        ["src/main.ts", "capacitor://localhost"], [e_corsfix])
    h.q("knowledge_update", "What is the API rate limit per minute now?", "api rate limit",
        "300 requests per 60 s (was 100), keyed per user when authenticated.", ["limit: 300"], [e_t300])
    h.q("decision", "Why did we change how the throttler identifies clients?", "throttler client key",
        "Users behind carrier NAT share IPs and the new home screen makes ~40 requests on launch; limit per user id when authenticated.",
        ["carrier NAT"], [e_p_throttle])
    h.q("failed_command", "Which e2e test broke when we enabled request whitelisting?", "whitelist e2e failure",
        "PATCH /v1/users/me: 400 'property marketingOptIn should not exist'.", ["property marketingOptIn should not exist"], [e_e2e])
    h.q("fix_location", "How did we fix the profile update rejected by validation?", "profile update rejected",
        "src/users/dto/update-profile.dto.ts: @IsOptional() @IsBoolean() on marketingOptIn.", ["update-profile.dto.ts"], [e_dto])
    h.q("decision", "Why are we moving JWT verification to RS256?", "jwt rs256 switch",
        "The identity team is moving to RS256 with keys at the JWKS endpoint and will rotate keys; HS256 accepted until March 31.",
        ["jwks.json"], [e_p_rs256])
    h.q("failed_command", "What error did the RS256 auth test hit?", "rs256 test error",
        "SigningKeyNotFoundError: Unable to find a signing key that matches 'test-key-1' (JWKS_URI ignored).", ["SigningKeyNotFoundError"], [e_kid])
    h.q("file_history", "Which files did we touch to key rate limits per user?", "per user rate limit",
        "src/app.module.ts (limit 300, UserThrottlerGuard) and the new src/common/user-throttler.guard.ts.",
        ["src/app.module.ts", "UserThrottlerGuard"], [e_t300, e_guard])
    h.q("temporal", "What did the first CORS preflight check from the webview origin return?", "cors preflight",
        "HTTP 204 with no Access-Control-Allow-Origin header.", ["204 No Content"], [e_preflight])
