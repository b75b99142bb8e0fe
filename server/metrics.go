package server

import (
	"net/http"
	"strconv"
	"sync"
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
// Go runtime and process collectors.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		registry: reg,
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
	reg.MustRegister(m.requests, m.requestDuration, m.operations, m.opDuration, m.commitOps, m.commitDuration, m.streams,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return m
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
