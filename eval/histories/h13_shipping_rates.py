from ._common import checks, commit, diffstat, orient, tree

CLIENT_RB = """class CarrierClient
  BASE_URL = ENV.fetch("CARRIER_API_URL")

  def initialize(http: Faraday.new(url: BASE_URL))
    @http = http
  end

  def quote(shipment)
    response = @http.post("/v3/rates", shipment.to_carrier_payload.to_json, "Content-Type" => "application/json")
    raise CarrierError, "rates #{response.status}" unless response.success?

    JSON.parse(response.body).fetch("rates").map { |r| Rate.from_carrier(r) }
  end
end
"""

QUOTE_SVC_RB = """class QuoteService
  def initialize(client: CarrierClient.new)
    @client = client
  end

  def call(shipment)
    @client.quote(shipment).min_by(&:amount_cents)
  end
end
"""

ZONE_RB = """class ShippingZone < ApplicationRecord
  def self.for_address(address)
    where(country: address.country).find_by("? LIKE postcode_prefix || '%'", address.postcode)
  end
end
"""


def build(ds):
    h = ds.history("h13", "codex", "/home/dev/src/shipping-rates",
                   "Rails service that quotes carrier shipping rates: carrier API timeouts and retries, caching "
                   "quotes in Redis, a Sidekiq refresh job, and a zone lookup bug for PO boxes.",
                   start="2026-02-02T08:00:00Z", model="gpt-5.5-codex")
    h.commits = [("2af81c0", "QuoteService picks the cheapest rate"), ("d07e5b3", "Carrier API v3"), ("94c3a1e", "Add rubocop to CI")]

    # ---- s1: timeouts
    s = h.session("2026-02-02T10:10:44Z")
    s.prompt("Checkout shows 'shipping unavailable' a few times an hour. The carrier API sometimes takes 20s+ and our "
             "Faraday has no timeout, so Puma threads pile up. Add a 5s timeout and 2 retries on timeouts and 502/503/504.")
    orient(s)
    tree(s, ["app/services/carrier_client.rb", "app/services/quote_service.rb", "app/services/address_validator.rb", "app/models/rate.rb", "app/models/shipment.rb", "app/models/shipping_zone.rb", "config/initializers/faraday.rb"], "app config")
    s.read("app/services/carrier_client.rb", CLIENT_RB)
    s.grep("Faraday.new", "app/services/carrier_client.rb:4:  def initialize(http: Faraday.new(url: BASE_URL))\n"
           "app/services/address_validator.rb:9:    @http = Faraday.new(url: ENV.fetch(\"ADDRESS_API_URL\"), request: { timeout: 3 })\n", path="app")
    e_retry = s.edit("app/services/carrier_client.rb", """  def initialize(http: Faraday.new(url: BASE_URL))
    @http = http
  end""", """  def initialize(http: self.class.default_http)
    @http = http
  end

  def self.default_http
    Faraday.new(url: BASE_URL, request: { open_timeout: 2, timeout: 5 }) do |f|
      f.request :retry, max: 2, interval: 0.3, backoff_factor: 2,
                        methods: %i[post], retry_statuses: [502, 503, 504],
                        exceptions: [Faraday::TimeoutError, Faraday::ConnectionFailed]
      f.adapter Faraday.default_adapter
    end
  end""")
    e_gem_err = s.bash("bundle exec rspec spec/services/carrier_client_spec.rb", "", code=1, stderr=(
        "An error occurred while loading ./spec/services/carrier_client_spec.rb.\nFailure/Error: f.request :retry, max: 2, interval: 0.3, backoff_factor: 2,\n\n"
        "Faraday::Error:\n  :retry is not registered on Faraday::Request\n# ./app/services/carrier_client.rb:10:in `block in default_http'\n"
        "No examples found.\n"), secs=4.0)
    s.bash("bundle add faraday-retry --version '~> 2.2'", "Fetching gem metadata from https://rubygems.org/.........\nInstalling faraday-retry 2.2.1\n", secs=6.0)
    s.edit("app/services/carrier_client.rb", 'class CarrierClient\n', 'require "faraday/retry"\n\nclass CarrierClient\n')
    s.bash("bundle exec rspec spec/services/carrier_client_spec.rb", "......\n\nFinished in 0.412 seconds (files took 2.31 seconds to load)\n6 examples, 0 failures\n", secs=4.0)
    s.stop("CarrierClient builds its Faraday connection with open_timeout 2 s and timeout 5 s, and retries POST /v3/rates "
           "twice (0.3 s then 0.6 s) on Faraday::TimeoutError, ConnectionFailed and 502/503/504. Faraday 2 moved the "
           "retry middleware into the faraday-retry gem, which is why the spec first failed with ':retry is not "
           "registered'; the gem is added and required.")
    s.prompt("commit it")
    checks(s, "ruby")
    commit(s, "CarrierClient: 5s timeout, 2 retries on timeouts and 5xx", ["Gemfile", "Gemfile.lock", "app/services/carrier_client.rb"], "6b2e0d7", 17, 3)
    s.stop("Committed as 6b2e0d7.")

    # ---- s2: caching
    s = h.session("2026-02-05T14:30:12Z")
    e_p_cache = s.prompt("Most quotes are repeats (same origin, destination postcode and parcel size within minutes). "
                         "Cache carrier rates in Redis for 10 minutes keyed on those, so we hit the carrier less and "
                         "checkout is faster. Don't cache errors.")
    orient(s)
    tree(s, ["app/services/carrier_client.rb", "app/services/quote_service.rb", "spec/services/carrier_client_spec.rb", "spec/factories/rates.rb", "spec/factories/shipments.rb"], "app/services spec")
    s.read("app/services/quote_service.rb", QUOTE_SVC_RB)
    s.read("config/environments/production.rb", """Rails.application.configure do
  config.cache_store = :redis_cache_store, { url: ENV.fetch("REDIS_URL"), namespace: "rates" }
end
""")
    e_cache10 = s.edit("app/services/quote_service.rb", """  def call(shipment)
    @client.quote(shipment).min_by(&:amount_cents)
  end""", """  CACHE_TTL = 10.minutes

  def call(shipment)
    rates = Rails.cache.fetch(cache_key(shipment), expires_in: CACHE_TTL) do
      @client.quote(shipment) # raises on errors, so failures are never cached
    end
    rates.min_by(&:amount_cents)
  end

  private

  def cache_key(shipment)
    ["quote", shipment.origin_postcode, shipment.destination.country, shipment.destination.postcode,
     shipment.parcel.weight_grams.ceil(-2), shipment.parcel.dimensions_cm.join("x")].join(":")
  end""")
    s.write("spec/services/quote_service_spec.rb", """RSpec.describe QuoteService do
  let(:client) { instance_double(CarrierClient) }
  subject(:service) { described_class.new(client: client) }

  around { |ex| with_memory_cache { ex.run } }

  it "asks the carrier once for repeated quotes" do
    allow(client).to receive(:quote).and_return([build(:rate, amount_cents: 990)])
    2.times { service.call(build(:shipment)) }
    expect(client).to have_received(:quote).once
  end

  it "does not cache errors" do
    allow(client).to receive(:quote).and_raise(CarrierError).once
    expect { service.call(build(:shipment)) }.to raise_error(CarrierError)
    allow(client).to receive(:quote).and_return([build(:rate)])
    expect(service.call(build(:shipment))).to be_present
  end
end
""")
    e_marshal = s.bash("bundle exec rspec spec/services/quote_service_spec.rb", "", code=1, stderr=(
        "F.\n\nFailures:\n\n  1) QuoteService asks the carrier once for repeated quotes\n     Failure/Error: rates = Rails.cache.fetch(cache_key(shipment), expires_in: CACHE_TTL) do\n\n"
        "     TypeError:\n       can't dump anonymous class #<Class:0x000075c1a8e3f0d8>\n"
        "     # ./app/services/quote_service.rb:9:in `call'\n\n2 examples, 1 failure\n"), secs=5.0)
    s.bash("sed -n '1,20p' spec/factories/rates.rb", "FactoryBot.define do\n  factory :rate, class: Struct.new(:carrier, :service, :amount_cents) do\n"
           "    carrier { \"dhl\" }\n    service { \"express\" }\n    amount_cents { 1290 }\n  end\nend\n")
    s.bash("sed -i 's/class: Struct.new(:carrier, :service, :amount_cents)/class: \"Rate\"/' spec/factories/rates.rb && "
           "bundle exec rspec spec/services/quote_service_spec.rb", "..\n\nFinished in 0.198 seconds (files took 2.4 seconds to load)\n2 examples, 0 failures\n", secs=5.0)
    s.stop("QuoteService caches the carrier's rate list in Rails.cache (the Redis store) for CACHE_TTL = 10 minutes, "
           "keyed on origin postcode, destination country/postcode, weight rounded to 100 g and dimensions. Errors "
           "raise inside the fetch block so they are never cached. The spec failed at first because the rate factory "
           "built an anonymous Struct that Marshal can't dump; it now builds the real Rate class.")
    s.prompt("commit")
    diffstat(s, [("app/services/quote_service.rb", 16, 1), ("spec/factories/rates.rb", 1, 1), ("spec/services/quote_service_spec.rb", 21, 0)])
    commit(s, "Cache carrier quotes for 10 minutes", ["app/services/quote_service.rb", "spec/services/quote_service_spec.rb",
           "spec/factories/rates.rb"], "b4a7c90", 38, 2)
    s.stop("Committed as b4a7c90.")

    # ---- s3: sidekiq refresh job + rubocop
    s = h.session("2026-02-11T09:02:55Z")
    s.prompt("Add a Sidekiq job that pre-warms the cache for our top 200 routes every night, retry 5 times, and make "
             "rubocop pass, CI is red since yesterday")
    orient(s)
    tree(s, ["app/jobs/purge_stale_labels_job.rb", "config/sidekiq.yml", "app/models/route.rb", ".rubocop.yml"], "app/jobs config app/models/route.rb .rubocop.yml")
    e_rubocop = s.bash("bundle exec rubocop", "Inspecting 88 files\n..........C.......\n\nOffenses:\n\n"
                       "app/services/quote_service.rb:22:5: C: Metrics/AbcSize: Assignment Branch Condition size for cache_key is too high. [<1, 19, 0> 19.03/17]\n"
                       "    def cache_key(shipment) ...\n    ^^^^^^^^^^^^^^^^^^^^^^^\n\n88 files inspected, 1 offense detected\n", code=1, secs=6.0)
    s.read("app/services/quote_service.rb")
    e_cachekey = s.edit("app/services/quote_service.rb", """  def cache_key(shipment)
    ["quote", shipment.origin_postcode, shipment.destination.country, shipment.destination.postcode,
     shipment.parcel.weight_grams.ceil(-2), shipment.parcel.dimensions_cm.join("x")].join(":")
  end""", """  def cache_key(shipment)
    ["quote", shipment.origin_postcode, *destination_key(shipment.destination), parcel_key(shipment.parcel)].join(":")
  end

  def destination_key(dest) = [dest.country, dest.postcode]

  def parcel_key(parcel) = "#{parcel.weight_grams.ceil(-2)}g-#{parcel.dimensions_cm.join('x')}"
""")
    e_job = s.write("app/jobs/rate_warmup_job.rb", """class RateWarmupJob
  include Sidekiq::Job
  sidekiq_options queue: :low, retry: 5

  TOP_ROUTES = 200

  def perform
    Route.most_quoted(limit: TOP_ROUTES).find_each do |route|
      QuoteService.new.call(route.sample_shipment)
    rescue CarrierError => e
      Rails.logger.warn("rate warmup failed for route #{route.id}: #{e.message}")
    end
  end
end
""")
    s.read("config/sidekiq.yml", """:scheduler:
  :schedule:
    purge_stale_labels:
      cron: "0 2 * * *"
      class: PurgeStaleLabelsJob
""")
    s.edit("config/sidekiq.yml", """      class: PurgeStaleLabelsJob""", """      class: PurgeStaleLabelsJob
    rate_warmup:
      cron: "30 5 * * *"
      class: RateWarmupJob""")
    s.bash("bundle exec rubocop && bundle exec rspec", "Inspecting 89 files\n.........................................................................................\n\n"
           "89 files inspected, no offenses detected\n" + "." * 60 + "\n\nFinished in 4.91 seconds (files took 2.6 seconds to load)\n142 examples, 0 failures\n", secs=12.0)
    s.stop("RubyCop's Metrics/AbcSize flagged QuoteService#cache_key; it's split into destination_key and parcel_key. "
           "RateWarmupJob (Sidekiq, queue low, retry: 5) quotes the 200 most-quoted routes at 05:30 daily via "
           "sidekiq-scheduler so the cache is warm before the morning peak; one route failing doesn't stop the rest.")
    s.prompt("commit")
    diffstat(s, [("app/jobs/rate_warmup_job.rb", 16, 0), ("app/services/quote_service.rb", 6, 2), ("config/sidekiq.yml", 3, 0)])
    commit(s, "RateWarmupJob for top routes; fix rubocop AbcSize", ["app/services/quote_service.rb", "app/jobs/rate_warmup_job.rb",
           "config/sidekiq.yml", "spec/jobs/rate_warmup_job_spec.rb"], "e58f1b2", 41, 3)
    s.stop("Committed as e58f1b2.")

    # ---- s4: TTL 30m and PO boxes
    s = h.session("2026-02-18T11:45:20Z")
    s.prompt("Carrier invoices show we're still calling them 400k times a day. Their rates only change at midnight, "
             "so 30 minutes of cache is safe, product agreed. Bump it.")
    orient(s)
    s.bash("bin/rails runner 'puts Rails.cache.redis.with { |r| r.info(\"stats\").values_at(\"keyspace_hits\", \"keyspace_misses\") }.join(\" \")'", "8123341 412907\n")
    s.read("app/services/quote_service.rb")
    e_cache30 = s.edit("app/services/quote_service.rb", "  CACHE_TTL = 10.minutes", "  CACHE_TTL = 30.minutes # carrier rates only change at midnight")
    s.bash("bundle exec rspec spec/services/quote_service_spec.rb", "..\n\nFinished in 0.2 seconds (files took 2.3 seconds to load)\n2 examples, 0 failures\n", secs=4.0)
    s.stop("CACHE_TTL is 30 minutes now.")
    e_p_pobox = s.prompt("also: quotes to PO boxes in Canada pick the wrong zone (remote instead of urban). Example "
                         "postcode 'H3Z 2Y7' with address line 'PO Box 1200'. Look at ShippingZone.for_address")
    s.read("app/models/shipping_zone.rb", ZONE_RB)
    s.bash("bin/rails runner 'a = Address.new(country: \"CA\", postcode: \"H3Z 2Y7\", line1: \"PO Box 1200\"); p ShippingZone.for_address(a)&.name; "
           "p ShippingZone.where(country: \"CA\").where(\"postcode_prefix LIKE ?\", \"H%\").pluck(:postcode_prefix, :name)'",
           "\"CA-remote\"\n[[\"H\", \"CA-remote\"], [\"H3Z\", \"CA-urban-montreal\"]]\n", secs=5.0)
    e_zonefix = s.edit("app/models/shipping_zone.rb", """  def self.for_address(address)
    where(country: address.country).find_by("? LIKE postcode_prefix || '%'", address.postcode)
  end""", """  def self.for_address(address)
    # Longest matching prefix wins ("H3Z" over "H"); without the order the first row found was arbitrary.
    where(country: address.country)
      .where("? LIKE postcode_prefix || '%'", address.postcode.delete(" ").upcase)
      .order(Arel.sql("length(postcode_prefix) DESC"))
      .first
  end""")
    s.write("spec/models/shipping_zone_spec.rb", """RSpec.describe ShippingZone do
  it "prefers the longest postcode prefix" do
    create(:shipping_zone, country: "CA", postcode_prefix: "H", name: "CA-remote")
    create(:shipping_zone, country: "CA", postcode_prefix: "H3Z", name: "CA-urban-montreal")
    address = Address.new(country: "CA", postcode: "h3z 2y7")
    expect(described_class.for_address(address).name).to eq("CA-urban-montreal")
  end
end
""")
    s.bash("bundle exec rspec spec/models/shipping_zone_spec.rb", ".\n\nFinished in 0.09 seconds (files took 2.3 seconds to load)\n1 example, 0 failures\n", secs=4.0)
    s.stop("Not PO-box specific: for_address returned whichever matching prefix row Postgres found first, so 'H' "
           "(CA-remote) could win over 'H3Z' (CA-urban-montreal). It now normalises the postcode (no spaces, upper "
           "case) and orders by prefix length descending. Spec added.")
    s.prompt("commit both changes separately")
    commit(s, "Quote cache TTL 30 minutes", ["app/services/quote_service.rb"], "71c0e4d", 1, 1)
    commit(s, "ShippingZone.for_address: longest postcode prefix wins", ["app/models/shipping_zone.rb", "spec/models/shipping_zone_spec.rb"],
           "0f93ab8", 14, 1)
    s.stop("Committed 71c0e4d (TTL) and 0f93ab8 (zone lookup).")

    h.q("fix_location", "Where did we add the timeout and retries for the carrier API?", "carrier api timeout",
        "app/services/carrier_client.rb default_http: 5 s timeout, faraday-retry with max 2 on timeouts and 502/503/504.",
        ["app/services/carrier_client.rb"], [e_retry])
    h.q("failed_command", "Why did the carrier client spec fail to load after adding retries?", "retry middleware error",
        "':retry is not registered on Faraday::Request' (Faraday 2 needs the faraday-retry gem).", [":retry is not registered"], [e_gem_err])
    h.q("knowledge_update", "How long are carrier quotes cached now?", "quote cache duration",
        "30 minutes (CACHE_TTL, was 10 minutes).", ["CACHE_TTL = 30.minutes"], [e_cache30])
    h.q("decision", "Why did we start caching carrier rates?", "cache carrier rates",
        "Most quotes repeat within minutes (same origin, destination postcode, parcel size); fewer carrier calls and faster checkout.",
        ["Most quotes are repeats"], [e_p_cache])
    h.q("failed_command", "What error did the quote caching spec hit?", "quote cache spec",
        "TypeError: can't dump anonymous class (the rate factory used an anonymous Struct).", ["can't dump anonymous class"], [e_marshal])
    h.q("failed_command", "Which rubocop offense made CI red before the warm-up job?", "rubocop offense",
        "Metrics/AbcSize on QuoteService#cache_key.", ["Metrics/AbcSize"], [e_rubocop])
    h.q("fix_location", "Where was the wrong shipping zone for Canadian PO boxes fixed?", "wrong shipping zone",
        "app/models/shipping_zone.rb for_address: normalised postcode, longest prefix first.", ["app/models/shipping_zone.rb"], [e_zonefix])
    h.q("file_history", "Which files did we add or change for the nightly cache warm-up?", "cache warmup job",
        "app/jobs/rate_warmup_job.rb (new, retry 5) and config/sidekiq.yml schedule; cache_key refactor in quote_service.rb.",
        ["app/jobs/rate_warmup_job.rb"], [e_job])
    h.q("temporal", "What cache lifetime did we start with for quotes?", "quote cache ttl",
        "10 minutes (CACHE_TTL = 10.minutes).", ["CACHE_TTL = 10.minutes"], [e_cache10])
