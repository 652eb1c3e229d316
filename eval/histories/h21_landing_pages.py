from ._common import commit, orient

FOOTER = """export function Footer() {
  const year = new Date().getFullYear();
  const updated = new Date(Date.now()).toLocaleString();
  return (
    <footer className="mt-24 border-t py-8 text-sm text-gray-500">
      <p>&copy; {year} Acme Inc.</p>
      <p>Prices updated {updated}</p>
    </footer>
  );
}
"""

NEXT_CONFIG = """/** @type {import('next').NextConfig} */
const nextConfig = {
  images: {
    domains: ["images.acme.dev"],
  },
};

module.exports = nextConfig;
"""

PRICING_PAGE = """import { getPlans } from "@/lib/cms";
import { PlanCard } from "@/components/PlanCard";

export const revalidate = 60;

export default async function PricingPage() {
  const plans = await getPlans();
  return (
    <main className="mx-auto max-w-6xl px-6 py-16">
      <h1 className="text-4xl font-bold">Pricing</h1>
      <div className="mt-10 grid gap-6 md:grid-cols-3">
        {plans.map((p) => <PlanCard key={p.id} plan={p} />)}
      </div>
    </main>
  );
}
"""


def build(ds):
    h = ds.history("h21", "cursor", "/home/dev/src/landing-pages",
                   "Next.js marketing site with Tailwind: a hydration mismatch in the footer, remote images from the "
                   "new CDN, the Tailwind v4 migration, and the pricing page revalidation interval.",
                   start="2026-05-11T08:00:00Z", model="claude-4.5-sonnet")
    h.commits = [("3a7c0e9", "Pricing page from the CMS"), ("b52d1f8", "Next 15 upgrade"), ("e0f94c2", "Footer with legal links")]

    # ---- s1: hydration mismatch
    s = h.session("2026-05-11T09:12:33Z")
    s.prompt("Every page logs 'Hydration failed because the server rendered text didn't match the client' in the "
             "console. I think it's the footer.", attachments=["components/Footer.tsx"])
    orient(s)
    s.read("components/Footer.tsx", FOOTER)
    e_hydr = s.bash("npx next build && npx next start -p 3100 & sleep 25; npx playwright test e2e/console.spec.ts --reporter=line",
                    "Running 1 test using 1 worker\n  1) [chromium] \u203a e2e/console.spec.ts:4:5 \u203a no console errors on /\n\n"
                    "    Error: expect(received).toEqual(expected)\n    + \"Error: Hydration failed because the server rendered text didn't match the client. "
                    "As a result this tree will be regenerated on the client.\\n  <footer>\\n    <p>\\n+     Prices updated 5/11/2026, 9:14:02 AM\\n-     Prices updated 11/05/2026, 09:13:40\"\n\n  1 failed\n",
                    code=1, secs=60.0)
    e_footerfix = s.edit("components/Footer.tsx", """export function Footer() {
  const year = new Date().getFullYear();
  const updated = new Date(Date.now()).toLocaleString();""", """// The "updated" time must be the build/revalidate time and formatted the same on server and client:
// toLocaleString() used the server's locale/timezone on the server and the visitor's in the browser.
export function Footer({ updatedAt }: { updatedAt: string }) {
  const year = new Date(updatedAt).getUTCFullYear();
  const updated = new Intl.DateTimeFormat("en-US", { dateStyle: "medium", timeStyle: "short", timeZone: "UTC" }).format(new Date(updatedAt));""")
    s.read("app/layout.tsx", """import { Footer } from "@/components/Footer";

export default function RootLayout({ children }: { children: React.ReactNode }) {
  return (
    <html lang="en">
      <body>
        {children}
        <Footer />
      </body>
    </html>
  );
}
""")
    s.edit("app/layout.tsx", "        <Footer />", "        <Footer updatedAt={new Date().toISOString()} />")
    s.bash("npx next build && npx playwright test e2e/console.spec.ts --reporter=line", "Running 1 test using 1 worker\n  1 passed (4.1s)\n", secs=58.0)
    s.stop("The footer rendered `new Date(Date.now()).toLocaleString()`: the server formatted it with its own locale "
           "and time, the browser with the visitor's, so the text differed and React threw away the tree. The "
           "timestamp is now passed from the layout (fixed at render/revalidate time) and formatted with an explicit "
           "en-US/UTC Intl.DateTimeFormat. The console test passes.")
    s.prompt("commit")
    commit(s, "Footer: deterministic timestamp formatting (hydration mismatch)", ["components/Footer.tsx", "app/layout.tsx"], "71e3d0b", 6, 3)
    s.stop("Committed as 71e3d0b.")
    s.end()

    # ---- s2: remote images
    s = h.session("2026-05-14T13:40:19Z")
    s.prompt("Marketing moved images to cdn.acme-media.com and now next/image throws on the case study pages.")
    orient(s)
    e_imgerr = s.bash("npx next build 2>&1 | grep -A3 'Error:' | head -6", "", code=1, stderr=(
        "Error: Invalid src prop (https://cdn.acme-media.com/case-studies/northwind/hero.jpg) on `next/image`, hostname \"cdn.acme-media.com\" "
        "is not configured under images in your `next.config.js`\nSee more info: https://nextjs.org/docs/messages/next-image-unconfigured-host\n"
        "    at defaultLoader (node_modules/next/dist/shared/lib/image-loader.js:41:19)\n"), secs=40.0)
    s.read("next.config.js", NEXT_CONFIG)
    e_remote = s.edit("next.config.js", """  images: {
    domains: ["images.acme.dev"],
  },""", """  images: {
    // `domains` is deprecated; remotePatterns also pins protocol and path.
    remotePatterns: [
      { protocol: "https", hostname: "images.acme.dev", pathname: "/**" },
      { protocol: "https", hostname: "cdn.acme-media.com", pathname: "/case-studies/**" },
    ],
    formats: ["image/avif", "image/webp"],
  },""")
    s.bash("npx next build 2>&1 | tail -4", "\u25cb  (Static)   prerendered as static content\n\u25cf  (SSG)      prerendered as static HTML (uses generateStaticParams)\n"
           "\u0192  (Dynamic)  server-rendered on demand\n\n", secs=45.0)
    s.stop("Replaced the deprecated images.domains with remotePatterns for images.acme.dev and "
           "cdn.acme-media.com/case-studies/** (https only), and enabled AVIF/WebP. The build passes.")
    s.prompt("commit")
    commit(s, "next/image: remotePatterns incl. cdn.acme-media.com", ["next.config.js"], "c0a81e5", 8, 1)
    s.stop("Committed as c0a81e5.")
    s.end()

    # ---- s3: tailwind v4
    s = h.session("2026-05-20T10:05:47Z")
    e_p_tw4 = s.prompt("Let's upgrade to Tailwind v4. Builds are slow and v4's Oxide engine is much faster; also we want "
                       "the CSS-first config so designers can edit theme tokens in one CSS file. Use the official upgrade tool.")
    orient(s)
    s.bash("npx @tailwindcss/upgrade@latest --force", "\u2502 Migrating JavaScript configuration files\u2026\n\u2502 \u2192 Migrated tailwind.config.ts to app/globals.css\n"
           "\u2502 Migrating templates\u2026\n\u2502 \u2192 Migrated 48 files\n\u2502 Updating dependencies\u2026\n\u2502 \u2192 tailwindcss@4.1.7, @tailwindcss/postcss@4.1.7\n\u2514 Done!\n", secs=40.0)
    e_tw_err = s.bash("npx next build 2>&1 | grep -B1 -A2 'CssSyntaxError' | head -5", "", code=1, stderr=(
        "./app/globals.css\nError: Cannot apply unknown utility class `shadow-card`. Are you using CSS modules or similar and missing `@reference`?\n"
        "    at app/components/PlanCard.module.css:3:3\n"), secs=35.0)
    s.read("app/components/PlanCard.module.css", ".card {\n  @apply rounded-xl shadow-card p-6;\n}\n")
    e_reference = s.edit("app/components/PlanCard.module.css", ".card {\n  @apply rounded-xl shadow-card p-6;\n}\n",
                         "/* v4: CSS modules don't see the theme unless they reference it */\n@reference \"../globals.css\";\n\n.card {\n  @apply rounded-xl shadow-card p-6;\n}\n")
    s.read("app/globals.css", """@import "tailwindcss";

@theme {
  --color-brand-500: #4f46e5;
  --color-brand-600: #4338ca;
  --shadow-card: 0 1px 2px rgb(0 0 0 / 0.06), 0 8px 24px rgb(0 0 0 / 0.08);
  --font-display: "Cal Sans", ui-sans-serif, system-ui;
}
""")
    s.bash("npx next build 2>&1 | tail -2 && git diff --stat | tail -1", "\u0192  (Dynamic)  server-rendered on demand\n\n 53 files changed, 212 insertions(+), 318 deletions(-)\n", secs=30.0)
    s.bash("time npx next build > /dev/null", "\nreal\t0m38.902s\n", secs=39.0)
    s.stop("Ran @tailwindcss/upgrade: tailwind.config.ts became an @theme block in app/globals.css (brand colours, "
           "shadow-card, display font), 48 templates were migrated, and PostCSS uses @tailwindcss/postcss. The build "
           "failed on 'Cannot apply unknown utility class shadow-card' in PlanCard.module.css because v4 CSS modules "
           "need @reference to the main stylesheet; added it. Full build is 39 s (was 71 s).")
    s.prompt("commit")
    commit(s, "Tailwind v4 (CSS-first theme in globals.css)", ["package.json", "package-lock.json", "app", "components", "postcss.config.mjs"],
           "4f6b2a8", 212, 318, add="-A")
    s.stop("Committed as 4f6b2a8.")
    s.end()

    # ---- s4: ISR 60 -> 300
    s = h.session("2026-05-27T15:31:02Z")
    e_p_isr = s.prompt("The CMS bill doubled: the pricing page revalidates every 60s and each regeneration makes 40 API "
                       "calls. Prices change maybe twice a month. Set revalidate to 300 and add an on-demand revalidate "
                       "webhook for when marketing publishes.", attachments=["app/pricing/page.tsx"])
    orient(s)
    s.read("app/pricing/page.tsx", PRICING_PAGE)
    e_isr300 = s.edit("app/pricing/page.tsx", "export const revalidate = 60;", "// 5 min; publishes also call /api/revalidate (CMS webhook) for instant updates.\nexport const revalidate = 300;")
    e_hook = s.write("app/api/revalidate/route.ts", """import { revalidatePath } from "next/cache";
import { NextResponse } from "next/server";

export async function POST(req: Request) {
  if (req.headers.get("x-cms-signature") !== process.env.CMS_WEBHOOK_SIGNATURE) {
    return NextResponse.json({ ok: false }, { status: 401 });
  }
  const { model } = await req.json();
  if (model === "plan") revalidatePath("/pricing");
  return NextResponse.json({ ok: true });
}
""")
    s.bash("npx next build > /dev/null && (npx next start -p 3100 &) && sleep 8 && curl -s -X POST localhost:3100/api/revalidate -H 'x-cms-signature: test' -d '{\"model\":\"plan\"}'",
           "{\"ok\":true}\n", secs=50.0)
    s.stop("Pricing page revalidates every 300 s instead of 60 (a fifth of the CMS calls), and POST /api/revalidate "
           "(checked against the CMS_WEBHOOK_SIGNATURE env var) calls revalidatePath('/pricing') when a plan is published.")
    s.prompt("commit")
    commit(s, "Pricing: revalidate 300s + CMS publish webhook", ["app/pricing/page.tsx", "app/api/revalidate/route.ts"], "9d03c7e", 14, 1)
    s.stop("Committed as 9d03c7e.")
    s.end()

    h.q("fix_location", "Where did the hydration error come from and how was it fixed?", "hydration error",
        "components/Footer.tsx used toLocaleString on server and client; now takes updatedAt from app/layout.tsx and formats en-US/UTC.",
        ["components/Footer.tsx"], [e_footerfix])
    h.q("failed_command", "What did the console test report before the footer fix?", "console test failure",
        "Hydration failed because the server rendered text didn't match the client (footer 'Prices updated').",
        ["Hydration failed"], [e_hydr])
    h.q("failed_command", "Why did the build break after marketing moved images to the new CDN?", "cdn images build",
        "next/image: hostname cdn.acme-media.com is not configured under images in next.config.js.", ["is not configured under images"], [e_imgerr])
    h.q("file_history", "What did we change in next.config.js for images?", "next config images",
        "images.domains replaced by remotePatterns (images.acme.dev, cdn.acme-media.com/case-studies/**) plus AVIF/WebP.",
        ["remotePatterns"], [e_remote])
    h.q("decision", "Why did we upgrade Tailwind to v4?", "tailwind v4 upgrade",
        "Faster builds with the Oxide engine and CSS-first config so designers edit theme tokens in one CSS file.",
        ["Oxide"], [e_p_tw4])
    h.q("failed_command", "What build error came up during the Tailwind upgrade?", "tailwind build error",
        "Cannot apply unknown utility class `shadow-card` in PlanCard.module.css (needs @reference).", ["Cannot apply unknown utility class"], [e_tw_err])
    h.q("knowledge_update", "How often does the pricing page revalidate now?", "pricing page revalidate",
        "Every 300 s (was 60), plus on-demand revalidation via /api/revalidate.", ["revalidate = 300"], [e_isr300])
    h.q("decision", "Why did we slow down the pricing page revalidation?", "pricing revalidation cost",
        "The CMS bill doubled: 60 s revalidation with 40 API calls each, while prices change twice a month.", ["CMS bill"], [e_p_isr])
    h.q("temporal", "What did we add right after changing the pricing revalidation interval?", "pricing revalidate",
        "app/api/revalidate/route.ts: a CMS publish webhook calling revalidatePath('/pricing').", ["app/api/revalidate/route.ts"], [e_hook])
