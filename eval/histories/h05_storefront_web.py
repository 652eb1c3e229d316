from ._common import checks, commit, diffstat, orient, vitest_ok

USE_CART = """import { useEffect, useState } from "react";
import { fetchCart, type Cart } from "../api/cart";

export function useCart(userId: string, options = { includeSaved: false }) {
  const [cart, setCart] = useState<Cart | null>(null);

  useEffect(() => {
    fetchCart(userId, options).then(setCart);
  }, [userId, options]);

  return cart;
}
"""

CART_SLICE = """import { createSlice, type PayloadAction } from "@reduxjs/toolkit";
import type { CartItem } from "../api/cart";

interface CartState {
  items: CartItem[];
  couponCode: string | null;
}

const initialState: CartState = { items: [], couponCode: null };

export const cartSlice = createSlice({
  name: "cart",
  initialState,
  reducers: {
    addItem(state, action: PayloadAction<CartItem>) {
      state.items.push(action.payload);
    },
    removeItem(state, action: PayloadAction<string>) {
      state.items = state.items.filter((i) => i.sku !== action.payload);
    },
    applyCoupon(state, action: PayloadAction<string>) {
      state.couponCode = action.payload;
    },
  },
});
"""

SEARCH_BOX = """import { useState } from "react";
import { useProductSearch } from "../hooks/useProductSearch";

export function SearchBox() {
  const [query, setQuery] = useState("");
  const results = useProductSearch(query);
  return (
    <div className="search">
      <input value={query} onChange={(e) => setQuery(e.target.value)} placeholder="Search products" />
      <ResultsList results={results} />
    </div>
  );
}
"""

CHECKOUT_SPEC = """import { test, expect } from "@playwright/test";

test("guest checkout with card", async ({ page }) => {
  await page.goto("/products/trail-runner-2");
  await page.getByRole("button", { name: "Add to cart" }).click();
  await page.goto("/checkout");
  await page.getByLabel("Email").fill("guest@example.com");
  await page.getByRole("button", { name: "Continue to payment" }).click();
  await page.waitForTimeout(1500);
  await page.getByRole("button", { name: "Pay now" }).click();
  await expect(page.getByText("Thanks for your order")).toBeVisible();
});
"""


def build(ds):
    h = ds.history("h05", "claude-code", "/home/dev/src/storefront-web",
                   "React + Vite storefront: an infinite re-render in useCart, Redux replaced by Zustand, search "
                   "debounce tuning, a flaky Playwright checkout test, and bundle splitting.",
                   start="2026-04-01T08:00:00Z", model="claude-sonnet-4-6")
    h.commits = [("aa31c07", "Product page gallery"), ("6e0d9b2", "Cart drawer"), ("f13e820", "Upgrade to Vite 6")]

    # ---- s1: infinite re-render
    s = h.session("2026-04-01T10:05:51Z", mode="default")
    s.prompt("The cart drawer hammers /api/cart in a loop, the network tab shows hundreds of requests a second after "
             "opening it. Something in useCart re-renders forever.")
    orient(s)
    s.read("src/hooks/useCart.ts", USE_CART)
    s.grep("useCart\\(", "src/components/CartDrawer.tsx:12:  const cart = useCart(user.id);\n"
           "src/components/HeaderCartBadge.tsx:7:  const cart = useCart(user.id, { includeSaved: true });\n"
           "src/pages/CheckoutPage.tsx:19:  const cart = useCart(user.id);\n", path="src")
    e_rerender = s.edit("src/hooks/useCart.ts", """export function useCart(userId: string, options = { includeSaved: false }) {
  const [cart, setCart] = useState<Cart | null>(null);

  useEffect(() => {
    fetchCart(userId, options).then(setCart);
  }, [userId, options]);""", """export function useCart(userId: string, { includeSaved = false } = {}) {
  const [cart, setCart] = useState<Cart | null>(null);

  // Depend on the primitive, not the options object: a default `{}` is a new object on every
  // render, so the effect re-ran, setCart re-rendered, and the loop never ended.
  useEffect(() => {
    let cancelled = false;
    fetchCart(userId, { includeSaved }).then((c) => {
      if (!cancelled) setCart(c);
    });
    return () => {
      cancelled = true;
    };
  }, [userId, includeSaved]);""")
    s.write("src/hooks/useCart.test.tsx", """import { renderHook, waitFor } from "@testing-library/react";
import { vi, it, expect } from "vitest";
import * as api from "../api/cart";
import { useCart } from "./useCart";

it("fetches the cart once per user", async () => {
  const spy = vi.spyOn(api, "fetchCart").mockResolvedValue({ items: [], total: 0 });
  const { rerender } = renderHook(() => useCart("u1"));
  rerender();
  rerender();
  await waitFor(() => expect(spy).toHaveBeenCalledTimes(1));
});
""")
    s.bash("npx vitest --run src/hooks", vitest_ok("storefront-web", "2.3.0", [("src/hooks/useCart.test.tsx", 1),
                                                                            ("src/hooks/useProductSearch.test.tsx", 3)], "1.3"), desc="Hook tests")
    s.stop("useCart had a default parameter `options = { includeSaved: false }` and listed `options` in the effect "
           "deps; every render created a new object, so the effect fetched, setCart re-rendered, and it looped. It now "
           "destructures includeSaved (a boolean) and depends on that, and ignores late responses after unmount. "
           "New test asserts one fetch across re-renders.")
    s.prompt("commit")
    checks(s, "node", [0, 1])
    commit(s, "useCart: depend on includeSaved, not a fresh options object", ["src/hooks/useCart.ts", "src/hooks/useCart.test.tsx"],
           "90c4a1e", 27, 4)
    s.stop("Committed as 90c4a1e.")
    s.end()

    # ---- s2: Redux -> Zustand
    s = h.session("2026-04-06T13:40:10Z", mode="acceptEdits")
    e_p_zustand = s.prompt("I want to drop Redux. The store is only the cart and the UI drawer state, and every change "
                           "needs a slice, an action and a selector. Move it to Zustand; keep the cart persisted to "
                           "localStorage like redux-persist did.")
    orient(s)
    s.read("src/store/cartSlice.ts", CART_SLICE)
    s.glob("src/store/**/*.ts", ["src/store/cartSlice.ts", "src/store/uiSlice.ts", "src/store/index.ts", "src/store/persist.ts"])
    s.bash("npm uninstall @reduxjs/toolkit react-redux redux-persist && npm install zustand@5",
           "\nremoved 9 packages, and audited 612 packages in 3s\n\nadded 1 package, and audited 613 packages in 2s\n\nfound 0 vulnerabilities\n",
           desc="Swap dependencies", secs=6.0)
    e_zstore = s.write("src/store/cart.ts", """import { create } from "zustand";
import { persist } from "zustand/middleware";
import type { CartItem } from "../api/cart";

interface CartStore {
  items: CartItem[];
  couponCode: string | null;
  addItem: (item: CartItem) => void;
  removeItem: (sku: string) => void;
  applyCoupon: (code: string) => void;
}

export const useCartStore = create<CartStore>()(
  persist(
    (set) => ({
      items: [],
      couponCode: null,
      addItem: (item) => set((s) => ({ items: [...s.items, item] })),
      removeItem: (sku) => set((s) => ({ items: s.items.filter((i) => i.sku !== sku) })),
      applyCoupon: (code) => set({ couponCode: code }),
    }),
    { name: "storefront-cart", version: 2 },
  ),
);
""")
    s.bash("git rm -q src/store/cartSlice.ts src/store/uiSlice.ts src/store/index.ts src/store/persist.ts", "", desc="Remove Redux files")
    s.bash("npx tsc --noEmit | head -5", "src/components/CartDrawer.tsx(3,10): error TS2305: Module '\"../store\"' has no exported member 'useAppSelector'.\n"
           "src/components/AddToCartButton.tsx(4,10): error TS2305: Module '\"../store\"' has no exported member 'useAppDispatch'.\n"
           "src/main.tsx(5,10): error TS2305: Module '\"./store\"' has no exported member 'store'.\n", desc="Type-check")
    s.read("src/components/CartDrawer.tsx", """import { useAppSelector, useAppDispatch } from "../store";
import { cartSlice } from "../store/cartSlice";

export function CartDrawer() {
  const items = useAppSelector((s) => s.cart.items);
  const dispatch = useAppDispatch();
  const remove = (sku: string) => dispatch(cartSlice.actions.removeItem(sku));
  return <CartList items={items} onRemove={remove} />;
}
""")
    e_zdrawer = s.write("src/components/CartDrawer.tsx", """import { useCartStore } from "../store/cart";

export function CartDrawer() {
  const items = useCartStore((s) => s.items);
  const removeItem = useCartStore((s) => s.removeItem);
  useEffect(() => {
    if (items.length === 0) closeDrawer();
  }, [items.length]);
  return <CartList items={items} onRemove={removeItem} />;
}
""")
    e_eslint = s.bash("npx eslint src --max-warnings 0", "\n/home/dev/src/storefront-web/src/components/CartDrawer.tsx\n"
                      "  6:5   error    'useEffect' is not defined                                             no-undef\n"
                      "  8:6   warning  React Hook useEffect has a missing dependency: 'closeDrawer'. Either include it or remove the dependency array  react-hooks/exhaustive-deps\n\n"
                      "\u2716 2 problems (1 error, 1 warning)\n\nESLint found too many warnings (maximum: 0).\n", code=1, desc="Lint", secs=5.0)
    s.edit("src/components/CartDrawer.tsx", """import { useCartStore } from "../store/cart";

export function CartDrawer() {
  const items = useCartStore((s) => s.items);
  const removeItem = useCartStore((s) => s.removeItem);
  useEffect(() => {
    if (items.length === 0) closeDrawer();
  }, [items.length]);""", """import { useEffect } from "react";
import { useCartStore } from "../store/cart";
import { useUiStore } from "../store/ui";

export function CartDrawer() {
  const items = useCartStore((s) => s.items);
  const removeItem = useCartStore((s) => s.removeItem);
  const closeDrawer = useUiStore((s) => s.closeDrawer);
  useEffect(() => {
    if (items.length === 0) closeDrawer();
  }, [items.length, closeDrawer]);""")
    s.bash("sed -i 's#from \"../store\"#from \"../store/cart\"#' src/components/AddToCartButton.tsx && npx tsc --noEmit && npx eslint src --max-warnings 0",
           "", desc="Fix the last import, type-check and lint", secs=9.0)
    s.bash("npx vitest --run", vitest_ok("storefront-web", "2.3.0", [("src/hooks/useCart.test.tsx", 1), ("src/hooks/useProductSearch.test.tsx", 3),
                                                                   ("src/store/cart.test.ts", 5), ("src/components/CartDrawer.test.tsx", 2)], "2.4"),
           desc="Unit tests", secs=6.0)
    e_dec_zustand = s.stop("Redux is gone: src/store/cart.ts is a Zustand store with the same actions (addItem, removeItem, "
                           "applyCoupon) wrapped in persist() under the key storefront-cart (version 2, so the old "
                           "redux-persist blob is ignored rather than misread). Components select single fields to avoid "
                           "re-renders. Removed @reduxjs/toolkit, react-redux and redux-persist; bundle is 11 kB smaller gzipped.")
    s.compact("1. Primary request: replace Redux (cart + drawer UI state) with Zustand, keeping the cart persisted to "
              "localStorage.\n2. Done: src/store/cart.ts (Zustand + persist, key storefront-cart, version 2); Redux slices "
              "and store/index.ts removed; CartDrawer and AddToCartButton use useCartStore selectors; eslint/tsc/vitest pass.\n"
              "3. Pending: commit.", trigger="auto")
    s.prompt("good, commit")
    diffstat(s, [("package.json", 1, 3), ("src/components/AddToCartButton.tsx", 3, 4), ("src/components/CartDrawer.tsx", 9, 6),
                 ("src/store/cart.ts", 27, 0), ("src/store/cartSlice.ts", 0, 26), ("src/store/index.ts", 0, 14)])
    commit(s, "Replace Redux with Zustand (persisted cart store)", ["package.json", "package-lock.json", "src/store", "src/components"],
           "d4b77f3", 58, 71)
    s.stop("Committed as d4b77f3.")
    s.end()

    # ---- s3: search debounce
    s = h.session("2026-04-09T09:12:30Z", mode="acceptEdits")
    s.prompt("Search fires a request on every keystroke. Debounce it; 300ms feels standard. Also cancel in-flight requests "
             "so old results don't overwrite new ones.")
    orient(s)
    s.read("src/components/SearchBox.tsx", SEARCH_BOX)
    s.read("src/hooks/useProductSearch.ts", """import { useEffect, useState } from "react";
import { searchProducts, type Product } from "../api/search";

export function useProductSearch(query: string) {
  const [results, setResults] = useState<Product[]>([]);
  useEffect(() => {
    if (!query) return setResults([]);
    searchProducts(query).then(setResults);
  }, [query]);
  return results;
}
""")
    e_deb300 = s.write("src/hooks/useProductSearch.ts", """import { useEffect, useState } from "react";
import { searchProducts, type Product } from "../api/search";

export const SEARCH_DEBOUNCE_MS = 300;

export function useProductSearch(query: string) {
  const [results, setResults] = useState<Product[]>([]);
  useEffect(() => {
    if (!query) {
      setResults([]);
      return;
    }
    const ctrl = new AbortController();
    const t = setTimeout(() => {
      searchProducts(query, { signal: ctrl.signal })
        .then(setResults)
        .catch((e) => {
          if (e.name !== "AbortError") throw e;
        });
    }, SEARCH_DEBOUNCE_MS);
    return () => {
      clearTimeout(t);
      ctrl.abort();
    };
  }, [query]);
  return results;
}
""")
    s.read("src/api/search.ts", """export async function searchProducts(q: string): Promise<Product[]> {
  const res = await fetch(`/api/search?q=${encodeURIComponent(q)}`);
  return (await res.json()).items;
}
""")
    s.edit("src/api/search.ts", """export async function searchProducts(q: string): Promise<Product[]> {
  const res = await fetch(`/api/search?q=${encodeURIComponent(q)}`);""", """export async function searchProducts(q: string, init: RequestInit = {}): Promise<Product[]> {
  const res = await fetch(`/api/search?q=${encodeURIComponent(q)}`, init);""")
    s.bash("npx vitest --run src/hooks/useProductSearch.test.tsx", vitest_ok("storefront-web", "2.3.0", [("src/hooks/useProductSearch.test.tsx", 4)], "1.1"),
           desc="Search hook tests")
    s.stop("useProductSearch waits SEARCH_DEBOUNCE_MS = 300 ms after the last keystroke and aborts the previous request "
           "with an AbortController when the query changes, so stale results can't land after newer ones.")
    s.prompt("commit")
    checks(s, "node", [0, 1])
    commit(s, "search: 300ms debounce and abort stale requests", ["src/hooks/useProductSearch.ts", "src/api/search.ts"], "1b8e0c4", 22, 4)
    s.stop("Committed as 1b8e0c4.")
    s.end()

    # ---- s4: flaky playwright
    s = h.session("2026-04-15T14:55:03Z", mode="acceptEdits")
    s.prompt("e2e/checkout.spec.ts is flaky in CI, maybe 1 in 6. It times out on 'Pay now'. Fix it for real please")
    orient(s)
    s.read("e2e/checkout.spec.ts", CHECKOUT_SPEC)
    e_pwfail = s.bash("npx playwright test e2e/checkout.spec.ts --repeat-each=10 --reporter=line",
                      "Running 10 tests using 4 workers\n  1) [chromium] \u203a e2e/checkout.spec.ts:3:5 \u203a guest checkout with card (repeat3)\n\n"
                      "    TimeoutError: locator.click: Timeout 10000ms exceeded.\n    Call log:\n"
                      "      - waiting for getByRole('button', { name: 'Pay now' })\n"
                      "      -   locator resolved to <button disabled class=\"btn-pay\">Pay now</button>\n"
                      "      - element is not enabled - waiting...\n\n  1 failed\n  9 passed (48.2s)\n", code=1,
                      desc="Repeat the checkout test 10 times", secs=49.0)
    s.grep("Pay now", "src/pages/CheckoutPage.tsx:88:        <button className=\"btn-pay\" disabled={!paymentIntent}>Pay now</button>\n", path="src")
    e_pwfix = s.edit("e2e/checkout.spec.ts", """  await page.getByRole("button", { name: "Continue to payment" }).click();
  await page.waitForTimeout(1500);
  await page.getByRole("button", { name: "Pay now" }).click();""", """  // "Pay now" stays disabled until the payment intent exists; wait for that response, not a fixed delay.
  const intent = page.waitForResponse((r) => r.url().includes("/api/payment-intents") && r.ok());
  await page.getByRole("button", { name: "Continue to payment" }).click();
  await intent;
  await expect(page.getByRole("button", { name: "Pay now" })).toBeEnabled();
  await page.getByRole("button", { name: "Pay now" }).click();""")
    s.bash("npx playwright test e2e/checkout.spec.ts --repeat-each=30 --reporter=line", "Running 30 tests using 4 workers\n  30 passed (2.4m)\n",
           desc="Repeat 30 times", secs=146.0)
    s.stop("The test slept 1500 ms and then clicked 'Pay now', but the button is disabled until POST /api/payment-intents "
           "returns, which sometimes takes longer in CI. It now waits for that response and for the button to be enabled. "
           "30/30 passes locally.")
    s.prompt("commit and push")
    commit(s, "e2e: wait for the payment intent instead of sleeping", ["e2e/checkout.spec.ts"], "7f2c9d0", 5, 2)
    s.bash("git push origin main", "", stderr="To github.com:acme/storefront-web.git\n   1b8e0c4..7f2c9d0  main -> main\n", desc="Push")
    s.stop("Committed 7f2c9d0 and pushed.")
    s.end()

    # ---- s5: debounce change + bundle
    s = h.session("2026-04-22T10:30:44Z", mode="acceptEdits")
    e_p_deb = s.prompt("UX testing says search feels laggy. Drop the debounce to 200ms, the abort logic keeps it safe. "
                       "Then look at the bundle, the product page JS got big.")
    orient(s)
    s.read("src/hooks/useProductSearch.ts")
    e_deb200 = s.edit("src/hooks/useProductSearch.ts", "export const SEARCH_DEBOUNCE_MS = 300;", "export const SEARCH_DEBOUNCE_MS = 200;")
    s.bash("npx vitest --run src/hooks/useProductSearch.test.tsx", vitest_ok("storefront-web", "2.4.0", [("src/hooks/useProductSearch.test.tsx", 4)], "1.0"),
           desc="Search hook tests")
    e_bundle = s.bash("npx vite build 2>&1 | tail -6", "dist/assets/index-Bq2x9kLm.css              41.20 kB \u2502 gzip:  8.91 kB\n"
                      "dist/assets/vendor-CkP1u0aZ.js             142.77 kB \u2502 gzip: 46.02 kB\n"
                      "dist/assets/ProductPage-D3v8nQwe.js        318.45 kB \u2502 gzip: 97.13 kB\n"
                      "dist/assets/index-Dz1Gm4Ha.js               88.10 kB \u2502 gzip: 29.40 kB\n"
                      "(!) Some chunks are larger than 300 kB after minification.\n\u2713 built in 7.82s\n", desc="Build", secs=9.0)
    s.read("src/pages/ProductPage.tsx", """import { ProductGallery } from "../components/ProductGallery";
import { ReviewsPanel } from "../components/ReviewsPanel";

export function ProductPage({ product }: { product: Product }) {
  return (
    <main>
      <ProductGallery images={product.images} />
      <ProductInfo product={product} />
      <ReviewsPanel productId={product.id} />
    </main>
  );
}
""")
    e_lazy = s.edit("src/pages/ProductPage.tsx", """import { ProductGallery } from "../components/ProductGallery";
import { ReviewsPanel } from "../components/ReviewsPanel";
""", """import { lazy, Suspense } from "react";
import { ProductGallery } from "../components/ProductGallery";

// Reviews pull in the markdown renderer and the charting lib; load them after the page is interactive.
const ReviewsPanel = lazy(() => import("../components/ReviewsPanel"));
""")
    s.edit("src/pages/ProductPage.tsx", "      <ReviewsPanel productId={product.id} />",
           "      <Suspense fallback={<ReviewsSkeleton />}>\n        <ReviewsPanel productId={product.id} />\n      </Suspense>")
    s.bash("npx vite build 2>&1 | grep -E 'ProductPage|ReviewsPanel'", "dist/assets/ProductPage-Cj9aQ2mn.js        121.08 kB \u2502 gzip: 38.77 kB\n"
           "dist/assets/ReviewsPanel-B81xT0qq.js       197.92 kB \u2502 gzip: 58.61 kB\n", desc="Build", secs=9.0)
    s.bash("npx playwright test e2e/product.spec.ts --reporter=line", "Running 4 tests using 4 workers\n  4 passed (11.9s)\n", desc="Product e2e")
    s.stop("Debounce is 200 ms now. The product page chunk was 318 kB (97 kB gzip) mostly from ReviewsPanel's markdown "
           "and chart dependencies; ReviewsPanel is now lazy-loaded behind Suspense, so ProductPage is 121 kB (39 kB gzip) "
           "and reviews load as a separate chunk.")
    s.prompt("commit both")
    checks(s, "node")
    commit(s, "search debounce 200ms; lazy-load reviews on the product page", ["src/hooks/useProductSearch.ts", "src/pages/ProductPage.tsx",
           "src/components/ReviewsPanel.tsx"], "3aa9e51", 9, 4)
    s.stop("Committed as 3aa9e51.")
    s.end()

    h.q("fix_location", "Where was the infinite re-render that spammed the cart API?", "cart infinite rerender",
        "src/hooks/useCart.ts: the effect depended on a fresh options object; now it depends on includeSaved.",
        ["src/hooks/useCart.ts"], [e_rerender])
    h.q("decision", "Why did we drop Redux for the storefront state?", "drop redux state",
        "Only cart and drawer state; every change needed a slice, action and selector. Zustand with persist replaces it.",
        ["slice, an action and a selector"], [e_p_zustand])
    h.q("failed_command", "What did ESLint flag in the cart drawer during the state migration?", "eslint cart drawer",
        "'useEffect' is not defined (no-undef) and react-hooks/exhaustive-deps missing 'closeDrawer'.",
        ["exhaustive-deps"], [e_eslint])
    h.q("knowledge_update", "What is the search debounce delay now?", "search debounce",
        "200 ms (was 300 ms).", ["SEARCH_DEBOUNCE_MS = 200"], [e_deb200])
    h.q("fix_location", "How did we fix the flaky checkout end-to-end test?", "flaky checkout test",
        "e2e/checkout.spec.ts: wait for the /api/payment-intents response and for 'Pay now' to be enabled instead of waitForTimeout(1500).",
        ["e2e/checkout.spec.ts", "waitForResponse"], [e_pwfix])
    h.q("file_history", "Which files were created or rewritten when we moved the store to Zustand?", "zustand store",
        "src/store/cart.ts (new Zustand store) and src/components/CartDrawer.tsx.",
        ["src/store/cart.ts", "src/components/CartDrawer.tsx"], [e_zstore, e_zdrawer])
    h.q("temporal", "What was the product page chunk size before we lazy-loaded reviews?", "product page chunk",
        "ProductPage chunk 318.45 kB (97.13 kB gzip).", ["318.45 kB"], [e_bundle])
    h.q("failed_command", "What error did the checkout e2e test time out with?", "checkout timeout error",
        "TimeoutError: locator.click: Timeout 10000ms exceeded, 'Pay now' button was disabled.", ["element is not enabled"], [e_pwfail])
    h.q("file_history", "What did we change in the product page component?", "product page component",
        "src/pages/ProductPage.tsx: ReviewsPanel lazy-loaded with React.lazy behind Suspense.", ["src/pages/ProductPage.tsx"], [e_lazy])
