from ._common import checks, commit, go_ok, orient, tree

BOUNDS_GO = """package tiles

import "math"

// Bounds returns the Web Mercator bounding box (minx, miny, maxx, maxy) of tile z/x/y.
func Bounds(z, x, y int) (float64, float64, float64, float64) {
	n := math.Exp2(float64(z))
	size := 2 * originShift / n
	minx := -originShift + float64(x)*size
	miny := -originShift + float64(y)*size
	return minx, miny, minx + size, miny + size
}

const originShift = 20037508.342789244
"""

CACHE_GO = """package server

import lru "github.com/hashicorp/golang-lru/v2"

const cacheEntries = 20_000

func newTileCache() *lru.Cache[string, []byte] {
	c, _ := lru.New[string, []byte](cacheEntries)
	return c
}
"""

QUERY_GO = """package tiles

const mvtQuery = `
WITH bounds AS (SELECT ST_TileEnvelope($1, $2, $3) AS geom)
SELECT ST_AsMVT(q, 'roads', 4096, 'geom') FROM (
  SELECT id, class, ST_AsMVTGeom(r.geom, bounds.geom, 4096, 64, true) AS geom
  FROM roads r, bounds
  WHERE r.geom && bounds.geom
) q`
"""


def build(ds):
    h = ds.history("h17", "gemini", "/home/dev/src/geo-tiles",
                   "Go vector tile server on PostGIS: tiles rendered at the wrong place (TMS vs XYZ y axis), tile cache "
                   "sizing, slow low-zoom queries simplified per zoom, and CORS for the new web map.",
                   start="2026-02-16T08:00:00Z", model="gemini-2.5-pro")
    h.commits = [("7d0c2b9", "Serve roads layer as MVT"), ("e31a5f4", "In-memory LRU for tiles"), ("0b8e6a1", "Dockerfile: distroless")]

    # ---- s1: flipped tiles
    s = h.session("2026-02-16T10:02:44Z")
    s.prompt("Tiles show roads from the wrong hemisphere: at zoom 14 over Oslo we get empty tiles, and roads appear "
             "in the south. Only the y axis seems off. Check tiles.Bounds.")
    orient(s)
    s.read("internal/tiles/bounds.go", BOUNDS_GO)
    s.grep("Bounds\\(", "internal/tiles/render.go:22:\tminx, miny, maxx, maxy := Bounds(z, x, y)\ninternal/tiles/bounds_test.go:9:\tminx, miny, maxx, maxy := Bounds(0, 0, 0)\n")
    s.bash("curl -s 'localhost:8080/tiles/roads/14/8680/4764.pbf' | wc -c; curl -s 'localhost:8080/tiles/roads/14/8680/11619.pbf' | wc -c",
           "0\n48211\n", desc="Oslo tile vs its y-flipped twin")
    e_yflip = s.edit("internal/tiles/bounds.go", """	minx := -originShift + float64(x)*size
	miny := -originShift + float64(y)*size
	return minx, miny, minx + size, miny + size""", """	minx := -originShift + float64(x)*size
	// XYZ (what MapLibre requests) counts y from the top; TMS counts from the bottom.
	maxy := originShift - float64(y)*size
	return minx, maxy - size, minx + size, maxy""")
    s.write("internal/tiles/bounds_oslo_test.go", """package tiles

import "testing"

// Oslo, zoom 14, XYZ tile 8680/4764 contains 10.75E 59.91N (x=1196712, y=8380731 in EPSG:3857).
func TestBoundsOslo(t *testing.T) {
	minx, miny, maxx, maxy := Bounds(14, 8680, 4764)
	if !(minx <= 1196712 && 1196712 <= maxx && miny <= 8380731 && 8380731 <= maxy) {
		t.Fatalf("Oslo not in tile: %v %v %v %v", minx, miny, maxx, maxy)
	}
}
""")
    s.bash("go test ./internal/tiles/...", go_ok([("github.com/acme/geo-tiles/internal/tiles", "0.014")]), desc="Tile tests")
    s.bash("go run ./cmd/tileserver & sleep 2; curl -s 'localhost:8080/tiles/roads/14/8680/4764.pbf' | wc -c", "52980\n", desc="Oslo tile now")
    s.stop("tiles.Bounds computed y as in TMS (counting from the south), but MapLibre requests XYZ tiles counted from "
           "the north, so every tile was mirrored across the equator. Bounds now derives maxy = originShift - y*size. "
           "Added TestBoundsOslo; the Oslo z14 tile returns 53 kB of roads.")
    s.prompt("commit")
    checks(s, "go", [0, 1])
    commit(s, "tiles: XYZ y axis in Bounds (tiles were mirrored)", ["internal/tiles/bounds.go", "internal/tiles/bounds_oslo_test.go"], "5c2f7e0", 14, 2)
    s.stop("Committed as 5c2f7e0.")
    s.end()

    # ---- s2: tile cache sizing
    s = h.session("2026-02-19T14:25:10Z")
    e_p_cache = s.prompt("The LRU counts entries (20k) but tiles range from 200 bytes to 900 KB, so memory is "
                         "unpredictable; a pod got OOM killed at 2 GB. Bound the cache by bytes instead, 512 MB.")
    orient(s)
    s.read("internal/server/cache.go", CACHE_GO)
    s.web_search("go LRU cache size by bytes cost function", [("dgraph-io/ristretto: A high performance memory-bound Go cache", "https://github.com/dgraph-io/ristretto"),
                 ("golang-lru expirable and cost", "https://pkg.go.dev/github.com/hashicorp/golang-lru/v2")],
                 "hashicorp/golang-lru counts entries only. ristretto supports a per-item cost with MaxCost as the budget (e.g. bytes) and "
                 "admission via TinyLFU; NumCounters should be ~10x the expected number of items.")
    e_ristretto = s.write("internal/server/cache.go", """package server

import "github.com/dgraph-io/ristretto/v2"

// Tiles vary from ~200 B to ~900 KB, so the budget is in bytes, not entries.
const cacheMaxBytes = 512 << 20

func newTileCache() *ristretto.Cache[string, []byte] {
	c, err := ristretto.NewCache(&ristretto.Config[string, []byte]{
		NumCounters: 1_000_000, // ~10x the tiles we expect to hold
		MaxCost:     cacheMaxBytes,
		BufferItems: 64,
		Cost:        func(b []byte) int64 { return int64(len(b)) },
	})
	if err != nil {
		panic(err)
	}
	return c
}
""")
    e_ristretto_build = s.bash("go mod tidy && go build ./...", "", code=1, stderr=(
        "# github.com/acme/geo-tiles/internal/server\ninternal/server/handler.go:41:18: s.cache.Add undefined (type *ristretto.Cache[string, []byte] has no field or method Add)\n"),
        desc="Build", secs=9.0)
    s.read("internal/server/handler.go", """	if b, ok := s.cache.Get(key); ok {
		writeTile(w, b)
		return
	}
	b, err := s.render(r.Context(), z, x, y)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.cache.Add(key, b)
	writeTile(w, b)
""")
    s.edit("internal/server/handler.go", "	s.cache.Add(key, b)", "	s.cache.Set(key, b, 0) // cost computed by Config.Cost")
    s.bash("go build ./... && go test ./internal/server/...", go_ok([("github.com/acme/geo-tiles/internal/server", "0.231")]), desc="Build and test", secs=10.0)
    s.stop("The tile cache is a ristretto cache with a 512 MB MaxCost where each tile costs len(bytes), so memory is "
           "bounded no matter the tile mix. handler.go uses Set instead of golang-lru's Add (that's what broke the build).")
    s.prompt("commit")
    commit(s, "Tile cache bounded by bytes (ristretto, 512MB)", ["go.mod", "go.sum", "internal/server/cache.go", "internal/server/handler.go"],
           "a90d4c7", 22, 9)
    s.stop("Committed as a90d4c7.")
    s.end()

    # ---- s3: slow low zoom
    s = h.session("2026-02-25T09:13:28Z")
    s.prompt("Zoom 5-8 tiles take 3-6 seconds and time out on the CDN. They return every road vertex. Simplify "
             "geometries by zoom in the SQL.")
    orient(s)
    tree(s, ["cmd/tileserver/main.go", "internal/server/cache.go", "internal/server/handler.go", "internal/tiles/bounds.go",
             "internal/tiles/query.go", "internal/tiles/render.go"], "cmd internal")
    s.read("internal/tiles/query.go", QUERY_GO)
    e_explain = s.bash("psql \"$TILES_DB_URL\" -c \"EXPLAIN (ANALYZE, BUFFERS) SELECT ST_AsMVT(q,'roads') FROM (SELECT id, class, "
                       "ST_AsMVTGeom(geom, ST_TileEnvelope(6,33,18), 4096, 64, true) geom FROM roads WHERE geom && ST_TileEnvelope(6,33,18)) q\" | tail -3",
                       " Planning Time: 0.412 ms\n Execution Time: 5873.220 ms\n(14 rows)\n", desc="Explain a zoom 6 tile")
    e_simplify = s.write("internal/tiles/query.go", """package tiles

// Low zooms: drop minor roads and simplify to roughly one pixel at 4096 extent, so a z6 tile
// doesn't carry every vertex of the network.
const mvtQuery = `
WITH bounds AS (SELECT ST_TileEnvelope($1, $2, $3) AS geom),
     px AS (SELECT (40075016.68 / (2 ^ $1)) / 4096 AS size)
SELECT ST_AsMVT(q, 'roads', 4096, 'geom') FROM (
  SELECT id, class,
         ST_AsMVTGeom(CASE WHEN $1 < 12 THEN ST_SimplifyPreserveTopology(r.geom, px.size) ELSE r.geom END,
                      bounds.geom, 4096, 64, true) AS geom
  FROM roads r, bounds, px
  WHERE r.geom && bounds.geom
    AND ($1 >= 10 OR r.class IN ('motorway', 'trunk', 'primary'))
) q`
""")
    s.bash("go test ./internal/tiles/... && go run ./cmd/bench -z 6 -n 50", go_ok([("github.com/acme/geo-tiles/internal/tiles", "0.019")]) +
           "z6: 50 tiles p50=212ms p95=388ms avg size=61KB\n", desc="Tests and z6 bench", secs=30.0)
    e_vet = s.bash("go vet ./...", "# github.com/acme/geo-tiles/cmd/bench\ncmd/bench/main.go:47:3: fmt.Printf format %d has arg p50 of wrong type time.Duration\n",
                   code=1, desc="Vet", secs=5.0)
    s.read("cmd/bench/main.go", """	fmt.Printf("z%d: %d tiles p50=%d p95=%d avg size=%dKB\\n", z, n, p50, p95, avg/1024)
""")
    s.edit("cmd/bench/main.go", """	fmt.Printf("z%d: %d tiles p50=%d p95=%d avg size=%dKB\\n", z, n, p50, p95, avg/1024)""",
           """	fmt.Printf("z%d: %d tiles p50=%v p95=%v avg size=%dKB\\n", z, n, p50.Round(time.Millisecond), p95.Round(time.Millisecond), avg/1024)""")
    s.bash("go vet ./...", "", desc="Vet")
    s.stop("mvtQuery now simplifies geometries below zoom 12 with ST_SimplifyPreserveTopology at one pixel of the 4096 "
           "extent and keeps only motorway/trunk/primary below zoom 10. A z6 tile went from 5.9 s to p50 212 ms, p95 388 ms. "
           "go vet also flagged a %d for a time.Duration in cmd/bench; fixed.")
    s.prompt("commit")
    commit(s, "tiles: simplify and filter roads at low zooms", ["internal/tiles/query.go", "cmd/bench/main.go"], "3e61b8d", 13, 4)
    s.stop("Committed as 3e61b8d.")
    s.end()

    # ---- s4: cache 2GB, CORS
    s = h.session("2026-03-05T11:40:02Z")
    s.prompt("Two things. Cache hit rate is only 61% with 512MB; the pods now have 6GB limits, so raise the tile cache "
             "to 2GB. And the new web map on maps.acme.dev gets CORS errors.")
    orient(s)
    s.read("internal/server/cache.go")
    e_cache2g = s.edit("internal/server/cache.go", "const cacheMaxBytes = 512 << 20", "const cacheMaxBytes = 2 << 30 // pods have 6 GiB since 2026-03; 512 MiB hit only 61%")
    e_cors_err = s.bash("curl -s -o /dev/null -D - -H 'Origin: https://maps.acme.dev' localhost:8080/tiles/roads/10/545/297.pbf | grep -i access-control || echo 'no CORS headers'",
                        "no CORS headers\n", desc="Check CORS headers")
    s.read("cmd/tileserver/main.go", """	mux := http.NewServeMux()
	mux.Handle("/tiles/", srv)
	log.Fatal(http.ListenAndServe(cfg.Addr, mux))
""")
    e_cors = s.edit("cmd/tileserver/main.go", """	log.Fatal(http.ListenAndServe(cfg.Addr, mux))""", """	handler := cors.New(cors.Options{
		AllowedOrigins: []string{"https://maps.acme.dev", "http://localhost:5173"},
		AllowedMethods: []string{http.MethodGet, http.MethodHead},
		MaxAge:         86400,
	}).Handler(mux)
	log.Fatal(http.ListenAndServe(cfg.Addr, handler))""")
    s.bash("go get github.com/rs/cors@v1.11.1 && go build ./... && (go run ./cmd/tileserver &) && sleep 2 && "
           "curl -s -o /dev/null -D - -H 'Origin: https://maps.acme.dev' localhost:8080/tiles/roads/10/545/297.pbf | grep -i access-control",
           "go: added github.com/rs/cors v1.11.1\nAccess-Control-Allow-Origin: https://maps.acme.dev\nVary: Origin\n", desc="Add rs/cors and check", secs=8.0)
    s.stop("Tile cache budget is 2 GiB (cacheMaxBytes). Tiles are served through rs/cors allowing https://maps.acme.dev "
           "and the Vite dev origin for GET/HEAD with a 1-day preflight cache.")
    s.prompt("commit")
    commit(s, "Tile cache 2GiB; CORS for maps.acme.dev", ["go.mod", "go.sum", "internal/server/cache.go", "cmd/tileserver/main.go"], "f0c7a23", 9, 2)
    s.stop("Committed as f0c7a23.")
    s.end()

    h.q("fix_location", "Where did we fix tiles showing roads mirrored to the wrong hemisphere?", "tiles wrong place",
        "internal/tiles/bounds.go Bounds: y counted from the top (XYZ) instead of TMS.", ["internal/tiles/bounds.go"], [e_yflip])
    h.q("decision", "Why did we change how the tile cache is bounded?", "tile cache memory",
        "Entry-count LRU made memory unpredictable (tiles 200 B to 900 KB) and a pod was OOM-killed at 2 GB; now bounded by bytes.",
        ["unpredictable"], [e_p_cache])
    h.q("failed_command", "What broke the build when we switched cache libraries?", "cache library build",
        "s.cache.Add undefined on *ristretto.Cache (use Set).", ["has no field or method Add"], [e_ristretto_build])
    h.q("knowledge_update", "How big is the tile cache now?", "tile cache size",
        "2 GiB (cacheMaxBytes = 2 << 30; was 512 MiB).", ["2 << 30"], [e_cache2g])
    h.q("temporal", "What byte budget did the tile cache get when we first bounded it by size?", "tile cache budget",
        "512 MiB (cacheMaxBytes = 512 << 20) with ristretto.", ["512 << 20"], [e_ristretto])
    h.q("fix_location", "How did we speed up the low-zoom tiles?", "low zoom tiles",
        "internal/tiles/query.go: ST_SimplifyPreserveTopology below zoom 12 and only major roads below zoom 10.",
        ["internal/tiles/query.go", "ST_SimplifyPreserveTopology"], [e_simplify])
    h.q("failed_command", "What did go vet report after the simplification change?", "go vet",
        "cmd/bench/main.go: fmt.Printf format %d has arg p50 of wrong type time.Duration.", ["wrong type time.Duration"], [e_vet])
    h.q("temporal", "How slow was a zoom 6 tile before we simplified the geometries?", "zoom 6 tile time",
        "About 5.9 s (Execution Time: 5873.220 ms).", ["5873.220 ms"], [e_explain])
    h.q("file_history", "What did we change in the tile server's main.go?", "tileserver main",
        "cmd/tileserver/main.go wraps the mux in rs/cors allowing https://maps.acme.dev and localhost:5173.",
        ["cmd/tileserver/main.go"], [e_cors])
