package server

import (
	"context"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/holdfast/holdfast"
)

// Metrics counts requests, lock operations and the store transactions
// that commit them for /metrics. It is a holdfast.CommitObserver: give the
// same value to holdfast.Config.Observer and to Config.Metrics.
type Metrics struct {
	registry *prometheus.Registry
	handler  http.Handler

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	operations      *prometheus.CounterVec
	opDuration      *prometheus.HistogramVec
	commitOps       prometheus.Histogram
	commitDuration  prometheus.Histogram
	streams         prometheus.Gauge
	storeUp         *storeUpCollector

	// The series of each request and operation, looked up once:
	// WithLabelValues hashes the values and takes the vector's lock on
	// every call, which every request paid for twice.
	requestSeries seriesCache[requestLabels, requestMetrics]
	opSeries      seriesCache[opLabels, opMetrics]
}

type requestLabels struct {
	route, method string
	status        int
}

type requestMetrics struct {
	count    prometheus.Counter
	duration prometheus.Observer // nil for event streams
}

type opLabels struct{ op, outcome string }

type opMetrics struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// seriesCache holds the series of metric vectors by their labels.
type seriesCache[K comparable, S any] struct{ m sync.Map }

func (c *seriesCache[K, S]) get(labels K, create func() S) S {
	if s, ok := c.m.Load(labels); ok {
		return s.(S)
	}
	s, _ := c.m.LoadOrStore(labels, create())
	return s.(S)
}

var _ holdfast.CommitObserver = (*Metrics)(nil)

// NewMetrics returns Metrics with its own registry, which also holds the
// Go runtime and process collectors. Whether the store is up is reported
// once a Server is made with it, which gives it the Manager to ask.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		registry: reg,
		storeUp:  &storeUpCollector{timeout: storeUpTimeout},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_http_requests_total",
			Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "holdfast_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests, by route and method (event streams excluded).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route", "method"}),
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_operations_total",
			Help: "Lock manager operations by operation and outcome (ok or an API error code).",
		}, []string{"op", "outcome"}),
		opDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "holdfast_operation_duration_seconds",
			Help:    "Time of lock manager operations, including the store's commit.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"op"}),
		commitOps: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "holdfast_commit_operations",
			Help:    "Operations that shared one store transaction (a batch counts its operations).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		commitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "holdfast_commit_duration_seconds",
			Help:    "Time of the store transactions that commit operations, the durable commit included.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16),
		}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "holdfast_event_streams",
			Help: "Open /v1/events streams.",
		}),
	}
	buildInfo := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "holdfast_build_info",
		Help:        "Always 1; its labels are the version of holdfast and of Go it was built with.",
		ConstLabels: prometheus.Labels{"version": mainVersion(), "goversion": runtime.Version()},
	}, func() float64 { return 1 })
	reg.MustRegister(m.requests, m.requestDuration, m.operations, m.opDuration, m.commitOps, m.commitDuration, m.streams,
		buildInfo, m.storeUp,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return m
}

// mainVersion is the main module's version, as `holdfast version` prints
// it: "(devel)" for a build from a checkout without version control
// information, and "unknown" without build information at all.
func mainVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "unknown"
}

// storeUpTimeout bounds the store's ping at a scrape, well inside
// Prometheus's default scrape timeout of 10s.
const storeUpTimeout = 2 * time.Second

var storeUpDesc = prometheus.NewDesc("holdfast_store_up",
	"1 when the lock store answered a ping at this scrape, 0 when it failed or took longer than "+storeUpTimeout.String()+".", nil, nil)

// storeUpCollector pings the store at each scrape, so the value is never
// older than the scrape.
type storeUpCollector struct {
	timeout time.Duration
	// ping is the Manager's, set by New; until then nothing is reported.
	ping atomic.Pointer[func(context.Context) error]
}

func (c *storeUpCollector) watch(ping func(context.Context) error) { c.ping.Store(&ping) }

func (c *storeUpCollector) Describe(ch chan<- *prometheus.Desc) { ch <- storeUpDesc }

func (c *storeUpCollector) Collect(ch chan<- prometheus.Metric) {
	ping := c.ping.Load()
	if ping == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	up := 0.0
	if (*ping)(ctx) == nil {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(storeUpDesc, prometheus.GaugeValue, up)
}

// Registry is where further collectors (a store's, say) may register.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// ObserveCommit implements holdfast.CommitObserver.
func (m *Metrics) ObserveCommit(ops int, d time.Duration) {
	m.commitOps.Observe(float64(ops))
	m.commitDuration.Observe(d.Seconds())
}

// Observe implements holdfast.Observer.
func (m *Metrics) Observe(op string, d time.Duration, err error) {
	outcome := "ok"
	switch {
	case callerGone(err):
		outcome = "canceled"
	case err != nil:
		_, outcome = classify(err)
	}
	s := m.opSeries.get(opLabels{op, outcome}, func() opMetrics {
		return opMetrics{count: m.operations.WithLabelValues(op, outcome), duration: m.opDuration.WithLabelValues(op)}
	})
	s.count.Inc()
	s.duration.Observe(d.Seconds())
}

func (m *Metrics) observeRequest(route, method string, status int, d time.Duration) {
	if !knownMethod(method) {
		method = "other"
	}
	s := m.requestSeries.get(requestLabels{route, method, status}, func() requestMetrics {
		s := requestMetrics{count: m.requests.WithLabelValues(route, method, strconv.Itoa(status))}
		if route != "/v1/events" {
			s.duration = m.requestDuration.WithLabelValues(route, method)
		}
		return s
	})
	s.count.Inc()
	if s.duration != nil {
		s.duration.Observe(d.Seconds())
	}
}

// knownMethod keeps made-up methods from growing the label space.
func knownMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return true
	}
	return false
}

func (m *Metrics) serveHTTP(w http.ResponseWriter, r *http.Request) {
	m.handler.ServeHTTP(w, r)
}
