from ._common import checks, commit, diffstat, go_ok, orient

CACHE_GO = """package cache

import "time"

type entry struct {
	value     any
	expiresAt time.Time
}

// TTLCache is a small in-process cache for product lookups.
type TTLCache struct {
	items map[string]entry
	ttl   time.Duration
}

func New(ttl time.Duration) *TTLCache {
	return &TTLCache{items: make(map[string]entry), ttl: ttl}
}

func (c *TTLCache) Get(key string) (any, bool) {
	e, ok := c.items[key]
	if !ok || time.Now().After(e.expiresAt) {
		return nil, false
	}
	return e.value, true
}

func (c *TTLCache) Set(key string, v any) {
	c.items[key] = entry{value: v, expiresAt: time.Now().Add(c.ttl)}
}
"""

ROUTES_GO = """package httpapi

import (
	"net/http"

	"github.com/gorilla/mux"
)

func Routes(h *Handlers) http.Handler {
	r := mux.NewRouter()
	r.HandleFunc("/orders", h.ListOrders).Methods(http.MethodGet)
	r.HandleFunc("/orders/{id}", h.GetOrder).Methods(http.MethodGet)
	r.HandleFunc("/orders/{id}/cancel", h.CancelOrder).Methods(http.MethodPost)
	internal := r.PathPrefix("/internal").Subrouter()
	internal.Use(h.RequireServiceToken)
	internal.HandleFunc("/orders/{id}/reship", h.Reship).Methods(http.MethodPost)
	return r
}
"""

HANDLERS_GO = """package httpapi

import (
	"net/http"

	"github.com/gorilla/mux"
)

func (h *Handlers) GetOrder(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	order, err := h.store.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, order)
}
"""

INVENTORY_GO = """package inventory

import (
	"context"
	"time"

	pb "github.com/acme/orders-svc/gen/inventory/v1"
)

const callTimeout = 2 * time.Second

type Client struct{ api pb.InventoryServiceClient }

func (c *Client) Reserve(ctx context.Context, sku string, qty int32) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := c.api.Reserve(ctx, &pb.ReserveRequest{Sku: sku, Quantity: qty})
	return err
}
"""

CONSUMER_GO = """package events

import (
	"context"
	"log/slog"
)

type Consumer struct {
	sub    Subscription
	handle func(context.Context, Message) error
}

func (c *Consumer) Start(ctx context.Context) {
	for i := 0; i < 4; i++ {
		go func() {
			for msg := range c.sub.Messages() {
				if err := c.handle(ctx, msg); err != nil {
					slog.Error("handle order event", "err", err, "id", msg.ID)
				}
			}
		}()
	}
}
"""


def build(ds):
    h = ds.history("h04", "claude-code", "/home/dev/src/orders-svc",
                   "Go order service: a data race in the TTL cache, gorilla/mux replaced by chi, gRPC deadlines to the "
                   "inventory service, and a goroutine leak in the event consumer.",
                   start="2026-02-09T08:00:00Z")
    h.commits = [("3c1f0aa", "orders: add cancel endpoint"), ("b7e20d4", "Wire inventory gRPC client"),
                 ("5510e9f", "ci: run go test on PRs")]

    # ---- s1: data race
    s = h.session("2026-02-09T13:31:12Z", mode="default")
    s.prompt("CI started running go test -race and it fails in the cache package. Please fix the race properly, "
             "not by disabling the test.")
    orient(s)
    e_race = s.bash("go test -race ./internal/cache/...", "==================\nWARNING: DATA RACE\n"
                    "Write at 0x00c000124060 by goroutine 9:\n  runtime.mapassign_faststr()\n"
                    "  github.com/acme/orders-svc/internal/cache.(*TTLCache).Set()\n      /home/dev/src/orders-svc/internal/cache/cache.go:29 +0x7c\n\n"
                    "Previous read at 0x00c000124060 by goroutine 8:\n  runtime.mapaccess2_faststr()\n"
                    "  github.com/acme/orders-svc/internal/cache.(*TTLCache).Get()\n      /home/dev/src/orders-svc/internal/cache/cache.go:21 +0x5d\n"
                    "==================\n--- FAIL: TestConcurrentGetSet (0.01s)\n    testing.go:1490: race detected during execution of test\n"
                    "FAIL\nFAIL\tgithub.com/acme/orders-svc/internal/cache\t0.041s\nFAIL\n", code=1, desc="Reproduce the race", secs=4.4)
    s.read("internal/cache/cache.go", CACHE_GO)
    s.grep("cache.New\\(", "internal/catalog/service.go:31:\tproducts: cache.New(5 * time.Minute),\n"
           "internal/pricing/rules.go:18:\trules: cache.New(time.Minute),\n", path="internal")
    e_racefix = s.multiedit("internal/cache/cache.go", [
        ('import "time"', 'import (\n\t"sync"\n\t"time"\n)'),
        ("type TTLCache struct {\n\titems map[string]entry", "type TTLCache struct {\n\tmu    sync.RWMutex\n\titems map[string]entry"),
        ("func (c *TTLCache) Get(key string) (any, bool) {\n\te, ok := c.items[key]",
         "func (c *TTLCache) Get(key string) (any, bool) {\n\tc.mu.RLock()\n\te, ok := c.items[key]\n\tc.mu.RUnlock()"),
        ("func (c *TTLCache) Set(key string, v any) {\n\tc.items[key]",
         "func (c *TTLCache) Set(key string, v any) {\n\tc.mu.Lock()\n\tdefer c.mu.Unlock()\n\tc.items[key]"),
    ])
    s.bash("go test -race -count=20 ./internal/cache/...", go_ok([("github.com/acme/orders-svc/internal/cache", "1.322")]),
           desc="Run the cache tests 20 times with -race", secs=3.0)
    s.bash("go test -race ./...", go_ok([("github.com/acme/orders-svc/internal/cache", "0.051"),
                                         ("github.com/acme/orders-svc/internal/catalog", "0.212"),
                                         ("github.com/acme/orders-svc/internal/httpapi", "0.488"),
                                         ("github.com/acme/orders-svc/internal/pricing", "0.093")]), desc="All tests with -race", secs=21.0)
    s.stop("The TTL cache's map was read by Get and written by Set from different request goroutines without any "
           "locking. Added a sync.RWMutex to TTLCache: Get takes the read lock, Set the write lock. -race is clean over "
           "20 runs of the cache tests and across ./... .")
    s.prompt("commit it")
    checks(s, "go", [0, 1])
    commit(s, "cache: guard the TTL map with an RWMutex", ["internal/cache/cache.go"], "8d2e6b1", 7, 1)
    s.stop("Committed as 8d2e6b1.")
    s.end()

    # ---- s2: gorilla/mux -> chi
    s = h.session("2026-02-12T09:20:45Z", mode="acceptEdits")
    e_p_chi = s.prompt("Let's move the router from gorilla/mux to chi. We want chi's middleware chain (we're about to "
                       "add request IDs and timeouts per route group) and net/http compatible handlers. Keep the same routes.")
    orient(s)
    s.read("internal/httpapi/routes.go", ROUTES_GO)
    s.grep("mux\\.", "internal/httpapi/routes.go:10:\tr := mux.NewRouter()\ninternal/httpapi/handlers.go:10:\tid := mux.Vars(r)[\"id\"]\n"
           "internal/httpapi/handlers.go:22:\tid := mux.Vars(r)[\"id\"]\ninternal/httpapi/internal.go:14:\tid := mux.Vars(r)[\"id\"]\n", path="internal")
    s.bash("go get github.com/go-chi/chi/v5@v5.2.1", "go: added github.com/go-chi/chi/v5 v5.2.1\n", desc="Add chi", secs=2.0)
    e_chi_routes = s.write("internal/httpapi/routes.go", """package httpapi

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
)

func Routes(h *Handlers) http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.RealIP, middleware.Recoverer)
	r.Route("/orders", func(r chi.Router) {
		r.Use(middleware.Timeout(5 * time.Second))
		r.Get("/", h.ListOrders)
		r.Get("/{id}", h.GetOrder)
		r.Post("/{id}/cancel", h.CancelOrder)
	})
	r.Route("/internal", func(r chi.Router) {
		r.Use(h.RequireServiceToken)
		r.Post("/orders/{id}/reship", h.Reship)
	})
	return r
}
""")
    e_chi_build = s.bash("go build ./...", "", code=1, stderr=(
        "# github.com/acme/orders-svc/internal/httpapi\ninternal/httpapi/handlers.go:6:2: \"github.com/gorilla/mux\" imported and not used\n"
        "internal/httpapi/handlers.go:10:8: undefined: mux\ninternal/httpapi/handlers.go:22:8: undefined: mux\n"
        "internal/httpapi/internal.go:14:8: undefined: mux\n"), desc="Build", secs=3.6)
    s.read("internal/httpapi/handlers.go", HANDLERS_GO)
    e_chi_handlers = s.edit("internal/httpapi/handlers.go", """	"github.com/gorilla/mux"
)

func (h *Handlers) GetOrder(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]""", """	"github.com/go-chi/chi/v5"
)

func (h *Handlers) GetOrder(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")""")
    s.bash("sed -i 's/mux.Vars(r)\\[\"id\"\\]/chi.URLParam(r, \"id\")/; s#\"github.com/gorilla/mux\"#\"github.com/go-chi/chi/v5\"#' "
           "internal/httpapi/handlers.go internal/httpapi/internal.go && go build ./... && go mod tidy", "",
           desc="Replace the remaining mux.Vars calls, build, tidy", secs=5.0)
    s.bash("go test ./internal/httpapi/...", go_ok([("github.com/acme/orders-svc/internal/httpapi", "0.512")]), desc="HTTP tests")
    s.bash("grep -c gorilla go.mod go.sum", "go.mod:0\ngo.sum:0\n", desc="gorilla gone from go.mod")
    e_dec_chi = s.stop("Router is chi v5 now. Routes are grouped: /orders gets a 5 s middleware.Timeout, /internal keeps "
                       "RequireServiceToken, and RequestID/RealIP/Recoverer run on everything. Handlers read path params "
                       "with chi.URLParam instead of mux.Vars; gorilla/mux is gone from go.mod after go mod tidy.")
    s.prompt("run everything once more and commit")
    s.bash("go test ./...", go_ok([("github.com/acme/orders-svc/internal/cache", "0.021"), ("github.com/acme/orders-svc/internal/catalog", "0.180"),
                                   ("github.com/acme/orders-svc/internal/httpapi", "0.430"), ("github.com/acme/orders-svc/internal/pricing", "0.071")]),
           desc="All tests", secs=9.0)
    checks(s, "go")
    commit(s, "httpapi: replace gorilla/mux with chi", ["go.mod", "go.sum", "internal/httpapi/routes.go",
                                                        "internal/httpapi/handlers.go", "internal/httpapi/internal.go"], "e41c9a7", 28, 22)
    s.stop("Committed as e41c9a7.")
    s.end()

    # ---- s3: inventory deadline and retries
    s = h.session("2026-02-19T15:02:33Z", mode="acceptEdits")
    s.prompt("Checkout errors spiked: 'rpc error: code = DeadlineExceeded' from inventory Reserve during their deploys. "
             "Add retries with backoff for Unavailable/DeadlineExceeded, but only for Reserve which is idempotent "
             "(it takes a reservation id).")
    orient(s)
    s.read("internal/inventory/client.go", INVENTORY_GO)
    s.bash("kubectl -n shop logs deploy/orders-svc --since=2h | grep -c DeadlineExceeded", "412\n", desc="Count deadline errors")
    s.web_fetch("https://pkg.go.dev/github.com/cenkalti/backoff/v4", "How do I use ExponentialBackOff with a context and a max elapsed time? How do I mark an error permanent?",
                "backoff.Retry(operation, backoff.WithContext(b, ctx)). ExponentialBackOff fields: InitialInterval (500ms), "
                "Multiplier (1.5), MaxInterval (60s), MaxElapsedTime (15m). Return backoff.Permanent(err) to stop retrying.")
    e_inv_retry = s.edit("internal/inventory/client.go", """func (c *Client) Reserve(ctx context.Context, sku string, qty int32) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := c.api.Reserve(ctx, &pb.ReserveRequest{Sku: sku, Quantity: qty})
	return err
}""", """// Reserve is idempotent per reservation id, so transient failures are retried.
func (c *Client) Reserve(ctx context.Context, reservationID, sku string, qty int32) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 100 * time.Millisecond
	b.MaxElapsedTime = 3 * time.Second
	return backoff.Retry(func() error {
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_, err := c.api.Reserve(callCtx, &pb.ReserveRequest{ReservationId: reservationID, Sku: sku, Quantity: qty})
		switch status.Code(err) {
		case codes.OK:
			return nil
		case codes.Unavailable, codes.DeadlineExceeded:
			return err
		default:
			return backoff.Permanent(err)
		}
	}, backoff.WithContext(b, ctx))
}""")
    s.edit("internal/inventory/client.go", """	pb "github.com/acme/orders-svc/gen/inventory/v1"
)""", """	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/acme/orders-svc/gen/inventory/v1"
)""")
    e_inv_testfail = s.bash("go test ./internal/inventory/...", "--- FAIL: TestReserveRetriesUnavailable (3.01s)\n"
                            "    client_test.go:44: Reserve() error = rpc error: code = DeadlineExceeded desc = context deadline exceeded, want nil\n"
                            "    client_test.go:45: fake server saw 1 calls, want 3\nFAIL\n"
                            "FAIL\tgithub.com/acme/orders-svc/internal/inventory\t3.027s\nFAIL\n", code=1, desc="Inventory tests", secs=3.5)
    s.read("internal/inventory/client_test.go", """func TestReserveRetriesUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	fake := &fakeInventory{failFirst: 2, code: codes.Unavailable, delay: 2500 * time.Millisecond}
	c := newTestClient(t, fake)
	if err := c.Reserve(ctx, "res-1", "SKU-1", 1); err != nil {
		t.Fatalf("Reserve() error = %v, want nil", err)
	}
}
""")
    s.edit("internal/inventory/client_test.go", "fake := &fakeInventory{failFirst: 2, code: codes.Unavailable, delay: 2500 * time.Millisecond}",
           "fake := &fakeInventory{failFirst: 2, code: codes.Unavailable}")
    s.bash("go test ./internal/inventory/...", go_ok([("github.com/acme/orders-svc/internal/inventory", "0.412")]), desc="Inventory tests")
    s.stop("Reserve now takes a reservation id and retries Unavailable/DeadlineExceeded with exponential backoff "
           "(100 ms initial, 3 s max elapsed, bounded by the caller's context); other codes are permanent. Each attempt "
           "still has callTimeout = 2s. The test failure was the fake's 2.5 s delay exceeding the test context, not the retry.")
    s.prompt("update the checkout caller and commit")
    s.grep("\\.Reserve\\(", "internal/checkout/service.go:57:\tif err := s.inventory.Reserve(ctx, item.SKU, item.Qty); err != nil {\n", path="internal")
    h.seed("internal/checkout/service.go", """package checkout

func (s *Service) reserveAll(ctx context.Context, order *Order) error {
	for _, item := range order.Items {
		if err := s.inventory.Reserve(ctx, item.SKU, item.Qty); err != nil {
			return fmt.Errorf("reserve %s: %w", item.SKU, err)
		}
	}
	return nil
}
""")
    s.edit("internal/checkout/service.go", "s.inventory.Reserve(ctx, item.SKU, item.Qty)",
           "s.inventory.Reserve(ctx, order.ID+\":\"+item.SKU, item.SKU, item.Qty)")
    s.bash("go build ./... && go test ./...", go_ok([("github.com/acme/orders-svc/internal/checkout", "0.310"),
                                                    ("github.com/acme/orders-svc/internal/inventory", "0.398")]), desc="Build and test", secs=12.0)
    commit(s, "inventory: retry idempotent Reserve on Unavailable/DeadlineExceeded",
           ["go.mod", "go.sum", "internal/inventory/client.go", "internal/inventory/client_test.go", "internal/checkout/service.go"],
           "2fa08c3", 41, 6)
    s.stop("Checkout passes orderID:SKU as the reservation id. Committed as 2fa08c3.")
    s.end()

    # ---- s4: goroutine leak
    s = h.session("2026-02-26T10:44:02Z", mode="acceptEdits")
    s.prompt("orders-svc memory grows after each config reload, pprof shows thousands of goroutines in events.(*Consumer).Start. Find the leak.")
    orient(s)
    e_pprof = s.bash("go tool pprof -top -lines 'http://localhost:6060/debug/pprof/goroutine' 2>/dev/null | head -8",
                     "Showing nodes accounting for 4104, 99.95% of 4106 total\n      flat  flat%   sum%        cum   cum%\n"
                     "      4096 99.76% 99.76%       4096 99.76%  runtime.gopark\n         0     0% 99.76%       4092 99.66%  "
                     "github.com/acme/orders-svc/internal/events.(*Consumer).Start.func1 consumer.go:16\n", desc="Goroutine profile")
    s.read("internal/events/consumer.go", CONSUMER_GO)
    s.grep("Start\\(ctx", "cmd/orders-svc/main.go:88:\t\tconsumer.Start(ctx)\ninternal/config/reload.go:41:\t\tc.consumer.Start(c.ctx)\n", path=".")
    e_leakfix = s.edit("internal/events/consumer.go", """func (c *Consumer) Start(ctx context.Context) {
	for i := 0; i < 4; i++ {
		go func() {
			for msg := range c.sub.Messages() {
				if err := c.handle(ctx, msg); err != nil {
					slog.Error("handle order event", "err", err, "id", msg.ID)
				}
			}
		}()
	}
}""", """// Start runs 4 workers until ctx is cancelled. A config reload cancels the previous context, so
// workers must return on ctx.Done() instead of waiting on a channel that is never closed.
func (c *Consumer) Start(ctx context.Context) {
	for i := 0; i < 4; i++ {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case msg, ok := <-c.sub.Messages():
					if !ok {
						return
					}
					if err := c.handle(ctx, msg); err != nil {
						slog.Error("handle order event", "err", err, "id", msg.ID)
					}
				}
			}
		}()
	}
}""")
    s.write("internal/events/consumer_test.go", """package events

import (
	"context"
	"testing"

	"go.uber.org/goleak"
)

func TestStartStopsOnCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	c := &Consumer{sub: newFakeSub(), handle: func(context.Context, Message) error { return nil }}
	c.Start(ctx)
	cancel()
	waitWorkersDone(t)
}
""")
    s.bash("go get go.uber.org/goleak@v1.3.0 && go test ./internal/events/...", "go: added go.uber.org/goleak v1.3.0\n" +
           go_ok([("github.com/acme/orders-svc/internal/events", "0.108")]), desc="Add goleak and test")
    s.stop("The leak: each config reload called Consumer.Start again with a fresh context, but the old workers ranged "
           "over sub.Messages(), a channel that is never closed, so they never exited (4 goroutines per reload). Workers "
           "now select on ctx.Done(); reload.go cancels the old context. Added a goleak test.")
    s.prompt("ship it")
    checks(s, "go")
    diffstat(s, [("go.mod", 1, 0), ("go.sum", 2, 0), ("internal/events/consumer.go", 16, 7), ("internal/events/consumer_test.go", 18, 0)])
    commit(s, "events: stop consumer workers on context cancel (goroutine leak)", ["go.mod", "go.sum",
           "internal/events/consumer.go", "internal/events/consumer_test.go"], "c90b7d5", 37, 7)
    s.bash("git push origin main", "", stderr="To github.com:acme/orders-svc.git\n   2fa08c3..c90b7d5  main -> main\n", desc="Push")
    s.stop("Committed c90b7d5 and pushed.")
    s.end()

    # ---- s5: deadline bump
    s = h.session("2026-03-06T16:12:19Z", mode="acceptEdits")
    e_p_deadline = s.prompt("inventory moved to the other region, p99 for Reserve is now ~2.8s so the 2s per-call timeout cuts "
                            "off good calls. Raise the per-call timeout to 5s and the retry budget so we still get at least 2 attempts.")
    orient(s)
    s.read("internal/inventory/client.go")
    e_deadline5 = s.multiedit("internal/inventory/client.go", [
        ("const callTimeout = 2 * time.Second", "const callTimeout = 5 * time.Second"),
        ("b.MaxElapsedTime = 3 * time.Second", "b.MaxElapsedTime = 11 * time.Second"),
    ])
    s.bash("go test ./internal/inventory/...", go_ok([("github.com/acme/orders-svc/internal/inventory", "0.405")]), desc="Inventory tests")
    s.bash("grep -rn 'WriteTimeout\\|middleware.Timeout' internal cmd", "internal/httpapi/routes.go:15:\t\tr.Use(middleware.Timeout(5 * time.Second))\n"
           "cmd/orders-svc/main.go:64:\t\tWriteTimeout: 10 * time.Second,\n", desc="Check upstream timeouts")
    s.edit("internal/httpapi/routes.go", "r.Use(middleware.Timeout(5 * time.Second))", "r.Use(middleware.Timeout(15 * time.Second))")
    s.read("cmd/orders-svc/main.go", """	srv := &http.Server{
		Addr:         cfg.Addr,
		Handler:      httpapi.Routes(handlers),
		ReadTimeout:  5 * time.Second,
		WriteTimeout: 10 * time.Second,
	}
""")
    s.edit("cmd/orders-svc/main.go", "		WriteTimeout: 10 * time.Second,", "		WriteTimeout: 20 * time.Second,")
    s.bash("go test ./...", go_ok([("github.com/acme/orders-svc/internal/cache", "0.020"), ("github.com/acme/orders-svc/internal/checkout", "0.301"),
                                   ("github.com/acme/orders-svc/internal/events", "0.104"), ("github.com/acme/orders-svc/internal/httpapi", "0.440"),
                                   ("github.com/acme/orders-svc/internal/inventory", "0.401")]), desc="All tests", secs=10.0)
    s.stop("Per-call timeout to inventory is 5 s now with an 11 s retry budget (2 full attempts plus backoff). I also had "
           "to raise the /orders route timeout from 5 s to 15 s and the server WriteTimeout from 10 s to 20 s, otherwise "
           "the HTTP layer would cancel checkout before the retries finish.")
    s.prompt("ok commit")
    commit(s, "inventory: 5s per-call timeout, 11s retry budget; raise route/server timeouts",
           ["internal/inventory/client.go", "internal/httpapi/routes.go", "cmd/orders-svc/main.go"], "61db2e8", 4, 4)
    s.stop("Committed as 61db2e8.")
    s.end()

    h.q("fix_location", "Where was the data race that go test -race reported?", "data race",
        "internal/cache/cache.go: TTLCache map accessed without a lock; now guarded by a sync.RWMutex.",
        ["internal/cache/cache.go"], [e_racefix])
    h.q("decision", "Why did we switch the HTTP router to chi?", "chi router",
        "For chi's middleware chain (request IDs, per-group timeouts) and net/http-compatible handlers.",
        ["middleware chain"], [e_p_chi])
    h.q("failed_command", "What broke the build when we swapped the router?", "router build error",
        "go build: handlers.go and internal.go still used mux.Vars ('undefined: mux', gorilla/mux imported and not used).",
        ["undefined: mux"], [e_chi_build])
    h.q("file_history", "Which files did the router migration touch?", "router migration",
        "internal/httpapi/routes.go (rewritten for chi) and internal/httpapi/handlers.go (chi.URLParam), plus go.mod.",
        ["internal/httpapi/routes.go", "internal/httpapi/handlers.go"], [e_chi_routes, e_chi_handlers])
    h.q("knowledge_update", "What is the per-call timeout for inventory gRPC calls now?", "inventory call timeout",
        "5 seconds (raised from 2 s), with an 11 s retry budget.", ["callTimeout = 5 * time.Second"], [e_deadline5])
    h.q("fix_location", "Where did we fix the goroutine leak after config reloads?", "goroutine leak",
        "internal/events/consumer.go: workers select on ctx.Done() instead of ranging over a never-closed channel.",
        ["internal/events/consumer.go"], [e_leakfix])
    h.q("failed_command", "Why did the inventory retry test fail at first?", "inventory retry test",
        "TestReserveRetriesUnavailable: DeadlineExceeded, the fake server delay (2.5 s) exceeded the test context; it saw 1 call, want 3.",
        ["TestReserveRetriesUnavailable"], [e_inv_testfail])
    h.q("temporal", "Before we raised the inventory timeout, what retry setup did we first add for Reserve?",
        "reserve retry backoff",
        "Exponential backoff on Unavailable/DeadlineExceeded: 100 ms initial interval, 3 s MaxElapsedTime, 2 s per call.",
        ["MaxElapsedTime = 3 * time.Second"], [e_inv_retry])
